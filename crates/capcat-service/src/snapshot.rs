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
    /// The last error, if any cycle, renewal or reconcile failed since
    /// start: what failed, which pack, and whether the service retries it.
    #[serde(deserialize_with = "error_record::read_optional")]
    pub last_error: Option<ErrorRecord>,
    /// Whether the last cycle found nothing in the spool and nothing owed.
    pub drained: bool,
    /// Status-file writes that failed (see `crate::status`).
    pub status_write_failures: u64,
    /// The demand publisher's counters.
    pub demand: DemandCounters,
    /// Where the cycles' time went, summed since start.
    pub stage_time: StageTimes,
}

/// Wall time the cycles spent in each stage, in microseconds, summed since
/// the service started. Two snapshots taken around a flush give that
/// flush's breakdown (`capcat demo` prints it). Stages overlap: the next
/// pack is read back and verified, and this pack's records described,
/// while this pack uploads; so their sum can exceed the flush's wall time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StageTimes {
    /// Reading sealed packs from the spool and verifying every digest.
    pub read_verify_us: u64,
    /// Uploading them (the store's PUT; for a local store, its fsyncs).
    pub upload_us: u64,
    /// Checking each upload with a HEAD of the stored object.
    pub head_verify_us: u64,
    /// Describing each uploaded pack's records for the catalog: locators
    /// and summary statistics.
    pub describe_us: u64,
    /// Index passes: the catalog statements that make packs queryable.
    pub index_us: u64,
}

impl StageTimes {
    /// The time spent in each stage since `earlier` (a snapshot of the same
    /// service), saturating at zero.
    #[must_use]
    pub fn since(self, earlier: Self) -> Self {
        Self {
            read_verify_us: self.read_verify_us.saturating_sub(earlier.read_verify_us),
            upload_us: self.upload_us.saturating_sub(earlier.upload_us),
            head_verify_us: self.head_verify_us.saturating_sub(earlier.head_verify_us),
            describe_us: self.describe_us.saturating_sub(earlier.describe_us),
            index_us: self.index_us.saturating_sub(earlier.index_us),
        }
    }
}

/// What failed, as the service recorded it: the error's kind and fields,
/// kept as data so the status file and `capcat status` can say what failed,
/// where, and whether anyone needs to act, not only a sentence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ErrorRecord {
    /// Which part of the service failed.
    pub kind: ErrorKind,
    /// The pack the error concerns, when it concerns one.
    pub pack_id: Option<Uuid>,
    /// Whether the failure is the environment's and expected to clear by
    /// itself (an outage, a full disk, a server that did not answer).
    /// `false` means its cause is in the pack or in what the store did with
    /// it (a refused pack, a store that disagrees with what was sealed): the
    /// service still retries, but is likely to meet the same failure until
    /// a person acts or the pack is set aside after its attempts.
    ///
    /// Status files of earlier builds call it `retried`, with the same
    /// value for every kind, so that name still reads.
    #[serde(alias = "retried")]
    pub transient: bool,
    /// The error's message with its causes.
    pub message: String,
}

impl ErrorRecord {
    /// A record of `kind` with `message`.
    #[must_use]
    pub fn new(kind: ErrorKind, transient: bool, message: impl Into<String>) -> Self {
        Self {
            kind,
            pack_id: None,
            transient,
            message: message.into(),
        }
    }

    /// The same record, about `pack_id`.
    #[must_use]
    pub fn about(mut self, pack_id: Uuid) -> Self {
        self.pack_id = Some(pack_id);
        self
    }
}

impl std::fmt::Display for ErrorRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.kind.as_str())?;
        if let Some(pack_id) = self.pack_id {
            write!(f, " (pack {pack_id})")?;
        }
        let cause = if self.transient {
            "transient"
        } else {
            "likely to repeat"
        };
        write!(f, ", {cause}: {}", self.message)
    }
}

/// Which part of the service an [`ErrorRecord`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The spool directory.
    Spool,
    /// The object store.
    Store,
    /// An upload whose HEAD disagreed with the sealed pack.
    UploadNotVerified,
    /// The catalog was unreachable, timed out or fenced the publisher.
    CatalogOutage,
    /// The catalog refused one pack's rows.
    IndexRefused,
    /// The publisher lease could not be taken.
    Lease,
    /// The keep-alive could not renew the lease.
    LeaseRenewal,
    /// Another catalog operation (the reconciler's inventory read).
    Catalog,
    /// The reconciler could not HEAD an object.
    Reconcile,
    /// A background task panicked or was cancelled.
    Task,
    /// Written by a build that kept only the message.
    Other,
}

impl ErrorKind {
    /// The kind's name as the status file spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spool => "spool",
            Self::Store => "store",
            Self::UploadNotVerified => "upload_not_verified",
            Self::CatalogOutage => "catalog_outage",
            Self::IndexRefused => "index_refused",
            Self::Lease => "lease",
            Self::LeaseRenewal => "lease_renewal",
            Self::Catalog => "catalog",
            Self::Reconcile => "reconcile",
            Self::Task => "task",
            Self::Other => "other",
        }
    }
}

/// Reading `last_error` from status files of every format: a record, or
/// the bare message an older build wrote (kind [`ErrorKind::Other`]).
mod error_record {
    use serde::{Deserialize, Deserializer};

    use super::{ErrorKind, ErrorRecord};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Record(ErrorRecord),
        Message(String),
    }

    pub(super) fn read_optional<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<ErrorRecord>, D::Error> {
        Ok(
            Option::<Written>::deserialize(deserializer)?.map(|written| match written {
                Written::Record(record) => record,
                Written::Message(message) => ErrorRecord::new(ErrorKind::Other, true, message),
            }),
        )
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_times_since_an_earlier_snapshot_are_the_differences_never_negative() {
        let earlier = StageTimes {
            read_verify_us: 10,
            upload_us: 20,
            head_verify_us: 30,
            describe_us: 7,
            index_us: 40,
        };
        let later = StageTimes {
            read_verify_us: 15,
            upload_us: 20,
            head_verify_us: 31,
            describe_us: 9,
            index_us: 100,
        };
        assert_eq!(
            later.since(earlier),
            StageTimes {
                read_verify_us: 5,
                upload_us: 0,
                head_verify_us: 1,
                describe_us: 2,
                index_us: 60,
            }
        );
        assert_eq!(earlier.since(later), StageTimes::default());
    }
}
