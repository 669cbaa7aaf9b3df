//! Sessions in lockstep: the driver's machine and capcat-proto's, started
//! alike and handed the same inputs, compared at every step.

use capcat_proto::{Input, Statement, Step};
use serde_json::Value as Json;

use crate::driver::Driver;
use crate::error::ConformError;
use crate::outcome::normalise;
use crate::start::{Ended, Reference, Started};
use crate::wire::{input_json, step_json, step_kind, u64_field};

/// The first step at which the driver and capcat-proto differ.
#[derive(Clone, Debug)]
pub struct Difference {
    /// The case it happened in.
    pub case: String,
    /// What the kit sent and the driver answered so far, one line each.
    pub trace: Vec<String>,
    /// What differs, in words.
    pub what: String,
    /// capcat-proto's step.
    pub expected: Json,
    /// The driver's step.
    pub actual: Json,
}

/// Why a case did not pass.
#[derive(Debug)]
pub enum Failed {
    /// The driver took another step than capcat-proto.
    Differs(Box<Difference>),
    /// The driver broke the protocol, crashed or hung.
    Driver(ConformError),
}

impl From<ConformError> for Failed {
    fn from(e: ConformError) -> Self {
        Failed::Driver(e)
    }
}

/// The kit's side of a driver: session numbers and the running trace.
#[derive(Debug)]
pub struct Kit {
    driver: Driver,
    next_session: u64,
    /// The case being run and its trace.
    case: String,
    trace: Vec<String>,
}

/// One open session: the reference machine and its current step, which
/// the driver's matched.
pub struct Open {
    session: u64,
    reference: Box<dyn Reference>,
    /// The step both sides are at.
    pub current: Step<Json>,
}

impl std::fmt::Debug for Open {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Open")
            .field("session", &self.session)
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

impl Open {
    /// The statement the session waits on, if it waits on one.
    pub fn statement(&self) -> Option<&Statement> {
        match &self.current {
            Step::Execute(stmt) => Some(stmt),
            _ => None,
        }
    }

    /// Whether the machine is done.
    pub fn done(&self) -> bool {
        matches!(self.current, Step::Done(_))
    }

    /// What the finished machine leaves its caller.
    pub fn ended(&mut self) -> Ended {
        self.reference.ended()
    }

    /// capcat-proto's machine alone, with no driver beside it: how the kit
    /// learns a case's steps before it enumerates the answers to vary.
    pub fn solo(started: &Started) -> Self {
        let mut reference = started
            .start
            .build(started.tables.clone(), started.config.clone());
        let current = reference.poll();
        Self {
            session: started.session,
            reference,
            current,
        }
    }

    /// Hands `input` to a [`Open::solo`] machine.
    pub fn feed_solo(&mut self, input: Input) {
        self.reference.handle(input);
        self.current = self.reference.poll();
    }
}

/// Where a case runs: capcat-proto alone, or in lockstep with a driver.
#[derive(Debug)]
pub enum Side<'a> {
    /// capcat-proto alone.
    Solo,
    /// Beside a driver.
    Driver(&'a mut Kit),
}

impl Side<'_> {
    /// Starts a machine.
    pub fn open(&mut self, started: Started) -> Result<Open, Failed> {
        match self {
            Side::Solo => Ok(Open::solo(&started)),
            Side::Driver(kit) => kit.open(started),
        }
    }

    /// Hands `input` to an open machine.
    pub fn feed(&mut self, open: &mut Open, input: Input) -> Result<(), Failed> {
        match self {
            Side::Solo => {
                open.feed_solo(input);
                Ok(())
            }
            Side::Driver(kit) => kit.feed(open, input),
        }
    }
}

impl Kit {
    /// A kit over a started driver.
    pub fn new(driver: Driver) -> Self {
        Self {
            driver,
            next_session: 1,
            case: String::new(),
            trace: Vec::new(),
        }
    }

    /// Starts a new case: its name heads any difference's report.
    pub fn begin(&mut self, case: &str) {
        self.case = case.to_owned();
        self.trace.clear();
    }

    /// Ends the run, telling the driver goodbye.
    pub fn finish(self) -> Result<(), ConformError> {
        self.driver.finish()
    }

    /// Starts `started`'s machine on both sides (its session number is
    /// assigned here) and compares the first step.
    pub fn open(&mut self, mut started: Started) -> Result<Open, Failed> {
        started.session = self.next_session;
        self.next_session += 1;
        let reference = started
            .start
            .build(started.tables.clone(), started.config.clone());
        let message = started.to_json();
        self.trace.push(format!(
            "kit:    start session {} {} {}",
            started.session,
            started.start.machine(),
            started.start.args_json()
        ));
        self.driver.send(&message)?;
        let mut open = Open {
            session: started.session,
            reference,
            current: Step::Done(Json::Null),
        };
        self.compare_next(&mut open)?;
        Ok(open)
    }

    /// Hands `input` to both sides of `open` and compares the next step.
    pub fn feed(&mut self, open: &mut Open, input: Input) -> Result<(), Failed> {
        let message = input_json(open.session, &input);
        self.trace.push(format!("kit:    {message}"));
        open.reference.handle(input);
        self.driver.send(&message)?;
        self.compare_next(open)
    }

    fn compare_next(&mut self, open: &mut Open) -> Result<(), Failed> {
        let expected_step = open.reference.poll();
        let expected = step_json(open.session, &expected_step);
        let actual = self.driver.recv("waiting for a step")?;
        self.trace.push(format!("driver: {}", summary(&actual)));
        if let Some(what) = difference(&expected, &actual) {
            return Err(Failed::Differs(Box::new(Difference {
                case: self.case.clone(),
                trace: self.trace.clone(),
                what,
                expected,
                actual,
            })));
        }
        open.current = expected_step;
        Ok(())
    }
}

/// A step in a line of the trace: its kind and, for a statement, its name.
fn summary(step: &Json) -> String {
    match step_kind(step) {
        Some("execute") => format!(
            "execute {}",
            step["execute"]["name"].as_str().unwrap_or("(no name)")
        ),
        Some("draw") => format!("draw below {}", step["draw"]["below"]),
        Some("done") => format!("done {}", step["done"]),
        _ => format!("(not a step) {step}"),
    }
}

/// The first way `actual` differs from `expected`, in words, after the
/// documented normalisation; `None` when they agree.
pub fn difference(expected: &Json, actual: &Json) -> Option<String> {
    let session = u64_field(expected, "session").ok();
    if u64_field(actual, "session").ok() != session {
        return Some(format!(
            "the step names session {}, the kit is waiting on session {}",
            actual.get("session").unwrap_or(&Json::Null),
            session.unwrap_or(0)
        ));
    }
    let (want, got) = (step_kind(expected), step_kind(actual));
    if want != got {
        return Some(format!(
            "the step is {}, capcat-proto's is {}",
            got.unwrap_or("not a step"),
            want.unwrap_or("not a step")
        ));
    }
    let kind = want?;
    let (e, a) = (&expected[kind], &actual[kind]);
    match kind {
        "execute" => {
            let name = e["name"].as_str().unwrap_or("?");
            ["name", "sql", "params", "settings", "expect", "data"]
                .into_iter()
                .find(|key| e.get(*key) != a.get(*key))
                .map(|key| {
                    format!(
                        "statement {name}: {}",
                        field_difference(key, e.get(key), a.get(key))
                    )
                })
        }
        "draw" => (e != a).then(|| {
            format!(
                "draw bound {} where capcat-proto draws {}",
                a["below"], e["below"]
            )
        }),
        _ => {
            let (mut e, mut a) = (e.clone(), a.clone());
            normalise(&mut e);
            normalise(&mut a);
            (e != a).then(|| "the outcome differs (after normalisation)".to_owned())
        }
    }
}

fn field_difference(key: &str, e: Option<&Json>, a: Option<&Json>) -> String {
    match (key, e.and_then(Json::as_str), a.and_then(Json::as_str)) {
        ("sql", Some(e), Some(a)) => {
            let at = e
                .bytes()
                .zip(a.bytes())
                .position(|(x, y)| x != y)
                .unwrap_or(e.len().min(a.len()));
            let from = floor_char(e, at.saturating_sub(40));
            let from_a = floor_char(a, at.saturating_sub(40));
            format!(
                "the SQL text differs at byte {at}:\n  expected …{}\n  actual   …{}",
                excerpt(e, from),
                excerpt(a, from_a)
            )
        }
        ("params", _, _) => {
            let names = |j: Option<&Json>| {
                j.and_then(Json::as_object)
                    .map(|m| m.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default()
            };
            let (en, an) = (names(e), names(a));
            let first = en
                .iter()
                .chain(an.iter())
                .find(|k| e.and_then(|e| e.get(k.as_str())) != a.and_then(|a| a.get(k.as_str())));
            match first {
                Some(k) => format!(
                    "parameter `{k}`: expected {}, actual {}",
                    e.and_then(|e| e.get(k.as_str())).unwrap_or(&Json::Null),
                    a.and_then(|a| a.get(k.as_str())).unwrap_or(&Json::Null)
                ),
                None => "the parameters differ".to_owned(),
            }
        }
        _ => format!(
            "`{key}`: expected {}, actual {}",
            e.unwrap_or(&Json::Null),
            a.unwrap_or(&Json::Null)
        ),
    }
}

fn floor_char(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn excerpt(s: &str, from: usize) -> String {
    s[from..].chars().take(100).collect()
}
