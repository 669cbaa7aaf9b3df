//! The model's clock on the real one.
//!
//! The model's server clock counts ticks (`TICK_NS` each: one second); the
//! engine stamps `now64(9)`. Model time `t` maps to real time
//! `origin + t * tick + offset`, where the offset is how far into the tick
//! the replay has got. A `Tick` step to tick `t` sleeps to the tick's
//! boundary PLUS the furthest offset reached in tick `t - ttl` PLUS a
//! guard: every statement of tick `t` then runs later into its tick than
//! every stamp of tick `t - ttl`, so a lease stamped at tick `s` with a TTL
//! of `ttl` ticks is expired on the engine from tick `s + ttl` on, exactly
//! where the model's is, and live before, as long as every offset stays
//! under a tick. [`ModelClock::max_drift`] reports the largest offset (the
//! replay fails when it comes near a tick), and every liveness judgement is
//! still checked against the real expiries with a margin (see
//! [`near_expiry`]).

use std::collections::BTreeMap;

use std::time::Duration;

/// Added to the offset at every `Tick`, so that the stamps of one tick and
/// the reads of a later one are at least this far apart on the real clock.
pub const TICK_GUARD: Duration = Duration::from_millis(120);
/// A liveness judgement whose real time is within this of a lease's
/// expiry is not compared (`Untested::ExpiryBoundary`).
pub const MARGIN: Duration = Duration::from_millis(40);

/// Nanoseconds since the epoch on the wall clock (the clock `now64(9)`
/// reads: the engine runs in this process), as capcat-clickhouse reads it.
pub use capcat_clickhouse::unix_now_ns as wall_ns;

/// Model time on the real clock, for one trace.
#[derive(Clone, Debug)]
pub struct ModelClock {
    origin_ns: u64,
    tick_ns: u64,
    ttl_ticks: u64,
    now_tick: u64,
    /// The furthest offset reached in each tick.
    reached: BTreeMap<u64, u64>,
}

impl ModelClock {
    /// Model time 0 is now; leases live `ttl_ticks` ticks.
    pub fn start(tick_ns: u64, ttl_ticks: u64) -> Self {
        Self {
            origin_ns: wall_ns(),
            tick_ns,
            ttl_ticks,
            now_tick: 0,
            reached: BTreeMap::new(),
        }
    }

    /// Nanoseconds of one model tick.
    pub fn tick_ns(&self) -> u64 {
        self.tick_ns
    }

    /// The real time of model time 0.
    pub fn origin_ns(&self) -> u64 {
        self.origin_ns
    }

    fn offset_ns(&self, wall: u64) -> u64 {
        wall.saturating_sub(self.origin_ns + self.now_tick * self.tick_ns)
    }

    /// Records how far into the current tick the replay is.
    pub fn note(&mut self) {
        let offset = self.offset_ns(wall_ns());
        let reached = self.reached.entry(self.now_tick).or_default();
        *reached = (*reached).max(offset);
    }

    /// Advances the model clock to tick `to`, sleeping until the real
    /// clock is there: at the furthest offset reached in tick `to - ttl`,
    /// plus the guard.
    pub fn tick(&mut self, to: u64) {
        self.note();
        self.now_tick = to.max(self.now_tick);
        let expiring = self
            .now_tick
            .checked_sub(self.ttl_ticks)
            .and_then(|t| self.reached.get(&t))
            .copied()
            .unwrap_or(0);
        let offset = expiring + u64::try_from(TICK_GUARD.as_nanos()).unwrap_or(0);
        let target = self.origin_ns + self.now_tick * self.tick_ns + offset;
        // Bounded: one sleep per tick, never longer than the tick and the
        // offset (a clock stepping backwards only makes it shorter).
        let now = wall_ns();
        if target > now {
            std::thread::sleep(Duration::from_nanos(target - now));
        }
    }

    /// The model's nanoseconds for a real time value: 0 stays 0 (a release
    /// tombstone), anything else counts whole ticks from the origin. `None`
    /// for a real time before the origin (not written by this trace).
    pub fn to_model_ns(&self, real: u64) -> Option<u64> {
        if real == 0 {
            return Some(0);
        }
        let since = real.checked_sub(self.origin_ns)?;
        Some(since / self.tick_ns * self.tick_ns)
    }

    /// The real time of a model time value (for rows the harness writes).
    pub fn to_real_ns(&self, model: u64) -> u64 {
        if model == 0 {
            0
        } else {
            self.origin_ns + model
        }
    }

    /// The largest offset into a tick seen so far.
    pub fn max_drift(&self) -> Duration {
        Duration::from_nanos(self.reached.values().copied().max().unwrap_or(0))
    }
}

/// Whether any of `expiries` (real ns; 0 is a tombstone and never live)
/// falls within [`MARGIN`] of the interval `[sent, returned]` in which a
/// statement judged liveness.
pub fn near_expiry(expiries: impl IntoIterator<Item = u64>, sent: u64, returned: u64) -> bool {
    let margin = u64::try_from(MARGIN.as_nanos()).unwrap_or(0);
    expiries
        .into_iter()
        .filter(|e| *e != 0)
        .any(|e| e + margin > sent && e < returned + margin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_times_map_to_whole_model_ticks() {
        let clock = ModelClock {
            origin_ns: 1_000,
            tick_ns: 100,
            ttl_ticks: 2,
            now_tick: 0,
            reached: BTreeMap::new(),
        };
        assert_eq!(clock.to_model_ns(0), Some(0));
        assert_eq!(clock.to_model_ns(999), None);
        assert_eq!(clock.to_model_ns(1_000 + 230), Some(200));
        assert_eq!(clock.to_real_ns(200), 1_200);
    }

    #[test]
    fn an_expiry_inside_the_margin_is_a_boundary() {
        let m = u64::try_from(MARGIN.as_nanos()).expect("small");
        assert!(near_expiry(
            [1_000_000_000],
            1_000_000_000 - m / 2,
            1_000_000_000
        ));
        assert!(!near_expiry(
            [1_000_000_000],
            1_000_000_000 + 2 * m,
            1_000_000_000 + 3 * m
        ));
        assert!(!near_expiry([0], 0, 10));
    }
}
