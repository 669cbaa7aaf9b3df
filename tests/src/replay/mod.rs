//! Trace replay: the model's traces (`tests/corpus/`) run step by step on
//! the embedded engine, every result compared with the model's prediction.
//!
//! **What is replayed.** Each trace runs in a fresh database holding
//! capcat-proto's schema under the model's prefix (`m`), so every
//! statement's SQL runs exactly as the trace stores it: no text is
//! rewritten (the mutation check alone cuts the lease fence out, and says
//! so). Parameters go to the engine in the text form the trace stores.
//! Every actor's statement takes a pooled connection of its own; a trace's
//! steps run one after another, as the model orders them, so connections
//! carry no state between them. Traces replay in parallel, one database
//! each.
//!
//! **Time** ([`clock`]). One model tick is `ttl_ns / ttl_ticks` of the
//! exported configuration (checked against the model's `TICK_NS`: 1 s).
//! Model time `t` runs at real `origin + t·tick + offset`; a `Tick` to `t`
//! sleeps to the boundary plus the furthest offset reached in tick
//! `t - ttl` plus a guard, so a lease stamped at tick `s` is expired on the
//! engine from tick `s + ttl` on, and live before, as in the model. Time-valued columns
//! (`*_at_ns`) compare in whole ticks from the origin. A liveness
//! judgement (a `live` column, a fence, a release guard) whose real time is
//! within [`clock::MARGIN`] of any lease expiry is not compared
//! ([`Untested::ExpiryBoundary`]).
//!
//! **Split statements.** The model evaluates a conditional INSERT's guard
//! (`EvaluateGuard`) apart from landing its rows (`LandRows`); the engine
//! cannot be made to. The replay runs the statement whole at its first
//! `EvaluateGuard`, compares the guard's verdict there (rows or none, and
//! whether its lease was the live head, read from the real lease table just
//! before), and compares the rows it landed with the rows the model lands at
//! `LandRows`. Between the two, the engine holds rows the model does not:
//! every read (or guard) that touches that table is not compared
//! ([`Untested::InFlightWindow`]). A guard the model reads in two steps
//! (the rejected two-subquery fence) ran whole at the first
//! ([`Untested::SplitEvaluation`]). A statement the model kills at its cap
//! after evaluating it, or that is still in flight when the trace ends, had
//! already landed on the engine: [`Untested::NeverLandedInModel`], never a
//! pass. Such a counterexample (the violation IS the late landing) is
//! reported as not reproduced, with the reason.
//!
//! **Folded statements.** The model runs the index pass's
//! `index.read_committed` and `index.insert_descriptors` together with the
//! step before them; the exporter lists them in the step's `folded`, and
//! the replay runs them after the step's own statement and compares them
//! the same way. (In traces exported before `folded` and `final_tables`
//! existed, the rows those writes add are written by the harness,
//! [`Untested::FoldedStatement`], and the read is not replayed; in a trace
//! with `final_tables`, rows no statement of the step wrote are
//! [`ReplayError::Malformed`].) The
//! reader's statements are not in the trace: [`reader`] builds them with
//! capcat-proto's reader machine, as the model does. A foreign writer's rows
//! and the model's initial rows (`initial_tables`) are written by the
//! harness, as the model holds them.
//!
//! **Ids** are fixed by the trace (lease ids, claim ids, publish ids), so
//! rows compare exactly apart from time values. At the end the model's
//! tables (`final_tables`; in older traces the union of every step's gains
//! and the initial rows) are compared with the engine's, rows the model
//! never landed set aside; in ReplacingMergeTree tables every engine row
//! must be one of the model's (a merge only removes rows), then both
//! compare as a merge leaves them.
//!
//! **Counterexamples.** The property the model says fails is then looked
//! for on the real tables ([`Reproduction`]).

pub mod atoms;
pub mod clock;
pub mod db;
pub mod reader;
pub mod report;
pub mod run;
pub mod trace;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use capcat_chdb::Engine;

pub use report::{Disagreement, ReplayError, Reproduction, TraceReport, Untested};
pub use run::{CHECKED_PROPERTIES, ReplayOptions, replay_trace};
pub use trace::{Trace, read_traces};

/// Every trace file under `dir` (recursively), sorted.
pub fn corpus_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    // Bounded by the corpus's depth: two levels today.
    while let Some(d) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                pending.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Times a trace is replayed again after the harness fell behind the
/// model's clock (`ReplayError::Drift`: load, not a disagreement).
pub const DRIFT_RETRIES: u32 = 3;

/// [`replay_trace`], replayed again (in a fresh database) up to
/// [`DRIFT_RETRIES`] times when the harness could not keep the model's
/// timing. Only drift is retried: a disagreement never is.
pub fn replay_with_retries(
    engine: &Engine,
    trace: &Trace,
    options: ReplayOptions,
) -> Result<TraceReport, ReplayError> {
    let mut retries = 0;
    loop {
        match replay_trace(engine, trace, options) {
            Err(error @ ReplayError::Drift { .. }) if retries < DRIFT_RETRIES => {
                tracing::warn!(%error, "replaying the trace again");
                println!("{error}; replaying it again");
                retries += 1;
            }
            Ok(mut report) => {
                report.retries = retries;
                return Ok(report);
            }
            other => return other,
        }
    }
}

/// Replays `traces` on `threads` threads; one result per trace, in order.
pub fn replay_all(
    engine: &Engine,
    traces: &[Trace],
    threads: usize,
    options: ReplayOptions,
) -> Vec<Result<TraceReport, ReplayError>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<TraceReport, ReplayError>>>> =
        Mutex::new((0..traces.len()).map(|_| None).collect());
    // A replay thread's panic is re-raised by `thread::scope` when it
    // joins, so after it every slot is filled and the lock unpoisoned.
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(trace) = traces.get(i) else {
                        break;
                    };
                    let result = replay_with_retries(engine, trace, options);
                    match &result {
                        Ok(report) => tracing::info!(%report, "trace replayed"),
                        Err(error) => tracing::warn!(%error, "trace replay failed"),
                    }
                    results.lock().expect("no replay thread panicked")[i] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("no replay thread panicked")
        .into_iter()
        .map(|r| r.expect("every trace was replayed by some thread"))
        .collect()
}
