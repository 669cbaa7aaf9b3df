//! The task that keeps `<spool_dir>/status.json` current, and the order of
//! its writes.
//!
//! It runs beside the cycle loop rather than inside it, because one cycle
//! can take as long as its slowest catalog statement or upload (tens of
//! seconds for a large backlog): an operator running `capcat status` then
//! still sees the counters move. It writes once at start, then once per
//! `status_interval_s`; close writes the last one, marked closed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use capcat_s3::PackStore;

use crate::owner_lock::OwnerLock;
use crate::service::Inner;
use crate::status::{StatusError, StatusFile, write_status};

/// Who may write the status file, and which snapshot is on disk.
///
/// Only the spool's owner writes: a service with `owns_spool = false`
/// shares the directory with the owner, whose status it must not
/// overwrite. Writes are ordered: each takes a sequence number with its
/// snapshot, and the blocking write runs under one lock and skips itself
/// when a later snapshot is already on disk. A cycle aborted by close
/// leaves its blocking write running; without the order it could land
/// after close's final write and show a closed service as running, and two
/// writers would share one temporary file.
#[derive(Debug)]
pub(crate) struct StatusSlot {
    /// The spool's owner lock, when this service owns the spool; taken
    /// (released) at the end of close and on drop.
    owner: Mutex<Option<Arc<OwnerLock>>>,
    /// The sequence number of the last snapshot taken for the file.
    taken: AtomicU64,
    /// The sequence number of the snapshot on disk; its lock orders writes.
    written: Arc<Mutex<u64>>,
}

impl StatusSlot {
    pub(crate) fn new(owner: Option<Arc<OwnerLock>>) -> Self {
        Self {
            owner: Mutex::new(owner),
            taken: AtomicU64::new(0),
            written: Arc::new(Mutex::new(0)),
        }
    }

    fn owner_lock(&self) -> Option<Arc<OwnerLock>> {
        self.owner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Releases the spool's owner lock (once an in-flight status write
    /// holding it lands). After this another process may own the spool.
    pub(crate) fn release_owner(&self) {
        self.owner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

impl<S> Inner<S> {
    /// Writes the snapshot to `<spool_dir>/status.json` (atomically, off
    /// the runtime's worker threads: it fsyncs). A failure is logged when
    /// it starts and counted; it never fails the cycle, because the status
    /// file serves operators, not the data path.
    pub(crate) async fn write_status(&self, closed: bool) {
        let Some(owner) = self.status.owner_lock() else {
            return;
        };
        let sequence = self.status.taken.fetch_add(1, Ordering::SeqCst) + 1;
        let status = StatusFile::new(
            &self.cfg.raw.holder,
            self.cfg.tables.prefix(),
            closed,
            self.snapshot(),
        );
        let dir = self.spool.dir().to_owned();
        let last_written = Arc::clone(&self.status.written);
        let written = tokio::task::spawn_blocking(move || {
            // The blocking write holds the owner lock until it lands.
            let _owner = owner;
            let mut last = last_written.lock().unwrap_or_else(PoisonError::into_inner);
            if *last > sequence {
                return Ok(());
            }
            write_status(dir, &status)?;
            *last = sequence;
            Ok::<(), StatusError>(())
        })
        .await;
        let failure = match written {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(error.to_string()),
            Err(join) => Some(join.to_string()),
        };
        let mut state = self.lock_state();
        match failure {
            None => state.status_failing = false,
            Some(error) => {
                state.snapshot.status_write_failures += 1;
                if !std::mem::replace(&mut state.status_failing, true) {
                    tracing::warn!(%error, "writing the status file failed; retried at the next status interval");
                }
            }
        }
    }
}

impl<S: PackStore + Clone + 'static> Inner<S> {
    /// Writes the status file now and then every status interval until the
    /// service stops. Bounded by the stop signal; a failed write is counted
    /// by `write_status` and retried at the next interval.
    pub(crate) async fn status_writer(self: Arc<Self>) {
        let mut stop = self.signals.stop_signal();
        loop {
            if self.signals.stopped() {
                return;
            }
            self.write_status(false).await;
            tokio::select! {
                () = tokio::time::sleep(self.cfg.status_interval) => {}
                _ = stop.changed() => return,
            }
        }
    }
}
