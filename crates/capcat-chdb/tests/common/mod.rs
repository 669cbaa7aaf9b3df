//! Shared helpers of the live tests: the skip-or-fail rule and process
//! isolation.
//!
//! libchdb serves one data path per process, and a test harness may run
//! every test in one process (`cargo test`) or each in its own (`cargo
//! nextest`). So every live test runs its body in a child process of its
//! own: the test binary re-executed on exactly that test, marked by an
//! environment variable. That also gives the tests that need a second
//! process a natural way to spawn one.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::Command;

/// The environment variable that marks a child: its value is the test name.
pub const ISOLATED: &str = "CAPCAT_CHDB_ISOLATED";

/// `CAPCAT_LIBCHDB`, or `None` after printing that the test skipped.
/// With `CAPCAT_REQUIRE_ENGINES=1` a missing engine fails the test instead.
pub fn libchdb_or_skip(test: &str) -> Option<PathBuf> {
    match std::env::var_os("CAPCAT_LIBCHDB") {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "CAPCAT_LIBCHDB={} does not exist (run `cargo xtask fetch-engine`)",
                path.display()
            );
            Some(path)
        }
        None if std::env::var("CAPCAT_REQUIRE_ENGINES").as_deref() == Ok("1") => {
            panic!("{test}: CAPCAT_LIBCHDB is not set and CAPCAT_REQUIRE_ENGINES=1")
        }
        None => {
            println!("{test}: skipped (CAPCAT_LIBCHDB is not set)");
            None
        }
    }
}

/// Runs `body` in a process of its own (see the module docs). `name` must be
/// the test function's name in its test binary.
pub fn isolated(name: &str, body: impl FnOnce()) {
    if libchdb_or_skip(name).is_none() {
        return;
    }
    if std::env::var(ISOLATED).as_deref() == Ok(name) {
        body();
        return;
    }
    let output = Command::new(std::env::current_exe().expect("the test binary's path"))
        .args([
            name,
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .env(ISOLATED, name)
        .output()
        .expect("re-execute the test binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("--- child stdout ---\n{stdout}\n--- child stderr ---\n{stderr}");
    assert!(
        output.status.success(),
        "{name}: child process failed: {}",
        output.status
    );
    // A filter that matched nothing would pass vacuously.
    assert!(
        stdout.contains("1 passed"),
        "{name}: the child did not run exactly this test"
    );
}

/// A fresh temporary directory for a data path.
pub fn temp_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("create a temporary directory")
}
