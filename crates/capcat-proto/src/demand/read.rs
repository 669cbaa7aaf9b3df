//! `ReadDemand`: the read-and-fold of a catalog's demand as a [`Machine`].

use super::fold::Folded;
use super::storage;
use crate::machine::{Failure, Input, Machine, Step};
use crate::statement::Rows;
use crate::tables::Tables;

/// The most rows a demand read folds by default. Compaction keeps a
/// catalog far below it; a read that meets it says so.
pub const DEFAULT_READ_LIMIT: u64 = 100_000;

/// What a demand read found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DemandRead {
    /// The fold of the rows read (see [`storage::rebuild`]).
    pub folded: Folded,
    /// More rows stood than the limit: the oldest were not folded, so the
    /// figures may understate demand (never overstate it). Compact.
    pub truncated: bool,
}

/// Reads a catalog's demand events (or one shard's) and folds them.
///
/// One statement, no retry: an ambiguous failure is returned as is, and
/// the caller may simply read again (a read changes nothing).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReadDemand {
    tables: Tables,
    shard_id: Option<String>,
    limit: u64,
    outcome: Option<Result<DemandRead, Failure>>,
    asked: bool,
}

impl ReadDemand {
    /// A read of every shard (`shard_id` `None`) or of one, folding at most
    /// `limit` rows (the newest).
    pub fn new(tables: Tables, shard_id: Option<String>, limit: u64) -> Self {
        Self {
            tables,
            shard_id,
            limit,
            outcome: None,
            asked: false,
        }
    }

    fn fold_rows(&self, mut rows: Rows) -> DemandRead {
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
        let truncated = rows.0.len() > limit;
        rows.0.truncate(limit);
        DemandRead {
            folded: storage::rebuild(&rows),
            truncated,
        }
    }
}

impl Machine for ReadDemand {
    type Outcome = Result<DemandRead, Failure>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        if let Some(outcome) = &self.outcome {
            return Step::Done(outcome.clone());
        }
        self.asked = true;
        // One row past the limit tells whether the read was cut short.
        Step::Execute(storage::read_events(
            &self.tables,
            self.shard_id.as_deref(),
            self.limit.saturating_add(1),
        ))
    }

    fn handle(&mut self, input: Input) {
        if self.outcome.is_some() || !self.asked {
            // Contract violation by the driver: keep the first outcome.
            return;
        }
        self.outcome = Some(match input {
            Input::Rows(rows) => Ok(self.fold_rows(rows)),
            Input::Failed(failure) => Err(failure),
            Input::Drawn(_) => Err(Failure::Malformed {
                message: "demand read was handed a draw it never asked for".to_owned(),
            }),
        });
    }
}
