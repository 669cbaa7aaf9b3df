//! What a replay found: the per-trace report, the reasons a prediction
//! could not be tested, and the first disagreement.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Why a prediction of the model was not compared with the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Untested {
    /// A liveness judgement (a `live` column, a fence) fell within the
    /// margin of a lease's expiry on the real clock.
    ExpiryBoundary,
    /// A read (or a guard) touched a table that a conditional INSERT had
    /// already written on the engine but not yet in the model (between its
    /// `EvaluateGuard` and its `LandRows`), or the statement itself was
    /// evaluated in such a window.
    InFlightWindow,
    /// The model evaluated the statement's guard in two reads; the engine
    /// ran it whole at the first.
    SplitEvaluation,
    /// The model never lands what the statement wrote (killed at its cap
    /// after its evaluation, or still in flight when the trace ends); the
    /// engine had run it whole.
    NeverLandedInModel,
    /// Rows the model wrote in a statement the trace does not carry (the
    /// index pass's `index.insert_descriptors`, folded into the step before
    /// it): the harness wrote them, so they prove nothing.
    FoldedStatement,
    /// The model's own simulation could not tell a read's result (the
    /// trace says `unknown` where rows would be): nothing to compare with.
    ModelUnknown,
}

impl Untested {
    /// Every reason, for reports.
    pub const ALL: [Untested; 6] = [
        Untested::ExpiryBoundary,
        Untested::InFlightWindow,
        Untested::SplitEvaluation,
        Untested::NeverLandedInModel,
        Untested::FoldedStatement,
        Untested::ModelUnknown,
    ];

    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            Untested::ExpiryBoundary => "expiry-boundary",
            Untested::InFlightWindow => "in-flight-window",
            Untested::SplitEvaluation => "split-evaluation",
            Untested::NeverLandedInModel => "never-landed-in-model",
            Untested::FoldedStatement => "folded-statement",
            Untested::ModelUnknown => "model-unknown",
        }
    }
}

/// Whether a counterexample's violation showed on the real tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reproduction {
    /// Observed on the engine: what was seen.
    Observed(String),
    /// Not observed: why (for a violation that needs a statement's
    /// evaluation and its landing to be apart, which the engine cannot be
    /// made to do at statement granularity).
    NotObserved(String),
}

/// What one trace's replay did.
#[derive(Clone, Debug)]
pub struct TraceReport {
    /// The trace.
    pub name: String,
    /// Steps replayed.
    pub steps: usize,
    /// Predictions compared with the engine (and equal).
    pub compared: usize,
    /// Predictions not compared, by reason.
    pub untested: BTreeMap<Untested, usize>,
    /// For a counterexample: its property and whether the engine shows it.
    pub reproduction: Option<(String, Reproduction)>,
    /// Every property check the replay runs on the real tables, with what
    /// each found (empty: nothing), whatever the trace claims to violate.
    pub checks: BTreeMap<String, Vec<String>>,
    /// The largest offset into a model tick a statement ran at (how far
    /// the real clock drifted from the model's within a tick).
    pub max_drift: Duration,
    /// Wall time of the replay.
    pub elapsed: Duration,
    /// Times the trace was replayed again after the harness fell behind
    /// the model's clock.
    pub retries: u32,
}

impl TraceReport {
    /// Predictions not compared, all reasons.
    pub fn untested_total(&self) -> usize {
        self.untested.values().sum()
    }
}

impl fmt::Display for TraceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} steps, {} predictions compared, {} untested",
            self.name,
            self.steps,
            self.compared,
            self.untested_total()
        )?;
        if !self.untested.is_empty() {
            let why: Vec<String> = self
                .untested
                .iter()
                .map(|(k, v)| format!("{}={v}", k.label()))
                .collect();
            write!(f, " ({})", why.join(" "))?;
        }
        write!(
            f,
            ", drift {} ms, {:.1} s",
            self.max_drift.as_millis(),
            self.elapsed.as_secs_f64()
        )?;
        if self.retries > 0 {
            write!(f, ", replayed {} more time(s) after drift", self.retries)?;
        }
        match &self.reproduction {
            Some((property, Reproduction::Observed(what))) => {
                write!(f, "\n  {property} violated on the engine: {what}")
            }
            Some((property, Reproduction::NotObserved(why))) => {
                write!(f, "\n  {property} NOT reproduced on the engine: {why}")
            }
            None => Ok(()),
        }
    }
}

/// The first step at which the engine and the model disagree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    /// The trace.
    pub trace: String,
    /// The 1-based step.
    pub step: usize,
    /// The model's action.
    pub action: String,
    /// The statement's SQL (or what the harness ran).
    pub sql: String,
    /// What the model predicted.
    pub predicted: String,
    /// What the engine did.
    pub actual: String,
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: step {} ({}) disagrees with the model\n  SQL: {}\n  predicted: {}\n  actual:    {}",
            self.trace, self.step, self.action, self.sql, self.predicted, self.actual
        )
    }
}

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The engine and the model disagree.
    #[error("{0}")]
    Disagreement(Box<Disagreement>),
    /// The engine refused a statement.
    #[error("{trace}: step {step} ({action}): the engine failed: {message}\n  SQL: {sql}")]
    Engine {
        /// The trace.
        trace: String,
        /// The 1-based step (0: setting the database up).
        step: usize,
        /// The model's action.
        action: String,
        /// The SQL.
        sql: String,
        /// The engine's error.
        message: String,
    },
    /// The replay got so far into a model tick that time values and
    /// liveness no longer map onto the model's clock (the machine is too
    /// loaded, or too many traces replay at once): a failure, never a pass.
    #[error(
        "{trace}: step {step}: the replay ran {drift_ms} ms into a model tick of {tick_ms} ms, \
         too close to the next tick for the time mapping to hold (too much load: replay fewer \
         traces at once)"
    )]
    Drift {
        /// The trace.
        trace: String,
        /// The 1-based step.
        step: usize,
        /// How far into the tick.
        drift_ms: u128,
        /// The tick.
        tick_ms: u128,
    },
    /// The trace document is not what the exporter writes.
    #[error("trace file {file}: {what}")]
    Malformed {
        /// The file.
        file: String,
        /// What is wrong.
        what: String,
    },
    /// A trace file could not be read.
    #[error("{path}: {message}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        message: String,
    },
}
