//! `read_demand`: a catalog's backlog, per shard and in total, for
//! `capcat status` and for schedulers.

use capcat_proto::demand::{DEFAULT_READ_LIMIT, DemandRead, DemandStatus, ReadDemand, status};
use capcat_proto::{Failure, Tables};

use crate::drive::drive;
use crate::jitter::Jitter;
use crate::transport::Transport;

/// What [`read_demand`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DemandReport {
    /// Per-shard and total pending packs, pending bytes and oldest pending
    /// age, and the rows the fold left out (a newer schema, an undecodable
    /// record) with their typed reasons.
    pub status: DemandStatus,
    /// More rows stood than the read folds: the figures may understate
    /// demand, never overstate it. Run a compaction.
    pub truncated: bool,
}

/// Why a demand read produced no report.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DemandReadError {
    /// The read statement failed; a read changes nothing, so it may simply
    /// be retried.
    #[error("reading the demand events of catalog {prefix:?} failed: {failure}")]
    Statement {
        /// The catalog's table prefix.
        prefix: String,
        /// What the transport reported.
        failure: Failure,
    },
    /// The read machine did not finish within the drive loop's step bound:
    /// a bug, reported instead of looping.
    #[error("the demand read of catalog {prefix:?} did not finish")]
    Protocol {
        /// The catalog's table prefix.
        prefix: String,
    },
}

/// Reads and folds every demand event of the catalog under `tables`
/// (at most [`DEFAULT_READ_LIMIT`] rows, the newest) and summarises it at
/// `now_ms` (the caller's clock, Unix milliseconds, the clock writers stamp
/// seal times with; see [`unix_now_ms`](crate::clock::unix_now_ms)).
pub async fn read_demand(
    transport: &dyn Transport,
    tables: &Tables,
    now_ms: u64,
) -> Result<DemandReport, DemandReadError> {
    let read = read_folded(transport, tables, None, DEFAULT_READ_LIMIT).await?;
    Ok(DemandReport {
        status: status(&read.folded, now_ms),
        truncated: read.truncated,
    })
}

/// Reads and folds the demand events of the catalog (or of one shard), at
/// most `limit` rows, without summarising: the scan publisher compares its
/// observations against these records. Runs capcat-proto's [`ReadDemand`]
/// through the one drive loop.
pub async fn read_folded(
    transport: &dyn Transport,
    tables: &Tables,
    shard_id: Option<String>,
    limit: u64,
) -> Result<DemandRead, DemandReadError> {
    let prefix = || tables.prefix().to_owned();
    let mut machine = ReadDemand::new(tables.clone(), shard_id, limit);
    // A read draws no jitter: this source is never consulted.
    let no_draws = Jitter::from_seed(0);
    match drive("read_demand", &mut machine, transport, &no_draws).await {
        Ok(Ok(read)) => Ok(read),
        Ok(Err(failure)) => Err(DemandReadError::Statement {
            prefix: prefix(),
            failure,
        }),
        Err(_) => Err(DemandReadError::Protocol { prefix: prefix() }),
    }
}
