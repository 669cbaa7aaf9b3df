use uuid::Uuid;

use crate::machine::Failure;

use super::LeaseHead;

/// Why a lease operation did not produce a lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// Another publisher holds a live lease (some row at the head term is
    /// live); wait for it to expire or be released. `holder`, `lease_id` and
    /// `term` name the head row, which may be a dead tombstone standing over
    /// a live claim at the same term; `expires_at_ns` is the latest expiry of
    /// any row at that term, so it says when an acquire can next succeed.
    #[error(
        "the publisher lease is held by {holder:?} (lease {lease_id}, term {term}) until \
         {expires_at_ns} ns server time; wait for it to expire or be released"
    )]
    Held {
        /// The head row's holder.
        holder: String,
        /// The head row's lease id.
        lease_id: Uuid,
        /// The head term.
        term: u64,
        /// The latest expiry of any row at the head term, server nanoseconds.
        expires_at_ns: u64,
    },
    /// A renewal found the head no longer this caller's: the lease was taken
    /// over, released or contested. Acquire again before publishing.
    #[error(
        "lease {lease_id} is no longer the head (head: {}); acquire the lease again \
         before publishing",
        super::HeadShown(head)
    )]
    NotHeld {
        /// The lease the caller thought it held.
        lease_id: Uuid,
        /// What the head read found instead (`None`: the lease table is empty).
        head: Option<LeaseHead>,
    },
    /// Every claim attempt met another claimant at its term.
    #[error("every lease claim was contested after {attempts} attempts (last term {last_term})")]
    Contested {
        /// Attempts made (the configured bound).
        attempts: u32,
        /// The last term claimed.
        last_term: u64,
    },
    /// A statement failed. Its effect is unknown: a claim row may still land
    /// (harmless: it either stands alone, costing the next claimant one TTL,
    /// or contests a term nobody then holds).
    #[error("lease statement {statement} failed: {failure}")]
    Statement {
        /// The statement's stable name.
        statement: &'static str,
        /// What the driver reported.
        failure: Failure,
    },
    /// A release was not sent: a guarded statement this lease abandoned may
    /// still land until the server's clock passes `until_ns`, and a
    /// tombstone would let a successor take over before that. The lease is
    /// left to expire (at the latest expiry it was renewed to); keep it
    /// and never use it again.
    #[error(
        "lease {lease_id} was not released: a statement it abandoned may still land until \
         server time {until_ns}; the lease is left to expire"
    )]
    Unsettled {
        /// The lease left to expire.
        lease_id: uuid::Uuid,
        /// The server time the abandoned statement may land until.
        until_ns: u64,
    },
    /// A statement returned rows of the wrong shape.
    #[error("lease statement {statement} returned an unreadable row: {detail}")]
    Malformed {
        /// The statement's stable name.
        statement: &'static str,
        /// What did not match.
        detail: String,
    },
    /// The driver handed back an input the machine did not ask for.
    #[error("the driver answered {got} where the lease machine expected {expected}")]
    UnexpectedInput {
        /// What the machine asked for.
        expected: &'static str,
        /// What it got.
        got: &'static str,
    },
}
