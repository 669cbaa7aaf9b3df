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

use crate::drive::{MAX_STEPS, run_in_order};
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
/// position of the statement that failed and its failure.
///
/// One drive is bounded by [`MAX_STEPS`], and a plan may hold more
/// statements than that (a large `limit`): it runs as consecutive
/// [`run_in_order`] calls of at most `MAX_STEPS - 1` statements each, which
/// keeps the plan's order and its stop at the first failure. Refusing such
/// a plan whole would never compact it: every rerun builds the same plan.
async fn run(
    transport: &dyn Transport,
    operation: &'static str,
    statements: Vec<Statement>,
) -> Result<Vec<Rows>, (usize, Failure)> {
    // One step per statement plus the final poll must stay under the bound.
    let chunk = MAX_STEPS as usize - 1;
    let mut rows = Vec::with_capacity(statements.len());
    let mut rest = statements.into_iter().peekable();
    while rest.peek().is_some() {
        let part: Vec<Statement> = rest.by_ref().take(chunk).collect();
        let done = rows.len();
        match run_in_order(operation, part, transport).await {
            Ok(Ok(part_rows)) => rows.extend(part_rows),
            Ok(Err(failed)) => return Err((done + failed.index, failed.failure)),
            // A part of `chunk` statements is under the bound, so the drive
            // loop cannot refuse it as too long; should it ever, the
            // failure names the first statement of the part, not yet sent.
            Err(runaway) => {
                return Err((
                    done,
                    Failure::Malformed {
                        message: format!("a part of a compaction refused: {runaway}"),
                    },
                ));
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use capcat_proto::{Expect, Settings};

    use super::*;
    use crate::transport::BoxFuture;

    /// A transport that answers every statement with no rows and fails the
    /// one whose SQL is `fail_at`, recording the SQL it was sent in order (a
    /// unit-test double of the chunking alone: it reads no guard and
    /// decides nothing a real engine would).
    #[derive(Debug)]
    struct Recording {
        fail_at: Option<String>,
        sent: Mutex<Vec<String>>,
    }

    impl Transport for Recording {
        fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
            Box::pin(async move {
                self.sent.lock().expect("sent").push(stmt.sql.clone());
                if self.fail_at.as_deref() == Some(stmt.sql.as_str()) {
                    return Err(Failure::Server {
                        code: 241,
                        message: "memory limit".to_owned(),
                    });
                }
                Ok(Rows::empty())
            })
        }

        fn kind(&self) -> &'static str {
            "recording-double"
        }
    }

    fn statements(n: usize) -> Vec<Statement> {
        (0..n)
            .map(|i| Statement {
                name: "demand.compact_test",
                sql: format!("SELECT {i}"),
                params: BTreeMap::new(),
                settings: Settings::default(),
                expect: Expect::Nothing,
                data: None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_plan_longer_than_one_drive_runs_whole_and_in_order() {
        let n = MAX_STEPS as usize + 5;
        let transport = Recording {
            fail_at: None,
            sent: Mutex::new(Vec::new()),
        };
        let rows = run(&transport, "demand.compact", statements(n))
            .await
            .expect("a long plan runs");
        assert_eq!(rows.len(), n);
        let sent = transport.sent.into_inner().expect("sent");
        let expected: Vec<String> = (0..n).map(|i| format!("SELECT {i}")).collect();
        assert!(
            sent == expected,
            "sent {} statements, out of order",
            sent.len()
        );
    }

    #[tokio::test]
    async fn a_failure_in_a_later_part_names_its_place_in_the_whole_plan() {
        let n = MAX_STEPS as usize + 5;
        let at = MAX_STEPS as usize + 2;
        let transport = Recording {
            fail_at: Some(format!("SELECT {at}")),
            sent: Mutex::new(Vec::new()),
        };
        let (index, failure) = run(&transport, "demand.compact", statements(n))
            .await
            .expect_err("the failure stops the plan");
        assert_eq!(index, at);
        assert!(
            matches!(failure, Failure::Server { code: 241, .. }),
            "{failure:?}"
        );
        assert_eq!(transport.sent.into_inner().expect("sent").len(), at + 1);
    }
}
