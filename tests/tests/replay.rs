//! The model's traces replayed on the real engine (`capcat_tests::replay`):
//! every rejected design's counterexample and the shipped design's random
//! walks from `tests/corpus/`, step by step, every prediction compared.
//!
//! Environment: `CAPCAT_LIBCHDB` (the engine; without it the tests skip, or
//! fail under `CAPCAT_REQUIRE_ENGINES=1`); `CAPCAT_CORPUS_DIR` replays a
//! corpus exported elsewhere instead of `tests/corpus`.

use std::path::PathBuf;
use std::time::Instant;

use capcat_model_check::names::publication as n;
use capcat_model_check::publication::{Design, ModelConfig};
use capcat_tests::engine::engine_or_skip;
use capcat_tests::replay::trace::traces_of;
use capcat_tests::replay::{
    CHECKED_PROPERTIES, ReplayError, ReplayOptions, Reproduction, Trace, TraceReport, Untested,
    corpus_files, read_traces, replay_all, replay_trace, replay_with_retries,
};
use capcat_tests::traces::{counterexample, random_walks_with, schedule_of};

/// Traces replayed at once (each mostly sleeps through its ticks; more
/// threads on two cores push a trace's statements later into their ticks,
/// and a trace that falls too far behind the model's clock is replayed
/// again).
const THREADS: usize = 3;

/// The seed of the walks under the model's other switches, and walks per
/// switch.
const SWITCHES_SEED: u64 = 0x5_1CE5;
const SWITCH_WALKS: usize = 5;
/// Walks generated per switch to find those that show it.
const SWITCH_CANDIDATES: usize = 200;

/// Counterexamples whose violation is a guard evaluated apart from its rows
/// landing (a late landing, or a fence read in two steps): the engine runs
/// a statement whole, so it cannot show them, and the replay says so.
/// (`MarginlessFence`, `OwnTermReadBack` and `LeaseIdFence` are run on the
/// engine with the statement held between its guard and its rows by
/// `capcat-proto/tests/live_schedules.rs`.)
const NEED_THE_SPLIT: [&str; 6] = [
    n::NO_EXECUTION_CAP,
    n::MARGINLESS_FENCE,
    n::OWN_TERM_READ_BACK,
    n::TWO_SUBQUERY_FENCE,
    n::LEASE_ID_FENCE,
    n::NO_SETTLE_AFTER_TIMEOUT,
];

/// Untested predictions the committed counterexamples may have, per reason
/// (the split designs' late landings and the two-read fence; the two late
/// start designs add 5 each).
const COUNTEREXAMPLES_UNTESTED: [(Untested, usize); 2] = [
    (Untested::InFlightWindow, 28),
    (Untested::SplitEvaluation, 3),
];

/// In-flight-window predictions the switches' walks may have (an orphaned
/// INSERT after a crash is run whole on the engine at its evaluation).
const SWITCHES_IN_FLIGHT_WINDOW: usize = 5;

/// Counterexamples whose violation is a client's decision, not a table
/// state: `FreshLeaseIdOnReacquire`'s holder is refused by its own lease
/// (capcat-proto's acquire, on lease rows the replay compares), so the
/// engine's tables cannot show it, and the replay says so.
const A_CLIENT_DECISION: [&str; 1] = [n::FRESH_LEASE_ID_ON_REACQUIRE];

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capcat-tests-replay")
}

/// `tests/corpus`, or `CAPCAT_CORPUS_DIR` (a freshly exported corpus).
fn corpus() -> PathBuf {
    std::env::var_os("CAPCAT_CORPUS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus"),
        PathBuf::from,
    )
}

fn load(dir: &str) -> Vec<Trace> {
    let files = corpus_files(&corpus().join(dir));
    assert!(!files.is_empty(), "no trace files under tests/corpus/{dir}");
    files
        .iter()
        .flat_map(|f| read_traces(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())))
        .collect()
}

fn summary(reports: &[TraceReport]) -> String {
    let steps: usize = reports.iter().map(|r| r.steps).sum();
    let compared: usize = reports.iter().map(|r| r.compared).sum();
    let untested: Vec<String> = Untested::ALL
        .iter()
        .map(|u| {
            let k: usize = reports.iter().filter_map(|r| r.untested.get(u)).sum();
            format!("{}={k}", u.label())
        })
        .collect();
    format!(
        "{} traces, {steps} steps, {compared} predictions compared, untested: {}",
        reports.len(),
        untested.join(" ")
    )
}

/// Untested predictions per reason at most `budget` (an unlisted reason:
/// none). The budgets are the figures of the committed corpus and seeds: a
/// change that makes more of the model untestable fails here.
fn assert_untested_within(what: &str, reports: &[TraceReport], budget: &[(Untested, usize)]) {
    for u in Untested::ALL {
        let k: usize = reports.iter().filter_map(|r| r.untested.get(&u)).sum();
        let max = budget
            .iter()
            .find(|(b, _)| *b == u)
            .map_or(0, |(_, max)| *max);
        assert!(
            k <= max,
            "{what}: {k} predictions {} untested, at most {max} allowed: {}",
            u.label(),
            summary(reports)
        );
    }
}

fn all_ok(results: Vec<Result<TraceReport, ReplayError>>) -> Vec<TraceReport> {
    let mut failures = Vec::new();
    let mut reports = Vec::new();
    for r in results {
        match r {
            Ok(report) => {
                println!("{report}");
                reports.push(report);
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    reports
}

#[test]
fn every_rejected_design_replays_and_the_engine_shows_its_violation() {
    let Some(engine) = engine_or_skip("replay_counterexamples", &data_dir()) else {
        return;
    };
    let started = Instant::now();
    let traces = load("counterexamples");
    let reports = all_ok(replay_all(
        &engine,
        &traces,
        THREADS,
        ReplayOptions::default(),
    ));
    println!(
        "counterexamples: {} in {:.1} s",
        summary(&reports),
        started.elapsed().as_secs_f64()
    );
    assert_untested_within("counterexamples", &reports, &COUNTEREXAMPLES_UNTESTED);
    for r in &reports {
        let (property, verdict) = r
            .reproduction
            .as_ref()
            .unwrap_or_else(|| panic!("{}: a counterexample names its property", r.name));
        let needs_split = NEED_THE_SPLIT.contains(&r.name.as_str());
        let not_a_table_state = A_CLIENT_DECISION.contains(&r.name.as_str());
        match verdict {
            Reproduction::Observed(_) => assert!(
                !needs_split && !not_a_table_state,
                "{}: {property} showed on the engine although the violation needs a statement \
                 held between its guard and its rows, or is a client's decision; update \
                 NEED_THE_SPLIT or A_CLIENT_DECISION",
                r.name
            ),
            Reproduction::NotObserved(why) => assert!(
                needs_split || not_a_table_state,
                "{}: the engine does not show {property}: {why}",
                r.name
            ),
        }
        if needs_split {
            // The replay must have said which predictions it could not test.
            let said: usize = [
                Untested::InFlightWindow,
                Untested::SplitEvaluation,
                Untested::NeverLandedInModel,
            ]
            .iter()
            .filter_map(|u| r.untested.get(u))
            .sum();
            assert!(said > 0, "{}: nothing reported untested:\n{r}", r.name);
        }
    }
}

#[test]
fn every_testable_prediction_of_the_shipped_walks_agrees_with_the_engine() {
    let Some(engine) = engine_or_skip("replay_walks", &data_dir()) else {
        return;
    };
    let started = Instant::now();
    let traces = load("");
    let walks: Vec<Trace> = traces
        .into_iter()
        .filter(|t| t.violates.is_none())
        .collect();
    assert!(!walks.is_empty(), "no walks in tests/corpus");
    let reports = all_ok(replay_all(
        &engine,
        &walks,
        THREADS,
        ReplayOptions::default(),
    ));
    println!(
        "walks: {} in {:.1} s",
        summary(&reports),
        started.elapsed().as_secs_f64()
    );
    let compared: usize = reports.iter().map(|r| r.compared).sum();
    assert!(compared > 0, "nothing was compared");
    // Every prediction of the shipped design's own walks is testable.
    assert_untested_within("walks", &reports, &[]);
    assert_no_check_fires(&reports);
}

/// Every property check the replay runs finds nothing on the shipped
/// design's traces (a check that fires on correct behaviour would make
/// every "reproduced" verdict worthless).
fn assert_no_check_fires(reports: &[TraceReport]) {
    let mut fired = Vec::new();
    for r in reports {
        assert_eq!(
            r.checks.len(),
            CHECKED_PROPERTIES.len(),
            "{}: every check ran",
            r.name
        );
        for (property, found) in &r.checks {
            if !found.is_empty() {
                fired.push(format!("{}: {property}: {}", r.name, found.join("; ")));
            }
        }
    }
    assert!(
        fired.is_empty(),
        "a check fired on the shipped design:\n{}",
        fired.join("\n")
    );
}

/// Seeded walks of the shipped design under the model's other switches
/// (releases, holders re-acquiring, crashes orphaning an INSERT, a foreign
/// row), generated here rather than kept in the corpus: every testable
/// prediction agrees with the engine there too.
#[test]
fn walks_under_the_models_other_switches_agree_with_the_engine() {
    let Some(engine) = engine_or_skip("replay_switches", &data_dir()) else {
        return;
    };
    let started = Instant::now();
    let ci = ModelConfig::ci(Design::Shipped);
    // Each switch, and an action that shows it happened: walks without one
    // prove nothing about the switch and are left out.
    let configurations = [
        (
            "release",
            ModelConfig {
                release: true,
                crashes: 0,
                ..ci.clone()
            },
            "IssueRelease",
        ),
        (
            "reacquire",
            ModelConfig {
                reacquire: true,
                ..ci.clone()
            },
            // A re-acquire claims like a renewal: nothing in the action
            // names tells it apart, so every walk counts.
            "",
        ),
        (
            "crash-mid-statement",
            ModelConfig {
                crash_mid_statement: true,
                ..ci.clone()
            },
            "left in flight",
        ),
        (
            "foreign",
            ModelConfig {
                foreign_writes: 1,
                crashes: 0,
                ..ci.clone()
            },
            "ForeignInsert",
        ),
    ];
    let mut traces = Vec::new();
    for (name, cfg, needle) in configurations {
        let doc = random_walks_with(cfg, SWITCHES_SEED, SWITCH_CANDIDATES, 40)
            .expect("the model's walks");
        let shown: Vec<Trace> = traces_of(&format!("walks-{name}"), &doc)
            .expect("the exporter's own document")
            .into_iter()
            .filter(|t| t.steps.iter().any(|s| s.action.contains(needle)))
            .take(SWITCH_WALKS)
            .collect();
        println!("{name}: {} walks with {needle}", shown.len());
        assert!(
            !shown.is_empty(),
            "no walk of {SWITCH_CANDIDATES} under {name} has {needle}"
        );
        traces.extend(shown);
    }
    let reports = all_ok(replay_all(
        &engine,
        &traces,
        THREADS,
        ReplayOptions::default(),
    ));
    println!(
        "walks under switches: {} in {:.1} s",
        summary(&reports),
        started.elapsed().as_secs_f64()
    );
    // The orphaned INSERT of a crash lands in the model only later.
    assert_untested_within(
        "walks under switches",
        &reports,
        &[(Untested::InFlightWindow, SWITCHES_IN_FLIGHT_WINDOW)],
    );
    assert_no_check_fires(&reports);
}

/// The mutation check: the shipped design with capcat-proto's fence cut out
/// of the publish statements (the model's `strip_fence`, which applies
/// capcat-proto's `designs::without_lease_fence`) has a counterexample,
/// and the engine shows the fenced-out write landing.
#[test]
fn a_stripped_fence_counterexample_lands_its_fenced_out_write_on_the_engine() {
    let Some(engine) = engine_or_skip("replay_stripped_fence", &data_dir()) else {
        return;
    };
    let cfg = ModelConfig {
        strip_fence: true,
        ..ModelConfig::ci(Design::Shipped)
    };
    let doc = counterexample(Design::Shipped, cfg, n::FENCED_OUT_WRITES_NOTHING)
        .expect("the model finds the stripped fence's counterexample");
    let traces = traces_of("stripped-fence", &doc).expect("the exporter's own document");
    let report = replay_with_retries(&engine, &traces[0], ReplayOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    println!("{report}");
    assert!(
        matches!(&report.reproduction, Some((_, Reproduction::Observed(_)))),
        "the fenced-out write did not land on the engine:\n{report}"
    );
}

/// The mutation check on the shipped design's own statements: the
/// schedule of the stripped-fence counterexample, rendered through the
/// shipped design (the model's fence refuses the stale holder's manifest),
/// agrees with the engine as exported, and DISAGREES once capcat-proto's
/// fence is cut out of the replayed SQL (the engine then lands what the
/// model refused).
#[test]
fn the_shipped_fence_refuses_on_the_engine_and_cutting_it_out_disagrees() {
    let Some(engine) = engine_or_skip("replay_fence_cut", &data_dir()) else {
        return;
    };
    let shipped = ModelConfig::ci(Design::Shipped);
    let stripped = ModelConfig {
        strip_fence: true,
        ..shipped.clone()
    };
    let doc = schedule_of(stripped, shipped, n::FENCED_OUT_WRITES_NOTHING)
        .expect("the stripped fence's schedule on the shipped design");
    let trace = traces_of("fence-refuses", &doc)
        .expect("the exporter's own document")
        .remove(0);
    let refused = trace
        .steps
        .iter()
        .find(|s| {
            s.predicted["evaluated"]
                .as_str()
                .is_some_and(|e| e.contains("landing: Nothing, fenced_out: true"))
        })
        .map(|s| s.index)
        .expect("the shipped fence refuses a publish statement in this schedule");
    let report = replay_with_retries(&engine, &trace, ReplayOptions::default())
        .unwrap_or_else(|e| panic!("the shipped design's schedule: {e}"));
    println!("{report}");
    match replay_with_retries(&engine, &trace, ReplayOptions { strip_fence: true }) {
        Err(ReplayError::Disagreement(d)) => {
            println!("fence cut out: {d}");
            assert_eq!(
                d.step, refused,
                "the disagreement is at the refused statement"
            );
        }
        other => panic!("with the fence cut out the replay must disagree, got {other:?}"),
    }
}

/// The harness has teeth: a trace whose prediction is wrong by one value
/// fails at that step, naming the trace, the step, the SQL and both results.
#[test]
fn a_wrong_prediction_fails_at_its_step() {
    let Some(engine) = engine_or_skip("replay_wrong_prediction", &data_dir()) else {
        return;
    };
    let mut traces = load("counterexamples");
    traces.retain(|t| t.name == n::BARRIER_ONLY);
    let mut trace = traces.pop().expect("the barrier-only counterexample");
    // The model says the version head is 0 at step 4; claim it is 7.
    let step = trace
        .steps
        .iter_mut()
        .find(|s| s.verb == "ReadVersionHead")
        .expect("a version head read");
    let at = step.index;
    step.predicted = serde_json::json!({ "rows": [["UInt64(7)"]] });
    match replay_trace(&engine, &trace, ReplayOptions::default()) {
        Err(ReplayError::Disagreement(d)) => {
            let text = d.to_string();
            println!("{text}");
            assert!(text.contains(&format!("step {at} ")), "{text}");
            assert!(text.contains("SELECT greatest"), "{text}");
        }
        other => panic!("a wrong prediction passed: {other:?}"),
    }
    // And a wrong expiry (time values compare in ticks from the origin).
    let mut traces = load("counterexamples");
    traces.retain(|t| t.name == n::BARRIER_ONLY);
    let mut trace = traces.pop().expect("the barrier-only counterexample");
    let step = trace
        .steps
        .iter_mut()
        .find(|s| s.verb == "ReadBackLease")
        .expect("a lease read-back");
    let at = step.index;
    let text = step
        .predicted
        .to_string()
        .replace("UInt64(2000000000)", "UInt64(3000000000)");
    assert_ne!(
        text,
        step.predicted.to_string(),
        "the read-back has an expiry"
    );
    step.predicted = serde_json::from_str(&text).expect("JSON");
    match replay_trace(&engine, &trace, ReplayOptions::default()) {
        Err(ReplayError::Disagreement(d)) => {
            println!("{d}");
            assert_eq!(d.step, at, "the disagreement is at the edited read-back");
        }
        other => panic!("a wrong expiry passed: {other:?}"),
    }
}

/// Rows the model gained that none of a step's statements wrote are a
/// defect of the export, never written by the harness: `BarrierOnly` with
/// the statements folded into its steps removed is malformed (in a trace
/// that carries `final_tables`, the format that lists folded statements).
#[test]
fn rows_no_statement_wrote_are_malformed() {
    let Some(engine) = engine_or_skip("replay_unexplained_rows", &data_dir()) else {
        return;
    };
    let mut traces = load("counterexamples");
    traces.retain(|t| t.name == n::BARRIER_ONLY);
    let mut trace = traces.pop().expect("the barrier-only counterexample");
    assert!(trace.final_tables.is_some(), "the corpus's current format");
    let folded_at = trace
        .steps
        .iter()
        .find(|s| {
            s.folded
                .iter()
                .any(|(stmt, _)| stmt.name == "index.insert_descriptors")
        })
        .map(|s| s.index)
        .expect("a step with the descriptor write folded into it");
    for step in &mut trace.steps {
        step.folded.clear();
    }
    match replay_trace(&engine, &trace, ReplayOptions::default()) {
        Err(ReplayError::Malformed { what, .. }) => {
            println!("{what}");
            assert!(what.starts_with(&format!("step {folded_at} ")), "{what}");
        }
        other => panic!("rows no statement wrote were accepted: {other:?}"),
    }
}

/// A read the model could not predict is counted (`model-unknown`), never
/// skipped silently; a read predicted neither way, and a tick without its
/// time, are malformed.
#[test]
fn unpredicted_reads_are_counted_and_malformed_steps_fail() {
    let Some(engine) = engine_or_skip("replay_unpredicted", &data_dir()) else {
        return;
    };
    let barrier_only = || {
        let mut traces = load("counterexamples");
        traces.retain(|t| t.name == n::BARRIER_ONLY);
        traces.pop().expect("the barrier-only counterexample")
    };
    let first = |trace: &mut Trace, verb: &str| -> usize {
        let step = trace
            .steps
            .iter_mut()
            .find(|s| s.verb == verb)
            .unwrap_or_else(|| panic!("a {verb} step"));
        step.predicted = serde_json::json!({ "unknown": "the model's simulation cannot tell" });
        step.index
    };
    let mut trace = barrier_only();
    first(&mut trace, "ReadVersionHead");
    let report =
        replay_trace(&engine, &trace, ReplayOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    println!("{report}");
    assert_eq!(
        report.untested.get(&Untested::ModelUnknown),
        Some(&1),
        "{report}"
    );
    for (verb, edit) in [
        ("ReadVersionHead", serde_json::json!({})),
        ("Tick", serde_json::json!({ "then": 1 })),
    ] {
        let mut trace = barrier_only();
        let at = first(&mut trace, verb);
        trace.steps[at - 1].predicted = edit;
        match replay_trace(&engine, &trace, ReplayOptions::default()) {
            Err(ReplayError::Malformed { what, .. }) => {
                println!("{what}");
                assert!(what.starts_with(&format!("step {at} ")), "{what}");
            }
            other => panic!("a malformed {verb} was accepted: {other:?}"),
        }
    }
}

/// A merge only removes rows: a row the engine holds and the model never
/// did fails the final comparison even where a ReplacingMergeTree merge
/// would hide it under a higher version. `BarrierOnly` with a stale
/// version-0 descriptor row of its pack written first (by the harness, as
/// an initial row the model's final tables do not list).
#[test]
fn a_row_the_model_never_held_fails_even_under_a_merge() {
    let Some(engine) = engine_or_skip("replay_merge_hides", &data_dir()) else {
        return;
    };
    let mut traces = load("counterexamples");
    traces.retain(|t| t.name == n::BARRIER_ONLY);
    let mut trace = traces.pop().expect("the barrier-only counterexample");
    let kept = trace
        .final_tables
        .as_ref()
        .and_then(|t| t.get("capture_raw"))
        .and_then(|rows| rows.first())
        .cloned()
        .expect("a descriptor row in the final tables");
    let stale = kept.replace("), 1)", "), 0)");
    assert_ne!(stale, kept, "the descriptor row is at version 1: {kept}");
    trace.initial_tables = Some([("capture_raw".to_owned(), vec![stale])].into());
    match replay_trace(&engine, &trace, ReplayOptions::default()) {
        Err(ReplayError::Disagreement(d)) => {
            println!("{d}");
            assert_eq!(d.step, trace.steps.len() + 1, "at the final tables: {d}");
            assert!(d.actual.contains("never held"), "{d}");
        }
        other => panic!("a row the model never held passed: {other:?}"),
    }
}
