//! `DemandEvent`: one report about one shard from one source.

use std::collections::BTreeMap;

use super::mark::Mark;
use super::record::DemandRecord;

/// Who reported a demand event. The source never affects the join: a
/// lower value from any source simply loses the max. It is kept for logs,
/// metrics and the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Source {
    /// The spool sink sealed a pack.
    Writer,
    /// The indexer merged (published) packs into the catalog.
    Executor,
    /// The reconciler saw the shard's packs in the store.
    Scan,
    /// A compaction appended the fold of earlier events.
    Compaction,
}

impl Source {
    /// The name stored in the `source` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Writer => "writer",
            Self::Executor => "executor",
            Self::Scan => "scan",
            Self::Compaction => "compaction",
        }
    }

    /// The source named `name` in the `source` column, if it is known.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "writer" => Some(Self::Writer),
            "executor" => Some(Self::Executor),
            "scan" => Some(Self::Scan),
            "compaction" => Some(Self::Compaction),
            _ => None,
        }
    }
}

/// One report: a record for one shard, from one source.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DemandEvent {
    /// The spool shard the report is about.
    pub shard_id: String,
    /// Who reported it.
    pub source: Source,
    /// What was reported.
    pub record: DemandRecord,
}

impl DemandEvent {
    /// The writer sealed `generation` under `epoch` at `sealed_at_ms` (its
    /// clock), with `pending_bytes` waiting on the shard. A writer report
    /// carries no merged mark, and the join keeps any merged mark already
    /// known: the writer never forgets merged.
    pub fn writer_sealed(
        shard_id: impl Into<String>,
        epoch: u64,
        generation: u64,
        pending_bytes: u64,
        sealed_at_ms: u64,
    ) -> Self {
        Self {
            shard_id: shard_id.into(),
            source: Source::Writer,
            record: DemandRecord {
                sealed: Some(Mark::new(generation, epoch)),
                bytes: pending_bytes,
                sealed_times: BTreeMap::from([(generation, sealed_at_ms)]),
                ..DemandRecord::default()
            },
        }
    }

    /// The indexer merged the shard through `generation` under `epoch`.
    pub fn executor_merged(shard_id: impl Into<String>, epoch: u64, generation: u64) -> Self {
        Self {
            shard_id: shard_id.into(),
            source: Source::Executor,
            record: DemandRecord {
                merged: Some(Mark::new(generation, epoch)),
                ..DemandRecord::default()
            },
        }
    }

    /// The reconciler saw the shard sealed through `sealed` (and merged
    /// through `merged`, when it knows) under `epoch`. Through the join a
    /// scan can only raise marks, never lower one it does not know about.
    pub fn scan(shard_id: impl Into<String>, epoch: u64, sealed: u64, merged: Option<u64>) -> Self {
        Self {
            shard_id: shard_id.into(),
            source: Source::Scan,
            record: DemandRecord {
                sealed: Some(Mark::new(sealed, epoch)),
                merged: merged.map(|m| Mark::new(m, epoch)),
                ..DemandRecord::default()
            },
        }
    }
}
