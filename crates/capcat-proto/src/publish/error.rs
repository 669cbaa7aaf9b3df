use uuid::Uuid;

use crate::lease::LeaseError;
use crate::machine::Failure;

/// Why a publish attempt ended without a classified outcome.
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
    /// inert rows (no watermark row was attempted); a failed watermark INSERT
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
