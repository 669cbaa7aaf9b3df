//! The meanings of the rejected designs' fragments (see [`super::text`]),
//! checked against the engine like the shipped ones in
//! [`crate::fragments::meaning`], so that a counterexample the model finds
//! for them is one the server would show too.

use crate::fragments::meaning::{LeaseRow, Reach, lease_head, published_pairs, wide_sum};
use crate::publish::PackRef;
use std::collections::BTreeSet;
use uuid::Uuid;

/// The fence on the lease id alone (this project's fence before the
/// exact-row fence): the head's lease id is `lease_id` and its expiry
/// is beyond `now_ns + margin_ns`, whichever of that lease's rows it is.
pub fn lease_id_fence<'a, I>(rows: I, lease_id: Uuid, now_ns: u64, margin_ns: u64) -> bool
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    lease_head(rows).is_some_and(|h| {
        h.lease_id == lease_id && u128::from(h.expires_at_ns) > wide_sum(now_ns, margin_ns)
    })
}

/// The seed's marginless fence: the head is `lease_id` and live now.
pub fn marginless_fence<'a, I>(rows: I, lease_id: Uuid, now_ns: u64) -> bool
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    lease_id_fence(rows, lease_id, now_ns, 0)
}

/// The two-subquery fence's first read: is the head's lease id ours?
pub fn head_id_is<'a, I>(rows: I, lease_id: Uuid) -> bool
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    lease_head(rows).is_some_and(|h| h.lease_id == lease_id)
}

/// The two-subquery fence's second read: does the head (whoever's it
/// is by now) outlive now plus the margin?
pub fn head_outlives<'a, I>(rows: I, now_ns: u64, margin_ns: u64) -> bool
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    lease_head(rows).is_some_and(|h| u128::from(h.expires_at_ns) > wide_sum(now_ns, margin_ns))
}

/// The pinned row bound before it asked for a published version: every
/// row written for a version at or below `w`.
pub fn rows_at_or_below(version: u64, w: u64) -> bool {
    version <= w
}

/// The seed's read-back: the rows at the claimed term only.
pub fn own_term_read_back<'a, I>(rows: I, term: u64) -> Vec<&'a LeaseRow>
where
    I: IntoIterator<Item = &'a LeaseRow>,
{
    rows.into_iter().filter(|r| r.term == term).collect()
}

/// Membership on the version alone: a manifest row counts when ANY
/// commit row at its version stands within `reach`.
pub fn version_only_members<'a, M, W>(manifest: M, watermark: W, reach: Reach) -> BTreeSet<PackRef>
where
    M: IntoIterator<Item = &'a (u64, Uuid, PackRef)>,
    W: IntoIterator<Item = &'a (u64, Uuid)>,
{
    let versions: BTreeSet<u64> = published_pairs(watermark, reach)
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    manifest
        .into_iter()
        .filter(|(v, _, _)| versions.contains(v))
        .map(|(_, _, p)| p.clone())
        .collect()
}
