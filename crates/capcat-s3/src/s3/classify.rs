//! Maps aws-sdk-s3 errors to the store's [`ErrorClass`]es, and to the
//! typed errors an operator can act on: refused credentials, an untrusted
//! certificate, a certificate for another host.

use std::error::Error;

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use rustls::CertificateError;

use crate::error::{CredentialsOrigin, ErrorClass, Operation, StoreError};

/// What a store's errors name besides the operation and the key.
#[derive(Debug)]
pub(crate) struct RequestContext {
    /// The endpoint URL, without a trailing `/`.
    pub(crate) endpoint: String,
    /// The endpoint's host, the name its certificate must hold.
    pub(crate) host: String,
    /// Where the credentials came from.
    pub(crate) credentials: CredentialsOrigin,
}

/// Why a TLS handshake refused the endpoint's certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CertificateRefusal {
    /// No trusted CA issued it (rustls `UnknownIssuer`).
    UnknownIssuer,
    /// It does not name the endpoint's host (rustls `NotValidForName`).
    NotValidForName,
    /// Any other certificate error: expired, revoked, a bad signature, ...
    Other,
}

/// `error` and every error after it: after an `io::Error` comes its payload
/// (`io::Error::get_ref`), after any other error its `source()`.
///
/// `io::Error::source` returns the payload's *source*, skipping the payload
/// itself, and tokio-rustls / hyper-rustls carry the `rustls::Error` as the
/// payload of an `io::Error` (two of them deep): a plain `source()` walk
/// never meets it.
fn chain<'a>(error: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(error), |&error| {
        match error.downcast_ref::<std::io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as &(dyn Error + 'static)),
            None => error.source(),
        }
    })
}

/// The certificate refusal in `error`'s chain: a `rustls::Error::
/// InvalidCertificate`, found by downcasting (no Display text is matched).
pub(crate) fn certificate_refusal(error: &(dyn Error + 'static)) -> Option<CertificateRefusal> {
    chain(error).find_map(|cause| match cause.downcast_ref::<rustls::Error>()? {
        rustls::Error::InvalidCertificate(certificate) => Some(match certificate {
            CertificateError::UnknownIssuer => CertificateRefusal::UnknownIssuer,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                CertificateRefusal::NotValidForName
            }
            _ => CertificateRefusal::Other,
        }),
        _ => None,
    })
}

/// The class of an HTTP error response, from its status and S3 error code.
/// HEAD responses have no body, so their code is often absent and the status
/// decides alone.
pub(crate) fn class_of_response(status: u16, code: Option<&str>) -> ErrorClass {
    match code {
        // The body did not match the declared checksum (BadDigest), or the
        // payload did not match its signed hash.
        Some("BadDigest" | "XAmzContentSHA256Mismatch" | "XAmzContentChecksumMismatch") => {
            return ErrorClass::ChecksumMismatch;
        }
        Some(
            "SignatureDoesNotMatch"
            | "InvalidAccessKeyId"
            | "AccessDenied"
            | "ExpiredToken"
            | "InvalidToken",
        ) => {
            return ErrorClass::Auth;
        }
        Some(
            "SlowDown" | "RequestTimeout" | "InternalError" | "ServiceUnavailable" | "Throttling",
        ) => {
            return ErrorClass::Transient;
        }
        Some("NoSuchKey" | "NoSuchBucket") => return ErrorClass::NotFound,
        _ => {}
    }
    match status {
        404 => ErrorClass::NotFound,
        412 => ErrorClass::PreconditionFailed,
        401 | 403 => ErrorClass::Auth,
        408 | 429 | 500..=599 => ErrorClass::Transient,
        _ => ErrorClass::Other,
    }
}

/// Classifies a failed SDK call on `key`.
pub(crate) fn classify<E>(
    context: &RequestContext,
    op: Operation,
    key: &str,
    error: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let refusal = certificate_refusal(error);
    let class = match error {
        // The handshake refused the certificate: the next one would too.
        SdkError::DispatchFailure(_) if refusal.is_some() => ErrorClass::Other,
        // Refused or reset connections, timeouts while connecting or reading:
        // the request may not have reached the store, so a retry can succeed.
        SdkError::DispatchFailure(failure) if !failure.is_user() => ErrorClass::Transient,
        // The attempt or operation timeout fired.
        SdkError::TimeoutError(_) => ErrorClass::Transient,
        // A response cut short or unparseable, typically a connection closed
        // mid-response.
        SdkError::ResponseError(_) => ErrorClass::Transient,
        SdkError::ServiceError(service) => {
            class_of_response(service.raw().status().as_u16(), service.err().code())
        }
        _ => ErrorClass::Other,
    };
    let mut detail = error_chain(error);
    if let Some(response) = error.raw_response() {
        detail = format!("HTTP {}: {detail}", response.status().as_u16());
    }
    let key = key.to_owned();
    match refusal {
        Some(CertificateRefusal::UnknownIssuer) => {
            return StoreError::UntrustedCertificate {
                op,
                key,
                endpoint: context.endpoint.clone(),
                detail,
            };
        }
        Some(CertificateRefusal::NotValidForName) => {
            return StoreError::CertificateNameMismatch {
                op,
                key,
                endpoint: context.endpoint.clone(),
                host: context.host.clone(),
                detail,
            };
        }
        Some(CertificateRefusal::Other) | None => {}
    }
    if class == ErrorClass::Auth {
        // Only a response is classified Auth: the store read the signed
        // request and refused whoever signed it.
        return StoreError::CredentialsRefused {
            op,
            key,
            credentials: context.credentials.clone(),
            detail,
        };
    }
    StoreError::new(class, op, key, detail)
}

/// An error and its sources, each as it displays itself, joined by ": ".
///
/// Not the SDK's `DisplayErrorContext`, which appends the whole error's
/// `Debug` form (`DispatchFailure(DispatchFailure { source: ConnectorError
/// { .. } })`): every word of that is already in the chain, and the rest
/// is Rust syntax an operator reads as noise in a CLI message or a log line.
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    // Bounded by the chain's length: each step moves to the next source.
    while let Some(cause) = source {
        let said = cause.to_string();
        // A wrapper often repeats its cause's words: skip a repeat.
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(Inner);
    #[derive(Debug)]
    struct Inner;
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("dispatch failure")
        }
    }
    impl std::fmt::Display for Inner {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("connection refused")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    impl std::error::Error for Inner {}

    #[derive(Debug)]
    struct Wrapper(std::io::Error);
    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("dispatch failure")
        }
    }
    impl std::error::Error for Wrapper {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// A rustls error as hyper-rustls reports it: two `io::Error`s deep,
    /// under a wrapper.
    fn handshake_error(error: rustls::Error) -> Wrapper {
        Wrapper(std::io::Error::other(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            error,
        )))
    }

    #[test]
    fn certificate_refusals_are_found_inside_io_errors() {
        let refusal = |e: CertificateError| {
            certificate_refusal(&handshake_error(rustls::Error::InvalidCertificate(e)))
        };
        assert_eq!(
            refusal(CertificateError::UnknownIssuer),
            Some(CertificateRefusal::UnknownIssuer)
        );
        assert_eq!(
            refusal(CertificateError::NotValidForName),
            Some(CertificateRefusal::NotValidForName)
        );
        assert_eq!(
            refusal(CertificateError::NotValidForNameContext {
                expected: rustls::pki_types::ServerName::try_from("localhost").expect("a name"),
                presented: vec!["DnsName(\"other.invalid\")".to_owned()],
            }),
            Some(CertificateRefusal::NotValidForName)
        );
        assert_eq!(
            refusal(CertificateError::Expired),
            Some(CertificateRefusal::Other)
        );
        assert_eq!(
            certificate_refusal(&handshake_error(rustls::Error::DecryptError)),
            None
        );
        assert_eq!(
            certificate_refusal(&Wrapper(std::io::Error::from(
                std::io::ErrorKind::ConnectionRefused
            ))),
            None
        );
        assert_eq!(certificate_refusal(&Outer(Inner)), None);
    }

    #[test]
    fn an_error_chain_is_words_without_debug_output() {
        assert_eq!(
            error_chain(&Outer(Inner)),
            "dispatch failure: connection refused"
        );
    }

    #[test]
    fn statuses_and_codes_map_to_classes() {
        let cases = [
            (404, None, ErrorClass::NotFound),
            (404, Some("NoSuchKey"), ErrorClass::NotFound),
            (412, None, ErrorClass::PreconditionFailed),
            (403, None, ErrorClass::Auth),
            (403, Some("SignatureDoesNotMatch"), ErrorClass::Auth),
            (401, None, ErrorClass::Auth),
            (400, Some("BadDigest"), ErrorClass::ChecksumMismatch),
            (
                400,
                Some("XAmzContentSHA256Mismatch"),
                ErrorClass::ChecksumMismatch,
            ),
            (500, None, ErrorClass::Transient),
            (503, Some("SlowDown"), ErrorClass::Transient),
            (400, Some("RequestTimeout"), ErrorClass::Transient),
            (408, None, ErrorClass::Transient),
            (429, None, ErrorClass::Transient),
            (400, Some("InvalidArgument"), ErrorClass::Other),
            (416, Some("InvalidRange"), ErrorClass::Other),
        ];
        for (status, code, class) in cases {
            assert_eq!(class_of_response(status, code), class, "{status} {code:?}");
        }
    }
}
