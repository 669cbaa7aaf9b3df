//! What the engine's tables show of the model's properties: for a
//! counterexample, whether its violation shows; for every trace, every
//! check (a check that fires on the shipped design's walks is a defect of
//! the check).

use capcat_proto::fragments::meaning::{self, Reach};

use super::*;

/// The properties whose violation the replay can look for on the real
/// tables, each with the check that `Replay::violations_of` runs.
pub const CHECKED_PROPERTIES: [&str; 6] = [
    "FencedOutWritesNothing",
    "PinnedSnapshotNeverGrows",
    "PinnedReadsNeverChange",
    "OneLiveLease",
    "ReportedMeansVisible",
    "InventoryOnlyAfterPublish",
];

impl Replay<'_> {
    /// What the engine shows of `property` failing (empty: nothing), or
    /// `None` for a property no table state shows.
    pub(super) fn violations_of(&self, property: &str) -> Option<Vec<String>> {
        let o = &self.observed;
        Some(match property {
            "FencedOutWritesNothing" => o.fenced_out_landed.clone(),
            "PinnedSnapshotNeverGrows" => o.snapshot_grew.clone(),
            "PinnedReadsNeverChange" => o.rows_changed.clone(),
            // The table half of `OneLiveLease`: a release tombstone landed
            // from a non-holder. Its other half (a holder's acquire refused
            // by its own lease) is a client's decision on rows the replay
            // compares, not a table state.
            "OneLiveLease" => o.release_by_non_holder.clone(),
            "ReportedMeansVisible" => o
                .inventory_writes
                .iter()
                .filter(|(v, id, _)| {
                    !self.real["index_watermark"].contains(&vec![v.clone(), id.clone()])
                })
                .map(|(v, id, at)| {
                    format!(
                        "step {at}: a pass reported Won at v{v} (it wrote the inventory) but no \
                         commit row ({v}, {id}) stands"
                    )
                })
                .collect(),
            "InventoryOnlyAfterPublish" => self.unpublished_inventory(),
            _ => return None,
        })
    }

    /// Records a change of what the pinned read returns, or a row above W.
    pub(super) fn observe_rows(&mut self, when: &str, pinned: &PinnedRead, rows: &Resolved) {
        let above: Vec<_> = rows
            .iter()
            .filter(|(_, _, v)| v.parse::<u64>().is_ok_and(|v| v > pinned.version))
            .collect();
        if rows != &pinned.rows || !above.is_empty() {
            self.observed.rows_changed.push(format!(
                "{when}: W={} resolved {:?} at pinning, now {rows:?}",
                pinned.version, pinned.rows
            ));
        }
    }

    /// Every check of [`CHECKED_PROPERTIES`] with what it found, found or not.
    pub(super) fn every_check(&self) -> BTreeMap<String, Vec<String>> {
        CHECKED_PROPERTIES
            .iter()
            .map(|p| ((*p).to_owned(), self.violations_of(p).unwrap_or_default()))
            .collect()
    }

    /// For a counterexample: whether the engine shows its property failing.
    pub(super) fn reproduction(&self) -> Result<Option<(String, Reproduction)>, ReplayError> {
        let Some(property) = self.trace.violates.clone() else {
            return Ok(None);
        };
        let Some(found) = self.violations_of(&property) else {
            return Err(ReplayError::Malformed {
                file: self.trace.name.clone(),
                what: format!(
                    "the trace violates {property:?}, a property the replay has no check for \
                     (it checks {CHECKED_PROPERTIES:?})"
                ),
            });
        };
        if !found.is_empty() {
            return Ok(Some((property, Reproduction::Observed(found.join("; ")))));
        }
        let count = |u: Untested| self.untested.get(&u).copied().unwrap_or(0);
        let windows = count(Untested::InFlightWindow)
            + count(Untested::SplitEvaluation)
            + count(Untested::NeverLandedInModel);
        let why = if windows > 0 {
            format!(
                "the violation needs a statement's guard evaluated apart from its rows landing \
                 ({windows} predictions fell in such a window), which the engine cannot be made \
                 to do at statement granularity"
            )
        } else if property == "OneLiveLease" {
            "no release tombstone from a non-holder landed; the model's violation is a holder's \
             acquire refused by its own lease, a decision capcat-proto's client makes on the \
             lease rows (which the engine returned as the model predicted), not a table state"
                .to_owned()
        } else {
            "the real tables show no violation, and no prediction fell in an in-flight window"
                .to_owned()
        };
        Ok(Some((property, Reproduction::NotObserved(why))))
    }

    /// Inventory rows whose pack no paired manifest and commit row admit,
    /// judged by the membership predicate's own meaning
    /// ([`meaning::members`]), as the model judges them.
    pub(super) fn unpublished_inventory(&self) -> Vec<String> {
        let version = |s: &String| s.parse::<u64>().ok();
        let id = |s: &String| s.parse::<Uuid>().ok();
        let watermark: Vec<(u64, Uuid)> = self.real["index_watermark"]
            .iter()
            .filter_map(|w| Some((version(w.first()?)?, id(w.get(1)?)?)))
            .collect();
        let manifest: Vec<(u64, Uuid, capcat_proto::PackRef)> = self.real["snapshot_manifest"]
            .iter()
            .filter_map(|m| {
                Some((
                    version(m.first()?)?,
                    id(m.get(1)?)?,
                    (m.get(2)?.clone(), id(m.get(3)?)?),
                ))
            })
            .collect();
        let published = meaning::members(&manifest, &watermark, Reach::Published);
        self.real["pack_inventory_raw"]
            .iter()
            .filter(|inv| {
                let pack = inv.first().cloned().zip(inv.get(1).and_then(id));
                !pack.is_some_and(|p| published.contains(&p))
            })
            .map(|inv| format!("inventory row {inv:?} has no published manifest row"))
            .collect()
    }
}
