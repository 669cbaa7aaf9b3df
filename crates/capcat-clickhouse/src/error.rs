//! [`CatalogError`]: why a catalog operation did not complete.

use std::collections::BTreeSet;

use capcat_proto::lease::LeaseHead;
use capcat_proto::reader::ReaderError;
use capcat_proto::schema::SchemaError;
use capcat_proto::{
    AllocateError, ConfigError, Failure, IndexError, InvalidPrefix, LeaseError, LostRace,
    PublishError,
};
use uuid::Uuid;

use crate::transport::HttpError;

/// Why a catalog operation did not complete. Each protocol error is carried
/// whole, so an operator sees what the protocol core reported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// The prefix cannot name catalog objects.
    #[error(transparent)]
    Prefix(#[from] InvalidPrefix),
    /// The protocol configuration cannot be honoured.
    #[error("protocol configuration: {0}")]
    Config(#[from] ConfigError),
    /// The embedded engine could not be opened.
    #[error("embedded engine: {0}")]
    Engine(#[from] capcat_chdb::ChdbError),
    /// The HTTP transport could not be built.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// `ensure_schema` refused the catalog or failed.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A `DROP ... IF EXISTS` of `drop_schema` failed; the objects before it
    /// were dropped, and rerunning the teardown resumes.
    #[error("drop_schema: {statement} failed: {failure}")]
    Drop {
        /// The drop statement's name.
        statement: &'static str,
        /// What the transport reported.
        failure: Failure,
    },
    /// A lease operation failed.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// The lease handle was released, or a release was sent whose effect
    /// is unknown (it may still land): the lease may not renew or publish
    /// any more (every rival's read-back ignores a released lease's rows),
    /// only retry its release; acquire a new one.
    #[error(
        "lease {lease_id} was released (or a release of it was sent) by this handle; \
         acquire the lease again"
    )]
    Released {
        /// The released lease's id.
        lease_id: Uuid,
    },
    /// A publish or index pass under this handle was dropped (its future
    /// cancelled) before it handed the lease back, so a guarded statement of
    /// it may still be running on the server. The handle is never used
    /// again and never released; acquire the lease again (a fresh acquire
    /// waits until every row of this lease has expired).
    #[error(
        "lease {lease_id} is in doubt: an operation under it was cancelled mid-statement; \
         it is left to expire; acquire the lease again"
    )]
    InDoubt {
        /// The lease left to expire.
        lease_id: Uuid,
    },
    /// Version allocation failed.
    #[error(transparent)]
    Allocate(#[from] AllocateError),
    /// A publish ended in an error whose effect is described by the source.
    #[error(transparent)]
    Publish(#[from] PublishError),
    /// The publish lost its version race: nothing it wrote is visible.
    #[error(transparent)]
    LostRace(#[from] LostRace),
    /// The publish was fenced out: the lease is no longer this publisher's.
    #[error(
        "publish of version {version} (publish {publish_id}) was fenced out: the publisher lease \
         is no longer ours (head: {head:?}); acquire it again"
    )]
    LeaseLost {
        /// The version attempted.
        version: u64,
        /// The attempt's id.
        publish_id: Uuid,
        /// The head that replaced the lease, if any.
        head: Option<LeaseHead>,
    },
    /// The publish was put off: a guarded statement an earlier attempt under
    /// this lease abandoned (a timeout, a lost connection) may still land
    /// until the server's clock passes `until_ns`. Nothing was written;
    /// publish again after `wait_ns` (a renewal by the lease keeper in the
    /// meantime proves the wait over just as well).
    #[error(
        "publish of version {version} was put off: a statement an earlier attempt abandoned \
         may still land for {wait_ns} ns (until server time {until_ns}); publish again after that"
    )]
    Unsettled {
        /// The version that was to be published.
        version: u64,
        /// The server time the abandoned statement may land until.
        until_ns: u64,
        /// How much longer the server's clock must run past the renewal.
        wait_ns: u64,
    },
    /// The publish stands beside a foreign publish at the same version: the
    /// packs ARE visible, and an operator must look at the union.
    #[error(
        "version {version} holds publish {publish_id} and foreign publish(es) {all_foreign:?}: \
         its contents are the union of both; operator attention needed"
    )]
    Conflict {
        /// The version.
        version: u64,
        /// This attempt's id.
        publish_id: Uuid,
        /// Every foreign publish id at the version.
        all_foreign: BTreeSet<Uuid>,
    },
    /// An index pass failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A read failed.
    #[error(transparent)]
    Reader(#[from] ReaderError),
    /// A machine took more steps than any legitimate run needs: a bug in the
    /// machine, reported instead of looping.
    #[error("{operation} did not finish within {steps} steps")]
    MachineRunaway {
        /// The operation.
        operation: &'static str,
        /// The bound.
        steps: u32,
    },
}
