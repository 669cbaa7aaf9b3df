//! The rejected protocol designs, in one place outside the machines
//! (feature `designs`, for the model checker, the stress harness and the
//! tests that show each design fail).
//!
//! The machines in this crate carry only the shipped protocol. A rejected
//! design is what a driver sees when it runs a shipped machine through
//! [`Design::wrap`]: each design is a rewrite of the statements the machine
//! sends ([`Design::rewrite`]), of the answers it is handed
//! ([`Design::answer`]), or of the order of its steps (the inventory
//! before the publish). A few designs are a caller's behaviour rather than
//! a machine's, and the model checker plays them itself; [`Design::acts`]
//! says which is which.
//!
//! ```
//! use capcat_proto::designs::Design;
//! use capcat_proto::{Config, Machine, Step, Tables};
//! # use capcat_proto::{Lease, Publish};
//! # use std::collections::BTreeSet;
//! # let lease = Lease { lease_id: uuid::Uuid::from_u128(1), holder: "h".into(),
//! #     term: 1, expires_at_ns: u64::MAX >> 2, unsettled_until_ns: 0 };
//! let (tables, cfg) = (Tables::new("t").unwrap(), Config::default());
//! let packs = BTreeSet::from([("store".to_owned(), uuid::Uuid::from_u128(7))]);
//! let publish = Publish::new(tables.clone(), cfg.clone(), lease, 1, packs, uuid::Uuid::from_u128(2));
//! // The same machine, run as the design without a lease fence.
//! let mut barrier_only = Design::BarrierOnly.wrap(tables, cfg, publish);
//! let Step::Execute(first) = barrier_only.poll() else { unreachable!() };
//! assert_eq!(first.name, "lease.read_head");
//! ```

mod designed;
pub mod meaning;
pub mod text;

pub use designed::{Designable, Designed};
pub use text::*;

use crate::config::Config;
use crate::machine::Input;
use crate::statement::{Rows, Statement, Value};
use crate::tables::Tables;

/// A protocol design: the shipped one and every rejected one.
///
/// This is the one list of designs. The model checker runs each of them
/// (its `--variant` values), the TLA+ spec names them in its `Design`
/// constant, and docs/model-checking.md gives the counterexample of each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Design {
    /// The design the project ships.
    #[default]
    Shipped,
    /// Publish INSERTs carry the version barrier but no lease fence.
    BarrierOnly,
    /// Unguarded publish INSERTs, then "am I the highest?".
    PostWriteCheck,
    /// The fence read as two scalar subqueries (two reads): a takeover
    /// between the two reads passes it.
    TwoSubqueryFence,
    /// The read-back counts rows at V instead of finding its publish_id:
    /// any row at V reads as `Won`.
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
    /// An acquire takes a contested live head term at once, with the
    /// read-back of the claimed term only.
    ContestedTermTakenAtOnce,
    /// The seed's fence: the head is live now, no margin for the
    /// statement's own execution.
    MarginlessFence,
    /// The seed's claim read-back: the claimed term only.
    OwnTermReadBack,
    /// The pinned read without its bound on descriptor rows.
    RowsAbovePinned,
    /// The fence names the lease id, not the exact head row.
    LeaseIdFence,
    /// The caller forgets a guarded statement that timed out (the lease's
    /// unsettled mark) and acts at once.
    NoSettleAfterTimeout,
    /// The pinned read resolves rows of every version at or below W,
    /// published or not.
    UnpublishedRowsResolve,
}

/// Where a design differs from the shipped protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Acts {
    /// Nowhere: the shipped design.
    Nowhere,
    /// In the statements the machines send ([`Design::rewrite`]).
    Statements,
    /// In the statements and in how an answer is read ([`Design::answer`]).
    StatementsAndAnswers,
    /// In how an answer is read.
    Answers,
    /// In the order of the index pass's steps ([`Designed`]).
    StepOrder,
    /// In the caller: what it hands the machines or keeps between them. The
    /// driver plays it (the model checker does).
    Caller,
}

impl Design {
    /// Every design, shipped first.
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
        Design::RowsAbovePinned,
        Design::LeaseIdFence,
        Design::NoSettleAfterTimeout,
        Design::UnpublishedRowsResolve,
    ];

    /// The design's name, as the model checker's `--variant`, the TLA+
    /// spec's `Design` constant and the docs spell it.
    pub fn name(self) -> &'static str {
        match self {
            Design::Shipped => "Shipped",
            Design::BarrierOnly => "BarrierOnly",
            Design::PostWriteCheck => "PostWriteCheck",
            Design::TwoSubqueryFence => "TwoSubqueryFence",
            Design::CountOnlyReadBack => "CountOnlyReadBack",
            Design::MembershipOnVersionAlone => "MembershipOnVersionAlone",
            Design::UnfencedRelease => "UnfencedRelease",
            Design::FreshLeaseIdOnReacquire => "FreshLeaseIdOnReacquire",
            Design::NoExecutionCap => "NoExecutionCap",
            Design::CapAtLeastTtl => "CapAtLeastTtl",
            Design::InventoryBeforePublish => "InventoryBeforePublish",
            Design::ContestedTermTakenAtOnce => "ContestedTermTakenAtOnce",
            Design::MarginlessFence => "MarginlessFence",
            Design::OwnTermReadBack => "OwnTermReadBack",
            Design::RowsAbovePinned => "RowsAbovePinned",
            Design::LeaseIdFence => "LeaseIdFence",
            Design::NoSettleAfterTimeout => "NoSettleAfterTimeout",
            Design::UnpublishedRowsResolve => "UnpublishedRowsResolve",
        }
    }

    /// The design with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Where this design differs from the shipped protocol.
    pub fn acts(self) -> Acts {
        match self {
            Design::Shipped => Acts::Nowhere,
            Design::BarrierOnly
            | Design::TwoSubqueryFence
            | Design::UnfencedRelease
            | Design::NoExecutionCap
            | Design::CapAtLeastTtl
            | Design::MarginlessFence
            | Design::LeaseIdFence
            | Design::OwnTermReadBack
            | Design::PostWriteCheck
            | Design::MembershipOnVersionAlone
            | Design::RowsAbovePinned
            | Design::UnpublishedRowsResolve => Acts::Statements,
            Design::ContestedTermTakenAtOnce => Acts::StatementsAndAnswers,
            Design::CountOnlyReadBack => Acts::Answers,
            Design::InventoryBeforePublish => Acts::StepOrder,
            Design::FreshLeaseIdOnReacquire | Design::NoSettleAfterTimeout => Acts::Caller,
        }
    }

    /// `stmt` as this design sends it. `cfg` is the configuration the
    /// machines were built with (the cap-at-TTL design reads the TTL off
    /// it). Statements a design does not touch pass unchanged, so the
    /// shipped design is the identity.
    pub fn rewrite(self, stmt: Statement, tables: &Tables, cfg: &Config) -> Statement {
        let publish = matches!(
            stmt.name,
            "publish.insert_manifest" | "publish.insert_commit_row"
        );
        let fenced = publish || stmt.name == "lease.release";
        let pinned_read = matches!(stmt.name, "reader.search_page" | "reader.get_by_ids");
        match self {
            Design::BarrierOnly if publish => without_lease_fence(&stmt, tables),
            Design::TwoSubqueryFence if publish => two_subquery_fence(&stmt, tables),
            Design::PostWriteCheck if publish => without_publish_guard(&stmt, tables),
            Design::PostWriteCheck if stmt.name == "publish.read_publish_ids" => {
                read_highest_publish_ids(tables)
            }
            Design::UnfencedRelease if stmt.name == "lease.release" => {
                unfenced_release(&stmt, tables)
            }
            // Every fenced statement carries the publish timeout as its cap
            // (the release too), so both cap designs edit all of them.
            Design::NoExecutionCap if fenced => without_execution_cap(&stmt),
            Design::CapAtLeastTtl if fenced => {
                let ttl_s = u32::try_from(cfg.lease_ttl_ns() / 1_000_000_000).unwrap_or(u32::MAX);
                with_execution_cap(&stmt, ttl_s, cfg.fence_slack_ns())
            }
            Design::MarginlessFence if fenced => marginless_fence(&stmt, tables),
            Design::LeaseIdFence if fenced => lease_id_fence(&stmt, tables),
            Design::OwnTermReadBack | Design::ContestedTermTakenAtOnce
                if stmt.name == "lease.read_claims" =>
            {
                own_term_read_back(&stmt, tables)
            }
            Design::MembershipOnVersionAlone if pinned_read => {
                membership_on_version_alone(&stmt, tables)
            }
            Design::RowsAbovePinned if pinned_read => rows_above_pinned(&stmt, tables),
            Design::UnpublishedRowsResolve if pinned_read => {
                unpublished_rows_resolve(&stmt, tables)
            }
            _ => stmt,
        }
    }

    /// `input`, the answer to `sent`, as this design reads it.
    /// `publish_id` is the publish attempt the machine runs, if any (the
    /// count-only read-back reports it as found whenever any row stands).
    pub fn answer(self, sent: &Statement, input: Input, publish_id: Option<uuid::Uuid>) -> Input {
        let Input::Rows(rows) = input else {
            return input;
        };
        Input::Rows(match (self, sent.name) {
            (Design::CountOnlyReadBack, "publish.read_publish_ids") => {
                match (rows.0.is_empty(), publish_id) {
                    (false, Some(id)) => Rows(vec![vec![Value::Uuid(id)]]),
                    _ => rows,
                }
            }
            (Design::ContestedTermTakenAtOnce, "lease.read_head") => contested_term_unheld(rows),
            _ => rows,
        })
    }
}

impl std::fmt::Display for Design {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The head read as the acquire before the contested-term fix read it: a
/// term counts as held only while its head row is live and uncontested. The
/// shipped acquire reads `term_live` (column 6: any row at the head term is
/// live); this answer sets it to `live AND NOT contested`, which is exactly
/// the old rule.
fn contested_term_unheld(mut rows: Rows) -> Rows {
    const TERM: usize = 0;
    const LEASE_ID: usize = 1;
    const LIVE: usize = 4;
    const TERM_LIVE: usize = 6;
    let second = rows
        .0
        .get(1)
        .map(|r| (r.get(TERM).cloned(), r.get(LEASE_ID).cloned()));
    let Some(first) = rows.0.first_mut() else {
        return rows;
    };
    let contested = second.is_some_and(|(term, id)| {
        term.as_ref() == first.get(TERM) && id.as_ref() != first.get(LEASE_ID)
    });
    let live = first.get(LIVE) == Some(&Value::UInt64(1));
    if let Some(term_live) = first.get_mut(TERM_LIVE) {
        *term_live = Value::UInt64(u64::from(live && !contested));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips_and_is_distinct() {
        let names: std::collections::BTreeSet<&str> =
            Design::ALL.iter().map(|d| d.name()).collect();
        assert_eq!(names.len(), Design::ALL.len());
        for d in Design::ALL {
            assert_eq!(Design::from_name(d.name()), Some(d));
            assert_eq!(format!("{d:?}"), d.name());
        }
    }

    #[test]
    fn the_shipped_design_rewrites_nothing() {
        let tables = Tables::new("t").expect("valid prefix");
        let cfg = Config::default();
        let stmt = crate::lease::sql::read_head(&tables);
        assert_eq!(Design::Shipped.rewrite(stmt.clone(), &tables, &cfg), stmt);
        let rows = Input::Rows(Rows(vec![vec![Value::UInt64(1)]]));
        assert_eq!(Design::Shipped.answer(&stmt, rows.clone(), None), rows);
    }

    #[test]
    fn a_contested_head_term_reads_as_unheld_and_an_uncontested_one_as_its_row() {
        let row = |term: u64, id: u128, live: u64, term_live: u64| {
            vec![
                Value::UInt64(term),
                Value::Uuid(uuid::Uuid::from_u128(id)),
                Value::String("h".to_owned()),
                Value::UInt64(9),
                Value::UInt64(live),
                Value::UInt64(9),
                Value::UInt64(term_live),
            ]
        };
        let contested = contested_term_unheld(Rows(vec![row(3, 1, 1, 1), row(3, 2, 1, 1)]));
        assert_eq!(contested.0[0][6], Value::UInt64(0));
        let expired_head = contested_term_unheld(Rows(vec![row(3, 1, 0, 1), row(2, 1, 1, 1)]));
        assert_eq!(expired_head.0[0][6], Value::UInt64(0));
        let live_head = contested_term_unheld(Rows(vec![row(3, 1, 1, 1)]));
        assert_eq!(live_head.0[0][6], Value::UInt64(1));
    }
}
