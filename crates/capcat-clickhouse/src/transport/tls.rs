//! The TLS client configuration of the HTTP transport, and what a failed
//! handshake means.
//!
//! One stack: rustls with ring, as the S3 client builds it. Trusted are the
//! system's roots and, for a private cluster, the certificates of one extra
//! PEM file; certificate and hostname verification are always on, and there
//! is no switch to turn them off.

use std::path::Path;
use std::sync::Arc;

use rustls::{CertificateError, ClientConfig, RootCertStore};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::http::HttpError;

/// The client configuration trusting the system's roots and the
/// certificates in `ca_file`.
///
/// # Errors
/// [`HttpError::CaFile`] when the file cannot be read, holds no certificate
/// or a certificate rustls refuses; [`HttpError::NoTrustRoots`] when neither
/// the system nor the file gives a root.
pub(crate) fn client_config(ca_file: Option<&Path>) -> Result<ClientConfig, HttpError> {
    let mut roots = RootCertStore::empty();
    // A system store that cannot be read in part (one unreadable file among
    // many) still gives the rest; an empty store is refused below, so no
    // failure here goes unnoticed where it matters.
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::debug!(%error, "a system certificate store could not be read");
    }
    let (_added, _ignored) = roots.add_parsable_certificates(native.certs);
    if let Some(path) = ca_file {
        let ca_error = |reason: String| HttpError::CaFile {
            path: path.to_owned(),
            reason,
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| ca_error(e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| ca_error(e.to_string()))?;
        if certs.is_empty() {
            return Err(ca_error(
                "it holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_owned(),
            ));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
        }
    }
    if roots.is_empty() {
        return Err(HttpError::NoTrustRoots);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpError::Tls {
            reason: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// What a TLS handshake's failure says about the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandshakeRefusal {
    /// No trusted CA signed the server's certificate.
    Untrusted,
    /// The certificate does not name the host the URL names.
    WrongName,
    /// The server did not speak TLS (a plain-HTTP port behind an `https://`
    /// URL).
    NotTls,
}

/// The first rustls error in `error`'s source chain, classified. The
/// chain is walked through each `std::io::Error`'s inner error, which is
/// how tokio-rustls hands rustls errors up.
pub(crate) fn classify(
    error: &(dyn std::error::Error + 'static),
) -> Option<(HandshakeRefusal, String)> {
    // Bounded: a source chain is finite, but a cycle would be a bug in a
    // dependency; 32 links is far beyond any real chain.
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    for _ in 0..32 {
        let link = current?;
        if let Some(found) = link.downcast_ref::<rustls::Error>() {
            let refusal = match found {
                rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                ) => HandshakeRefusal::WrongName,
                rustls::Error::InvalidCertificate(_) => HandshakeRefusal::Untrusted,
                rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
                    HandshakeRefusal::NotTls
                }
                _ => return None,
            };
            return Some((refusal, found.to_string()));
        }
        // An `io::Error` wrapping another error reports that error's
        // SOURCE as its own, skipping the wrapped error itself (hyper-rustls
        // nests rustls's error two `io::Error`s deep): step into it.
        current = match link
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => link.source(),
        };
    }
    None
}
