//! The rejected designs' SQL: statement rewrites that rebuild a canonical
//! statement as a rejected design would have written it, and the text of
//! the rejected fragments.
//!
//! The model checker recognises a guard only by finding the canonical
//! fragment text of [`crate::fragments`] in a statement's SQL. These
//! rewrites edit that text here, in the crate that owns it, so the model
//! never holds a copy of any SQL: a rewritten statement simply stops
//! carrying the fragment, and the model stops applying the guard.

use std::collections::BTreeMap;

use crate::fragments::version_barrier;
use crate::fragments::{
    FENCE_MARGIN_PARAM, LEASE_ID_PARAM, LEASE_ORDER, MembershipBound, PINNED_VERSION_PARAM,
    SERVER_NOW_NS, TERM_PARAM, claim_read_back, lease_fence, manifest_complete,
    membership_predicate, pinned_rows,
};
use crate::statement::{Column, ColumnType, Expect, Param, Statement};
use crate::tables::Tables;

/// `stmt` with every `from` in its SQL replaced by `to`.
fn replaced(stmt: &Statement, from: &str, to: &str) -> Statement {
    let mut out = stmt.clone();
    out.sql = stmt.sql.replace(from, to);
    out
}

/// `stmt` with the lease fence (`AND LEASE_FENCE`) cut out of its SQL: the
/// mutation-guard hook. A publish statement rebuilt this way still carries
/// its version barrier and nothing else.
pub fn without_lease_fence(stmt: &Statement, tables: &Tables) -> Statement {
    let fence = lease_fence(tables);
    replaced(
        &replaced(stmt, &format!(" AND {fence}"), ""),
        &fence,
        "1 = 1",
    )
}

/// A fence on the head's lease id alone, asking its expiry to be beyond
/// `now + {bound}` (the text both rejected lease-id fences share).
fn head_lease_id_fence(tables: &Tables, bound: &str) -> String {
    format!(
        "(SELECT count() FROM (SELECT lease_id, expires_at_ns FROM {lease} \
         ORDER BY {LEASE_ORDER} LIMIT 1) \
         WHERE lease_id = {{{LEASE_ID_PARAM}:UUID}} \
         AND expires_at_ns > {SERVER_NOW_NS}{bound}) = 1",
        lease = tables.publisher_lease(),
    )
}

/// `stmt` with the canonical fence replaced by `text`.
fn with_fence(stmt: &Statement, tables: &Tables, text: &str) -> Statement {
    replaced(stmt, &lease_fence(tables), text)
}

/// The fence on the lease id alone, with the margin (this project's fence
/// before the exact-row fence): the head's lease id must be
/// `{lease_id:UUID}` and outlive the margin, whichever of that lease's rows
/// heads the log. The term and expiry parameters stay bound but unused.
pub fn lease_id_fence_text(tables: &Tables) -> String {
    head_lease_id_fence(tables, &format!(" + {{{FENCE_MARGIN_PARAM}:UInt64}}"))
}

/// `stmt` with the canonical fence replaced by [`lease_id_fence_text`].
pub fn lease_id_fence(stmt: &Statement, tables: &Tables) -> Statement {
    with_fence(stmt, tables, &lease_id_fence_text(tables))
}

/// The seed's fence: the head must be `{lease_id:UUID}` and live NOW, with
/// no margin for the statement's own execution. The margin parameter stays
/// bound but unused, so only the text differs.
pub fn marginless_fence_text(tables: &Tables) -> String {
    head_lease_id_fence(tables, "")
}

/// `stmt` with the canonical fence replaced by [`marginless_fence_text`].
pub fn marginless_fence(stmt: &Statement, tables: &Tables) -> Statement {
    with_fence(stmt, tables, &marginless_fence_text(tables))
}

/// The seed's claim read-back predicate: the claimed term only.
pub fn own_term_read_back_text() -> String {
    format!("term = {{{TERM_PARAM}:UInt64}}")
}

/// `stmt` (a `lease.read_claims`) reading the claimed term only.
pub fn own_term_read_back(stmt: &Statement, tables: &Tables) -> Statement {
    replaced(stmt, &claim_read_back(tables), &own_term_read_back_text())
}

/// `stmt` (a `publish.insert_commit_row`) without `AND MANIFEST_COMPLETE`.
pub fn without_manifest_check(stmt: &Statement, tables: &Tables) -> Statement {
    replaced(stmt, &format!(" AND {}", manifest_complete(tables)), "")
}

/// `stmt` (a pinned reader statement) without its bound on descriptor rows
/// ([`pinned_rows`]): membership alone decides, and `argMax` may resolve a
/// row written above W.
pub fn rows_above_pinned(stmt: &Statement, tables: &Tables) -> Statement {
    replaced(stmt, &format!("{}\n      AND ", pinned_rows(tables)), "")
}

/// The row bound before it asked for a published version:
/// `index_version <= {pinned_version:UInt64}`.
pub fn rows_at_or_below_text() -> String {
    format!("index_version <= {{{PINNED_VERSION_PARAM}:UInt64}}")
}

/// `stmt` (a pinned reader statement) bounding its descriptor rows by
/// [`rows_at_or_below_text`]: rows of a version claimed and never
/// published, below W, still resolve.
pub fn unpublished_rows_resolve(stmt: &Statement, tables: &Tables) -> Statement {
    replaced(stmt, &pinned_rows(tables), &rows_at_or_below_text())
}

/// The rejected membership predicate: a manifest row counts when ANY
/// commit row at its version stands, whoever wrote it (no `publish_id`
/// pairing). Whoever wins V then admits whatever anyone wrote at V.
pub fn version_only_membership_predicate(tables: &Tables, bound: MembershipBound) -> String {
    let upper = match bound {
        MembershipBound::Published => String::new(),
        MembershipBound::Pinned => {
            format!(" WHERE index_version <= {{{PINNED_VERSION_PARAM}:UInt64}}")
        }
    };
    format!(
        "(store_id, pack_id) IN (SELECT store_id, pack_id FROM {manifest} WHERE index_version IN \
         (SELECT index_version FROM {watermark}{upper}))",
        manifest = tables.snapshot_manifest(),
        watermark = tables.index_watermark(),
    )
}

/// `stmt` (a reader statement) with the canonical pinned membership
/// predicate replaced by [`version_only_membership_predicate`].
pub fn membership_on_version_alone(stmt: &Statement, tables: &Tables) -> Statement {
    let mut out = stmt.clone();
    for bound in [MembershipBound::Pinned, MembershipBound::Published] {
        out.sql = out.sql.replace(
            &membership_predicate(tables, bound),
            &version_only_membership_predicate(tables, bound),
        );
    }
    out
}

/// The rejected two-read fence: lease id and expiry from two separate
/// scalar subqueries. A takeover between the two reads passes it.
pub fn two_subquery_fence_text(tables: &Tables) -> String {
    format!(
        "(SELECT lease_id FROM {lease} ORDER BY {LEASE_ORDER} LIMIT 1) = {{{LEASE_ID_PARAM}:UUID}} \
         AND (SELECT expires_at_ns FROM {lease} ORDER BY {LEASE_ORDER} LIMIT 1) \
         > {SERVER_NOW_NS} + {{{FENCE_MARGIN_PARAM}:UInt64}}",
        lease = tables.publisher_lease(),
    )
}

/// `stmt` with the canonical fence replaced by [`two_subquery_fence_text`].
pub fn two_subquery_fence(stmt: &Statement, tables: &Tables) -> Statement {
    with_fence(stmt, tables, &two_subquery_fence_text(tables))
}

/// `stmt` (a publish INSERT) with its whole guard, `VERSION_BARRIER AND
/// LEASE_FENCE`, replaced by `1 = 1`: the unguarded writes of the
/// post-write-check design. The commit row keeps `AND MANIFEST_COMPLETE`.
pub fn without_publish_guard(stmt: &Statement, tables: &Tables) -> Statement {
    let guard = format!("{} AND {}", version_barrier(tables), lease_fence(tables));
    replaced(stmt, &guard, "1 = 1")
}

/// `stmt` (a `lease.release`) writing its tombstone whatever the head is:
/// the fence replaced by `1 = 1`.
pub fn unfenced_release(stmt: &Statement, tables: &Tables) -> Statement {
    with_fence(stmt, tables, "1 = 1")
}

/// `stmt` without its `max_execution_time`.
pub fn without_execution_cap(stmt: &Statement) -> Statement {
    let mut out = stmt.clone();
    out.settings.max_execution_time_s = None;
    out
}

/// `stmt` (a fenced statement) with its execution cap set to `cap_s` whole
/// seconds and its fence margin to the cap plus `slack_ns`, as a
/// configuration whose cap is not below the lease TTL would build it.
pub fn with_execution_cap(stmt: &Statement, cap_s: u32, slack_ns: u64) -> Statement {
    let mut out = stmt.clone();
    out.settings.max_execution_time_s = Some(cap_s);
    out.params.insert(
        FENCE_MARGIN_PARAM.to_owned(),
        Param::UInt64((u64::from(cap_s) * 1_000_000_000).saturating_add(slack_ns)),
    );
    out
}

/// `publish.read_highest_publish_ids`: the publish ids at the highest
/// published version, read AFTER the unguarded writes of the post-write
/// check. "Am I the highest?" comes too late: the rows it would veto are
/// already durable.
pub fn read_highest_publish_ids(tables: &Tables) -> Statement {
    Statement {
        name: "publish.read_highest_publish_ids",
        sql: format!(
            "SELECT DISTINCT publish_id FROM {watermark} WHERE index_version = \
             (SELECT max(index_version) FROM {watermark})",
            watermark = tables.index_watermark(),
        ),
        params: BTreeMap::new(),
        settings: crate::lease::sql::CONSISTENT,
        expect: Expect::Rows(vec![Column {
            name: "publish_id",
            ty: ColumnType::Uuid,
        }]),
        data: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn tables() -> Tables {
        Tables::new("t").expect("valid prefix")
    }

    #[test]
    fn the_fence_hook_removes_exactly_the_fence() {
        let cfg = Config::default();
        let stmt = crate::publish::sql::insert_commit_row(
            &tables(),
            &cfg,
            3,
            uuid::Uuid::from_u128(1),
            &crate::lease::Lease {
                lease_id: uuid::Uuid::from_u128(2),
                holder: "h".to_owned(),
                term: 1,
                expires_at_ns: 100,
                unsettled_until_ns: 0,
            },
            1,
        );
        assert!(stmt.sql.contains(&lease_fence(&tables())));
        let cut = without_lease_fence(&stmt, &tables());
        assert!(!cut.sql.contains(&lease_fence(&tables())));
        assert!(cut.sql.contains(&version_barrier(&tables())));
    }
}
