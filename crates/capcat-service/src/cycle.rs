//! The cycle: index what is owed, then upload (only when nothing is owed),
//! then index what was uploaded.
//!
//! Order is the durability argument. The uploader removes a pack from the
//! spool once its upload verifies, so an uploaded pack the catalog has not
//! indexed lives only in memory (and in the store, where only a reconcile
//! finds it). Uploading while something is owed would, during a catalog
//! outage, move every new pack off the durable spool into memory. So new
//! packs stay in the spool until the catalog is back.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capcat_clickhouse::CatalogError;
use capcat_pack::{PackReader, Sha256Digest};
use capcat_proto::{CaptureDescriptor, IndexError, IndexReport, LeaseError};
use capcat_s3::PackStore;
use uuid::Uuid;

use crate::backoff::Backoff;
use crate::descriptors::{descriptors_of, estimated_bytes};
use crate::error::CycleError;
use crate::service::{Inner, Owed};
use crate::snapshot::{ErrorKind, ErrorRecord, StageTimes};

pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CycleError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(CycleError::from)
}

impl<S: PackStore + Clone + 'static> Inner<S> {
    /// The background loop: a cycle, then a wait from the backoff schedule
    /// (cut short by a flush or a stop).
    pub(crate) async fn cycle_loop(self: Arc<Self>) {
        let mut backoff = Backoff::new(self.cfg.poll_interval, self.cfg.max_backoff);
        let mut stop = self.signals.stop_signal();
        let mut last_reconcile = tokio::time::Instant::now();
        loop {
            if self.signals.stopped() {
                return;
            }
            if let Some(interval) = self.cfg.reconcile_interval
                && last_reconcile.elapsed() >= interval
            {
                last_reconcile = tokio::time::Instant::now();
                if let Err(error) = self.reconcile().await {
                    tracing::warn!(%error, "periodic reconcile failed");
                    self.record_error(&error);
                }
            }
            let wait = match self.run_cycle().await {
                Ok(()) => backoff.on_success(),
                Err(error) => {
                    let wait = backoff.on_failure();
                    tracing::warn!(%error, ?wait, "cycle failed; backing off");
                    let mut state = self.lock_state();
                    state.snapshot.failed_cycles += 1;
                    state.snapshot.last_error = Some(error.record());
                    wait
                }
            };
            self.signals.advanced();
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.signals.woken() => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// One cycle.
    pub(crate) async fn run_cycle(&self) -> Result<(), CycleError> {
        let _cycle = self.cycle_lock.lock().await;
        self.lock_state().snapshot.cycles += 1;
        let result = self.cycle_body().await;
        let mut state = self.lock_state();
        state.snapshot.pending_index = state.owed.len();
        result
    }

    async fn cycle_body(&self) -> Result<(), CycleError> {
        // 1. What is owed to the catalog goes first. A pack refused on its
        // own stays owed, and the cycle ends here, successful: nothing
        // failed but that pack, which the next cycle offers again (so each
        // cycle counts at most one refusal against it), and nothing is
        // uploaded while something is owed.
        if self.index_owed().await? > 0 {
            return Ok(());
        }
        // 2. Packs the reconciler found, then the spool: only now that
        // nothing is owed.
        self.fetch_recovered().await?;
        if self.index_owed().await? > 0 {
            return Ok(());
        }
        let spool = self.spool.clone();
        let limit = self.cfg.raw.max_packs_per_cycle;
        // Listed once per cycle: listing re-reads every pending file's name
        // and time, and a backlog makes that the cycle's cost.
        let listing = blocking(move || spool.list_ready(limit)).await??;
        let (uploaded, result) = self.upload_listed(&listing.ready).await;
        // Whatever uploaded before a failure is indexed now, so it is owed
        // for as short a time as possible. A pack refused here stays owed
        // for the next cycle, which does not fail this one.
        let indexed = self.index_owed().await.map(|_refused| ());
        let mut state = self.lock_state();
        state.snapshot.spool_ready = listing.total_ready - uploaded;
        state.snapshot.drained = result.is_ok()
            && indexed.is_ok()
            && listing.total_ready == uploaded
            && state.owed.is_empty()
            && state.recovered.is_empty();
        drop(state);
        result?;
        indexed
    }

    /// Adds the time since `started` to one stage's total in the snapshot.
    pub(crate) fn add_stage_time(
        &self,
        started: Instant,
        stage: impl FnOnce(&mut StageTimes) -> &mut u64,
    ) {
        self.add_time(started.elapsed(), stage);
    }

    /// Adds `took` to one stage's total in the snapshot.
    pub(crate) fn add_time(&self, took: Duration, stage: impl FnOnce(&mut StageTimes) -> &mut u64) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let mut state = self.lock_state();
        let total = stage(&mut state.snapshot.stage_time);
        *total = total.saturating_add(us);
    }

    /// Fetches packs the reconciler found (uploaded, never indexed), at
    /// most `max_packs_per_cycle`, verifies them, and makes them owed.
    async fn fetch_recovered(&self) -> Result<(), CycleError> {
        // Copied, not drained: a pack leaves `recovered` only in the same
        // critical section that makes it owed (or sets it aside), so a
        // flush never sees it in neither place.
        let batch: Vec<_> = {
            let state = self.lock_state();
            if !state.owed.is_empty() {
                return Ok(());
            }
            state
                .recovered
                .iter()
                .take(self.cfg.raw.max_packs_per_cycle)
                .cloned()
                .collect()
        };
        for found in batch {
            let pack_id = found.key.pack_id();
            // A failed GET leaves this and the rest queued for the next cycle.
            let bytes = self.store.get(&found.key.object_key()).await?;
            let expected = Sha256Digest(found.metadata.sha256);
            let described = blocking(move || {
                PackReader::from_bytes_expecting(bytes, expected).map(|pack| (pack.pack_id(), pack))
            })
            .await?;
            let store_id = self.cfg.raw.store_id.clone();
            let outcome = match described {
                Ok((id, pack)) if id == pack_id => descriptors_of(&pack, &store_id)
                    .map_err(|e| format!("stored pack cannot be described: {e}")),
                Ok((id, _)) => Err(format!("stored object holds pack {id}")),
                Err(error) => Err(format!("stored pack does not verify: {error}")),
            };
            let mut state = self.lock_state();
            state.recovered.retain(|r| r.key != found.key);
            match outcome {
                Ok(descriptors) => {
                    state.owed.insert(
                        pack_id,
                        Owed {
                            descriptors,
                            refusals: 0,
                        },
                    );
                    state.snapshot.reconcile_recovered += 1;
                }
                Err(reason) => state.set_aside(pack_id, reason),
            }
        }
        Ok(())
    }

    /// Indexes every owed pack, halving batches the indexer refuses as too
    /// large and setting aside what cannot be indexed at all.
    ///
    /// A batch over the budget is halved until its parts fit; a single pack
    /// over the budget is set aside at once (retrying cannot make it fit). A
    /// batch refused for its values is halved to find the culprit; a single
    /// pack so refused has the refusal counted (and recorded as
    /// `last_error`) and stays owed, and the pass goes on with the other
    /// queued batches, so one bad pack never holds healthy ones back; after
    /// `max_index_attempts` refusals it is set aside. An outage fails the
    /// cycle and counts against no pack.
    ///
    /// Returns how many packs were refused on their own and stay owed.
    async fn index_owed(&self) -> Result<usize, CycleError> {
        let ids: Vec<Uuid> = self.lock_state().owed.keys().copied().collect();
        if ids.is_empty() {
            return Ok(0);
        }
        let mut refused = 0;
        let budget = self.cfg.raw.index_batch_budget_bytes;
        let mut queue: VecDeque<Vec<Uuid>> = VecDeque::from([ids]);
        // Bounded: each pass either removes packs from the queue or splits a
        // batch into strictly smaller ones, so at most 2n passes run.
        while let Some(batch) = queue.pop_front() {
            let descriptors: Vec<CaptureDescriptor> = {
                let state = self.lock_state();
                batch
                    .iter()
                    .filter_map(|id| state.owed.get(id))
                    .flat_map(|o| o.descriptors.iter().cloned())
                    .collect()
            };
            let estimate = estimated_bytes(&descriptors);
            if estimate > budget {
                if let [only] = batch[..] {
                    self.lock_state().set_aside(
                        only,
                        format!("alone it is {estimate} estimated bytes, over the indexer's budget of {budget}"),
                    );
                } else {
                    self.split(&mut queue, batch, estimate);
                }
                continue;
            }
            match self.index_batch(descriptors).await {
                Ok(report) => self.on_indexed(&batch, &report),
                Err(IndexFailure::Outage(source)) => {
                    return Err(CycleError::IndexOutage {
                        packs: batch.len(),
                        source,
                    });
                }
                Err(IndexFailure::Refused(source)) => {
                    if let [only] = batch[..] {
                        let mut state = self.lock_state();
                        let attempts = state.owed.get_mut(&only).map_or(0, |o| {
                            o.refusals += 1;
                            o.refusals
                        });
                        if attempts >= self.cfg.raw.max_index_attempts {
                            state.set_aside(only, format!("refused {attempts} times: {source}"));
                            continue;
                        }
                        let error = CycleError::IndexRefused {
                            pack_id: only,
                            attempts,
                            source,
                        };
                        tracing::warn!(%error, "pack refused on its own; the others go on");
                        state.snapshot.last_error = Some(error.record());
                        refused += 1;
                        continue;
                    }
                    self.split(&mut queue, batch, estimate);
                }
            }
        }
        Ok(refused)
    }

    fn split(&self, queue: &mut VecDeque<Vec<Uuid>>, mut batch: Vec<Uuid>, estimate: u64) {
        let back = batch.split_off(batch.len() / 2);
        tracing::info!(
            packs = batch.len() + back.len(),
            estimate,
            "halving a batch the indexer refused"
        );
        self.lock_state().snapshot.batch_splits += 1;
        queue.push_front(back);
        queue.push_front(batch);
    }

    fn on_indexed(&self, batch: &[Uuid], report: &IndexReport) {
        let mut state = self.lock_state();
        for id in batch {
            state.owed.remove(id);
        }
        state.snapshot.indexed += batch.len() as u64;
        match report {
            IndexReport::Indexed {
                version,
                packs,
                skipped,
                ..
            } => {
                state.snapshot.replays_skipped += skipped.len() as u64;
                tracing::info!(
                    version,
                    packs = packs.len(),
                    skipped = skipped.len(),
                    "published"
                );
            }
            IndexReport::NothingToDo { skipped } => {
                state.snapshot.replays_skipped += skipped.len() as u64;
                tracing::info!(
                    skipped = skipped.len(),
                    "every pack of the batch was already committed"
                );
            }
        }
        drop(state);
        self.demand.merged(batch.len() as u64);
    }

    /// One index pass under the lease (taking it again when lost), holding
    /// the lease lock so the keep-alive cannot interleave.
    async fn index_batch(
        &self,
        descriptors: Vec<CaptureDescriptor>,
    ) -> Result<IndexReport, IndexFailure> {
        let mut guard = self.lease.lock().await;
        let lease = match guard.lease() {
            Some(lease) => lease,
            None => match self.catalog.acquire_lease(&self.cfg.raw.holder).await {
                Ok(lease) => {
                    tracing::info!(lease_id = %lease.lease().lease_id, "publisher lease re-acquired");
                    guard.put(lease)
                }
                Err(error) => return Err(IndexFailure::Outage(error)),
            },
        };
        // The pass renews the lease inside it and hands the renewed lease
        // back to the handle, whatever its outcome.
        let indexing = Instant::now();
        let result = self.catalog.index(lease, descriptors).await;
        self.add_stage_time(indexing, |t| &mut t.index_us);
        match result {
            Ok(report) => Ok(report),
            Err(error) => {
                if matches!(
                    error,
                    CatalogError::Index(IndexError::LeaseLost { .. })
                        | CatalogError::Released { .. }
                        | CatalogError::InDoubt { .. }
                ) {
                    guard.take();
                }
                if error.is_outage() {
                    Err(IndexFailure::Outage(error))
                } else {
                    Err(IndexFailure::Refused(error))
                }
            }
        }
    }

    /// The keep-alive: renews the lease every TTL/3 on its own schedule,
    /// whatever the cycle's backoff (which may reach the TTL itself).
    pub(crate) async fn lease_keeper(self: Arc<Self>) {
        let period = self.cfg.lease_ttl / 3;
        let mut stop = self.signals.stop_signal();
        loop {
            // Checked before every wait, not only after it: a receiver made
            // after the stop (a task first polled once close had begun, as
            // in a drain with nothing to do) has already seen it, so
            // `changed()` would never fire and close waited a whole period
            // (ttl / 3: 10 s by default) for this task.
            if self.signals.stopped() {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(period) => {}
                _ = stop.changed() => return,
            }
            if self.signals.stopped() {
                return;
            }
            let mut guard = self.lease.lock().await;
            let Some(lease) = guard.lease() else {
                continue;
            };
            match tokio::time::timeout(period, lease.renew()).await {
                Ok(Ok(_)) => {
                    self.lock_state().snapshot.lease_renewals += 1;
                }
                Ok(Err(error)) => {
                    if matches!(
                        error,
                        CatalogError::Lease(LeaseError::NotHeld { .. })
                            | CatalogError::Released { .. }
                            | CatalogError::InDoubt { .. }
                    ) {
                        // Taken over or expired: the next publish acquires
                        // it again (or finds it held and waits).
                        guard.take();
                    }
                    tracing::warn!(%error, "lease renewal failed");
                    let mut state = self.lock_state();
                    state.snapshot.lease_renewal_failures += 1;
                    state.snapshot.last_error = Some(ErrorRecord::new(
                        ErrorKind::LeaseRenewal,
                        true,
                        error.to_string(),
                    ));
                }
                Err(_) => {
                    tracing::warn!(?period, "lease renewal timed out");
                    let mut state = self.lock_state();
                    state.snapshot.lease_renewal_failures += 1;
                    state.snapshot.last_error = Some(ErrorRecord::new(
                        ErrorKind::LeaseRenewal,
                        true,
                        format!("timed out after {period:?}"),
                    ));
                }
            }
        }
    }
}

/// Why an index pass did not publish.
enum IndexFailure {
    /// The catalog was unreachable, timed out, fenced us or out-raced us
    /// (or the lease could not be taken again).
    Outage(CatalogError),
    /// The catalog refused these values.
    Refused(CatalogError),
}
