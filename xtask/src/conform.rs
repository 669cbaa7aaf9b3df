//! `conform`: the conformance kit against the Python implementation of the
//! protocol (`tests/conform-python`, with pytest): the second, independent
//! implementation that shows the kit is language-neutral
//! (docs/native-writers.md). The kit against the reference driver runs in
//! the nextest run (`capcat-conform`'s own tests).

use std::path::Path;
use std::process::Command;

use crate::{Result, cache, golden};

/// Runs the Python implementation's pytest suite with the kit `kit`; the
/// suite runs the kit against it (and against a copy with one guard broken).
pub(crate) fn run(kit: &Path) -> Result<()> {
    let root = cache::repo_root();
    let python = golden::ensure_venv()?;
    let mut pytest = Command::new(&python);
    pytest
        .current_dir(&root)
        .args(["-m", "pytest", "-q", "tests/conform-python"])
        .env("CAPCAT_CONFORM_BIN", kit);
    cache::run(&mut pytest).map_err(|e| {
        format!(
            "the Python implementation's conformance tests failed ({e}); the kit's report \
             above names the case and the first difference"
        )
        .into()
    })
}
