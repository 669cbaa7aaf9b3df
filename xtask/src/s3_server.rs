//! `build-s3-server`: the s3s-fs test server (with TCP_NODELAY) into the cache.
//!
//! The server is `tools/s3-test-server`, a standalone cargo project on the
//! s3s-fs library. Its binary goes to
//! `<cache>/bin/capcat-s3-test-server-<hash>`, where the hash covers the
//! project's Cargo.toml, Cargo.lock and sources: a warm cache reuses the
//! binary, and a changed wrapper gets a new name and so a rebuild.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, cache};

/// The project directory, relative to the repository root.
const TOOL_DIR: &str = "tools/s3-test-server";
/// The binary's name in the project.
const BINARY: &str = "capcat-s3-test-server";

/// Returns the path of the built test server, building it when absent.
pub(crate) fn ensure_binary() -> Result<PathBuf> {
    let tool = cache::repo_root().join(TOOL_DIR);
    let cache_dir = cache::dir()?;
    let hash = tool_hash(&tool)?;
    let bin_dir = cache_dir.join("bin");
    let target = bin_dir.join(format!("{BINARY}-{hash:016x}"));
    if target.is_file() {
        return Ok(target);
    }

    let target_dir = cache_dir.join("s3-test-server-target");
    let manifest = tool.join("Cargo.toml");
    let mut build = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    build
        .args(["build", "--release", "--locked", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target_dir)
        // The caller's target dir must not redirect this build away from
        // the cache.
        .env_remove("CARGO_TARGET_DIR");
    cache::run(&mut build)?;

    let built = target_dir.join("release").join(BINARY);
    fs::create_dir_all(&bin_dir)
        .map_err(|e| format!("cannot create {}: {e}", bin_dir.display()))?;
    // Copy to a temporary name and rename, so a concurrent run never sees a
    // half-written binary under the final name.
    let partial = bin_dir.join(format!(
        ".{BINARY}-{hash:016x}.{}.partial",
        std::process::id()
    ));
    fs::copy(&built, &partial).map_err(|e| {
        format!(
            "cannot copy {} to {}: {e}",
            built.display(),
            partial.display()
        )
    })?;
    fs::rename(&partial, &target).map_err(|e| {
        format!(
            "cannot rename {} to {}: {e}",
            partial.display(),
            target.display()
        )
    })?;
    Ok(target)
}

/// FNV-1a (64-bit) over the project's manifest, lock file and sources, each
/// preceded by its relative path, in sorted order. Not cryptographic: it only
/// has to change when the wrapper does.
fn tool_hash(tool: &Path) -> Result<u64> {
    let mut files = vec![tool.join("Cargo.toml"), tool.join("Cargo.lock")];
    let mut sources = Vec::new();
    collect_files(&tool.join("src"), &mut sources)?;
    sources.sort();
    files.extend(sources);

    let mut hash = Fnv1a::new();
    for file in &files {
        let relative = file.strip_prefix(tool).unwrap_or(file);
        hash.update(relative.to_string_lossy().as_bytes());
        hash.update(&[0]);
        let bytes = fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        hash.update(&(bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    Ok(hash.finish())
}

/// The regular files under `dir`, recursively (the tool's `src` is a few
/// files deep at most).
fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let path = entry.path();
        let file_type = entry
            .file_type()
            .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
        if file_type.is_dir() {
            collect_files(&path, out)?;
        } else if file_type.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// The 64-bit FNV-1a hash.
struct Fnv1a(u64);

impl Fnv1a {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;

    fn new() -> Self {
        Self(Self::OFFSET)
    }

    fn update(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Fnv1a;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        let hash = |bytes: &[u8]| {
            let mut h = Fnv1a::new();
            h.update(bytes);
            h.finish()
        };
        assert_eq!(hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
