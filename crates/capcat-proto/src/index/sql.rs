//! The index pass's statements: the descriptor rows' INSERT and the
//! inventory's reads and writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::descriptor::{CaptureDescriptor, capture_column_list};
use crate::fragments::{INDEX_VERSION_PARAM, SERVER_NOW_NS};
use crate::lease::sql::CONSISTENT;
use crate::publish::PackRef;
use crate::statement::{Column, ColumnType, Expect, InsertData, Param, Settings, Statement};
use crate::tables::Tables;

use super::IndexError;

/// `index.insert_descriptors`: write one chunk of descriptor rows.
///
/// Unconditional on purpose: a descriptor row is inert until a manifest row
/// paired with a commit row admits its pack, so writing it needs no guard,
/// and a lost publish leaves rows no reader can see. The caller chunks (at
/// most [`crate::Config::insert_rows`] rows and
/// [`crate::descriptor::MAX_INSERT_DATA_BYTES`] of data per statement).
///
/// The rows are the statement's data ([`InsertData::Descriptors`]), sent in
/// `RowBinary` after the text; the text names every column of
/// [`crate::descriptor::CAPTURE_COLUMNS`] in the data's field order, so the
/// server maps each field to its column by position in that list, not by
/// the table's own column order.
pub fn insert_descriptors(tables: &Tables, rows: impl Into<Arc<[CaptureDescriptor]>>) -> Statement {
    Statement {
        name: "index.insert_descriptors",
        sql: format!(
            "INSERT INTO {table} ({columns}) FORMAT {format}",
            table = tables.capture_raw(),
            columns = capture_column_list(),
            format = InsertData::FORMAT,
        ),
        params: BTreeMap::new(),
        settings: Settings::default(),
        expect: Expect::Nothing,
        data: Some(InsertData::Descriptors(rows.into())),
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
        data: None,
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
        data: None,
    })
}
