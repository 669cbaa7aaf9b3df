use uuid::Uuid;

use crate::lease::{LeaseError, LeaseHead};
use crate::machine::Failure;

/// Why a publish attempt ended without an outcome at V: the lease stopped
/// it, or a statement broke.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// Version 0 can never pass the barrier (`ifNull(max, 0) < 0` is false)
    /// and is never allocated; asking to publish it is a caller bug.
    #[error("refusing to publish at version 0: versions start at 1")]
    VersionZero,
    /// Nothing to publish.
    #[error("refusing to publish version {version} with no packs")]
    NoPacks {
        /// The version asked for.
        version: u64,
    },
    /// This attempt's row is absent and the lease head is another live
    /// lease (or the renewal found the lease gone). Retrying at another
    /// version would fail the same fence: acquire the lease again.
    #[error("the lease was lost before version {version} (publish {publish_id}) could publish")]
    LeaseLost {
        /// The version attempted.
        version: u64,
        /// This attempt's id.
        publish_id: Uuid,
        /// The head that replaced this publisher's lease, if any.
        head: Option<LeaseHead>,
    },
    /// The renewal held, but a guarded statement an earlier attempt of this
    /// lease abandoned (a timeout, a lost connection) may still land until
    /// the server's clock passes `until_ns`, and the renewal was stamped
    /// before that. Nothing was sent after the renewal, so nothing of this
    /// attempt is visible. Retry after `wait_ns` (a duration: the server's
    /// clock advances at the caller's rate, whatever the skew between them).
    #[error(
        "version {version} (publish {publish_id}) waits {wait_ns} ns: an abandoned statement \
         of this lease may land until server time {until_ns}"
    )]
    Unsettled {
        /// The version that was to be published.
        version: u64,
        /// This attempt's id.
        publish_id: Uuid,
        /// The server time the abandoned statement may land until.
        until_ns: u64,
        /// How much longer the server's clock must run past the renewal.
        wait_ns: u64,
    },
    /// The renewal that precedes every publish failed for a reason other
    /// than the lease being gone.
    #[error("lease renewal before publishing version {version} failed: {source}")]
    Renew {
        /// The version.
        version: u64,
        /// The renewal's error.
        source: LeaseError,
    },
    /// A publish statement failed. A failed manifest INSERT leaves at most
    /// inert rows (no commit row was attempted); a failed commit-row INSERT
    /// is ambiguous: it may still land and make V visible, which is why the
    /// caller must not record the packs in the inventory (a later pass then
    /// republishes them, costing redundant work and never a lost pack).
    #[error(
        "publish statement {statement} for version {version} (publish {publish_id}) failed: {failure}"
    )]
    Statement {
        /// The statement's stable name.
        statement: &'static str,
        /// The version.
        version: u64,
        /// This attempt's id.
        publish_id: Uuid,
        /// What the driver reported.
        failure: Failure,
    },
    /// A read returned rows of the wrong shape.
    #[error("publish statement {statement} returned an unreadable row: {detail}")]
    Malformed {
        /// The statement's stable name.
        statement: &'static str,
        /// What did not match.
        detail: String,
    },
    /// The driver handed back an input the machine did not ask for.
    #[error("the driver answered {got} where the publish machine expected {expected}")]
    UnexpectedInput {
        /// What the machine asked for.
        expected: &'static str,
        /// What it got.
        got: &'static str,
    },
}
