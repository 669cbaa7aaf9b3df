//! Protocol configuration: lease TTL, publish timeout, attempt bounds, chunk
//! size. Validated once, at construction, so no machine ever sees a value it
//! cannot honour.

/// The largest number of tuples one statement carries (manifest members,
/// pack identities, descriptor rows). Keeps every statement's parameters
/// under the server's `max_query_size` whatever the batch size.
pub const MAX_CHUNK: usize = 1000;

/// The most rows one INSERT sends as its data (descriptor rows, in
/// `RowBinary`; see [`crate::InsertData`]). Data is not a parameter, so
/// [`MAX_CHUNK`] does not bound it: 65,536 rows is an index pass of 16
/// packs of 4,096 records in one statement. The data's size is bounded
/// too ([`crate::descriptor::MAX_INSERT_DATA_BYTES`]).
pub const MAX_INSERT_ROWS: usize = 65_536;

/// Nanoseconds per second.
const NS_PER_S: u64 = 1_000_000_000;

/// Default lease time-to-live: 30 s.
pub const DEFAULT_LEASE_TTL_NS: u64 = 30 * NS_PER_S;
/// Default publish timeout (`max_execution_time` of the guarded INSERTs): 10 s.
pub const DEFAULT_PUBLISH_TIMEOUT_NS: u64 = 10 * NS_PER_S;
/// Default fence slack: 250 ms. How much later than its
/// `max_execution_time` the engine may still make a statement's rows
/// visible (the cap is checked between blocks, and a part being committed
/// when it trips still commits). The fence asks for the lease to outlive
/// the cap plus this slack; docs/protocol.md says how it was sized.
pub const DEFAULT_FENCE_SLACK_NS: u64 = 250_000_000;
/// Default bound on lease claim attempts.
pub const DEFAULT_MAX_CLAIM_ATTEMPTS: u32 = 8;
/// Default bound on version allocation attempts.
pub const DEFAULT_MAX_ALLOCATE_ATTEMPTS: u32 = 8;
/// Default bound on publish attempts in one index pass.
pub const DEFAULT_MAX_PUBLISH_ATTEMPTS: u32 = 8;

/// A protocol configuration that cannot be honoured.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The publish timeout is not a whole number of seconds. ClickHouse's
    /// `max_execution_time` is in seconds and truncates fractions (0.5 s
    /// becomes 0, which means "unlimited"), so a fractional timeout would
    /// silently remove the cap the lease's safety margin rests on.
    #[error(
        "publish timeout {publish_timeout_ns} ns is not a whole number of seconds; \
         max_execution_time is in whole seconds and truncates, so use a multiple of 1_000_000_000"
    )]
    PublishTimeoutNotWholeSeconds {
        /// The rejected timeout.
        publish_timeout_ns: u64,
    },
    /// The publish timeout is zero (which ClickHouse reads as "no limit").
    #[error("publish timeout must be at least one second; 0 means unlimited to ClickHouse")]
    PublishTimeoutZero,
    /// The publish timeout does not leave the lease any margin: a statement
    /// could still be running after the lease it was fenced on expired.
    #[error(
        "publish timeout {publish_timeout_ns} ns must be below the lease TTL {lease_ttl_ns} ns, \
         or a fenced INSERT may still land after its lease expired"
    )]
    PublishTimeoutNotBelowTtl {
        /// The publish timeout.
        publish_timeout_ns: u64,
        /// The lease TTL.
        lease_ttl_ns: u64,
    },
    /// The fence's margin (the publish timeout plus the fence slack) does
    /// not fit inside the lease TTL: no fenced statement could ever pass,
    /// because a lease fresh from its read-back would already have less than
    /// the margin left.
    #[error(
        "publish timeout {publish_timeout_ns} ns plus fence slack {fence_slack_ns} ns must be \
         below the lease TTL {lease_ttl_ns} ns, or no fenced statement can ever pass"
    )]
    FenceMarginNotBelowTtl {
        /// The publish timeout.
        publish_timeout_ns: u64,
        /// The fence slack.
        fence_slack_ns: u64,
        /// The lease TTL.
        lease_ttl_ns: u64,
    },
    /// The publish timeout does not fit `max_execution_time` (`u32` seconds).
    #[error("publish timeout {publish_timeout_ns} ns is too large for max_execution_time")]
    PublishTimeoutTooLarge {
        /// The rejected timeout.
        publish_timeout_ns: u64,
    },
    /// An attempt bound is zero: the operation could never run.
    #[error("attempt bound {name} must be at least 1")]
    ZeroAttempts {
        /// Which bound.
        name: &'static str,
    },
    /// The chunk size is zero or above [`MAX_CHUNK`].
    #[error("chunk size {chunk} must be between 1 and {MAX_CHUNK}")]
    BadChunk {
        /// The rejected chunk size.
        chunk: usize,
    },
    /// The bound on rows per INSERT's data is zero or above
    /// [`MAX_INSERT_ROWS`].
    #[error("rows per insert {rows} must be between 1 and {MAX_INSERT_ROWS}")]
    BadInsertRows {
        /// The rejected bound.
        rows: usize,
    },
}

/// The validated protocol configuration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    lease_ttl_ns: u64,
    publish_timeout_s: u32,
    fence_slack_ns: u64,
    max_claim_attempts: u32,
    max_allocate_attempts: u32,
    max_publish_attempts: u32,
    chunk: usize,
    insert_rows: usize,
}

impl Config {
    /// A configuration with the given lease TTL and publish timeout (both in
    /// nanoseconds) and default attempt bounds and chunk size.
    ///
    /// The timeout must be a whole, non-zero number of seconds, and the
    /// timeout plus [`DEFAULT_FENCE_SLACK_NS`] must be below the TTL: the
    /// fence only passes while the lease outlives the statement's whole cap
    /// plus the slack, so a smaller TTL could never publish.
    pub fn new(lease_ttl_ns: u64, publish_timeout_ns: u64) -> Result<Self, ConfigError> {
        if publish_timeout_ns == 0 {
            return Err(ConfigError::PublishTimeoutZero);
        }
        if !publish_timeout_ns.is_multiple_of(NS_PER_S) {
            return Err(ConfigError::PublishTimeoutNotWholeSeconds { publish_timeout_ns });
        }
        if publish_timeout_ns >= lease_ttl_ns {
            return Err(ConfigError::PublishTimeoutNotBelowTtl {
                publish_timeout_ns,
                lease_ttl_ns,
            });
        }
        let publish_timeout_s = u32::try_from(publish_timeout_ns / NS_PER_S)
            .map_err(|_| ConfigError::PublishTimeoutTooLarge { publish_timeout_ns })?;
        let cfg = Self {
            lease_ttl_ns,
            publish_timeout_s,
            fence_slack_ns: DEFAULT_FENCE_SLACK_NS,
            max_claim_attempts: DEFAULT_MAX_CLAIM_ATTEMPTS,
            max_allocate_attempts: DEFAULT_MAX_ALLOCATE_ATTEMPTS,
            max_publish_attempts: DEFAULT_MAX_PUBLISH_ATTEMPTS,
            chunk: MAX_CHUNK,
            insert_rows: MAX_INSERT_ROWS,
        };
        cfg.check_margin()
    }

    /// Sets the fence slack (see [`DEFAULT_FENCE_SLACK_NS`]); the publish
    /// timeout plus the slack must stay below the lease TTL. The model
    /// checker uses 0: its engine kills a statement exactly at its cap.
    pub fn with_fence_slack_ns(mut self, fence_slack_ns: u64) -> Result<Self, ConfigError> {
        self.fence_slack_ns = fence_slack_ns;
        self.check_margin()
    }

    fn check_margin(self) -> Result<Self, ConfigError> {
        let publish_timeout_ns = u64::from(self.publish_timeout_s) * NS_PER_S;
        match publish_timeout_ns.checked_add(self.fence_slack_ns) {
            Some(margin) if margin < self.lease_ttl_ns => Ok(self),
            _ => Err(ConfigError::FenceMarginNotBelowTtl {
                publish_timeout_ns,
                fence_slack_ns: self.fence_slack_ns,
                lease_ttl_ns: self.lease_ttl_ns,
            }),
        }
    }

    /// Sets the three attempt bounds (lease claims, version allocations,
    /// publishes per index pass); each must be at least 1.
    pub fn with_attempts(
        mut self,
        claim: u32,
        allocate: u32,
        publish: u32,
    ) -> Result<Self, ConfigError> {
        for (name, value) in [
            ("max_claim_attempts", claim),
            ("max_allocate_attempts", allocate),
            ("max_publish_attempts", publish),
        ] {
            if value == 0 {
                return Err(ConfigError::ZeroAttempts { name });
            }
        }
        self.max_claim_attempts = claim;
        self.max_allocate_attempts = allocate;
        self.max_publish_attempts = publish;
        Ok(self)
    }

    /// Sets the chunk size (1..=[`MAX_CHUNK`]); smaller chunks exist for tests
    /// and models, which want several chunks from a few tuples.
    pub fn with_chunk(mut self, chunk: usize) -> Result<Self, ConfigError> {
        if chunk == 0 || chunk > MAX_CHUNK {
            return Err(ConfigError::BadChunk { chunk });
        }
        self.chunk = chunk;
        Ok(self)
    }

    /// Sets the most rows one INSERT sends as data (1..=[`MAX_INSERT_ROWS`]);
    /// smaller bounds exist for tests and models, which want several
    /// descriptor INSERTs from a few rows.
    pub fn with_insert_rows(mut self, rows: usize) -> Result<Self, ConfigError> {
        if rows == 0 || rows > MAX_INSERT_ROWS {
            return Err(ConfigError::BadInsertRows { rows });
        }
        self.insert_rows = rows;
        Ok(self)
    }

    /// Lease time-to-live in nanoseconds (server clock).
    pub fn lease_ttl_ns(&self) -> u64 {
        self.lease_ttl_ns
    }
    /// Publish timeout in whole seconds (`max_execution_time`).
    pub fn publish_timeout_s(&self) -> u32 {
        self.publish_timeout_s
    }
    /// The fence slack in nanoseconds.
    pub fn fence_slack_ns(&self) -> u64 {
        self.fence_slack_ns
    }
    /// The margin every lease fence asks for, in nanoseconds: the publish
    /// timeout plus the fence slack. Below the TTL by construction.
    pub fn fence_margin_ns(&self) -> u64 {
        u64::from(self.publish_timeout_s) * NS_PER_S + self.fence_slack_ns
    }
    /// Bound on lease claim attempts.
    pub fn max_claim_attempts(&self) -> u32 {
        self.max_claim_attempts
    }
    /// Bound on version allocation attempts.
    pub fn max_allocate_attempts(&self) -> u32 {
        self.max_allocate_attempts
    }
    /// Bound on publish attempts per index pass.
    pub fn max_publish_attempts(&self) -> u32 {
        self.max_publish_attempts
    }
    /// Tuples per statement.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// The most rows one INSERT sends as its data.
    pub fn insert_rows(&self) -> usize {
        self.insert_rows
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new(DEFAULT_LEASE_TTL_NS, DEFAULT_PUBLISH_TIMEOUT_NS)
            .expect("the default timeout is whole seconds and below the default TTL")
    }
}

/// The jitter window for attempt `attempt` (0-based): a claim retry skips
/// `randbelow(8 * attempt + 1)` slots, so contenders that collided on one
/// term spread over a widening window instead of colliding again.
pub fn jitter_window(attempt: u32) -> u64 {
    8 * u64::from(attempt) + 1
}
