//! The publisher lease: who may publish, fenced inside every publishing
//! statement by [`crate::fragments::lease_fence`].
//!
//! A lease is claimed with the same sole-claimant append-and-read-back
//! protocol as a catalog version: a claimant appends a row at
//! `head.term + 1 + jitter` whose expiry the SERVER stamps, then reads that
//! term back. Alone at the term, it holds the lease; beside another claimant,
//! the term is contested and every claimant abandons it. A claim row is inert
//! (only the fence reads the table, and the fence names one row), which is
//! what makes an abandoned term harmless.
//!
//! - [`LeaseClaim::acquire`]: take the lease, or re-acquire it keeping the
//!   same `lease_id` at a new term when the caller already holds it.
//! - [`LeaseClaim::renew`]: extend a lease the caller holds; refuses when the
//!   head is no longer the caller's.
//! - [`Release`]: one fenced `INSERT ... SELECT` writing a tombstone only if
//!   the head is still the caller's and live.
//!
//! ```no_run
//! # use capcat_proto::*;
//! # fn execute(_: &Statement) -> Input { unimplemented!("run it on the catalog") }
//! # fn draw(below: u64) -> u64 { below - 1 }
//! # fn random_uuid() -> uuid::Uuid { unimplemented!("the caller draws a v4 UUID") }
//! # let (tables, cfg) = (Tables::new("t").unwrap(), Config::default());
//! let fresh_id = random_uuid(); // the caller mints ids
//! let mut claim = LeaseClaim::acquire(tables, cfg, "host-1".into(), None, fresh_id);
//! let lease: Result<Lease, LeaseError> = loop {
//!     match claim.poll() {
//!         Step::Execute(stmt) => claim.handle(execute(&stmt)),
//!         Step::Draw { below } => claim.handle(Input::Drawn(draw(below))),
//!         Step::Done(outcome) => break outcome,
//!     }
//! };
//! ```

mod claim;
mod error;
mod release;
pub mod sql;

pub(crate) use claim::parse_head;
pub use claim::{ClaimMode, LeaseClaim};
pub use error::LeaseError;
pub use release::Release;

use uuid::Uuid;

/// A lease the caller holds: the token the fence accepts.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lease {
    /// The fencing identity; kept across renewals and re-acquires.
    pub lease_id: Uuid,
    /// Who holds it (diagnostics only).
    pub holder: String,
    /// The term the lease was last claimed at.
    pub term: u64,
    /// Expiry stamped by the server at the last claim (server nanoseconds).
    /// With `term` and `lease_id` it names the exact row every guarded
    /// statement's fence asks to be the head.
    pub expires_at_ns: u64,
    /// A server time before which a guarded statement this lease sent may
    /// still land, 0 when none may. Set when a guarded statement fails in a
    /// way that leaves it possibly running (a timeout, a lost connection):
    /// it may not even have started, and the server counts its cap from its
    /// start, but its fence names the row it was sent under, so it can land
    /// no later than that row's expiry, which is what is recorded here.
    ///
    /// Until a renewal stamped AFTER this time proves the clock has passed
    /// it, the lease sends no guarded statement: a publish attempt ends
    /// [`Unsettled`](crate::publish::PublishError::Unsettled) after its
    /// renewal, and a [`Release`] is not sent (the lease is left to
    /// expire). Acting earlier would let an abandoned commit row land under
    /// a snapshot pinned after the holder's next publish, or after a
    /// successor took over on its release tombstone.
    pub unsettled_until_ns: u64,
}

impl Lease {
    /// The row this lease's guarded statements name in their fence.
    pub fn held_row(&self) -> crate::fragments::meaning::HeldRow {
        crate::fragments::meaning::HeldRow {
            term: self.term,
            lease_id: self.lease_id,
            expires_at_ns: self.expires_at_ns,
        }
    }

    /// When the server stamped this lease's last claim (its expiry less the
    /// TTL the claim asked for): everything the lease sends after that
    /// claim is evaluated later still.
    pub fn claimed_at_ns(&self, ttl_ns: u64) -> u64 {
        self.expires_at_ns.saturating_sub(ttl_ns)
    }

    /// Whether a guarded statement of this lease may still land.
    pub fn unsettled(&self) -> bool {
        self.unsettled_until_ns != 0
    }

    /// Records that a guarded statement sent under the current row failed
    /// with its effect unknown: it may land until that row's expiry.
    pub fn abandoned_statement(&mut self) {
        self.unsettled_until_ns = self.unsettled_until_ns.max(self.expires_at_ns);
    }
}

/// The head of the lease log as the head read saw it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseHead {
    /// The head's term.
    pub term: u64,
    /// The head's lease id.
    pub lease_id: Uuid,
    /// The head's holder.
    pub holder: String,
    /// The head's expiry (server nanoseconds); 0 for a release tombstone.
    pub expires_at_ns: u64,
    /// Whether the server judged it live when it was read.
    pub live: bool,
    /// Whether a second claimant stands at the same term (nobody holds it).
    pub contested: bool,
    /// The latest expiry of any row at the head term (server nanoseconds).
    pub term_expires_at_ns: u64,
    /// Whether the server judged ANY row at the head term live when it was
    /// read. A term is held while it is: the head row may be a dead
    /// tombstone, or one claimant of a contested term, while another row at
    /// the term belongs to a holder with a fenced statement in flight.
    pub term_live: bool,
}

/// A lease head as an error message shows it: in words, not as the Rust
/// `Debug` of an `Option<LeaseHead>` (`Some(LeaseHead { term: 3, .. })`).
#[derive(Clone, Copy, Debug)]
pub struct HeadShown<'a>(pub &'a Option<LeaseHead>);

impl std::fmt::Display for HeadShown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(head) = self.0 else {
            return f.write_str("none: the lease table is empty");
        };
        let state = if head.expires_at_ns == 0 {
            "released"
        } else if head.contested {
            "contested"
        } else if head.live {
            "live"
        } else {
            "expired"
        };
        write!(
            f,
            "lease {} of {} at term {}, {state}",
            head.lease_id, head.holder, head.term
        )
    }
}

#[cfg(test)]
mod head_shown_tests {
    use super::*;

    /// The lease errors name the head in words (issue 16: messages must
    /// not leak Rust `Debug` output).
    #[test]
    fn a_not_held_error_names_the_head_in_words() {
        let head = LeaseHead {
            term: 3,
            lease_id: Uuid::from_u128(7),
            holder: "svc-a".to_owned(),
            expires_at_ns: 5,
            live: true,
            contested: false,
            term_expires_at_ns: 5,
            term_live: true,
        };
        let error = LeaseError::NotHeld {
            lease_id: Uuid::from_u128(1),
            head: Some(head),
        }
        .to_string();
        assert!(
            error.contains(
                "(head: lease 00000000-0000-0000-0000-000000000007 of svc-a at term 3, live)"
            ),
            "{error}"
        );
        assert!(
            !error.contains("Some(") && !error.contains(" { "),
            "{error}"
        );
        let empty = LeaseError::NotHeld {
            lease_id: Uuid::from_u128(1),
            head: None,
        }
        .to_string();
        assert!(
            empty.contains("(head: none: the lease table is empty)"),
            "{empty}"
        );
    }
}
