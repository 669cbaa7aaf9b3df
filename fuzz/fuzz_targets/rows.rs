//! Feeds result bytes to the row decoder both transports run on what the
//! engine answers (`capcat_clickhouse::transport::decode_rows` over
//! `TabSeparatedWithNamesAndTypes`, the only result format either
//! transport asks for), under columns the input chooses; and the same bytes,
//! as text, to the exception parsers a failed statement goes through
//! (capcat-chdb's, for libchdb's error text, and capcat-clickhouse's
//! `failure_from_exception`, for both transports).
//!
//! Properties: decoding never panics and refuses with
//! `Failure::Malformed`; accepted rows have the statement's width and each
//! value has its column's type (`Null` only where the column is nullable);
//! no more rows than lines; and rows encoded the way ClickHouse writes
//! TabSeparated (header lines, escapes, `\N`) decode to themselves (the
//! round trip is the identity). The exception parsers never panic, and a
//! `TIMEOUT_EXCEEDED` code is a `Failure::Timeout`.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use capcat_clickhouse::transport::{TIMEOUT_EXCEEDED, decode_rows, failure_from_exception};
use capcat_proto::{Column, ColumnType, Failure, Value};
use libfuzzer_sys::fuzz_target;
use uuid::Uuid;

const NAMES: [&str; 6] = ["n", "s", "u", "maybe", "lease_id", "term"];
const TYPES: [ColumnType; 5] = [
    ColumnType::UInt64,
    ColumnType::Int64,
    ColumnType::String,
    ColumnType::Uuid,
    ColumnType::NullableUInt64,
];

/// The server type ClickHouse would print for `ty`.
fn server_type(ty: ColumnType, variant: u8) -> &'static str {
    match (ty, variant % 3) {
        (ColumnType::UInt64, 0) => "UInt64",
        (ColumnType::UInt64, 1) => "UInt8",
        (ColumnType::UInt64, _) => "Nullable(UInt32)",
        (ColumnType::Int64, 0) => "Int64",
        (ColumnType::Int64, _) => "Int16",
        (ColumnType::String, 0) => "String",
        (ColumnType::String, _) => "LowCardinality(String)",
        (ColumnType::Uuid, _) => "UUID",
        (_, _) => "Nullable(UInt64)",
    }
}

/// ClickHouse's TabSeparated escaping of one string field.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\'' => out.push_str("\\'"),
            other => out.push(other),
        }
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "\\N".to_owned(),
        Value::UInt64(n) => n.to_string(),
        Value::Int64(n) => n.to_string(),
        Value::String(s) => escape(s),
        Value::Uuid(u) => u.hyphenated().to_string(),
        _ => String::new(),
    }
}

#[derive(Arbitrary, Debug)]
enum AnyValue {
    Null,
    U(u64),
    I(i64),
    S(String),
    Id(u128),
}

fn value_for(ty: ColumnType, v: AnyValue) -> Value {
    match (ty, v) {
        (ColumnType::NullableUInt64, AnyValue::Null) => Value::Null,
        (ColumnType::UInt64 | ColumnType::NullableUInt64, AnyValue::U(n)) => Value::UInt64(n),
        (ColumnType::UInt64 | ColumnType::NullableUInt64, _) => Value::UInt64(0),
        (ColumnType::Int64, AnyValue::I(n)) => Value::Int64(n),
        (ColumnType::Int64, _) => Value::Int64(-1),
        (ColumnType::String, AnyValue::S(s)) => Value::String(s),
        (ColumnType::String, _) => Value::String(String::new()),
        (_, AnyValue::Id(u)) => Value::Uuid(Uuid::from_u128(u)),
        (_, _) => Value::Uuid(Uuid::nil()),
    }
}

fn check_decoded(columns: &[Column], output: &[u8]) {
    match decode_rows(columns, output) {
        Ok(rows) => {
            let lines = output.iter().filter(|&&b| b == b'\n').count();
            assert!(rows.0.len() + 2 <= lines.max(2));
            for row in &rows.0 {
                assert_eq!(row.len(), columns.len());
                for (value, column) in row.iter().zip(columns) {
                    let fits = matches!(
                        (column.ty, value),
                        (ColumnType::UInt64, Value::UInt64(_))
                            | (ColumnType::NullableUInt64, Value::UInt64(_) | Value::Null)
                            | (ColumnType::Int64, Value::Int64(_))
                            | (ColumnType::String, Value::String(_))
                            | (ColumnType::Uuid, Value::Uuid(_))
                    );
                    assert!(fits, "{value:?} in a {:?} column", column.ty);
                }
            }
        }
        Err(Failure::Malformed { .. }) => {}
        Err(other) => panic!("decode_rows refused with {other:?}, not Malformed"),
    }
}

fn check_exception(text: &str) {
    let (code, name) = capcat_chdb::fuzzing::parse_exception(text);
    assert!(
        name.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    );
    match failure_from_exception(Some(code), text) {
        Failure::Timeout => assert_eq!(code, TIMEOUT_EXCEEDED),
        Failure::Server { code: c, .. } => assert_eq!(c, code),
        other => panic!("an exception became {other:?}"),
    }
    let _ = failure_from_exception(None, text);
}

fuzz_target!(|data: &[u8]| {
    // Byte 0: the width; then one byte per column for its type, one for the
    // server's spelling of it; then the mode; then the answer (or, in the
    // round-trip mode, the rows to write).
    let Some((&w, rest)) = data.split_first() else {
        return;
    };
    let width = 1 + usize::from(w) % NAMES.len();
    let Some(head) = rest.get(..2 * width + 1) else {
        return;
    };
    let columns: Vec<Column> = (0..width)
        .map(|i| Column {
            name: NAMES[i],
            ty: TYPES[usize::from(head[i]) % TYPES.len()],
        })
        .collect();
    let variants = &head[width..2 * width];
    let output = &rest[2 * width + 1..];
    if head[2 * width] % 2 == 0 {
        // The rest of the input is the server's answer.
        check_decoded(&columns, output);
        if let Ok(text) = std::str::from_utf8(output) {
            check_exception(text);
        }
        return;
    }
    let mut u = Unstructured::new(output);
    // Rows the input chooses, written as ClickHouse writes them.
    let mut rows = Vec::new();
    while rows.len() < 16 && u.arbitrary::<bool>().unwrap_or(false) {
        let row: Vec<Value> = columns
            .iter()
            .map(|c| value_for(c.ty, u.arbitrary().unwrap_or(AnyValue::Null)))
            .collect();
        rows.push(row);
    }
    let mut out = String::new();
    let names: Vec<&str> = columns.iter().map(|c| c.name).collect();
    out.push_str(&names.join("\t"));
    out.push('\n');
    let types: Vec<&str> = columns
        .iter()
        .zip(variants)
        .map(|(c, v)| server_type(c.ty, *v))
        .collect();
    out.push_str(&types.join("\t"));
    out.push('\n');
    for row in &rows {
        let fields: Vec<String> = row.iter().map(text).collect();
        out.push_str(&fields.join("\t"));
        out.push('\n');
    }
    let decoded = decode_rows(&columns, out.as_bytes()).expect("ClickHouse's own output decodes");
    assert_eq!(decoded.0, rows, "output {out:?}");
});
