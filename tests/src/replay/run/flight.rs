//! Conditional INSERTs: run whole at their first `EvaluateGuard`, their
//! rows compared at `LandRows`, and what a kill at the cap leaves behind.

use capcat_proto::fragments::meaning::{self, LeaseRow};
use capcat_proto::fragments::{
    LEASE_EXPIRES_PARAM, LEASE_ID_PARAM, LEASE_TERM_PARAM, SERVER_NOW_NS,
};

use super::*;

impl Replay<'_> {
    pub(super) fn flight_index(&self, step: &TraceStep) -> Option<usize> {
        let stmt = step.statement.as_ref()?;
        let p = step.publisher().unwrap_or_default();
        self.flights
            .iter()
            .position(|f| f.publisher == p && f.key == stmt.key && !f.killed)
    }

    /// Whether the statement's lease is the live head on the engine right
    /// now: `None` when the head's expiry is within the margin.
    ///
    /// The harness reads every lease row and one server clock reading in one
    /// statement, and judges them with [`meaning::is_live_head`] (the
    /// ground truth the model's `FencedOutWritesNothing` judges by), so the
    /// replay and the model cannot disagree about which row is the head.
    pub(super) fn lease_is_live_head(
        &self,
        step: &TraceStep,
        lease_id: &str,
    ) -> Result<Option<bool>, ReplayError> {
        let lease = self.db.real_name("publisher_lease");
        let sql =
            format!("SELECT term, lease_id, holder, expires_at_ns, {SERVER_NOW_NS} FROM {lease}");
        let rows = self
            .db
            .run_sql(&sql)
            .map_err(|e| self.engine_error(step, &sql, e))?;
        let malformed = |row: &[String]| ReplayError::Malformed {
            file: self.trace.name.clone(),
            what: format!("step {}: a lease row {row:?}", step.index),
        };
        let mut now = 0;
        let mut log = Vec::with_capacity(rows.len());
        for row in &rows {
            let [term, id, holder, expires, at] = row.as_slice() else {
                return Err(malformed(row));
            };
            let parsed = (term.parse(), id.parse(), expires.parse(), at.parse());
            let (Ok(term), Ok(lease_id), Ok(expires_at_ns), Ok(at)) = parsed else {
                return Err(malformed(row));
            };
            now = at;
            log.push(LeaseRow {
                term,
                lease_id,
                expires_at_ns,
                holder: holder.clone(),
            });
        }
        let Ok(id) = lease_id.parse::<uuid::Uuid>() else {
            return Err(malformed(&[lease_id.to_owned()]));
        };
        let Some(head) = meaning::lease_head(&log) else {
            return Ok(Some(false));
        };
        if head.lease_id != id {
            return Ok(Some(false));
        }
        if near_expiry([head.expires_at_ns], now, now) {
            return Ok(None);
        }
        Ok(Some(meaning::is_live_head(&log, id, now)))
    }

    /// `stmt` with the expiry its fence names translated to the engine's
    /// clock. The model stamps expiries in ticks from its origin, the
    /// engine in real nanoseconds, so the row the model's statement names
    /// (`lease_term`, `lease_id`, `lease_expires_ns`) is found among the
    /// engine's rows of that term and lease whose expiry maps to the same
    /// tick, and the parameter carries its real expiry. Where no such row
    /// stands the model's value stays, which names no row on the engine
    /// either: the fence refuses on both.
    pub(super) fn on_engine_clock(
        &self,
        step: &TraceStep,
        stmt: &TraceStatement,
    ) -> Result<TraceStatement, ReplayError> {
        let (Some(term), Some(id), Some(model_expiry)) = (
            stmt.param(LEASE_TERM_PARAM),
            stmt.param(LEASE_ID_PARAM),
            stmt.param(LEASE_EXPIRES_PARAM)
                .and_then(|v| v.parse::<u64>().ok()),
        ) else {
            return Ok(stmt.clone());
        };
        let lease = self.db.real_name("publisher_lease");
        let sql = format!("SELECT term, lease_id, expires_at_ns FROM {lease}");
        let rows = self
            .db
            .run_sql(&sql)
            .map_err(|e| self.engine_error(step, &sql, e))?;
        let real = rows.iter().find_map(|row| match row.as_slice() {
            [t, l, e] if t == term && l == id => e
                .parse::<u64>()
                .ok()
                .filter(|real| self.clock.to_model_ns(*real) == Some(model_expiry)),
            _ => None,
        });
        let mut out = stmt.clone();
        if let (Some(real), Some(param)) = (real, out.params.get_mut(LEASE_EXPIRES_PARAM)) {
            param.1 = real.to_string();
        }
        Ok(out)
    }

    pub(super) fn evaluate(&mut self, step: &TraceStep) -> Result<(), ReplayError> {
        let Some(stmt) = step.statement.clone() else {
            return Err(ReplayError::Malformed {
                file: self.trace.name.clone(),
                what: format!("step {} evaluates no statement", step.index),
            });
        };
        let k = match self.flight_index(step) {
            Some(k) => k,
            None => {
                // A crashed publisher's orphan: in flight without a client.
                self.flights.push(Flight {
                    publisher: step.publisher().unwrap_or_default().to_owned(),
                    key: stmt.key.clone(),
                    target: stmt
                        .insert_target()
                        .and_then(|t| self.db.model_name(t))
                        .map(str::to_owned),
                    executed: false,
                    landed: RowSet::new(),
                    split: false,
                    in_window: false,
                    killed: false,
                    conditional: false,
                });
                self.flights.len() - 1
            }
        };
        let evaluated = step.predicted["evaluated"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if self.flights[k].executed {
            // The second read of a two-read guard: the engine ran the
            // statement whole at the first.
            self.untested(Untested::SplitEvaluation);
            return Ok(());
        }
        if evaluated.starts_with("FirstRead") {
            self.flights[k].split = true;
            self.untested(Untested::SplitEvaluation);
        }
        let sql = self.sql_of(&stmt);
        let in_window = self.in_window(&sql);
        // The lease a guard is judged by: a conditional INSERT's (an
        // orphaned unconditional one is judged by none, as in the model).
        let judged = if self.flights[k].conditional {
            stmt.param("lease_id").map(str::to_owned)
        } else {
            None
        };
        let live_head = match &judged {
            Some(id) => self.lease_is_live_head(step, id)?,
            None => Some(true),
        };
        let on_engine = self.on_engine_clock(step, &stmt)?;
        let sent = wall_ns();
        self.db
            .run_trace(&on_engine, &sql)
            .map_err(|e| self.engine_error(step, &sql, e))?;
        let returned = wall_ns();
        let boundary = self.flights[k].conditional
            && sql.contains("now64(")
            && near_expiry(self.expiries(), sent, returned);
        let landed = match &self.flights[k].target {
            Some(t) => {
                let t = t.clone();
                self.refresh(step, &t)?
            }
            None => RowSet::new(),
        };
        let flight = &mut self.flights[k];
        flight.executed = true;
        flight.in_window = in_window;
        flight.landed = landed.clone();
        let target = flight.target.clone().unwrap_or_default();
        let publisher = flight.publisher.clone();
        // An observation for the reproduction check only where the lease
        // judgement is the model's: in an in-flight window the engine's
        // lease table holds rows the model does not yet, and within the
        // margin of an expiry liveness is not compared either.
        let judgement_holds = !in_window && !boundary && live_head.is_some();
        if judgement_holds && live_head == Some(false) && !landed.is_empty() && judged.is_some() {
            let what = format!(
                "step {}: {}'s {} landed {} row(s) in {target} though its lease was not the live head",
                step.index,
                publisher,
                stmt.name,
                landed.len()
            );
            if target == "publisher_lease" {
                self.observed.release_by_non_holder.push(what.clone());
            }
            self.observed.fenced_out_landed.push(what);
        }
        if self.flights[k].split {
            return Ok(());
        }
        if in_window {
            self.untested(Untested::InFlightWindow);
            return Ok(());
        }
        if boundary || live_head.is_none() {
            self.untested(Untested::ExpiryBoundary);
            return Ok(());
        }
        let predicted_nothing = evaluated.contains("landing: Nothing");
        let predicted_fenced_out = evaluated.contains("fenced_out: true");
        let real_fenced_out = judged.is_some() && live_head == Some(false);
        if predicted_nothing != landed.is_empty() || predicted_fenced_out != real_fenced_out {
            return Err(self.disagree(
                step,
                &sql,
                evaluated,
                format!(
                    "landed {} row(s) {landed:?}; lease {} the live head at evaluation",
                    landed.len(),
                    if real_fenced_out { "was NOT" } else { "was" }
                ),
            ));
        }
        self.compared += 1;
        Ok(())
    }

    pub(super) fn land(&mut self, step: &TraceStep) -> Result<Option<String>, ReplayError> {
        let Some(k) = self.flight_index(step) else {
            return Err(ReplayError::Malformed {
                file: self.trace.name.clone(),
                what: format!(
                    "step {} lands a statement that is not in flight",
                    step.index
                ),
            });
        };
        let flight = self.flights.remove(k);
        let Some(table) = flight.target.clone() else {
            return Ok(None);
        };
        if flight.split {
            self.untested(Untested::SplitEvaluation);
        } else if flight.in_window {
            self.untested(Untested::InFlightWindow);
        } else {
            let sql = step
                .statement
                .as_ref()
                .map(|s| self.sql_of(s))
                .unwrap_or_default();
            self.compare_landed(step, &sql, &table, &flight.landed)?;
        }
        Ok(Some(table))
    }

    pub(super) fn kill(&mut self, step: &TraceStep) {
        let Some(k) = self.flight_index(step) else {
            return;
        };
        if self.flights[k].executed && !self.flights[k].landed.is_empty() {
            // The engine ran it whole at its evaluation; the model kills it
            // before its rows land. Its rows stay on the engine only.
            self.flights[k].killed = true;
            self.untested(Untested::NeverLandedInModel);
        } else {
            // Evaluated to nothing on the engine (compared at its
            // evaluation), and nothing lands in the model either.
            self.flights.remove(k);
        }
    }
}
