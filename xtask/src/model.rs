//! `model --deep`: the model configurations too large for `cargo test`, in a
//! release build of the checker, each printing its figures (states, unique
//! states, depth, seconds) as it finishes.
//!
//! `cargo test -p capcat-model-check` runs the CI set
//! (`ModelConfig::ci_set`: the CI configuration and the short-clock
//! hazards, passes that run again, a long lease); this chore runs the
//! hazards at 3 ticks, the passes and the long lease with a crash, and the
//! three-publisher configuration, which is the check
//! docs/model-checking.md records figures for. Late starts are on in all.

use std::process::Command;

use crate::{Result, cache};

/// The deep configurations: (what it is, the checker's arguments).
const DEEP: [(&str, &[&str]); 11] = [
    (
        "claim retries beside the reader, 3 ticks",
        &[
            "--attempts",
            "2,1,1",
            "--ticks",
            "3",
            "--crashes",
            "0",
            "--dfs",
        ],
    ),
    (
        "a stale holder releasing, 3 ticks",
        &["--release", "--ticks", "3", "--dfs"],
    ),
    (
        "holders re-acquiring, 3 ticks",
        &["--reacquire", "--ticks", "3", "--dfs"],
    ),
    (
        "one foreign row, 3 ticks",
        &["--foreign", "1", "--crashes", "0", "--ticks", "3", "--dfs"],
    ),
    (
        "crashes orphaning the INSERT about to be sent, 3 ticks",
        &["--crash-mid-statement", "--ticks", "3", "--dfs"],
    ),
    (
        "passes that run again, with a crash, 3 ticks",
        &["--passes", "3", "--ticks", "3", "--dfs"],
    ),
    (
        "a long lease, passes, a release and a crash, 4 ticks",
        &[
            "--ttl",
            "4",
            "--ticks",
            "4",
            "--passes",
            "3",
            "--release",
            "--dfs",
        ],
    ),
    (
        "late claims with claim retries, 2 ticks",
        &[
            "--late-claims",
            "--attempts",
            "2,1,1",
            "--crashes",
            "0",
            "--ticks",
            "2",
            "--dfs",
        ],
    ),
    (
        "late claims with a crash, 2 ticks",
        &["--late-claims", "--ticks", "2", "--dfs"],
    ),
    (
        "two manifest chunks, passes and a crash, 3 ticks",
        &["--packs", "2", "--passes", "2", "--ticks", "3", "--dfs"],
    ),
    (
        "three publishers, 2 ticks",
        &[
            "--publishers",
            "3",
            "--ticks",
            "2",
            "--dfs",
            "--threads",
            "2",
        ],
    ),
];

/// Runs the deep configurations (`--deep`), or lists them.
pub(crate) fn run(args: &[String]) -> Result<()> {
    let deep = args.iter().any(|a| a == "--deep");
    if !deep {
        eprintln!("xtask model: pass --deep to run these (release build, minutes each):");
        for (what, flags) in DEEP {
            eprintln!("  {what}: check Publication {}", flags.join(" "));
        }
        return Ok(());
    }
    let root = cache::repo_root();
    let mut build = Command::new("cargo");
    build
        .current_dir(&root)
        .args(["build", "--release", "-p", "capcat-model-check"]);
    cache::run(&mut build)?;
    let checker = root.join("target/release/capcat-model-check");
    for (i, (what, flags)) in DEEP.iter().enumerate() {
        eprintln!("xtask model: [{}/{}] {what}", i + 1, DEEP.len());
        let mut check = Command::new(&checker);
        check
            .current_dir(&root)
            .args(["check", "Publication"])
            .args(*flags);
        cache::run(&mut check)?;
    }
    eprintln!("xtask model: every deep configuration holds");
    Ok(())
}
