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

use std::collections::BTreeMap;

use capcat_model_check::names::publication as n;
use capcat_model_check::publication::state::Phase;
use capcat_model_check::publication::{Action, Design, ModelConfig, PublicationModel, State};
use capcat_model_check::run::shortest_counterexample;
use capcat_proto::{Expect, Input, Machine, Statement, Step};
use serde_json::{Value as Json, json};
use stateright::Model;

use crate::rng::Rng;

/// The most states a counterexample search visits.
pub const SEARCH_LIMIT: usize = 5_000_000;

/// The configuration and property under which each rejected design fails
/// (as model-check/tests/publication.rs checks them).
pub fn rejected_designs() -> Vec<(Design, ModelConfig, &'static str)> {
    let ci = ModelConfig::ci;
    let foreign = |d| ModelConfig {
        foreign_writes: 1,
        crashes: 0,
        ..ci(d)
    };
    vec![
        (
            Design::BarrierOnly,
            ci(Design::BarrierOnly),
            n::FENCED_OUT_WRITES_NOTHING,
        ),
        (
            Design::PostWriteCheck,
            ci(Design::PostWriteCheck),
            n::FENCED_OUT_WRITES_NOTHING,
        ),
        (
            Design::TwoSubqueryFence,
            ci(Design::TwoSubqueryFence),
            n::FENCED_OUT_WRITES_NOTHING,
        ),
        (
            Design::CountOnlyReadBack,
            foreign(Design::CountOnlyReadBack),
            n::REPORTED_MEANS_VISIBLE,
        ),
        (
            Design::MembershipOnVersionAlone,
            foreign(Design::MembershipOnVersionAlone),
            n::PINNED_SNAPSHOT_NEVER_GROWS,
        ),
        (
            Design::UnfencedRelease,
            ModelConfig {
                release: true,
                crashes: 0,
                ..ci(Design::UnfencedRelease)
            },
            n::ONE_LIVE_LEASE,
        ),
        (
            Design::FreshLeaseIdOnReacquire,
            ModelConfig {
                reacquire: true,
                ..ci(Design::FreshLeaseIdOnReacquire)
            },
            n::ONE_LIVE_LEASE,
        ),
        (
            Design::NoExecutionCap,
            ci(Design::NoExecutionCap),
            n::PINNED_SNAPSHOT_NEVER_GROWS,
        ),
        (
            Design::CapAtLeastTtl,
            ci(Design::CapAtLeastTtl),
            n::PINNED_SNAPSHOT_NEVER_GROWS,
        ),
        (
            Design::InventoryBeforePublish,
            ci(Design::InventoryBeforePublish),
            n::INVENTORY_ONLY_AFTER_PUBLISH,
        ),
        (
            Design::ContestedTermTakenAtOnce,
            ci(Design::ContestedTermTakenAtOnce),
            n::PINNED_SNAPSHOT_NEVER_GROWS,
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
    json!({
        "name": stmt.name,
        "sql_ref": sql.reference(&stmt.sql),
        "params": params,
        "settings": {
            "select_sequential_consistency": stmt.settings.select_sequential_consistency,
            "max_execution_time_s": stmt.settings.max_execution_time_s,
        },
        "expect": expect,
    })
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
        Action::PinWatermark | Action::ReReadSnapshot => (
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

/// Replays `actions` through `model` from its first initial state and
/// renders every step.
fn render_path(
    design: Design,
    model: &PublicationModel,
    actions: &[Action],
    sql: &mut SqlTable,
) -> Result<Vec<Json>, TraceError> {
    let mut state = model
        .init_states()
        .into_iter()
        .next()
        .ok_or(TraceError::Replay { design, step: 0 })?;
    let mut steps = Vec::with_capacity(actions.len());
    for (i, action) in actions.iter().enumerate() {
        let next = model
            .next_state(&state, action.clone())
            .ok_or(TraceError::Replay {
                design,
                step: i + 1,
            })?;
        steps.push(step_json(model, &state, action, &next, sql));
        state = next;
    }
    Ok(steps)
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
    let steps = render_path(design, &model, &actions, &mut sql)?;
    Ok(json!({
        "kind": "counterexample",
        "design": design.name(),
        "violates": property,
        "config": label,
        "sql": sql.texts,
        "steps": steps,
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
    let steps = render_path(rendered_design, &model, &actions, &mut sql)?;
    Ok(json!({
        "kind": "schedule",
        "design": rendered_design.name(),
        "schedule_of": property,
        "config": label,
        "sql": sql.texts,
        "steps": steps,
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
    for walk in 0..walks {
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
        let steps = render_path(design, &model, &actions, &mut sql)?;
        out.push(json!({ "walk": walk, "steps": steps }));
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
