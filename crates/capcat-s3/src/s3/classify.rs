//! Maps aws-sdk-s3 errors to the store's [`ErrorClass`]es.

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

use crate::error::{ErrorClass, Operation, StoreError};

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
    op: Operation,
    key: &str,
    error: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let class = match error {
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
