//! Test-only hooks that rebuild canonical statements as the rejected designs
//! would have written them (feature `mutations`, for the model checker).
//!
//! The model checker recognises a guard only by finding the canonical
//! fragment text of [`crate::fragments`] in a statement's SQL. These hooks
//! edit that text here, in the crate that owns it, so the model never holds
//! a copy of any SQL: a mutated statement simply stops carrying the
//! fragment, and the model stops applying the guard.

use crate::fragments::{MembershipBound, WATERMARK_PARAM, lease_fence, membership_predicate};
use crate::statement::Statement;
use crate::tables::Tables;

/// `stmt` with the lease fence (`AND LEASE_FENCE`) cut out of its SQL: the
/// mutation-guard hook. A publish statement rebuilt this way still carries
/// its version barrier and nothing else.
pub fn without_lease_fence(stmt: &Statement, tables: &Tables) -> Statement {
    let fence = lease_fence(tables);
    let mut out = stmt.clone();
    out.sql = stmt
        .sql
        .replace(&format!(" AND {fence}"), "")
        .replace(&fence, "1 = 1");
    out
}

/// The rejected membership predicate: a manifest row counts when ANY
/// watermark row at its version stands, whoever wrote it (no `publish_id`
/// pairing). Whoever wins V then admits whatever anyone wrote at V.
pub fn version_only_membership_predicate(tables: &Tables, bound: MembershipBound) -> String {
    let upper = match bound {
        MembershipBound::Published => String::new(),
        MembershipBound::PinnedAtWatermark => {
            format!(" WHERE index_version <= {{{WATERMARK_PARAM}:UInt64}}")
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
    for bound in [
        MembershipBound::PinnedAtWatermark,
        MembershipBound::Published,
    ] {
        out.sql = out.sql.replace(
            &membership_predicate(tables, bound),
            &version_only_membership_predicate(tables, bound),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::fragments::version_barrier;

    fn tables() -> Tables {
        Tables::new("t").expect("valid prefix")
    }

    #[test]
    fn the_fence_hook_removes_exactly_the_fence() {
        let cfg = Config::default();
        let stmt = crate::publish::sql::insert_watermark(
            &tables(),
            &cfg,
            3,
            uuid::Uuid::from_u128(1),
            uuid::Uuid::from_u128(2),
        );
        assert!(stmt.sql.contains(&lease_fence(&tables())));
        let cut = without_lease_fence(&stmt, &tables());
        assert!(!cut.sql.contains(&lease_fence(&tables())));
        assert!(cut.sql.contains(&version_barrier(&tables())));
    }
}
