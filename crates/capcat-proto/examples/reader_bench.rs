//! Reader benchmark on the embedded engine: a search page of 100 at 50,000
//! captures (first page and a deep page), and get_by_ids of 100 and 1,000
//! ids, each the median of several rounds. Prints a Markdown table.
//!
//! `cargo run -p capcat-proto --example reader_bench` (needs libchdb:
//! `CAPCAT_LIBCHDB` or the engine in the cache dir).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use capcat_chdb::{Engine, Request};
use capcat_proto::descriptor::{CaptureDescriptor, Locator};
use capcat_proto::index::sql::insert_descriptors;
use capcat_proto::reader::{
    Cursor, GetByIds, PageSize, SearchFilter, SearchPage, SearchQuery, result_columns,
};
use capcat_proto::schema::EnsureSchema;
use capcat_proto::{ColumnType, Expect, Input, Machine, Rows, Statement, Step, Tables, Value};
use uuid::Uuid;

const CAPTURES: u64 = 50_000;
const PACKS: u64 = 16;
const ROUNDS: usize = 7;

fn execute(engine: &Engine, stmt: &Statement) -> Input {
    let mut request = Request::new(stmt.sql.clone())
        .format("TabSeparated")
        .select_sequential_consistency(stmt.settings.select_sequential_consistency);
    for (name, param) in &stmt.params {
        request = request.param(name.clone(), param.to_text());
    }
    let out =
        String::from_utf8(engine.execute(&request).expect("statement runs")).expect("utf-8 output");
    let Expect::Rows(cols) = &stmt.expect else {
        return Input::Rows(Rows::empty());
    };
    Input::Rows(Rows(
        out.lines()
            .filter(|l| !l.is_empty())
            .map(|line| {
                line.split('\t')
                    .zip(cols)
                    .map(|(field, col)| match col.ty {
                        ColumnType::Uuid => Value::Uuid(Uuid::parse_str(field).expect("uuid")),
                        ColumnType::String => Value::String(field.to_owned()),
                        _ => Value::UInt64(field.parse().expect("unsigned integer")),
                    })
                    .collect()
            })
            .collect(),
    ))
}

fn drive<M: Machine>(engine: &Engine, m: &mut M) -> M::Outcome {
    loop {
        match m.poll() {
            Step::Execute(stmt) => {
                let input = execute(engine, &stmt);
                m.handle(input);
            }
            Step::Draw { below } => m.handle(Input::Drawn(below / 2)),
            Step::Done(outcome) => return outcome,
        }
    }
}

fn median(mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[ROUNDS / 2]
}

fn descriptor(i: u64) -> CaptureDescriptor {
    CaptureDescriptor {
        tenant_id: "acme".to_owned(),
        experiment_id: format!("exp-{}", i % 4),
        run_id: format!("run-{}", i % 32),
        captured_at_ns: 1_700_000_000_000_000_000 + i * 1_000,
        capture_id: Uuid::from_u128(u128::from(i) + 1),
        locator: Locator {
            store_id: "store".to_owned(),
            pack_id: Uuid::from_u128(0x9000 + u128::from(i % PACKS)),
            payload_offset: i * 64,
            payload_length: 64,
            payload_sha256: format!("{i:064x}"),
        },
        index_version: 1,
        step: i % 1_000,
        tensor_name: format!("layers.{}.w", i % 24),
        dtype: "f32".to_owned(),
        shape: vec![4, 4],
        ..CaptureDescriptor::default()
    }
}

fn main() {
    let dir = std::env::temp_dir().join(format!("capcat-reader-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let engine = Engine::open(&dir).expect("libchdb opens (set CAPCAT_LIBCHDB)");
    let tables = Tables::new("bench").expect("valid prefix");
    drive(&engine, &mut EnsureSchema::new(tables.clone())).expect("schema created");

    let all: Vec<u64> = (0..CAPTURES).collect();
    for chunk in all.chunks(1_000) {
        let rows: Vec<_> = chunk.iter().map(|i| descriptor(*i)).collect();
        execute(&engine, &insert_descriptors(&tables, rows));
    }
    let publish_id = Uuid::from_u128(0xabc);
    let packs: Vec<String> = (0..PACKS)
        .map(|p| {
            format!(
                "(1, '{publish_id}', 'store', '{}')",
                Uuid::from_u128(0x9000 + u128::from(p))
            )
        })
        .collect();
    engine
        .execute(&Request::new(format!(
            "INSERT INTO {} (index_version, publish_id, store_id, pack_id) VALUES {}",
            tables.snapshot_manifest(),
            packs.join(", ")
        )))
        .expect("manifest");
    engine
        .execute(&Request::new(format!(
            "INSERT INTO {} (index_version, publish_id) VALUES (1, '{publish_id}')",
            tables.index_watermark()
        )))
        .expect("a pinned version");

    let query = |cursor: Option<Cursor>| SearchQuery {
        filter: SearchFilter {
            tenant_id: "acme".to_owned(),
            ..SearchFilter::default()
        },
        cursor,
        page_size: PageSize::new(100).expect("in range"),
    };
    let first = median(|| {
        let page = drive(
            &engine,
            &mut SearchPage::new(tables.clone(), query(None)).expect("valid"),
        )
        .expect("page");
        assert_eq!(page.records.len(), 100);
    });
    let mut deep_cursor = None;
    for _ in 0..25 {
        let page = drive(
            &engine,
            &mut SearchPage::new(tables.clone(), query(deep_cursor.clone())).expect("valid"),
        )
        .expect("page");
        deep_cursor = page.next;
    }
    let deep = median(|| {
        let page = drive(
            &engine,
            &mut SearchPage::new(tables.clone(), query(deep_cursor.clone())).expect("valid"),
        )
        .expect("page");
        assert_eq!(page.records.len(), 100);
    });
    let lookup = |n: u64| {
        let ids: BTreeSet<Uuid> = (0..n)
            .map(|i| Uuid::from_u128(u128::from(i * (CAPTURES / n)) + 1))
            .collect();
        median(|| {
            let found = drive(
                &engine,
                &mut GetByIds::new(tables.clone(), "acme", ids.clone(), 1).expect("valid"),
            )
            .expect("lookup")
            .resolve()
            .expect("all resolve");
            assert_eq!(found.len() as u64, n);
        })
    };
    let by_100 = lookup(100);
    let by_1000 = lookup(1_000);

    println!(
        "{CAPTURES} captures in {PACKS} packs, {} result columns, median of {ROUNDS}, engine {}",
        result_columns().len(),
        engine.library_version()
    );
    println!("| What | Median |");
    println!("|---|---|");
    println!(
        "| search page of 100, first page (pin + page) | {:.1} ms |",
        ms(first)
    );
    println!(
        "| search page of 100, page 26 (cursor: head check + page) | {:.1} ms |",
        ms(deep)
    );
    println!(
        "| get_by_ids, 100 ids (head check + 1 chunk) | {:.1} ms |",
        ms(by_100)
    );
    println!(
        "| get_by_ids, 1,000 ids (head check + 1 chunk) | {:.1} ms |",
        ms(by_1000)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}
