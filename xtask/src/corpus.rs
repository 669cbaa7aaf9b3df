//! `corpus`: regenerate the model's trace corpus (`tests/corpus/`), or, with
//! `--check`, regenerate it into a temporary directory and fail if it
//! differs from the committed one (a change to the model or to capcat-proto's
//! SQL that changes a trace must come with the regenerated corpus).
//!
//! The export lives in capcat-tests (`capcat_tests::traces`, through the
//! model crate's public API); this chore runs its ignored regeneration test,
//! pointing it at the output directory with `CAPCAT_CORPUS_DIR`, so xtask
//! does not build the model checker itself.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{Result, cache};

/// The corpus, relative to the repository root.
const CORPUS: &str = "tests/corpus";
/// Files a corpus tree may hold, bounded so a wrong directory cannot make
/// the walk run away.
const MAX_FILES: usize = 10_000;

/// `cargo xtask corpus [--check]`.
pub(crate) fn run(args: &[String]) -> Result<()> {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        other => return Err(format!("corpus takes only `--check`, got {other:?}").into()),
    };
    let root = cache::repo_root();
    let committed = root.join(CORPUS);
    if !check {
        regenerate(&root, &committed)?;
        eprintln!(
            "xtask corpus: regenerated {}; review with `git diff --stat {CORPUS}`",
            committed.display()
        );
        return Ok(());
    }
    let fresh = std::env::temp_dir().join(format!("capcat-corpus-check-{}", std::process::id()));
    // A leftover from an earlier run with the same pid: start clean.
    let _ = std::fs::remove_dir_all(&fresh);
    let outcome = regenerate(&root, &fresh).and_then(|()| compare(&committed, &fresh));
    let _ = std::fs::remove_dir_all(&fresh);
    outcome
}

/// Runs the regeneration test with its output in `out`.
fn regenerate(root: &Path, out: &Path) -> Result<()> {
    let started = Instant::now();
    let mut command = Command::new("cargo");
    command
        .current_dir(root)
        .args([
            // `--workspace`, not `-p capcat-tests`: cargo resolves features
            // per selection, so a `-p` build has other feature sets than the
            // suite's workspace build and recompiles a dozen crates (about
            // 90 s in CI). Only capcat-tests has a `corpus` test target.
            "test",
            "--workspace",
            "--test",
            "corpus",
            "--",
            "--ignored",
            "--exact",
            "--nocapture",
            "regenerate_the_trace_corpus",
        ])
        .env("CAPCAT_CORPUS_DIR", out);
    // The export is one breadth-first search per rejected design (about
    // 8.5 minutes when CI still ran it as a step of its own): the test
    // prints a line per file as it goes.
    eprintln!(
        "xtask corpus: exporting the traces into {} (several minutes after the build: one breadth-first search per rejected design)",
        out.display()
    );
    cache::run(&mut command)?;
    eprintln!(
        "xtask corpus: exported the traces in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Every file under `dir`, relative to it.
fn files(dir: &Path) -> Result<BTreeSet<PathBuf>> {
    let mut out = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let path = entry.map_err(|e| format!("{}: {e}", d.display()))?.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(relative) = path.strip_prefix(dir) {
                out.insert(relative.to_path_buf());
            }
            if out.len() > MAX_FILES {
                return Err(format!("more than {MAX_FILES} files under {}", dir.display()).into());
            }
        }
    }
    Ok(out)
}

/// Fails, naming every file that differs, if `fresh` is not `committed`.
fn compare(committed: &Path, fresh: &Path) -> Result<()> {
    let old = files(committed)?;
    let new = files(fresh)?;
    let mut differ = Vec::new();
    for path in old.union(&new) {
        let a = std::fs::read(committed.join(path)).ok();
        let b = std::fs::read(fresh.join(path)).ok();
        match (a, b) {
            (Some(a), Some(b)) if a == b => {}
            (Some(_), Some(_)) => differ.push(format!("  changed: {CORPUS}/{}", path.display())),
            (Some(_), None) => {
                differ.push(format!("  no longer exported: {CORPUS}/{}", path.display()))
            }
            (None, _) => differ.push(format!("  new: {CORPUS}/{}", path.display())),
        }
    }
    if differ.is_empty() {
        eprintln!("xtask corpus --check: {} trace files up to date", old.len());
        return Ok(());
    }
    Err(format!(
        "the trace corpus is out of date with the model and capcat-proto's SQL:\n{}\n\
         regenerate it with `cargo xtask corpus` and commit {CORPUS}",
        differ.join("\n")
    )
    .into())
}
