//! `compact`: the driver of `storage::compaction`.
//!
//! Reads a catalog's demand rows, appends the fold of each shard with more
//! than one readable row as one `compaction` row, and only once every
//! append has been acknowledged deletes exactly the rows it folded. Any
//! failure stops the run where it is: the folded rows and the compacted
//! rows may stand side by side, which the join absorbs, so a compaction
//! can be rerun at any time.

use capcat_proto::demand::storage::{self, StoredEvent};
use capcat_proto::{Failure, Param, Rows, Statement, Tables};
use uuid::Uuid;

use crate::drive::run_in_order;
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
///
/// # Errors
/// Where the run stopped ([`CompactionError`]); what it did before stands.
pub async fn compact(
    transport: &dyn Transport,
    tables: &Tables,
    limit: u64,
) -> Result<CompactionReport, CompactionError> {
    let prefix = || tables.prefix().to_owned();
    let read = storage::read_events(tables, None, limit.saturating_add(1));
    let mut rows = run(transport, "demand.compact_read", vec![read])
        .await
        .map_err(|(_, failure)| CompactionError::Read {
            prefix: prefix(),
            failure,
        })?
        .pop()
        .unwrap_or_default();
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
    run(transport, "demand.compact_append", plan.appends)
        .await
        .map_err(|(index, failure)| CompactionError::Append {
            prefix: prefix(),
            index,
            of,
            failure,
        })?;
    report.shards_compacted = of;
    let deleted = |upto: usize| plan.deletes[..upto].iter().map(ids_in).sum::<usize>();
    run(transport, "demand.compact_delete", plan.deletes.clone())
        .await
        .map_err(|(index, failure)| CompactionError::Delete {
            prefix: prefix(),
            deleted: deleted(index),
            failure,
        })?;
    report.rows_deleted = deleted(plan.deletes.len());
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

/// Runs `statements` in order through the drive loop; the error is the
/// position of the statement that failed and its failure, or the whole
/// run refused as too long for one drive.
async fn run(
    transport: &dyn Transport,
    operation: &'static str,
    statements: Vec<Statement>,
) -> Result<Vec<Rows>, (usize, Failure)> {
    let count = statements.len();
    match run_in_order(operation, statements, transport).await {
        Ok(Ok(rows)) => Ok(rows),
        Ok(Err(failed)) => Err((failed.index, failed.failure)),
        // Only a list longer than the drive loop's step bound gets here,
        // refused before any of it was sent; it is reported as the failure
        // of its first statement, so nothing is counted as done.
        Err(runaway) => Err((
            0,
            Failure::Malformed {
                message: format!("{count} statements in one run: {runaway}"),
            },
        )),
    }
}
