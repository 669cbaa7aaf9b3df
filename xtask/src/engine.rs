//! `fetch-engine`: libchdb from the npm registry into the cache.
//!
//! The npm package `@chdb/lib-linux-x64-gnu` is the only place chDB publishes
//! its C library as a versioned, immutable artifact. We fetch the tarball with
//! `npm pack` (so npm's own registry configuration, proxy and cache apply),
//! check it against the SHA-256 pinned in `capcat_chdb::pin` (npm's
//! integrity field only proves the registry served what it indexed, not that
//! it is the build we tested), and unpack only `package/libchdb.so`.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::{Result, cache};

// The pin (package, version, tarball name, SHA-256, member) is written once,
// in capcat-chdb's `pin` module, which also names the cache directory
// capcat-chdb loads the library from.
use capcat_chdb::pin::{MEMBER, PACKAGE, TARBALL, TARBALL_SHA256, VERSION};

/// Returns the path of a verified `libchdb.so`, fetching it when absent.
///
/// Order: `$CAPCAT_LIBCHDB` when it names an existing file (an operator's
/// override wins, and is not re-verified: it may be a local build), then the
/// cache at `<cache>/libchdb/<version>/libchdb.so`, then a fresh download.
pub(crate) fn ensure_libchdb() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("CAPCAT_LIBCHDB") {
        let path = PathBuf::from(path);
        if path.is_file() {
            eprintln!("xtask: using CAPCAT_LIBCHDB={}", path.display());
            return Ok(path);
        }
        eprintln!(
            "xtask: CAPCAT_LIBCHDB={} does not exist; using the cache instead",
            path.display()
        );
    }
    let dir = cache::dir()?.join("libchdb").join(VERSION);
    let target = dir.join("libchdb.so");
    if target.is_file() {
        eprintln!("xtask: libchdb {VERSION} already in the cache");
        return Ok(target);
    }
    fetch_into(&dir, &target)?;
    Ok(target)
}

/// Downloads, verifies and unpacks the library into `target`.
///
/// Everything happens in a temporary directory beside `target` and the
/// library arrives with one `rename`, so an interrupted fetch never leaves a
/// half-written `libchdb.so` that a later run would trust.
fn fetch_into(dir: &Path, target: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    remove_stale_fetches(dir);
    let work = dir.join(format!("fetch-{}", std::process::id()));
    // A leftover from a crashed run with the same pid is garbage; start clean.
    let _ignored = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let result = fetch_in(&work, target);
    if let Err(e) = fs::remove_dir_all(&work) {
        eprintln!("xtask: could not remove {}: {e}", work.display());
    }
    result
}

/// Removes `fetch-*` work directories of interrupted runs (each can hold
/// 750 MB). Only those untouched for an hour: a younger one may belong to a
/// fetch running in parallel.
fn remove_stale_fetches(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let hour = std::time::Duration::from_secs(3600);
    for entry in entries.flatten() {
        let stale = entry.file_name().to_string_lossy().starts_with("fetch-")
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|modified| modified.elapsed().ok())
                .is_some_and(|age| age > hour);
        if stale {
            eprintln!("xtask: removing the stale {}", entry.path().display());
            if let Err(e) = fs::remove_dir_all(entry.path()) {
                eprintln!("xtask: could not remove {}: {e}", entry.path().display());
            }
        }
    }
}

fn fetch_in(work: &Path, target: &Path) -> Result<()> {
    eprintln!("xtask: downloading {PACKAGE}@{VERSION} with npm pack (about 180 MB)...");
    let spec = format!("{PACKAGE}@{VERSION}");
    let mut npm = Command::new("npm");
    // npm prints the tarball's name on stdout; our stdout carries only the
    // final path (scripts capture it), so npm's goes to stderr with the progress.
    npm.args(["pack", &spec, "--loglevel=warn"])
        .current_dir(work)
        .stdout(std::io::stderr());
    match npm.status() {
        Ok(status) if status.success() => {}
        Ok(status) => return Err(format!("`npm pack {spec}` failed: {status}").into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "npm is not installed or not on PATH; install Node.js/npm, or download \
                 {spec} yourself and set CAPCAT_LIBCHDB to its package/libchdb.so"
            )
            .into());
        }
        Err(e) => return Err(format!("cannot start npm: {e}").into()),
    }
    let tarball = work.join(TARBALL);
    eprintln!("xtask: verifying SHA-256 of {TARBALL}...");
    let actual = sha256_file(&tarball)?;
    if actual != TARBALL_SHA256 {
        return Err(format!(
            "{TARBALL}: SHA-256 {actual} does not match the pinned {TARBALL_SHA256}; \
             refusing to use it"
        )
        .into());
    }
    eprintln!("xtask: unpacking {MEMBER}...");
    cache::run(
        Command::new("tar")
            .arg("-xzf")
            .arg(&tarball)
            .arg(MEMBER)
            .current_dir(work),
    )?;
    let unpacked = work.join(MEMBER);
    fs::rename(&unpacked, target).map_err(|e| {
        format!(
            "cannot move {} to {}: {e}",
            unpacked.display(),
            target.display()
        )
    })?;
    eprintln!("xtask: libchdb {VERSION} is at {}", target.display());
    Ok(())
}

/// Hex SHA-256 of a file, streamed so a 180 MB tarball is not held in memory.
fn sha256_file(path: &Path) -> Result<String> {
    let mut file =
        fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0_u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex_lower(&hasher.finalize()))
}

fn hex_lower(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_file_matches_a_known_vector() {
        let dir = tempdir();
        let path = dir.join("abc");
        fs::write(&path, b"abc").expect("write a temp file");
        assert_eq!(
            sha256_file(&path).expect("hash"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        fs::remove_dir_all(dir).expect("clean up");
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-engine-test-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("create a temp dir");
        dir
    }
}
