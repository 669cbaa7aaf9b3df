//! `fold`: the join of every event, per shard, with a report of what was skipped.

use std::collections::BTreeMap;

use super::codec::DecodeError;
use super::event::{DemandEvent, Source};
use super::record::{DemandRecord, UnknownVersion};

/// Why an event did not take part in a fold. The event itself is left
/// where it was: skipping never loses it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SkipReason {
    /// The record is of a newer schema; it is never interpreted nor overwritten.
    #[error(transparent)]
    UnknownVersion(#[from] UnknownVersion),
    /// The stored record text could not be decoded.
    #[error("undecodable demand record: {0}")]
    Undecodable(#[from] DecodeError),
    /// The stored `source` names no source this code knows.
    #[error("unknown demand source {name:?}")]
    UnknownSource {
        /// The stored name.
        name: String,
    },
    /// A stored row did not have the columns the read statement asks for.
    #[error("malformed demand row {index}: {what}")]
    MalformedRow {
        /// The row's position in the result.
        index: usize,
        /// What did not match.
        what: String,
    },
}

/// One event the fold left out, and why.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Skipped {
    /// The shard the event was about (empty when the row was malformed).
    pub shard_id: String,
    /// Who reported it, when known.
    pub source: Option<Source>,
    /// Why it was left out.
    pub reason: SkipReason,
}

/// The fold of a set of events: one joined record per shard, and the
/// events that were left out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Folded {
    /// The join of every readable event, by shard.
    pub shards: BTreeMap<String, DemandRecord>,
    /// Events left out, in the order they were met.
    pub skipped: Vec<Skipped>,
}

impl Folded {
    /// Joins one more event in. An event of an unknown version is recorded
    /// in [`Folded::skipped`] and changes no shard.
    pub fn absorb(&mut self, event: &DemandEvent) {
        let current = self.shards.get(&event.shard_id);
        let joined = match current {
            Some(current) => current.join(&event.record),
            None => DemandRecord::default().join(&event.record),
        };
        match joined {
            Ok(record) => {
                self.shards.insert(event.shard_id.clone(), record);
            }
            Err(unknown) => self.skipped.push(Skipped {
                shard_id: event.shard_id.clone(),
                source: Some(event.source),
                reason: SkipReason::UnknownVersion(unknown),
            }),
        }
    }

    /// Packs pending over every shard (saturating).
    pub fn total_pending(&self) -> u64 {
        self.shards
            .values()
            .fold(0u64, |sum, r| sum.saturating_add(r.pending()))
    }
}

/// The join over `events`, per shard. Any permutation or duplication of
/// the same events gives the same shards.
pub fn fold<'a, I>(events: I) -> Folded
where
    I: IntoIterator<Item = &'a DemandEvent>,
{
    let mut folded = Folded::default();
    for event in events {
        folded.absorb(event);
    }
    folded
}
