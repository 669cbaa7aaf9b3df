//! Trace export from capcat-model-check: counterexamples of every rejected
//! design and seeded random walks of the shipped design, as JSON.
//!
//! Built on the model crate's public API only (`PublicationModel`,
//! `run::shortest_counterexample`, stateright's `Model` trait). Each step
//! names the actor, the statement exactly as capcat-proto emitted it (the
//! statement in flight as the model sent it, or the one the publisher's
//! machine asks for next) and the model's prediction: the rows a read
//! returns, how a guard evaluated, and the rows each table gained.
//!
//! SQL texts are stored once per file (`sql`, indexed by `sql_ref`), so a
//! corpus of many walks stays small while every statement stays exact.
//!
//! Beside each step's own statement, `folded` lists the statements the
//! model runs within that step (the index pass's `index.read_committed`
//! and `index.insert_descriptors`) with what each returned, and every trace
//! carries the model's whole tables before its first step
//! (`initial_tables`) and after its last (`final_tables`), in the notation
//! of `tables_gained`.

use std::collections::BTreeMap;

use capcat_model_check::names::publication as n;
use capcat_model_check::publication::engine::{Db, is_conditional_insert};
use capcat_model_check::publication::model::pack_of;
use capcat_model_check::publication::state::Phase;
use capcat_model_check::publication::{Action, Design, ModelConfig, PublicationModel, State};
use capcat_model_check::run::shortest_counterexample;
use capcat_proto::descriptor::Locator;
use capcat_proto::{
    CaptureDescriptor, Expect, IndexPass, Input, InsertData, Machine, Statement, Step,
};
use serde_json::{Value as Json, json};
use stateright::Model;

use crate::rng::Rng;

/// The most states a counterexample search visits.
pub const SEARCH_LIMIT: usize = 5_000_000;

/// The configuration and property under which each rejected design fails
/// (as model-check/tests/publication.rs checks them).
pub fn rejected_designs() -> Vec<(Design, ModelConfig, &'static str)> {
    // The configurations of model-check/tests/publication.rs, from the
    // model's own constructors.
    let hazard = ModelConfig::short_clock;
    vec![
        (
            Design::BarrierOnly,
            hazard(Design::BarrierOnly),
            n::FENCED_OUT_WRITES_NOTHING,
        ),
        (
            Design::PostWriteCheck,
            hazard(Design::PostWriteCheck),
            n::FENCED_OUT_WRITES_NOTHING,
        ),
        (
            Design::TwoSubqueryFence,
            hazard(Design::TwoSubqueryFence),
            n::FENCED_OUT_WRITES_NOTHING,
        ),
        (
            Design::CountOnlyReadBack,
            ModelConfig::with_foreign_row(Design::CountOnlyReadBack),
            n::REPORTED_MEANS_VISIBLE,
        ),
        (
            Design::MembershipOnVersionAlone,
            ModelConfig::with_foreign_row(Design::MembershipOnVersionAlone),
            n::PINNED_SNAPSHOT_NEVER_GROWS,
        ),
        (
            Design::UnfencedRelease,
            ModelConfig {
                crashes: 0,
                ..ModelConfig::with_release(Design::UnfencedRelease)
            },
            n::ONE_LIVE_LEASE,
        ),
        (
            Design::FreshLeaseIdOnReacquire,
            ModelConfig::with_reacquire(Design::FreshLeaseIdOnReacquire),
            n::ONE_LIVE_LEASE,
        ),
        (
            Design::NoExecutionCap,
            hazard(Design::NoExecutionCap),
            n::PINNED_SNAPSHOT_NEVER_GROWS,
        ),
        (
            Design::InventoryBeforePublish,
            hazard(Design::InventoryBeforePublish),
            n::INVENTORY_ONLY_AFTER_PUBLISH,
        ),
        (
            Design::MarginlessFence,
            hazard(Design::MarginlessFence),
            n::PINNED_SNAPSHOT_NEVER_GROWS,
        ),
        (
            Design::OwnTermReadBack,
            ModelConfig::with_claim_retries(Design::OwnTermReadBack),
            n::PINNED_SNAPSHOT_NEVER_GROWS,
        ),
        (
            Design::RowsAbovePinned,
            hazard(Design::RowsAbovePinned),
            n::PINNED_READS_NEVER_CHANGE,
        ),
        (
            Design::LeaseIdFence,
            ModelConfig::with_passes(Design::LeaseIdFence),
            n::PINNED_SNAPSHOT_NEVER_GROWS,
        ),
        (
            Design::NoSettleAfterTimeout,
            ModelConfig::with_long_lease(Design::NoSettleAfterTimeout),
            n::PINNED_SNAPSHOT_NEVER_GROWS,
        ),
        (
            Design::UnpublishedRowsResolve,
            ModelConfig::with_long_lease(Design::UnpublishedRowsResolve),
            n::PINNED_READS_NEVER_CHANGE,
        ),
    ]
}

/// Why a trace could not be exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The model refused the configuration.
    #[error("model configuration {design:?}: {message}")]
    Model {
        /// The design.
        design: Design,
        /// The model's error.
        message: String,
    },
    /// No counterexample within [`SEARCH_LIMIT`] states.
    #[error("no counterexample to {property} for {design:?} within {SEARCH_LIMIT} states")]
    NotFound {
        /// The design.
        design: Design,
        /// The property.
        property: &'static str,
    },
    /// The statements the model runs within a client step could not be
    /// rebuilt (the exporter would otherwise drop them silently, and the
    /// replay would have nothing to run for rows the model gained).
    #[error("{design:?} step {step}: the statements folded into it: {what}")]
    Folded {
        /// The design.
        design: Design,
        /// The 1-based step.
        step: usize,
        /// What went wrong.
        what: String,
    },
    /// The model has no initial state, or refused a step of its own path.
    #[error("the model could not replay its own path for {design:?} at step {step}")]
    Replay {
        /// The design.
        design: Design,
        /// The step.
        step: usize,
    },
}

/// SQL texts of one trace file, each stored once.
#[derive(Debug, Default)]
struct SqlTable {
    texts: Vec<String>,
    index: BTreeMap<String, usize>,
}

impl SqlTable {
    fn reference(&mut self, sql: &str) -> usize {
        if let Some(i) = self.index.get(sql) {
            return *i;
        }
        self.texts.push(sql.to_owned());
        self.index.insert(sql.to_owned(), self.texts.len() - 1);
        self.texts.len() - 1
    }
}

fn statement_json(stmt: &Statement, sql: &mut SqlTable) -> Json {
    let params: serde_json::Map<String, Json> = stmt
        .params
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                json!({ "type": v.clickhouse_type(), "value": v.to_text() }),
            )
        })
        .collect();
    let expect = match &stmt.expect {
        Expect::Nothing => json!("nothing"),
        Expect::Rows(columns) => json!(columns.iter().map(|c| c.name).collect::<Vec<_>>()),
    };
    let mut j = json!({
        "name": stmt.name,
        "sql_ref": sql.reference(&stmt.sql),
        "params": params,
        "settings": {
            "select_sequential_consistency": stmt.settings.select_sequential_consistency,
            "max_execution_time_s": stmt.settings.max_execution_time_s,
        },
        "expect": expect,
    });
    // An INSERT's data, byte for byte, so a native writer can compare the
    // body it sends as well as the text.
    if let Some(data) = &stmt.data {
        let hex: String = data.to_bytes().iter().map(|b| format!("{b:02x}")).collect();
        j["data"] = json!({
            "format": InsertData::FORMAT,
            "rows": data.rows(),
            "hex": hex,
        });
    }
    j
}

/// The statement a publisher's machine asks for next (after `draw`).
fn next_statement(phase: &Phase, draw: Option<u64>) -> Option<Statement> {
    fn probe<M: Machine + Clone>(machine: &M, draw: Option<u64>) -> Option<Statement> {
        let mut m = machine.clone();
        match m.poll() {
            Step::Execute(s) => Some(s),
            Step::Draw { .. } => {
                m.handle(Input::Drawn(draw?));
                match m.poll() {
                    Step::Execute(s) => Some(s),
                    _ => None,
                }
            }
            Step::Done(_) => None,
        }
    }
    match phase {
        Phase::Acquire(m) => probe(m.as_ref(), draw),
        Phase::Pass(m) => probe(m.as_ref(), draw),
        Phase::Release(m) => probe(m.as_ref(), draw),
        _ => None,
    }
}

fn added<T: Ord + std::fmt::Debug>(
    before: &std::collections::BTreeSet<T>,
    after: &std::collections::BTreeSet<T>,
) -> Vec<String> {
    after.difference(before).map(|r| format!("{r:?}")).collect()
}

/// The rows each table gained in one step (only tables that changed).
fn table_changes(before: &State, after: &State) -> Json {
    let (b, a) = (&before.db, &after.db);
    let mut out = serde_json::Map::new();
    for (table, rows) in [
        ("publisher_lease", added(&b.lease, &a.lease)),
        ("version_claims", added(&b.claims, &a.claims)),
        ("index_watermark", added(&b.watermark, &a.watermark)),
        ("snapshot_manifest", added(&b.manifest, &a.manifest)),
        ("pack_inventory_raw", added(&b.inventory, &a.inventory)),
        ("capture_raw", added(&b.descriptors, &a.descriptors)),
    ] {
        if !rows.is_empty() {
            out.insert(table.to_owned(), json!(rows));
        }
    }
    Json::Object(out)
}

/// Rows in the model's notation, as `predicted.rows` carries them.
fn rows_json(rows: &capcat_proto::Rows) -> Json {
    json!(
        rows.0
            .iter()
            .map(|r| r.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    )
}

/// Runs `stmt` on `db` as the model runs a read or an unconditional INSERT
/// in one step, and returns what the machine is fed. The model's own
/// simulation not knowing a statement's result is a model defect, named.
fn run_atomically(
    model: &PublicationModel,
    db: &mut Db,
    stmt: &Statement,
    now: u8,
) -> Result<Input, String> {
    let unknown = |e: &dyn std::fmt::Display| format!("the model cannot run {}: {e}", stmt.name);
    if stmt.expect == Expect::Nothing {
        let landing = db
            .evaluate(model.tables(), stmt, now, None)
            .map_err(|e| unknown(&e))?;
        db.land(landing);
        Ok(Input::Rows(capcat_proto::Rows::empty()))
    } else {
        db.read(model.tables(), stmt, now)
            .map(Input::Rows)
            .map_err(|e| unknown(&e))
    }
}

/// The statements the model runs inside a publisher's client step besides
/// the step's own (`index.read_committed` and `index.insert_descriptors`,
/// which it runs together with the step before them), with what each
/// returned: the step replayed on copies of the publisher's machine and of
/// the tables, as the model's step runs them.
fn folded_statements(
    model: &PublicationModel,
    before: &State,
    after: &State,
    publisher: usize,
    draw: Option<u64>,
    sql: &mut SqlTable,
) -> Result<Vec<Json>, String> {
    const FOLDED: [&str; 2] = ["index.read_committed", "index.insert_descriptors"];
    let Some(p) = before.publishers.get(publisher) else {
        return Err(format!("the model has no publisher {publisher}"));
    };
    let mut phase = p.phase.clone();
    let mut db = before.db.clone();
    let now = before.now;
    let mut out = Vec::new();
    let mut record = |stmt: &Statement, input: &Input, sql: &mut SqlTable| {
        let mut j = statement_json(stmt, sql);
        j["predicted"] = match input {
            Input::Rows(rows) if matches!(stmt.expect, Expect::Rows(_)) => {
                json!({ "rows": rows_json(rows) })
            }
            _ => json!({ "ran": "atomically" }),
        };
        out.push(j);
    };
    fn poll_phase(phase: &mut Phase) -> Option<Step<()>> {
        fn strip<T>(s: Step<T>) -> Step<()> {
            match s {
                Step::Execute(x) => Step::Execute(x),
                Step::Draw { below } => Step::Draw { below },
                Step::Done(_) => Step::Done(()),
            }
        }
        Some(match phase {
            Phase::Acquire(m) => strip(m.poll()),
            Phase::Pass(m) => strip(m.poll()),
            Phase::Release(m) => strip(m.poll()),
            _ => return None,
        })
    }
    fn feed(phase: &mut Phase, input: Input) {
        match phase {
            Phase::Acquire(m) => m.handle(input),
            Phase::Pass(m) => m.handle(input),
            Phase::Release(m) => m.handle(input),
            _ => {}
        }
    }
    // The step's own statement. The model enables a client step only for a
    // publisher whose machine has a statement to run (after a draw, when it
    // draws), so anything else is a defect of the model or of this export.
    let main = match poll_phase(&mut phase) {
        Some(Step::Execute(s)) => s,
        Some(Step::Draw { .. }) => {
            let Some(drawn) = draw else {
                return Err("the machine draws but the action carries no draw".to_owned());
            };
            feed(&mut phase, Input::Drawn(drawn));
            match poll_phase(&mut phase) {
                Some(Step::Execute(s)) => s,
                _ => return Err("the machine runs no statement after its draw".to_owned()),
            }
        }
        _ => return Err("the publisher's machine has no statement to run".to_owned()),
    };
    // A conditional INSERT is sent, not run: nothing runs with it.
    if is_conditional_insert(main.name) {
        return Ok(out);
    }
    let input = run_atomically(model, &mut db, &main, now)?;
    feed(&mut phase, input);
    // Bounded like the model's own settling loop.
    for _ in 0..32 {
        match poll_phase(&mut phase) {
            Some(Step::Execute(s)) if FOLDED.contains(&s.name) => {
                let input = run_atomically(model, &mut db, &s, now)?;
                record(&s, &input, sql);
                feed(&mut phase, input);
            }
            Some(Step::Done(())) if matches!(phase, Phase::Acquire(_)) => {
                // The acquire succeeded and the publisher starts its index
                // pass, whose first statement (the replay guard's read) the
                // model runs in this step too. It reads only the pass's
                // packs: the publisher's own first pack (`pack_of`).
                if let (Some(Phase::Pass(_)), Some(lease)) = (
                    after.publishers.get(publisher).map(|a| &a.phase),
                    after.publishers.get(publisher).and_then(|a| a.held.clone()),
                ) {
                    let (store_id, pack_id) =
                        pack_of(u8::try_from(publisher).unwrap_or(u8::MAX), 0);
                    let descriptor = CaptureDescriptor {
                        locator: Locator {
                            store_id,
                            pack_id,
                            ..Locator::default()
                        },
                        ..CaptureDescriptor::default()
                    };
                    let mut pass = IndexPass::new(
                        model.tables().clone(),
                        model.proto().clone(),
                        lease,
                        vec![descriptor],
                        uuid::Uuid::nil(),
                    );
                    if let Step::Execute(s) = pass.poll()
                        && FOLDED.contains(&s.name)
                    {
                        let input = run_atomically(model, &mut db, &s, now)?;
                        record(&s, &input, sql);
                    }
                }
                break;
            }
            _ => break,
        }
    }
    Ok(out)
}

/// The model's tables in its notation (what `tables_gained` lists).
fn tables_json(state: &State) -> Json {
    table_changes(
        &State {
            db: Db::default(),
            ..state.clone()
        },
        state,
    )
}

/// One step of a path as JSON.
fn step_json(
    model: &PublicationModel,
    before: &State,
    action: &Action,
    after: &State,
    sql: &mut SqlTable,
) -> Json {
    let (actor, statement, prediction) = match action {
        Action::Client {
            publisher, draw, ..
        } => {
            let p = usize::from(*publisher);
            let sent = (after.flights.len() > before.flights.len())
                .then(|| after.flights.last().map(|f| f.stmt.clone()))
                .flatten();
            let stmt = sent.clone().or_else(|| {
                before
                    .publishers
                    .get(p)
                    .and_then(|pb| next_statement(&pb.phase, *draw))
            });
            let prediction = match (&stmt, sent) {
                (Some(_), Some(_)) => {
                    json!({ "sent": "in flight until EvaluateGuard and LandRows" })
                }
                (Some(s), None) if matches!(s.expect, Expect::Rows(_)) => {
                    match before.db.read(model.tables(), s, before.now) {
                        Ok(rows) => json!({
                            "rows": rows.0.iter().map(|r| r.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>()).collect::<Vec<_>>()
                        }),
                        Err(unknown) => json!({ "unknown": unknown.to_string() }),
                    }
                }
                (Some(_), None) => json!({ "ran": "atomically" }),
                (None, _) => Json::Null,
            };
            (format!("p{publisher}"), stmt, prediction)
        }
        Action::Evaluate {
            flight, publisher, ..
        } => {
            let stmt = before.flights.get(*flight).map(|f| f.stmt.clone());
            let eval = after
                .flights
                .get(*flight)
                .map(|f| format!("{:?}", f.eval))
                .unwrap_or_default();
            (
                format!("engine for p{publisher}"),
                stmt,
                json!({ "evaluated": eval }),
            )
        }
        Action::Land {
            flight, publisher, ..
        }
        | Action::Kill {
            flight, publisher, ..
        } => (
            format!("engine for p{publisher}"),
            before.flights.get(*flight).map(|f| f.stmt.clone()),
            Json::Null,
        ),
        Action::Abandon {
            flight, publisher, ..
        } => (
            format!("p{publisher}"),
            before.flights.get(*flight).map(|f| f.stmt.clone()),
            json!({ "told": "the claim failed; it stays in flight with no client" }),
        ),
        Action::PinSnapshot | Action::ReReadSnapshot => (
            "reader".to_owned(),
            None,
            json!({ "reader": format!("{:?}", after.reader) }),
        ),
        Action::CrashRestart { publisher, .. } => (format!("p{publisher}"), None, Json::Null),
        Action::Tick => ("clock".to_owned(), None, json!({ "now": after.now })),
        Action::ForeignInsert { .. } => ("foreign writer".to_owned(), None, Json::Null),
    };
    json!({
        "action": model.format_action(action),
        "actor": actor,
        "statement": statement.map(|s| statement_json(&s, sql)),
        "predicted": prediction,
        "tables_gained": table_changes(before, after),
    })
}

/// A path rendered: its steps, and the model's tables before the first
/// step and after the last.
struct Rendered {
    steps: Vec<Json>,
    initial_tables: Json,
    final_tables: Json,
    /// The actions and the state before each (and after the last).
    actions: Vec<Action>,
    states: Vec<State>,
}

impl Rendered {
    /// Adds each client step's `folded` statements. Run after every path
    /// of a document is rendered, so their SQL texts join the document's
    /// table after every step's own and the `sql_ref`s of traces exported
    /// before `folded` existed stay what they were.
    fn add_folded(
        &mut self,
        design: Design,
        model: &PublicationModel,
        sql: &mut SqlTable,
    ) -> Result<(), TraceError> {
        for (i, action) in self.actions.iter().enumerate() {
            let (Some(before), Some(after), Some(step)) = (
                self.states.get(i),
                self.states.get(i + 1),
                self.steps.get_mut(i),
            ) else {
                break;
            };
            if let Action::Client {
                publisher, draw, ..
            } = action
            {
                let folded =
                    folded_statements(model, before, after, usize::from(*publisher), *draw, sql)
                        .map_err(|what| TraceError::Folded {
                            design,
                            step: i + 1,
                            what,
                        })?;
                if !folded.is_empty() {
                    step["folded"] = json!(folded);
                }
            }
        }
        Ok(())
    }
}

/// Replays `actions` through `model` from its first initial state and
/// renders every step.
fn render_path(
    design: Design,
    model: &PublicationModel,
    actions: &[Action],
    sql: &mut SqlTable,
) -> Result<Rendered, TraceError> {
    let mut state = model
        .init_states()
        .into_iter()
        .next()
        .ok_or(TraceError::Replay { design, step: 0 })?;
    let initial_tables = tables_json(&state);
    let mut steps = Vec::with_capacity(actions.len());
    let mut states = Vec::with_capacity(actions.len() + 1);
    for (i, action) in actions.iter().enumerate() {
        let next = model
            .next_state(&state, action.clone())
            .ok_or(TraceError::Replay {
                design,
                step: i + 1,
            })?;
        steps.push(step_json(model, &state, action, &next, sql));
        states.push(std::mem::replace(&mut state, next));
    }
    let final_tables = tables_json(&state);
    states.push(state);
    Ok(Rendered {
        steps,
        initial_tables,
        final_tables,
        actions: actions.to_vec(),
        states,
    })
}

fn build(design: Design, cfg: ModelConfig) -> Result<PublicationModel, TraceError> {
    PublicationModel::new(cfg).map_err(|e| TraceError::Model {
        design,
        message: e.to_string(),
    })
}

/// The shortest counterexample of `design` to `property` under `cfg`, as a
/// JSON document.
pub fn counterexample(
    design: Design,
    cfg: ModelConfig,
    property: &'static str,
) -> Result<Json, TraceError> {
    let label = format!("{cfg:?}");
    let model = build(design, cfg)?;
    let actions = shortest_counterexample(&model, property, SEARCH_LIMIT)
        .ok_or(TraceError::NotFound { design, property })?;
    let mut sql = SqlTable::default();
    let mut rendered = render_path(design, &model, &actions, &mut sql)?;
    rendered.add_folded(design, &model, &mut sql)?;
    Ok(json!({
        "kind": "counterexample",
        "design": design.name(),
        "violates": property,
        "config": label,
        "sql": sql.texts,
        "steps": rendered.steps,
        "initial_tables": rendered.initial_tables,
        "final_tables": rendered.final_tables,
    }))
}

/// The shortest counterexample of the model `search` to `property`,
/// rendered through the model `render` instead: the same schedule of
/// actions, with `render`'s statements and predictions. With `search` the
/// shipped design with its fence stripped and `render` the shipped design,
/// this is a schedule in which the shipped fence refuses a stale holder's
/// write (the replay's mutation check). A JSON document of kind
/// `schedule`.
pub fn schedule_of(
    search: ModelConfig,
    render: ModelConfig,
    property: &'static str,
) -> Result<Json, TraceError> {
    let design = search.design;
    let searched = build(design, search)?;
    let actions = shortest_counterexample(&searched, property, SEARCH_LIMIT)
        .ok_or(TraceError::NotFound { design, property })?;
    let label = format!("{render:?}");
    let rendered_design = render.design;
    let model = build(rendered_design, render)?;
    let mut sql = SqlTable::default();
    let mut rendered = render_path(rendered_design, &model, &actions, &mut sql)?;
    rendered.add_folded(rendered_design, &model, &mut sql)?;
    Ok(json!({
        "kind": "schedule",
        "design": rendered_design.name(),
        "schedule_of": property,
        "config": label,
        "sql": sql.texts,
        "steps": rendered.steps,
        "initial_tables": rendered.initial_tables,
        "final_tables": rendered.final_tables,
    }))
}

/// `walks` seeded random walks of the shipped design (at most `max_steps`
/// steps each), as one JSON document.
pub fn random_walks(seed: u64, walks: usize, max_steps: usize) -> Result<Json, TraceError> {
    random_walks_with(ModelConfig::ci(Design::Shipped), seed, walks, max_steps)
}

/// `walks` seeded random walks of the model `cfg` builds (at most
/// `max_steps` steps each), as one JSON document: [`random_walks`] under
/// other bounds and switches (releases, re-acquires, orphaned INSERTs,
/// foreign rows).
pub fn random_walks_with(
    cfg: ModelConfig,
    seed: u64,
    walks: usize,
    max_steps: usize,
) -> Result<Json, TraceError> {
    let design = cfg.design;
    let label = format!("{cfg:?}");
    let model = build(design, cfg)?;
    let mut rng = Rng::new(seed);
    let mut sql = SqlTable::default();
    let mut out = Vec::with_capacity(walks);
    let mut rendered = Vec::with_capacity(walks);
    for _ in 0..walks {
        let mut state = model
            .init_states()
            .into_iter()
            .next()
            .ok_or(TraceError::Replay { design, step: 0 })?;
        let mut actions = Vec::new();
        let mut enabled = Vec::new();
        for _ in 0..max_steps {
            enabled.clear();
            model.actions(&state, &mut enabled);
            if enabled.is_empty() {
                break;
            }
            let pick = usize::try_from(rng.below(enabled.len() as u64)).unwrap_or(0);
            let action = enabled.swap_remove(pick);
            let Some(next) = model.next_state(&state, action.clone()) else {
                break;
            };
            actions.push(action);
            state = next;
        }
        rendered.push(render_path(design, &model, &actions, &mut sql)?);
    }
    for (walk, mut r) in rendered.into_iter().enumerate() {
        r.add_folded(design, &model, &mut sql)?;
        out.push(json!({
            "walk": walk,
            "steps": r.steps,
            "initial_tables": r.initial_tables,
            "final_tables": r.final_tables,
        }));
    }
    Ok(json!({
        "kind": "random_walks",
        "design": design.name(),
        "seed": seed,
        "config": label,
        "sql": sql.texts,
        "walks": out,
    }))
}
