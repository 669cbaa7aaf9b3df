//! Live round trip of `index.insert_descriptors` on the real engine: every
//! one of the 23 descriptor columns written by the statement (rows as the
//! INSERT's `RowBinary` data) and read back by the reader's lookup must
//! equal what was written, for the strings and numbers
//! most likely to be mangled on the way: quotes, backslashes, tabs,
//! newlines, carriage returns, text that looks like an escape or like the
//! format's own syntax, unicode, empty strings, the integer extremes and the
//! float edge cases. The String columns are also compared byte for byte
//! (`hex`) on the raw table, so a result decoder cannot hide a mangled
//! value.
//!
//! Needs `CAPCAT_LIBCHDB` (or the engine in the cache dir); skips with a
//! message otherwise, unless `CAPCAT_REQUIRE_ENGINES=1`.

use std::collections::BTreeSet;

use capcat_chdb::{Engine, Request};
use capcat_proto::descriptor::{CAPTURE_COLUMNS, CaptureDescriptor, Locator, SummaryColumns};
use capcat_proto::index::sql::insert_descriptors;
use capcat_proto::reader::GetByIds;
use capcat_proto::schema::{EnsureOutcome, EnsureSchema};
use capcat_proto::{Input, Tables};
use uuid::Uuid;

mod live_support;

use live_support::{drive, execute};

const TENANT: &str = "acme";
const STORE: &str = "store-1";

/// Strings that a wrong layer of escaping (the parameter's text escaping,
/// the `Values` literal quoting, or the result decoding) would change.
const ODD: &[&str] = &[
    "",
    "plain",
    "it's",
    "''",
    "\"double\"",
    "back\\slash",
    "\\",
    "\\\\",
    "ends with a backslash\\",
    "\\'",
    "tab\there",
    "new\nline",
    "carriage\rreturn",
    "\\n is not a newline",
    "\\t\\0\\x41",
    "'),('injected','row",
    "{rows:String}",
    "concat('ac', 'me')",
    "now()",
    "NULL",
    "\\N",
    " leading and trailing ",
    "comma, (paren) [bracket]",
    "unicode: ünïcödé 日本語 🦀",
    "e\u{301}",
    "\u{7f}\u{1}\u{1f}",
    "nul\0byte",
];

fn odd(i: usize) -> String {
    ODD[i % ODD.len()].to_owned()
}

/// Float edge cases; NaN is the canonical one (the server prints every NaN
/// as `nan`).
const FLOATS: &[f64] = &[
    0.0,
    -0.0,
    0.1,
    -1.0 / 3.0,
    5e-324,
    f64::MIN_POSITIVE,
    f64::MAX,
    f64::MIN,
    9_007_199_254_740_993.0,
    1e300,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

fn float(i: usize) -> f64 {
    FLOATS[i % FLOATS.len()]
}

fn descriptor(i: usize) -> CaptureDescriptor {
    let n = u64::try_from(i).expect("small");
    let extreme = i.is_multiple_of(3);
    CaptureDescriptor {
        tenant_id: TENANT.to_owned(),
        experiment_id: odd(i + 1),
        run_id: odd(i),
        captured_at_ns: if extreme { u64::MAX - n } else { n },
        capture_id: Uuid::from_u128(u128::MAX - u128::from(n)),
        locator: Locator {
            store_id: STORE.to_owned(),
            pack_id: if extreme {
                Uuid::nil()
            } else {
                Uuid::from_u128(0xfeed)
            },
            payload_offset: if extreme { u64::MAX } else { n * 7 },
            payload_length: n,
            payload_sha256: odd(i + 3),
        },
        index_version: 1,
        step: if extreme { u64::MAX } else { n },
        tensor_name: odd(i + 5),
        dtype: odd(i + 7),
        shape: match i % 4 {
            0 => vec![],
            1 => vec![0],
            2 => vec![u64::MAX, 1],
            _ => vec![n, 896, 3],
        },
        summary: SummaryColumns {
            summary_version: if extreme { u32::MAX } else { 2 },
            element_count: if extreme { u64::MAX } else { n },
            minimum: float(i).into(),
            maximum: float(i + 1).into(),
            mean: float(i + 2).into(),
            l2_norm: float(i + 3).into(),
            abs_max: float(i + 4).into(),
            zero_fraction: float(i + 5).into(),
        },
    }
}

fn sql(engine: &Engine, text: &str) -> String {
    let out = engine
        .execute(&Request::new(text).format("TabSeparated"))
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    String::from_utf8(out).expect("utf-8 output")
}

fn fresh(engine: &Engine, prefix: &str) -> Tables {
    let t = Tables::new(prefix).expect("valid prefix");
    assert_eq!(
        drive(engine, &mut EnsureSchema::new(t.clone())),
        Ok(EnsureOutcome::Created)
    );
    t
}

fn write(engine: &Engine, t: &Tables, rows: Vec<CaptureDescriptor>) {
    let stmt = insert_descriptors(t, rows);
    let input = execute(engine, &stmt);
    assert!(
        matches!(input, Input::Rows(_)),
        "descriptor insert: {input:?}"
    );
}

/// Admits both packs the rows use at version 1 (manifest and commit rows
/// of one publish; the publish machine's own tests cover how they land).
fn publish(engine: &Engine, t: &Tables) {
    let publish_id = Uuid::from_u128(0x11);
    sql(
        engine,
        &format!(
            "INSERT INTO {} (index_version, publish_id, store_id, pack_id) VALUES \
             (1, '{publish_id}', '{STORE}', '{}'), (1, '{publish_id}', '{STORE}', '{}')",
            t.snapshot_manifest(),
            Uuid::nil(),
            Uuid::from_u128(0xfeed),
        ),
    );
    sql(
        engine,
        &format!(
            "INSERT INTO {} (index_version, publish_id) VALUES (1, '{publish_id}')",
            t.index_watermark()
        ),
    );
}

fn lookup(engine: &Engine, t: &Tables, rows: &[CaptureDescriptor]) -> Vec<CaptureDescriptor> {
    let ids: BTreeSet<Uuid> = rows.iter().map(|d| d.capture_id).collect();
    let mut m = GetByIds::new(t.clone(), TENANT, ids, 1).expect("valid lookup");
    let found = drive(engine, &mut m).expect("lookup runs");
    assert!(found.missing.is_empty(), "missing {:?}", found.missing);
    found.records.into_values().collect()
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02X}")).collect()
}

/// Every String column of every row, byte for byte, from the raw table.
fn assert_strings_exact(engine: &Engine, t: &Tables, rows: &[CaptureDescriptor]) {
    let strings: Vec<&str> = CAPTURE_COLUMNS
        .iter()
        .filter(|c| c.clickhouse_type == "String")
        .map(|c| c.name)
        .collect();
    assert_eq!(
        strings,
        [
            "tenant_id",
            "experiment_id",
            "run_id",
            "store_id",
            "tensor_name",
            "dtype",
            "payload_sha256"
        ]
    );
    let hexes: Vec<String> = strings.iter().map(|c| format!("hex({c})")).collect();
    let out = sql(
        engine,
        &format!(
            "SELECT capture_id, {} FROM {} ORDER BY capture_id",
            hexes.join(", "),
            t.capture_raw()
        ),
    );
    let mut expected: Vec<String> = rows
        .iter()
        .map(|d| {
            let l = &d.locator;
            [
                d.capture_id.hyphenated().to_string(),
                hex(&d.tenant_id),
                hex(&d.experiment_id),
                hex(&d.run_id),
                hex(&l.store_id),
                hex(&d.tensor_name),
                hex(&d.dtype),
                hex(&l.payload_sha256),
            ]
            .join("\t")
        })
        .collect();
    expected.sort();
    let got: Vec<String> = out.lines().map(str::to_owned).collect();
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(g, e);
    }
}

fn sorted(mut rows: Vec<CaptureDescriptor>) -> Vec<CaptureDescriptor> {
    rows.sort_by_key(|d| d.capture_id);
    rows
}

#[test]
fn descriptor_roundtrip_live_odd_strings_and_numeric_extremes_come_back_exactly() {
    let Some(engine) = live_support::engine("descriptor_roundtrip_live_odd...", "capcat-rt-live")
    else {
        return;
    };
    let t = fresh(engine, "rt_odd");
    // Enough rows that every odd string lands in every String column and
    // every float edge case in every summary column.
    let rows: Vec<CaptureDescriptor> = (0..ODD.len() * FLOATS.len()).map(descriptor).collect();
    write(engine, &t, rows.clone());
    publish(engine, &t);
    assert_strings_exact(engine, &t, &rows);
    let back = lookup(engine, &t, &rows);
    let want = sorted(rows);
    assert_eq!(back.len(), want.len());
    for (b, w) in back.iter().zip(&want) {
        assert_eq!(b, w, "row {}", w.capture_id);
    }
}

/// A pack's worth of rows (4,096) in one statement: more than the 1,000
/// tuples a parameter may carry, which data is not bound by.
#[test]
fn descriptor_roundtrip_live_a_pack_of_rows_lands_every_row_in_one_statement() {
    let Some(engine) = live_support::engine("descriptor_roundtrip_live_full...", "capcat-rt-live")
    else {
        return;
    };
    let t = fresh(engine, "rt_chunk");
    let rows: Vec<CaptureDescriptor> = (0..4_096).map(descriptor).collect();
    write(engine, &t, rows.clone());
    publish(engine, &t);
    assert_strings_exact(engine, &t, &rows);
    assert_eq!(lookup(engine, &t, &rows), sorted(rows));
}

/// Data the engine cannot read to its end (the last row cut short, as a
/// dropped connection would leave it) is refused, and none of its rows
/// lands: a reader never sees part of a chunk it was not sent whole.
#[test]
fn descriptor_roundtrip_live_truncated_data_is_refused_and_lands_no_row() {
    let Some(engine) = live_support::engine("descriptor_roundtrip_live_cut...", "capcat-rt-live")
    else {
        return;
    };
    let t = fresh(engine, "rt_cut");
    let rows: Vec<CaptureDescriptor> = (0..10).map(descriptor).collect();
    let stmt = insert_descriptors(&t, rows);
    let data = stmt.data.as_ref().expect("the rows are data").to_bytes();
    let cut = data[..data.len() - 3].to_vec();
    let refused = engine.execute(&Request::insert(&stmt.sql, cut).expect("an INSERT ... FORMAT"));
    let Err(refusal) = refused else {
        panic!("truncated data was accepted");
    };
    assert!(
        refusal.code().is_some(),
        "not refused by the engine: {refusal}"
    );
    let count = format!("SELECT count() FROM {}", t.capture_raw());
    assert_eq!(sql(engine, &count).trim(), "0", "after {refusal}");
    let accepted = engine.execute(&Request::insert(&stmt.sql, data).expect("an INSERT ... FORMAT"));
    assert!(accepted.is_ok(), "{accepted:?}");
    assert_eq!(sql(engine, &count).trim(), "10");
}
