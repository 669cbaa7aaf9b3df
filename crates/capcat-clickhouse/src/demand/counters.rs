//! The publisher's counters: what became of every event handed to it.

use std::sync::atomic::{AtomicU64, Ordering};

use capcat_proto::Failure;

/// A snapshot of a [`DemandPublisher`](super::DemandPublisher)'s counters.
///
/// Every event handed to the publisher ends in exactly one of `published`,
/// `dropped_full`, `failed`, `timed_out`, `scan_unchanged` or
/// `scan_abandoned`, or is still in flight. A dropped or failed event
/// understates demand only until the next report or scan: the fold is a
/// join, so nothing later has to repair it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PublisherCounters {
    /// Appends the catalog acknowledged.
    pub published: u64,
    /// Events refused on the spot because every slot was busy.
    pub dropped_full: u64,
    /// Appends (and scan reads) the catalog answered with a failure other
    /// than a timeout. An INSERT's failure is ambiguous: it may still land.
    pub failed: u64,
    /// Appends (and scan reads) that hit the publisher's timeout or the
    /// statement's own time cap. Ambiguous too.
    pub timed_out: u64,
    /// Scan observations not appended because they would raise nothing
    /// the catalog's demand does not already say.
    pub scan_unchanged: u64,
    /// Scan observations not attempted because an earlier append or the
    /// read of the same scan failed (the next scan reports them again).
    pub scan_abandoned: u64,
}

/// The live counters, shared by every task of one publisher.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    published: AtomicU64,
    dropped_full: AtomicU64,
    failed: AtomicU64,
    timed_out: AtomicU64,
    scan_unchanged: AtomicU64,
    scan_abandoned: AtomicU64,
}

/// How one statement of the publisher ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    Published,
    Failed,
    TimedOut,
}

impl Ending {
    /// The ending of a statement the transport answered (`Some`) or that
    /// the publisher's own timeout cut short (`None`).
    pub(crate) fn of<T>(result: Option<&Result<T, Failure>>) -> Self {
        match result {
            Some(Ok(_)) => Self::Published,
            Some(Err(Failure::Timeout)) | None => Self::TimedOut,
            Some(Err(_)) => Self::Failed,
        }
    }
}

impl Counters {
    pub(crate) fn snapshot(&self) -> PublisherCounters {
        PublisherCounters {
            published: self.published.load(Ordering::Relaxed),
            dropped_full: self.dropped_full.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            timed_out: self.timed_out.load(Ordering::Relaxed),
            scan_unchanged: self.scan_unchanged.load(Ordering::Relaxed),
            scan_abandoned: self.scan_abandoned.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn dropped_full(&self) {
        self.dropped_full.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn ended(&self, ending: Ending) {
        let counter = match ending {
            Ending::Published => &self.published,
            Ending::Failed => &self.failed,
            Ending::TimedOut => &self.timed_out,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn scan_unchanged(&self, n: u64) {
        self.scan_unchanged.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn scan_abandoned(&self, n: u64) {
        self.scan_abandoned.fetch_add(n, Ordering::Relaxed);
    }
}
