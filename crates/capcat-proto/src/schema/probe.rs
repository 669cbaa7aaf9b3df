//! The statements the guard reads the server with, and parsers of their rows.

use std::collections::{BTreeMap, BTreeSet};

use crate::fragments::{MembershipBound, published_pairs};
use crate::schema::error::SchemaError;
use crate::schema::guard::{MembershipCounts, ObservedObject, SCHEMA_VERSION, StampState};
use crate::schema::objects::probed_names;
use crate::statement::{Column, ColumnType, Expect, Param, Rows, Settings, Statement, Value};
use crate::tables::Tables;

fn consistent() -> Settings {
    Settings {
        select_sequential_consistency: true,
        max_execution_time_s: None,
    }
}

/// `schema.check_access`: one constant row, reading no table. It decides
/// nothing: a transport sends it first to learn whether the server accepts
/// the connection at all (its certificate, the login), and names the
/// refusal if not. Every user may run it.
pub fn check_access() -> Statement {
    Statement {
        name: "schema.check_access",
        sql: "SELECT toUInt64(1) AS n".to_owned(),
        params: BTreeMap::new(),
        settings: Settings::default(),
        expect: Expect::Rows(vec![Column {
            name: "n",
            ty: ColumnType::UInt64,
        }]),
        data: None,
    }
}

/// `schema.read_tables`: name, engine, sorting key and row count of every
/// object under our names (and the legacy names) in the current database.
///
/// The row count is what lets the guard finish an install that was killed
/// part way: missing tables beside tables that hold no row put nothing at
/// stake. `total_rows` is exact for a MergeTree table (the sum over its
/// active parts) and NULL for a view.
pub fn read_tables(tables: &Tables) -> Statement {
    let mut params = BTreeMap::new();
    params.insert("names".to_owned(), Param::Strings(probed_names(tables)));
    Statement {
        name: "schema.read_tables",
        sql: "SELECT name, engine, sorting_key, total_rows FROM system.tables \
              WHERE database = currentDatabase() AND name IN {names:Array(String)} \
              ORDER BY name"
            .to_owned(),
        params,
        settings: Settings::default(),
        expect: Expect::Rows(vec![
            Column {
                name: "name",
                ty: ColumnType::String,
            },
            Column {
                name: "engine",
                ty: ColumnType::String,
            },
            Column {
                name: "sorting_key",
                ty: ColumnType::String,
            },
            Column {
                name: "total_rows",
                ty: ColumnType::NullableUInt64,
            },
        ]),
        data: None,
    }
}

/// `schema.read_columns`: (table, column) for every column of those objects.
pub fn read_columns(tables: &Tables) -> Statement {
    let mut params = BTreeMap::new();
    params.insert("names".to_owned(), Param::Strings(probed_names(tables)));
    Statement {
        name: "schema.read_columns",
        sql: "SELECT table, name FROM system.columns \
              WHERE database = currentDatabase() AND table IN {names:Array(String)} \
              ORDER BY table, name"
            .to_owned(),
        params,
        settings: Settings::default(),
        expect: Expect::Rows(vec![
            Column {
                name: "table",
                ty: ColumnType::String,
            },
            Column {
                name: "name",
                ty: ColumnType::String,
            },
        ]),
        data: None,
    }
}

/// `schema.read_stamp`: the distinct versions in `{p}_schema_version`.
pub fn read_stamp(tables: &Tables) -> Statement {
    Statement {
        name: "schema.read_stamp",
        sql: format!(
            "SELECT DISTINCT version FROM {} ORDER BY version",
            tables.schema_version()
        ),
        params: BTreeMap::new(),
        settings: consistent(),
        expect: Expect::Rows(vec![Column {
            name: "version",
            ty: ColumnType::UInt64,
        }]),
        data: None,
    }
}

/// `schema.count_membership`: inventory rows, and manifest rows paired with
/// a commit row of the same publish (effective membership).
///
/// Counting manifest rows alone would accept a catalog whose commit row
/// table was truncated: its manifest rows are inert and admit nothing.
pub fn count_membership(tables: &Tables) -> Statement {
    Statement {
        name: "schema.count_membership",
        sql: format!(
            "SELECT (SELECT count() FROM {inventory}) AS inventory_rows, \
             (SELECT count() FROM {manifest} WHERE {pairs}) AS effective_membership_rows",
            inventory = tables.pack_inventory_raw(),
            manifest = tables.snapshot_manifest(),
            pairs = published_pairs(tables, MembershipBound::Published),
        ),
        params: BTreeMap::new(),
        settings: consistent(),
        expect: Expect::Rows(vec![
            Column {
                name: "inventory_rows",
                ty: ColumnType::UInt64,
            },
            Column {
                name: "effective_membership_rows",
                ty: ColumnType::UInt64,
            },
        ]),
        data: None,
    }
}

/// `schema.stamp`: the stamp row, written last and only if no stamp row
/// exists, decided by the server in the same statement.
pub fn stamp_statement(tables: &Tables) -> Statement {
    let mut params = BTreeMap::new();
    params.insert("version".to_owned(), Param::UInt64(SCHEMA_VERSION));
    let table = tables.schema_version();
    Statement {
        name: "schema.stamp",
        sql: format!(
            "INSERT INTO {table} (version) SELECT {{version:UInt64}} FROM system.one \
             WHERE (SELECT count() FROM {table}) = 0"
        ),
        params,
        settings: Settings::default(),
        expect: Expect::Nothing,
        data: None,
    }
}

fn malformed(statement: &'static str, message: impl Into<String>) -> SchemaError {
    SchemaError::Malformed {
        statement,
        message: message.into(),
    }
}

fn string_at<'a>(
    statement: &'static str,
    row: &'a [Value],
    index: usize,
) -> Result<&'a str, SchemaError> {
    match row.get(index) {
        Some(Value::String(s)) => Ok(s),
        other => Err(malformed(
            statement,
            format!("column {index}: expected a string, got {other:?}"),
        )),
    }
}

fn u64_at(statement: &'static str, row: &[Value], index: usize) -> Result<u64, SchemaError> {
    match row.get(index) {
        Some(Value::UInt64(v)) => Ok(*v),
        other => Err(malformed(
            statement,
            format!("column {index}: expected an unsigned integer, got {other:?}"),
        )),
    }
}

fn nullable_u64_at(
    statement: &'static str,
    row: &[Value],
    index: usize,
) -> Result<Option<u64>, SchemaError> {
    match row.get(index) {
        Some(Value::Null) => Ok(None),
        Some(Value::UInt64(v)) => Ok(Some(*v)),
        other => Err(malformed(
            statement,
            format!("column {index}: expected an unsigned integer or NULL, got {other:?}"),
        )),
    }
}

fn check_width(statement: &'static str, row: &[Value], width: usize) -> Result<(), SchemaError> {
    if row.len() == width {
        Ok(())
    } else {
        Err(malformed(
            statement,
            format!("expected {width} columns, got {}", row.len()),
        ))
    }
}

/// Parses the rows of [`read_tables`].
pub fn parse_tables(rows: &Rows) -> Result<BTreeMap<String, ObservedObject>, SchemaError> {
    const NAME: &str = "schema.read_tables";
    let mut out = BTreeMap::new();
    for row in &rows.0 {
        check_width(NAME, row, 4)?;
        let name = string_at(NAME, row, 0)?.to_owned();
        let object = ObservedObject {
            engine: string_at(NAME, row, 1)?.to_owned(),
            sorting_key: string_at(NAME, row, 2)?.to_owned(),
            total_rows: nullable_u64_at(NAME, row, 3)?,
        };
        out.insert(name, object);
    }
    Ok(out)
}

/// Parses the rows of [`read_columns`].
pub fn parse_columns(rows: &Rows) -> Result<BTreeMap<String, BTreeSet<String>>, SchemaError> {
    const NAME: &str = "schema.read_columns";
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in &rows.0 {
        check_width(NAME, row, 2)?;
        let table = string_at(NAME, row, 0)?.to_owned();
        let column = string_at(NAME, row, 1)?.to_owned();
        out.entry(table).or_default().insert(column);
    }
    Ok(out)
}

/// Parses the rows of [`read_stamp`]: no row is [`StampState::Empty`].
pub fn parse_stamp(rows: &Rows) -> Result<StampState, SchemaError> {
    const NAME: &str = "schema.read_stamp";
    let mut versions = BTreeSet::new();
    for row in &rows.0 {
        check_width(NAME, row, 1)?;
        versions.insert(u64_at(NAME, row, 0)?);
    }
    Ok(if versions.is_empty() {
        StampState::Empty
    } else {
        StampState::Versions(versions)
    })
}

/// Parses the one row of [`count_membership`].
pub fn parse_membership(rows: &Rows) -> Result<MembershipCounts, SchemaError> {
    const NAME: &str = "schema.count_membership";
    let [row] = rows.0.as_slice() else {
        return Err(malformed(
            NAME,
            format!("expected one row, got {}", rows.0.len()),
        ));
    };
    check_width(NAME, row, 2)?;
    Ok(MembershipCounts {
        inventory_rows: u64_at(NAME, row, 0)?,
        effective_membership_rows: u64_at(NAME, row, 1)?,
    })
}
