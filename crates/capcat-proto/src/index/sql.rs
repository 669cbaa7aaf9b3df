//! The index pass's statements: the descriptor rows' INSERT and the
//! inventory's reads and writes.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::descriptor::{
    CaptureDescriptor, DESCRIPTOR_ROWS_FORMAT, DESCRIPTOR_ROWS_PARAM_TYPE, capture_column_list,
    descriptor_rows_structure,
};
use crate::fragments::{INDEX_VERSION_PARAM, SERVER_NOW_NS};
use crate::lease::sql::CONSISTENT;
use crate::publish::PackRef;
use crate::statement::{Column, ColumnType, Expect, Param, Settings, Statement};
use crate::tables::Tables;

use super::IndexError;

/// `index.insert_descriptors`: write one chunk of descriptor rows.
///
/// Unconditional on purpose: a descriptor row is inert until a manifest row
/// paired with a commit row admits its pack, so writing it needs no guard,
/// and a lost publish leaves rows no reader can see. The caller chunks (at
/// most [`crate::config::MAX_CHUNK`] rows per statement).
///
/// The rows arrive as one `String` parameter in [`DESCRIPTOR_ROWS_FORMAT`]
/// and `format(...)` parses them with the structure generated from
/// [`CAPTURE_COLUMNS`]; the SELECT names the columns, so the INSERT maps them
/// by name, not by position.
pub fn insert_descriptors(tables: &Tables, rows: Vec<CaptureDescriptor>) -> Statement {
    let columns = capture_column_list();
    let sql = format!(
        "INSERT INTO {table} ({columns}) SELECT {columns} \
         FROM format({DESCRIPTOR_ROWS_FORMAT}, '{structure}', {{rows:{DESCRIPTOR_ROWS_PARAM_TYPE}}})",
        table = tables.capture_raw(),
        structure = descriptor_rows_structure(),
    );
    let mut params = BTreeMap::new();
    params.insert("rows".to_owned(), Param::Descriptors(rows));
    Statement {
        name: "index.insert_descriptors",
        sql,
        params,
        settings: Settings::default(),
        expect: Expect::Nothing,
    }
}

/// `index.read_committed`: which of these packs (one chunk) the inventory
/// already holds.
pub fn read_committed(tables: &Tables, packs: Vec<PackRef>) -> Statement {
    let mut params = BTreeMap::new();
    params.insert("packs".to_owned(), Param::StorePacks(packs));
    Statement {
        name: "index.read_committed",
        sql: format!(
            "SELECT DISTINCT store_id, pack_id FROM {inventory} WHERE (store_id, pack_id) IN \
             (SELECT p.1, p.2 FROM (SELECT arrayJoin({{packs:Array(Tuple(String, UUID))}}) AS p))",
            inventory = tables.pack_inventory_raw(),
        ),
        params,
        settings: CONSISTENT,
        expect: Expect::Rows(pack_columns()),
    }
}

/// The columns of a read that returns packs: `store_id String, pack_id UUID`.
pub(crate) fn pack_columns() -> Vec<Column> {
    vec![
        Column {
            name: "store_id",
            ty: ColumnType::String,
        },
        Column {
            name: "pack_id",
            ty: ColumnType::Uuid,
        },
    ]
}

/// `index.insert_inventory` (`commit_packs`): record one chunk of published
/// packs in the replay guard, at the version that published them. Refuses
/// version 0.
pub fn commit_packs(
    tables: &Tables,
    version: u64,
    publish_id: Uuid,
    packs: Vec<PackRef>,
) -> Result<Statement, IndexError> {
    if version == 0 {
        return Err(IndexError::CommitAtVersionZero);
    }
    let mut params = BTreeMap::new();
    params.insert(INDEX_VERSION_PARAM.to_owned(), Param::UInt64(version));
    params.insert("publish_id".to_owned(), Param::Uuid(publish_id));
    params.insert("packs".to_owned(), Param::StorePacks(packs));
    Ok(Statement {
        name: "index.insert_inventory",
        sql: format!(
            "INSERT INTO {inventory} (store_id, pack_id, index_version, publish_id, committed_at_ns) \
             SELECT p.1, p.2, {{{INDEX_VERSION_PARAM}:UInt64}}, {{publish_id:UUID}}, \
             {SERVER_NOW_NS} \
             FROM (SELECT arrayJoin({{packs:Array(Tuple(String, UUID))}}) AS p)",
            inventory = tables.pack_inventory_raw(),
        ),
        params,
        settings: Settings::default(),
        expect: Expect::Nothing,
    })
}
