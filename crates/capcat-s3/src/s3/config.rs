//! [`S3Config`]: where and how to reach an S3-compatible store, validated
//! before any request is made.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

/// Where the store's credentials come from.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum S3Credentials {
    /// Credentials given in the configuration.
    Static {
        /// The access key id.
        access_key_id: String,
        /// The secret access key (never printed by `Debug`).
        secret_access_key: String,
        /// A session token, for temporary credentials.
        session_token: Option<String>,
    },
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and, when set,
    /// `AWS_SESSION_TOKEN`, read once when the store is built.
    Environment,
}

impl S3Credentials {
    /// Static credentials without a session token.
    #[must_use]
    pub fn new_static(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
    ) -> Self {
        Self::Static {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            session_token: None,
        }
    }
}

impl fmt::Debug for S3Credentials {
    // The secret and the token stay out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Static {
                access_key_id,
                session_token,
                ..
            } => f
                .debug_struct("Static")
                .field("access_key_id", access_key_id)
                .field("secret_access_key", &"<redacted>")
                .field(
                    "session_token",
                    &session_token.as_ref().map(|_| "<redacted>"),
                )
                .finish(),
            Self::Environment => f.write_str("Environment"),
        }
    }
}

/// The timeouts of every request. Without them a store that accepts a
/// connection and never answers would hold the caller forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct S3Timeouts {
    /// Establishing a TCP (and TLS) connection.
    pub connect: Duration,
    /// Waiting for the first byte of a response.
    pub read: Duration,
    /// One attempt of an operation, transfer included.
    pub attempt: Duration,
    /// A whole operation, all its retries included.
    pub operation: Duration,
}

impl Default for S3Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            read: Duration::from_secs(30),
            attempt: Duration::from_secs(120),
            operation: Duration::from_secs(300),
        }
    }
}

/// How a failed request is retried (the SDK's standard retry strategy:
/// transient errors and throttling, with jittered exponential backoff).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct S3Retry {
    /// Attempts per operation, the first one included (1 = no retry).
    pub max_attempts: u32,
    /// The first backoff.
    pub initial_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
}

impl Default for S3Retry {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// The most attempts a configuration may ask for; more would only stretch an
/// outage the caller should hear about.
pub const MAX_ATTEMPTS_LIMIT: u32 = 10;

/// Where and how to reach an S3-compatible store.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3Config {
    /// The endpoint URL, `https://host[:port]` (or `http://` with
    /// [`Self::allow_http`]). No path, query or fragment.
    pub endpoint: String,
    /// The signing region (`us-east-1` for most S3-compatible stores).
    pub region: String,
    /// The bucket.
    pub bucket: String,
    /// Path-style addressing (`endpoint/bucket/key`), which most
    /// S3-compatible stores need, instead of virtual-hosted style.
    pub path_style: bool,
    /// Allows a plain `http://` endpoint: credentials are signed, not
    /// encrypted, but the payload travels in clear. Refused with `https://`,
    /// where it would mean nothing.
    pub allow_http: bool,
    /// A PEM bundle of CA certificates trusted in addition to the system
    /// roots, for an endpoint whose certificate a private CA signed. Read by
    /// [`crate::S3Store::new`]. The certificate and its host name are always
    /// verified: there is no switch to turn that off. Only with `https://`.
    pub ca_file: Option<PathBuf>,
    /// The credentials.
    pub credentials: S3Credentials,
    /// The timeouts.
    pub timeouts: S3Timeouts,
    /// The retry policy.
    pub retry: S3Retry,
}

impl S3Config {
    /// A configuration with path-style addressing, HTTPS only, and the
    /// default timeouts and retries.
    #[must_use]
    pub fn new(
        endpoint: impl Into<String>,
        region: impl Into<String>,
        bucket: impl Into<String>,
        credentials: S3Credentials,
    ) -> Self {
        Self {
            endpoint: endpoint.into(),
            region: region.into(),
            bucket: bucket.into(),
            path_style: true,
            allow_http: false,
            ca_file: None,
            credentials,
            timeouts: S3Timeouts::default(),
            retry: S3Retry::default(),
        }
    }

    /// Checks every field, in the order they are declared.
    ///
    /// # Errors
    /// The first [`ConfigError`] found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_endpoint()?;
        let region_ok = !self.region.is_empty()
            && self
                .region
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !region_ok {
            return Err(ConfigError::BadRegion {
                region: self.region.clone(),
            });
        }
        if !is_valid_bucket_name(&self.bucket) {
            return Err(ConfigError::BadBucket {
                bucket: self.bucket.clone(),
            });
        }
        if let S3Credentials::Static {
            access_key_id,
            secret_access_key,
            ..
        } = &self.credentials
            && (access_key_id.is_empty() || secret_access_key.is_empty())
        {
            return Err(ConfigError::EmptyCredentials);
        }
        let t = &self.timeouts;
        for (name, value) in [
            ("connect", t.connect),
            ("read", t.read),
            ("attempt", t.attempt),
            ("operation", t.operation),
        ] {
            if value.is_zero() {
                return Err(ConfigError::ZeroTimeout { name });
            }
        }
        if t.attempt > t.operation {
            return Err(ConfigError::AttemptLongerThanOperation {
                attempt: t.attempt,
                operation: t.operation,
            });
        }
        let r = &self.retry;
        if r.max_attempts == 0 || r.max_attempts > MAX_ATTEMPTS_LIMIT {
            return Err(ConfigError::BadMaxAttempts {
                max_attempts: r.max_attempts,
            });
        }
        if r.initial_backoff > r.max_backoff {
            return Err(ConfigError::BackoffOrder {
                initial: r.initial_backoff,
                max: r.max_backoff,
            });
        }
        Ok(())
    }

    fn validate_endpoint(&self) -> Result<(), ConfigError> {
        let endpoint = self.endpoint.as_str();
        let bad = |reason: &'static str| ConfigError::BadEndpoint {
            endpoint: endpoint.to_owned(),
            reason,
        };
        // A scheme-less endpoint is refused, not read as plain HTTP: the
        // caller must say which one they mean.
        let (https, rest) = if let Some(rest) = endpoint.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = endpoint.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(bad("it must start with http:// or https://"));
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() {
            return Err(bad("it has no host"));
        }
        if authority.contains(['/', '?', '#', '@'])
            || authority
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(bad(
                "it may hold only a host and a port: no path, query, fragment, user or spaces",
            ));
        }
        if let Some((host, port)) = authority.rsplit_once(':') {
            // An IPv6 literal without a port ends in `]`, and its colons are not a port.
            if !port.ends_with(']') {
                if host.is_empty() {
                    return Err(bad("it has no host"));
                }
                if !matches!(port.parse::<u16>(), Ok(p) if p > 0) {
                    return Err(bad("its port is not a number from 1 to 65535"));
                }
            }
        }
        match (https, self.allow_http) {
            (false, false) => Err(ConfigError::HttpNotAllowed {
                endpoint: endpoint.to_owned(),
            }),
            (true, true) => Err(ConfigError::AllowHttpWithHttps {
                endpoint: endpoint.to_owned(),
            }),
            (false, true) if self.ca_file.is_some() => Err(ConfigError::CaFileWithHttp {
                endpoint: endpoint.to_owned(),
            }),
            _ => Ok(()),
        }
    }

    /// The endpoint's host, as TLS verifies it: without the port, and an
    /// IPv6 literal without its brackets. Call after [`Self::validate`].
    pub(crate) fn endpoint_host(&self) -> &str {
        let rest = self
            .endpoint
            .split_once("://")
            .map_or(self.endpoint.as_str(), |(_, rest)| rest);
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if let Some(v6) = authority.strip_prefix('[') {
            return v6.split_once(']').map_or(v6, |(host, _)| host);
        }
        authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host)
    }
}

/// Reads the PEM CA bundle of [`S3Config::ca_file`] and checks every
/// certificate in it the way the TLS client will load it: the client's
/// loader panics on what this refuses, so nothing reaches it unchecked.
///
/// # Errors
/// [`ConfigError::CaFileUnreadable`], [`ConfigError::CaFileBadCertificate`]
/// or [`ConfigError::CaFileNoCertificates`], each naming the file.
pub(crate) fn read_ca_file(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let pem = std::fs::read(path).map_err(|e| ConfigError::CaFileUnreadable {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let bad = |reason: String| ConfigError::CaFileBadCertificate {
        path: path.to_owned(),
        reason,
    };
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("malformed PEM: {e}")))?;
    if certificates.is_empty() {
        return Err(ConfigError::CaFileNoCertificates {
            path: path.to_owned(),
        });
    }
    let mut roots = rustls::RootCertStore::empty();
    for (index, certificate) in certificates.into_iter().enumerate() {
        roots.add(certificate).map_err(|e| {
            bad(format!(
                "certificate {} is not a usable CA certificate: {e}",
                index + 1
            ))
        })?;
    }
    Ok(pem)
}

/// S3's bucket naming rules: 3 to 63 characters of lowercase letters,
/// digits, `.` and `-`, starting and ending with a letter or a digit.
fn is_valid_bucket_name(bucket: &str) -> bool {
    let bytes = bucket.as_bytes();
    let edge = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (3..=63).contains(&bytes.len())
        && bytes.iter().all(|&b| edge(b) || b == b'.' || b == b'-')
        && bytes.first().copied().is_some_and(edge)
        && bytes.last().copied().is_some_and(edge)
        && !bucket.contains("..")
}

/// A refused [`S3Config`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The endpoint is not a bare `http(s)://host[:port]` URL.
    #[error("S3 endpoint {endpoint:?} is refused: {reason}")]
    BadEndpoint {
        /// The endpoint.
        endpoint: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A plain-HTTP endpoint without `allow_http`.
    #[error("S3 endpoint {endpoint:?} is plain HTTP; set allow_http to use it")]
    HttpNotAllowed {
        /// The endpoint.
        endpoint: String,
    },
    /// `allow_http` with an HTTPS endpoint: the flag pairs only with `http://`.
    #[error(
        "allow_http is set but S3 endpoint {endpoint:?} is HTTPS; the flag pairs only with http://"
    )]
    AllowHttpWithHttps {
        /// The endpoint.
        endpoint: String,
    },
    /// The region is empty or not lowercase `[a-z0-9-]`.
    #[error("S3 region {region:?} must be non-empty lowercase [a-z0-9-]")]
    BadRegion {
        /// The region.
        region: String,
    },
    /// The bucket name breaks S3's naming rules.
    #[error(
        "S3 bucket {bucket:?} must be 3-63 characters of [a-z0-9.-], starting and ending with a letter or digit"
    )]
    BadBucket {
        /// The bucket.
        bucket: String,
    },
    /// Static credentials with an empty access key or secret.
    #[error("static S3 credentials need a non-empty access key id and secret access key")]
    EmptyCredentials,
    /// Environment credentials, but a variable is unset or empty.
    #[error("S3 credentials from the environment: {variable} is unset or empty")]
    MissingEnvironmentCredentials {
        /// The variable.
        variable: &'static str,
    },
    /// `ca_file` with a plain-HTTP endpoint, where no certificate is checked.
    #[error(
        "ca_file is set but S3 endpoint {endpoint:?} is plain HTTP; a CA file pairs only with https://"
    )]
    CaFileWithHttp {
        /// The endpoint.
        endpoint: String,
    },
    /// The `ca_file` is missing or cannot be read.
    #[error(
        "cannot read the S3 ca_file {path:?}: {reason}; point ca_file at a readable PEM bundle of the CA that signed the endpoint's certificate"
    )]
    CaFileUnreadable {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read (the I/O error).
        reason: String,
    },
    /// The `ca_file` holds no `CERTIFICATE` PEM block.
    #[error(
        "the S3 ca_file {path:?} holds no PEM certificate; it must contain at least one -----BEGIN CERTIFICATE----- block of the CA that signed the endpoint's certificate"
    )]
    CaFileNoCertificates {
        /// The file.
        path: PathBuf,
    },
    /// A certificate of the `ca_file` is malformed or not usable as a CA.
    #[error("the S3 ca_file {path:?} is refused: {reason}; it must hold PEM CA certificates only")]
    CaFileBadCertificate {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The TLS client refused its own configuration.
    #[error("the S3 client's TLS configuration is refused: {reason}")]
    TlsSetup {
        /// The TLS client's error.
        reason: String,
    },
    /// A timeout of zero.
    #[error("the S3 {name} timeout must be above zero")]
    ZeroTimeout {
        /// Which timeout.
        name: &'static str,
    },
    /// The per-attempt timeout exceeds the whole-operation timeout.
    #[error("the S3 attempt timeout {attempt:?} exceeds the operation timeout {operation:?}")]
    AttemptLongerThanOperation {
        /// The attempt timeout.
        attempt: Duration,
        /// The operation timeout.
        operation: Duration,
    },
    /// `max_attempts` is 0 or above the limit.
    #[error("S3 max_attempts {max_attempts} must be 1 to {MAX_ATTEMPTS_LIMIT}")]
    BadMaxAttempts {
        /// The value.
        max_attempts: u32,
    },
    /// The initial backoff exceeds the maximum backoff.
    #[error("S3 initial backoff {initial:?} exceeds the maximum backoff {max:?}")]
    BackoffOrder {
        /// The initial backoff.
        initial: Duration,
        /// The maximum backoff.
        max: Duration,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(endpoint: &str) -> S3Config {
        let mut config = S3Config::new(
            endpoint,
            "us-east-1",
            "capcat-packs",
            S3Credentials::new_static("ak", "sk"),
        );
        config.allow_http = endpoint.starts_with("http://");
        config
    }

    #[test]
    fn good_configs_pass() {
        for endpoint in [
            "https://s3.example.com",
            "http://127.0.0.1:9000",
            "http://127.0.0.1:9000/",
            "https://[::1]:443",
            "https://[::1]",
        ] {
            assert_eq!(config(endpoint).validate(), Ok(()), "{endpoint}");
        }
    }

    #[test]
    fn scheme_less_and_odd_endpoints_are_refused() {
        for endpoint in [
            "127.0.0.1:9000",
            "s3.example.com",
            "ftp://x",
            "https://",
            "http://:9000",
            "https://h/path",
            "https://h?x=1",
            "https://u@h",
            "https://h:0",
            "https://h:99999",
            "https://h:abc",
            "https:// h",
        ] {
            let mut c = config(endpoint);
            c.allow_http = false;
            assert!(
                matches!(c.validate(), Err(ConfigError::BadEndpoint { .. })),
                "{endpoint}: {:?}",
                c.validate()
            );
        }
    }

    #[test]
    fn allow_http_pairs_only_with_http() {
        let mut c = config("http://127.0.0.1:9000");
        c.allow_http = false;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::HttpNotAllowed { .. })
        ));
        let mut c = config("https://s3.example.com");
        c.allow_http = true;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::AllowHttpWithHttps { .. })
        ));
    }

    #[test]
    fn other_fields_are_checked() {
        let base = config("https://s3.example.com");
        let check = |edit: &dyn Fn(&mut S3Config)| {
            let mut c = base.clone();
            edit(&mut c);
            c.validate()
        };
        assert!(matches!(
            check(&|c| c.region = String::new()),
            Err(ConfigError::BadRegion { .. })
        ));
        assert!(matches!(
            check(&|c| c.region = "US East".into()),
            Err(ConfigError::BadRegion { .. })
        ));
        for bucket in ["ab", "Upper", "-lead", "trail-", "a..b", "under_score"] {
            assert!(
                matches!(
                    check(&|c| c.bucket = bucket.into()),
                    Err(ConfigError::BadBucket { .. })
                ),
                "{bucket}"
            );
        }
        assert_eq!(
            check(&|c| c.credentials = S3Credentials::new_static("", "sk")),
            Err(ConfigError::EmptyCredentials)
        );
        assert_eq!(
            check(&|c| c.timeouts.read = Duration::ZERO),
            Err(ConfigError::ZeroTimeout { name: "read" })
        );
        assert!(matches!(
            check(&|c| c.timeouts.attempt = Duration::from_secs(400)),
            Err(ConfigError::AttemptLongerThanOperation { .. })
        ));
        assert_eq!(
            check(&|c| c.retry.max_attempts = 0),
            Err(ConfigError::BadMaxAttempts { max_attempts: 0 })
        );
        assert_eq!(
            check(&|c| c.retry.max_attempts = 11),
            Err(ConfigError::BadMaxAttempts { max_attempts: 11 })
        );
        assert!(matches!(
            check(&|c| c.retry.initial_backoff = Duration::from_secs(9)),
            Err(ConfigError::BackoffOrder { .. })
        ));
    }

    #[test]
    fn a_ca_file_pairs_only_with_https() {
        let mut c = config("http://127.0.0.1:9000");
        c.ca_file = Some("/etc/ca.pem".into());
        assert!(matches!(
            c.validate(),
            Err(ConfigError::CaFileWithHttp { .. })
        ));
        let mut c = config("https://s3.example.com");
        c.ca_file = Some("/etc/ca.pem".into());
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn the_endpoint_host_drops_the_scheme_the_port_and_brackets() {
        for (endpoint, host) in [
            ("https://s3.example.com", "s3.example.com"),
            ("https://localhost:9000/", "localhost"),
            ("http://127.0.0.1:9000", "127.0.0.1"),
            ("https://[::1]:443", "::1"),
            ("https://[::1]", "::1"),
        ] {
            assert_eq!(config(endpoint).endpoint_host(), host, "{endpoint}");
        }
    }

    #[test]
    fn a_ca_file_must_be_readable_and_hold_ca_certificates() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = dir.path().join("missing.pem");
        let error = read_ca_file(&missing).expect_err("a missing file");
        assert!(
            matches!(&error, ConfigError::CaFileUnreadable { path, .. } if *path == missing),
            "{error:?}"
        );
        assert!(error.to_string().contains("missing.pem"), "{error}");

        let empty = dir.path().join("empty.pem");
        let key_only = dir.path().join("key.pem");
        let key = rcgen::KeyPair::generate().expect("key");
        std::fs::write(&empty, "no PEM here\n").expect("write");
        std::fs::write(&key_only, key.serialize_pem()).expect("write");
        for path in [&empty, &key_only] {
            let error = read_ca_file(path).expect_err("no certificate");
            assert_eq!(
                error,
                ConfigError::CaFileNoCertificates { path: path.clone() }
            );
            assert!(error.to_string().contains("BEGIN CERTIFICATE"), "{error}");
        }

        // A CERTIFICATE block whose bytes are no certificate: the TLS
        // client's loader would panic on it, so it is refused here.
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(
            &garbage,
            "-----BEGIN CERTIFICATE-----\nAAECAwQFBgcICQ==\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        let error = read_ca_file(&garbage).expect_err("not a certificate");
        assert!(
            matches!(&error, ConfigError::CaFileBadCertificate { path, .. } if *path == garbage),
            "{error:?}"
        );

        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).expect("self-signed CA");
        let good = dir.path().join("ca.pem");
        std::fs::write(&good, format!("# a comment\n{}", ca.pem())).expect("write");
        assert!(read_ca_file(&good).is_ok());
    }

    #[test]
    fn debug_never_prints_the_secret() {
        let text = format!(
            "{:?}",
            S3Credentials::Static {
                access_key_id: "AKID".into(),
                secret_access_key: "very-secret".into(),
                session_token: Some("tok-secret".into()),
            }
        );
        assert!(
            text.contains("AKID")
                && !text.contains("secret\"")
                && !text.contains("very-secret")
                && !text.contains("tok-secret"),
            "{text}"
        );
    }
}
