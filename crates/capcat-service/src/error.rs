//! The service's errors, one enum per concern.

use std::time::Duration;

use uuid::Uuid;

use crate::snapshot::{ErrorKind, ErrorRecord};

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The spool could not be opened or swept.
    #[error("spool: {0}")]
    Spool(#[from] crate::spool::SpoolError),
    /// Another live process owns the spool (holds `<spool_dir>/.owner.lock`):
    /// a running service, or a drain, reconcile or ingest on the same
    /// directory. Nothing was swept, and no schema or lease work was done.
    /// Waiting does not help while that process runs: stop it first (a
    /// killed owner's lock goes with its process).
    #[error(
        "spool {} is owned by a running process{}; stop it first (nothing was swept)",
        spool_dir.display(),
        holder.as_ref().map_or_else(String::new, |h| format!(": {h}"))
    )]
    SpoolBusy {
        /// The spool directory.
        spool_dir: std::path::PathBuf,
        /// Who holds it, when the holder wrote itself down.
        holder: Option<crate::spool::SpoolHolder>,
    },
    /// The spool's owner lock could not be opened or taken for a reason
    /// other than another owner holding it.
    #[error("spool owner lock {}: {source}", path.display())]
    OwnerLock {
        /// The lock file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The catalog's schema was refused or could not be read.
    #[error("catalog schema: {0}")]
    Schema(#[from] capcat_proto::schema::SchemaError),
    /// The publisher lease is held by another process (or unreachable).
    #[error("publisher lease: {0}")]
    Lease(#[from] capcat_proto::LeaseError),
    /// The service must be started inside a tokio runtime.
    #[error("the service must be started inside a tokio runtime")]
    NoRuntime,
    /// The demand publisher refused its bounds.
    #[error("demand publisher: {0}")]
    Demand(#[from] capcat_clickhouse::demand::PublisherError),
    /// Any other catalog failure at start (the schema and lease failures
    /// are reported as [`StartError::Schema`] and [`StartError::Lease`]).
    #[error("catalog: {0}")]
    Catalog(capcat_clickhouse::CatalogError),
}

impl StartError {
    /// A catalog error at start, with the schema guard's and the lease's
    /// own errors unwrapped, so a caller can match a held lease as
    /// `StartError::Lease(LeaseError::Held { .. })`.
    pub(crate) fn from_catalog(error: capcat_clickhouse::CatalogError) -> Self {
        match error {
            capcat_clickhouse::CatalogError::Schema(error) => Self::Schema(error),
            capcat_clickhouse::CatalogError::Lease(error) => Self::Lease(error),
            other => Self::Catalog(other),
        }
    }
}

/// One failed cycle: the reason goes to `last_error`, and the loop backs off.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CycleError {
    /// A spool operation failed.
    #[error("spool: {0}")]
    Spool(#[from] crate::spool::SpoolError),
    /// The object store failed (nothing is removed from the spool).
    #[error("store: {0}")]
    Store(#[from] capcat_s3::StoreError),
    /// An upload did not verify: HEAD reported another size or SHA-256.
    #[error("upload of pack {pack_id} did not verify: {detail}")]
    UploadNotVerified {
        /// The pack.
        pack_id: Uuid,
        /// What HEAD reported instead.
        detail: String,
    },
    /// The catalog could not index (an outage: counted against no pack).
    #[error("catalog outage while indexing {packs} pack(s): {source}")]
    IndexOutage {
        /// The packs of the failed batch.
        packs: usize,
        /// The catalog's error ([`capcat_clickhouse::CatalogError::is_outage`]).
        #[source]
        source: capcat_clickhouse::CatalogError,
    },
    /// A pack was refused on its own, not yet `max_index_attempts` times.
    /// Recorded as `last_error`; it does not fail the cycle (the pack stays
    /// owed and the other packs are indexed).
    #[error("pack {pack_id} refused by the indexer (attempt {attempts}): {source}")]
    IndexRefused {
        /// The pack.
        pack_id: Uuid,
        /// Refusals so far.
        attempts: u32,
        /// The catalog's refusal.
        #[source]
        source: capcat_clickhouse::CatalogError,
    },
    /// The publisher lease could not be taken or kept.
    #[error("publisher lease: {0}")]
    Lease(#[from] capcat_proto::LeaseError),
    /// A catalog operation other than an index pass failed (the
    /// reconciler's inventory read).
    #[error("catalog: {0}")]
    Catalog(#[from] capcat_clickhouse::CatalogError),
    /// A blocking task panicked or was cancelled.
    #[error("background task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl CycleError {
    /// Whether the failure is the environment's and expected to clear by
    /// itself: everything but a refused pack and an upload the store
    /// disagrees with. The service retries those too (the upload on the next
    /// cycle, the index pass up to `max_index_attempts` before it sets the
    /// pack aside), but their cause is in the pack or the store, so they are
    /// likely to repeat until a person acts.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        !matches!(
            self,
            Self::IndexRefused { .. } | Self::UploadNotVerified { .. }
        )
    }

    /// The error as the status file keeps it: kind, pack and message.
    #[must_use]
    pub fn record(&self) -> ErrorRecord {
        let kind = match self {
            Self::Spool(_) => ErrorKind::Spool,
            Self::Store(_) => ErrorKind::Store,
            Self::UploadNotVerified { .. } => ErrorKind::UploadNotVerified,
            Self::IndexOutage { .. } => ErrorKind::CatalogOutage,
            Self::IndexRefused { .. } => ErrorKind::IndexRefused,
            Self::Lease(_) => ErrorKind::Lease,
            Self::Catalog(_) => ErrorKind::Catalog,
            Self::Task(_) => ErrorKind::Task,
        };
        let record = ErrorRecord::new(kind, self.is_transient(), self.to_string());
        match self {
            Self::UploadNotVerified { pack_id, .. } | Self::IndexRefused { pack_id, .. } => {
                record.about(*pack_id)
            }
            _ => record,
        }
    }
}

/// Why a flush did not report everything queryable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlushError {
    /// The deadline passed with packs sealed before the call not yet
    /// queryable (still in the spool, or uploaded and owed to the catalog).
    #[error(
        "not drained after {waited:?}: {pending} pack(s) sealed before the flush are not yet \
         queryable{}{}",
        if set_aside.is_empty() { String::new() } else { format!("; set aside: {set_aside:?}") },
        last_error.as_ref().map_or_else(String::new, |e| format!("; last error: {e}"))
    )]
    NotDrained {
        /// How long the flush waited.
        waited: Duration,
        /// Packs still pending.
        pending: usize,
        /// Packs set aside since the last flush that reported them.
        set_aside: Vec<Uuid>,
        /// The last error the service recorded.
        last_error: Option<ErrorRecord>,
    },
    /// Packs were set aside (too large, or refused too often). They stay in
    /// the store; this error names them once.
    #[error("{} pack(s) were set aside and are not queryable: {packs:?} (see snapshot().rejected_packs)", packs.len())]
    SetAside {
        /// The packs.
        packs: Vec<Uuid>,
    },
    /// The service is stopped.
    #[error("the service is stopped")]
    Stopped,
    /// Sealing the sink's open pack failed.
    #[error("sealing the open pack failed: {0}")]
    Seal(String),
}

/// Why a record could not be appended to the sink.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// The pack writer refused the record.
    #[error("pack: {0}")]
    Pack(#[from] capcat_pack::PackError),
    /// The sealed pack could not be written to the spool.
    #[error("spool: {0}")]
    Spool(#[from] crate::spool::SpoolError),
    /// The service is closed.
    #[error("the service is closed")]
    Closed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_keeps_the_kind_the_pack_and_whether_the_failure_is_transient() {
        let pack_id = Uuid::new_v4();
        let refused = CycleError::UploadNotVerified {
            pack_id,
            detail: "size 3, sealed 4".to_owned(),
        };
        let record = refused.record();
        assert_eq!(record.kind, ErrorKind::UploadNotVerified);
        assert_eq!(record.pack_id, Some(pack_id));
        assert!(!record.transient, "{record:?}");
        assert!(record.message.contains("size 3, sealed 4"), "{record:?}");

        let spool = CycleError::Spool(crate::spool::SpoolError::Io {
            op: "write",
            path: "/spool".into(),
            source: std::io::Error::other("disk full"),
        });
        let record = spool.record();
        assert_eq!(record.kind, ErrorKind::Spool);
        assert_eq!(record.pack_id, None);
        assert!(record.transient, "{record:?}");
    }
}
