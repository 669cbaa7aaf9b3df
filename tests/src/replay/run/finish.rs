//! The end of a trace: the model's tables against the engine's.

use super::*;

impl Replay<'_> {
    /// The model's final tables against the engine's, with the rows of
    /// statements the model never landed set aside.
    pub(super) fn finish(&mut self) -> Result<(), ReplayError> {
        let never: Vec<&Flight> = self
            .flights
            .iter()
            .filter(|f| f.executed && !f.landed.is_empty())
            .collect();
        let mut aside: BTreeMap<String, RowSet> = BTreeMap::new();
        for f in never {
            if let Some(t) = &f.target {
                aside
                    .entry(t.clone())
                    .or_default()
                    .extend(f.landed.iter().cloned());
            }
        }
        // Still in flight in the model at the end (killed ones were counted
        // when they were killed).
        let pending = self
            .flights
            .iter()
            .filter(|f| f.executed && !f.landed.is_empty() && !f.killed)
            .count();
        if pending > 0 {
            *self
                .untested
                .entry(Untested::NeverLandedInModel)
                .or_default() += pending;
        }
        let last = TraceStep {
            index: self.trace.steps.len() + 1,
            action: "final tables".to_owned(),
            verb: "Final".to_owned(),
            actor: "harness".to_owned(),
            statement: None,
            predicted: Json::Null,
            gained: BTreeMap::new(),
            folded: Vec::new(),
        };
        for spec in &TABLES {
            self.refresh(&last, spec.model)?;
            let set_aside = aside.get(spec.model).cloned().unwrap_or_default();
            let actual: RowSet = self.real[spec.model]
                .iter()
                .filter(|r| !set_aside.contains(*r))
                .map(|r| self.to_model(spec, r))
                .collect();
            // The model's final tables as exported, or (in traces exported
            // before they were) the union of every step's gains.
            let expected: RowSet = match &self.trace.final_tables {
                Some(tables) => tables
                    .get(spec.model)
                    .into_iter()
                    .flatten()
                    .map(|r| model_atoms(r))
                    .collect(),
                None => self.model[spec.model].clone(),
            };
            // A merge only removes rows: every row the engine holds must be
            // one the model holds before either side is collapsed, or a
            // wrong row with a lower version would hide under the merge.
            let sql = || {
                format!(
                    "SELECT {} FROM {}",
                    spec.columns.join(", "),
                    self.db.real_name(spec.model)
                )
            };
            if spec.replacing.is_some() && !actual.is_subset(&expected) {
                let extra: RowSet = actual.difference(&expected).cloned().collect();
                return Err(self.disagree(
                    &last,
                    &sql(),
                    format!("rows among {expected:?}"),
                    format!("rows the model never held: {extra:?}"),
                ));
            }
            let (actual, expected) = match spec.replacing {
                Some((key, version)) => (
                    collapse(&actual, key, version),
                    collapse(&expected, key, version),
                ),
                None => (actual, expected),
            };
            if actual != expected {
                return Err(self.disagree(
                    &last,
                    &sql(),
                    format!("{expected:?}"),
                    format!("{actual:?}"),
                ));
            }
            self.compared += 1;
        }
        if let Some(pinned) = &self.pinned {
            let (now, rows) = pinned
                .read_again(&self.db)
                .map_err(|(sql, e)| self.engine_error(&last, &sql, e))?;
            if now != pinned.snapshot {
                self.observed.snapshot_grew.push(format!(
                    "at the end: W={} pinned {:?}, now {now:?}",
                    pinned.version, pinned.snapshot
                ));
            }
            let pinned = pinned.clone();
            self.observe_rows("at the end", &pinned, &rows);
        }
        Ok(())
    }
}

/// Rows of a ReplacingMergeTree as a merge leaves them: the highest version
/// per key (a merge may or may not have happened on the engine).
pub(super) fn collapse(rows: &RowSet, key: &[usize], version: usize) -> RowSet {
    let mut best: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for r in rows {
        let k: Vec<String> = key.iter().filter_map(|i| r.get(*i).cloned()).collect();
        let v = |row: &Vec<String>| {
            row.get(version)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        match best.get(&k) {
            Some(b) if v(b) >= v(r) => {}
            _ => {
                best.insert(k, r.clone());
            }
        }
    }
    best.into_values().collect()
}
