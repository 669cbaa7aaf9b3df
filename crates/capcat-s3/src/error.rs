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
    /// Access failed and only a change of configuration can fix it: the
    /// store refused the credentials or the signature (HTTP 401/403), or the
    /// client refused the store's TLS certificate (an untrusted issuer, a
    /// name that is not the endpoint's host). Never worth retrying.
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

/// Where the credentials an [`crate::S3Store`] signs with came from, as a
/// [`StoreError::CredentialsRefused`] names them: the access key id and its
/// source, never the secret.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CredentialsOrigin {
    /// `S3Credentials::Static`: the S3 configuration.
    Config {
        /// The access key id (not a secret: every signed request carries it).
        access_key_id: String,
    },
    /// `S3Credentials::Environment`: `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY` and, when it was set, `AWS_SESSION_TOKEN`.
    Environment {
        /// The access key id (not a secret: every signed request carries it).
        access_key_id: String,
        /// Whether `AWS_SESSION_TOKEN` was set.
        session_token: bool,
    },
}

impl fmt::Display for CredentialsOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config { access_key_id } => write!(
                f,
                "the S3 configuration (static credentials, access key id {access_key_id:?})"
            ),
            Self::Environment {
                access_key_id,
                session_token,
            } => {
                f.write_str("the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY")?;
                if *session_token {
                    f.write_str(" / AWS_SESSION_TOKEN")?;
                }
                write!(f, ", access key id {access_key_id:?})")
            }
        }
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
    /// Access refused by a store that names no credentials of ours. S3Store
    /// says [`Self::CredentialsRefused`] instead.
    #[error("{op} {key}: access refused: {detail}")]
    Auth {
        /// The operation that failed.
        op: Operation,
        /// The object key, or the prefix of a listing.
        key: String,
        /// What the store said (the error code, e.g. `SignatureDoesNotMatch`).
        detail: String,
    },
    /// The S3 store refused the credentials the request was signed with
    /// (`InvalidAccessKeyId`, `SignatureDoesNotMatch`, `AccessDenied`,
    /// `ExpiredToken`, or any other 401/403). Class [`ErrorClass::Auth`]. The
    /// message names where the credentials came from, never the secret.
    #[error(
        "{op} {key}: the S3 store refused the credentials from {credentials}; \
         check the access key id and the secret key there (the secret is not shown): {detail}"
    )]
    CredentialsRefused {
        /// The operation that failed.
        op: Operation,
        /// The object key, or the prefix of a listing.
        key: String,
        /// Where the refused credentials came from.
        credentials: CredentialsOrigin,
        /// What the store said (the error code, e.g. `SignatureDoesNotMatch`).
        detail: String,
    },
    /// The endpoint's TLS certificate does not chain to a trusted CA (rustls
    /// `UnknownIssuer`): neither the system roots nor the configured
    /// `ca_file` vouch for it. Class [`ErrorClass::Auth`].
    #[error(
        "{op} {key}: the TLS certificate of {endpoint} is not trusted (unknown issuer); \
         if a private CA signed it, set the S3 ca_file to that CA's PEM bundle: {detail}"
    )]
    UntrustedCertificate {
        /// The operation that failed.
        op: Operation,
        /// The object key, or the prefix of a listing.
        key: String,
        /// The endpoint URL.
        endpoint: String,
        /// The TLS error, with its source chain.
        detail: String,
    },
    /// The endpoint's TLS certificate is trusted but does not name the
    /// endpoint's host (rustls `NotValidForName`). Class [`ErrorClass::Auth`].
    #[error(
        "{op} {key}: the TLS certificate of {endpoint} does not name the host {host:?}; \
         use a host name the certificate names in the endpoint, or reissue the certificate \
         for {host:?}: {detail}"
    )]
    CertificateNameMismatch {
        /// The operation that failed.
        op: Operation,
        /// The object key, or the prefix of a listing.
        key: String,
        /// The endpoint URL.
        endpoint: String,
        /// The host the certificate had to name.
        host: String,
        /// The TLS error (it lists the names the certificate does hold).
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
            Self::Auth { .. }
            | Self::CredentialsRefused { .. }
            | Self::UntrustedCertificate { .. }
            | Self::CertificateNameMismatch { .. } => ErrorClass::Auth,
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
            | Self::CredentialsRefused { op, .. }
            | Self::UntrustedCertificate { op, .. }
            | Self::CertificateNameMismatch { op, .. }
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
            | Self::CredentialsRefused { key, .. }
            | Self::UntrustedCertificate { key, .. }
            | Self::CertificateNameMismatch { key, .. }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credentials_origin_names_its_source() {
        let config = CredentialsOrigin::Config {
            access_key_id: "AKID".into(),
        };
        assert_eq!(
            config.to_string(),
            "the S3 configuration (static credentials, access key id \"AKID\")"
        );
        let env = |session_token| CredentialsOrigin::Environment {
            access_key_id: "AKID".into(),
            session_token,
        };
        assert_eq!(
            env(false).to_string(),
            "the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, access key id \"AKID\")"
        );
        assert!(
            env(true)
                .to_string()
                .contains("AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN")
        );
        let error = StoreError::CredentialsRefused {
            op: Operation::Head,
            key: "v1/k".into(),
            credentials: env(false),
            detail: "HTTP 403: SignatureDoesNotMatch".into(),
        };
        assert_eq!(error.class(), ErrorClass::Auth);
        assert_eq!(error.operation(), Operation::Head);
        assert_eq!(error.key(), "v1/k");
        assert!(
            error.to_string().starts_with(
                "head v1/k: the S3 store refused the credentials from the environment"
            ),
            "{error}"
        );
    }
}
