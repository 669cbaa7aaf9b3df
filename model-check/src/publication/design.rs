//! The designs the publication model runs: the shipped one and every
//! rejected one, named as in [`crate::names::publication`].

use capcat_proto::config::Variant;

use crate::names::publication as n;

/// A protocol design the publication model can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Design {
    /// The design the project ships.
    Shipped,
    /// Publish INSERTs carry the version barrier but no lease fence.
    BarrierOnly,
    /// Unguarded publish INSERTs, then "am I the highest?".
    PostWriteCheck,
    /// The fence read as two scalar subqueries (two reads).
    TwoSubqueryFence,
    /// The read-back counts rows at V instead of finding its publish_id.
    CountOnlyReadBack,
    /// Membership on the version alone, without publish_id pairing.
    MembershipOnVersionAlone,
    /// Release writes its tombstone without the fence.
    UnfencedRelease,
    /// A holder's re-acquire mints a fresh lease_id instead of presenting
    /// the lease it holds.
    FreshLeaseIdOnReacquire,
    /// Publish INSERTs carry no `max_execution_time`.
    NoExecutionCap,
    /// The execution cap equals the lease TTL.
    CapAtLeastTtl,
    /// The index pass records the inventory before publishing.
    InventoryBeforePublish,
    /// An acquire takes a contested live head term at once (capcat-proto's
    /// acquire before it adopted the fix the model found; restored with
    /// `Config::with_wait_out_contested_term(false)`).
    ContestedTermTakenAtOnce,
    /// The seed's fence: the head is live now, no margin for the
    /// statement's own execution.
    MarginlessFence,
    /// The seed's claim read-back: the claimed term only.
    OwnTermReadBack,
    /// The pinned read without `index_version <= W` on descriptor rows.
    RowsAboveWatermark,
    /// The fence names the lease id, not the exact head row.
    LeaseIdFence,
    /// The caller forgets a guarded statement that timed out (the lease's
    /// unsettled mark) and acts at once.
    NoSettleAfterTimeout,
    /// The pinned read resolves rows of every version at or below W,
    /// published or not.
    UnpublishedRowsResolve,
}

impl Design {
    /// Every design this model runs, shipped first.
    pub const ALL: [Design; 18] = [
        Design::Shipped,
        Design::BarrierOnly,
        Design::PostWriteCheck,
        Design::TwoSubqueryFence,
        Design::CountOnlyReadBack,
        Design::MembershipOnVersionAlone,
        Design::UnfencedRelease,
        Design::FreshLeaseIdOnReacquire,
        Design::NoExecutionCap,
        Design::CapAtLeastTtl,
        Design::InventoryBeforePublish,
        Design::ContestedTermTakenAtOnce,
        Design::MarginlessFence,
        Design::OwnTermReadBack,
        Design::RowsAboveWatermark,
        Design::LeaseIdFence,
        Design::NoSettleAfterTimeout,
        Design::UnpublishedRowsResolve,
    ];

    /// The shared name (`names::publication::*`).
    pub fn name(self) -> &'static str {
        match self {
            Design::Shipped => n::SHIPPED,
            Design::BarrierOnly => n::BARRIER_ONLY,
            Design::PostWriteCheck => n::POST_WRITE_CHECK,
            Design::TwoSubqueryFence => n::TWO_SUBQUERY_FENCE,
            Design::CountOnlyReadBack => n::COUNT_ONLY_READ_BACK,
            Design::MembershipOnVersionAlone => n::MEMBERSHIP_ON_VERSION_ALONE,
            Design::UnfencedRelease => n::UNFENCED_RELEASE,
            Design::FreshLeaseIdOnReacquire => n::FRESH_LEASE_ID_ON_REACQUIRE,
            Design::NoExecutionCap => n::NO_EXECUTION_CAP,
            Design::CapAtLeastTtl => n::CAP_AT_LEAST_TTL,
            Design::InventoryBeforePublish => n::INVENTORY_BEFORE_PUBLISH,
            Design::ContestedTermTakenAtOnce => n::CONTESTED_TERM_TAKEN_AT_ONCE,
            Design::MarginlessFence => n::MARGINLESS_FENCE,
            Design::OwnTermReadBack => n::OWN_TERM_READ_BACK,
            Design::RowsAboveWatermark => n::ROWS_ABOVE_WATERMARK,
            Design::LeaseIdFence => n::LEASE_ID_FENCE,
            Design::NoSettleAfterTimeout => n::NO_SETTLE_AFTER_TIMEOUT,
            Design::UnpublishedRowsResolve => n::UNPUBLISHED_ROWS_RESOLVE,
        }
    }

    /// The design with this shared name, if this model runs it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The capcat-proto variant that builds this design's statements and
    /// steps. Designs that are not a statement of capcat-proto's machines
    /// (a membership predicate, an unchecked cap, a re-acquire that forgets
    /// its lease) run the shipped machines and are swapped in by the model
    /// through capcat-proto's `mutations` hooks, never by copying SQL.
    /// `ContestedTermTakenAtOnce` is the shipped machines with the old
    /// acquire (see [`Design::waits_out_contested_term`]).
    pub fn proto_variant(self) -> Variant {
        match self {
            Design::BarrierOnly => Variant::BarrierOnly,
            Design::PostWriteCheck => Variant::PostWriteCheck,
            Design::TwoSubqueryFence => Variant::TwoSubqueryFence,
            Design::CountOnlyReadBack => Variant::CountOnlyReadBack,
            Design::UnfencedRelease => Variant::UnfencedRelease,
            Design::FreshLeaseIdOnReacquire => Variant::FreshLeaseIdOnReacquire,
            Design::NoExecutionCap => Variant::NoExecutionCap,
            Design::InventoryBeforePublish => Variant::InventoryBeforePublish,
            Design::Shipped
            | Design::MembershipOnVersionAlone
            | Design::CapAtLeastTtl
            | Design::ContestedTermTakenAtOnce
            | Design::MarginlessFence
            | Design::OwnTermReadBack
            | Design::RowsAboveWatermark
            | Design::LeaseIdFence
            | Design::NoSettleAfterTimeout
            | Design::UnpublishedRowsResolve => Variant::Shipped,
        }
    }
}

impl Design {
    /// Whether the acquire waits out a contested live head (capcat-proto's
    /// shipped behaviour, set explicitly so the model does not depend on the
    /// default): every design but `ContestedTermTakenAtOnce`.
    pub fn waits_out_contested_term(self) -> bool {
        self != Design::ContestedTermTakenAtOnce
    }
}

impl std::fmt::Display for Design {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
