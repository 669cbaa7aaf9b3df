//! Every case against one driver, and the report a reader acts on.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use crate::corpus;
use crate::driver::{Driver, Hello};
use crate::error::ConformError;
use crate::explore::{self, Case};
use crate::kit::{Difference, Failed, Kit, Side};
use crate::walk::{self, Flavour};

/// What to run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The driver's command line (run with `sh -c`).
    pub driver: String,
    /// One case by name, or every case.
    pub case: Option<String>,
    /// How many seeded walks of each flavour (seeds `0..walks`).
    pub walks: u64,
    /// How long the driver may take to answer one message.
    pub timeout: Duration,
}

/// A run that ended with every case passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passed {
    /// The driver's name for itself.
    pub implementation: String,
    /// Exploration cases passed.
    pub explored: usize,
    /// Walks passed.
    pub walked: usize,
    /// Walks of the model's corpus replayed.
    pub replayed: usize,
    /// Steps of all walks.
    pub walk_steps: usize,
    /// Cases skipped because the driver does not implement their machine.
    pub skipped: usize,
    /// The machines the driver does not implement.
    pub missing: BTreeSet<String>,
}

impl Passed {
    /// The one-line summary.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "capcat-conform: {}: every case passed: {} explored, {} walks ({} steps), \
             {} corpus traces",
            self.implementation, self.explored, self.walked, self.walk_steps, self.replayed
        );
        if self.skipped > 0 {
            let _ = write!(
                out,
                "; {} cases skipped: the driver does not implement {}",
                self.skipped,
                self.missing.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        out
    }
}

/// Why a run did not pass.
#[derive(Debug)]
pub enum Verdict {
    /// A step differed: the report says which.
    Differs(Box<Difference>),
    /// The driver broke the protocol, crashed or hung in `case`.
    Broke {
        /// The case running, if any.
        case: Option<String>,
        /// What happened.
        error: ConformError,
    },
}

/// Every name [`run`] would run, in order: the exploration, then the walks.
pub fn names(walks: u64) -> Vec<String> {
    explore::cases()
        .iter()
        .map(Case::name)
        .chain(seeds(walks).into_iter().map(|(f, s)| walk::name(f, s)))
        .chain(corpus::names())
        .collect()
}

/// Every walk of a full run: each flavour, seeds `0..walks`.
fn seeds(walks: u64) -> Vec<(Flavour, u64)> {
    [Flavour::Publish, Flavour::Service]
        .into_iter()
        .flat_map(|f| (0..walks).map(move |s| (f, s)))
        .collect()
}

/// Runs `plan`; `progress` is told the cases done and due now and then.
pub fn run(plan: &Plan, mut progress: impl FnMut(usize, usize)) -> Result<Passed, Verdict> {
    let broke = |case: Option<String>| move |error| Verdict::Broke { case, error };
    // Resolve a named case before starting anything.
    let (cases, walks, traces): (Vec<Case>, Vec<(Flavour, u64)>, Vec<usize>) = match &plan.case {
        Some(name) => match (Case::parse(name), walk::parse(name), corpus::parse(name)) {
            (Some(case), _, _) => (vec![case], Vec::new(), Vec::new()),
            (None, Some(walk), _) => (Vec::new(), vec![walk], Vec::new()),
            (None, None, Some(trace)) => (Vec::new(), Vec::new(), vec![trace]),
            (None, None, None) => {
                return Err(Verdict::Broke {
                    case: None,
                    error: ConformError::UnknownCase { name: name.clone() },
                });
            }
        },
        None => (
            explore::cases(),
            seeds(plan.walks),
            (0..corpus::names().len()).collect(),
        ),
    };
    let (driver, hello) = Driver::spawn(&plan.driver, plan.timeout).map_err(broke(None))?;
    let Hello {
        implementation,
        machines,
    } = hello;
    let implemented: BTreeSet<&str> = machines.iter().map(String::as_str).collect();
    let missing: BTreeSet<String> = crate::start::MACHINES
        .iter()
        .filter(|m| !implemented.contains(*m))
        .map(|m| (*m).to_owned())
        .collect();
    let mut kit = Kit::new(driver);
    let total = cases.len() + walks.len() + traces.len();
    let mut passed = Passed {
        implementation,
        explored: 0,
        walked: 0,
        walk_steps: 0,
        replayed: 0,
        skipped: 0,
        missing,
    };
    let fail = |name: String| {
        move |failed| match failed {
            Failed::Differs(d) => Verdict::Differs(d),
            Failed::Driver(error) => Verdict::Broke {
                case: Some(name),
                error,
            },
        }
    };
    for (done, case) in cases.iter().enumerate() {
        if done % 2000 == 0 {
            progress(done, total);
        }
        if !implemented.contains(case.machine()) {
            passed.skipped += 1;
            continue;
        }
        let name = case.name();
        kit.begin(&name);
        case.run(&mut Side::Driver(&mut kit)).map_err(fail(name))?;
        passed.explored += 1;
    }
    for (i, (flavour, seed)) in walks.iter().enumerate() {
        if i % 50 == 0 {
            progress(cases.len() + i, total);
        }
        if !flavour.machines().iter().all(|m| implemented.contains(m)) {
            passed.skipped += 1;
            continue;
        }
        let name = walk::name(*flavour, *seed);
        kit.begin(&name);
        passed.walk_steps += walk::run(*flavour, *seed, &mut Side::Driver(&mut kit))
            .map_err(fail(name))?
            .steps;
        passed.walked += 1;
    }
    let replays = corpus::MACHINES.iter().all(|m| implemented.contains(m));
    for k in traces {
        if !replays {
            passed.skipped += 1;
            continue;
        }
        let name = format!("corpus/walks-shipped/{k}");
        kit.begin(&name);
        corpus::run(k, &mut Side::Driver(&mut kit)).map_err(fail(name))?;
        passed.replayed += 1;
    }
    progress(total, total);
    kit.finish().map_err(broke(None))?;
    Ok(passed)
}

/// The report of a run that did not pass, ending with the command that
/// replays the case.
pub fn report(verdict: &Verdict, driver: &str) -> String {
    let replay = |case: &str| {
        format!(
            "replay: capcat-conform --driver {} --case {}",
            shell_quote(driver),
            shell_quote(case)
        )
    };
    match verdict {
        Verdict::Differs(d) => {
            let pretty = |j| serde_json::to_string_pretty(j).unwrap_or_default();
            let mut out = format!("FAILED: case {}\n{}\n\ntrace so far:\n", d.case, d.what);
            for line in &d.trace {
                let _ = writeln!(out, "  {line}");
            }
            let _ = write!(
                out,
                "\nexpected (capcat-proto):\n{}\n\nactual (the driver):\n{}\n\n{}\n",
                pretty(&d.expected),
                pretty(&d.actual),
                replay(&d.case)
            );
            out
        }
        Verdict::Broke { case, error } => match case {
            Some(case) => format!("FAILED: case {case}\n{error}\n\n{}\n", replay(case)),
            None => format!("FAILED: {error}\n"),
        },
    }
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/:._-=".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
