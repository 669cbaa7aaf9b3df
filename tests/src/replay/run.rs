//! The step loop: one trace against one fresh database.

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
use super::clock::{MARGIN, ModelClock, near_expiry, wall_ns};
use super::db::{TABLES, TableSpec, TraceDb, spec};
use super::reader::PinnedRead;
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
}

/// What the engine showed of the properties, as the replay went.
#[derive(Debug, Default)]
struct Observed {
    /// Guarded writes that landed though their lease was not the live head.
    fenced_out_landed: Vec<String>,
    /// Release tombstones that landed from a non-holder.
    release_by_non_holder: Vec<String>,
    /// (publisher, lease id, step): a publisher read its own live lease as
    /// the head.
    own_live_head: Vec<(String, String, usize)>,
    /// (publisher, lease id, step) of every lease row a publisher wrote.
    lease_writes: Vec<(String, String, usize)>,
    /// (version, publish id, step) of every inventory write (a pass that
    /// reported `Won`).
    inventory_writes: Vec<(String, String, usize)>,
    /// A re-read of a pinned snapshot differed from the pin.
    snapshot_grew: Vec<String>,
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
        clock: ModelClock::start(tick_ns),
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
    let reproduction = result?;
    Ok(TraceReport {
        name: trace.name.clone(),
        steps: trace.steps.len(),
        compared: replay.compared,
        untested: replay.untested,
        reproduction,
        max_drift: replay.clock.max_drift(),
        elapsed: started.elapsed(),
    })
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
    fn run(&mut self) -> Result<Option<(String, Reproduction)>, ReplayError> {
        if self.trace.foreign_writes > 0 {
            // The model's initial state holds the foreign writer's
            // descriptor row (inert until a manifest and watermark row admit
            // its pack); no step gains it, so the harness writes it.
            let (store, pack) = foreign_pack();
            let row = vec![store, pack.hyphenated().to_string(), "0".to_owned()];
            self.write_rows(None, "capture_raw", std::slice::from_ref(&row))?;
            self.model.entry("capture_raw").or_default().insert(row);
        }
        let tick = Duration::from_nanos(self.clock.tick_ns());
        for step in &self.trace.steps {
            self.step(step)?;
            self.clock.note();
            if self.clock.max_drift() + 3 * MARGIN >= tick {
                return Err(ReplayError::Drift {
                    trace: self.trace.name.clone(),
                    step: step.index,
                    drift_ms: self.clock.max_drift().as_millis(),
                    tick_ms: tick.as_millis(),
                });
            }
        }
        self.finish()?;
        Ok(self.reproduction())
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
        let explained: Option<String> = match step.verb.as_str() {
            "Tick" => {
                let to = step.predicted["now"].as_u64().unwrap_or(0);
                self.clock.tick(to);
                None
            }
            "EvaluateGuard" => {
                self.evaluate(step)?;
                None
            }
            "LandRows" => self.land(step)?,
            "KillAtCap" => {
                self.kill(step);
                None
            }
            "PinWatermark" => {
                self.pin(step)?;
                None
            }
            "ReReadSnapshot" => {
                self.reread(step)?;
                None
            }
            "CrashRestart" => {
                if let Some(p) = step.publisher() {
                    // A new incarnation owns none of the old one's leases.
                    self.observed.lease_writes.retain(|(q, ..)| q != p);
                }
                None
            }
            "ForeignInsert" => {
                // An out-of-protocol writer has no statement of
                // capcat-proto's: the harness writes its rows as the model
                // gained them.
                for (table, rows) in step.gained.clone() {
                    let atoms: Vec<Vec<String>> = rows.iter().map(|r| model_atoms(r)).collect();
                    self.write_rows(Some(step), &table, &atoms)?;
                }
                Some("*".to_owned())
            }
            _ => match &step.statement {
                Some(stmt) => self.client(step, stmt)?,
                None => {
                    return Err(ReplayError::Malformed {
                        file: self.trace.name.clone(),
                        what: format!("step {} ({}) names no statement", step.index, step.action),
                    });
                }
            },
        };
        // Rows the model gained outside the step's own statement: the index
        // pass's descriptor writes, which the model runs together with the
        // step before them and the trace does not carry.
        if explained.as_deref() != Some("*") {
            for (table, rows) in &step.gained {
                if explained.as_deref() == Some(table.as_str()) {
                    continue;
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
        let target = stmt
            .insert_target()
            .and_then(|t| self.db.model_name(t))
            .map(str::to_owned);
        if step.predicted.get("sent").is_some() {
            self.flights.push(Flight {
                publisher: step.publisher().unwrap_or_default().to_owned(),
                key: stmt.key.clone(),
                target,
                executed: false,
                landed: RowSet::new(),
                split: false,
                in_window: false,
                killed: false,
            });
            return Ok(None);
        }
        let sql = self.sql_of(stmt);
        let in_window = self.in_window(&sql);
        let sent = wall_ns();
        let rows = self
            .db
            .run_trace(stmt, &sql)
            .map_err(|e| self.engine_error(step, &sql, e))?;
        let returned = wall_ns();
        if let Some(columns) = &stmt.columns {
            let boundary = sql.contains("now64(") && near_expiry(self.expiries(), sent, returned);
            self.compare_read(step, stmt, &sql, columns, rows, in_window, boundary)?;
            return Ok(None);
        }
        // An unconditional INSERT, run atomically in the model too.
        let Some(table) = target else {
            return Ok(None);
        };
        let landed = self.refresh(step, &table)?;
        if table == "publisher_lease"
            && let (Some(p), Some(id)) = (step.publisher(), stmt.param("lease_id"))
        {
            self.observed
                .lease_writes
                .push((p.to_owned(), id.to_owned(), step.index));
        }
        if table == "pack_inventory_raw"
            && let (Some(v), Some(id)) = (stmt.param("index_version"), stmt.param("publish_id"))
        {
            self.observed
                .inventory_writes
                .push((v.to_owned(), id.to_owned(), step.index));
        }
        if step.predicted.get("ran").is_some() {
            self.compare_landed(step, &sql, &table, &landed)?;
        }
        Ok(Some(table))
    }

    #[allow(clippy::too_many_arguments)]
    fn compare_read(
        &mut self,
        step: &TraceStep,
        stmt: &TraceStatement,
        sql: &str,
        columns: &[String],
        rows: Vec<Vec<String>>,
        in_window: bool,
        boundary: bool,
    ) -> Result<(), ReplayError> {
        let Some(predicted) = step.predicted.get("rows").and_then(Json::as_array) else {
            return Ok(());
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
        // A publisher that reads its own live lease as the head (the
        // observation `OneLiveLease`'s refusal is made from).
        let col = |n: &str| columns.iter().position(|c| c == n);
        if let (Some(p), Some(first), Some(li), Some(lv)) =
            (step.publisher(), rows.first(), col("lease_id"), col("live"))
            && !boundary
            && first.get(lv).is_some_and(|v| v == "1")
            && let Some(id) = first.get(li)
            && self
                .observed
                .lease_writes
                .iter()
                .any(|(q, l, _)| q == p && l == id)
            && stmt.name.ends_with("read_head")
        {
            self.observed
                .own_live_head
                .push((p.to_owned(), id.clone(), step.index));
        }
        Ok(())
    }

    /// Compares rows the engine landed in `table` with the rows the model
    /// gained there (sets: the model's tables are sets).
    fn compare_landed(
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

    fn flight_index(&self, step: &TraceStep) -> Option<usize> {
        let stmt = step.statement.as_ref()?;
        let p = step.publisher().unwrap_or_default();
        self.flights
            .iter()
            .position(|f| f.publisher == p && f.key == stmt.key && !f.killed)
    }

    /// Whether the statement's lease is the live head on the engine right
    /// now: `None` when the head's expiry is within the margin.
    fn lease_is_live_head(
        &self,
        step: &TraceStep,
        lease_id: &str,
    ) -> Result<Option<bool>, ReplayError> {
        let lease = self.db.real_name("publisher_lease");
        let sql = format!(
            "SELECT lease_id, expires_at_ns, toUnixTimestamp64Nano(now64(9)) FROM {lease} \
             ORDER BY term DESC, lease_id DESC LIMIT 1"
        );
        let rows = self
            .db
            .run_sql(&sql)
            .map_err(|e| self.engine_error(step, &sql, e))?;
        let Some(head) = rows.first() else {
            return Ok(Some(false));
        };
        let parse = |i: usize| head.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let (expires, now) = (parse(1), parse(2));
        if head.first().map(String::as_str) != Some(lease_id) {
            return Ok(Some(false));
        }
        if near_expiry([expires], now, now) {
            return Ok(None);
        }
        Ok(Some(expires > now))
    }

    fn evaluate(&mut self, step: &TraceStep) -> Result<(), ReplayError> {
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
        let live_head = match stmt.param("lease_id") {
            Some(id) => self.lease_is_live_head(step, id)?,
            None => Some(true),
        };
        let sent = wall_ns();
        self.db
            .run_trace(&stmt, &sql)
            .map_err(|e| self.engine_error(step, &sql, e))?;
        let returned = wall_ns();
        let boundary = sql.contains("now64(") && near_expiry(self.expiries(), sent, returned);
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
        if live_head == Some(false) && !landed.is_empty() && stmt.param("lease_id").is_some() {
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
        let real_fenced_out = stmt.param("lease_id").is_some() && live_head == Some(false);
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

    fn land(&mut self, step: &TraceStep) -> Result<Option<String>, ReplayError> {
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

    fn kill(&mut self, step: &TraceStep) {
        let Some(k) = self.flight_index(step) else {
            return;
        };
        if self.flights[k].executed && !self.flights[k].landed.is_empty() {
            // The engine ran it whole at its evaluation; the model kills it
            // before its rows land. Its rows stay on the engine only.
            self.flights[k].killed = true;
            self.untested(Untested::NeverLandedInModel);
        } else {
            let flight = self.flights.remove(k);
            if flight.executed {
                // Evaluated to nothing on the engine, and nothing lands in
                // the model either.
                self.compared += 1;
            }
        }
    }

    /// Writes rows the model gained without a statement of capcat-proto's
    /// (a foreign writer, folded descriptor writes).
    fn write_rows(
        &mut self,
        step: Option<&TraceStep>,
        table: &str,
        rows: &[Vec<String>],
    ) -> Result<(), ReplayError> {
        let Some(spec) = spec(table) else {
            return Err(ReplayError::Malformed {
                file: self.trace.name.clone(),
                what: format!("rows gained in unknown table {table}"),
            });
        };
        let fail = |this: &Self, sql: &str, message: String| ReplayError::Engine {
            trace: this.trace.name.clone(),
            step: step.map_or(0, |s| s.index),
            action: step.map_or_else(
                || "the model's initial rows".to_owned(),
                |s| s.action.clone(),
            ),
            sql: sql.to_owned(),
            message,
        };
        if spec.model == "capture_raw" {
            let descriptors: Vec<CaptureDescriptor> = rows
                .iter()
                .filter_map(|r| {
                    let pack = Uuid::parse_str(r.get(1)?).ok()?;
                    Some(placeholder_descriptor(
                        r.first()?,
                        pack,
                        r.get(2)?.parse().ok()?,
                    ))
                })
                .collect();
            let stmt = capcat_proto::descriptor::insert_descriptors(self.db.tables(), descriptors);
            self.db
                .run_proto(&stmt)
                .map_err(|e| fail(self, &stmt.sql, e))?;
        } else {
            let values: Vec<String> = rows
                .iter()
                .map(|r| {
                    let cells: Vec<String> = r
                        .iter()
                        .enumerate()
                        .map(|(i, v)| {
                            let v = if Some(i) == spec.time {
                                self.clock.to_real_ns(v.parse().unwrap_or(0)).to_string()
                            } else {
                                v.clone()
                            };
                            format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
                        })
                        .collect();
                    format!("({})", cells.join(", "))
                })
                .collect();
            let sql = format!(
                "INSERT INTO {} ({}) VALUES {}",
                self.db.real_name(spec.model),
                spec.columns.join(", "),
                values.join(", ")
            );
            self.db.run_sql(&sql).map_err(|e| fail(self, &sql, e))?;
        }
        if let Some(step) = step {
            self.refresh(step, spec.model)?;
        } else {
            let rows = self
                .db
                .read_table(spec)
                .map_err(|e| fail(self, "SELECT …", e))?;
            self.real.insert(spec.model, rows);
        }
        Ok(())
    }

    fn pin(&mut self, step: &TraceStep) -> Result<(), ReplayError> {
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

    fn reread(&mut self, step: &TraceStep) -> Result<(), ReplayError> {
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
        let now = pinned
            .read_again(&self.db)
            .map_err(|(sql, e)| self.engine_error(step, &sql, e))?;
        if now != pinned.snapshot {
            self.observed.snapshot_grew.push(format!(
                "step {}: W={} pinned {:?}, re-read {now:?}",
                step.index, pinned.watermark, pinned.snapshot
            ));
        }
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

    /// The model's final tables against the engine's, with the rows of
    /// statements the model never landed set aside.
    fn finish(&mut self) -> Result<(), ReplayError> {
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
        };
        for spec in &TABLES {
            self.refresh(&last, spec.model)?;
            let set_aside = aside.get(spec.model).cloned().unwrap_or_default();
            let actual: RowSet = self.real[spec.model]
                .iter()
                .filter(|r| !set_aside.contains(*r))
                .map(|r| self.to_model(spec, r))
                .collect();
            let expected = self.model[spec.model].clone();
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
                    &format!(
                        "SELECT {} FROM {}",
                        spec.columns.join(", "),
                        self.db.real_name(spec.model)
                    ),
                    format!("{expected:?}"),
                    format!("{actual:?}"),
                ));
            }
            self.compared += 1;
        }
        if let Some(pinned) = &self.pinned {
            let now = pinned
                .read_again(&self.db)
                .map_err(|(sql, e)| self.engine_error(&last, &sql, e))?;
            if now != pinned.snapshot {
                self.observed.snapshot_grew.push(format!(
                    "at the end: W={} pinned {:?}, now {now:?}",
                    pinned.watermark, pinned.snapshot
                ));
            }
        }
        Ok(())
    }

    /// For a counterexample: whether the engine shows its property failing.
    fn reproduction(&self) -> Option<(String, Reproduction)> {
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
    fn unpublished_inventory(&self) -> Vec<String> {
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

/// Rows of a ReplacingMergeTree as a merge leaves them: the highest version
/// per key (a merge may or may not have happened on the engine).
fn collapse(rows: &RowSet, key: &[usize], version: usize) -> RowSet {
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

/// A descriptor row for a pack the model says was described at
/// `index_version`: the model keeps only `(pack, index_version)` of it, so
/// every other field is a fixed placeholder (tenant `t`, which the model's
/// reader searches).
fn placeholder_descriptor(store: &str, pack: Uuid, index_version: u64) -> CaptureDescriptor {
    CaptureDescriptor {
        tenant_id: "t".to_owned(),
        experiment_id: "e".to_owned(),
        run_id: "r".to_owned(),
        capture_id: Uuid::from_u128(pack.as_u128() ^ 0xCA97_0000_0000_0000_0000_0000_0000_0000),
        locator: Locator {
            store_id: store.to_owned(),
            pack_id: pack,
            ..Locator::default()
        },
        index_version,
        tensor_name: "x".to_owned(),
        dtype: "float32".to_owned(),
        ..CaptureDescriptor::default()
    }
}
