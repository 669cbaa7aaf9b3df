//! `status`: what an operator or a scheduler reads from a fold.

use std::collections::BTreeMap;

use super::fold::{Folded, Skipped};

/// One shard's backlog.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ShardStatus {
    /// Packs sealed and not yet merged.
    pub pending_packs: u64,
    /// Bytes waiting (0 when nothing is pending).
    pub pending_bytes: u64,
    /// How long the oldest pending pack has waited, in milliseconds;
    /// `None` when nothing is pending or no seal time is known.
    pub oldest_pending_ms: Option<u64>,
}

/// A catalog's backlog: per shard and in total.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DemandStatus {
    /// Each shard's backlog.
    pub shards: BTreeMap<String, ShardStatus>,
    /// The sums of packs and bytes (saturating) and the oldest age over
    /// every shard.
    pub total: ShardStatus,
    /// Events the fold left out; an operator should see them.
    pub skipped: Vec<Skipped>,
}

/// Summarises `folded` at `now_ms` (the caller's clock, milliseconds).
pub fn status(folded: &Folded, now_ms: u64) -> DemandStatus {
    let mut out = DemandStatus {
        skipped: folded.skipped.clone(),
        ..DemandStatus::default()
    };
    for (shard_id, record) in &folded.shards {
        let shard = ShardStatus {
            pending_packs: record.pending(),
            pending_bytes: record.pending_bytes(),
            oldest_pending_ms: record.oldest_pending_ms(now_ms),
        };
        out.total.pending_packs = out.total.pending_packs.saturating_add(shard.pending_packs);
        out.total.pending_bytes = out.total.pending_bytes.saturating_add(shard.pending_bytes);
        out.total.oldest_pending_ms = out.total.oldest_pending_ms.max(shard.oldest_pending_ms);
        out.shards.insert(shard_id.clone(), shard);
    }
    out
}
