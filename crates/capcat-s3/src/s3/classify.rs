//! Maps aws-sdk-s3 errors to the store's [`ErrorClass`]es.

use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

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
    let mut detail = DisplayErrorContext(error).to_string();
    if let Some(response) = error.raw_response() {
        detail = format!("HTTP {}: {detail}", response.status().as_u16());
    }
    StoreError::new(class, op, key, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

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
