//! [`DemandEvents`]: the service's side of the demand fold (what it seals,
//! what it merges, what a reconcile pass observed), on one shard, epoch
//! and pair of generation counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use capcat_clickhouse::demand::{DemandPublisher, PublisherCounters, ScanObservation};

/// The demand events this service publishes. Generations only grow, so a
/// dropped or failed event costs freshness, never correctness: the next
/// event (or a rebuild of the fold) repairs it.
#[derive(Debug)]
pub(crate) struct DemandEvents {
    publisher: DemandPublisher,
    /// The shard: the service's holder name.
    shard_id: String,
    /// The service's start time (ms): a restart opens a new epoch.
    epoch: u64,
    sealed: AtomicU64,
    merged: AtomicU64,
}

impl DemandEvents {
    pub(crate) fn new(publisher: DemandPublisher, shard_id: String, epoch: u64) -> Self {
        Self {
            publisher,
            shard_id,
            epoch,
            sealed: AtomicU64::new(0),
            merged: AtomicU64::new(0),
        }
    }

    /// One pack of `bytes` was sealed into the spool at `now_ms`.
    pub(crate) fn sealed(&self, bytes: u64, now_ms: u64) {
        let generation = self.sealed.fetch_add(1, Ordering::Relaxed) + 1;
        self.publisher
            .writer_sealed(&self.shard_id, self.epoch, generation, bytes, now_ms);
    }

    /// `packs` more packs are queryable.
    pub(crate) fn merged(&self, packs: u64) {
        let generation = self.merged.fetch_add(packs, Ordering::Relaxed) + packs;
        self.publisher
            .executor_merged(&self.shard_id, self.epoch, generation);
    }

    /// A reconcile pass listed `sealed` packs of which `merged` are
    /// committed.
    pub(crate) fn scanned(&self, sealed: u64, merged: u64) {
        self.publisher.publish_scan(vec![ScanObservation {
            shard_id: self.shard_id.clone(),
            epoch: self.epoch,
            sealed,
            merged: Some(merged),
        }]);
    }

    /// What became of the events so far.
    pub(crate) fn counters(&self) -> PublisherCounters {
        self.publisher.counters()
    }

    /// Waits up to `within` for the events in flight; `false` if some are
    /// still in flight then.
    pub(crate) async fn drain(&self, within: Duration) -> bool {
        self.publisher.drain(within).await
    }
}
