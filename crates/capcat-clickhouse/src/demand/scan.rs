//! The scan publisher's job: report what the reconciler saw, raising only.

use capcat_proto::demand::{DEFAULT_READ_LIMIT, DemandEvent, DemandRecord};

use super::counters::Ending;
use super::publisher::Inner;
use super::read::read_folded;

/// The most observations one scan job appends; the rest are counted as
/// abandoned (the next scan reports them again). Bounds the job's length.
pub const SCAN_MAX_OBSERVATIONS: usize = 4096;

/// What the reconciler saw of one shard in the store.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScanObservation {
    /// The spool shard.
    pub shard_id: String,
    /// The writer epoch of the shard's latest manifest.
    pub epoch: u64,
    /// The highest generation sealed in the store.
    pub sealed: u64,
    /// The highest generation merged, when the reconciler knows it.
    pub merged: Option<u64>,
}

impl ScanObservation {
    /// The observation as a scan-sourced event.
    pub fn event(&self) -> DemandEvent {
        DemandEvent::scan(self.shard_id.as_str(), self.epoch, self.sealed, self.merged)
    }
}

/// Whether joining `event` into `current` (the shard's folded record, if
/// any) changes anything. The join never lowers a mark, so "changes" means
/// "raises".
fn raises(current: Option<&DemandRecord>, event: &DemandEvent) -> bool {
    match current {
        None => true,
        Some(current) => current
            .join(&event.record)
            .is_ok_and(|joined| joined != *current),
    }
}

/// Reads the catalog's demand once, then appends, one by one, the
/// observations that raise their shard's record; stops at the first
/// failure.
pub(crate) async fn run_scan(inner: &Inner, mut observations: Vec<ScanObservation>) {
    if observations.len() > SCAN_MAX_OBSERVATIONS {
        let extra = observations.split_off(SCAN_MAX_OBSERVATIONS);
        inner.counters.scan_abandoned(count(extra.len()));
    }
    let read = tokio::time::timeout(
        inner.options.timeout,
        read_folded(
            inner.transport.as_ref(),
            &inner.tables,
            None,
            DEFAULT_READ_LIMIT,
        ),
    )
    .await;
    let mut folded = match read {
        Ok(Ok(read)) => read.folded,
        Ok(Err(error)) => {
            tracing::warn!(%error, "demand scan: the read failed; scan abandoned");
            inner.counters.ended(Ending::Failed);
            inner.counters.scan_abandoned(count(observations.len()));
            return;
        }
        Err(_elapsed) => {
            tracing::warn!("demand scan: the read timed out; scan abandoned");
            inner.counters.ended(Ending::TimedOut);
            inner.counters.scan_abandoned(count(observations.len()));
            return;
        }
    };
    let total = observations.len();
    for (done, observation) in observations.into_iter().enumerate() {
        let event = observation.event();
        if !raises(folded.shards.get(&event.shard_id), &event) {
            inner.counters.scan_unchanged(1);
            continue;
        }
        if inner.append(&event).await != Ending::Published {
            inner.counters.scan_abandoned(count(total - done - 1));
            return;
        }
        // A later observation of the same shard is compared with what this
        // one raised.
        folded.absorb(&event);
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}
