//! The canonical guard fragments.
//!
//! Every statement that needs a guard embeds the text produced here verbatim,
//! and the model checker recognises a guard by finding exactly this text in a
//! statement's SQL. A builder that drops or edits a guard therefore loses it
//! in the model too, and the safety properties fail there first.

use crate::tables::Tables;

/// The placeholder name of the fencing lease id in [`lease_fence`].
pub const LEASE_ID_PARAM: &str = "lease_id";
/// The placeholder name of the version in [`version_barrier`].
pub const INDEX_VERSION_PARAM: &str = "index_version";

/// `LEASE_FENCE`: true only while the lease head is `{lease_id:UUID}` and live
/// by the SERVER's clock.
///
/// One subquery reads one head row, and the outer `count()` tests both halves
/// of that same row: two scalar subqueries would be two reads, and a takeover
/// between them could pair the old holder's `lease_id` with the new holder's
/// expiry. `count()` over no rows is 0, so an empty lease table fences
/// everybody out instead of raising "Scalar subquery returned empty result".
pub fn lease_fence(tables: &Tables) -> String {
    format!(
        "(SELECT count() FROM (SELECT lease_id, expires_at_ns FROM {lease} \
         ORDER BY term DESC, lease_id DESC LIMIT 1) \
         WHERE lease_id = {{{LEASE_ID_PARAM}:UUID}} \
         AND expires_at_ns > toUnixTimestamp64Nano(now64(9))) = 1",
        lease = tables.publisher_lease(),
    )
}

/// `VERSION_BARRIER`: true only while nothing at or above
/// `{index_version:UInt64}` is published. `ifNull(..., 0)` keeps the first
/// publish possible under `aggregate_functions_null_for_empty = 1`, where
/// `max()` over an empty table is NULL.
pub fn version_barrier(tables: &Tables) -> String {
    format!(
        "ifNull((SELECT max(index_version) FROM {watermark}), 0) < {{{INDEX_VERSION_PARAM}:UInt64}}",
        watermark = tables.index_watermark(),
    )
}

/// The rejected two-read fence: lease id and expiry from two separate scalar
/// subqueries. Kept only so the model checker can show why it is wrong.
#[cfg(any(test, feature = "mutations"))]
pub fn two_subquery_fence(tables: &Tables) -> String {
    format!(
        "(SELECT lease_id FROM {lease} ORDER BY term DESC, lease_id DESC LIMIT 1) = {{{LEASE_ID_PARAM}:UUID}} \
         AND (SELECT expires_at_ns FROM {lease} ORDER BY term DESC, lease_id DESC LIMIT 1) \
         > toUnixTimestamp64Nano(now64(9))",
        lease = tables.publisher_lease(),
    )
}

// The membership predicate shared by the reader and the public view
// (`{p}_capture`) and the schema guard's membership count.

/// How far membership reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MembershipBound {
    /// Every publish that has landed: the public view's meaning. Every
    /// watermark row is at or below the published head by definition, so
    /// the pairing alone is the bound.
    Published,
    /// Publishes at or below a pinned watermark, bound as the
    /// `{watermark:UInt64}` parameter: the reader's meaning. This is what
    /// makes a pinned snapshot unable to grow.
    PinnedAtWatermark,
}

/// The name of the parameter carrying the pinned watermark.
pub const WATERMARK_PARAM: &str = "watermark";

/// `(index_version, publish_id) IN (<watermark rows>)`: a manifest row
/// counts only when the watermark row of the SAME publish stands.
///
/// Pairing on the version alone would let anyone who wrote manifest rows
/// at V (a publish that lost, an operator) have them admitted by whoever
/// won V. A lost publish never writes its watermark row, so the manifest
/// rows it left behind are inert.
pub fn published_pairs(tables: &Tables, bound: MembershipBound) -> String {
    let upper = match bound {
        MembershipBound::Published => String::new(),
        MembershipBound::PinnedAtWatermark => {
            format!(" WHERE index_version <= {{{WATERMARK_PARAM}:UInt64}}")
        }
    };
    format!(
        "(index_version, publish_id) IN (SELECT index_version, publish_id FROM {}{upper})",
        tables.index_watermark()
    )
}

/// `(store_id, pack_id) IN (<packs of effective manifest rows>)`, applied to
/// descriptor rows.
///
/// Membership is on the composite pack identity: a pack mirrored to a
/// second store under the SAME pack id is a different member, so matching
/// on `pack_id` alone would admit a mirror into a snapshot pinned before
/// the mirror existed.
pub fn membership_predicate(tables: &Tables, bound: MembershipBound) -> String {
    format!(
        "(store_id, pack_id) IN (SELECT store_id, pack_id FROM {} WHERE {})",
        tables.snapshot_manifest(),
        published_pairs(tables, bound)
    )
}
