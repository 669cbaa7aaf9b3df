//! What the service reports about itself.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A pack set aside: in the store, out of the flush boundary, never indexed
/// by this process again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedPack {
    /// The pack.
    pub pack_id: Uuid,
    /// Why it was set aside.
    pub reason: String,
}

/// The service's counters and state at one moment.
///
/// Serializable: it is the body of the status file (`crate::status`). A
/// field missing from a file (written by an older build) reads as its
/// default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Snapshot {
    /// Packs uploaded (and verified) by this process.
    pub uploaded: u64,
    /// Packs indexed (published and recorded) by this process.
    pub indexed: u64,
    /// Packs uploaded but owed to the catalog.
    pub pending_index: usize,
    /// Sealed packs waiting in the spool at the last listing.
    pub spool_ready: usize,
    /// Packs an index pass found already committed (replays, skipped).
    pub replays_skipped: u64,
    /// Packs set aside.
    pub rejected_packs: Vec<RejectedPack>,
    /// Batches halved because the indexer refused them as too large.
    pub batch_splits: u64,
    /// Objects under the prefix that are not packs of this catalog.
    pub reconcile_skipped_objects: u64,
    /// HEADs that failed during reconciliation (left for the next pass).
    pub reconcile_head_errors: u64,
    /// Packs the reconciler found uploaded but not indexed.
    pub reconcile_recovered: u64,
    /// Cycles run.
    pub cycles: u64,
    /// Cycles that failed.
    pub failed_cycles: u64,
    /// Lease renewals that succeeded.
    pub lease_renewals: u64,
    /// Lease renewals that failed.
    pub lease_renewal_failures: u64,
    /// Whether the lease is held right now.
    pub lease_held: bool,
    /// The last error, if any cycle or renewal failed since start.
    pub last_error: Option<String>,
    /// Whether the last cycle found nothing in the spool and nothing owed.
    pub drained: bool,
    /// Status-file writes that failed (see `crate::status`).
    pub status_write_failures: u64,
    /// The demand publisher's counters.
    pub demand: DemandCounters,
}

/// What became of the demand events the service handed to its publisher
/// (capcat-clickhouse's `DemandPublisher`): every event ends in exactly one
/// counter, or is still in flight. A dropped or failed event only
/// understates demand until the next report (the fold is a join).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DemandCounters {
    /// Appends the catalog acknowledged.
    pub published: u64,
    /// Events dropped on the spot because every publisher slot was busy.
    pub dropped_full: u64,
    /// Appends (and scan reads) that failed (they may still have landed).
    pub failed: u64,
    /// Appends (and scan reads) that timed out (they may still land).
    pub timed_out: u64,
    /// Scan observations not appended: they would raise no mark.
    pub scan_unchanged: u64,
    /// Scan observations not attempted after a failure in the same scan.
    pub scan_abandoned: u64,
}

impl From<capcat_clickhouse::demand::PublisherCounters> for DemandCounters {
    fn from(c: capcat_clickhouse::demand::PublisherCounters) -> Self {
        Self {
            published: c.published,
            dropped_full: c.dropped_full,
            failed: c.failed,
            timed_out: c.timed_out,
            scan_unchanged: c.scan_unchanged,
            scan_abandoned: c.scan_abandoned,
        }
    }
}
