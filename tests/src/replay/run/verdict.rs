//! For a counterexample: whether the engine shows the property failing.

use super::*;

impl Replay<'_> {
    /// For a counterexample: whether the engine shows its property failing.
    pub(super) fn reproduction(&self) -> Option<(String, Reproduction)> {
        let property = self.trace.violates.clone()?;
        let o = &self.observed;
        let found: Vec<String> = match property.as_str() {
            "FencedOutWritesNothing" => o.fenced_out_landed.clone(),
            "PinnedSnapshotNeverGrows" => o.snapshot_grew.clone(),
            "OneLiveLease" => o
                .release_by_non_holder
                .iter()
                .cloned()
                .chain(
                    o.own_live_head
                        .iter()
                        .filter(|(p, id, at)| {
                            !o.lease_writes
                                .iter()
                                .any(|(q, l, w)| q == p && l == id && w > at)
                        })
                        .map(|(p, id, at)| {
                            format!(
                                "step {at}: {p} read its own live lease {id} as the head and never \
                                 presented it again (capcat-proto's acquire refuses on these rows)"
                            )
                        }),
                )
                .collect(),
            "ReportedMeansVisible" => o
                .inventory_writes
                .iter()
                .filter(|(v, id, _)| {
                    !self.real["index_watermark"].contains(&vec![v.clone(), id.clone()])
                })
                .map(|(v, id, at)| {
                    format!(
                        "step {at}: a pass reported Won at v{v} (it wrote the inventory) but no \
                         watermark row ({v}, {id}) stands"
                    )
                })
                .collect(),
            "InventoryOnlyAfterPublish" => self.unpublished_inventory(),
            _ => Vec::new(),
        };
        let verdict = if found.is_empty() {
            let windows = self
                .untested
                .get(&Untested::InFlightWindow)
                .copied()
                .unwrap_or(0)
                + self
                    .untested
                    .get(&Untested::SplitEvaluation)
                    .copied()
                    .unwrap_or(0)
                + self
                    .untested
                    .get(&Untested::NeverLandedInModel)
                    .copied()
                    .unwrap_or(0);
            Reproduction::NotObserved(format!(
                "the violation needs a statement's guard evaluated apart from its rows landing \
                 ({windows} predictions fell in such a window), which the engine cannot be made to \
                 do at statement granularity"
            ))
        } else {
            Reproduction::Observed(found.join("; "))
        };
        Some((property, verdict))
    }

    /// Inventory rows whose pack no paired manifest and watermark row admit.
    pub(super) fn unpublished_inventory(&self) -> Vec<String> {
        let watermark = &self.real["index_watermark"];
        let manifest = &self.real["snapshot_manifest"];
        self.real["pack_inventory_raw"]
            .iter()
            .filter(|inv| {
                !manifest.iter().any(|m| {
                    m.get(2) == inv.first()
                        && m.get(3) == inv.get(1)
                        && watermark.contains(&vec![m[0].clone(), m[1].clone()])
                })
            })
            .map(|inv| format!("inventory row {inv:?} has no published manifest row"))
            .collect()
    }
}
