//! `conform`: the conformance kit against the Python implementation of the
//! protocol (`tests/conform-python`, with pytest): the second, independent
//! implementation that shows the kit is language-neutral
//! (docs/native-writers.md). The kit against the reference driver runs in
//! the nextest run (`capcat-conform`'s own tests).

use std::process::Command;

use crate::{Result, cache, golden};

/// Builds the kit and runs the Python implementation's pytest suite, which
/// runs the kit against it (and against a copy with one guard broken).
pub(crate) fn run() -> Result<()> {
    let root = cache::repo_root();
    cache::run(Command::new("cargo").current_dir(&root).args([
        "build",
        "--quiet",
        "-p",
        "capcat-conform",
        "--bins",
    ]))?;
    let kit = cache::target_dir().join("debug").join("capcat-conform");
    let python = golden::ensure_venv()?;
    let mut pytest = Command::new(&python);
    pytest
        .current_dir(&root)
        .args(["-m", "pytest", "-q", "tests/conform-python"])
        .env("CAPCAT_CONFORM_BIN", &kit);
    cache::run(&mut pytest).map_err(|e| {
        format!(
            "the Python implementation's conformance tests failed ({e}); the kit's report \
             above names the case and the first difference"
        )
        .into()
    })
}
