use std::collections::BTreeSet;

use uuid::Uuid;

use crate::allocate::AllocateError;
use crate::lease::LeaseHead;
use crate::machine::Failure;
use crate::publish::{LostRace, PackRef, PublishError};

/// Why an index pass did not end with its packs published and recorded.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// Every publish attempt lost its version race; the last race is the
    /// source. Nothing the pass wrote is visible; the next pass retries.
    #[error("could not publish after {attempts} attempts")]
    Exhausted {
        /// Attempts made (the configured bound).
        attempts: u32,
        /// The last lost race.
        #[source]
        last: LostRace,
    },
    /// The lease was taken over (or released, or contested) under this
    /// publisher. Never retried as a lost version: every version would fail
    /// the same fence. Acquire the lease again.
    #[error(
        "publishing version {version} (publish {publish_id}) was fenced out: the publisher \
         lease is no longer ours (head: {}); acquire it again. Manifest rows a fenced \
         statement did not write are absent; rows of earlier statements are inert",
        crate::lease::HeadShown(head)
    )]
    LeaseLost {
        /// The version attempted.
        version: u64,
        /// The attempt's id.
        publish_id: Uuid,
        /// The head that replaced the lease, if any.
        head: Option<LeaseHead>,
    },
    /// A guarded statement an earlier pass of this lease abandoned (a
    /// timeout, a lost connection) may still land until the server's clock
    /// passes `until_ns`, and this pass's renewal was stamped before that,
    /// so it sent nothing guarded. Nothing it wrote is visible. Run the
    /// next pass with this pass's lease ([`IndexPass::lease`](crate::IndexPass::lease))
    /// after `wait_ns`.
    #[error(
        "publishing version {version} was put off: a statement an earlier attempt abandoned \
         may still land for {wait_ns} ns (until server time {until_ns}); retry after that"
    )]
    Unsettled {
        /// The version that was to be published.
        version: u64,
        /// How much longer the server's clock must run past the renewal.
        wait_ns: u64,
        /// The server time the abandoned statement may land until.
        until_ns: u64,
    },
    /// The publish stands beside a foreign publish at one version. The packs
    /// ARE visible, so they were recorded in the inventory before this
    /// surfaced (a republish would duplicate them); an operator must decide
    /// about the union.
    #[error(
        "version {version} holds this publish {publish_id} AND foreign publish {foreign}: its \
         contents are the union of two publishes; packs recorded, operator attention needed"
    )]
    Conflict {
        /// The version.
        version: u64,
        /// This pass's publish id.
        publish_id: Uuid,
        /// The (smallest) foreign publish id.
        foreign: Uuid,
        /// Every foreign publish id at the version.
        all_foreign: BTreeSet<Uuid>,
        /// The packs recorded in the inventory.
        packs: BTreeSet<PackRef>,
    },
    /// Two descriptors of the batch share a capture identity and a pack:
    /// the descriptor tables' sorting key. Refused before any statement: a
    /// pack holds a capture at most once, so such a batch is malformed, and
    /// which of the two rows a reader would resolve to is not defined.
    #[error(
        "the batch describes capture {capture_id} of pack ({store_id}, {pack_id}) twice; \
         a pack holds each capture once"
    )]
    DuplicateDescriptor {
        /// The capture described twice.
        capture_id: Uuid,
        /// The store of its pack.
        store_id: String,
        /// Its pack.
        pack_id: Uuid,
    },
    /// Recording packs at version 0 is refused: 0 is never published, and an
    /// inventory row at 0 would mark a pack committed that no snapshot holds.
    #[error("refusing to record packs in the inventory at version 0")]
    CommitAtVersionZero,
    /// Version allocation failed.
    #[error("version allocation failed: {0}")]
    Allocate(#[source] AllocateError),
    /// The publish ended in an error (see [`PublishError`] for what is known
    /// about its effect).
    #[error("publish failed: {0}")]
    Publish(#[source] PublishError),
    /// The packs were published at `version`, but recording them in the
    /// inventory failed: they are visible, and the next pass will republish
    /// them (redundant work, never a lost pack).
    #[error("version {version} was published but the inventory write failed: {failure}")]
    Inventory {
        /// The published version.
        version: u64,
        /// The winning publish id.
        publish_id: Uuid,
        /// What the driver reported.
        failure: Failure,
    },
    /// Any other statement failed.
    #[error("index statement {statement} failed: {failure}")]
    Statement {
        /// The statement's stable name.
        statement: &'static str,
        /// What the driver reported.
        failure: Failure,
    },
    /// A read returned rows of the wrong shape.
    #[error("index statement {statement} returned an unreadable row: {detail}")]
    Malformed {
        /// The statement's stable name.
        statement: &'static str,
        /// What did not match.
        detail: String,
    },
    /// The driver handed back an input the machine did not ask for.
    #[error("the driver answered {got} where the index pass expected {expected}")]
    UnexpectedInput {
        /// What the machine asked for.
        expected: &'static str,
        /// What it got.
        got: &'static str,
    },
}
