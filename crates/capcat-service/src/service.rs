//! [`Service`]: start, the sink, flush, close, snapshot.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use capcat_clickhouse::demand::{DemandPublisher, PublisherOptions};
use capcat_clickhouse::{Catalog, unix_now_ms};
use capcat_pack::{PackLimits, PackWriter, RecordMetadata};
use capcat_proto::CaptureDescriptor;
use capcat_s3::PackStore;
use capcat_s3::reconcile::VerifiedPack;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::config::ValidConfig;
use crate::demand_events::DemandEvents;
use crate::error::{FlushError, SinkError, StartError};
use crate::lease_slot::LeaseSlot;
use crate::owner_lock;
use crate::signals::Signals;
use crate::snapshot::{DemandCounters, RejectedPack, Snapshot};
use crate::spool::Spool;
use crate::status_writer::StatusSlot;

/// A pack uploaded and verified, owed to the catalog.
#[derive(Clone, Debug)]
pub(crate) struct Owed {
    pub(crate) descriptors: Vec<CaptureDescriptor>,
    /// Times the indexer refused this pack on its own.
    pub(crate) refusals: u32,
}

/// The mutable state the cycle, the reconciler and flush share.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) owed: BTreeMap<Uuid, Owed>,
    /// Packs the reconciler found in the store and not in the inventory,
    /// waiting for the cycle to fetch and index them.
    pub(crate) recovered: VecDeque<VerifiedPack>,
    pub(crate) rejected: BTreeMap<Uuid, String>,
    /// Set-aside packs no flush has reported yet.
    pub(crate) unreported: BTreeSet<Uuid>,
    pub(crate) snapshot: Snapshot,
    /// Whether the last status-file write failed (so a persisting failure
    /// is logged once, not every cycle).
    pub(crate) status_failing: bool,
}

impl State {
    pub(crate) fn set_aside(&mut self, pack_id: Uuid, reason: String) {
        tracing::error!(%pack_id, %reason, "pack set aside: it stays in the store and leaves the flush boundary");
        self.owed.remove(&pack_id);
        self.rejected.insert(pack_id, reason);
        self.unreported.insert(pack_id);
    }
}

/// The sink's open pack.
#[derive(Debug, Default)]
struct SinkState {
    writer: Option<PackWriter>,
    closed: bool,
}

/// What everything in the service shares: what it was given, what it
/// shares under locks, and how its tasks signal each other.
#[derive(Debug)]
pub(crate) struct Inner<S> {
    pub(crate) cfg: ValidConfig,
    pub(crate) store: S,
    pub(crate) catalog: Catalog,
    pub(crate) spool: Spool,
    /// What the cycle, the reconciler and flush share.
    pub(crate) state: Mutex<State>,
    /// The sink's open pack.
    sink: Mutex<SinkState>,
    /// The publisher lease.
    pub(crate) lease: LeaseSlot,
    /// One cycle at a time.
    pub(crate) cycle_lock: tokio::sync::Mutex<()>,
    pub(crate) signals: Signals,
    pub(crate) demand: DemandEvents,
    pub(crate) status: StatusSlot,
}

impl<S> Inner<S> {
    pub(crate) fn lock_state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves counters, never a broken
        // invariant the next holder could trip on, so poisoning is ignored.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn record_error(&self, error: &crate::error::CycleError) {
        self.lock_state().snapshot.last_error = Some(error.record());
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let state = self.lock_state();
        let mut snapshot = state.snapshot.clone();
        snapshot.pending_index = state.owed.len();
        snapshot.rejected_packs = state
            .rejected
            .iter()
            .map(|(pack_id, reason)| RejectedPack {
                pack_id: *pack_id,
                reason: reason.clone(),
            })
            .collect();
        drop(state);
        snapshot.lease_held = self.lease.is_held();
        snapshot.demand = DemandCounters::from(self.demand.counters());
        snapshot
    }
}

/// When a flush gives up.
#[derive(Clone, Copy, Debug)]
enum FlushDeadline {
    /// After this long in all.
    Total(Duration),
    /// After this long without one more pack done.
    NoProgressFor(Duration),
}

/// How far a flush has come: of the `total` packs sealed before it
/// started, `done` are queryable or set aside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushProgress {
    /// Packs of the flush's boundary no longer pending.
    pub done: usize,
    /// Packs sealed before the flush started (its boundary).
    pub total: usize,
}

/// What a successful flush reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlushReport {
    /// Packs that were sealed before the call and are now queryable.
    pub packs: usize,
    /// How long it took.
    pub elapsed: Duration,
}

/// What `close` reports.
#[derive(Debug)]
pub struct CloseReport {
    /// The final flush.
    pub flush: Result<FlushReport, FlushError>,
    /// Whether the lease was released (else it expires on its own).
    pub lease_released: bool,
}

/// The storage service: spool -> store -> catalog in one process.
///
/// Dropping a running service without [`Service::close`] stops its tasks
/// without waiting for them (the lease then expires on its own), so a drop
/// never blocks the dropping thread.
#[derive(Debug)]
pub struct Service<S: PackStore + Clone + 'static> {
    inner: Arc<Inner<S>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl<S: PackStore + Clone + std::fmt::Debug + 'static> Service<S> {
    /// Starts the service: opens the spool (when it owns it: takes the
    /// spool's owner lock, then sweeps stale `.open` files), ensures the schema, takes the publisher lease,
    /// reconciles when configured, then runs the cycle loop and the lease
    /// keep-alive.
    ///
    /// # Errors
    /// A refused schema, a lease held by someone else, a spool that cannot
    /// be opened, [`StartError::SpoolBusy`] at once (before any sweep,
    /// schema or lease work) when another live process owns the spool.
    pub async fn start(cfg: ValidConfig, store: S, catalog: Catalog) -> Result<Self, StartError> {
        Self::start_with(cfg, store, catalog, None).await
    }

    /// [`Service::start`] for a caller that already owns the spool (it took
    /// [`owner_lock::take`] before sealing into it): the service holds a
    /// clone of `ownership` instead of taking the lock again.
    ///
    /// # Errors
    /// As [`Service::start`]; [`StartError::OwnerLock`] when `ownership`
    /// is of another directory than `spool_dir`, or the configuration does
    /// not own its spool.
    pub async fn start_owning(
        cfg: ValidConfig,
        store: S,
        catalog: Catalog,
        ownership: owner_lock::SpoolOwnership,
    ) -> Result<Self, StartError> {
        Self::start_with(cfg, store, catalog, Some(ownership)).await
    }

    async fn start_with(
        cfg: ValidConfig,
        store: S,
        catalog: Catalog,
        ownership: Option<owner_lock::SpoolOwnership>,
    ) -> Result<Self, StartError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        let spool = Spool::open(&cfg.raw.spool_dir)?;
        // Ownership is taken before anything touches the spool, the schema
        // or the lease, so a second process on a live service's spool is
        // refused at once and sweeps nothing.
        let owner = match (cfg.raw.owns_spool, ownership) {
            (true, Some(owned)) if owned.spool_dir() == spool.dir() => Some(owned.lock),
            (owns, Some(owned)) => {
                return Err(StartError::OwnerLock {
                    path: owner_lock::owner_lock_path(owned.spool_dir()),
                    source: std::io::Error::other(format!(
                        "the ownership passed is not of this service's spool {} (owns_spool = {owns})",
                        spool.dir().display()
                    )),
                });
            }
            (true, None) => Some(owner_lock::take(spool.dir(), &cfg.raw.holder)?.lock),
            (false, None) => None,
        };
        if owner.is_some() {
            // Safe only now: no sink of ours is open yet, and the owner
            // lock means no other owner's sink writes into the spool.
            let swept = spool.sweep_stale_open()?;
            if swept > 0 {
                tracing::info!(swept, "swept stale .open files at start");
            }
        }
        let outcome = catalog
            .ensure_schema()
            .await
            .map_err(StartError::from_catalog)?;
        tracing::info!(
            %outcome,
            prefix = cfg.tables.prefix(),
            "catalog schema ready"
        );
        // Built before the lease is taken, so a refused publisher never
        // leaves a lease behind to expire.
        let demand = DemandPublisher::new(
            Arc::clone(catalog.transport()),
            cfg.tables.clone(),
            PublisherOptions {
                timeout: cfg.demand_publish_timeout,
                slots: cfg.raw.demand_max_in_flight,
            },
        )?;
        let lease = catalog
            .acquire_lease(&cfg.raw.holder)
            .await
            .map_err(StartError::from_catalog)?;
        let demand = DemandEvents::new(demand, cfg.raw.holder.clone(), unix_now_ms());
        let inner = Arc::new(Inner {
            cfg,
            store,
            catalog,
            spool,
            state: Mutex::new(State::default()),
            sink: Mutex::new(SinkState::default()),
            lease: LeaseSlot::new(lease),
            cycle_lock: tokio::sync::Mutex::new(()),
            signals: Signals::new(),
            demand,
            status: StatusSlot::new(owner),
        });
        if inner.cfg.raw.reconcile_on_start
            && let Err(error) = inner.reconcile().await
        {
            tracing::warn!(%error, "reconcile at start failed; packs it would find wait for the next pass");
            inner.record_error(&error);
        }
        let cycle = runtime.spawn(Arc::clone(&inner).cycle_loop());
        let keeper = runtime.spawn(Arc::clone(&inner).lease_keeper());
        let status = runtime.spawn(Arc::clone(&inner).status_writer());
        Ok(Self {
            inner,
            tasks: Mutex::new(vec![cycle, keeper, status]),
        })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &ValidConfig {
        &self.inner.cfg
    }

    /// The catalog this service publishes to.
    #[must_use]
    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// The store packs are uploaded to.
    #[must_use]
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The spool.
    #[must_use]
    pub fn spool(&self) -> &Spool {
        &self.inner.spool
    }

    /// Appends one record to the sink's open pack, sealing it into the spool
    /// when it reaches `max_pack_records`. Returns the id of a pack sealed by
    /// this call.
    ///
    /// # Errors
    /// The record is refused (the pack is unchanged), or the sealed pack
    /// could not be written to the spool.
    pub fn append(
        &self,
        metadata: RecordMetadata,
        payload: impl Into<Bytes>,
    ) -> Result<Option<Uuid>, SinkError> {
        let mut sink = self
            .inner
            .sink
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if sink.closed {
            return Err(SinkError::Closed);
        }
        let raw = &self.inner.cfg.raw;
        let limits = PackLimits::new(raw.max_pack_records, raw.max_pack_payload_bytes)?;
        let payload = payload.into();
        let writer = sink
            .writer
            .get_or_insert_with(|| PackWriter::new(Uuid::new_v4(), limits));
        match writer.append(metadata.clone(), payload.clone()) {
            Ok(_) => {}
            Err(capcat_pack::PackError::TooManyBytes { .. }) if !writer.is_empty() => {
                // The open pack is full by bytes: seal it and start another.
                self.seal_locked(&mut sink)?;
                sink.writer
                    .get_or_insert_with(|| PackWriter::new(Uuid::new_v4(), limits))
                    .append(metadata, payload)?;
            }
            Err(e) => return Err(e.into()),
        }
        if sink
            .writer
            .as_ref()
            .is_some_and(|w| w.len() >= raw.max_pack_records)
        {
            return self.seal_locked(&mut sink);
        }
        Ok(None)
    }

    /// Seals the sink's open pack into the spool, if it holds any record.
    ///
    /// # Errors
    /// The pack could not be sealed or written.
    pub fn seal(&self) -> Result<Option<Uuid>, SinkError> {
        let mut sink = self
            .inner
            .sink
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.seal_locked(&mut sink)
    }

    fn seal_locked(&self, sink: &mut SinkState) -> Result<Option<Uuid>, SinkError> {
        let Some(writer) = sink.writer.take() else {
            return Ok(None);
        };
        if writer.is_empty() {
            return Ok(None);
        }
        let sealed = writer.seal()?;
        let pack_id = sealed.info.pack_id;
        self.inner.spool.write_sealed(pack_id, &sealed.bytes)?;
        tracing::debug!(%pack_id, bytes = sealed.bytes.len(), "sealed a pack into the spool");
        self.inner
            .demand
            .sealed(sealed.info.byte_length, unix_now_ms());
        Ok(Some(pack_id))
    }

    /// Seals the sink, then waits until every pack sealed before the call is
    /// queryable, or `deadline` passes, or packs were set aside.
    ///
    /// Returns at the deadline whatever a cycle is doing: the flush waits on
    /// the cycle loop's progress, never on a cycle itself.
    ///
    /// # Errors
    /// [`FlushError::NotDrained`] at the deadline, [`FlushError::SetAside`]
    /// (once per set-aside pack), [`FlushError::Stopped`].
    pub async fn flush(&self, deadline: Duration) -> Result<FlushReport, FlushError> {
        self.flush_until(FlushDeadline::Total(deadline), |_| {})
            .await
    }

    /// Like [`flush`](Self::flush), but waits as long as the backlog
    /// shrinks: it gives up only when `stall` passes without one more pack
    /// of those sealed before the call becoming queryable (or set aside).
    /// A backlog of any size drains, however long that takes, while a
    /// service that stopped making progress is still reported within
    /// `stall`. `observe` sees the progress once at the start and each time
    /// it changes.
    ///
    /// # Errors
    /// As [`flush`](Self::flush); [`FlushError::NotDrained`] says how long
    /// the whole flush waited.
    pub async fn flush_while_progressing(
        &self,
        stall: Duration,
        observe: impl FnMut(FlushProgress),
    ) -> Result<FlushReport, FlushError> {
        self.flush_until(FlushDeadline::NoProgressFor(stall), observe)
            .await
    }

    async fn flush_until(
        &self,
        deadline: FlushDeadline,
        mut observe: impl FnMut(FlushProgress),
    ) -> Result<FlushReport, FlushError> {
        let started = Instant::now();
        let window = match deadline {
            FlushDeadline::Total(d) | FlushDeadline::NoProgressFor(d) => d,
        };
        let mut until = tokio::time::Instant::now() + window;
        self.seal().map_err(|e| FlushError::Seal(e.to_string()))?;
        if self.inner.signals.stopped() {
            return Err(FlushError::Stopped);
        }
        let inner = &self.inner;
        let listed = inner
            .spool
            .list_ready(usize::MAX)
            .map_err(|e| FlushError::Seal(e.to_string()))?;
        let mut boundary: BTreeSet<Uuid> = listed.ready.iter().map(|p| p.pack_id).collect();
        {
            let state = inner.lock_state();
            boundary.extend(state.owed.keys().copied());
            boundary.extend(state.recovered.iter().map(|p| p.key.pack_id()));
        }
        let total = boundary.len();
        let mut progress = inner.signals.progress();
        inner.signals.wake();
        // `None` until the first count: the first pass reports the
        // starting point without counting as progress.
        let mut last_pending: Option<usize> = None;
        loop {
            let pending = {
                let state = inner.lock_state();
                boundary.retain(|id| {
                    !state.rejected.contains_key(id)
                        && (state.owed.contains_key(id)
                            || inner.spool.is_ready(*id)
                            || state.recovered.iter().any(|p| p.key.pack_id() == *id))
                });
                boundary.len()
            };
            if last_pending != Some(pending) {
                // The boundary only shrinks: a pack leaves it and never
                // returns.
                debug_assert!(last_pending.is_none_or(|last| pending < last));
                observe(FlushProgress {
                    done: total - pending,
                    total,
                });
                if let (Some(_), FlushDeadline::NoProgressFor(stall)) = (last_pending, deadline) {
                    until = tokio::time::Instant::now() + stall;
                }
                last_pending = Some(pending);
            }
            if pending == 0 {
                let set_aside = self.take_unreported();
                if !set_aside.is_empty() {
                    return Err(FlushError::SetAside { packs: set_aside });
                }
                return Ok(FlushReport {
                    packs: total,
                    elapsed: started.elapsed(),
                });
            }
            match tokio::time::timeout_at(until, progress.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(FlushError::Stopped),
                Err(_) => {
                    let set_aside = self.take_unreported();
                    let last_error = inner.lock_state().snapshot.last_error.clone();
                    return Err(FlushError::NotDrained {
                        waited: started.elapsed(),
                        pending,
                        set_aside,
                        last_error,
                    });
                }
            }
        }
    }

    fn take_unreported(&self) -> Vec<Uuid> {
        std::mem::take(&mut self.inner.lock_state().unreported)
            .into_iter()
            .collect()
    }

    /// The counters and state now.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshot()
    }

    /// Seals the sink, flushes within `close_flush_timeout`, stops the
    /// cycle loop and the keep-alive, and releases the lease. Best effort
    /// after the flush: every step runs even when an earlier one failed.
    pub async fn close(self) -> CloseReport {
        let flush = self.flush(self.inner.cfg.close_flush_timeout).await;
        if let Err(error) = &flush {
            tracing::warn!(%error, "final flush did not drain; what is left stays in the spool or the store");
        }
        self.inner
            .sink
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .closed = true;
        self.inner.signals.stop();
        let tasks = std::mem::take(
            &mut *self
                .tasks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let grace = self.inner.cfg.catalog_request_timeout + Duration::from_secs(1);
        for task in tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout(grace, task).await.is_err() {
                abort.abort();
            }
        }
        let lease = self.inner.lease.lock().await.take();
        let lease_released = match lease {
            Some(mut lease) => match lease.release().await {
                Ok(()) => true,
                Err(error) => {
                    tracing::warn!(%error, "lease release failed; it expires on its own");
                    false
                }
            },
            None => false,
        };
        // Demand events still in flight (the last executor report) get one
        // publish timeout to land; the fold repairs any that do not.
        if !self
            .inner
            .demand
            .drain(self.inner.cfg.demand_publish_timeout)
            .await
        {
            tracing::warn!("demand events still in flight at close; the next report repairs them");
        }
        self.inner.write_status(true).await;
        // Last: after this another process may own the spool and sweep it.
        self.inner.status.release_owner();
        CloseReport {
            flush,
            lease_released,
        }
    }
}

impl<S: PackStore + Clone + 'static> Drop for Service<S> {
    fn drop(&mut self) {
        // Never waits: the tasks are told to stop and aborted at their next
        // await point; a lease not released expires after its TTL.
        self.inner.signals.stop();
        self.inner.status.release_owner();
        for task in self
            .tasks
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain(..)
        {
            task.abort();
        }
    }
}
