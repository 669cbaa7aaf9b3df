//! The live tests' driver: the one engine of a test process, and a minimal
//! adapter that executes capcat-proto statements on it (parameters as text,
//! settings applied, rows decoded by the expected column types). Shared by
//! `live_engine.rs`, `live_schedules.rs` and `reader_live.rs`.

#![allow(dead_code, unreachable_pub)]

use std::sync::OnceLock;

use capcat_chdb::{Engine, Request};
use capcat_proto::{ColumnType, Expect, Failure, Input, Machine, Rows, Statement, Step, Value};
use uuid::Uuid;

/// The one engine of this test process (libchdb opens one data path per
/// process), or `None` (after saying so) when it is not installed. Each test
/// uses its own table prefix on it; the data path is
/// `<target>/tmp/<data_dir_tag>-<pid>`. It lives under cargo's target
/// directory, not the system's temporary one, because the engine is never
/// dropped (it lives in a static until the process exits, and nextest runs
/// every test in a process of its own): the directories it leaves go away
/// with `cargo clean` instead of piling up in `/tmp`.
pub fn engine(test: &str, data_dir_tag: &str) -> Option<&'static Engine> {
    static ENGINE: OnceLock<Option<Engine>> = OnceLock::new();
    let engine = ENGINE.get_or_init(|| {
        if !capcat_chdb::library_path().is_ok_and(|p| p.exists()) {
            return None;
        }
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{data_dir_tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Some(Engine::open(&dir).expect("the engine opens a fresh data path"))
    });
    if engine.is_none() {
        assert!(
            std::env::var("CAPCAT_REQUIRE_ENGINES").as_deref() != Ok("1"),
            "CAPCAT_REQUIRE_ENGINES=1 but libchdb is not available"
        );
        println!("skipping {test}: libchdb not available (set CAPCAT_LIBCHDB)");
    }
    engine.as_ref()
}

/// The one unsigned integer `sql` returns.
pub fn count(engine: &Engine, sql: &str) -> u64 {
    let out = engine
        .execute(&Request::new(sql).format("TabSeparated"))
        .expect("count query");
    String::from_utf8_lossy(&out)
        .trim()
        .parse()
        .expect("a count")
}

/// Creates capcat-proto's schema under `tables`.
pub fn setup(engine: &Engine, tables: &capcat_proto::Tables) {
    for stmt in capcat_proto::schema::create_schema(tables) {
        assert!(
            matches!(execute(engine, &stmt), Input::Rows(_)),
            "{}",
            stmt.name
        );
    }
}

fn unescape(field: &str) -> String {
    let mut out = String::new();
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('t') => out.push('\t'),
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some('b') => out.push('\u{8}'),
                Some('f') => out.push('\u{c}'),
                Some('0') => out.push('\0'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Executes `stmt` the way an adapter does: parameters as text, settings
/// applied, rows decoded by the statement's expected column types.
pub fn execute(engine: &Engine, stmt: &Statement) -> Input {
    let base = match &stmt.data {
        None => Request::new(stmt.sql.clone()),
        Some(data) => {
            Request::insert(&stmt.sql, data.to_bytes()).expect("INSERT ... FORMAT <name>")
        }
    };
    let mut request = base
        .format("TabSeparated")
        .max_execution_time_s(stmt.settings.max_execution_time_s)
        .select_sequential_consistency(stmt.settings.select_sequential_consistency);
    for (name, param) in &stmt.params {
        request = request.param(name.clone(), param.to_text());
    }
    let out = match engine.execute(&request) {
        Ok(out) => String::from_utf8(out).expect("utf-8 output"),
        Err(e) => {
            return Input::Failed(Failure::Server {
                code: e.code().unwrap_or(0),
                message: e.to_string(),
            });
        }
    };
    let Expect::Rows(cols) = &stmt.expect else {
        return Input::Rows(Rows::empty());
    };
    let rows = out
        .lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            line.split('\t')
                .zip(cols)
                .map(|(field, col)| match col.ty {
                    ColumnType::Uuid => Value::Uuid(Uuid::parse_str(field).expect("uuid")),
                    ColumnType::String => Value::String(unescape(field)),
                    ColumnType::NullableUInt64 if field == "\\N" => Value::Null,
                    _ => Value::UInt64(field.parse().expect("unsigned integer")),
                })
                .collect()
        })
        .collect();
    Input::Rows(Rows(rows))
}

pub fn drive<M: Machine>(engine: &Engine, m: &mut M) -> M::Outcome {
    for _ in 0..1_000 {
        match m.poll() {
            Step::Execute(stmt) => {
                let input = execute(engine, &stmt);
                m.handle(input);
            }
            Step::Draw { below } => m.handle(Input::Drawn(below / 2)),
            Step::Done(outcome) => return outcome,
        }
    }
    panic!("machine did not finish");
}
