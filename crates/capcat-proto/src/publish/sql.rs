//! The publish statements.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::config::Config;
use crate::fragments::{
    INDEX_VERSION_PARAM, MANIFEST_PACKS_PARAM, SERVER_NOW_NS, lease_fence, manifest_complete,
    version_barrier,
};
use crate::lease::Lease;
use crate::statement::{Column, ColumnType, Expect, Param, Settings, Statement};
use crate::tables::Tables;

use super::PackRef;

/// The WHERE clause of both publish INSERTs: `VERSION_BARRIER AND LEASE_FENCE`.
pub fn publish_guard(tables: &Tables) -> String {
    format!("{} AND {}", version_barrier(tables), lease_fence(tables))
}

/// Settings of the guarded INSERTs: capped at the publish timeout (whole
/// seconds, below the lease TTL), and sequentially consistent so the guard's
/// subqueries see every acknowledged write.
pub fn guarded_settings(cfg: &Config) -> Settings {
    Settings {
        select_sequential_consistency: true,
        max_execution_time_s: Some(cfg.publish_timeout_s()),
    }
}

fn guarded_params(
    cfg: &Config,
    version: u64,
    publish_id: Uuid,
    lease: &Lease,
) -> BTreeMap<String, Param> {
    let mut params = crate::lease::sql::fence_params(cfg, lease);
    params.insert(INDEX_VERSION_PARAM.to_owned(), Param::UInt64(version));
    params.insert("publish_id".to_owned(), Param::Uuid(publish_id));
    params
}

/// `publish.insert_manifest`: one chunk of manifest rows, guarded.
pub fn insert_manifest(
    tables: &Tables,
    cfg: &Config,
    version: u64,
    publish_id: Uuid,
    lease: &Lease,
    packs: Vec<PackRef>,
) -> Statement {
    let mut params = guarded_params(cfg, version, publish_id, lease);
    params.insert("packs".to_owned(), Param::StorePacks(packs));
    Statement {
        name: "publish.insert_manifest",
        sql: format!(
            "INSERT INTO {manifest} (index_version, publish_id, store_id, pack_id) \
             SELECT {{{INDEX_VERSION_PARAM}:UInt64}}, {{publish_id:UUID}}, p.1, p.2 \
             FROM (SELECT arrayJoin({{packs:Array(Tuple(String, UUID))}}) AS p) \
             WHERE {guard}",
            manifest = tables.snapshot_manifest(),
            guard = publish_guard(tables),
        ),
        params,
        settings: guarded_settings(cfg),
        expect: Expect::Nothing,
        data: None,
    }
}

/// `publish.insert_commit_row`: the row that makes V (and the manifest rows
/// of the same publish_id) visible, guarded by `VERSION_BARRIER AND
/// LEASE_FENCE AND MANIFEST_COMPLETE`: it lands only while all
/// `manifest_packs` manifest rows of this attempt stand, so `Won` means
/// visible.
pub fn insert_commit_row(
    tables: &Tables,
    cfg: &Config,
    version: u64,
    publish_id: Uuid,
    lease: &Lease,
    manifest_packs: u64,
) -> Statement {
    let mut params = guarded_params(cfg, version, publish_id, lease);
    params.insert(
        MANIFEST_PACKS_PARAM.to_owned(),
        Param::UInt64(manifest_packs),
    );
    Statement {
        name: "publish.insert_commit_row",
        sql: format!(
            "INSERT INTO {watermark} (index_version, publish_id, published_at_ns) \
             SELECT {{{INDEX_VERSION_PARAM}:UInt64}}, {{publish_id:UUID}}, {SERVER_NOW_NS} \
             FROM system.one WHERE {guard} AND {complete}",
            watermark = tables.index_watermark(),
            guard = publish_guard(tables),
            complete = manifest_complete(tables),
        ),
        params,
        settings: guarded_settings(cfg),
        expect: Expect::Nothing,
        data: None,
    }
}

/// `publish.read_publish_ids`: which publishes stand at V. Compares
/// identities, not a count: "a row exists at V" says nothing about whose.
pub fn read_publish_ids(tables: &Tables, version: u64) -> Statement {
    let mut params = BTreeMap::new();
    params.insert(INDEX_VERSION_PARAM.to_owned(), Param::UInt64(version));
    Statement {
        name: "publish.read_publish_ids",
        sql: format!(
            "SELECT DISTINCT publish_id FROM {watermark} WHERE index_version = {{{INDEX_VERSION_PARAM}:UInt64}}",
            watermark = tables.index_watermark(),
        ),
        params,
        settings: crate::lease::sql::CONSISTENT,
        expect: Expect::Rows(vec![Column {
            name: "publish_id",
            ty: ColumnType::Uuid,
        }]),
        data: None,
    }
}
