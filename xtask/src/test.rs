//! `test`: the README's test command. Fetches the engines, builds the test
//! servers, and runs every suite with them required, so that a missing engine
//! fails the run instead of silently skipping the tests that need it (the
//! trace replay, `capcat-tests --test replay`, among them), then checks that
//! the trace corpus is up to date. The architecture lint runs first: it takes
//! a second and needs no engine.

use std::process::Command;

use crate::{Result, cache, corpus, engine, golden, lint_arch, s3_server, spec};

/// Runs the whole test suite. Extra arguments go to `cargo nextest run`.
pub(crate) fn run(extra: &[String]) -> Result<()> {
    // The crate layering and the designs module's boundary (ARCHITECTURE.md).
    lint_arch::run()?;
    let root = cache::repo_root();
    let libchdb = engine::ensure_libchdb()?;
    let s3_server = s3_server::ensure_binary()?;

    let with_engines = |command: &mut Command| {
        command
            .current_dir(&root)
            .env("CAPCAT_LIBCHDB", &libchdb)
            .env("CAPCAT_S3_SERVER_BIN", &s3_server)
            .env("CAPCAT_REQUIRE_ENGINES", "1");
    };

    // Every crate's unit, property, model and live tests.
    let mut nextest = Command::new("cargo");
    nextest
        .args(["nextest", "run", "--workspace", "--profile", "ci"])
        .args(extra);
    with_engines(&mut nextest);
    cache::run(&mut nextest)?;

    // The catalog suite and the fragments' differential test once more
    // through the ClickHouse-HTTP front, so the `clickhouse` crate's code
    // path (its parameter binding among it) runs against the same engine.
    // The fragments' meaning was checked over 2,000 generated states by the
    // embedded run above; this pass checks the transport, which every state
    // exercises alike, so a few hundred states (and every named edge case)
    // are enough and save about five minutes.
    let mut over_http = Command::new("cargo");
    over_http
        // Selected by a filter over the workspace build rather than by
        // `-p capcat-clickhouse`: cargo resolves features per selection, so
        // a `-p` build recompiles the crates whose features differ (88 s in
        // CI) instead of reusing the suite's binaries.
        .args([
            "nextest",
            "run",
            "--workspace",
            "--profile",
            "ci",
            "-E",
            "package(capcat-clickhouse) and (binary(live) or binary(fragments_live))",
        ])
        .env("CAPCAT_CATALOG_TRANSPORT", "http")
        .env("CAPCAT_FRAGMENT_STATES", "300");
    with_engines(&mut over_http);
    cache::run(&mut over_http)?;

    // Doc tests: nextest does not run them.
    let mut doc = Command::new("cargo");
    doc.args(["test", "--workspace", "--doc", "--quiet"]);
    with_engines(&mut doc);
    cache::run(&mut doc)?;

    spec::check()?;
    golden::check_python()?;
    // Last, so a stale corpus never hides a test result: the trace corpus
    // the replay runs must be what the model and capcat-proto export now
    // (one breadth-first search per rejected design: 513 s in the last CI
    // run, the suite's longest step after the tests themselves).
    corpus::run(&["--check".to_owned()])?;
    eprintln!("xtask test: every suite passed");
    Ok(())
}
