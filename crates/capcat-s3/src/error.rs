//! The error classes shared by every store.
//!
//! A caller decides what to do from the class alone: retry a transient error,
//! fix credentials on an auth error, re-upload on a checksum mismatch. The
//! variant carries the operation, the key and the cause so that an operator
//! reading a log line knows which object failed and why.

use std::fmt;

/// The store operation that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// Writing an object.
    Put,
    /// Reading an object's size and metadata.
    Head,
    /// Reading a whole object.
    Get,
    /// Reading a byte range of an object.
    GetRange,
    /// Listing keys under a prefix.
    List,
    /// Deleting an object.
    Delete,
    /// Creating the bucket (S3 only; tests and first-time setup).
    CreateBucket,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Put => "put",
            Self::Head => "head",
            Self::Get => "get",
            Self::GetRange => "get-range",
            Self::List => "list",
            Self::Delete => "delete",
            Self::CreateBucket => "create-bucket",
        })
    }
}

/// The class of a [`StoreError`], the same for [`crate::S3Store`] and
/// [`crate::LocalStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The object (or the bucket) does not exist.
    NotFound,
    /// A precondition of the request did not hold (HTTP 412).
    PreconditionFailed,
    /// The store refused the credentials or the signature (HTTP 401/403).
    Auth,
    /// Worth retrying: connection refused or reset, a timeout, HTTP 5xx, 408
    /// or 429, a response cut short.
    Transient,
    /// The bytes do not match the SHA-256 they were sent or stored with.
    ChecksumMismatch,
    /// Anything else: a bad request, a corrupt local object, an I/O error.
    Other,
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotFound => "not found",
            Self::PreconditionFailed => "precondition failed",
            Self::Auth => "auth",
            Self::Transient => "transient",
            Self::ChecksumMismatch => "checksum mismatch",
            Self::Other => "other",
        })
    }
}

/// A failed store operation: its class, the operation, the key (or the
/// listing prefix) and the cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The object or the bucket does not exist.
    #[error("{op} {key}: not found: {detail}")]
    NotFound {
        /// The operation that failed.
        op: Operation,
        /// The object key, or the prefix of a listing.
        key: String,
        /// What the store said.
        detail: String,
    },
    /// A precondition of the request did not hold (HTTP 412).
    #[error("{op} {key}: precondition failed: {detail}")]
    PreconditionFailed {
        /// The operation that failed.
        op: Operation,
        /// The object key, or the prefix of a listing.
        key: String,
        /// What the store said.
        detail: String,
    },
    /// The store refused the credentials or the signature.
    #[error("{op} {key}: access refused: {detail}")]
    Auth {
        /// The operation that failed.
        op: Operation,
        /// The object key, or the prefix of a listing.
        key: String,
        /// What the store said (the error code, e.g. `SignatureDoesNotMatch`).
        detail: String,
    },
    /// A failure worth retrying: refused or reset connection, timeout, 5xx.
    #[error("{op} {key}: transient failure: {detail}")]
    Transient {
        /// The operation that failed.
        op: Operation,
        /// The object key, or the prefix of a listing.
        key: String,
        /// The cause, with its source chain.
        detail: String,
    },
    /// The bytes do not match their SHA-256: the store refused a PUT whose
    /// body differs from the declared checksum, or stored bytes changed.
    #[error("{op} {key}: checksum mismatch: {detail}")]
    ChecksumMismatch {
        /// The operation that failed.
        op: Operation,
        /// The object key.
        key: String,
        /// The expected and the actual digest, or what the store said.
        detail: String,
    },
    /// Any other failure.
    #[error("{op} {key}: {detail}")]
    Other {
        /// The operation that failed.
        op: Operation,
        /// The object key, or the prefix of a listing.
        key: String,
        /// The cause.
        detail: String,
    },
}

impl StoreError {
    /// Builds an error of `class`.
    pub(crate) fn new(
        class: ErrorClass,
        op: Operation,
        key: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        let (key, detail) = (key.into(), detail.into());
        match class {
            ErrorClass::NotFound => Self::NotFound { op, key, detail },
            ErrorClass::PreconditionFailed => Self::PreconditionFailed { op, key, detail },
            ErrorClass::Auth => Self::Auth { op, key, detail },
            ErrorClass::Transient => Self::Transient { op, key, detail },
            ErrorClass::ChecksumMismatch => Self::ChecksumMismatch { op, key, detail },
            ErrorClass::Other => Self::Other { op, key, detail },
        }
    }

    /// The class a caller branches on.
    #[must_use]
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::NotFound { .. } => ErrorClass::NotFound,
            Self::PreconditionFailed { .. } => ErrorClass::PreconditionFailed,
            Self::Auth { .. } => ErrorClass::Auth,
            Self::Transient { .. } => ErrorClass::Transient,
            Self::ChecksumMismatch { .. } => ErrorClass::ChecksumMismatch,
            Self::Other { .. } => ErrorClass::Other,
        }
    }

    /// The operation that failed.
    #[must_use]
    pub fn operation(&self) -> Operation {
        match self {
            Self::NotFound { op, .. }
            | Self::PreconditionFailed { op, .. }
            | Self::Auth { op, .. }
            | Self::Transient { op, .. }
            | Self::ChecksumMismatch { op, .. }
            | Self::Other { op, .. } => *op,
        }
    }

    /// The object key (or listing prefix) the operation was about.
    #[must_use]
    pub fn key(&self) -> &str {
        match self {
            Self::NotFound { key, .. }
            | Self::PreconditionFailed { key, .. }
            | Self::Auth { key, .. }
            | Self::Transient { key, .. }
            | Self::ChecksumMismatch { key, .. }
            | Self::Other { key, .. } => key,
        }
    }

    /// Whether retrying the same request may succeed.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        self.class() == ErrorClass::Transient
    }
}
