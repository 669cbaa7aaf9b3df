//! The reconciler: packs in the store that the catalog never indexed.
//!
//! A pack leaves the spool once its upload verifies, so a process that dies
//! before the catalog indexes it leaves the pack only in the store. The
//! reconciler lists this catalog's prefix, asks the inventory which packs it
//! holds, HEADs the rest and hands the verified ones to the cycle. Keys that
//! are not a canonical `<uuid>.pack` never reach the inventory query (one
//! foreign key would otherwise fail the whole UUID-typed query, and every
//! pass with it); objects without pack metadata are counted as skipped; a
//! HEAD that fails is an error, counted apart, and left for the next pass.

use capcat_s3::PackStore;
use capcat_s3::reconcile::{ListLimits, head_packs, list_catalog_packs};
use uuid::Uuid;

use crate::error::CycleError;
use crate::service::Inner;
use crate::snapshot::{ErrorKind, ErrorRecord};

/// What one reconcile pass found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Packs listed under the prefix.
    pub listed: usize,
    /// Of those, committed in the inventory.
    pub committed: usize,
    /// Uncommitted packs verified and queued for indexing.
    pub queued: usize,
    /// Foreign objects skipped.
    pub skipped: u64,
    /// HEADs that failed.
    pub head_errors: usize,
}

impl<S: PackStore + Clone + 'static> Inner<S> {
    /// One reconcile pass.
    pub(crate) async fn reconcile(&self) -> Result<ReconcileReport, CycleError> {
        let listing =
            list_catalog_packs(&self.store, &self.cfg.prefix, ListLimits::default()).await?;
        let ids: Vec<Uuid> = listing.packs.iter().map(|p| p.key.pack_id()).collect();
        tracing::info!(
            listed = ids.len(),
            foreign = listing.foreign.count,
            "reconcile: listed the prefix"
        );
        // The inventory query serializes with publishes and the keep-alive.
        let committed = {
            let _lease = self.lease.lock().await;
            self.catalog.committed(&self.cfg.raw.store_id, &ids).await?
        };
        let candidates: Vec<_> = {
            let state = self.lock_state();
            listing
                .packs
                .iter()
                .filter(|p| {
                    let id = p.key.pack_id();
                    !committed.contains(&id)
                        && !state.owed.contains_key(&id)
                        && !state.rejected.contains_key(&id)
                        && !state.recovered.iter().any(|r| r.key.pack_id() == id)
                })
                .cloned()
                .collect()
        };
        let sweep = head_packs(&self.store, &candidates).await;
        let report = ReconcileReport {
            listed: ids.len(),
            committed: committed.len(),
            queued: sweep.verified.len(),
            skipped: listing.foreign.count + sweep.foreign.count,
            head_errors: sweep.errors.len(),
        };
        {
            let mut state = self.lock_state();
            state.snapshot.reconcile_skipped_objects += report.skipped;
            state.snapshot.reconcile_head_errors += sweep.errors.len() as u64;
            if let Some(failure) = sweep.errors.last() {
                state.snapshot.last_error = Some(ErrorRecord::new(
                    ErrorKind::Reconcile,
                    true,
                    format!("HEAD {} failed: {}", failure.key, failure.error),
                ));
            }
            state.recovered.extend(sweep.verified);
        }
        self.demand
            .scanned(ids.len() as u64, committed.len() as u64);
        self.signals.advanced();
        // Field by field: a log line an operator reads, not a Rust struct.
        tracing::info!(
            listed = report.listed,
            committed = report.committed,
            queued = report.queued,
            skipped = report.skipped,
            head_errors = report.head_errors,
            "reconcile pass done"
        );
        Ok(report)
    }
}
