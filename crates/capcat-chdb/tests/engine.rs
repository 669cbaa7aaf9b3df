//! Live tests of the embedded engine: every fact the project relies on
//! about libchdb (docs/embedded-engine.md), against the real
//! library (`CAPCAT_LIBCHDB`).

mod common;

use std::process::Command;
use std::sync::Barrier;
use std::time::Duration;

use capcat_chdb::{ChdbError, Engine, EngineOptions, Request};
use capcat_proto::statement::Param;
use common::{ISOLATED, isolated, temp_dir};
use uuid::Uuid;

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("utf-8 output")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

#[test]
fn params_bind_strings_with_quotes_and_arrays_of_tuples() {
    isolated(
        "params_bind_strings_with_quotes_and_arrays_of_tuples",
        || {
            let dir = temp_dir("chdb-params");
            let engine = Engine::open(dir.path()).expect("open");
            let nasty =
                "it's a \"quote\", a \\ backslash,\ta tab,\na newline, a \0 NUL and {braces}";
            let pack = Uuid::from_u128(0x6f1c_7e3a_0000_4000_8000_0000_0000_0001);
            let params = [
                ("s", Param::String(nasty.into())),
                ("n", Param::UInt64(u64::MAX)),
                ("i", Param::Int64(i64::MIN)),
                ("u", Param::Uuid(pack)),
                (
                    "a",
                    Param::Strings(vec![nasty.into(), String::new(), "'".into()]),
                ),
                (
                    "p",
                    Param::StorePacks(vec![(nasty.into(), pack), ("s2".into(), Uuid::nil())]),
                ),
            ];
            let mut request = Request::new(
                "SELECT hex({s:String}), {n:UInt64}, {i:Int64}, toString({u:UUID}), \
             arrayStringConcat(arrayMap(x -> hex(x), {a:Array(String)}), ','), \
             arrayStringConcat(arrayMap(t -> concat(hex(t.1), '/', toString(t.2)), \
                 {p:Array(Tuple(String, UUID))}), ',')",
            )
            .format("TabSeparated");
            for (name, value) in &params {
                request = request.param(*name, value.to_text());
            }
            let out = text(engine.execute(&request).expect("select with params"));
            let expected = format!(
                "{}\t{}\t{}\t{}\t{},,27\t{}/{},{}/{}\n",
                hex(nasty.as_bytes()),
                u64::MAX,
                i64::MIN,
                pack,
                hex(nasty.as_bytes()),
                hex(nasty.as_bytes()),
                pack,
                hex(b"s2"),
                Uuid::nil(),
            );
            assert_eq!(out, expected);
        },
    );
}

#[test]
fn the_shorthand_query_binds_params_and_format() {
    isolated("the_shorthand_query_binds_params_and_format", || {
        let dir = temp_dir("chdb-shorthand");
        let engine = Engine::open(dir.path()).expect("open");
        let out = engine
            .query("SELECT {x:UInt64} + 1 AS y", [("x", "41")], "JSONEachRow")
            .expect("query");
        assert_eq!(text(out), "{\"y\":42}\n");
    });
}

#[cfg(feature = "tokio")]
#[test]
fn execute_async_runs_on_the_blocking_pool() {
    isolated("execute_async_runs_on_the_blocking_pool", || {
        let dir = temp_dir("chdb-async");
        let engine = Engine::open(dir.path()).expect("open");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let out = runtime
            .block_on(engine.execute_async(Request::new("SELECT {x:String}").param("x", "a'b")))
            .expect("execute_async");
        assert_eq!(text(out), "a\\'b\n", "TabSeparated escapes the quote");
    });
}

#[test]
fn per_query_settings_apply_to_that_query_only() {
    isolated("per_query_settings_apply_to_that_query_only", || {
        let dir = temp_dir("chdb-settings");
        // One connection, so every statement sees what the previous left.
        let engine =
            Engine::open_with(dir.path(), EngineOptions::default().with_max_connections(1))
                .expect("open");
        let probe =
            "SELECT getSetting('max_execution_time'), getSetting('select_sequential_consistency')";
        let with = Request::new(probe)
            .max_execution_time_s(Some(7))
            .select_sequential_consistency(true);
        assert_eq!(
            text(engine.execute(&with).expect("with settings")),
            "7\t1\n"
        );
        let without = Request::new(probe);
        assert_eq!(
            text(engine.execute(&without).expect("without settings")),
            "0\t0\n"
        );
        assert_eq!(
            engine.stats().discarded,
            0,
            "settings are reset, not by reconnecting"
        );
    });
}

#[test]
fn compilation_is_off_on_every_connection_unless_asked_for() {
    isolated(
        "compilation_is_off_on_every_connection_unless_asked_for",
        || {
            let dir = temp_dir("chdb-jit");
            // One connection, so every statement sees what the previous left.
            let engine =
                Engine::open_with(dir.path(), EngineOptions::default().with_max_connections(1))
                    .expect("open");
            let probe = "SELECT getSetting('compile_expressions'), \
                     getSetting('compile_aggregate_expressions'), \
                     getSetting('compile_sort_description')";
            let off = "false\tfalse\tfalse\n";
            assert_eq!(
                text(engine.execute(&Request::new(probe)).expect("probe")),
                off
            );
            // A request may turn it on for itself; the next one is back to off.
            let on = Request::new(probe).setting("compile_expressions", "1");
            assert_eq!(
                text(engine.execute(&on).expect("on")),
                "true\tfalse\tfalse\n"
            );
            assert_eq!(
                text(engine.execute(&Request::new(probe)).expect("probe")),
                off
            );
            // A statement that changes the session costs the connection; the
            // new one starts off too.
            engine
                .execute(&Request::new("SET compile_aggregate_expressions = 1"))
                .expect("set");
            assert_eq!(
                text(engine.execute(&Request::new(probe)).expect("probe")),
                off
            );
            assert_eq!(engine.stats().discarded, 1);
        },
    );
}

#[test]
fn compilation_stays_the_engines_default_when_asked_for() {
    isolated(
        "compilation_stays_the_engines_default_when_asked_for",
        || {
            let dir = temp_dir("chdb-jit-on");
            let engine =
                Engine::open_with(dir.path(), EngineOptions::default().with_jit_compile(true))
                    .expect("open");
            let probe = "SELECT getSetting('compile_expressions'), \
                     getSetting('compile_aggregate_expressions')";
            assert_eq!(
                text(engine.execute(&Request::new(probe)).expect("probe")),
                "true\ttrue\n"
            );
        },
    );
}

#[test]
fn max_execution_time_stops_a_long_query_with_its_code() {
    isolated(
        "max_execution_time_stops_a_long_query_with_its_code",
        || {
            let dir = temp_dir("chdb-timeout");
            let engine = Engine::open(dir.path()).expect("open");
            let slow = Request::new(
                "SELECT sleepEachRow(0.5) FROM numbers(20) SETTINGS max_block_size = 1",
            )
            .max_execution_time_s(Some(1));
            match engine.execute(&slow) {
                Err(ChdbError::Query { code, name, .. }) => {
                    assert_eq!((code, name.as_str()), (159, "TIMEOUT_EXCEEDED"));
                }
                other => panic!("expected TIMEOUT_EXCEEDED, got {other:?}"),
            }
        },
    );
}

#[test]
fn errors_carry_clickhouse_code_and_name() {
    isolated("errors_carry_clickhouse_code_and_name", || {
        let dir = temp_dir("chdb-errors");
        let engine = Engine::open(dir.path()).expect("open");
        let err = engine
            .execute(&Request::new("SELECT * FROM no_such_table"))
            .expect_err("unknown table");
        assert_eq!(err.code(), Some(60), "{err}");
        let ChdbError::Query { name, message, .. } = &err else {
            panic!("expected a query error, got {err:?}")
        };
        assert_eq!(name, "UNKNOWN_TABLE");
        assert!(message.starts_with("Code: 60. DB::Exception:"), "{message}");
        let err = engine
            .execute(&Request::new("SELECT 1").param("bad-name", "1"))
            .expect_err("bad parameter name");
        assert!(
            matches!(
                err,
                ChdbError::InvalidInput {
                    what: "parameter name",
                    ..
                }
            ),
            "{err:?}"
        );
    });
}

#[test]
fn a_failed_query_leaks_nothing_into_the_next_result() {
    isolated("a_failed_query_leaks_nothing_into_the_next_result", || {
        let dir = temp_dir("chdb-leak");
        // One connection: without the discard the next statement would run on
        // the very connection that failed (libchdb 26.7.3 then returns the
        // failed statement's first blocks as the next result).
        let engine =
            Engine::open_with(dir.path(), EngineOptions::default().with_max_connections(1))
                .expect("open");
        let failing = Request::new(
            "SELECT number, throwIf(number = 150000, 'mid-stream') FROM numbers(300000) \
             SETTINGS max_block_size = 1000",
        );
        let err = engine
            .execute(&failing)
            .expect_err("throwIf fires mid-stream");
        assert_eq!(err.code(), Some(395), "{err}");
        for _ in 0..3 {
            let out = engine
                .execute(&Request::new("SELECT 42"))
                .expect("next query");
            // Without the discard, `out` is the failed statement's first
            // 150,000 rows followed by "42\n": show only its size and start.
            assert!(
                out == b"42\n",
                "leaked {} bytes: {:?}...",
                out.len(),
                String::from_utf8_lossy(&out[..out.len().min(40)])
            );
        }
        assert_eq!(engine.stats().discarded, 1);
    });
}

#[test]
fn several_connections_run_statements_in_parallel() {
    isolated("several_connections_run_statements_in_parallel", || {
        let dir = temp_dir("chdb-parallel");
        let engine =
            Engine::open_with(dir.path(), EngineOptions::default().with_max_connections(2))
                .expect("open");
        // Not a timing assertion: the second connection sees the first
        // statement in system.processes while it runs, which can only happen
        // if both run at once.
        let marker = format!(
            "marker{}x{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock after 1970")
                .as_nanos()
        );
        let barrier = Barrier::new(2);
        std::thread::scope(|s| {
            let slow = s.spawn(|| {
                barrier.wait();
                engine
                    .execute(&Request::new(format!("SELECT sleep(2), '{marker}'")))
                    .expect("slow statement")
            });
            barrier.wait();
            let mut seen = false;
            // Bounded: the slow statement lasts 2 s; 40 polls of 50 ms cover it.
            for _ in 0..40 {
                let count = engine
                    .execute(
                        &Request::new(
                            "SELECT count() FROM system.processes \
                             WHERE query LIKE concat('%sleep(2)%', {m:String}, '%') \
                             AND query NOT LIKE '%system.processes%'",
                        )
                        .param("m", marker.as_str()),
                    )
                    .expect("probe");
                if text(count) == "1\n" {
                    seen = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            slow.join().expect("slow thread");
            assert!(
                seen,
                "the second connection never saw the first statement running"
            );
        });
        assert_eq!(
            engine.stats().idle,
            2,
            "two connections were opened and returned"
        );
    });
}

#[test]
fn the_pool_bound_makes_a_caller_wait_then_time_out() {
    isolated("the_pool_bound_makes_a_caller_wait_then_time_out", || {
        let dir = temp_dir("chdb-pool");
        let engine = Engine::open_with(
            dir.path(),
            EngineOptions::default()
                .with_max_connections(1)
                .with_acquire_timeout(Duration::from_millis(100)),
        )
        .expect("open");
        let barrier = Barrier::new(2);
        std::thread::scope(|s| {
            let slow = s.spawn(|| {
                let guard = engine.execute(&Request::new("SELECT 1")).map(drop);
                barrier.wait();
                guard.and_then(|()| engine.execute(&Request::new("SELECT sleep(2)")))
            });
            barrier.wait();
            // Bounded: until the slow statement holds the only connection.
            for _ in 0..100 {
                if engine.stats().in_use == 1 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let err = engine
                .execute(&Request::new("SELECT 2"))
                .expect_err("pool exhausted");
            assert!(
                matches!(err, ChdbError::PoolTimeout { max: 1, .. }),
                "{err:?}"
            );
            slow.join().expect("slow thread").expect("slow statement");
        });
        assert_eq!(
            text(engine.execute(&Request::new("SELECT 3")).expect("after")),
            "3\n"
        );
    });
}

#[test]
fn one_path_per_process_shared_by_every_opener() {
    isolated("one_path_per_process_shared_by_every_opener", || {
        let dir = temp_dir("chdb-registry");
        let other = temp_dir("chdb-registry-other");
        let first = Engine::open(dir.path()).expect("open");
        first
            .execute(&Request::new(
                "CREATE TABLE t (x UInt64) ENGINE = MergeTree ORDER BY x",
            ))
            .expect("create");
        first
            .execute(&Request::new("INSERT INTO t VALUES (1), (2)"))
            .expect("insert");
        let second = Engine::open(dir.path()).expect("a second open of the same path shares it");
        assert_eq!(second.data_path(), first.data_path());
        assert_eq!(
            text(
                second
                    .execute(&Request::new("SELECT sum(x) FROM t"))
                    .expect("sum")
            ),
            "3\n"
        );
        match Engine::open(other.path()) {
            Err(ChdbError::OtherPathOpen { open, requested }) => {
                assert_eq!(open, first.data_path());
                assert_eq!(requested, other.path().canonicalize().expect("canonical"));
            }
            other => panic!("expected OtherPathOpen, got {other:?}"),
        }
        drop(first);
        drop(second);
        // Every handle gone: the engine shut down, and another path may boot.
        let third = Engine::open(other.path()).expect("another path after the last handle closed");
        assert_eq!(
            text(third.execute(&Request::new("SELECT 5")).expect("select")),
            "5\n"
        );
    });
}

/// Run only as a child of `a_second_process_gets_a_typed_error`: tries to
/// open the path its parent holds and prints what happened.
#[test]
#[ignore = "run only as a child process by a_second_process_gets_a_typed_error"]
fn child_opens_a_path_held_by_its_parent() {
    let Ok(path) = std::env::var("CAPCAT_CHDB_HELD_PATH") else {
        return;
    };
    match Engine::open(&path) {
        Err(ChdbError::LockedByAnotherProcess { path: locked }) => {
            println!("CHILD-RESULT: locked {}", locked.display());
        }
        other => println!("CHILD-RESULT: unexpected {other:?}"),
    }
}

#[test]
fn a_second_process_gets_a_typed_error() {
    isolated("a_second_process_gets_a_typed_error", || {
        let dir = temp_dir("chdb-second-process");
        let engine = Engine::open(dir.path()).expect("open");
        let output = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "child_opens_a_path_held_by_its_parent",
                "--exact",
                "--nocapture",
                "--include-ignored",
            ])
            .env_remove(ISOLATED)
            .env("CAPCAT_CHDB_HELD_PATH", engine.data_path())
            .output()
            .expect("spawn the child");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "child failed: {stdout}");
        let expected = format!("CHILD-RESULT: locked {}", engine.data_path().display());
        assert!(stdout.contains(&expected), "child said: {stdout}");
        // The parent is unaffected.
        assert_eq!(
            text(engine.execute(&Request::new("SELECT 1")).expect("select")),
            "1\n"
        );
    });
}

#[test]
fn insert_data_streams_binary_rows_intact() {
    isolated("insert_data_streams_binary_rows_intact", || {
        let dir = temp_dir("chdb-insert");
        let engine = Engine::open(dir.path()).expect("open");
        engine
            .execute(&Request::new(
                "CREATE TABLE r (id UInt64, name String) ENGINE = MergeTree ORDER BY id",
            ))
            .expect("create");
        // RowBinary rows whose bytes include NUL, newlines and spaces. Written
        // inline after `FORMAT RowBinary` in the statement text, libchdb
        // 26.7.3 keeps only the first of these rows and reports success.
        let mut data = Vec::new();
        for (id, name) in [(0x2020_u64, " lead"), (0, "a\0b"), (0x0a0a, "x\ny")] {
            data.extend_from_slice(&id.to_le_bytes());
            data.push(u8::try_from(name.len()).expect("short name"));
            data.extend_from_slice(name.as_bytes());
        }
        engine
            .execute(&Request::new("INSERT INTO r").insert_data("RowBinary", data))
            .expect("insert");
        let out = engine
            .execute(&Request::new("SELECT id, hex(name) FROM r ORDER BY id"))
            .expect("select");
        assert_eq!(
            text(out),
            format!(
                "0\t{}\n2570\t{}\n8224\t{}\n",
                hex(b"a\0b"),
                hex(b"x\ny"),
                hex(b" lead")
            )
        );
    });
}

#[test]
fn a_missing_library_is_a_typed_error() {
    // Runs without the engine: a child with CAPCAT_LIBCHDB pointing nowhere.
    if std::env::var("CAPCAT_CHDB_MISSING_LIB_CHILD").is_ok() {
        let dir = temp_dir("chdb-missing");
        match Engine::open(dir.path()) {
            Err(ChdbError::Load { path, .. }) => {
                println!("CHILD-RESULT: load error {}", path.display())
            }
            other => println!("CHILD-RESULT: unexpected {other:?}"),
        }
        return;
    }
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "a_missing_library_is_a_typed_error",
            "--exact",
            "--nocapture",
        ])
        .env("CAPCAT_CHDB_MISSING_LIB_CHILD", "1")
        .env("CAPCAT_LIBCHDB", "/nonexistent/libchdb.so")
        .output()
        .expect("spawn the child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("CHILD-RESULT: load error /nonexistent/libchdb.so"),
        "child said: {stdout}"
    );
}
