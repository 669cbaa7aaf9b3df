//! [`Http`]: statements sent to a ClickHouse server (or capcat-chdb's HTTP
//! front) through the `clickhouse` crate.

use std::time::{Duration, Instant};

use capcat_proto::{Expect, Failure, Rows, Statement};
use clickhouse::Client;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::decode::{RESULT_FORMAT, decode_rows};
use super::exception::failure_from_exception;
use super::{BoxFuture, Transport};

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
    /// An `https://` URL, but this build carries no TLS implementation (it
    /// would fail at the first statement instead of here).
    #[error(
        "catalog URL {url:?} needs TLS, which this build of capcat-clickhouse does not include; \
         use http:// (e.g. through a local TLS-terminating proxy)"
    )]
    TlsNotBuilt {
        /// The URL given.
        url: String,
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
    /// The password.
    pub password: Option<String>,
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
            lz4: true,
        }
    }
}

/// A ClickHouse server over HTTP as a [`Transport`].
#[derive(Clone)]
pub struct Http {
    client: Client,
    url: String,
    request_timeout: Duration,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client's own Debug redacts credentials; the URL was validated to
        // carry none we print (userinfo is refused).
        f.debug_struct("Http")
            .field("url", &self.url)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

/// Checks `url` is `http://` or `https://` with a host and no credentials.
fn validate_url(url: &str) -> Result<(), HttpError> {
    let bad = |reason| HttpError::BadUrl {
        url: url.to_owned(),
        reason,
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("it has no scheme (expected http://host:port)"))?;
    match scheme.to_ascii_lowercase().as_str() {
        "http" => {}
        "https" => {
            return Err(HttpError::TlsNotBuilt {
                url: url.to_owned(),
            });
        }
        _ => {
            return Err(HttpError::UnsupportedScheme {
                url: url.to_owned(),
                scheme: scheme.to_owned(),
            });
        }
    }
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
    Ok(())
}

impl Http {
    /// A transport to the server at `url` (`http://host:port`).
    pub fn new(url: &str, options: HttpOptions) -> Result<Self, HttpError> {
        validate_url(url)?;
        if options.connect_timeout.is_zero() {
            return Err(HttpError::ZeroTimeout { which: "connect" });
        }
        if options.request_timeout.is_zero() {
            return Err(HttpError::ZeroTimeout { which: "request" });
        }
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(options.connect_timeout));
        connector.set_nodelay(true);
        let hyper = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(connector);
        let compression = if options.lz4 {
            clickhouse::Compression::Lz4
        } else {
            clickhouse::Compression::None
        };
        let mut client = Client::with_http_client(hyper)
            .with_url(url)
            .with_compression(compression);
        if let Some(database) = &options.database {
            client = client.with_database(database);
        }
        if let Some(user) = &options.user {
            client = client.with_user(user);
        }
        if let Some(password) = &options.password {
            client = client.with_password(password);
        }
        Ok(Self {
            client,
            url: url.to_owned(),
            request_timeout: options.request_timeout,
        })
    }

    /// The server URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    async fn run(&self, stmt: &Statement) -> Result<Rows, Failure> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_validated_with_typed_errors() {
        assert!(validate_url("http://127.0.0.1:8123").is_ok());
        assert!(validate_url("HTTP://clickhouse:8123/").is_ok());
        assert!(matches!(
            validate_url("https://ch:8443"),
            Err(HttpError::TlsNotBuilt { .. })
        ));
        assert!(matches!(
            validate_url("tcp://ch:9000"),
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
                matches!(validate_url(bad), Err(HttpError::BadUrl { .. })),
                "{bad:?}"
            );
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
