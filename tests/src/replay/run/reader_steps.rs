//! The reader's `PinSnapshot` and `ReReadSnapshot` steps.

use super::*;

impl Replay<'_> {
    pub(super) fn pin(&mut self, step: &TraceStep) -> Result<(), ReplayError> {
        let predicted = step.predicted["reader"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let read = PinnedRead::pin(&self.db, &predicted)
            .map_err(|(sql, e)| self.engine_error(step, &sql, e))?;
        if self.in_window(&read.sql()) {
            self.untested(Untested::InFlightWindow);
        } else {
            read.compare_pin(&predicted)
                .map_err(|(p, a)| self.disagree(step, &read.sql(), p, a))?;
            self.compared += 1;
        }
        self.pinned = Some(read);
        Ok(())
    }

    pub(super) fn reread(&mut self, step: &TraceStep) -> Result<(), ReplayError> {
        let predicted = step.predicted["reader"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let Some(pinned) = self.pinned.take() else {
            return Err(ReplayError::Malformed {
                file: self.trace.name.clone(),
                what: format!("step {} re-reads before any pin", step.index),
            });
        };
        let (now, rows) = pinned
            .read_again(&self.db)
            .map_err(|(sql, e)| self.engine_error(step, &sql, e))?;
        if now != pinned.snapshot {
            self.observed.snapshot_grew.push(format!(
                "step {}: W={} pinned {:?}, re-read {now:?}",
                step.index, pinned.version, pinned.snapshot
            ));
        }
        self.observe_rows(&format!("step {}", step.index), &pinned, &rows);
        if self.in_window(&pinned.sql()) {
            self.untested(Untested::InFlightWindow);
        } else {
            PinnedRead::compare_reread(&predicted, &now)
                .map_err(|(p, a)| self.disagree(step, &pinned.sql(), p, a))?;
            self.compared += 1;
        }
        self.pinned = Some(pinned);
        Ok(())
    }
}
