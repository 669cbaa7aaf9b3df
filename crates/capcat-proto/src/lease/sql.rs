//! The lease statements. Public so golden tests and the model checker read
//! exactly what the machines emit.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::config::Config;
use crate::fragments::{
    FENCE_MARGIN_PARAM, LEASE_EXPIRES_PARAM, LEASE_ID_PARAM, LEASE_ORDER, LEASE_TERM_PARAM,
    SERVER_NOW_NS, TERM_PARAM, claim_read_back, lease_fence,
};
use crate::statement::{Column, ColumnType, Expect, Param, Settings, Statement};
use crate::tables::Tables;

use super::Lease;

/// Sequentially consistent reads: both sole-claimant protocols are sound only
/// while a read observes every acknowledged earlier write.
pub(crate) const CONSISTENT: Settings = Settings {
    select_sequential_consistency: true,
    max_execution_time_s: None,
};

/// `lease.read_head`: the two highest rows of the lease log. The second row
/// is the only thing that says whether the head term is contested.
///
/// Every row also carries the latest expiry of ANY row at the head term
/// (`term_expires_at_ns`) and whether the server judges it live
/// (`term_live`): a term is held while any row at it is live, even when the
/// head row itself is a dead release tombstone that landed at a term a new
/// holder had already claimed. Both come from the same statement (one
/// snapshot, one server clock reading).
pub fn read_head(tables: &Tables) -> Statement {
    Statement {
        name: "lease.read_head",
        sql: format!(
            "SELECT term, lease_id, holder, expires_at_ns, \
             toUInt64(expires_at_ns > {SERVER_NOW_NS}) AS live, \
             toUInt64(ifNull((SELECT max(expires_at_ns) FROM {lease} \
             WHERE term = (SELECT max(term) FROM {lease})), 0)) AS term_expires_at_ns, \
             toUInt64(term_expires_at_ns > {SERVER_NOW_NS}) AS term_live \
             FROM {lease} ORDER BY {LEASE_ORDER} LIMIT 2",
            lease = tables.publisher_lease()
        ),
        params: BTreeMap::new(),
        settings: CONSISTENT,
        expect: Expect::Rows(vec![
            Column {
                name: "term",
                ty: ColumnType::UInt64,
            },
            Column {
                name: "lease_id",
                ty: ColumnType::Uuid,
            },
            Column {
                name: "holder",
                ty: ColumnType::String,
            },
            Column {
                name: "expires_at_ns",
                ty: ColumnType::UInt64,
            },
            Column {
                name: "live",
                ty: ColumnType::UInt64,
            },
            Column {
                name: "term_expires_at_ns",
                ty: ColumnType::UInt64,
            },
            Column {
                name: "term_live",
                ty: ColumnType::UInt64,
            },
        ]),
        data: None,
    }
}

/// `lease.insert_claim`: append a claim at `term`. Both timestamps come from
/// the server's clock in the same statement, so no publisher's clock (and no
/// skew between two of them) decides whether a lease is live.
pub fn insert_claim(
    tables: &Tables,
    term: u64,
    lease_id: Uuid,
    holder: &str,
    ttl_ns: u64,
) -> Statement {
    let mut params = BTreeMap::new();
    params.insert("term".to_owned(), Param::UInt64(term));
    params.insert(LEASE_ID_PARAM.to_owned(), Param::Uuid(lease_id));
    params.insert("holder".to_owned(), Param::String(holder.to_owned()));
    params.insert("ttl_ns".to_owned(), Param::UInt64(ttl_ns));
    Statement {
        name: "lease.insert_claim",
        sql: format!(
            "INSERT INTO {lease} (term, lease_id, holder, acquired_at_ns, expires_at_ns) \
             SELECT {{term:UInt64}}, {{{LEASE_ID_PARAM}:UUID}}, {{holder:String}}, \
             {SERVER_NOW_NS}, {SERVER_NOW_NS} + {{ttl_ns:UInt64}}",
            lease = tables.publisher_lease()
        ),
        params,
        settings: Settings::default(),
        expect: Expect::Nothing,
        data: None,
    }
}

/// `lease.read_claims`: the sole-claimant check after a claim at `term`.
/// Returns every row at or above `term` and every live row of another
/// lease ([`claim_read_back`]); the claimant holds only if each row is its
/// own.
pub fn read_claims(tables: &Tables, term: u64, lease_id: Uuid) -> Statement {
    let mut params = BTreeMap::new();
    params.insert(TERM_PARAM.to_owned(), Param::UInt64(term));
    params.insert(LEASE_ID_PARAM.to_owned(), Param::Uuid(lease_id));
    Statement {
        name: "lease.read_claims",
        sql: format!(
            "SELECT lease_id, expires_at_ns FROM {lease} WHERE {read_back}",
            lease = tables.publisher_lease(),
            read_back = claim_read_back(tables),
        ),
        params,
        settings: CONSISTENT,
        expect: Expect::Rows(vec![
            Column {
                name: "lease_id",
                ty: ColumnType::Uuid,
            },
            Column {
                name: "expires_at_ns",
                ty: ColumnType::UInt64,
            },
        ]),
        data: None,
    }
}

/// The parameters of [`lease_fence`]: the exact row `lease` holds (its
/// last claim's term, id and expiry) and the margin its statements ask the
/// row to outlive.
pub(crate) fn fence_params(cfg: &Config, lease: &Lease) -> BTreeMap<String, Param> {
    let mut params = BTreeMap::new();
    params.insert(LEASE_ID_PARAM.to_owned(), Param::Uuid(lease.lease_id));
    params.insert(LEASE_TERM_PARAM.to_owned(), Param::UInt64(lease.term));
    params.insert(
        LEASE_EXPIRES_PARAM.to_owned(),
        Param::UInt64(lease.expires_at_ns),
    );
    params.insert(
        FENCE_MARGIN_PARAM.to_owned(),
        Param::UInt64(cfg.fence_margin_ns()),
    );
    params
}

/// `lease.release`: ONE fenced `INSERT ... SELECT` that writes a tombstone
/// (expiry 0) above the head only while the head is still the row this
/// lease holds and live. Reading the head and then writing would let a
/// stale writer that shuts down cleanly revoke a successor's live lease;
/// here the check and the write are the same server-side statement. It
/// carries the publish statements' cap, so a tombstone, like every fenced
/// row, lands within the margin its fence asked for.
pub fn release(tables: &Tables, cfg: &Config, lease: &Lease) -> Statement {
    let mut params = fence_params(cfg, lease);
    params.insert("holder".to_owned(), Param::String(lease.holder.clone()));
    let guard = lease_fence(tables);
    Statement {
        name: "lease.release",
        sql: format!(
            "INSERT INTO {lease} (term, lease_id, holder, acquired_at_ns, expires_at_ns) \
             SELECT ifNull((SELECT max(term) FROM {lease}), 0) + 1, {{{LEASE_ID_PARAM}:UUID}}, \
             {{holder:String}}, {SERVER_NOW_NS}, 0 \
             FROM system.one WHERE {guard}",
            lease = tables.publisher_lease()
        ),
        params,
        settings: crate::publish::sql::guarded_settings(cfg),
        expect: Expect::Nothing,
        data: None,
    }
}
