//! The bounded exhaustive exploration: every machine, from a set of starts,
//! against catalogs in several states, with the answer at each step (and at
//! up to two steps of a run) replaced by every other shape it can take.

mod answers;
mod starts;

pub use answers::{Alt, Shape};
pub use starts::{PREFIX, SETUPS, Setup, starts};

use capcat_model_check::publication::config::TICK_NS;
use capcat_proto::{Step, Tables};

use crate::kit::{Failed, Side};
use crate::start::{Start, Started};
use crate::world::World;
use answers::{answer, draw_answer};
use starts::captures;

/// The most steps one machine may take in a case. capcat-proto's machines
/// end far sooner under the kit's attempt bounds; a driver that loops is
/// stopped here by the reference reaching `Done` first.
const MAX_STEPS: usize = 256;

/// One case: a start under a setup against a world, with the answers
/// varied at these steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    setup: usize,
    start: usize,
    world: World,
    varied: Vec<(usize, Alt)>,
}

impl Case {
    /// The case's name: `explore/<setup>/<start>/<world>[/<step>:<answer>]...`.
    pub fn name(&self) -> String {
        let cfg = (SETUPS[self.setup].config)();
        let start = starts(&cfg).get(self.start).map_or("?", |(name, _)| *name);
        let mut name = format!(
            "explore/{}/{start}/{}",
            SETUPS[self.setup].name,
            self.world.name()
        );
        for (step, alt) in &self.varied {
            name.push_str(&format!("/{step}:{}", alt.name()));
        }
        name
    }

    /// The case named `name`, when it is well formed (whether the
    /// exploration enumerates it is another matter: any variation of any
    /// step may be run by name).
    pub fn parse(name: &str) -> Option<Case> {
        let mut parts = name.split('/');
        if parts.next()? != "explore" {
            return None;
        }
        let setup_name = parts.next()?;
        let setup = SETUPS.iter().position(|s| s.name == setup_name)?;
        let start_name = parts.next()?;
        let cfg = (SETUPS[setup].config)();
        let start = starts(&cfg).iter().position(|(n, _)| *n == start_name)?;
        let world = World::from_name(parts.next()?)?;
        let mut varied = Vec::new();
        for part in parts {
            let (step, alt) = part.split_once(':')?;
            varied.push((step.parse().ok()?, Alt::from_name(alt)?));
        }
        Some(Case {
            setup,
            start,
            world,
            varied,
        })
    }

    /// The machine this case starts.
    pub fn machine(&self) -> &'static str {
        let cfg = (SETUPS[self.setup].config)();
        starts(&cfg)
            .get(self.start)
            .map_or("?", |(_, start)| start.machine())
    }

    /// Runs the case on `side`; returns the shape of every step and the
    /// kind of the outcome ([`outcome_kind`]).
    pub fn run(&self, side: &mut Side<'_>) -> Result<(Vec<Shape>, String), Failed> {
        let cfg = (SETUPS[self.setup].config)();
        let tables = Tables::new(PREFIX).map_err(|e| {
            Failed::Driver(crate::ConformError::BadMessage {
                what: e.to_string(),
            })
        })?;
        let start = starts(&cfg)
            .into_iter()
            .nth(self.start)
            .map(|(_, s)| s)
            .ok_or_else(|| {
                Failed::Driver(crate::ConformError::UnknownCase { name: self.name() })
            })?;
        let mut catalog = self.world.catalog(&cfg, &tables);
        catalog.captures = captures();
        let ttl_ticks = u8::try_from(cfg.lease_ttl_ns() / TICK_NS).unwrap_or(u8::MAX);
        let start_machine = start.machine();
        let mut open = side.open(Started {
            session: 0,
            tables: tables.clone(),
            config: cfg,
            start,
        })?;
        let mut shapes = Vec::new();
        for step in 0..MAX_STEPS {
            let alt = self
                .varied
                .iter()
                .find(|(at, _)| *at == step)
                .map(|(_, alt)| *alt);
            let (shape, input) = match &open.current {
                Step::Done(done) => return Ok((shapes, outcome_kind(start_machine, done))),
                Step::Draw { below } => (Shape::Draw { below: *below }, draw_answer(*below, alt)),
                Step::Execute(stmt) => {
                    let stmt = stmt.clone();
                    answer(&mut catalog, &tables, &stmt, alt, ttl_ticks)
                }
            };
            shapes.push(shape);
            side.feed(&mut open, input)?;
        }
        Ok((shapes, format!("{start_machine}: did not end")))
    }
}

/// Every case of the exploration, in the order the kit runs them. Learned
/// by running capcat-proto alone: a case's steps are known only once the
/// answers before them are.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (setup, config) in SETUPS.iter().enumerate() {
        let cfg = (config.config)();
        for (start, (_, machine)) in starts(&cfg).iter().enumerate() {
            // The schema machine reads the server's own tables, and the
            // others the protocol's: each runs against its own catalogs.
            let worlds: Vec<World> = match machine {
                Start::EnsureSchema => World::schema_worlds().collect(),
                _ => World::ALL.to_vec(),
            };
            for world in worlds {
                let base = Case {
                    setup,
                    start,
                    world,
                    varied: Vec::new(),
                };
                let shapes = solo_shapes(&base);
                out.push(base.clone());
                for (i, shape) in shapes.iter().enumerate() {
                    for alt in Alt::ALL.into_iter().filter(|a| a.fits(*shape)) {
                        let once = Case {
                            varied: vec![(i, alt)],
                            ..base.clone()
                        };
                        out.push(once.clone());
                        if !Alt::SECOND.contains(&alt) {
                            continue;
                        }
                        for (j, later) in solo_shapes(&once).iter().enumerate().skip(i + 1) {
                            for alt2 in Alt::SECOND.into_iter().filter(|a| a.fits(*later)) {
                                out.push(Case {
                                    varied: vec![(i, alt), (j, alt2)],
                                    ..base.clone()
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

fn solo_shapes(case: &Case) -> Vec<Shape> {
    // capcat-proto alone never fails to run a case: only a driver can.
    case.run(&mut Side::Solo)
        .map(|(shapes, _)| shapes)
        .unwrap_or_default()
}

/// What kind of outcome a done object holds, with the machine's name:
/// `publish ok won`, `acquire err held`; what the coverage tests count.
pub fn outcome_kind(machine: &str, done: &serde_json::Value) -> String {
    let outcome = &done["outcome"];
    if let Some(err) = outcome.get("err") {
        let kind = err["kind"].as_str().unwrap_or("?");
        // What an error wraps (a renewal's error, a refusal's diagnosis)
        // is part of its kind: each is a different path through a machine.
        let inner = err
            .get("source")
            .and_then(|s| s["kind"].as_str())
            .or_else(|| err["diagnosis"].as_str());
        return match inner {
            Some(inner) => format!("{machine} err {kind} {inner}"),
            None => format!("{machine} err {kind}"),
        };
    }
    // A publish's `ok` is an object of one key, its kind; a lease is an
    // object of several fields, and the other machines' `ok` is a number or
    // null.
    match outcome.get("ok") {
        Some(serde_json::Value::Object(ok)) if ok.len() == 1 => format!(
            "{machine} ok {}",
            ok.keys().next().map_or("?", String::as_str)
        ),
        Some(serde_json::Value::String(ok)) => format!("{machine} ok {ok}"),
        _ => format!("{machine} ok"),
    }
}
