//! The index pass's own statements (descriptor rows are in
//! [`crate::descriptor::insert_descriptors`]).

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::fragments::{INDEX_VERSION_PARAM, SERVER_NOW_NS};
use crate::lease::sql::CONSISTENT;
use crate::publish::PackRef;
use crate::statement::{Column, ColumnType, Expect, Param, Settings, Statement};
use crate::tables::Tables;

use super::IndexError;

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
        expect: Expect::Rows(vec![
            Column {
                name: "store_id",
                ty: ColumnType::String,
            },
            Column {
                name: "pack_id",
                ty: ColumnType::Uuid,
            },
        ]),
    }
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
