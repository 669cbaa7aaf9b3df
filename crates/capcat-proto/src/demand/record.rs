//! `DemandRecord`: one shard's backlog, and the join that merges two of them.

use std::collections::BTreeMap;

use super::mark::Mark;

/// The record version this code writes and understands.
pub const CURRENT_VERSION: u32 = 1;

/// The most seal times a record keeps: those of the lowest unmerged
/// generations. Counts stay exact beyond it; only the age clock is bounded.
pub const SEALED_TIMES_CAP: usize = 64;

/// A record whose version this code does not understand.
///
/// Its fields may mean something else, so it is never joined, never
/// interpreted and never overwritten: the fold reports it and moves on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("demand record version {found} is newer than the known version {known}; left untouched")]
pub struct UnknownVersion {
    /// The version the record carries.
    pub found: u64,
    /// The newest version this code reads ([`CURRENT_VERSION`]).
    pub known: u32,
}

/// One spool shard's demand: how far it is sealed, how far it is merged,
/// the bytes waiting, and when each unmerged generation was sealed.
///
/// Every dimension is joined on its own ([`DemandRecord::join`]), so any
/// permutation or duplication of the same records folds to the same result.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DemandRecord {
    /// The record version. `0` (written before versions existed) reads as
    /// [`CURRENT_VERSION`]; anything newer is an [`UnknownVersion`].
    pub v: u32,
    /// The highest generation the writer has sealed (a pack is on the spool
    /// and on its way to the store). `None`: this report says nothing about it.
    pub sealed: Option<Mark>,
    /// The highest generation the indexer has merged into the catalog. Its
    /// epoch is the `merged_epoch` of the seed: the epoch under which the
    /// merge was reported, kept apart from the sealed mark's epoch.
    pub merged: Option<Mark>,
    /// The largest backlog, in bytes, any source reported (a high-water
    /// mark; see [`DemandRecord::pending_bytes`]).
    pub bytes: u64,
    /// Seal time (milliseconds, the writer's clock) by generation, for the
    /// [`SEALED_TIMES_CAP`] lowest generations above `merged`; the minimum
    /// time wins when two reports disagree.
    pub sealed_times: BTreeMap<u64, u64>,
}

impl Default for DemandRecord {
    /// The bottom of the lattice: nothing sealed, nothing merged, at the
    /// current version.
    fn default() -> Self {
        Self {
            v: CURRENT_VERSION,
            sealed: None,
            merged: None,
            bytes: 0,
            sealed_times: BTreeMap::new(),
        }
    }
}

impl DemandRecord {
    /// Whether this code may interpret the record (`v` is 0 or 1).
    pub fn check_version(&self) -> Result<(), UnknownVersion> {
        if self.v <= CURRENT_VERSION {
            Ok(())
        } else {
            Err(UnknownVersion {
                found: u64::from(self.v),
                known: CURRENT_VERSION,
            })
        }
    }

    /// The per-dimension join (least upper bound) of two records.
    ///
    /// Each mark is a max, bytes a max, and `sealed_times` the union with
    /// the minimum time per generation, pruned at and below the joined
    /// merged mark and to the [`SEALED_TIMES_CAP`] lowest generations. No
    /// dimension's comparison decides another's fate: treating a report as
    /// a unit that replaces or is rejected whole was the round-3 bug.
    ///
    /// The result has version [`CURRENT_VERSION`] (a v=0 input reads as 1).
    /// A record of an unknown version cannot be joined.
    pub fn join(&self, other: &Self) -> Result<Self, UnknownVersion> {
        self.check_version()?;
        other.check_version()?;
        let mut sealed_times = self.sealed_times.clone();
        for (&generation, &at) in &other.sealed_times {
            sealed_times
                .entry(generation)
                .and_modify(|t| *t = (*t).min(at))
                .or_insert(at);
        }
        Ok(Self {
            v: CURRENT_VERSION,
            sealed: self.sealed.max(other.sealed),
            merged: self.merged.max(other.merged),
            bytes: self.bytes.max(other.bytes),
            sealed_times,
        }
        .normalized())
    }

    /// The canonical form: version 1, seal times pruned at and below the
    /// merged mark and to the cap. Joining with the default record gives
    /// the same result.
    pub fn normalized(mut self) -> Self {
        if self.v == 0 {
            self.v = CURRENT_VERSION;
        }
        if let Some(merged) = self.merged {
            // Everything at or below the merged generation is no longer
            // pending, so its seal time can never be the oldest pending one.
            self.sealed_times = self.sealed_times.split_off(&merged.value.saturating_add(1));
            if merged.value == u64::MAX {
                self.sealed_times.clear();
            }
        }
        while self.sealed_times.len() > SEALED_TIMES_CAP {
            // Keep the lowest generations: they are the ones the age clock
            // reads next as merges advance.
            self.sealed_times.pop_last();
        }
        self
    }

    /// The merged mark's epoch, if anything was merged.
    pub fn merged_epoch(&self) -> Option<u64> {
        self.merged.map(|m| m.epoch)
    }

    /// Packs sealed but not yet merged: `sealed - merged`, saturating at 0
    /// (a merged mark ahead of the sealed one means nothing is pending).
    /// Exact whatever the number of generations: it reads only the marks.
    pub fn pending(&self) -> u64 {
        let sealed = self.sealed.map_or(0, |m| m.value);
        let merged = self.merged.map_or(0, |m| m.value);
        sealed.saturating_sub(merged)
    }

    /// Bytes waiting: the reported high-water mark while anything is
    /// pending, 0 once everything sealed is merged.
    pub fn pending_bytes(&self) -> u64 {
        if self.pending() == 0 { 0 } else { self.bytes }
    }

    /// The seal time of the lowest unmerged generation with a known seal
    /// time, when anything is pending. A newer flush adds a higher
    /// generation and never moves this back (the seed's age-clock bug).
    pub fn oldest_pending_sealed_at_ms(&self) -> Option<u64> {
        if self.pending() == 0 {
            return None;
        }
        let merged = self.merged.map_or(0, |m| m.value);
        let sealed = self.sealed.map_or(0, |m| m.value);
        self.sealed_times
            .range(merged.saturating_add(1)..=sealed)
            .next()
            .map(|(_, &at)| at)
    }

    /// How long the oldest pending generation has waited at `now_ms` (the
    /// caller's clock; this crate never reads one). `None` when nothing is
    /// pending or no seal time is known.
    pub fn oldest_pending_ms(&self, now_ms: u64) -> Option<u64> {
        self.oldest_pending_sealed_at_ms()
            .map(|at| now_ms.saturating_sub(at))
    }
}
