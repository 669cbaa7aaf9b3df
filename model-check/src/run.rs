//! Running a checker: the figures every run prints, and counterexamples as
//! numbered traces of actions.

use std::collections::hash_map::{DefaultHasher, Entry};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::{Debug, Display};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use stateright::{Checker, HasDiscoveries, Model};

/// How to run a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Checker threads. One thread makes breadth-first search return the
    /// SHORTEST counterexample, which is what the variant tests pin.
    pub threads: usize,
    /// Stop at the first counterexample instead of exploring everything.
    pub stop_at_first: bool,
    /// Print progress to stderr this often (`None`: never).
    pub progress: Option<Duration>,
    /// Depth-first instead of breadth-first: memory grows with the depth,
    /// not the frontier, for runs too large for BFS (traces are then not
    /// the shortest; the printed trace is still recomputed breadth-first).
    pub depth_first: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            threads: 1,
            stop_at_first: false,
            progress: None,
            depth_first: false,
        }
    }
}

/// What a run found.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckReport {
    /// States generated, repeats included.
    pub states: usize,
    /// Unique states.
    pub unique_states: usize,
    /// Deepest level explored.
    pub max_depth: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Whether the state space was explored to the end.
    pub complete: bool,
    /// Each violated property, with its counterexample as a numbered trace.
    pub counterexamples: BTreeMap<&'static str, Vec<String>>,
}

impl CheckReport {
    /// Whether every property held.
    pub fn holds(&self) -> bool {
        self.counterexamples.is_empty()
    }

    /// Unique states per second.
    pub fn states_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.unique_states as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// The figures line every run prints.
    pub fn figures(&self) -> String {
        format!(
            "states={} unique={} depth={} seconds={:.2} states/s={:.0}{}",
            self.states,
            self.unique_states,
            self.max_depth,
            self.seconds,
            self.states_per_second(),
            if self.complete {
                ""
            } else {
                " (stopped at the first counterexample)"
            }
        )
    }

    /// The report as text: figures, then each counterexample.
    pub fn render(&self) -> String {
        let mut out = self.figures();
        out.push('\n');
        if self.holds() {
            out.push_str("every property holds\n");
        }
        for (property, trace) in &self.counterexamples {
            out.push_str(&format!(
                "COUNTEREXAMPLE to {property} ({} steps):\n",
                trace.len()
            ));
            for line in trace {
                out.push_str("  ");
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// Checks every property of `model` with breadth-first search.
pub fn check<M>(model: M, opts: RunOptions) -> CheckReport
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync,
    M::Action: Clone + Debug + PartialEq + Display + Send + Sync,
{
    let start = Instant::now();
    let mut builder = model.checker().threads(opts.threads.max(1));
    if opts.stop_at_first {
        builder = builder.finish_when(HasDiscoveries::AnyFailures);
    }
    if opts.depth_first {
        let checker = builder.spawn_dfs();
        return finish(checker, opts, start);
    }
    let checker = builder.spawn_bfs();
    finish(checker, opts, start)
}

fn finish<M, C>(checker: C, opts: RunOptions, start: Instant) -> CheckReport
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync,
    M::Action: Clone + Debug + PartialEq + Display + Send + Sync,
    C: Checker<M>,
{
    if let Some(every) = opts.progress {
        let mut next = every;
        while !checker.is_done() {
            std::thread::sleep(Duration::from_millis(200));
            if start.elapsed() >= next {
                next += every;
                eprintln!(
                    "[{:>6.0}s] states={} unique={} depth={}",
                    start.elapsed().as_secs_f64(),
                    checker.state_count(),
                    checker.unique_state_count(),
                    checker.max_depth()
                );
            }
        }
    }
    let checker = checker.join();
    let seconds = start.elapsed().as_secs_f64();
    let mut counterexamples = BTreeMap::new();
    for (name, path) in checker.discoveries() {
        // stateright overwrites an `always` discovery with later (longer)
        // paths to states that fail too, so the trace printed is recomputed
        // here as the SHORTEST path to a failing state.
        let actions = shortest_counterexample(checker.model(), name, SHORTEST_SEARCH_LIMIT)
            .unwrap_or_else(|| path.into_actions());
        counterexamples.insert(name, numbered(&actions));
    }
    CheckReport {
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        seconds,
        complete: counterexamples.is_empty() || !opts.stop_at_first,
        counterexamples,
    }
}

/// How many states the shortest-counterexample search visits at most.
pub const SHORTEST_SEARCH_LIMIT: usize = 20_000_000;

/// Actions as a numbered trace.
pub fn numbered<A: Display>(actions: &[A]) -> Vec<String> {
    actions
        .iter()
        .enumerate()
        .map(|(i, a)| format!("{:>2}. {a}", i + 1))
        .collect()
}

fn fingerprint<T: Hash>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// The shortest path (breadth-first, single-threaded) from an initial
/// state to a state where the `always` property `property` fails, visiting
/// at most `limit` states. `None` if there is none within the limit.
pub fn shortest_counterexample<M>(model: &M, property: &str, limit: usize) -> Option<Vec<M::Action>>
where
    M: Model,
    M::State: Hash,
    M::Action: Clone,
{
    let condition = model
        .properties()
        .into_iter()
        .find(|p| p.name == property)?
        .condition;
    let mut parents: HashMap<u64, Option<(u64, M::Action)>> = HashMap::new();
    let mut queue = VecDeque::new();
    for s in model.init_states() {
        let fp = fingerprint(&s);
        if parents.insert(fp, None).is_none() {
            queue.push_back((s, fp));
        }
    }
    while let Some((s, fp)) = queue.pop_front() {
        if !condition(model, &s) {
            let mut actions = Vec::new();
            let mut at = fp;
            while let Some(Some((parent, action))) = parents.get(&at) {
                actions.push(action.clone());
                at = *parent;
            }
            actions.reverse();
            return Some(actions);
        }
        if parents.len() > limit {
            return None;
        }
        let mut actions = Vec::new();
        model.actions(&s, &mut actions);
        for action in actions {
            if let Some(next) = model.next_state(&s, action.clone()) {
                let nfp = fingerprint(&next);
                if let Entry::Vacant(e) = parents.entry(nfp) {
                    e.insert(Some((fp, action)));
                    queue.push_back((next, nfp));
                }
            }
        }
    }
    None
}
