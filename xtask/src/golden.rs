//! `check-golden`: open the golden pack from Python and compare with its manifest.
//!
//! This is the cross-language half of the golden test: the Rust test proves
//! this build reproduces `tests/data/golden/` byte for byte; this chore
//! proves that the Python safetensors ecosystem opens the same pack and sees
//! the tensors the manifest describes. The interpreter lives in a venv in
//! the cache directory, created on first use and reused after.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, cache};

/// The packages the check script imports; pytest, which runs the Python
/// implementation of the protocol under the conformance kit (`cargo xtask
/// conform`) and the Python package's tests (`cargo xtask python`); and
/// what those need: maturin builds the package's wheel, ml_dtypes is its
/// dependency (numpy's bfloat16).
const PACKAGES: [&str; 5] = ["safetensors", "numpy", "pytest", "maturin", "ml_dtypes"];

/// Written into the venv after `pip install` succeeded, so a venv left half
/// built by an interrupted run is rebuilt rather than trusted.
/// Its name changes with [`PACKAGES`], so a venv built for an older list is
/// rebuilt.
const READY_MARKER: &str = ".capcat-golden-ready-pytest-maturin";

/// Runs the Python cross-check of `tests/data/golden/`.
pub(crate) fn check_python() -> Result<()> {
    let golden = cache::repo_root().join("tests").join("data").join("golden");
    let script = golden.join("check_golden.py");
    if !script.is_file() {
        return Err(format!("the golden check script {} is missing", script.display()).into());
    }
    let python = ensure_venv()?;
    let mut check = Command::new(&python);
    check.arg(&script).arg(&golden);
    cache::run(&mut check).map_err(|e| {
        format!(
            "the Python golden check failed ({e}); the lines above name the record and field. \
             If the pack or manifest changed on purpose, regenerate them with \
             `CAPCAT_BLESS_GOLDEN=1 cargo test -p capcat-pack --test golden`"
        )
        .into()
    })
}

/// The venv's interpreter, creating the venv and installing [`PACKAGES`]
/// when the ready marker is absent.
pub(crate) fn ensure_venv() -> Result<PathBuf> {
    let venv = cache::dir()?.join("golden-venv");
    let python = venv.join("bin").join("python");
    if venv.join(READY_MARKER).is_file() && python.is_file() {
        return Ok(python);
    }
    std::fs::create_dir_all(venv.parent().unwrap_or(Path::new("."))).map_err(|e| {
        format!(
            "cannot create the cache directory for {}: {e}",
            venv.display()
        )
    })?;
    let system_python = system_python()?;
    cache::run(
        Command::new(&system_python)
            .args(["-m", "venv", "--clear"])
            .arg(&venv),
    )
    .map_err(|e| {
        format!(
            "cannot create a Python venv at {} with {system_python} ({e}); \
                 install the venv module (e.g. `apt-get install python3-venv`)",
            venv.display()
        )
    })?;
    pip_install(&python, &[], &PACKAGES.map(std::ffi::OsStr::new)).map_err(|e| {
        format!(
            "cannot pip install {} into {} ({e}); the check needs access to a Python \
             package index",
            PACKAGES.join(" "),
            venv.display()
        )
    })?;
    std::fs::write(venv.join(READY_MARKER), PACKAGES.join("\n"))
        .map_err(|e| format!("cannot write the venv ready marker: {e}"))?;
    Ok(python)
}

/// The first of `python3` and `python` that runs.
fn system_python() -> Result<String> {
    ["python3", "python"]
        .into_iter()
        .find(|candidate| {
            Command::new(candidate)
                .arg("--version")
                .output()
                .is_ok_and(|out| out.status.success())
        })
        .map(str::to_owned)
        .ok_or_else(|| "no Python interpreter: neither `python3` nor `python` runs".into())
}

/// `pip install` quietly into the venv of `python`: `options`, then the
/// packages or wheel files `targets`.
pub(crate) fn pip_install(
    python: &Path,
    options: &[&str],
    targets: &[&std::ffi::OsStr],
) -> Result<()> {
    cache::run(
        Command::new(python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--quiet",
            ])
            .args(options)
            .args(targets),
    )
}
