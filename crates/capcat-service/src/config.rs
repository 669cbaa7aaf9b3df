//! The service configuration: read from TOML, validated once at construction.
//!
//! Every check here exists because the value, accepted, would fail later or
//! not at all (the seed's review found each one): a NaN passes every
//! comparison, a sub-millisecond poll interval becomes a busy spin, a
//! scheme-less endpoint is read as plain HTTP, an `https://` endpoint with the
//! insecure flag is refused at every request, and a fractional publish
//! timeout is truncated by ClickHouse to 0, which means "no limit".

use std::path::PathBuf;
use std::time::Duration;

use capcat_proto::Tables;
use capcat_s3::CatalogPrefix;
use serde::{Deserialize, Serialize};

/// The smallest poll interval: below it the loop would spin.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(1);

/// The longest interval or timeout accepted: ten years. A longer one is a
/// typo, and one of a few hundred years can no longer be added to a clock
/// reading, so the deadline the service sets from it would panic.
pub const MAX_INTERVAL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A configuration value that cannot be honoured. Each variant names the
/// field, so an operator knows which line of the file to fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The TOML text does not parse, or names an unknown field.
    #[error("the service configuration does not parse: {detail}")]
    Parse {
        /// What the parser said (it names the line and the field).
        detail: String,
    },
    /// `catalog_url` is not a URL the catalog's HTTP transport accepts (for
    /// example plain `http://` to a host that is not loopback without
    /// `allow_insecure_http`). Refused here so that `capcat settings` and a
    /// service start say so before opening anything.
    #[error("catalog_url: {source}")]
    CatalogUrl {
        /// What the transport's check refused.
        #[source]
        source: capcat_clickhouse::HttpError,
    },
    /// Both `catalog_password` and `catalog_password_file` are set: which
    /// one is meant cannot be guessed.
    #[error("catalog_password and catalog_password_file are both set; keep one")]
    CatalogPasswordTwice,
    /// `catalog_user` is set to the empty string.
    #[error("catalog_user is empty; remove it to log in as the server's default user")]
    EmptyCatalogUser,
    /// An interval or timeout is NaN or infinite.
    #[error("{field} = {} must be a finite number of seconds", Shown(*value))]
    NotFinite {
        /// The field.
        field: &'static str,
        /// The rejected value.
        value: f64,
    },
    /// An interval or timeout is zero or negative, or so small (below a
    /// nanosecond) that it is zero as a duration.
    #[error("{field} = {} must be positive (at least a nanosecond)", Shown(*value))]
    NotPositive {
        /// The field.
        field: &'static str,
        /// The rejected value.
        value: f64,
    },
    /// An interval or timeout is above [`MAX_INTERVAL`].
    #[error("{field} = {} s is more than the {max_s} s (ten years) accepted", Shown(*value))]
    TooLong {
        /// The field.
        field: &'static str,
        /// The rejected value.
        value: f64,
        /// [`MAX_INTERVAL`] in seconds.
        max_s: u64,
    },
    /// The poll interval is below [`MIN_POLL_INTERVAL`]: the loop would spin.
    #[error(
        "poll_interval_s = {} must be at least 0.001 s, or the cycle loop spins",
        Shown(*value)
    )]
    PollIntervalTooSmall {
        /// The rejected value.
        value: f64,
    },
    /// An endpoint has no `http://` or `https://` scheme.
    #[error("{field} = {value:?} must start with http:// or https://")]
    EndpointScheme {
        /// The field.
        field: &'static str,
        /// The rejected endpoint.
        value: String,
    },
    /// `allow_insecure_http` is set with an `https://` S3 endpoint and no
    /// `http://` catalog: nothing it could allow.
    #[error(
        "allow_insecure_http only pairs with an http:// s3_endpoint or catalog_url, not {endpoint:?}"
    )]
    InsecureWithHttps {
        /// The endpoint.
        endpoint: String,
    },
    /// The publish timeout is not a whole number of seconds.
    #[error(
        "publish_timeout_s = {} must be a whole number of seconds \
         (ClickHouse truncates max_execution_time, and 0 means unlimited)",
        Shown(*value)
    )]
    PublishTimeoutNotWhole {
        /// The rejected value.
        value: f64,
    },
    /// The publish timeout is not below the lease TTL.
    #[error(
        "publish_timeout_s = {} must be below lease_ttl_s = {}",
        Shown(*publish_timeout_s),
        Shown(*lease_ttl_s)
    )]
    PublishTimeoutNotBelowTtl {
        /// The publish timeout.
        publish_timeout_s: f64,
        /// The lease TTL.
        lease_ttl_s: f64,
    },
    /// A read limit is negative (or, for the request limit, zero).
    #[error("{field} = {value} must be {rule}")]
    BadReadLimit {
        /// The field.
        field: &'static str,
        /// The rejected value.
        value: i64,
        /// What it must be.
        rule: &'static str,
    },
    /// A count that bounds work is zero.
    #[error("{field} must be at least 1")]
    ZeroCount {
        /// The field.
        field: &'static str,
    },
    /// A count is above what the part it sizes accepts.
    #[error("{field} = {value} must be at most {max}")]
    TooLarge {
        /// The field.
        field: &'static str,
        /// The rejected value.
        value: u64,
        /// The largest value accepted.
        max: u64,
    },
    /// The catalog prefix is not a valid table and key prefix.
    #[error("catalog_prefix = {value:?} is not valid: {detail}")]
    BadPrefix {
        /// The rejected prefix.
        value: String,
        /// Why.
        detail: String,
    },
    /// The protocol configuration refused the lease and publish timeouts.
    #[error("lease_ttl_s / publish_timeout_s refused by the protocol: {0}")]
    Protocol(#[from] capcat_proto::ConfigError),
}

/// A number of seconds as an error message shows it: as written for
/// ordinary magnitudes, in exponent form for huge or tiny ones. `f64`'s
/// `Display` never uses an exponent, so `lease_ttl_s = 1e300` would be
/// echoed as a 301-digit integer that hides the field it belongs to.
#[derive(Clone, Copy, Debug)]
struct Shown(f64);

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let magnitude = self.0.abs();
        // Between a millionth and a million million the plain form is at
        // most about twenty characters; outside it the exponent is shorter.
        if magnitude != 0.0 && magnitude.is_finite() && !(1e-6..1e15).contains(&magnitude) {
            write!(f, "{:e}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// The service configuration as written in TOML (seconds as numbers).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceConfig {
    /// The spool directory the sink writes packs into.
    pub spool_dir: PathBuf,
    /// The catalog's prefix: the ClickHouse table prefix and the object-store
    /// directory `v1/<prefix>/`.
    pub catalog_prefix: String,
    /// The store id written into every descriptor's locator.
    pub store_id: String,
    /// The lease holder's name (diagnostics only).
    pub holder: String,
    /// Whether this service owns the spool. An owner takes the exclusive
    /// lock `<spool_dir>/.owner.lock` at start (a second owner on the same
    /// directory gets `StartError::SpoolBusy` at once), and only then
    /// sweeps the stale `.open` files a crashed sink left and writes
    /// `<spool_dir>/status.json`. A service with `owns_spool = false` takes
    /// no lock, sweeps nothing and writes no status file.
    pub owns_spool: bool,
    /// Wait between idle cycles, and the first backoff step.
    pub poll_interval_s: f64,
    /// The longest wait after failing cycles.
    pub max_backoff_s: f64,
    /// The publisher lease's time to live (renewed every third of it).
    pub lease_ttl_s: f64,
    /// `max_execution_time` of the fenced publish statements.
    pub publish_timeout_s: f64,
    /// How long `close` waits for the final flush.
    pub close_flush_timeout_s: f64,
    /// The catalog's HTTP connect timeout.
    pub catalog_connect_timeout_s: f64,
    /// The catalog's HTTP whole-request timeout.
    pub catalog_request_timeout_s: f64,
    /// How long one demand event may take to publish.
    pub demand_publish_timeout_s: f64,
    /// Demand events in flight at once; more are dropped and counted.
    pub demand_max_in_flight: usize,
    /// Reconcile the store against the catalog at start.
    pub reconcile_on_start: bool,
    /// Reconcile periodically (off when absent).
    pub reconcile_interval_s: Option<f64>,
    /// The time between two writes of `<spool_dir>/status.json` by the
    /// service's status task (start and close always write; only the
    /// spool's owner writes). Each write fsyncs, so writing on
    /// every idle cycle would cost the disk twenty syncs a second at the
    /// default poll interval for a file an operator reads by hand.
    pub status_interval_s: f64,
    /// A pack refused on its own this many times is set aside.
    pub max_index_attempts: u32,
    /// The indexer's budget for one batch: bytes of descriptor rows as the
    /// INSERT sends them (`RowBinary`).
    pub index_batch_budget_bytes: u64,
    /// Packs uploaded in one cycle, so a backlog cannot make a cycle unbounded.
    pub max_packs_per_cycle: usize,
    /// Records per pack before the sink seals it, at most the pack
    /// format's `capcat_pack::MAX_RECORDS_CEILING`.
    pub max_pack_records: usize,
    /// Payload bytes per pack before the sink seals it.
    pub max_pack_payload_bytes: u64,
    /// The catalog's URL when it is a ClickHouse server.
    pub catalog_url: Option<String>,
    /// The catalog user (the server's `default` when absent).
    pub catalog_user: Option<String>,
    /// The catalog password. Prefer [`Self::catalog_password_file`] (or the
    /// CLI's `CAPCAT_CATALOG_PASSWORD`): a password in a shared file is a
    /// password shared. It prints, and serializes, as `<redacted>`.
    #[serde(with = "redacted_password", skip_serializing_if = "Option::is_none")]
    pub catalog_password: Option<capcat_clickhouse::Password>,
    /// A file holding the catalog password (one trailing newline is not
    /// part of it). Not together with [`Self::catalog_password`].
    pub catalog_password_file: Option<PathBuf>,
    /// A PEM file of CA certificates trusted for an `https://` catalog
    /// besides the system's roots (a private cluster's CA).
    pub catalog_ca_file: Option<PathBuf>,
    /// The S3 endpoint when the store is S3.
    pub s3_endpoint: Option<String>,
    /// A PEM file of CA certificates trusted for an `https://` S3 endpoint
    /// besides the system's roots (a private CA).
    pub s3_ca_file: Option<PathBuf>,
    /// Allow plain HTTP where it would cross a network: an `http://` S3
    /// endpoint, and an `http://` catalog on a host that is not loopback
    /// (a loopback catalog needs no flag).
    pub allow_insecure_http: bool,
    /// Bytes one read may hydrate (0 allowed: only empty payloads).
    pub read_byte_limit: i64,
    /// Records one read may request.
    pub read_request_limit: i64,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            spool_dir: PathBuf::from("spool"),
            catalog_prefix: "capcat".to_owned(),
            store_id: "local".to_owned(),
            holder: "capcat-service".to_owned(),
            owns_spool: true,
            poll_interval_s: 0.05,
            max_backoff_s: 30.0,
            lease_ttl_s: 30.0,
            publish_timeout_s: 10.0,
            close_flush_timeout_s: 30.0,
            catalog_connect_timeout_s: 10.0,
            catalog_request_timeout_s: 60.0,
            demand_publish_timeout_s: 15.0,
            demand_max_in_flight: 4,
            reconcile_on_start: true,
            reconcile_interval_s: None,
            status_interval_s: 1.0,
            max_index_attempts: 5,
            index_batch_budget_bytes: 64 * 1024 * 1024,
            max_packs_per_cycle: 64,
            max_pack_records: 4096,
            max_pack_payload_bytes: 1 << 30,
            catalog_url: None,
            catalog_user: None,
            catalog_password: None,
            catalog_password_file: None,
            catalog_ca_file: None,
            s3_endpoint: None,
            s3_ca_file: None,
            allow_insecure_http: false,
            read_byte_limit: 1 << 32,
            read_request_limit: 100_000,
        }
    }
}

/// A configuration every part of the service can honour.
#[derive(Clone, Debug)]
pub struct ValidConfig {
    /// The configuration as given.
    pub raw: ServiceConfig,
    /// The protocol configuration (lease TTL, publish timeout).
    pub protocol: capcat_proto::Config,
    /// The catalog's tables.
    pub tables: Tables,
    /// The object-store prefix.
    pub prefix: CatalogPrefix,
    /// [`ServiceConfig::poll_interval_s`].
    pub poll_interval: Duration,
    /// [`ServiceConfig::max_backoff_s`].
    pub max_backoff: Duration,
    /// [`ServiceConfig::lease_ttl_s`].
    pub lease_ttl: Duration,
    /// [`ServiceConfig::close_flush_timeout_s`].
    pub close_flush_timeout: Duration,
    /// [`ServiceConfig::catalog_connect_timeout_s`].
    pub catalog_connect_timeout: Duration,
    /// [`ServiceConfig::catalog_request_timeout_s`].
    pub catalog_request_timeout: Duration,
    /// [`ServiceConfig::demand_publish_timeout_s`].
    pub demand_publish_timeout: Duration,
    /// [`ServiceConfig::reconcile_interval_s`].
    pub reconcile_interval: Option<Duration>,
    /// [`ServiceConfig::status_interval_s`].
    pub status_interval: Duration,
}

fn seconds(field: &'static str, value: f64) -> Result<Duration, ConfigError> {
    if !value.is_finite() {
        return Err(ConfigError::NotFinite { field, value });
    }
    if value <= 0.0 {
        return Err(ConfigError::NotPositive { field, value });
    }
    if value > MAX_INTERVAL.as_secs_f64() {
        return Err(ConfigError::TooLong {
            field,
            value,
            max_s: MAX_INTERVAL.as_secs(),
        });
    }
    let duration =
        Duration::try_from_secs_f64(value).map_err(|_| ConfigError::NotFinite { field, value })?;
    // Below a nanosecond a positive value is a zero Duration: a timeout of
    // it fails at once.
    if duration.is_zero() {
        return Err(ConfigError::NotPositive { field, value });
    }
    Ok(duration)
}

fn endpoint(field: &'static str, value: &str) -> Result<(), ConfigError> {
    if value.starts_with("http://") || value.starts_with("https://") {
        Ok(())
    } else {
        Err(ConfigError::EndpointScheme {
            field,
            value: value.to_owned(),
        })
    }
}

impl ServiceConfig {
    /// Parses TOML text and validates it.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] for text that does not parse, else the first
    /// rule broken.
    pub fn from_toml(text: &str) -> Result<ValidConfig, ConfigError> {
        Self::parse_toml(text)?.validate()
    }

    /// Parses TOML text without validating (for callers that override
    /// fields from flags first, then call [`ServiceConfig::validate`]).
    ///
    /// # Errors
    /// [`ConfigError::Parse`].
    pub fn parse_toml(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            detail: e.to_string(),
        })
    }

    /// Checks every field.
    ///
    /// # Errors
    /// The first rule broken, naming its field.
    pub fn validate(self) -> Result<ValidConfig, ConfigError> {
        let poll_interval = match seconds("poll_interval_s", self.poll_interval_s) {
            // Positive but below a nanosecond: below the minimum, said so.
            Err(ConfigError::NotPositive { value, .. }) if value > 0.0 => {
                return Err(ConfigError::PollIntervalTooSmall { value });
            }
            other => other?,
        };
        if poll_interval < MIN_POLL_INTERVAL {
            return Err(ConfigError::PollIntervalTooSmall {
                value: self.poll_interval_s,
            });
        }
        let max_backoff = seconds("max_backoff_s", self.max_backoff_s)?;
        let lease_ttl = seconds("lease_ttl_s", self.lease_ttl_s)?;
        let publish_timeout = seconds("publish_timeout_s", self.publish_timeout_s)?;
        let close_flush_timeout = seconds("close_flush_timeout_s", self.close_flush_timeout_s)?;
        let catalog_connect_timeout =
            seconds("catalog_connect_timeout_s", self.catalog_connect_timeout_s)?;
        let catalog_request_timeout =
            seconds("catalog_request_timeout_s", self.catalog_request_timeout_s)?;
        let demand_publish_timeout =
            seconds("demand_publish_timeout_s", self.demand_publish_timeout_s)?;
        let status_interval = seconds("status_interval_s", self.status_interval_s)?;
        let reconcile_interval = match self.reconcile_interval_s {
            Some(value) => Some(seconds("reconcile_interval_s", value)?),
            None => None,
        };
        if self.publish_timeout_s.fract() != 0.0 {
            return Err(ConfigError::PublishTimeoutNotWhole {
                value: self.publish_timeout_s,
            });
        }
        if publish_timeout >= lease_ttl {
            return Err(ConfigError::PublishTimeoutNotBelowTtl {
                publish_timeout_s: self.publish_timeout_s,
                lease_ttl_s: self.lease_ttl_s,
            });
        }
        if let Some(url) = &self.catalog_url {
            endpoint("catalog_url", url)?;
            capcat_clickhouse::Http::check_url(url, self.allow_insecure_http)
                .map_err(|source| ConfigError::CatalogUrl { source })?;
        }
        if self.catalog_password.is_some() && self.catalog_password_file.is_some() {
            return Err(ConfigError::CatalogPasswordTwice);
        }
        if self.catalog_user.as_deref().is_some_and(str::is_empty) {
            return Err(ConfigError::EmptyCatalogUser);
        }
        if let Some(url) = &self.s3_endpoint {
            endpoint("s3_endpoint", url)?;
            // The flag is for plain endpoints: set beside only `https://`
            // ones it says something the user did not mean.
            let plain_catalog = self
                .catalog_url
                .as_deref()
                .is_some_and(|c| c.starts_with("http://"));
            if self.allow_insecure_http && !url.starts_with("http://") && !plain_catalog {
                return Err(ConfigError::InsecureWithHttps {
                    endpoint: url.clone(),
                });
            }
        }
        if self.read_byte_limit < 0 {
            return Err(ConfigError::BadReadLimit {
                field: "read_byte_limit",
                value: self.read_byte_limit,
                rule: "non-negative",
            });
        }
        if self.read_request_limit <= 0 {
            return Err(ConfigError::BadReadLimit {
                field: "read_request_limit",
                value: self.read_request_limit,
                rule: "positive",
            });
        }
        for (field, value) in [
            ("demand_max_in_flight", self.demand_max_in_flight),
            ("max_packs_per_cycle", self.max_packs_per_cycle),
            ("max_pack_records", self.max_pack_records),
            ("max_index_attempts", self.max_index_attempts as usize),
        ] {
            if value == 0 {
                return Err(ConfigError::ZeroCount { field });
            }
        }
        if self.demand_max_in_flight > capcat_clickhouse::demand::MAX_PUBLISH_SLOTS {
            return Err(ConfigError::TooLarge {
                field: "demand_max_in_flight",
                value: self.demand_max_in_flight as u64,
                max: capcat_clickhouse::demand::MAX_PUBLISH_SLOTS as u64,
            });
        }
        // The sink builds its PackLimits from these on every append: a
        // count the pack format refuses would fail every one of them.
        if self.max_pack_records > capcat_pack::MAX_RECORDS_CEILING {
            return Err(ConfigError::TooLarge {
                field: "max_pack_records",
                value: self.max_pack_records as u64,
                max: capcat_pack::MAX_RECORDS_CEILING as u64,
            });
        }
        if self.index_batch_budget_bytes == 0 {
            return Err(ConfigError::ZeroCount {
                field: "index_batch_budget_bytes",
            });
        }
        if self.max_pack_payload_bytes == 0 {
            return Err(ConfigError::ZeroCount {
                field: "max_pack_payload_bytes",
            });
        }
        let tables = Tables::new(&self.catalog_prefix).map_err(|e| ConfigError::BadPrefix {
            value: self.catalog_prefix.clone(),
            detail: e.to_string(),
        })?;
        let prefix = CatalogPrefix::new(self.catalog_prefix.clone()).map_err(|e| {
            ConfigError::BadPrefix {
                value: self.catalog_prefix.clone(),
                detail: e.to_string(),
            }
        })?;
        let ttl_ns = u64::try_from(lease_ttl.as_nanos()).unwrap_or(u64::MAX);
        let timeout_ns = u64::try_from(publish_timeout.as_nanos()).unwrap_or(u64::MAX);
        let protocol = capcat_proto::Config::new(ttl_ns, timeout_ns)?;
        Ok(ValidConfig {
            raw: self,
            protocol,
            tables,
            prefix,
            poll_interval,
            max_backoff,
            lease_ttl,
            close_flush_timeout,
            catalog_connect_timeout,
            catalog_request_timeout,
            demand_publish_timeout,
            reconcile_interval,
            status_interval,
        })
    }
}

/// Serde for [`ServiceConfig::catalog_password`]: read as a string,
/// written as `<redacted>`, so no dump of a configuration (`capcat
/// settings`, a log line of it) carries the password.
mod redacted_password {
    use capcat_clickhouse::{Password, REDACTED};
    use serde::{Deserialize, Deserializer, Serializer};

    // Serde's `with` calls this with a reference to the field.
    #[allow(clippy::ref_option)]
    pub(super) fn serialize<S: Serializer>(
        value: &Option<Password>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(_) => serializer.serialize_str(REDACTED),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Password>, D::Error> {
        Ok(Option::<String>::deserialize(deserializer)?.map(Password::new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(edit: impl FnOnce(&mut ServiceConfig)) -> Result<ValidConfig, ConfigError> {
        let mut raw = ServiceConfig::default();
        edit(&mut raw);
        raw.validate()
    }

    #[test]
    fn the_defaults_are_valid() {
        let cfg = ServiceConfig::default().validate().expect("defaults");
        assert_eq!(cfg.lease_ttl, Duration::from_secs(30));
        assert_eq!(cfg.protocol.publish_timeout_s(), 10);
    }

    #[test]
    fn every_interval_refuses_nan_infinity_zero_and_negatives_naming_the_field() {
        type Setter = fn(&mut ServiceConfig, f64);
        let fields: [(&str, Setter); 10] = [
            ("poll_interval_s", |c, v| c.poll_interval_s = v),
            ("max_backoff_s", |c, v| c.max_backoff_s = v),
            ("lease_ttl_s", |c, v| c.lease_ttl_s = v),
            ("publish_timeout_s", |c, v| c.publish_timeout_s = v),
            ("close_flush_timeout_s", |c, v| c.close_flush_timeout_s = v),
            ("catalog_connect_timeout_s", |c, v| {
                c.catalog_connect_timeout_s = v
            }),
            ("catalog_request_timeout_s", |c, v| {
                c.catalog_request_timeout_s = v
            }),
            ("demand_publish_timeout_s", |c, v| {
                c.demand_publish_timeout_s = v
            }),
            ("status_interval_s", |c, v| c.status_interval_s = v),
            ("reconcile_interval_s", |c, v| {
                c.reconcile_interval_s = Some(v)
            }),
        ];
        for (name, set) in fields {
            for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                match with(|c| set(c, bad)) {
                    Err(ConfigError::NotFinite { field, .. }) => assert_eq!(field, name),
                    other => panic!("{name} = {bad}: {other:?}"),
                }
            }
            for bad in [0.0, -1.0] {
                match with(|c| set(c, bad)) {
                    Err(ConfigError::NotPositive { field, .. }) => assert_eq!(field, name),
                    other => panic!("{name} = {bad}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn a_sub_millisecond_poll_interval_is_refused() {
        assert!(matches!(
            with(|c| c.poll_interval_s = 1e-10),
            Err(ConfigError::PollIntervalTooSmall { .. })
        ));
        assert!(matches!(
            with(|c| c.poll_interval_s = 0.0009),
            Err(ConfigError::PollIntervalTooSmall { .. })
        ));
        assert!(with(|c| c.poll_interval_s = 0.001).is_ok());
    }

    #[test]
    fn endpoints_need_a_scheme_and_insecure_pairs_only_with_http() {
        assert!(matches!(
            with(|c| c.s3_endpoint = Some("127.0.0.1:9000".into())),
            Err(ConfigError::EndpointScheme {
                field: "s3_endpoint",
                ..
            })
        ));
        assert!(matches!(
            with(|c| c.catalog_url = Some("localhost:8123".into())),
            Err(ConfigError::EndpointScheme {
                field: "catalog_url",
                ..
            })
        ));
        assert!(matches!(
            with(|c| {
                c.s3_endpoint = Some("https://s3.example".into());
                c.allow_insecure_http = true;
            }),
            Err(ConfigError::InsecureWithHttps { .. })
        ));
        assert!(
            with(|c| {
                c.s3_endpoint = Some("http://127.0.0.1:9000".into());
                c.allow_insecure_http = true;
            })
            .is_ok()
        );
        assert!(with(|c| c.s3_endpoint = Some("https://s3.example".into())).is_ok());
        // A plain catalog off this machine needs the flag, and the
        // refusal names the transport's reason.
        match with(|c| c.catalog_url = Some("http://10.0.0.7:8123".into())) {
            Err(ConfigError::CatalogUrl {
                source: capcat_clickhouse::HttpError::InsecureHttp { url },
            }) => assert_eq!(url, "http://10.0.0.7:8123"),
            other => panic!("a plain remote catalog was not refused: {other:?}"),
        }
        assert!(with(|c| c.catalog_url = Some("http://127.0.0.1:8123".into())).is_ok());
        assert!(matches!(
            with(|c| c.catalog_url = Some("https://user:pw@catalog.lan:8443".into())),
            Err(ConfigError::CatalogUrl {
                source: capcat_clickhouse::HttpError::BadUrl { .. }
            })
        ));
        // The flag may be there for a plain catalog beside an HTTPS store.
        assert!(
            with(|c| {
                c.s3_endpoint = Some("https://s3.example".into());
                c.catalog_url = Some("http://catalog.lan:8123".into());
                c.allow_insecure_http = true;
            })
            .is_ok()
        );
    }

    #[test]
    fn a_password_is_given_once_and_never_serialized() {
        let config = ServiceConfig {
            catalog_password: Some(capcat_clickhouse::Password::new("s3cr3t-value")),
            ..ServiceConfig::default()
        };
        let shown = format!(
            "{config:?} {}",
            serde_json::to_string(&config).expect("a config serializes")
        );
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
        let parsed = ServiceConfig::parse_toml("catalog_password = \"from-file\"\n")
            .expect("a password in the file parses");
        assert_eq!(
            parsed
                .catalog_password
                .as_ref()
                .map(capcat_clickhouse::Password::expose),
            Some("from-file")
        );
        assert_eq!(
            ServiceConfig {
                catalog_password_file: Some("/run/secrets/catalog".into()),
                ..config
            }
            .validate()
            .err(),
            Some(ConfigError::CatalogPasswordTwice)
        );
    }

    #[test]
    fn the_publish_timeout_is_whole_seconds_and_below_the_ttl() {
        assert!(matches!(
            with(|c| c.publish_timeout_s = 2.5),
            Err(ConfigError::PublishTimeoutNotWhole { .. })
        ));
        assert!(matches!(
            with(|c| c.publish_timeout_s = 0.5),
            Err(ConfigError::PublishTimeoutNotWhole { .. })
        ));
        assert!(matches!(
            with(|c| c.publish_timeout_s = 30.0),
            Err(ConfigError::PublishTimeoutNotBelowTtl { .. })
        ));
        assert!(with(|c| c.publish_timeout_s = 29.0).is_ok());
    }

    #[test]
    fn read_limits_are_non_negative_and_the_request_limit_positive() {
        assert!(matches!(
            with(|c| c.read_byte_limit = -1),
            Err(ConfigError::BadReadLimit {
                field: "read_byte_limit",
                ..
            })
        ));
        assert!(with(|c| c.read_byte_limit = 0).is_ok());
        assert!(matches!(
            with(|c| c.read_request_limit = 0),
            Err(ConfigError::BadReadLimit {
                field: "read_request_limit",
                ..
            })
        ));
    }

    #[test]
    fn demand_slots_are_bounded_like_the_publisher_bounds_them() {
        let max = capcat_clickhouse::demand::MAX_PUBLISH_SLOTS;
        assert!(with(|c| c.demand_max_in_flight = max).is_ok());
        assert_eq!(
            with(|c| c.demand_max_in_flight = max + 1).err(),
            Some(ConfigError::TooLarge {
                field: "demand_max_in_flight",
                value: max as u64 + 1,
                max: max as u64
            })
        );
        assert_eq!(
            with(|c| c.demand_max_in_flight = 0).err(),
            Some(ConfigError::ZeroCount {
                field: "demand_max_in_flight"
            })
        );
    }

    /// Found by the fuzz target `config` (its `huge` seed): 1e19 s is a
    /// finite Duration, but `Instant::now() + it` overflows, so `close`
    /// (a flush deadline) would panic on a configuration that validated.
    #[test]
    fn a_duration_no_deadline_can_hold_is_refused_naming_its_field() {
        let cfg = ServiceConfig::from_toml("close_flush_timeout_s = 1e19\n");
        assert!(
            matches!(
                cfg,
                Err(ConfigError::TooLong {
                    field: "close_flush_timeout_s",
                    ..
                })
            ),
            "{cfg:?}"
        );
        for value in [1e10, 1e19, f64::MAX] {
            assert!(
                with(|c| c.reconcile_interval_s = Some(value)).is_err(),
                "{value}"
            );
        }
        let longest = MAX_INTERVAL.as_secs_f64();
        assert!(with(|c| c.close_flush_timeout_s = longest).is_ok());
    }

    /// Found by the fuzz target `config`: `max_pack_records` above the
    /// pack format's ceiling validated, and then every append failed when
    /// the sink built its `PackLimits`.
    #[test]
    fn max_pack_records_above_the_pack_ceiling_is_refused() {
        let ceiling = capcat_pack::MAX_RECORDS_CEILING;
        assert!(with(|c| c.max_pack_records = ceiling).is_ok());
        assert_eq!(
            with(|c| c.max_pack_records = ceiling + 1).err(),
            Some(ConfigError::TooLarge {
                field: "max_pack_records",
                value: ceiling as u64 + 1,
                max: ceiling as u64
            })
        );
    }

    /// Found by the fuzz target `config`: a positive value below a
    /// nanosecond is finite and positive but becomes a zero Duration, which
    /// validated: a zero demand publish timeout fails every publish at once.
    #[test]
    fn a_positive_value_below_a_nanosecond_is_refused_as_not_positive() {
        for value in [1e-10, 1e-300, f64::MIN_POSITIVE] {
            match with(|c| c.demand_publish_timeout_s = value) {
                Err(ConfigError::NotPositive { field, .. }) => {
                    assert_eq!(field, "demand_publish_timeout_s");
                }
                other => panic!("{value}: {other:?}"),
            }
        }
        assert!(with(|c| c.demand_publish_timeout_s = 1e-9).is_ok());
    }

    /// A huge value is shown in exponent form, not as the 301 digits
    /// `f64`'s `Display` writes, and ordinary values as written.
    #[test]
    fn huge_and_tiny_values_are_shown_compactly_in_errors() {
        let huge = ServiceConfig::from_toml("lease_ttl_s = 1e300\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            huge.starts_with("lease_ttl_s = 1e300 s is more than"),
            "{huge}"
        );
        assert!(huge.len() < 100, "{huge}");
        let tiny = with(|c| c.poll_interval_s = 1e-10)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            tiny.starts_with("poll_interval_s = 1e-10 must be"),
            "{tiny}"
        );
        let plain = with(|c| c.publish_timeout_s = 2.5)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(plain.starts_with("publish_timeout_s = 2.5 must"), "{plain}");
        assert_eq!(Shown(-1.0).to_string(), "-1");
        assert_eq!(Shown(0.0).to_string(), "0");
        assert_eq!(Shown(f64::NAN).to_string(), "NaN");
    }

    #[test]
    fn toml_parses_and_unknown_fields_are_refused() {
        let cfg = ServiceConfig::from_toml(
            "lease_ttl_s = 9\npublish_timeout_s = 3\npoll_interval_s = 0.01\n",
        )
        .expect("valid");
        assert_eq!(cfg.lease_ttl, Duration::from_secs(9));
        assert!(matches!(
            ServiceConfig::from_toml("lease_tll_s = 9\n"),
            Err(ConfigError::Parse { .. })
        ));
        assert!(matches!(
            ServiceConfig::from_toml("poll_interval_s = nan\n"),
            Err(ConfigError::NotFinite {
                field: "poll_interval_s",
                ..
            })
        ));
    }
}
