//! [`S3Store`]: any S3-compatible store through aws-sdk-s3.

mod classify;
mod config;

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_s3::config::interceptors::InterceptorContext;
use aws_sdk_s3::config::retry::{ClassifyRetry, RetryAction, RetryConfig};
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_http_client::tls;
use bytes::Bytes;

pub use config::{ConfigError, MAX_ATTEMPTS_LIMIT, S3Config, S3Credentials, S3Retry, S3Timeouts};

use self::classify::{RequestContext, classify};
use crate::error::{CredentialsOrigin, ErrorClass, Operation, StoreError};
use crate::key::ObjectKey;
use crate::metadata::{self, UserMetadata};
use crate::store::{
    ByteRange, ListPage, ListToken, ListedObject, ObjectChecksum, ObjectHead, PackStore,
    PutReceipt, clamp_page_size,
};

/// An S3-compatible store: one bucket, reached through aws-sdk-s3 with
/// explicit timeouts and retries. Clones share one client (and its
/// connection pool).
#[derive(Clone, Debug)]
pub struct S3Store {
    client: aws_sdk_s3::Client,
    bucket: Arc<str>,
    /// What an error names: the endpoint, its host, the credentials' origin.
    context: Arc<RequestContext>,
}

impl S3Store {
    /// Validates `config`, reads its `ca_file` and builds the client. No
    /// request is made.
    ///
    /// # Errors
    /// A [`ConfigError`] for a refused configuration, a `ca_file` that cannot
    /// be read or holds no usable certificate, or missing environment
    /// credentials.
    pub fn new(config: &S3Config) -> Result<Self, ConfigError> {
        config.validate()?;
        let tls_context = tls_context(config)?;
        let (credentials, origin) = resolve_credentials(&config.credentials)?;
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(config.timeouts.connect)
            .read_timeout(config.timeouts.read)
            .operation_attempt_timeout(config.timeouts.attempt)
            .operation_timeout(config.timeouts.operation)
            .build();
        let retry = RetryConfig::standard()
            .with_max_attempts(config.retry.max_attempts)
            .with_initial_backoff(config.retry.initial_backoff)
            .with_max_backoff(config.retry.max_backoff);
        // rustls with ring: no C toolchain beyond ring's, no OpenSSL. Plain
        // HTTP endpoints go through the same connector. The certificate and
        // its host name are always verified, against the system roots and
        // the `ca_file`.
        let http_client = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::Ring,
            ))
            .tls_context(tls_context)
            .build_https();
        let sdk_config = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .endpoint_url(config.endpoint.trim_end_matches('/'))
            .region(Region::new(config.region.clone()))
            .force_path_style(config.path_style)
            .credentials_provider(credentials)
            .http_client(http_client)
            .timeout_config(timeouts)
            .retry_config(retry)
            .retry_classifier(NoRetryOnRefusedCertificate)
            // PUT always declares its SHA-256 itself; no other request needs
            // a checksum, and GET verifies against the pack's own SHA-256.
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .build();
        Ok(Self {
            client: aws_sdk_s3::Client::from_conf(sdk_config),
            bucket: Arc::from(config.bucket.as_str()),
            context: Arc::new(RequestContext {
                endpoint: config.endpoint.trim_end_matches('/').to_owned(),
                host: config.endpoint_host().to_owned(),
                credentials: origin,
            }),
        })
    }

    /// Classifies a failed SDK call on `key`.
    fn classify<E>(
        &self,
        op: Operation,
        key: &str,
        error: &aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
    ) -> StoreError
    where
        E: aws_sdk_s3::error::ProvideErrorMetadata + std::error::Error + 'static,
    {
        classify(&self.context, op, key, error)
    }

    /// The bucket.
    #[must_use]
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Creates the bucket; succeeds when this account already owns it. For
    /// tests and first-time setup: the service never creates buckets.
    ///
    /// # Errors
    /// The classified failure.
    pub async fn create_bucket(&self) -> Result<(), StoreError> {
        match self
            .client
            .create_bucket()
            .bucket(&*self.bucket)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(error) => {
                let code = error
                    .as_service_error()
                    .and_then(aws_sdk_s3::error::ProvideErrorMetadata::code);
                if matches!(
                    code,
                    Some("BucketAlreadyOwnedByYou" | "BucketAlreadyExists")
                ) {
                    Ok(())
                } else {
                    Err(self.classify(Operation::CreateBucket, &self.bucket, &error))
                }
            }
        }
    }
}

/// The TLS settings: the system roots, plus the `ca_file`'s certificates.
fn tls_context(config: &S3Config) -> Result<tls::TlsContext, ConfigError> {
    // Native roots stay on: the CA file adds to them, never replaces them.
    let mut trust = tls::TrustStore::default().with_native_roots(true);
    if let Some(path) = &config.ca_file {
        trust = trust.with_pem_certificate(config::read_ca_file(path)?);
    }
    tls::TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .map_err(|e| ConfigError::TlsSetup {
            reason: classify::error_chain(&e),
        })
}

/// Forbids the SDK's retries of a request whose TLS handshake refused the
/// endpoint's certificate: the next handshake would refuse it again, so the
/// first request fails at once with the classified error.
#[derive(Debug)]
struct NoRetryOnRefusedCertificate;

impl ClassifyRetry for NoRetryOnRefusedCertificate {
    fn classify_retry(&self, ctx: &InterceptorContext) -> RetryAction {
        match ctx.output_or_error() {
            Some(Err(error)) if classify::certificate_refusal(error).is_some() => {
                RetryAction::RetryForbidden
            }
            _ => RetryAction::NoActionIndicated,
        }
    }

    fn name(&self) -> &'static str {
        "capcat: refused TLS certificate"
    }
}

/// The SDK credentials and where they came from.
fn resolve_credentials(
    credentials: &S3Credentials,
) -> Result<(Credentials, CredentialsOrigin), ConfigError> {
    match credentials {
        S3Credentials::Static {
            access_key_id,
            secret_access_key,
            session_token,
        } => Ok((
            Credentials::new(
                access_key_id,
                secret_access_key,
                session_token.clone(),
                None,
                "capcat-static",
            ),
            CredentialsOrigin::Config {
                access_key_id: access_key_id.clone(),
            },
        )),
        S3Credentials::Environment => {
            let var = |variable: &'static str| {
                std::env::var(variable)
                    .ok()
                    .filter(|v| !v.is_empty())
                    .ok_or(ConfigError::MissingEnvironmentCredentials { variable })
            };
            let access_key_id = var("AWS_ACCESS_KEY_ID")?;
            let secret_access_key = var("AWS_SECRET_ACCESS_KEY")?;
            let session_token = var("AWS_SESSION_TOKEN").ok();
            let origin = CredentialsOrigin::Environment {
                access_key_id: access_key_id.clone(),
                session_token: session_token.is_some(),
            };
            Ok((
                Credentials::new(
                    access_key_id,
                    secret_access_key,
                    session_token,
                    None,
                    "capcat-environment",
                ),
                origin,
            ))
        }
    }
}

/// Collects the user metadata of a response into a [`UserMetadata`]. S3
/// lowercases names; anything that still fails validation (written by some
/// other client) is dropped with a debug line, since it cannot be ours.
fn user_metadata(op: Operation, key: &str, raw: Option<&HashMap<String, String>>) -> UserMetadata {
    let entries = raw
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    UserMetadata::new(entries).unwrap_or_else(|error| {
        tracing::debug!(%op, key, %error, "ignoring user metadata this store would not write");
        UserMetadata::default()
    })
}

/// The checksum a HEAD reports: CRC-64/NVME when present (what every PUT
/// declares), else the SHA-256 of an object written before.
fn decode_checksum(crc64nvme: Option<&str>, sha256: Option<&str>) -> Option<ObjectChecksum> {
    use aws_smithy_types::base64::decode;
    let crc = crc64nvme
        .and_then(|text| decode(text).ok()?.try_into().ok())
        .map(|bytes: [u8; 8]| ObjectChecksum::Crc64Nvme(u64::from_be_bytes(bytes)));
    crc.or_else(|| {
        sha256
            .and_then(|text| decode(text).ok()?.try_into().ok())
            .map(ObjectChecksum::Sha256)
    })
}

/// The whole-object checksum a pack's metadata names: `capcat-crc64nvme`,
/// or for a pack written before it existed, `capcat-sha256` (which was then
/// the SHA-256 of the whole object). A value that is not hex is an error:
/// the object cannot be checked, so it is not returned.
fn metadata_checksum(metadata: &UserMetadata) -> Result<Option<ObjectChecksum>, String> {
    if let Some(text) = metadata.get(metadata::CRC64NVME) {
        let mut bytes = [0_u8; 8];
        hex::decode_to_slice(text, &mut bytes)
            .map_err(|_| format!("metadata crc64nvme {text:?} is not 16 hex digits"))?;
        return Ok(Some(ObjectChecksum::Crc64Nvme(u64::from_be_bytes(bytes))));
    }
    let Some(text) = metadata.get(metadata::SHA256) else {
        return Ok(None);
    };
    let mut bytes = [0_u8; 32];
    hex::decode_to_slice(text, &mut bytes)
        .map_err(|_| format!("metadata sha256 {text:?} is not 64 hex digits"))?;
    Ok(Some(ObjectChecksum::Sha256(bytes)))
}

impl PackStore for S3Store {
    async fn put(
        &self,
        key: &ObjectKey,
        body: Bytes,
        crc64nvme: u64,
        metadata: &UserMetadata,
    ) -> Result<PutReceipt, StoreError> {
        let metadata: HashMap<String, String> = metadata
            .entries()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let output = self
            .client
            .put_object()
            .bucket(&*self.bucket)
            .key(key.as_str())
            .content_length(i64::try_from(body.len()).unwrap_or(i64::MAX))
            .body(ByteStream::from(body))
            // The store verifies the body against this and refuses a mismatch.
            .checksum_crc64_nvme(aws_smithy_types::base64::encode(crc64nvme.to_be_bytes()))
            .set_metadata(Some(metadata))
            .send()
            .await
            .map_err(|e| self.classify(Operation::Put, key.as_str(), &e))?;
        tracing::debug!(key = %key, "s3 store: put");
        Ok(PutReceipt {
            etag: output.e_tag().map(str::to_owned),
        })
    }

    async fn head(&self, key: &ObjectKey) -> Result<ObjectHead, StoreError> {
        let op = Operation::Head;
        let output = self
            .client
            .head_object()
            .bucket(&*self.bucket)
            .key(key.as_str())
            .checksum_mode(aws_sdk_s3::types::ChecksumMode::Enabled)
            .send()
            .await
            .map_err(|e| self.classify(op, key.as_str(), &e))?;
        Ok(ObjectHead {
            size: output
                .content_length()
                .and_then(|n| u64::try_from(n).ok())
                .unwrap_or(0),
            metadata: user_metadata(op, key.as_str(), output.metadata()),
            checksum: decode_checksum(output.checksum_crc64_nvme(), output.checksum_sha256()),
        })
    }

    async fn get(&self, key: &ObjectKey) -> Result<Bytes, StoreError> {
        let op = Operation::Get;
        let output = self
            .client
            .get_object()
            .bucket(&*self.bucket)
            .key(key.as_str())
            .send()
            .await
            .map_err(|e| self.classify(op, key.as_str(), &e))?;
        let metadata = user_metadata(op, key.as_str(), output.metadata());
        let bytes = collect_body(op, key.as_str(), output.body).await?;
        // A pack's metadata carries the object's checksum: check the bytes
        // against it, so a corrupted object is a ChecksumMismatch here and
        // never reaches the pack decoder. Objects without it (foreign) are
        // returned as they are.
        let mismatch = |detail: String| {
            StoreError::new(ErrorClass::ChecksumMismatch, op, key.as_str(), detail)
        };
        if let Some(checksum) = metadata_checksum(&metadata).map_err(mismatch)? {
            checksum
                .verify(&bytes)
                .map_err(|detail| mismatch(format!("metadata {detail}")))?;
        }
        Ok(bytes)
    }

    async fn get_range(&self, key: &ObjectKey, range: ByteRange) -> Result<Bytes, StoreError> {
        let op = Operation::GetRange;
        let output = self
            .client
            .get_object()
            .bucket(&*self.bucket)
            .key(key.as_str())
            .range(range.http_header())
            .send()
            .await
            .map_err(|e| self.classify(op, key.as_str(), &e))?;
        collect_body(op, key.as_str(), output.body).await
    }

    async fn list_page(
        &self,
        prefix: &str,
        token: Option<&ListToken>,
        max_keys: u16,
    ) -> Result<ListPage, StoreError> {
        let op = Operation::List;
        let output = self
            .client
            .list_objects_v2()
            .bucket(&*self.bucket)
            .prefix(prefix)
            .max_keys(i32::from(clamp_page_size(max_keys)))
            .set_continuation_token(token.map(|t| t.0.clone()))
            .send()
            .await
            .map_err(|e| self.classify(op, prefix, &e))?;
        let objects = output
            .contents()
            .iter()
            .filter_map(|object| {
                Some(ListedObject {
                    key: object.key()?.to_owned(),
                    size: object
                        .size()
                        .and_then(|n| u64::try_from(n).ok())
                        .unwrap_or(0),
                })
            })
            .collect();
        let next = if output.is_truncated() == Some(true) {
            let token = output.next_continuation_token().ok_or_else(|| {
                // Without a token the listing cannot go on; stopping silently
                // would hide every key after this page.
                StoreError::new(
                    ErrorClass::Other,
                    op,
                    prefix,
                    "truncated listing without a continuation token",
                )
            })?;
            Some(ListToken(token.to_owned()))
        } else {
            None
        };
        Ok(ListPage { objects, next })
    }

    async fn delete(&self, key: &ObjectKey) -> Result<(), StoreError> {
        self.client
            .delete_object()
            .bucket(&*self.bucket)
            .key(key.as_str())
            .send()
            .await
            .map_err(|e| self.classify(Operation::Delete, key.as_str(), &e))?;
        Ok(())
    }
}

async fn collect_body(op: Operation, key: &str, body: ByteStream) -> Result<Bytes, StoreError> {
    match body.collect().await {
        Ok(data) => Ok(data.into_bytes()),
        // The connection failed mid-body: the same request can succeed later.
        Err(error) => Err(StoreError::new(
            ErrorClass::Transient,
            op,
            key,
            format!("reading the body: {}", classify::error_chain(&error)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn user(entries: &[(&str, &str)]) -> UserMetadata {
        UserMetadata::new(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        )
        .expect("valid metadata")
    }

    #[test]
    fn the_crc_names_the_checksum_and_an_older_pack_its_sha256() {
        let both = user(&[
            (metadata::CRC64NVME, "00000000000000ff"),
            (metadata::SHA256, &"ab".repeat(32)),
        ]);
        assert_eq!(
            metadata_checksum(&both),
            Ok(Some(ObjectChecksum::Crc64Nvme(0xff)))
        );
        let older = user(&[(metadata::SHA256, &"ab".repeat(32))]);
        assert_eq!(
            metadata_checksum(&older),
            Ok(Some(ObjectChecksum::Sha256([0xab; 32])))
        );
        assert_eq!(metadata_checksum(&user(&[])), Ok(None));
        assert!(metadata_checksum(&user(&[(metadata::CRC64NVME, "zz")])).is_err());
    }

    #[test]
    fn head_checksums_decode_big_endian() {
        use aws_smithy_types::base64::encode;
        let crc = encode(0x0102_0304_0506_0708_u64.to_be_bytes());
        let sha = encode([7_u8; 32]);
        assert_eq!(
            decode_checksum(Some(&crc), Some(&sha)),
            Some(ObjectChecksum::Crc64Nvme(0x0102_0304_0506_0708))
        );
        assert_eq!(
            decode_checksum(None, Some(&sha)),
            Some(ObjectChecksum::Sha256([7; 32]))
        );
        assert_eq!(decode_checksum(None, None), None);
    }
}
