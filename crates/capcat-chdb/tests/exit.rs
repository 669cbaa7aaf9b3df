//! A process that used the engine exits cleanly, however it exits.
//!
//! The defect these guard against: a test binary whose engine lived in a
//! `static` (so was never dropped) passed every test and then died of SIGSEGV
//! in about half its runs, inside `exit()`: libchdb's C++ static destructors
//! ran while its background threads (`BgSchPool`) still used what they
//! destroy. Whether it happens depends on thread timing, so each case here
//! re-executes this binary as a child [`CHILDREN`] times, each child doing the
//! open/write/query pattern of the live tests and then exiting one way, and
//! asserts that every child exited with status 0 (a crash shows as a signal).

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;

use capcat_chdb::{Engine, Request};
use common::{libchdb_or_skip, temp_dir};

/// Children per exit shape. Before the fix about one child in two crashed,
/// so twenty clean exits in a row do not happen by luck.
const CHILDREN: usize = 20;
/// Children running at once: enough to keep the wall time down, few enough
/// not to starve a shared CI machine.
const AT_ONCE: usize = 4;

/// Names the exit shape a child takes; set only in children.
const MODE: &str = "CAPCAT_CHDB_EXIT_MODE";
/// The data path a child opens; set only in children.
const DATA: &str = "CAPCAT_CHDB_EXIT_DATA";
/// What a child prints once its statements succeeded, just before exiting.
const DONE: &str = "EXIT-CHILD-DONE";
/// Tables a child creates. Each MergeTree table adds tasks to libchdb's
/// background pools; with ten, the crash this file guards against hit one
/// exit in three or more before the fix (with three, one in ten).
const TABLES: usize = 10;

/// The statements of a live test in miniature: MergeTree tables (which give
/// libchdb's background pools work to schedule), inserts, and reads.
fn workload(engine: &Engine) {
    for index in 0..TABLES {
        let table = format!("t{index}");
        engine
            .execute(&Request::new(format!(
                "CREATE TABLE {table} (k UInt64, v String) \
                 ENGINE = ReplacingMergeTree ORDER BY k"
            )))
            .expect("create a table");
        for batch in 0..3u64 {
            engine
                .execute(
                    &Request::new(format!(
                        "INSERT INTO {table} SELECT number + {{b:UInt64}} * 10, toString(number) \
                         FROM numbers(10)"
                    ))
                    .param("b", batch.to_string()),
                )
                .expect("insert rows");
        }
        let count = engine
            .execute(&Request::new(format!("SELECT count() FROM {table} FINAL")))
            .expect("count rows");
        assert_eq!(count, b"30\n");
    }
}

/// The child side: what `mode` says, on the data path the parent chose.
/// Exits the process itself for the shapes that do so; returns otherwise.
fn child(mode: &str, data: &Path) {
    static HELD: OnceLock<Engine> = OnceLock::new();
    let engine = Engine::open(data).expect("open the engine");
    workload(&engine);
    println!("{DONE}");
    match mode {
        // How the live tests of capcat-proto hold their engine: in a static,
        // never dropped, alive while the process exits.
        "static" => {
            HELD.set(engine).expect("the child sets the static once");
        }
        // `std::process::exit` with a handle on the stack: no destructor runs.
        "process-exit" => std::process::exit(0),
        // A handle leaked on purpose (or by a cycle): never dropped either.
        "forget" => std::mem::forget(engine),
        // The tidy shape: the last handle dropped before the process exits.
        "drop" => drop(engine),
        other => panic!("unknown exit mode {other:?}"),
    }
}

/// Run only as a child of the tests below (marked by [`MODE`]).
#[test]
#[ignore = "run only as a child process by the exit tests of this file"]
fn exit_child() {
    let (Ok(mode), Some(data)) = (std::env::var(MODE), std::env::var_os(DATA)) else {
        return;
    };
    child(&mode, Path::new(&data));
}

fn spawn_child(mode: &str, data: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().expect("the test binary's path"))
        .args([
            "exit_child",
            "--exact",
            "--nocapture",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env(MODE, mode)
        .env(DATA, data)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn a child")
}

/// Runs [`CHILDREN`] children exiting the `mode` way and fails, listing
/// every failed child, unless each one finished its statements and exited 0.
fn every_child_exits_cleanly(test: &str, mode: &str) {
    if libchdb_or_skip(test).is_none() {
        return;
    }
    let mut failures = Vec::new();
    let mut finished = 0;
    for batch_start in (0..CHILDREN).step_by(AT_ONCE) {
        let batch: Vec<_> = (batch_start..CHILDREN.min(batch_start + AT_ONCE))
            .map(|index| {
                let dir = temp_dir(&format!("chdb-exit-{mode}-{index}-"));
                let child = spawn_child(mode, dir.path());
                (index, dir, child)
            })
            .collect();
        for (index, dir, child) in batch {
            let Output {
                status,
                stdout,
                stderr,
            } = child.wait_with_output().expect("wait for a child");
            drop(dir);
            let stdout = String::from_utf8_lossy(&stdout);
            finished += 1;
            if !status.success() || !stdout.contains(DONE) {
                let stderr = String::from_utf8_lossy(&stderr);
                let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
                failures.push(format!("child {index}: {status}; stderr tail: {tail}"));
            }
        }
    }
    assert_eq!(finished, CHILDREN, "every child ran");
    assert!(
        failures.is_empty(),
        "{mode}: {} of {CHILDREN} children did not exit cleanly:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn exit_is_clean_with_the_engine_in_a_static() {
    every_child_exits_cleanly("exit_is_clean_with_the_engine_in_a_static", "static");
}

#[test]
fn exit_is_clean_after_process_exit_with_a_live_handle() {
    every_child_exits_cleanly(
        "exit_is_clean_after_process_exit_with_a_live_handle",
        "process-exit",
    );
}

#[test]
fn exit_is_clean_with_a_leaked_handle() {
    every_child_exits_cleanly("exit_is_clean_with_a_leaked_handle", "forget");
}

#[test]
fn exit_is_clean_after_the_last_handle_is_dropped() {
    every_child_exits_cleanly("exit_is_clean_after_the_last_handle_is_dropped", "drop");
}
