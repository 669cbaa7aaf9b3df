//! The publication model's properties, named as in
//! [`crate::names::publication`].

use stateright::Property;

use super::model::PublicationModel;
use super::state::{PassEnd, State};
use crate::names::publication as n;

/// Every property of the model. `liveness` adds
/// `HolderEventuallyPublishes`, checked as "every terminal state satisfies
/// it" (sound because the model is acyclic; see docs/model-checking.md).
pub fn all(liveness: bool) -> Vec<Property<PublicationModel>> {
    let mut out = vec![
        Property::always(n::PINNED_SNAPSHOT_NEVER_GROWS, pinned_snapshot_never_grows),
        Property::always(n::FENCED_OUT_WRITES_NOTHING, fenced_out_writes_nothing),
        Property::always(n::REPORTED_MEANS_VISIBLE, reported_means_visible),
        Property::always(
            n::INVENTORY_ONLY_AFTER_PUBLISH,
            inventory_only_after_publish,
        ),
        Property::always(n::ONE_LIVE_LEASE, one_live_lease),
        Property::always(n::VERSIONS_UNIQUE, versions_unique),
        Property::always(n::PINNED_READS_NEVER_CHANGE, pinned_reads_never_change),
    ];
    if liveness {
        out.push(Property::always(
            n::HOLDER_EVENTUALLY_PUBLISHES,
            holder_eventually_publishes,
        ));
    }
    out
}

/// Once the reader has pinned W, the packs admitted at or below W (read
/// with the membership predicate its statement carries) never change, now
/// and on its re-read.
pub fn pinned_snapshot_never_grows(_: &PublicationModel, s: &State) -> bool {
    let Some(p) = &s.reader.pinned else {
        return true;
    };
    s.db.visible_at(p.membership, p.version) == p.snapshot
        && s.reader.reread.as_ref().is_none_or(|r| *r == p.snapshot)
}

/// Once the reader has pinned W, what a read at W returns (each member's
/// resolved row and its `index_version`) never changes, now and on its
/// re-read, and never carries a version above W.
pub fn pinned_reads_never_change(_: &PublicationModel, s: &State) -> bool {
    let Some(p) = &s.reader.pinned else {
        return true;
    };
    let now = s.db.resolved_at(p.membership, p.rows_bounded, p.version);
    now == p.rows
        && p.rows.values().all(|v| *v <= p.version)
        && s.reader.reread_rows.as_ref().is_none_or(|r| *r == p.rows)
}

/// A guarded statement whose lease was not the live head when its guard
/// was read landed no row.
pub fn fenced_out_writes_nothing(_: &PublicationModel, s: &State) -> bool {
    !s.history.fenced_out_landed
}

/// `Won` only when the attempt's commit row stands and its manifest rows
/// pair with it; a lost attempt (`LostRace`, `LeaseLost`) has no commit row
/// row, so nothing it wrote is visible.
pub fn reported_means_visible(_: &PublicationModel, s: &State) -> bool {
    let won_visible = s.history.won.iter().all(|(v, id, packs)| {
        s.db.watermark.contains(&(*v, *id))
            && packs
                .iter()
                .all(|p| s.db.manifest.contains(&(*v, *id, p.clone())))
    });
    let lost_invisible = s
        .history
        .lost
        .iter()
        .all(|id| !s.db.watermark.iter().any(|(_, w)| w == id));
    won_visible && lost_invisible
}

/// Every pack in the inventory is visible through a paired manifest row.
pub fn inventory_only_after_publish(_: &PublicationModel, s: &State) -> bool {
    s.db.inventory.iter().all(|(p, _, _)| s.db.pack_visible(p))
}

/// A release by a non-holder changes nothing, and a holder is never
/// refused by its own live lease.
pub fn one_live_lease(_: &PublicationModel, s: &State) -> bool {
    !s.history.release_by_non_holder && !s.history.refused_by_own_lease
}

/// At most one publish attempt per version.
pub fn versions_unique(_: &PublicationModel, s: &State) -> bool {
    s.history.publishes_at.values().all(|ids| ids.len() <= 1)
}

/// At every terminal state, each publisher that held the lease in its
/// current incarnation has published, found nothing to do, or lost its
/// lease (told so by its pass, or its lease is no longer the uncontested
/// head: another claim took the term), or is waiting out a live row of
/// another lease (which the frozen clock of this check never expires).
pub fn holder_eventually_publishes(m: &PublicationModel, s: &State) -> bool {
    if !m.is_terminal(s) {
        return true;
    }
    let top = s.db.lease.iter().map(|r| r.term).max();
    let at_top: Vec<_> = s.db.lease.iter().filter(|r| Some(r.term) == top).collect();
    let now_ns = super::engine::now_ns(s.now);
    s.publishers.iter().all(|p| {
        let still_head = match at_top.as_slice() {
            [only] => p.own_lease_ids.contains(&only.lease_id),
            _ => false,
        };
        // A live row of another lease (a rival's claim that lost its race
        // but has not expired) refuses every read-back until it expires:
        // the price of the rival-aware read-back, one TTL at most. The
        // frozen clock of this check never lets it expire, so such a
        // holder is excused here; its own rows never excuse it.
        let blocked_by_rival =
            s.db.lease
                .iter()
                .any(|r| !p.own_lease_ids.contains(&r.lease_id) && r.expires_at_ns > now_ns);
        !p.held_ever
            || !still_head
            || blocked_by_rival
            || matches!(
                p.ended,
                Some(PassEnd::Indexed | PassEnd::NothingToDo | PassEnd::LeaseLost)
            )
    })
}
