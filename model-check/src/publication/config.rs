//! The bounds and switches one publication model is built from.

use capcat_proto::{Config, ConfigError};

use super::design::Design;

/// Nanoseconds per model tick: one server-clock tick is one second, so the
/// execution cap (`max_execution_time`, whole seconds) and the lease TTL are
/// compared in the same unit the engine uses.
pub const TICK_NS: u64 = 1_000_000_000;

/// How one publication model is built. Every field is a bound or a switch;
/// [`ModelConfig::ci`] is the smallest configuration checked exhaustively.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModelConfig {
    /// The design under check.
    pub design: Design,
    /// Publishers (each indexes one pack of its own).
    pub publishers: u8,
    /// Whether a reader pins W and re-reads.
    pub reader: bool,
    /// Server clock ticks the model may take (`Tick` is disabled after).
    pub max_ticks: u8,
    /// Lease TTL in ticks.
    pub ttl_ticks: u8,
    /// The publish execution cap in ticks (whole seconds); ignored by
    /// `NoExecutionCap`, replaced by `ttl_ticks` for `CapAtLeastTtl`.
    pub cap_ticks: u8,
    /// Publisher crashes the model may take.
    pub crashes: u8,
    /// Whether a crash may leave the unconditional INSERT the publisher was
    /// about to send in flight (it lands later, with no client).
    pub crash_mid_statement: bool,
    /// Whether a publisher releases its lease after its pass (possibly as a
    /// stale holder).
    pub release: bool,
    /// Whether a holder re-acquires its lease before its pass.
    pub reacquire: bool,
    /// Out-of-protocol rows (an operator, a second build) the model may
    /// append: one manifest row or one commit row under a foreign
    /// publish_id, never both, so they alone can never admit a pack.
    pub foreign_writes: u8,
    /// Lease acquisitions per publisher incarnation.
    pub acquire_rounds: u8,
    /// Attempt bounds of capcat-proto's machines (claim, allocate, publish).
    pub attempts: (u32, u32, u32),
    /// Test-only: rebuild the publish statements with the fence text cut
    /// out (capcat-proto's `designs::without_lease_fence` rewrite).
    pub strip_fence: bool,
    /// Test-only: send the commit-row INSERT without its `MANIFEST_COMPLETE`
    /// guard (capcat-proto's `designs::without_manifest_check` rewrite), to
    /// measure what that guard adds beside the exact-row fence.
    pub strip_manifest_check: bool,
    /// Liveness model: `HolderEventuallyPublishes` is checked at terminal
    /// states (the model is acyclic; see the docs).
    pub liveness: bool,
    /// Late starts: a guarded statement may START on the server at any time
    /// after its send (queued behind the server's concurrency limit, held up
    /// on the network), and its cap counts from its start, as ClickHouse
    /// counts `max_execution_time`. Its client still hears of it at send +
    /// cap (the driver's settle wait, `Statement::settle_ns`): `KillAtCap`
    /// on a statement that has not started tells the client `Timeout` and
    /// leaves the statement to start later, with no client. On in every
    /// configuration: turning it off is an assumption that excludes
    /// schedules, kept only to measure what it costs.
    pub late_start: bool,
    /// Index passes per incarnation: a pass that failed under a lease the
    /// publisher still holds runs again under that lease (as the storage
    /// service's next cycle does), up to this many passes in all.
    pub passes: u8,
    /// Late claims: a lease or version claim (an unconditional INSERT whose
    /// SELECT stamps the server clock) is a statement in flight like any
    /// other. The server may stamp it at any time after its send and land
    /// it at any time after that, and its client may give up on it
    /// (`AbandonStatement`: a transport timeout, a dropped connection) and
    /// be told it failed while it still lands. Off, a claim is stamped and
    /// landed at its send.
    pub late_claims: bool,
    /// Descriptors (so packs) per index pass; with more than one, each
    /// publish attempt writes one manifest chunk per pack (the model runs
    /// capcat-proto with a chunk of one pack).
    pub packs_per_pass: u8,
}

impl ModelConfig {
    /// The smallest configuration checked exhaustively in `cargo test`:
    /// 2 publishers, 1 reader, a clock that outlives a lease, 1 crash.
    pub fn ci(design: Design) -> Self {
        Self {
            design,
            publishers: 2,
            reader: true,
            max_ticks: 3,
            ttl_ticks: 2,
            cap_ticks: 1,
            crashes: 1,
            crash_mid_statement: false,
            release: false,
            reacquire: false,
            foreign_writes: 0,
            acquire_rounds: 1,
            attempts: (1, 1, 2),
            strip_fence: false,
            strip_manifest_check: false,
            liveness: false,
            late_start: true,
            passes: 1,
            late_claims: false,
            packs_per_pass: 1,
        }
    }

    /// The base of the hazard configurations: the CI configuration with a
    /// clock of two ticks (one TTL). Each hazard below switches one hazard
    /// on, always with the reader; `cargo xtask model --deep` runs them at
    /// three ticks.
    pub fn short_clock(design: Design) -> Self {
        Self {
            max_ticks: 2,
            ..Self::ci(design)
        }
    }

    /// A (possibly stale) holder releasing after its pass, with the crash.
    pub fn with_release(design: Design) -> Self {
        Self {
            release: true,
            ..Self::short_clock(design)
        }
    }

    /// One out-of-protocol row (an operator's INSERT) at version 1.
    pub fn with_foreign_row(design: Design) -> Self {
        Self {
            foreign_writes: 1,
            crashes: 0,
            ..Self::short_clock(design)
        }
    }

    /// Every holder re-acquires its lease before its pass.
    pub fn with_reacquire(design: Design) -> Self {
        Self {
            reacquire: true,
            ..Self::short_clock(design)
        }
    }

    /// Claim retries enumerate every jitter value of the 9-wide window.
    pub fn with_claim_retries(design: Design) -> Self {
        Self {
            attempts: (2, 1, 1),
            crashes: 0,
            ..Self::short_clock(design)
        }
    }

    /// Index passes run again after a failure, under the same lease, on a
    /// three-tick clock: a holder told its commit row timed out waits for
    /// its renewal to prove the abandoned statement dead, then publishes
    /// another batch (`LeaseIdFence` fails here).
    pub fn with_passes(design: Design) -> Self {
        Self {
            passes: 3,
            crashes: 0,
            ..Self::ci(design)
        }
    }

    /// A lease of four ticks on a four-tick clock, passes that run again and
    /// a release: long enough that a statement started after its client
    /// was told it timed out can still pass its fence (the TTL exceeds
    /// twice the cap plus one tick), and that a holder's lease can lapse
    /// while its second pass stalls (`NoSettleAfterTimeout` and
    /// `UnpublishedRowsResolve` fail here).
    pub fn with_long_lease(design: Design) -> Self {
        Self {
            ttl_ticks: 4,
            max_ticks: 4,
            crashes: 0,
            passes: 3,
            release: true,
            ..Self::ci(design)
        }
    }

    /// Claims stamped long before they land, landing after their client
    /// gave up on them, with holders re-acquiring (so a holder's own
    /// renewal can land late, above or beside the row it holds). Claim
    /// retries (nine jitter values each) and a crash are left to
    /// `cargo xtask model --deep`: beside late claims either takes this
    /// configuration past ten million states.
    pub fn with_late_claims(design: Design) -> Self {
        Self {
            late_claims: true,
            reacquire: true,
            crashes: 0,
            ..Self::short_clock(design)
        }
    }

    /// Two packs per pass, so two manifest chunks per publish attempt, with
    /// passes that run again and the crash: a client may stall between its
    /// chunks, a chunk may be fenced out while the next is in flight, and a
    /// crash may leave a publish with one chunk written.
    pub fn with_two_chunks(design: Design) -> Self {
        Self {
            packs_per_pass: 2,
            passes: 2,
            ..Self::short_clock(design)
        }
    }

    /// Every configuration CI checks exhaustively, by name, each with the
    /// reader. docs/model-checking.md argues which hazard each reaches.
    pub fn ci_set(design: Design) -> Vec<(&'static str, Self)> {
        vec![
            ("ci", Self::ci(design)),
            ("release", Self::with_release(design)),
            ("foreign row", Self::with_foreign_row(design)),
            ("re-acquire", Self::with_reacquire(design)),
            ("claim retries", Self::with_claim_retries(design)),
            ("passes", Self::with_passes(design)),
            ("long lease", Self::with_long_lease(design)),
            ("late claims", Self::with_late_claims(design)),
            ("two chunks", Self::with_two_chunks(design)),
        ]
    }

    /// The liveness configuration: the clock is frozen (so a holder that
    /// keeps renewing never lapses and the engine never kills), no crash,
    /// and every holder re-acquires before its pass.
    pub fn liveness(design: Design) -> Self {
        Self {
            max_ticks: 0,
            crashes: 0,
            reader: false,
            reacquire: true,
            acquire_rounds: 2,
            liveness: true,
            ..Self::ci(design)
        }
    }

    /// The capcat-proto configuration the machines run with.
    pub fn proto(&self) -> Result<Config, ConfigError> {
        let ttl_ns = u64::from(self.ttl_ticks) * TICK_NS;
        let cap_ns = u64::from(self.cap_ticks) * TICK_NS;
        let (claim, allocate, publish) = self.attempts;
        // The model's engine kills a statement exactly at its cap, so the
        // fence needs no slack beyond the cap here. One tuple and one
        // descriptor row per statement, so a pass of several packs sends
        // several statements of each kind and the model interleaves them.
        let cfg = Config::new(ttl_ns, cap_ns)?
            .with_fence_slack_ns(0)?
            .with_attempts(claim, allocate, publish)?
            .with_chunk(1)?
            .with_insert_rows(1)?;
        // A rejected design is not a configuration: the machines run with
        // this one and `Design::wrap` rewrites what they send and read
        // (the cap-at-TTL design's cap included).
        Ok(cfg)
    }
}
