//! Finding libchdb, and fetching it when absent: the same steps as
//! `cargo xtask fetch-engine` (xtask/src/engine.rs), with the same pin
//! (`capcat_chdb::pin`), so `capcat demo` and the Python package work on a
//! machine where nobody ran xtask.

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

// The pin (package, version, tarball name, SHA-256, member) is written once,
// in capcat-chdb's `pin` module; capcat-clickhouse re-exports it.
use capcat_clickhouse::libchdb_pin::{MEMBER, PACKAGE, TARBALL, TARBALL_SHA256, VERSION};

/// Why the engine could not be found or fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// Neither `$CAPCAT_CACHE_DIR` nor `$HOME` is set.
    #[error("no cache directory: set CAPCAT_CACHE_DIR or HOME")]
    NoCache,
    /// A file operation or a command failed.
    #[error("{0}")]
    Step(String),
}

fn cache_dir() -> Result<PathBuf, FetchError> {
    if let Some(dir) = std::env::var_os("CAPCAT_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").ok_or(FetchError::NoCache)?;
    Ok(PathBuf::from(home).join(".cache").join("capcat"))
}

/// The path of libchdb: `$CAPCAT_LIBCHDB` when it names a file, else the
/// cache, fetched into it (with `npm pack` and the pinned SHA-256) when absent.
///
/// # Errors
/// npm missing or failing, a checksum mismatch, a file operation failing.
pub fn ensure_libchdb() -> Result<PathBuf, FetchError> {
    if let Some(path) = std::env::var_os("CAPCAT_LIBCHDB") {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        tracing::warn!(
            "CAPCAT_LIBCHDB={} does not exist; using the cache",
            path.display()
        );
    }
    let dir = cache_dir()?.join("libchdb").join(VERSION);
    let target = dir.join("libchdb.so");
    if target.is_file() {
        return Ok(target);
    }
    // A warning, so the default filter shows it: a 180 MB download is
    // something the user should hear about before it starts.
    tracing::warn!(
        "the embedded ClickHouse engine (libchdb {VERSION}) is not in {}; \
         fetching it with `npm pack {PACKAGE}@{VERSION}` (about 180 MB, once)",
        dir.display()
    );
    fs::create_dir_all(&dir)
        .map_err(|e| FetchError::Step(format!("cannot create {}: {e}", dir.display())))?;
    let work = dir.join(format!("fetch-{}", std::process::id()));
    let _ignored = fs::remove_dir_all(&work);
    fs::create_dir_all(&work)
        .map_err(|e| FetchError::Step(format!("cannot create {}: {e}", work.display())))?;
    let result = fetch_in(&work, &target);
    let _ignored = fs::remove_dir_all(&work);
    result.map(|()| target)
}

fn fetch_in(work: &Path, target: &Path) -> Result<(), FetchError> {
    let spec = format!("{PACKAGE}@{VERSION}");
    let status = Command::new("npm")
        .args(["pack", &spec, "--loglevel=warn"])
        .current_dir(work)
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| {
            FetchError::Step(format!(
                "cannot run npm ({e}); install Node.js/npm, or download {spec} yourself and set \
                 CAPCAT_LIBCHDB to its package/libchdb.so"
            ))
        })?;
    if !status.success() {
        return Err(FetchError::Step(format!(
            "`npm pack {spec}` failed: {status}"
        )));
    }
    let tarball = work.join(TARBALL);
    let actual = sha256_file(&tarball)?;
    if actual != TARBALL_SHA256 {
        return Err(FetchError::Step(format!(
            "{TARBALL}: SHA-256 {actual} does not match the pinned {TARBALL_SHA256}; refusing it"
        )));
    }
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg(MEMBER)
        .current_dir(work)
        .status()
        .map_err(|e| FetchError::Step(format!("cannot run tar: {e}")))?;
    if !status.success() {
        return Err(FetchError::Step(format!("tar failed: {status}")));
    }
    fs::rename(work.join(MEMBER), target).map_err(|e| {
        FetchError::Step(format!(
            "cannot move libchdb.so into {}: {e}",
            target.display()
        ))
    })?;
    tracing::warn!("libchdb {VERSION} is at {}", target.display());
    Ok(())
}

fn sha256_file(path: &Path) -> Result<String, FetchError> {
    let mut file = fs::File::open(path)
        .map_err(|e| FetchError::Step(format!("cannot open {}: {e}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0_u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| FetchError::Step(format!("cannot read {}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}
