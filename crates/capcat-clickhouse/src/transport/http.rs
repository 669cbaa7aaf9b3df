//! [`Http`]: statements sent to a ClickHouse server (or capcat-chdb's HTTP
//! front) through the `clickhouse` crate.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use capcat_proto::{Expect, Failure, InsertData, Rows, Statement};
use clickhouse::Client;
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::access::{AUTHENTICATION_CODES, AccessError};
use super::decode::{RESULT_FORMAT, decode_rows};
use super::exception::failure_from_exception;
use super::password::Password;
use super::tls::{self, HandshakeRefusal};
use super::{BoxFuture, Transport, check_insert_with_data};

/// Default bound on establishing a TCP connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on one statement, from sending it to the last result byte.
/// Above every protocol statement's `max_execution_time`, so the server's cap
/// fires first and the client's bound only catches a server gone silent.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How idle pooled connections may stay open: below ClickHouse's own
/// keep-alive timeout (3 s before 23.11, 10 s after), so the client never
/// reuses a socket the server is closing.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_millis(2_500);

/// Why an [`Http`] transport could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The URL is not `http://host[:port][/]` or `https://...`.
    #[error("catalog URL {url:?} is not valid: {reason}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The URL's scheme is neither `http` nor `https`.
    #[error("catalog URL {url:?} has scheme {scheme:?}; only http:// and https:// are served")]
    UnsupportedScheme {
        /// The URL given.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// A plain `http://` URL to a host that is not a loopback address,
    /// without `allow_insecure_http`: the password and every row would
    /// cross the network in clear.
    #[error(
        "catalog URL {url:?} is plain HTTP to a host that is not loopback; use https:// \
         (or set allow_insecure_http to accept a network that can read the password)"
    )]
    InsecureHttp {
        /// The URL given.
        url: String,
    },
    /// The extra CA file cannot be used.
    #[error("catalog CA file {}: {reason}", path.display())]
    CaFile {
        /// The file given as `ca_file`.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    /// Neither the system nor a CA file gives a trusted root, so no
    /// `https://` server could be verified.
    #[error(
        "no trusted root certificate: the system store is empty or unreadable; set \
         catalog_ca_file to the catalog CA's PEM file"
    )]
    NoTrustRoots,
    /// rustls refused the configuration itself.
    #[error("TLS configuration: {reason}")]
    Tls {
        /// What rustls reported.
        reason: String,
    },
    /// A timeout of zero would fail every statement.
    #[error("the {which} timeout must be above zero")]
    ZeroTimeout {
        /// Which timeout: "connect" or "request".
        which: &'static str,
    },
}

/// Options of the HTTP transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpOptions {
    /// Bound on establishing a connection (default 10 s).
    pub connect_timeout: Duration,
    /// Bound on one statement (default 60 s).
    pub request_timeout: Duration,
    /// The database unqualified names resolve in (server default when `None`).
    pub database: Option<String>,
    /// The user (server default when `None`).
    pub user: Option<String>,
    /// The password; it prints as `<redacted>`.
    pub password: Option<Password>,
    /// A PEM file of CA certificates trusted besides the system's roots,
    /// for a private cluster. Verification of the certificate and of the
    /// host name is always on.
    pub ca_file: Option<PathBuf>,
    /// Accept a plain `http://` URL to a host that is not a loopback
    /// address. Off by default: plain HTTP is for a server on this machine.
    pub allow_insecure_http: bool,
    /// Ask for LZ4-compressed responses (the `clickhouse` crate's default;
    /// worth it for large pages over a network, neutral for the protocol's
    /// small reads).
    pub lz4: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            database: None,
            user: None,
            password: None,
            ca_file: None,
            allow_insecure_http: false,
            lz4: true,
        }
    }
}

/// A ClickHouse server over HTTP or HTTPS as a [`Transport`].
#[derive(Clone)]
pub struct Http {
    client: Client,
    url: String,
    user: String,
    request_timeout: Duration,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client's own Debug redacts credentials; the URL was validated to
        // carry none we print (userinfo is refused).
        f.debug_struct("Http")
            .field("url", &self.url)
            .field("user", &self.user)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

/// The scheme of a validated URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
}

/// Whether `authority` (`host[:port]`, `[v6]:port`) names this machine.
fn is_loopback(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority
            .rsplit_once(':')
            .map_or(authority, |(host, _port)| host),
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Checks `url` is `http://` or `https://` with a host and no credentials,
/// and that a plain-HTTP host is loopback unless `allow_insecure_http`.
fn validate_url(url: &str, allow_insecure_http: bool) -> Result<Scheme, HttpError> {
    let bad = |reason| HttpError::BadUrl {
        url: url.to_owned(),
        reason,
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("it has no scheme (expected http://host:port)"))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        _ => {
            return Err(HttpError::UnsupportedScheme {
                url: url.to_owned(),
                scheme: scheme.to_owned(),
            });
        }
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err(bad("it has no host"));
    }
    if authority.contains('@') {
        return Err(bad(
            "it carries credentials; pass the user and password as options",
        ));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it contains whitespace or control characters"));
    }
    if rest.contains('?') {
        return Err(bad(
            "it carries a query string; settings come from each statement",
        ));
    }
    if scheme == Scheme::Http && !allow_insecure_http && !is_loopback(authority) {
        return Err(HttpError::InsecureHttp {
            url: url.to_owned(),
        });
    }
    Ok(scheme)
}

impl Http {
    /// Checks a catalog URL the way [`Http::new`] does, without building a
    /// transport: `http://` or `https://` with a host, no credentials, no
    /// query string, and plain HTTP only to a loopback host unless
    /// `allow_insecure_http`. A configuration validates its URL with this,
    /// so a bad one is refused before anything is opened.
    ///
    /// # Errors
    /// [`HttpError::BadUrl`], [`HttpError::UnsupportedScheme`] or
    /// [`HttpError::InsecureHttp`].
    pub fn check_url(url: &str, allow_insecure_http: bool) -> Result<(), HttpError> {
        validate_url(url, allow_insecure_http).map(|_scheme| ())
    }

    /// A transport to the server at `url` (`https://host:port`, or
    /// `http://` on loopback or with `allow_insecure_http`).
    ///
    /// # Errors
    /// The URL, a timeout or the TLS trust is refused ([`HttpError`]).
    pub fn new(url: &str, options: HttpOptions) -> Result<Self, HttpError> {
        let scheme = validate_url(url, options.allow_insecure_http)?;
        if options.connect_timeout.is_zero() {
            return Err(HttpError::ZeroTimeout { which: "connect" });
        }
        if options.request_timeout.is_zero() {
            return Err(HttpError::ZeroTimeout { which: "request" });
        }
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(options.connect_timeout));
        connector.set_nodelay(true);
        let mut builder = HyperClient::builder(TokioExecutor::new());
        builder.pool_idle_timeout(POOL_IDLE_TIMEOUT);
        let client = match scheme {
            // A plain URL gets a plain connector: it can never be upgraded
            // or downgraded behind the caller's back.
            Scheme::Http => Client::with_http_client(builder.build(connector)),
            Scheme::Https => {
                // The HTTP connector must hand `https` URIs through to the
                // TLS layer, which then refuses anything but `https`.
                connector.enforce_http(false);
                let https = HttpsConnectorBuilder::new()
                    .with_tls_config(tls::client_config(options.ca_file.as_deref())?)
                    .https_only()
                    .enable_http1()
                    .wrap_connector(connector);
                Client::with_http_client(builder.build(https))
            }
        };
        let compression = if options.lz4 {
            clickhouse::Compression::Lz4
        } else {
            clickhouse::Compression::None
        };
        let mut client = client.with_url(url).with_compression(compression);
        if let Some(database) = &options.database {
            client = client.with_database(database);
        }
        if let Some(user) = &options.user {
            client = client.with_user(user);
        }
        if let Some(password) = &options.password {
            client = client.with_password(password.expose());
        }
        Ok(Self {
            client,
            url: url.to_owned(),
            user: options.user.unwrap_or_else(|| "default".to_owned()),
            request_timeout: options.request_timeout,
        })
    }

    /// Sends capcat-proto's `schema.check_access` and classifies a refusal
    /// ([`AccessError`]). Sent through the client directly, not through
    /// [`Self::run`], because the refusal's reason is in the client
    /// error's source chain, which a [`Failure`] no longer carries.
    async fn check(&self) -> Result<(), AccessError> {
        let stmt = capcat_proto::schema::check_access();
        let probe = async {
            self.client
                .query_raw(&stmt.sql)
                .fetch_bytes(RESULT_FORMAT)?
                .collect()
                .await
        };
        let error = match tokio::time::timeout(self.request_timeout, probe).await {
            Ok(Ok(bytes)) => {
                let Expect::Rows(columns) = &stmt.expect else {
                    unreachable!("schema.check_access expects rows")
                };
                return decode_rows(columns, &bytes).map(drop).map_err(|failure| {
                    AccessError::Failed {
                        url: self.url.clone(),
                        failure,
                    }
                });
            }
            Ok(Err(error)) => error,
            Err(_elapsed) => {
                return Err(AccessError::Failed {
                    url: self.url.clone(),
                    failure: Failure::Timeout,
                });
            }
        };
        if let Some((refusal, detail)) = tls::classify(&error) {
            let url = self.url.clone();
            return Err(match refusal {
                HandshakeRefusal::Untrusted => AccessError::UntrustedCertificate { url, detail },
                HandshakeRefusal::WrongName => AccessError::CertificateNameMismatch { url, detail },
                HandshakeRefusal::NotTls => AccessError::NotTls { url, detail },
            });
        }
        let failure = failure_from_client(error);
        if let Failure::Server { code, message } = &failure
            && AUTHENTICATION_CODES.contains(code)
        {
            return Err(AccessError::AuthenticationFailed {
                url: self.url.clone(),
                user: self.user.clone(),
                message: message.clone(),
            });
        }
        Err(AccessError::Failed {
            url: self.url.clone(),
            failure,
        })
    }

    /// The server URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    async fn run(&self, stmt: &Statement) -> Result<Rows, Failure> {
        check_insert_with_data(stmt)?;
        if let Some(data) = &stmt.data {
            return self.insert(stmt, data).await;
        }
        let mut query = self.client.query_raw(&stmt.sql);
        for (name, value) in &stmt.params {
            query = query.with_setting(format!("param_{name}"), value.to_text());
        }
        if stmt.settings.select_sequential_consistency {
            query = query.with_setting("select_sequential_consistency", "1");
        }
        if let Some(seconds) = stmt.settings.max_execution_time_s {
            query = query.with_setting("max_execution_time", seconds.to_string());
        }
        match &stmt.expect {
            Expect::Nothing => {
                query.execute().await.map_err(failure_from_client)?;
                Ok(Rows::empty())
            }
            Expect::Rows(columns) => {
                let mut cursor = query
                    .fetch_bytes(RESULT_FORMAT)
                    .map_err(failure_from_client)?;
                let bytes = cursor.collect().await.map_err(failure_from_client)?;
                decode_rows(columns, &bytes)
            }
        }
    }

    /// An INSERT with data: the statement (ending in `FORMAT <name>`) goes
    /// in the request URL and the data, in that format, as the body, the
    /// way clickhouse-server takes an INSERT over HTTP. The insert is sent
    /// whole and then ended, so the server answers once every row is in.
    async fn insert(&self, stmt: &Statement, data: &InsertData) -> Result<Rows, Failure> {
        let mut insert = self.client.insert_formatted_with(stmt.sql.clone());
        for (name, value) in InsertData::SETTINGS {
            insert = insert.with_setting(*name, *value);
        }
        if stmt.settings.select_sequential_consistency {
            insert = insert.with_setting("select_sequential_consistency", "1");
        }
        if let Some(seconds) = stmt.settings.max_execution_time_s {
            insert = insert.with_setting("max_execution_time", seconds.to_string());
        }
        insert
            .send(Bytes::from(data.to_bytes()))
            .await
            .map_err(failure_from_client)?;
        insert.end().await.map_err(failure_from_client)?;
        Ok(Rows::empty())
    }
}

fn failure_from_client(error: clickhouse::error::Error) -> Failure {
    use clickhouse::error::Error;
    match error {
        Error::BadResponse(message) => failure_from_exception(None, &message),
        Error::TimedOut => Failure::Timeout,
        Error::Network(source) => Failure::Transport {
            message: source.to_string(),
        },
        other => Failure::Transport {
            message: other.to_string(),
        },
    }
}

impl Transport for Http {
    fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
        Box::pin(async move {
            let started = Instant::now();
            let result = match tokio::time::timeout(self.request_timeout, self.run(stmt)).await {
                Ok(result) => result,
                Err(_elapsed) => Err(Failure::Timeout),
            };
            match &result {
                Ok(rows) => tracing::debug!(
                    statement = stmt.name,
                    rows = rows.0.len(),
                    elapsed_us = started.elapsed().as_micros(),
                    "http statement ran"
                ),
                Err(failure) => tracing::debug!(
                    statement = stmt.name,
                    %failure,
                    elapsed_us = started.elapsed().as_micros(),
                    "http statement failed"
                ),
            }
            result
        })
    }

    fn kind(&self) -> &'static str {
        "http"
    }

    fn check_access(&self) -> BoxFuture<'_, Result<(), AccessError>> {
        Box::pin(self.check())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_validated_with_typed_errors() {
        assert_eq!(
            validate_url("http://127.0.0.1:8123", false),
            Ok(Scheme::Http)
        );
        assert_eq!(
            validate_url("HTTP://localhost:8123/", false),
            Ok(Scheme::Http)
        );
        assert_eq!(validate_url("http://[::1]:8123", false), Ok(Scheme::Http));
        assert_eq!(validate_url("https://ch:8443", false), Ok(Scheme::Https));
        assert!(matches!(
            validate_url("tcp://ch:9000", false),
            Err(HttpError::UnsupportedScheme { .. })
        ));
        for bad in [
            "ch:8123",
            "http://",
            "http:///x",
            "http://u:p@ch:8123",
            "http://ch:8123/?database=x",
            "http://ch 8123",
        ] {
            assert!(
                matches!(validate_url(bad, true), Err(HttpError::BadUrl { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn plain_http_reaches_only_loopback_unless_allowed() {
        for remote in [
            "http://clickhouse:8123",
            "http://10.0.0.7:8123",
            "http://[2001:db8::1]:8123",
            "http://localhost.example.com:8123",
        ] {
            assert_eq!(
                validate_url(remote, false),
                Err(HttpError::InsecureHttp {
                    url: remote.to_owned()
                }),
                "{remote}"
            );
            assert_eq!(validate_url(remote, true), Ok(Scheme::Http), "{remote}");
        }
        for local in [
            "http://127.0.0.1:1",
            "http://127.8.9.10",
            "http://LOCALHOST:8123",
        ] {
            assert_eq!(validate_url(local, false), Ok(Scheme::Http), "{local}");
        }
    }

    #[test]
    fn an_unusable_ca_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").expect("write");
        for path in [dir.path().join("missing.pem"), empty] {
            let options = HttpOptions {
                ca_file: Some(path.clone()),
                ..HttpOptions::default()
            };
            match Http::new("https://127.0.0.1:1", options) {
                Err(HttpError::CaFile { path: named, .. }) => assert_eq!(named, path),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
    }

    #[test]
    fn zero_timeouts_are_refused() {
        let options = HttpOptions {
            connect_timeout: Duration::ZERO,
            ..HttpOptions::default()
        };
        assert_eq!(
            Http::new("http://127.0.0.1:1", options).err(),
            Some(HttpError::ZeroTimeout { which: "connect" })
        );
    }
}
