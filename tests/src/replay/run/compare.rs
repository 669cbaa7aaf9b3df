//! Comparing what the engine returned or landed with the model's prediction.

use super::*;

impl Replay<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn compare_read(
        &mut self,
        step: &TraceStep,
        predicted: &Json,
        sql: &str,
        columns: &[String],
        rows: Vec<Vec<String>>,
        in_window: bool,
        boundary: bool,
    ) -> Result<(), ReplayError> {
        let Some(predicted) = predicted.get("rows").and_then(Json::as_array) else {
            // The model's simulation could not tell this read's result: the
            // exporter says so, and the read is counted untested. A read
            // predicted neither way is not what the exporter writes.
            if predicted.get("unknown").is_some() {
                self.untested(Untested::ModelUnknown);
                return Ok(());
            }
            return Err(ReplayError::Malformed {
                file: self.trace.name.clone(),
                what: format!(
                    "step {} ({}): a read predicted with neither rows nor unknown: {predicted}",
                    step.index, step.action
                ),
            });
        };
        if in_window {
            self.untested(Untested::InFlightWindow);
            return Ok(());
        }
        let is_live = |c: &str| c == "live" || c.ends_with("_live");
        let map_row = |row: &[String]| -> Vec<String> {
            row.iter()
                .enumerate()
                .map(|(i, v)| {
                    let name = columns.get(i).map_or("", String::as_str);
                    if boundary && is_live(name) {
                        "(untested)".to_owned()
                    } else if name.ends_with("_at_ns")
                        && let Ok(ns) = v.parse::<u64>()
                    {
                        self.clock
                            .to_model_ns(ns)
                            .map_or_else(|| format!("before-origin:{ns}"), |m| m.to_string())
                    } else {
                        v.clone()
                    }
                })
                .collect()
        };
        let predicted_rows: Vec<Vec<String>> = predicted
            .iter()
            .map(|r| {
                let atoms: Vec<String> = r
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Json::as_str)
                    .flat_map(model_atoms)
                    .collect();
                atoms
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| {
                        if boundary && columns.get(i).is_some_and(|c| is_live(c)) {
                            "(untested)".to_owned()
                        } else {
                            v
                        }
                    })
                    .collect()
            })
            .collect();
        let mut actual: Vec<Vec<String>> = rows.iter().map(|r| map_row(r)).collect();
        let mut expected = predicted_rows;
        // Row order is part of the result only where the SQL orders it.
        if !sql.contains("ORDER BY") {
            actual.sort();
            expected.sort();
        }
        if actual != expected {
            return Err(self.disagree(step, sql, format!("{expected:?}"), format!("{actual:?}")));
        }
        self.compared += 1;
        if boundary {
            self.untested(Untested::ExpiryBoundary);
        }
        Ok(())
    }

    /// Compares rows the engine landed in `table` with the rows the model
    /// gained there (sets: the model's tables are sets).
    pub(super) fn compare_landed(
        &mut self,
        step: &TraceStep,
        sql: &str,
        table: &str,
        landed: &RowSet,
    ) -> Result<(), ReplayError> {
        let Some(spec) = spec(table) else {
            return Ok(());
        };
        let actual: RowSet = landed.iter().map(|r| self.to_model(spec, r)).collect();
        let expected = Self::gained(step, table);
        let known = self.model.get(spec.model).cloned().unwrap_or_default();
        let explained = actual
            .iter()
            .all(|r| expected.contains(r) || known.contains(r));
        if !expected.is_subset(&actual) || !explained {
            return Err(self.disagree(
                step,
                sql,
                format!("{table} gains {expected:?}"),
                format!("{table} gained {actual:?}"),
            ));
        }
        self.compared += 1;
        Ok(())
    }
}
