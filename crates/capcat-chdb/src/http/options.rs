//! [`FrontOptions`]: where the HTTP front listens, whom it admits, and the
//! TLS it serves.

use std::net::IpAddr;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls;

use super::HttpFrontError;

/// How an [`super::HttpFront`] serves. The default is the test front:
/// 127.0.0.1, an ephemeral port, no credentials, plain HTTP.
#[derive(Clone, Debug, Default)]
pub struct FrontOptions {
    /// The address to bind (127.0.0.1 when `None`). Any address that is not
    /// loopback needs [`Self::credentials`].
    pub bind: Option<IpAddr>,
    /// The port (0: any free one).
    pub port: u16,
    /// The user and password every request must carry.
    pub credentials: Option<FrontCredentials>,
    /// Serve TLS with this certificate instead of plain HTTP.
    pub tls: Option<FrontTls>,
}

/// The one user the front admits.
#[derive(Clone)]
pub struct FrontCredentials {
    /// The user name (`X-ClickHouse-User`).
    pub user: String,
    /// The password (`X-ClickHouse-Key`); never printed.
    pub password: String,
}

impl std::fmt::Debug for FrontCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontCredentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl FrontCredentials {
    /// Whether `user` and `password` are these, compared without an early
    /// exit on the password so that its length of common prefix does not
    /// show in the answer's timing.
    pub(crate) fn admit(&self, user: &[u8], password: &[u8]) -> bool {
        let expected = self.password.as_bytes();
        let same_length = expected.len() == password.len();
        let differing = expected
            .iter()
            .zip(password)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        user == self.user.as_bytes() && same_length && differing == 0
    }
}

/// A certificate chain and its private key, both PEM.
#[derive(Clone)]
pub struct FrontTls {
    /// The server's certificate chain, leaf first.
    pub cert_chain_pem: String,
    /// The leaf's private key (PKCS#8, PKCS#1 or SEC1); never printed.
    pub key_pem: String,
}

impl std::fmt::Debug for FrontTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontTls")
            .field(
                "cert_chain_pem",
                &format_args!("{} bytes", self.cert_chain_pem.len()),
            )
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

impl FrontTls {
    /// The rustls server configuration (ring, TLS 1.2 and 1.3).
    pub(crate) fn server_config(&self) -> Result<rustls::ServerConfig, HttpFrontError> {
        let tls_error = |reason: String| HttpFrontError::Tls { reason };
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(self.cert_chain_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| tls_error(format!("certificate chain: {e}")))?;
        if chain.is_empty() {
            return Err(tls_error(
                "the certificate chain holds no certificate".to_owned(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| tls_error(format!("private key: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| tls_error(e.to_string()))
    }
}
