//! Why a read did not produce captures.

use std::collections::BTreeSet;

use uuid::Uuid;

use crate::machine::Failure;

/// Why a read did not produce captures.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ReaderError {
    /// A search or lookup named no tenant; every read is scoped to one.
    #[error("a tenant id is required for every catalog read")]
    MissingTenant,
    /// A range filter whose lower bound is above its upper bound.
    #[error("the {filter} range is inverted: {from} > {until}")]
    InvertedRange {
        /// Which filter.
        filter: &'static str,
        /// The lower bound given.
        from: u64,
        /// The upper bound given.
        until: u64,
    },
    /// A page size outside `1..=MAX_PAGE_SIZE`.
    #[error("page size {requested} must be between 1 and {max}")]
    BadPageSize {
        /// The size asked for.
        requested: u64,
        /// The largest page the reader serves.
        max: u64,
    },
    /// A cursor issued for another tenant was handed to this search.
    #[error("the cursor was issued for tenant {cursor_tenant:?}, not {tenant:?}")]
    CursorTenantMismatch {
        /// The tenant of the search.
        tenant: String,
        /// The tenant the cursor was issued for.
        cursor_tenant: String,
    },
    /// A cursor token that [`crate::reader::Cursor::from_token`] cannot read.
    #[error("cursor token {token:?} is not valid: {reason}")]
    BadCursor {
        /// The token given.
        token: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A lookup asked for more ids than one call serves.
    #[error("a lookup of {requested} ids exceeds the limit of {max}; split the selection")]
    TooManyIds {
        /// The number of ids asked for.
        requested: usize,
        /// The limit.
        max: usize,
    },
    /// The pinned version is above the published head this server sees:
    /// the server is behind (a lagging replica), so reading now would
    /// silently return a smaller snapshot than the one pinned.
    #[error(
        "snapshot pinned at version {pinned} but the server's published head is {head}; \
         the server is behind the snapshot, retry against an up-to-date replica"
    )]
    SnapshotAhead {
        /// The pinned version.
        pinned: u64,
        /// The head the server reported.
        head: u64,
    },
    /// Captures of a pinned selection no longer resolve at its pinned version.
    #[error(
        "{} capture(s) of tenant {tenant:?} do not resolve at pinned version {pinned}: {}",
        missing.len(),
        missing.iter().map(Uuid::to_string).collect::<Vec<_>>().join(", ")
    )]
    Unresolved {
        /// The tenant.
        tenant: String,
        /// The pinned version.
        pinned: u64,
        /// The ids that did not resolve.
        missing: BTreeSet<Uuid>,
    },
    /// A statement failed.
    #[error("reader statement {statement} failed: {failure}")]
    Statement {
        /// The statement's name.
        statement: &'static str,
        /// What the transport or the server reported.
        failure: Failure,
    },
    /// A statement returned rows of the wrong shape.
    #[error("reader statement {statement} returned malformed rows: {message}")]
    Malformed {
        /// The statement's name.
        statement: &'static str,
        /// What did not match.
        message: String,
    },
}
