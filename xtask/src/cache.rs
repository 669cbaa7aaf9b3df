//! The cache directory and small process helpers shared by the chores.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;

/// The cache directory: `$CAPCAT_CACHE_DIR`, else `~/.cache/capcat`.
///
/// Engines and built servers live here, outside the repository, so a clean
/// checkout never carries them and a warm machine does not fetch them twice.
pub(crate) fn dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("CAPCAT_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").ok_or("neither CAPCAT_CACHE_DIR nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache").join("capcat"))
}

/// The repository root (the parent of this crate's directory).
pub(crate) fn repo_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or_else(|| manifest_dir.to_path_buf(), Path::to_path_buf)
}

/// The workspace's target directory: `$CARGO_TARGET_DIR`, else `target/`
/// in the repository.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
}

/// Runs `command`, echoing it first, and fails with its exit status.
pub(crate) fn run(command: &mut Command) -> Result<()> {
    eprintln!("xtask: running {command:?}");
    let status = command
        .status()
        .map_err(|e| format!("cannot start {command:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{command:?} failed: {status}").into())
    }
}
