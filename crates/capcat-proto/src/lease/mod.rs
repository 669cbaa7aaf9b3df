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

mod claim;
mod error;
mod release;
pub mod sql;

pub use claim::{ClaimMode, LeaseClaim};
pub(crate) use claim::{describe_input, parse_head};
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
    pub expires_at_ns: u64,
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
