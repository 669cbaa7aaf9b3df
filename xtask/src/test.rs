//! `test`: the README's test command. Fetches the engines, builds the test
//! servers, and runs every suite with them required, so that a missing engine
//! fails the run instead of silently skipping the tests that need it (the
//! trace replay, `capcat-tests --test replay`, among them, and the check that
//! the trace corpus is up to date, `capcat-tests --test corpus`). The
//! architecture lint runs first: it takes a second and needs no engine.

use std::process::Command;

use crate::{
    Result, cache, conform, engine, golden, lint_arch, python, s3_server, spec, test_binaries,
};

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

    // Every crate's unit, property, model and live tests. The fragments'
    // differential test, the longest engine test (402 s at its default of
    // 2,000 generated states in a 51-minute CI run), checks 1,000 states
    // here after its named edge cases, which alone catch every one-token
    // edit docs/model-checking.md lists; a deeper run is
    // `CAPCAT_FRAGMENT_STATES=20000 cargo nextest run -p capcat-clickhouse
    // --test fragments_live`.
    let mut nextest = Command::new("cargo");
    nextest.args(NEXTEST_CI).args(extra);
    nextest.env("CAPCAT_FRAGMENT_STATES", CI_FRAGMENT_STATES);
    with_engines(&mut nextest);
    cache::run(&mut nextest)?;

    // The catalog suite and the fragments' differential test once more
    // through the ClickHouse-HTTP front, so the `clickhouse` crate's code
    // path (its parameter binding among it) runs against the same engine.
    // The fragments' meaning was checked over 1,000 generated states by the
    // embedded run above; this pass checks the transport, which every state
    // exercises alike, so a few hundred states (and every named edge case)
    // are enough and save about five minutes.
    let mut over_http = catalog_pass(
        "http",
        "package(capcat-clickhouse) and (binary(live) or binary(fragments_live))",
    );
    over_http.env("CAPCAT_FRAGMENT_STATES", "300");
    with_engines(&mut over_http);
    cache::run(&mut over_http)?;

    // The catalog suite once more over TLS with a password: the same front
    // serving a certificate made for the run, the client trusting its CA
    // through `ca_file` and logging in (docs/security.md). The fragments'
    // test is left out: the pass above already ran it over HTTP, and TLS
    // changes the connector, not what a statement means.
    let mut over_https = catalog_pass("https", "package(capcat-clickhouse) and binary(live)");
    with_engines(&mut over_https);
    cache::run(&mut over_https)?;

    // Doc tests: nextest does not run them.
    let mut doc = Command::new("cargo");
    doc.args(["test", "--workspace", "--doc", "--quiet"]);
    with_engines(&mut doc);
    cache::run(&mut doc)?;

    spec::check()?;
    golden::check_python()?;
    // The binaries the nextest run built, not a `-p` build of each (see
    // test_binaries.rs).
    let binaries = test_binaries::build()?;
    conform::run(&binaries.conform)?;
    python::run(&[], &binaries.capcat)?;
    // The trace corpus the replay runs is checked inside the nextest run
    // above (capcat-tests' `corpus` tests, one per file): each export is a
    // breadth-first search, and as tests they overlap with the engine
    // tests' waits instead of running alone after them (513 s as a step of
    // its own in CI). `cargo xtask corpus --check` still compares the whole
    // tree on demand.
    eprintln!("xtask test: every suite passed");
    Ok(())
}

/// Generated states of the fragments' differential test in the embedded
/// run (its own default, for a run by hand, is 2,000).
const CI_FRAGMENT_STATES: &str = "1000";

/// `cargo nextest run` over the whole workspace with the CI profile.
const NEXTEST_CI: [&str; 5] = ["nextest", "run", "--workspace", "--profile", "ci"];

/// `cargo nextest run` of the tests `filter` selects, with the catalog
/// suite's target set to `transport` (`CAPCAT_CATALOG_TRANSPORT`).
///
/// Selected by a filter over the workspace build rather than by `-p
/// capcat-clickhouse`: cargo resolves features per selection, so a `-p`
/// build recompiles the crates whose features differ (88 s in CI) instead
/// of reusing the suite's binaries.
fn catalog_pass(transport: &str, filter: &str) -> Command {
    let mut command = Command::new("cargo");
    command
        .args(NEXTEST_CI)
        .args(["-E", filter])
        .env("CAPCAT_CATALOG_TRANSPORT", transport);
    command
}
