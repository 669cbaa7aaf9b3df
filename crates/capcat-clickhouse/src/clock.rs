//! The wall clock, read in one place.
//!
//! capcat-proto never reads a clock (server time arrives in result rows);
//! everything above it that needs "now" as a Unix timestamp (the demand
//! events' seal times and the ages `capcat status` reports, the service's
//! status file and epoch, the CLI's ingest stamps) reads it here, so every
//! such timestamp is on the same clock with the same rounding.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Unix time in milliseconds: the clock demand writers stamp seal times
/// with, [`read_demand`](crate::demand::read_demand) measures ages against
/// and the service stamps its status file with. Saturating: a clock before
/// 1970 reads as 0, one past `u64::MAX` ms as `u64::MAX`.
#[must_use]
pub fn unix_now_ms() -> u64 {
    saturating_ms(SystemTime::now().duration_since(UNIX_EPOCH).ok())
}

/// Unix time in nanoseconds (capture stamps, `captured_at_ns`). Saturating
/// like [`unix_now_ms`]: before 1970 reads as 0, past year 2554 as
/// `u64::MAX`.
#[must_use]
pub fn unix_now_ns() -> u64 {
    saturating_ns(SystemTime::now().duration_since(UNIX_EPOCH).ok())
}

fn saturating_ms(since_epoch: Option<Duration>) -> u64 {
    since_epoch.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn saturating_ns(since_epoch: Option<Duration>) -> u64 {
    since_epoch.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_the_epoch_reads_zero_and_overflow_saturates() {
        assert_eq!(saturating_ms(None), 0);
        assert_eq!(saturating_ns(None), 0);
        assert_eq!(saturating_ms(Some(Duration::from_millis(1_234))), 1_234);
        assert_eq!(saturating_ns(Some(Duration::from_nanos(5))), 5);
        assert_eq!(saturating_ms(Some(Duration::MAX)), u64::MAX);
        assert_eq!(saturating_ns(Some(Duration::MAX)), u64::MAX);
    }

    #[test]
    fn milliseconds_and_nanoseconds_read_the_same_clock() {
        let ms = unix_now_ms();
        let ns = unix_now_ns();
        let ms_again = unix_now_ms();
        // After 2020 and ordered: the two readings bracket the ns one.
        assert!(ms > 1_577_836_800_000, "{ms}");
        assert!(ms <= ns / 1_000_000 && ns / 1_000_000 <= ms_again);
    }
}
