//! The canonical guard fragments, and what they mean.
//!
//! Every statement that needs a guard embeds the text produced here verbatim,
//! and the model checker recognises a guard by finding exactly this text in a
//! statement's SQL. A builder that drops or edits a guard therefore loses it
//! in the model too, and the safety properties fail there first.
//!
//! Recognising the text is not enough: an edit INSIDE a fragment (a
//! comparison turned, a key dropped from the order) would still be found,
//! and the model would go on applying the old meaning. So each fragment's
//! meaning is written once, in [`meaning`], as a pure function over table
//! rows; the model, the test fakes and the trace replay evaluate guards only
//! through it, and a differential test (`capcat-clickhouse`'s
//! `fragments_live`) evaluates every fragment on the real engine against
//! the same function over generated table states. A fragment and its
//! meaning that drift apart fail that test.

use crate::statement::{Param, Statement};
use crate::tables::Tables;

pub mod meaning;

/// The server's clock in nanoseconds, as every statement that reads it
/// spells it (an `Int64`). Written once so that the differential test can
/// bind the clock to a value of its own choosing by replacing exactly this
/// text, and check this text itself against the host clock.
pub const SERVER_NOW_NS: &str = "toUnixTimestamp64Nano(now64(9))";

/// The placeholder name of the fencing lease id in [`lease_fence`].
pub const LEASE_ID_PARAM: &str = "lease_id";
/// The placeholder name of the version in [`version_barrier`].
pub const INDEX_VERSION_PARAM: &str = "index_version";

/// The placeholder name of the fence's margin in [`lease_fence`].
pub const FENCE_MARGIN_PARAM: &str = "fence_margin_ns";
/// The placeholder name of the held row's term in [`lease_fence`].
pub const LEASE_TERM_PARAM: &str = "lease_term";
/// The placeholder name of the held row's expiry in [`lease_fence`].
pub const LEASE_EXPIRES_PARAM: &str = "lease_expires_ns";

/// The one total order of lease rows, highest first, shared by the fence,
/// the head read and the model checker.
///
/// `(term, lease_id)` alone is not total: a holder's own rows can tie there
/// (a renewal claim sent twice, a late tombstone at the term of its own
/// claim), and then the server would pick either row, so that one statement
/// could read a live head and the next one a dead one. With the expiry as
/// the last key every row the fence can tell apart has its own place; rows
/// equal in all three are the same row to every reader.
pub const LEASE_ORDER: &str = "term DESC, lease_id DESC, expires_at_ns DESC";

/// `LEASE_FENCE`: true only while the lease head is EXACTLY the row the
/// client holds, `({lease_term:UInt64}, {lease_id:UUID},
/// {lease_expires_ns:UInt64})` (its last claim's term, id and server-stamped
/// expiry), and that row will still be live by the SERVER's clock once the
/// statement's whole execution cap (plus the engine's measured slack,
/// together `{fence_margin_ns:UInt64}`) has passed.
///
/// The margin is what makes a passed fence a promise: a statement that
/// passes it at server time `t` lands (or is killed) by `t + cap + slack`,
/// and no other lease can read itself back as the holder before the head
/// row's expiry, which is later still. A fence that only asked for the head
/// to be live now (the seed's) lets a statement evaluated just before
/// expiry land after a successor published (`MarginlessFence`).
///
/// Naming the exact row is what bounds a statement in time whenever the
/// server STARTS it: ClickHouse counts `max_execution_time` from a query's
/// start, so a statement queued on the server (or held up on the network)
/// may start long after its client gave up on it. Under this fence it can
/// pass only while the row it names is the head and outlives the margin,
/// so it lands, if ever, before that row's expiry; the holder's next
/// renewal or tombstone supersedes the row and fences it out. A fence on
/// the lease id alone (`LeaseIdFence`) is renewed with the lease: an
/// abandoned statement could start after its holder renewed and published
/// a later version, and land under a snapshot pinned since.
///
/// One subquery reads one head row, and the outer `count()` tests every
/// column of that same row: two scalar subqueries would be two reads, and a
/// takeover between them could pair the old holder's `lease_id` with the
/// new holder's expiry. `count()` over no rows is 0, so an empty lease
/// table fences everybody out instead of raising "Scalar subquery returned
/// empty result".
pub fn lease_fence(tables: &Tables) -> String {
    format!(
        "(SELECT count() FROM (SELECT term, lease_id, expires_at_ns FROM {lease} \
         ORDER BY {LEASE_ORDER} LIMIT 1) \
         WHERE term = {{{LEASE_TERM_PARAM}:UInt64}} \
         AND lease_id = {{{LEASE_ID_PARAM}:UUID}} \
         AND expires_at_ns = {{{LEASE_EXPIRES_PARAM}:UInt64}} \
         AND expires_at_ns > {SERVER_NOW_NS} + {{{FENCE_MARGIN_PARAM}:UInt64}}) = 1",
        lease = tables.publisher_lease(),
    )
}

/// The row a fenced statement names, read off its bound parameters
/// (`{lease_term}`, `{lease_id}`, `{lease_expires_ns}`): what the model,
/// the test fakes and the replay hand to [`meaning::lease_fence`]. `None`
/// when a parameter is missing or of another type.
pub fn fenced_row(stmt: &Statement) -> Option<meaning::HeldRow> {
    let u64_of = |name: &str| match stmt.params.get(name) {
        Some(Param::UInt64(v)) => Some(*v),
        _ => None,
    };
    let lease_id = match stmt.params.get(LEASE_ID_PARAM) {
        Some(Param::Uuid(id)) => *id,
        _ => return None,
    };
    Some(meaning::HeldRow {
        term: u64_of(LEASE_TERM_PARAM)?,
        lease_id,
        expires_at_ns: u64_of(LEASE_EXPIRES_PARAM)?,
    })
}

/// The placeholder name of the term a claim read-back checks.
pub const TERM_PARAM: &str = "term";

/// `CLAIM_READ_BACK`: the WHERE clause of `lease.read_claims`. It returns
/// every row at or above the claimed `{term:UInt64}` and every row of
/// ANOTHER lease that is live by the server's clock, at any term, unless
/// that lease was released (a tombstone, expiry 0, carries its lease_id:
/// its holder sent it after its last statement completed).
///
/// The claimant holds only if every row returned is its own: nobody else
/// claimed its term or above, and no other lease is live anywhere. Looking
/// at its own term alone (the seed's read-back) let a claim retry that read
/// an expired head land ABOVE the previous holder's live renewal and hold
/// beside it, while that holder's fenced statement was still in flight
/// (`OwnTermReadBack`). One predicate in one SELECT reads one snapshot with
/// one clock reading.
pub fn claim_read_back(tables: &Tables) -> String {
    format!(
        "term >= {{{TERM_PARAM}:UInt64}} \
         OR (lease_id != {{{LEASE_ID_PARAM}:UUID}} AND expires_at_ns > {SERVER_NOW_NS} \
         AND lease_id NOT IN (SELECT lease_id FROM {lease} WHERE expires_at_ns = 0))",
        lease = tables.publisher_lease(),
    )
}

/// The placeholder name of the number of packs in [`manifest_complete`].
pub const MANIFEST_PACKS_PARAM: &str = "manifest_packs";

/// `MANIFEST_COMPLETE`: true only while every manifest row of this publish
/// attempt, `({index_version:UInt64}, {publish_id:UUID})`, stands: as many
/// distinct packs as `{manifest_packs:UInt64}`.
///
/// It guards the commit row, so a commit row never makes a publish
/// visible without its members. An `INSERT ... SELECT` whose guard is false
/// succeeds and writes nothing; without this check a manifest chunk fenced
/// out by a moment's lease trouble, followed by a commit row whose fence
/// passed again, reported `Won` for a publish that admits no pack
/// (`UnpairedCommitRow`).
pub fn manifest_complete(tables: &Tables) -> String {
    format!(
        "(SELECT uniqExact(store_id, pack_id) FROM {manifest} \
         WHERE index_version = {{{INDEX_VERSION_PARAM}:UInt64}} AND publish_id = {{publish_id:UUID}}) \
         = {{{MANIFEST_PACKS_PARAM}:UInt64}}",
        manifest = tables.snapshot_manifest(),
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

// The membership predicate shared by the reader and the public view
// (`{p}_capture`) and the schema guard's membership count.

/// How far membership reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MembershipBound {
    /// Every publish that has landed: the public view's meaning. Every
    /// commit row is at or below the published head by definition, so
    /// the pairing alone is the bound.
    Published,
    /// Publishes at or below a pinned version, bound as the
    /// `{pinned_version:UInt64}` parameter: the reader's meaning. This is what
    /// makes a pinned snapshot unable to grow.
    Pinned,
}

/// The name of the parameter carrying the pinned version.
pub const PINNED_VERSION_PARAM: &str = "pinned_version";

/// `(index_version, publish_id) IN (<commit rows>)`: a manifest row
/// counts only when the commit row of the SAME publish stands.
///
/// Pairing on the version alone would let anyone who wrote manifest rows
/// at V (a publish that lost, an operator) have them admitted by whoever
/// won V. A lost publish never writes its commit row, so the manifest
/// rows it left behind are inert.
pub fn published_pairs(tables: &Tables, bound: MembershipBound) -> String {
    let upper = match bound {
        MembershipBound::Published => String::new(),
        MembershipBound::Pinned => {
            format!(" WHERE index_version <= {{{PINNED_VERSION_PARAM}:UInt64}}")
        }
    };
    format!(
        "(index_version, publish_id) IN (SELECT index_version, publish_id FROM {}{upper})",
        tables.index_watermark()
    )
}

/// `index_version IN (<published versions at or below W>)`, applied to
/// descriptor rows by a pinned read: only rows written for a version that
/// was PUBLISHED at or below W resolve.
///
/// Membership alone says which PACKS a snapshot holds, not which rows of
/// them. A pack that is a member at W can gain more rows later: a pass
/// that ran again for it (a crash between its `Won` and its inventory row,
/// or a commit row that landed after its client was told it timed out)
/// writes descriptor rows at a version of its own. Above W, `argMax` would
/// prefer them at every pinned W (`RowsAbovePinned`); below W, at a
/// version that pass claimed but never published (a successor had already
/// published above it), a bound of `index_version <= W` alone still admits
/// them (`UnpublishedRowsResolve`). Every version has one allocator (the
/// sole-claimant claim), so a version with a commit row was published by
/// the pass that wrote its descriptor rows.
pub fn pinned_rows(tables: &Tables) -> String {
    format!(
        "index_version IN (SELECT index_version FROM {} \
         WHERE index_version <= {{{PINNED_VERSION_PARAM}:UInt64}})",
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
