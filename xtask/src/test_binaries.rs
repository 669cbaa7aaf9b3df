//! The `capcat` and `capcat-conform` binaries as the workspace's test build
//! makes them, for the suites that run them after the nextest run (the
//! Python package's and the conformance kit's).
//!
//! They are taken from `cargo test --workspace --no-run`, the build nextest
//! itself runs, and not from a `cargo build -p <package>`: cargo resolves
//! features per selection, so a `-p` build compiles the dependency tree a
//! second time with other features (4.5 minutes in a CI run on a clean
//! checkout, 2026-12-07). Right after the nextest run the test build is
//! fresh and this takes under a second; on its own it builds what the test
//! build lacks.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::{Result, cache};

/// Paths of the binaries the suites after the nextest run need.
pub(crate) struct Binaries {
    /// The `capcat` command (capcat-cli).
    pub(crate) capcat: PathBuf,
    /// The conformance kit, `capcat-conform`.
    pub(crate) conform: PathBuf,
}

/// Builds (or finds fresh) the workspace's test build and returns the two
/// binaries' paths, as cargo reports them.
pub(crate) fn build() -> Result<Binaries> {
    let mut command = Command::new("cargo");
    command
        .current_dir(cache::repo_root())
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--quiet",
            "--message-format",
            "json-render-diagnostics",
        ])
        .stderr(Stdio::inherit());
    eprintln!("xtask: running {command:?}");
    let output = command
        .output()
        .map_err(|e| format!("cannot start {command:?}: {e}"))?;
    if !output.status.success() {
        return Err(format!("{command:?} failed: {}", output.status).into());
    }
    let messages = String::from_utf8_lossy(&output.stdout);
    Ok(Binaries {
        capcat: executable(&messages, "capcat")?,
        conform: executable(&messages, "capcat-conform")?,
    })
}

/// The executable of bin target `name` (not its unit-test harness, which
/// has the same name) in cargo's JSON messages, one per line.
fn executable(messages: &str, name: &str) -> Result<PathBuf> {
    let found = messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find_map(|message| {
            let is_artifact = message["reason"] == "compiler-artifact";
            let target = &message["target"];
            let is_bin = target["name"] == name
                && target["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|k| k == "bin"));
            let is_harness = message["profile"]["test"] == true;
            if is_artifact && is_bin && !is_harness {
                message["executable"].as_str().map(PathBuf::from)
            } else {
                None
            }
        });
    found.ok_or_else(|| {
        format!(
            "the workspace's test build reported no `{name}` binary (cargo builds a \
             package's binaries for its integration tests; does its tests/ directory \
             still exist?)"
        )
        .into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two messages of a real `cargo test --no-run` (trimmed): the unit-test
    /// harness of the bin target, then the binary itself.
    const MESSAGES: &str = r#"{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"capcat"},"profile":{"test":true},"executable":"/t/debug/deps/capcat-1111"}
not json: a line cargo would not write, skipped
{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"capcat"},"profile":{"test":false},"executable":null}
{"reason":"compiler-artifact","target":{"kind":["bin"],"name":"capcat"},"profile":{"test":false},"executable":"/t/debug/deps/capcat-2222"}
{"reason":"build-finished","success":true}"#;

    #[test]
    fn the_binary_is_found_and_not_its_test_harness() {
        assert_eq!(
            executable(MESSAGES, "capcat").expect("found"),
            PathBuf::from("/t/debug/deps/capcat-2222")
        );
    }

    #[test]
    fn a_binary_the_build_did_not_report_is_an_error_naming_it() {
        let error = executable(MESSAGES, "capcat-conform").expect_err("absent");
        assert!(error.to_string().contains("`capcat-conform`"), "{error}");
    }
}
