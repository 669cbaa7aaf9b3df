//! [`AccessError`]: why a catalog server refused the connection itself
//! (its certificate, its credentials, its protocol), worded so that an
//! operator knows what to fix.
//!
//! A statement that fails for one of these reasons still fails as a
//! [`Failure`] (the protocol machines decide on failures, not on
//! reasons); [`super::Transport::check_access`] is the one call that
//! classifies, and the catalog makes it before its first statement.

use capcat_proto::Failure;

/// ClickHouse's exception codes for a refused login: `UNKNOWN_USER` (192),
/// `WRONG_PASSWORD` (193), `REQUIRED_PASSWORD` (194) and
/// `AUTHENTICATION_FAILED` (516, what current servers send for all three,
/// so that a client cannot tell a missing user from a wrong password).
pub const AUTHENTICATION_CODES: [u32; 4] = [192, 193, 194, 516];

/// Why the catalog at a URL refused the connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AccessError {
    /// The server refused the user or the password.
    #[error(
        "the catalog at {url} refused the login of user {user:?}: wrong user or password \
         (set CAPCAT_CATALOG_USER and CAPCAT_CATALOG_PASSWORD, CAPCAT_CATALOG_PASSWORD_FILE, \
         or catalog_user and catalog_password_file in the config file)"
    )]
    AuthenticationFailed {
        /// The catalog URL.
        url: String,
        /// The user that was refused (`default` when none was given).
        user: String,
        /// The server's exception text (it never carries the password).
        message: String,
    },
    /// No trusted CA signed the server's certificate.
    #[error(
        "the catalog at {url} presented a certificate no trusted CA signed ({detail}); for a \
         private CA, set catalog_ca_file to the CA's PEM file"
    )]
    UntrustedCertificate {
        /// The catalog URL.
        url: String,
        /// What rustls reported.
        detail: String,
    },
    /// The server's certificate does not name the URL's host.
    #[error(
        "the certificate of the catalog at {url} does not name its host ({detail}); connect by \
         a name the certificate carries"
    )]
    CertificateNameMismatch {
        /// The catalog URL.
        url: String,
        /// What rustls reported.
        detail: String,
    },
    /// An `https://` URL whose server did not answer in TLS.
    #[error(
        "the catalog at {url} did not answer in TLS ({detail}); is it a plain-HTTP port? \
         (ClickHouse serves HTTPS on its https_port, 8443 by default)"
    )]
    NotTls {
        /// The catalog URL.
        url: String,
        /// What rustls reported.
        detail: String,
    },
    /// The check itself failed for another reason (the server is down, the
    /// network is, the server answered an exception).
    #[error("the catalog at {url} failed its connection check: {failure}")]
    Failed {
        /// The catalog URL.
        url: String,
        /// What the transport reported.
        failure: Failure,
    },
}
