//! The step loop: one trace against one fresh database.

mod compare;
mod finish;
mod flight;
mod harness_rows;
mod reader_steps;
mod verdict;

pub use verdict::CHECKED_PROPERTIES;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use capcat_chdb::Engine;
use capcat_model_check::publication::config::TICK_NS;
use capcat_model_check::publication::model::{PREFIX, foreign_pack};
use capcat_proto::descriptor::Locator;
use capcat_proto::fragments::lease_fence;
use capcat_proto::{CaptureDescriptor, Tables};
use serde_json::Value as Json;
use uuid::Uuid;

use super::atoms::model_atoms;
use super::clock::{ModelClock, TICK_GUARD, near_expiry, wall_ns};
use super::db::{TABLES, TableSpec, TraceDb, spec};
use super::reader::{PinnedRead, Resolved};
use super::report::{Disagreement, ReplayError, Reproduction, TraceReport, Untested};
use super::trace::{Trace, TraceStatement, TraceStep};

/// Test-only changes to what is replayed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Cut capcat-proto's lease fence out of the SQL of every replayed
    /// `publish.insert_*` statement (the mutation check): the replay must
    /// then disagree with a model that applied the fence.
    pub strip_fence: bool,
}

/// Rows of one table, as atoms.
type RowSet = BTreeSet<Vec<String>>;

/// A conditional INSERT between its `Issue…` and its `LandRows`.
#[derive(Debug)]
struct Flight {
    publisher: String,
    key: String,
    /// The model table it writes.
    target: Option<String>,
    /// Run on the engine (at its first `EvaluateGuard`).
    executed: bool,
    /// What the engine landed, real atoms.
    landed: RowSet,
    /// The model split its evaluation into two reads.
    split: bool,
    /// Evaluated while a table it reads was in an in-flight window.
    in_window: bool,
    /// Killed at its cap in the model after the engine ran it.
    killed: bool,
    /// Sent by its client as a conditional INSERT (`Issue…`). A crashed
    /// publisher's orphan is an unconditional INSERT that first shows at its
    /// `EvaluateGuard`: the model judges no lease for it.
    conditional: bool,
}

/// What the engine showed of the properties, as the replay went.
#[derive(Debug, Default)]
struct Observed {
    /// Guarded writes that landed though their lease was not the live head.
    fenced_out_landed: Vec<String>,
    /// Release tombstones that landed from a non-holder.
    release_by_non_holder: Vec<String>,
    /// (version, publish id, step) of every inventory write (a pass that
    /// reported `Won`).
    inventory_writes: Vec<(String, String, usize)>,
    /// A re-read of a pinned snapshot differed from the pin.
    snapshot_grew: Vec<String>,
    /// What a pinned read returned changed, or resolved a row above W.
    rows_changed: Vec<String>,
}

/// One trace being replayed.
struct Replay<'a> {
    trace: &'a Trace,
    options: ReplayOptions,
    db: TraceDb,
    clock: ModelClock,
    /// The model's tables so far (union of what every step gained), atoms
    /// with time values in model nanoseconds.
    model: BTreeMap<&'static str, RowSet>,
    /// The engine's tables as last read, raw atoms.
    real: BTreeMap<&'static str, RowSet>,
    flights: Vec<Flight>,
    pinned: Option<PinnedRead>,
    observed: Observed,
    compared: usize,
    untested: BTreeMap<Untested, usize>,
}

fn tick_ns_of(trace: &Trace) -> Result<u64, ReplayError> {
    let ttl_ns = trace
        .steps
        .iter()
        .filter_map(|s| s.statement.as_ref()?.param("ttl_ns")?.parse::<u64>().ok())
        .next();
    let tick = match ttl_ns {
        Some(ttl) if trace.ttl_ticks > 0 => ttl / trace.ttl_ticks,
        _ => TICK_NS,
    };
    if tick != TICK_NS {
        return Err(ReplayError::Malformed {
            file: trace.name.clone(),
            what: format!(
                "ttl_ns / ttl_ticks = {tick} ns per tick, but the model's tick is {TICK_NS} ns"
            ),
        });
    }
    Ok(tick)
}

/// Replays `trace` on a fresh database of `engine` and reports what it
/// compared; the first disagreement is an error.
pub fn replay_trace(
    engine: &Engine,
    trace: &Trace,
    options: ReplayOptions,
) -> Result<TraceReport, ReplayError> {
    let started = Instant::now();
    let tick_ns = tick_ns_of(trace)?;
    let tables = Tables::new(PREFIX).map_err(|e| ReplayError::Malformed {
        file: trace.name.clone(),
        what: e.to_string(),
    })?;
    let db = TraceDb::create(engine, tables).map_err(|message| ReplayError::Engine {
        trace: trace.name.clone(),
        step: 0,
        action: "create the trace's database".to_owned(),
        sql: String::new(),
        message,
    })?;
    let mut replay = Replay {
        trace,
        options,
        db,
        clock: ModelClock::start(tick_ns, trace.ttl_ticks),
        model: TABLES.iter().map(|t| (t.model, RowSet::new())).collect(),
        real: TABLES.iter().map(|t| (t.model, RowSet::new())).collect(),
        flights: Vec::new(),
        pinned: None,
        observed: Observed::default(),
        compared: 0,
        untested: BTreeMap::new(),
    };
    let result = replay.run();
    replay.db.drop_database();
    let (reproduction, checks) = result?;
    Ok(TraceReport {
        name: trace.name.clone(),
        steps: trace.steps.len(),
        compared: replay.compared,
        untested: replay.untested,
        reproduction,
        checks,
        max_drift: replay.clock.max_drift(),
        elapsed: started.elapsed(),
        retries: 0,
    })
}

/// A step's outcome, unless the replay had got so far into a tick that the
/// time mapping no longer holds (`drift`): then the drift (which is
/// replayed again), also in place of a disagreement, which may be the
/// drift's doing. Any other error stands.
fn drift_over(
    outcome: Result<(), ReplayError>,
    drift: Option<ReplayError>,
) -> Result<(), ReplayError> {
    match (outcome, drift) {
        (Ok(()) | Err(ReplayError::Disagreement(_)), Some(drift)) => Err(drift),
        (outcome, _) => outcome,
    }
}

/// Whether `sql` reads or writes the real table `name` (as a whole word).
fn mentions(sql: &str, name: &str) -> bool {
    sql.match_indices(name).any(|(i, _)| {
        let after = sql[i + name.len()..].chars().next();
        let before = sql[..i].chars().next_back();
        !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

impl Replay<'_> {
    #[allow(clippy::type_complexity)]
    fn run(
        &mut self,
    ) -> Result<
        (
            Option<(String, Reproduction)>,
            BTreeMap<String, Vec<String>>,
        ),
        ReplayError,
    > {
        match &self.trace.initial_tables {
            // The model's initial rows (the foreign writer's descriptor),
            // written by the harness: no step gains them.
            Some(tables) => {
                for (table, rows) in tables {
                    let atoms: Vec<Vec<String>> = rows.iter().map(|r| model_atoms(r)).collect();
                    if atoms.is_empty() {
                        continue;
                    }
                    self.write_rows(None, table, &atoms)?;
                    if let Some(spec) = spec(table) {
                        self.model.entry(spec.model).or_default().extend(atoms);
                    }
                }
            }
            // Traces exported before the initial tables were: the model's
            // only initial row is the foreign writer's descriptor.
            None if self.trace.foreign_writes > 0 => {
                let (store, pack) = foreign_pack();
                let row = vec![store, pack.hyphenated().to_string(), "0".to_owned()];
                self.write_rows(None, "capture_raw", std::slice::from_ref(&row))?;
                self.model.entry("capture_raw").or_default().insert(row);
            }
            None => {}
        }
        for step in &self.trace.steps {
            let outcome = self.step(step);
            self.drift_check(step.index, outcome)?;
        }
        let outcome = self.finish();
        self.drift_check(self.trace.steps.len() + 1, outcome)?;
        Ok((self.reproduction()?, self.every_check()))
    }

    /// A step's outcome, checked against how far into its tick the replay
    /// had got ([`drift_over`]).
    fn drift_check(
        &mut self,
        step: usize,
        outcome: Result<(), ReplayError>,
    ) -> Result<(), ReplayError> {
        self.clock.note();
        let tick = Duration::from_nanos(self.clock.tick_ns());
        let drift = (self.clock.max_drift() + TICK_GUARD >= tick).then(|| ReplayError::Drift {
            trace: self.trace.name.clone(),
            step,
            drift_ms: self.clock.max_drift().as_millis(),
            tick_ms: tick.as_millis(),
        });
        drift_over(outcome, drift)
    }

    fn untested(&mut self, why: Untested) {
        *self.untested.entry(why).or_default() += 1;
    }

    fn disagree(
        &self,
        step: &TraceStep,
        sql: &str,
        predicted: String,
        actual: String,
    ) -> ReplayError {
        ReplayError::Disagreement(Box::new(Disagreement {
            trace: self.trace.name.clone(),
            step: step.index,
            action: step.action.clone(),
            sql: sql.to_owned(),
            predicted,
            actual,
        }))
    }

    fn engine_error(&self, step: &TraceStep, sql: &str, message: String) -> ReplayError {
        ReplayError::Engine {
            trace: self.trace.name.clone(),
            step: step.index,
            action: step.action.clone(),
            sql: sql.to_owned(),
            message,
        }
    }

    /// The SQL the engine runs for a trace statement: the trace's text,
    /// unless the mutation check cuts the fence out.
    fn sql_of(&self, stmt: &TraceStatement) -> String {
        if self.options.strip_fence && stmt.name.starts_with("publish.insert_") {
            let fence = lease_fence(self.db.tables());
            stmt.sql
                .replace(&format!(" AND {fence}"), "")
                .replace(&fence, "1 = 1")
        } else {
            stmt.sql.clone()
        }
    }

    /// Real tables that hold rows of a conditional INSERT the engine ran
    /// whole but the model has not landed (yet, or ever).
    fn diverged(&self) -> BTreeSet<String> {
        self.flights
            .iter()
            .filter(|f| f.executed && !f.landed.is_empty())
            .filter_map(|f| f.target.as_ref().map(|t| self.db.real_name(t)))
            .collect()
    }

    fn in_window(&self, sql: &str) -> bool {
        self.diverged().iter().any(|t| mentions(sql, t))
    }

    /// Real expiries of every lease row (raw ns).
    fn expiries(&self) -> Vec<u64> {
        let Some(t) = spec("publisher_lease").and_then(|s| s.time) else {
            return Vec::new();
        };
        self.real
            .get("publisher_lease")
            .into_iter()
            .flatten()
            .filter_map(|r| r.get(t)?.parse().ok())
            .collect()
    }

    /// Real atoms with time values mapped to model nanoseconds.
    fn to_model(&self, spec: &TableSpec, row: &[String]) -> Vec<String> {
        let mut out = row.to_vec();
        if let Some(t) = spec.time
            && let Some(v) = out.get(t).and_then(|v| v.parse::<u64>().ok())
        {
            out[t] = self
                .clock
                .to_model_ns(v)
                .map_or_else(|| format!("before-origin:{v}"), |m| m.to_string());
        }
        out
    }

    /// Re-reads model table `model` from the engine; returns the rows it
    /// gained since the last read (raw atoms).
    fn refresh(&mut self, step: &TraceStep, model: &str) -> Result<RowSet, ReplayError> {
        let Some(spec) = spec(model) else {
            return Ok(RowSet::new());
        };
        let rows = self.db.read_table(spec).map_err(|e| {
            self.engine_error(
                step,
                &format!("SELECT … FROM {}", self.db.real_name(model)),
                e,
            )
        })?;
        let before = self
            .real
            .insert(spec.model, rows.clone())
            .unwrap_or_default();
        Ok(rows.difference(&before).cloned().collect())
    }

    /// The model rows a step gained in `table`, as atoms.
    fn gained(step: &TraceStep, table: &str) -> RowSet {
        step.gained
            .get(table)
            .into_iter()
            .flatten()
            .map(|r| model_atoms(r))
            .collect()
    }

    fn step(&mut self, step: &TraceStep) -> Result<(), ReplayError> {
        // The tables whose gains the step's statements account for ("*":
        // every table, for rows the harness writes as the model gained them).
        let explained: BTreeSet<String> = match step.verb.as_str() {
            "Tick" => {
                let Some(to) = step.predicted["now"].as_u64() else {
                    return Err(ReplayError::Malformed {
                        file: self.trace.name.clone(),
                        what: format!(
                            "step {} ({}): a tick predicts no `now`: {}",
                            step.index, step.action, step.predicted
                        ),
                    });
                };
                self.clock.tick(to);
                BTreeSet::new()
            }
            "EvaluateGuard" => {
                self.evaluate(step)?;
                BTreeSet::new()
            }
            "LandRows" => self.land(step)?.into_iter().collect(),
            "KillAtCap" => {
                self.kill(step);
                BTreeSet::new()
            }
            "PinSnapshot" => {
                self.pin(step)?;
                BTreeSet::new()
            }
            "ReReadSnapshot" => {
                self.reread(step)?;
                BTreeSet::new()
            }
            "CrashRestart" => BTreeSet::new(),
            "ForeignInsert" => {
                // An out-of-protocol writer has no statement of
                // capcat-proto's: the harness writes its rows as the model
                // gained them.
                for (table, rows) in step.gained.clone() {
                    let atoms: Vec<Vec<String>> = rows.iter().map(|r| model_atoms(r)).collect();
                    self.write_rows(Some(step), &table, &atoms)?;
                }
                BTreeSet::from(["*".to_owned()])
            }
            _ => match &step.statement {
                Some(stmt) => {
                    let mut tables: BTreeSet<String> =
                        self.client(step, stmt)?.into_iter().collect();
                    for (folded, predicted) in &step.folded {
                        tables.extend(self.run_whole(step, folded, predicted)?);
                    }
                    tables
                }
                None => {
                    return Err(ReplayError::Malformed {
                        file: self.trace.name.clone(),
                        what: format!("step {} ({}) names no statement", step.index, step.action),
                    });
                }
            },
        };
        // Rows the model gained outside the step's statements. In traces
        // exported before `folded` and `final_tables` were, those are the
        // index pass's descriptor writes, which the model runs together with
        // the step before them: the harness writes them, counted untested.
        // In a trace that has them, such rows are unexplained: the exporter
        // dropped a statement, and the harness must not stand in for it.
        if !explained.contains("*") {
            for (table, rows) in &step.gained {
                if explained.contains(table) {
                    continue;
                }
                if self.trace.final_tables.is_some() {
                    return Err(ReplayError::Malformed {
                        file: self.trace.name.clone(),
                        what: format!(
                            "step {} ({}): the model gained {} row(s) in {table} that none of \
                             the step's statements (its own and its folded ones) wrote",
                            step.index,
                            step.action,
                            rows.len()
                        ),
                    });
                }
                let atoms: Vec<Vec<String>> = rows.iter().map(|r| model_atoms(r)).collect();
                self.write_rows(Some(step), table, &atoms)?;
                self.untested(Untested::FoldedStatement);
            }
        }
        for (table, rows) in &step.gained {
            if let Some(spec) = spec(table) {
                let set = self.model.entry(spec.model).or_default();
                set.extend(rows.iter().map(|r| model_atoms(r)));
            }
        }
        Ok(())
    }

    /// A client step: a read, an unconditional INSERT, or a conditional
    /// INSERT sent (which the engine runs at its `EvaluateGuard`).
    fn client(
        &mut self,
        step: &TraceStep,
        stmt: &TraceStatement,
    ) -> Result<Option<String>, ReplayError> {
        if step.predicted.get("sent").is_some() {
            let target = stmt
                .insert_target()
                .and_then(|t| self.db.model_name(t))
                .map(str::to_owned);
            self.flights.push(Flight {
                publisher: step.publisher().unwrap_or_default().to_owned(),
                key: stmt.key.clone(),
                target,
                executed: false,
                landed: RowSet::new(),
                split: false,
                in_window: false,
                killed: false,
                conditional: true,
            });
            return Ok(None);
        }
        self.run_whole(step, stmt, &step.predicted)
    }
}

impl Replay<'_> {
    /// A statement run whole and compared with `predicted`: a client step's
    /// own statement when it is not a conditional INSERT, or one the model
    /// ran within the step besides it (the index pass's read of the replay
    /// guard, its descriptor writes). Returns the table it wrote.
    fn run_whole(
        &mut self,
        step: &TraceStep,
        stmt: &TraceStatement,
        predicted: &Json,
    ) -> Result<Option<String>, ReplayError> {
        let sql = self.sql_of(stmt);
        let in_window = self.in_window(&sql);
        let on_engine = self.on_engine_clock(step, stmt)?;
        let sent = wall_ns();
        let rows = self
            .db
            .run_trace(&on_engine, &sql)
            .map_err(|e| self.engine_error(step, &sql, e))?;
        let returned = wall_ns();
        if let Some(columns) = &stmt.columns {
            let boundary = sql.contains("now64(") && near_expiry(self.expiries(), sent, returned);
            self.compare_read(step, predicted, &sql, columns, rows, in_window, boundary)?;
            return Ok(None);
        }
        let Some(table) = stmt
            .insert_target()
            .and_then(|t| self.db.model_name(t))
            .map(str::to_owned)
        else {
            return Ok(None);
        };
        let landed = self.refresh(step, &table)?;
        if table == "pack_inventory_raw"
            && let (Some(v), Some(id)) = (stmt.param("index_version"), stmt.param("publish_id"))
        {
            self.observed
                .inventory_writes
                .push((v.to_owned(), id.to_owned(), step.index));
        }
        if predicted.get("ran").is_some() {
            self.compare_landed(step, &sql, &table, &landed)?;
        }
        Ok(Some(table))
    }
}

#[cfg(test)]
mod tests {
    use super::finish::collapse;
    use super::*;

    #[test]
    fn a_disagreement_past_the_drift_limit_is_drift() {
        let drift = || ReplayError::Drift {
            trace: "t".to_owned(),
            step: 3,
            drift_ms: 900,
            tick_ms: 1000,
        };
        let disagreement = || {
            Err(ReplayError::Disagreement(Box::new(Disagreement {
                trace: "t".to_owned(),
                step: 3,
                action: "a".to_owned(),
                sql: "s".to_owned(),
                predicted: "p".to_owned(),
                actual: "q".to_owned(),
            })))
        };
        let engine = || {
            Err(ReplayError::Engine {
                trace: "t".to_owned(),
                step: 3,
                action: "a".to_owned(),
                sql: "s".to_owned(),
                message: "m".to_owned(),
            })
        };
        assert!(matches!(
            drift_over(disagreement(), Some(drift())),
            Err(ReplayError::Drift { .. })
        ));
        assert!(matches!(
            drift_over(Ok(()), Some(drift())),
            Err(ReplayError::Drift { .. })
        ));
        assert!(matches!(
            drift_over(engine(), Some(drift())),
            Err(ReplayError::Engine { .. })
        ));
        assert!(matches!(
            drift_over(disagreement(), None),
            Err(ReplayError::Disagreement(_))
        ));
        assert!(drift_over(Ok(()), None).is_ok());
    }

    #[test]
    fn a_table_is_mentioned_only_as_a_whole_word() {
        let sql = "SELECT max(index_version) FROM m_index_watermark WHERE x";
        assert!(mentions(sql, "m_index_watermark"));
        assert!(!mentions(sql, "m_index"));
        assert!(!mentions(
            "SELECT 1 FROM m_index_watermark2",
            "m_index_watermark"
        ));
    }

    #[test]
    fn a_replacing_table_keeps_the_highest_version_per_key() {
        let row = |p: &str, v: &str| vec!["s".to_owned(), p.to_owned(), v.to_owned()];
        let rows: RowSet = [row("a", "1"), row("a", "2"), row("b", "1")].into();
        assert_eq!(
            collapse(&rows, &[0, 1], 2),
            [row("a", "2"), row("b", "1")].into()
        );
    }
}
