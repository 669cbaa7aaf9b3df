//! The allocator's statements.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::fragments::{INDEX_VERSION_PARAM, SERVER_NOW_NS};
use crate::lease::sql::CONSISTENT;
use crate::statement::{Column, ColumnType, Expect, Param, Settings, Statement};
use crate::tables::Tables;

/// `allocate.read_head`: the highest version claimed or published. The
/// watermark table is included so that a retention job pruning old claims can
/// never hand out a version at or below the published head.
pub fn read_head(tables: &Tables) -> Statement {
    Statement {
        name: "allocate.read_head",
        sql: format!(
            "SELECT greatest(ifNull((SELECT max(index_version) FROM {claims}), 0), \
             ifNull((SELECT max(index_version) FROM {watermark}), 0)) AS head",
            claims = tables.version_claims(),
            watermark = tables.index_watermark(),
        ),
        params: BTreeMap::new(),
        settings: CONSISTENT,
        expect: Expect::Rows(vec![Column {
            name: "head",
            ty: ColumnType::UInt64,
        }]),
        data: None,
    }
}

/// `allocate.insert_claim`: append a claim for `version`.
pub fn insert_claim(tables: &Tables, version: u64, claim_id: Uuid) -> Statement {
    let mut params = BTreeMap::new();
    params.insert(INDEX_VERSION_PARAM.to_owned(), Param::UInt64(version));
    params.insert("claim_id".to_owned(), Param::Uuid(claim_id));
    Statement {
        name: "allocate.insert_claim",
        sql: format!(
            "INSERT INTO {claims} (index_version, claim_id, claimed_at_ns) \
             SELECT {{{INDEX_VERSION_PARAM}:UInt64}}, {{claim_id:UUID}}, {SERVER_NOW_NS}",
            claims = tables.version_claims(),
        ),
        params,
        settings: Settings::default(),
        expect: Expect::Nothing,
        data: None,
    }
}

/// `allocate.read_claims`: every claim at `version`.
pub fn read_claims(tables: &Tables, version: u64) -> Statement {
    let mut params = BTreeMap::new();
    params.insert(INDEX_VERSION_PARAM.to_owned(), Param::UInt64(version));
    Statement {
        name: "allocate.read_claims",
        sql: format!(
            "SELECT claim_id FROM {claims} WHERE index_version = {{{INDEX_VERSION_PARAM}:UInt64}}",
            claims = tables.version_claims(),
        ),
        params,
        settings: CONSISTENT,
        expect: Expect::Rows(vec![Column {
            name: "claim_id",
            ty: ColumnType::Uuid,
        }]),
        data: None,
    }
}
