//! `compact`: the driver of `storage::compaction`.
//!
//! Reads a catalog's demand rows, appends the fold of each shard with more
//! than one readable row as one `compaction` row, and only once every
//! append has been acknowledged deletes exactly the rows it folded. Any
//! failure stops the run where it is: the folded rows and the compacted
//! rows may stand side by side, which the join absorbs, so a compaction
//! can be rerun at any time.

use capcat_proto::demand::storage::{self, StoredEvent};
use capcat_proto::{Failure, Param, Tables};
use uuid::Uuid;

use crate::transport::Transport;

/// What a compaction did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CompactionReport {
    /// Rows read (at most the limit).
    pub rows_read: usize,
    /// More rows stood than the limit; the oldest were left for another run.
    pub truncated: bool,
    /// Rows left alone because they cannot be folded (a newer schema, an
    /// undecodable record, an unknown source).
    pub rows_unreadable: usize,
    /// Shards whose rows were folded into one compaction row.
    pub shards_compacted: usize,
    /// Rows deleted (each replaced by its shard's compaction row).
    pub rows_deleted: usize,
}

/// Why a compaction stopped. Whatever it had done stands, and is harmless.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompactionError {
    /// Reading the rows failed; nothing was written.
    #[error("compaction of {prefix:?}: reading the demand rows failed: {failure}")]
    Read {
        /// The catalog's table prefix.
        prefix: String,
        /// What the transport reported.
        failure: Failure,
    },
    /// A compaction row was not acknowledged; nothing was deleted.
    #[error(
        "compaction of {prefix:?}: appending compaction row {index} of {of} failed, \
         nothing deleted: {failure}"
    )]
    Append {
        /// The catalog's table prefix.
        prefix: String,
        /// Which append (0-based).
        index: usize,
        /// How many appends the plan had.
        of: usize,
        /// What the transport reported.
        failure: Failure,
    },
    /// Every compaction row landed, but a delete failed: the folded rows
    /// that remain stand beside their compaction rows (harmless; rerun).
    #[error(
        "compaction of {prefix:?}: deleting folded rows failed after {deleted} were deleted: \
         {failure}"
    )]
    Delete {
        /// The catalog's table prefix.
        prefix: String,
        /// Rows deleted before the failure.
        deleted: usize,
        /// What the transport reported.
        failure: Failure,
    },
}

fn ids_in(statement: &capcat_proto::Statement) -> usize {
    statement
        .params
        .values()
        .map(|param| match param {
            Param::Uuids(ids) => ids.len(),
            _ => 0,
        })
        .sum()
}

/// Compacts the newest `limit` demand rows of the catalog under `tables`.
pub async fn compact<T: Transport + ?Sized>(
    transport: &T,
    tables: &Tables,
    limit: u64,
) -> Result<CompactionReport, CompactionError> {
    let prefix = || tables.prefix().to_owned();
    let read = storage::read_events(tables, None, limit.saturating_add(1));
    let mut rows = transport
        .execute(&read)
        .await
        .map_err(|failure| CompactionError::Read {
            prefix: prefix(),
            failure,
        })?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut report = CompactionReport {
        truncated: rows.0.len() > limit,
        ..CompactionReport::default()
    };
    rows.0.truncate(limit);
    report.rows_read = rows.0.len();
    let stored: Vec<StoredEvent> = storage::decode_rows(&rows)
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    report.rows_unreadable =
        report.rows_read - stored.iter().filter(|row| row.event.is_ok()).count();
    let plan = storage::compaction(tables, &stored, Uuid::new_v4);
    let of = plan.appends.len();
    for (index, append) in plan.appends.iter().enumerate() {
        transport
            .execute(append)
            .await
            .map_err(|failure| CompactionError::Append {
                prefix: prefix(),
                index,
                of,
                failure,
            })?;
    }
    report.shards_compacted = of;
    for delete in &plan.deletes {
        transport
            .execute(delete)
            .await
            .map_err(|failure| CompactionError::Delete {
                prefix: prefix(),
                deleted: report.rows_deleted,
                failure,
            })?;
        report.rows_deleted += ids_in(delete);
    }
    tracing::info!(
        prefix = tables.prefix(),
        rows_read = report.rows_read,
        shards = report.shards_compacted,
        rows_deleted = report.rows_deleted,
        rows_unreadable = report.rows_unreadable,
        truncated = report.truncated,
        "demand compaction done"
    );
    Ok(report)
}
