//! Demand events, published off the hot path and bounded.
//!
//! The sink reports a writer event when it seals a pack, the indexer an
//! executor event after a publish, the reconciler a scan event. Each is one
//! INSERT run on its own task with a timeout; at most `max_in_flight` run at
//! once, and an event that finds them all busy is dropped and counted, so a
//! slow catalog never slows the capture path or grows a queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use capcat_proto::demand::DemandEvent;
use tokio::sync::Semaphore;

use crate::catalog::CatalogClient;
use crate::snapshot::DemandCounters;

#[derive(Debug, Default)]
struct Counters {
    published: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
}

/// Publishes demand events with bounded concurrency.
#[derive(Clone, Debug)]
pub struct DemandPublisher {
    catalog: CatalogClient,
    permits: Arc<Semaphore>,
    timeout: Duration,
    counters: Arc<Counters>,
    runtime: tokio::runtime::Handle,
}

impl DemandPublisher {
    /// A publisher running at most `max_in_flight` INSERTs of at most `timeout` each.
    #[must_use]
    pub fn new(
        catalog: CatalogClient,
        max_in_flight: usize,
        timeout: Duration,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Self {
            catalog,
            permits: Arc::new(Semaphore::new(max_in_flight)),
            timeout,
            counters: Arc::new(Counters::default()),
            runtime,
        }
    }

    /// Publishes `event` in the background, or drops and counts it when
    /// every slot is busy. Never blocks.
    pub fn publish(&self, event: DemandEvent) {
        let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() else {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(shard = %event.shard_id, source = event.source.as_str(), "demand event dropped: publisher full");
            return;
        };
        let catalog = self.catalog.clone();
        let counters = Arc::clone(&self.counters);
        let timeout = self.timeout;
        self.runtime.spawn(async move {
            match tokio::time::timeout(timeout, catalog.append_demand(&event)).await {
                Ok(Ok(())) => {
                    counters.published.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Err(failure)) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%failure, "demand event not published");
                }
                Err(_) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(?timeout, "demand event timed out");
                }
            }
            drop(permit);
        });
    }

    /// The counters so far.
    #[must_use]
    pub fn counters(&self) -> DemandCounters {
        DemandCounters {
            published: self.counters.published.load(Ordering::Relaxed),
            dropped_full: self.counters.dropped.load(Ordering::Relaxed),
            failed: self.counters.failed.load(Ordering::Relaxed),
            ..DemandCounters::default()
        }
    }
}
