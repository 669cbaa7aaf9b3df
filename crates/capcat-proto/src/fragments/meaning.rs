//! What each guard fragment and each interpreted read MEANS, written once as
//! pure functions over table rows.
//!
//! The fragment texts in [`crate::fragments`] are what the server runs;
//! these functions are what everything else believes the server does: the
//! model checker's simulated engine, the in-memory fakes of the unit tests
//! and the trace replay's predictions all evaluate guards through them and
//! nowhere else. The differential test (`capcat-clickhouse`'s
//! `fragments_live`) evaluates every fragment on the real engine over
//! generated table states and compares it with the function here, so a
//! fragment and its meaning cannot drift apart without a test going red.
//!
//! Domain: times and margins are server nanoseconds below 2^62 (the year
//! 2116), where neither the engine's `Int64 + UInt64` nor the arithmetic
//! here can overflow. A release tombstone has expiry 0.
//!
//! Rows are passed as iterators of references so that the model's BTree
//! sets and a test's vectors (which, like a real table, may hold the same
//! row twice) are read alike. Multiset semantics are kept where the engine
//! keeps them: [`claim_read_back`] returns each matching row as often as it
//! is stored.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use uuid::Uuid;

use crate::publish::PackRef;
use crate::statement::Value;

/// One row of `{p}_publisher_lease`, the columns the protocol reads.
///
/// The derived order is a canonical storage order for BTree sets (Rust's
/// byte order of UUIDs), NOT the server's [`LEASE_ORDER`](super::LEASE_ORDER):
/// ask [`lease_order_key`] for that.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseRow {
    /// The term.
    pub term: u64,
    /// The lease id.
    pub lease_id: Uuid,
    /// Expiry in server nanoseconds (0 for a release tombstone).
    pub expires_at_ns: u64,
    /// The holder's name.
    pub holder: String,
}

/// ClickHouse's order of UUIDs: the low 64 bits (the second half of the
/// text form) compare first, then the high 64 bits. Rust's and Python's
/// byte orders disagree with it, which matters wherever two lease ids tie
/// at the head term.
pub fn uuid_key(u: Uuid) -> (u64, u64) {
    let v = u.as_u128();
    // Truncation is the point: the two halves of the 128-bit value.
    #[allow(clippy::cast_possible_truncation)]
    (v as u64, (v >> 64) as u64)
}

/// The key of [`LEASE_ORDER`](super::LEASE_ORDER)
/// (`term DESC, lease_id DESC, expires_at_ns DESC`): the head is the row
/// with the LARGEST key.
pub fn lease_order_key(row: &LeaseRow) -> (u64, (u64, u64), u64) {
    (row.term, uuid_key(row.lease_id), row.expires_at_ns)
}

/// The lease rows in `LEASE_ORDER`, head first. Rows equal in all three
/// keys keep their relative order; they are the same row to every reader.
pub fn lease_ordered<'a, I>(rows: I) -> Vec<&'a LeaseRow>
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    let mut out: Vec<&LeaseRow> = rows.into_iter().collect();
    out.sort_by_key(|r| Reverse(lease_order_key(r)));
    out
}

/// The head of the lease log: `ORDER BY LEASE_ORDER LIMIT 1`.
pub fn lease_head<'a, I>(rows: I) -> Option<&'a LeaseRow>
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    rows.into_iter().max_by_key(|r| lease_order_key(r))
}

/// The lease row a guarded statement names: `LEASE_FENCE`'s
/// `{lease_term}`, `{lease_id}` and `{lease_expires_ns}` parameters, the
/// row its client's last claim wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HeldRow {
    /// The term of the claim.
    pub term: u64,
    /// The lease id.
    pub lease_id: Uuid,
    /// The expiry the server stamped on the claim.
    pub expires_at_ns: u64,
}

/// `LEASE_FENCE`: the head row is exactly `held` (term, lease id and
/// expiry) and its expiry is beyond `now_ns + margin_ns`. An empty log
/// fences everybody out.
pub fn lease_fence<'a, I>(rows: I, held: HeldRow, now_ns: u64, margin_ns: u64) -> bool
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    lease_head(rows).is_some_and(|h| {
        h.term == held.term
            && h.lease_id == held.lease_id
            && h.expires_at_ns == held.expires_at_ns
            && u128::from(h.expires_at_ns) > wide_sum(now_ns, margin_ns)
    })
}

/// Whether `lease_id` is the live head at `now_ns`, whichever of its rows
/// heads the log: the ground truth the model's `FencedOutWritesNothing`
/// judges a landed row by (not a fragment).
pub fn is_live_head<'a, I>(rows: I, lease_id: Uuid, now_ns: u64) -> bool
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    lease_head(rows).is_some_and(|h| h.lease_id == lease_id && h.expires_at_ns > now_ns)
}

/// Whether a release tombstone (expiry 0) carries `lease_id`.
pub fn released<'a, I>(rows: I, lease_id: Uuid) -> bool
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    rows.into_iter()
        .any(|r| r.lease_id == lease_id && r.expires_at_ns == 0)
}

/// `CLAIM_READ_BACK`: every row at or above `term`, and every row of
/// another lease that is live at `now_ns` and was not released. Rows come
/// back in storage order, as often as they are stored.
pub fn claim_read_back<'a, I>(rows: I, term: u64, lease_id: Uuid, now_ns: u64) -> Vec<&'a LeaseRow>
where
    I: IntoIterator<Item = &'a LeaseRow> + Clone,
{
    rows.clone()
        .into_iter()
        .filter(|r| {
            r.term >= term
                || (r.lease_id != lease_id
                    && r.expires_at_ns > now_ns
                    && !released(rows.clone(), r.lease_id))
        })
        .collect()
}

/// One row of `lease.read_head`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeadRow<'a> {
    /// The row itself.
    pub row: &'a LeaseRow,
    /// `expires_at_ns > now`.
    pub live: bool,
    /// The latest expiry of any row at the head term (0 for an empty log).
    pub term_expires_at_ns: u64,
    /// `term_expires_at_ns > now`.
    pub term_live: bool,
}

impl HeadRow<'_> {
    /// The row as `lease.read_head` returns it, column by column.
    pub fn values(&self) -> Vec<Value> {
        vec![
            Value::UInt64(self.row.term),
            Value::Uuid(self.row.lease_id),
            Value::String(self.row.holder.clone()),
            Value::UInt64(self.row.expires_at_ns),
            Value::UInt64(u64::from(self.live)),
            Value::UInt64(self.term_expires_at_ns),
            Value::UInt64(u64::from(self.term_live)),
        ]
    }
}

/// `lease.read_head`: the two highest rows in `LEASE_ORDER`, each with the
/// head term's latest expiry, all judged at one `now_ns`.
pub fn read_head<'a, I>(rows: I, now_ns: u64) -> Vec<HeadRow<'a>>
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    let ordered = lease_ordered(rows);
    let head_term = ordered.first().map_or(0, |r| r.term);
    let term_expires_at_ns = ordered
        .iter()
        .filter(|r| r.term == head_term)
        .map(|r| r.expires_at_ns)
        .max()
        .unwrap_or(0);
    ordered
        .into_iter()
        .take(2)
        .map(|row| HeadRow {
            row,
            live: row.expires_at_ns > now_ns,
            term_expires_at_ns,
            term_live: term_expires_at_ns > now_ns,
        })
        .collect()
}

/// The term `lease.release` computes on the server for its tombstone:
/// one above the highest term of any row (`ifNull(max(term), 0) + 1`).
pub fn release_term<'a, I>(rows: I) -> u64
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    rows.into_iter()
        .map(|r| r.term)
        .max()
        .unwrap_or(0)
        .saturating_add(1)
}

/// The expiry `lease.insert_claim` computes on the server: its clock
/// reading plus the TTL.
pub fn claim_expiry(now_ns: u64, ttl_ns: u64) -> u64 {
    now_ns.saturating_add(ttl_ns)
}

/// The highest published version, 0 when nothing is (`ifNull(max, 0)`).
pub fn published_head<'a, I>(watermark: I) -> u64
where
    I: IntoIterator<Item = &'a (u64, Uuid)>,
{
    watermark.into_iter().map(|(v, _)| *v).max().unwrap_or(0)
}

/// `VERSION_BARRIER`: nothing at or above `version` is published.
pub fn version_barrier<'a, I>(watermark: I, version: u64) -> bool
where
    I: IntoIterator<Item = &'a (u64, Uuid)>,
{
    published_head(watermark) < version
}

/// `MANIFEST_COMPLETE`: the manifest rows of `(version, publish_id)` name
/// exactly `packs` distinct packs.
pub fn manifest_complete<'a, I>(manifest: I, version: u64, publish_id: Uuid, packs: u64) -> bool
where
    I: IntoIterator<Item = &'a (u64, Uuid, PackRef)>,
{
    let distinct: BTreeSet<&PackRef> = manifest
        .into_iter()
        .filter(|(v, id, _)| *v == version && *id == publish_id)
        .map(|(_, _, p)| p)
        .collect();
    u64::try_from(distinct.len()).is_ok_and(|n| n == packs)
}

/// How far membership reaches, with the pinned version as a value (the
/// text's [`MembershipBound`](super::MembershipBound) names the placeholder).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reach {
    /// Every publish that landed (the public view).
    Published,
    /// Publishes at or below this version (a pinned reader).
    AtOrBelow(u64),
}

/// `published_pairs`: the `(index_version, publish_id)` of every standing
/// commit row within `reach`.
pub fn published_pairs<'a, I>(watermark: I, reach: Reach) -> BTreeSet<(u64, Uuid)>
where
    I: IntoIterator<Item = &'a (u64, Uuid)>,
{
    watermark
        .into_iter()
        .filter(|(v, _)| match reach {
            Reach::Published => true,
            Reach::AtOrBelow(w) => *v <= w,
        })
        .copied()
        .collect()
}

/// The membership predicate: the packs of manifest rows whose publish's
/// commit row stands within `reach`.
pub fn members<'a, M, W>(manifest: M, watermark: W, reach: Reach) -> BTreeSet<PackRef>
where
    M: IntoIterator<Item = &'a (u64, Uuid, PackRef)>,
    W: IntoIterator<Item = &'a (u64, Uuid)>,
{
    let pairs = published_pairs(watermark, reach);
    manifest
        .into_iter()
        .filter(|(v, id, _)| pairs.contains(&(*v, *id)))
        .map(|(_, _, p)| p.clone())
        .collect()
}

/// `pinned_rows`: a descriptor row written for `version` resolves at a
/// pinned version `w` when `version` is at or below `w` and published
/// (a commit row stands at it).
pub fn pinned_row<'a, W>(watermark: W, version: u64, w: u64) -> bool
where
    W: IntoIterator<Item = &'a (u64, Uuid)>,
{
    version <= w && watermark.into_iter().any(|(v, _)| *v == version)
}

/// `allocate.read_head`: the highest version claimed or published.
pub fn allocation_head<'a, C, W>(claims: C, watermark: W) -> u64
where
    C: IntoIterator<Item = &'a (u64, Uuid)>,
    W: IntoIterator<Item = &'a (u64, Uuid)>,
{
    let claimed = claims.into_iter().map(|(v, _)| *v).max().unwrap_or(0);
    claimed.max(published_head(watermark))
}

/// `allocate.read_claims` and `publish.read_publish_ids`: the distinct ids
/// of rows at `version`.
pub fn ids_at<'a, I>(rows: I, version: u64) -> BTreeSet<Uuid>
where
    I: IntoIterator<Item = &'a (u64, Uuid)>,
{
    rows.into_iter()
        .filter(|(v, _)| *v == version)
        .map(|(_, id)| *id)
        .collect()
}

/// `index.read_committed`: which of the `asked` packs the inventory holds
/// (at any version, under any publish).
pub fn committed<'a, I>(inventory: I, asked: &BTreeSet<PackRef>) -> BTreeSet<PackRef>
where
    I: IntoIterator<Item = &'a PackRef>,
{
    inventory
        .into_iter()
        .filter(|p| asked.contains(*p))
        .cloned()
        .collect()
}

/// `now + margin` without overflow.
pub(crate) fn wide_sum(now_ns: u64, margin_ns: u64) -> u128 {
    u128::from(now_ns) + u128::from(margin_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(term: u64, id: u128, expires_at_ns: u64) -> LeaseRow {
        LeaseRow {
            term,
            lease_id: Uuid::from_u128(id),
            expires_at_ns,
            holder: "h".to_owned(),
        }
    }

    #[test]
    fn the_low_half_of_a_uuid_orders_first() {
        // High half larger but low half smaller: ClickHouse puts it below.
        let high = Uuid::from_u128((9 << 64) | 1);
        let low = Uuid::from_u128(2);
        assert!(uuid_key(high) < uuid_key(low));
        assert!(high > low, "Rust's own order says the opposite");
    }

    #[test]
    fn the_head_is_the_highest_term_then_lease_then_expiry() {
        let rows = [row(1, 1, 50), row(2, 1, 10), row(2, 1, 20), row(1, 9, 99)];
        assert_eq!(lease_head(&rows), Some(&rows[2]));
        let ordered: Vec<u64> = lease_ordered(&rows)
            .iter()
            .map(|r| r.expires_at_ns)
            .collect();
        assert_eq!(ordered, [20, 10, 99, 50]);
    }

    #[test]
    fn the_fence_needs_the_head_alive_beyond_the_margin() {
        let rows = [row(1, 1, 100)];
        let held = HeldRow {
            term: 1,
            lease_id: Uuid::from_u128(1),
            expires_at_ns: 100,
        };
        assert!(lease_fence(&rows, held, 10, 89));
        assert!(
            !lease_fence(&rows, held, 10, 90),
            "expiry equal to now + margin"
        );
        let stranger = HeldRow {
            lease_id: Uuid::from_u128(2),
            ..held
        };
        assert!(!lease_fence(&rows, stranger, 10, 0));
        assert!(
            !lease_fence(&[], held, 0, 0),
            "an empty log fences everybody"
        );
    }

    #[test]
    fn the_fence_names_one_row_so_a_renewal_fences_out_what_was_sent_before_it() {
        let sent_under = HeldRow {
            term: 1,
            lease_id: Uuid::from_u128(1),
            expires_at_ns: 100,
        };
        // The holder renewed: its own lease heads the log at a new term.
        let renewed = [row(1, 1, 100), row(2, 1, 150)];
        assert!(!lease_fence(&renewed, sent_under, 10, 0));
        assert!(crate::designs::meaning::lease_id_fence(
            &renewed,
            sent_under.lease_id,
            10,
            0
        ));
        // The same term and id with another expiry is another row.
        let rewritten = [row(1, 1, 120)];
        assert!(!lease_fence(&rewritten, sent_under, 10, 0));
        assert!(is_live_head(&rewritten, sent_under.lease_id, 10));
    }

    /// The model's ground truth for `FencedOutWritesNothing`: a lease is
    /// the live head only while one of its rows heads the log and that row
    /// has not expired. An oracle that said yes too often would let every
    /// fenced-out write pass unseen.
    #[test]
    fn the_live_head_is_the_head_rows_lease_until_that_row_expires() {
        let (mine, rival) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let rows = [row(1, 1, 100), row(2, 2, 80)];
        assert!(is_live_head(&rows, rival, 79));
        assert!(!is_live_head(&rows, rival, 80), "expired at its expiry");
        assert!(
            !is_live_head(&rows, mine, 10),
            "a live row below the head is not the head"
        );
        assert!(!is_live_head(&[], mine, 0), "an empty log has no head");
    }

    #[test]
    fn the_read_back_skips_released_rivals_and_returns_duplicates() {
        let me = Uuid::from_u128(1);
        let rows = [
            row(1, 2, 100),
            row(2, 3, 100),
            row(3, 3, 0),
            row(5, 1, 100),
            row(5, 1, 100),
        ];
        let back: Vec<u64> = claim_read_back(&rows, 5, me, 50)
            .iter()
            .map(|r| r.term)
            .collect();
        assert_eq!(
            back,
            [1, 5, 5],
            "rival 2 is live, rival 3 released, own rows twice"
        );
    }

    #[test]
    fn release_and_claims_compute_what_the_server_computes() {
        assert_eq!(release_term(&[]), 1);
        assert_eq!(release_term(&[row(4, 1, 0), row(2, 1, 9)]), 5);
        assert_eq!(claim_expiry(10, 5), 15);
    }

    #[test]
    fn membership_pairs_on_the_publish_and_stops_at_the_pin() {
        let a = Uuid::from_u128(1);
        let b = Uuid::from_u128(2);
        let p = ("s".to_owned(), Uuid::from_u128(7));
        let q = ("s".to_owned(), Uuid::from_u128(8));
        let manifest = [(1, a, p.clone()), (1, b, q.clone()), (2, a, q.clone())];
        let watermark = [(1, a)];
        assert_eq!(
            members(&manifest, &watermark, Reach::Published),
            BTreeSet::from([p.clone()])
        );
        assert_eq!(
            crate::designs::meaning::version_only_members(&manifest, &watermark, Reach::Published),
            BTreeSet::from([p.clone(), q.clone()])
        );
        assert!(members(&manifest, &watermark, Reach::AtOrBelow(0)).is_empty());
        assert!(manifest_complete(&manifest, 1, a, 1));
        assert!(!manifest_complete(&manifest, 1, a, 2));
        assert!(version_barrier(&watermark, 2));
        assert!(!version_barrier(&watermark, 1));
    }
}
