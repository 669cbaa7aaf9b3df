//! `python`: the `capcat` Python package's tests. Builds the wheel from
//! source with maturin (crates/capcat-py, a debug build, sharing the
//! workspace's target directory), installs it into the cached venv, and
//! runs its pytest suite against the real engines: libchdb for the
//! catalog, the S3 test server for the S3 store, and the `capcat` binary
//! for the kill test's `capcat drain`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, cache, engine, golden, s3_server};

/// Builds, installs and tests the Python package; the kill test's `capcat
/// drain` runs `capcat`. Extra arguments go to pytest (`-k NAME`, `-x`).
pub(crate) fn run(extra: &[String], capcat: &Path) -> Result<()> {
    let root = cache::repo_root();
    let libchdb = engine::ensure_libchdb()?;
    let s3_server = s3_server::ensure_binary()?;
    let target = cache::target_dir();
    let python = golden::ensure_venv()?;
    let wheel = build_wheel(&root, &python, &target.join("python-wheel"))?;
    golden::pip_install(
        &python,
        &["--force-reinstall", "--no-deps"],
        &[wheel.as_os_str()],
    )
    .map_err(|e| format!("cannot install {} into the venv: {e}", wheel.display()))?;
    let mut pytest = Command::new(&python);
    pytest
        .current_dir(&root)
        .args(["-m", "pytest", "-q", "crates/capcat-py/tests"])
        .args(extra)
        .env("CAPCAT_LIBCHDB", &libchdb)
        .env("CAPCAT_S3_SERVER_BIN", &s3_server)
        .env("CAPCAT_BIN", capcat)
        .env("CAPCAT_REQUIRE_ENGINES", "1");
    cache::run(&mut pytest).map_err(|e| {
        format!("the Python package's tests failed ({e}); pytest's report is above").into()
    })
}

/// Builds the wheel into `out` (emptied first, so the one wheel in it is
/// this build's) and returns its path.
fn build_wheel(root: &Path, python: &Path, out: &Path) -> Result<PathBuf> {
    let _absent = std::fs::remove_dir_all(out);
    cache::run(
        Command::new(python)
            .current_dir(root)
            .args([
                "-m",
                "maturin",
                "build",
                "--quiet",
                "-m",
                "crates/capcat-py/Cargo.toml",
                "--out",
            ])
            .arg(out),
    )
    .map_err(|e| format!("maturin could not build the capcat wheel: {e}"))?;
    let wheels: Vec<PathBuf> = std::fs::read_dir(out)
        .map_err(|e| format!("cannot list {}: {e}", out.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.as_slice() {
        [wheel] => Ok(wheel.clone()),
        other => Err(format!(
            "expected one wheel in {}, found {}",
            out.display(),
            other.len()
        )
        .into()),
    }
}
