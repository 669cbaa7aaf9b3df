//! `DemandPublisher`: demand events published off the hot path, bounded.
//!
//! A writer that has just sealed a pack, or an indexer that has just
//! published one, hands its report to the publisher and goes on: the call
//! never waits on the catalog. The append runs detached on the runtime,
//! under a per-append timeout, in one of a fixed number of slots. When
//! every slot is busy the report is dropped on the spot and counted: a
//! stalled catalog must not stall the writer, nor pile up reports without
//! bound. Dropping is safe because the fold is a join: a lost report only
//! understates demand until the next report or scan, which carries the
//! same or higher marks.

use std::sync::Arc;
use std::time::Duration;

use capcat_proto::demand::{DemandEvent, storage};
use capcat_proto::{Failure, Tables};
use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use uuid::Uuid;

use super::counters::{Counters, Ending, PublisherCounters};
use super::scan::{ScanObservation, run_scan};
use crate::drive::run_in_order;
use crate::transport::Transport;

/// The default bound on one append (and on a scan's read): the seed's 15 s,
/// equal to the statements' own `max_execution_time`.
pub const PUBLISH_TIMEOUT: Duration = Duration::from_secs(storage::MAX_EXECUTION_TIME_S as u64);

/// The default number of appends (or scans) in flight at once.
pub const PUBLISH_SLOTS: usize = 4;

/// The most slots a publisher accepts: far above any sensible setting,
/// and far below the semaphore's own limit.
pub const MAX_PUBLISH_SLOTS: usize = 1024;

/// How a publisher is bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PublisherOptions {
    /// The bound on one append; a scan's read and each of its appends get
    /// one such bound each.
    pub timeout: Duration,
    /// How many appends (or scans) may be in flight at once.
    pub slots: usize,
}

impl Default for PublisherOptions {
    fn default() -> Self {
        Self {
            timeout: PUBLISH_TIMEOUT,
            slots: PUBLISH_SLOTS,
        }
    }
}

/// What became of an event handed to the publisher, decided on the spot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Admission {
    /// A slot was free: the append runs detached; its ending is counted.
    Accepted,
    /// Every slot was busy: the event was dropped and counted in
    /// [`PublisherCounters::dropped_full`].
    DroppedFull,
}

/// Why a publisher could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PublisherError {
    /// The publisher spawns its appends on a tokio runtime, and was built
    /// outside one.
    #[error("the demand publisher must be built inside a tokio runtime")]
    NoRuntime,
    /// Zero slots would drop every event.
    #[error("the demand publisher needs at least one slot")]
    ZeroSlots,
    /// More slots than [`MAX_PUBLISH_SLOTS`].
    #[error("the demand publisher accepts at most {max} slots, not {slots}")]
    TooManySlots {
        /// The slots asked for.
        slots: usize,
        /// The limit.
        max: usize,
    },
    /// A zero timeout would time every append out.
    #[error("the demand publisher's timeout must be above zero")]
    ZeroTimeout,
}

/// Publishes writer, executor and scan demand events to one catalog,
/// detached and bounded. Cheap to clone; clones share slots and counters.
#[derive(Clone, Debug)]
pub struct DemandPublisher {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) tables: Tables,
    pub(crate) options: PublisherOptions,
    slots: Arc<Semaphore>,
    pub(crate) counters: Counters,
    runtime: Handle,
}

impl Inner {
    /// Runs one append under the publisher's timeout and counts its ending.
    pub(crate) async fn append(&self, event: &DemandEvent) -> Ending {
        let statement = storage::append(&self.tables, event, Uuid::new_v4());
        let appended = run_in_order("demand.append", vec![statement], self.transport.as_ref());
        let result = tokio::time::timeout(self.options.timeout, appended)
            .await
            .ok()
            .map(|ran| match ran {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(failed)) => Err(failed.failure),
                // One statement never reaches the drive loop's step bound.
                Err(runaway) => Err(Failure::Malformed {
                    message: runaway.to_string(),
                }),
            });
        let ending = Ending::of(result.as_ref());
        self.counters.ended(ending);
        log_ending(
            event,
            ending,
            result.as_ref().and_then(|r| r.as_ref().err()),
        );
        ending
    }
}

fn log_ending(event: &DemandEvent, ending: Ending, failure: Option<&Failure>) {
    match ending {
        Ending::Published => tracing::debug!(
            shard = %event.shard_id,
            source = event.source.as_str(),
            "demand event published"
        ),
        Ending::Failed | Ending::TimedOut => tracing::warn!(
            shard = %event.shard_id,
            source = event.source.as_str(),
            ?ending,
            failure = failure.map(ToString::to_string),
            "demand event not acknowledged (it may still land; the next report repairs it)"
        ),
    }
}

impl DemandPublisher {
    /// A publisher appending to the catalog under `tables` through
    /// `transport`, spawning on the current tokio runtime. Once built, it
    /// may be called from any thread, inside the runtime or not.
    pub fn new(
        transport: Arc<dyn Transport>,
        tables: Tables,
        options: PublisherOptions,
    ) -> Result<Self, PublisherError> {
        if options.slots == 0 {
            return Err(PublisherError::ZeroSlots);
        }
        if options.slots > MAX_PUBLISH_SLOTS {
            return Err(PublisherError::TooManySlots {
                slots: options.slots,
                max: MAX_PUBLISH_SLOTS,
            });
        }
        if options.timeout.is_zero() {
            return Err(PublisherError::ZeroTimeout);
        }
        let runtime = Handle::try_current().map_err(|_| PublisherError::NoRuntime)?;
        Ok(Self {
            inner: Arc::new(Inner {
                transport,
                tables,
                options,
                slots: Arc::new(Semaphore::new(options.slots)),
                counters: Counters::default(),
                runtime,
            }),
        })
    }

    /// The writer sealed `generation` under `epoch` at `sealed_at_ms` (Unix
    /// milliseconds), with `pending_bytes` waiting on the shard.
    pub fn writer_sealed(
        &self,
        shard_id: &str,
        epoch: u64,
        generation: u64,
        pending_bytes: u64,
        sealed_at_ms: u64,
    ) -> Admission {
        self.publish(DemandEvent::writer_sealed(
            shard_id,
            epoch,
            generation,
            pending_bytes,
            sealed_at_ms,
        ))
    }

    /// The indexer merged the shard through `generation` under `epoch`.
    pub fn executor_merged(&self, shard_id: &str, epoch: u64, generation: u64) -> Admission {
        self.publish(DemandEvent::executor_merged(shard_id, epoch, generation))
    }

    /// Publishes any event: takes a slot or drops the event, never waits.
    pub fn publish(&self, event: DemandEvent) -> Admission {
        let Ok(permit) = Arc::clone(&self.inner.slots).try_acquire_owned() else {
            self.inner.counters.dropped_full();
            tracing::debug!(
                shard = %event.shard_id,
                source = event.source.as_str(),
                "demand publisher full: event dropped"
            );
            return Admission::DroppedFull;
        };
        let inner = Arc::clone(&self.inner);
        self.inner.runtime.spawn(async move {
            // The slot is held until the append ends or times out.
            let _permit = permit;
            inner.append(&event).await;
        });
        Admission::Accepted
    }

    /// Publishes what a reconciliation scan saw, as one job in one slot
    /// (dropped and counted as one event when every slot is busy).
    ///
    /// The job reads the catalog's demand once, and appends only the
    /// observations that raise some mark of their shard; the others are
    /// counted in [`PublisherCounters::scan_unchanged`]. Through the join a
    /// scan can only raise marks, never lower one it does not know about;
    /// the read keeps a scan that raises nothing from writing anything at
    /// all. The job stops at its first failed read or append (the rest is
    /// counted in [`PublisherCounters::scan_abandoned`]: the next scan
    /// reports it again), so a stalled catalog holds the slot for at most
    /// two timeouts.
    pub fn publish_scan(&self, observations: Vec<ScanObservation>) -> Admission {
        let Ok(permit) = Arc::clone(&self.inner.slots).try_acquire_owned() else {
            self.inner.counters.dropped_full();
            tracing::debug!(
                shards = observations.len(),
                "demand publisher full: scan dropped"
            );
            return Admission::DroppedFull;
        };
        let inner = Arc::clone(&self.inner);
        self.inner.runtime.spawn(async move {
            let _permit = permit;
            run_scan(&inner, observations).await;
        });
        Admission::Accepted
    }

    /// The counters so far.
    pub fn counters(&self) -> PublisherCounters {
        self.inner.counters.snapshot()
    }

    /// Appends and scans in flight now.
    pub fn in_flight(&self) -> usize {
        self.inner
            .options
            .slots
            .saturating_sub(self.inner.slots.available_permits())
    }

    /// Waits until nothing is in flight, at most `within`; whether it got
    /// there. For shutdown and tests: a hot path never calls it. While it
    /// waits it gathers the slots as they come back, so reports handed in
    /// meanwhile are dropped and counted.
    pub async fn drain(&self, within: Duration) -> bool {
        let all = u32::try_from(self.inner.options.slots)
            .expect("slots are at most MAX_PUBLISH_SLOTS, far below u32::MAX");
        matches!(
            tokio::time::timeout(within, self.inner.slots.acquire_many(all)).await,
            Ok(Ok(_))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Http, HttpOptions};

    fn transport() -> Arc<dyn Transport> {
        // Port 1 on loopback: nothing listens, and building connects nowhere.
        Arc::new(Http::new("http://127.0.0.1:1", HttpOptions::default()).expect("a valid URL"))
    }

    fn tables() -> Tables {
        Tables::new("unit").expect("a valid prefix")
    }

    #[test]
    fn a_publisher_needs_a_runtime() {
        let built = DemandPublisher::new(transport(), tables(), PublisherOptions::default());
        assert_eq!(built.err(), Some(PublisherError::NoRuntime));
    }

    #[tokio::test]
    async fn bounds_are_validated_with_typed_errors() {
        let with = |timeout, slots| {
            DemandPublisher::new(transport(), tables(), PublisherOptions { timeout, slots }).err()
        };
        assert_eq!(with(PUBLISH_TIMEOUT, 0), Some(PublisherError::ZeroSlots));
        assert_eq!(
            with(PUBLISH_TIMEOUT, MAX_PUBLISH_SLOTS + 1),
            Some(PublisherError::TooManySlots {
                slots: MAX_PUBLISH_SLOTS + 1,
                max: MAX_PUBLISH_SLOTS
            })
        );
        assert_eq!(with(Duration::ZERO, 4), Some(PublisherError::ZeroTimeout));
        assert_eq!(with(PUBLISH_TIMEOUT, MAX_PUBLISH_SLOTS), None);
        assert_eq!(
            PublisherOptions::default(),
            PublisherOptions {
                timeout: Duration::from_secs(15),
                slots: 4
            }
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_thread_outside_the_runtime_publishes_and_a_refused_connection_is_counted() {
        let publisher = DemandPublisher::new(transport(), tables(), PublisherOptions::default())
            .expect("publisher");
        let from_thread = publisher.clone();
        let admission = std::thread::spawn(move || from_thread.executor_merged("s", 1, 1))
            .join()
            .expect("the sink thread");
        assert_eq!(admission, Admission::Accepted);
        assert!(publisher.drain(Duration::from_secs(30)).await);
        assert_eq!(
            publisher.counters(),
            PublisherCounters {
                failed: 1,
                ..PublisherCounters::default()
            }
        );
        assert_eq!(publisher.in_flight(), 0);
    }
}
