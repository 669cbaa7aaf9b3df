//! The model's trace corpus through a driver: every walk of the shipped
//! design in `tests/corpus/walks-shipped.json`, each publisher's machines
//! started as the model starts them and handed the answers the model gave.
//!
//! A corpus trace names each step's actor, the statement it sent and what
//! the model answered (rows, a write that ran, a write sent in flight), and
//! the jitter drawn before a claim; it does not name a machine's start. The
//! model builds those from a publisher's number, incarnation and pass
//! (`capcat_model_check::publication::model`), and so does the replay:
//! a publisher acquires (its incarnation's claim id, the lease it held),
//! then runs its index passes under the lease the acquire returned, and
//! starts over after a crash. Each statement of the trace must be the one
//! capcat-proto's machine asks for next; a trace the replay cannot follow
//! is reported as a kit error, never as the driver's difference. (The
//! counterexamples of the corpus are traces of the rejected designs, whose
//! statements are not capcat-proto's, so they are not replayed here.)

use capcat_model_check::publication::model::{descriptor, fresh_lease_id, holder, pass_seed};
use capcat_proto::statement::Value;
use capcat_proto::{Config, Input, Lease, Rows, Step, Tables};
use serde_json::Value as Json;
use uuid::Uuid;

use crate::error::ConformError;
use crate::kit::{Failed, Open, Side};
use crate::start::{Start, Started};
use crate::wire::statement_json;

/// The corpus's walks of the shipped design, compiled into the kit so it
/// runs from anywhere.
const WALKS: &str = include_str!("../../tests/corpus/walks-shipped.json");

/// The machines a corpus walk starts.
pub const MACHINES: [&str; 2] = ["acquire", "index_pass"];

fn broken(what: String) -> Failed {
    Failed::Driver(ConformError::Corpus { what })
}

fn walks() -> Result<Json, Failed> {
    serde_json::from_str(WALKS).map_err(|e| broken(format!("walks-shipped.json: {e}")))
}

/// The names of the corpus's walks: `corpus/walks-shipped/<k>`.
pub fn names() -> Vec<String> {
    let count = walks()
        .ok()
        .and_then(|w| w["walks"].as_array().map(Vec::len))
        .unwrap_or(0);
    (0..count)
        .map(|k| format!("corpus/walks-shipped/{k}"))
        .collect()
}

/// The walk number of a corpus case's name.
pub fn parse(name: &str) -> Option<usize> {
    name.strip_prefix("corpus/walks-shipped/")?.parse().ok()
}

/// One thing a publisher does in a trace.
#[derive(Debug)]
enum Event {
    /// The publisher crashed and restarted as a new incarnation.
    Crash,
    /// It drew this jitter value.
    Draw(u64),
    /// It sent this statement (name, parameters in the protocol's JSON,
    /// SQL text) and was answered so.
    Statement {
        name: String,
        params: Json,
        sql: String,
        answer: Input,
    },
}

/// A value as the corpus writes it, Rust's `Debug` of capcat-proto's
/// `Value`: `UInt64(1)`, `Uuid(…)`, `String("p0")`, `Int64(-1)`, `Null`.
fn value(text: &str) -> Option<Value> {
    if text == "Null" {
        return Some(Value::Null);
    }
    let (kind, rest) = text.split_once('(')?;
    let inner = rest.strip_suffix(')')?;
    Some(match kind {
        "UInt64" => Value::UInt64(inner.parse().ok()?),
        "Int64" => Value::Int64(inner.parse().ok()?),
        "Uuid" => Value::Uuid(Uuid::parse_str(inner).ok()?),
        // A Debug string is a JSON string but for `\u{..}` escapes, which
        // the model's short ASCII names never need.
        "String" => Value::String(serde_json::from_str(inner).ok()?),
        _ => return None,
    })
}

/// The answer the model gave, from a step's `predicted`.
fn answer(predicted: &Json) -> Result<Input, Failed> {
    if let Some(rows) = predicted.get("rows").and_then(Json::as_array) {
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let row = row
                .as_array()
                .ok_or_else(|| broken(format!("a row is not a list: {row}")))?;
            let values = row
                .iter()
                .map(|v| v.as_str().and_then(value))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| broken(format!("a row the replay cannot read: {row:?}")))?;
            out.push(values);
        }
        return Ok(Input::Rows(Rows(out)));
    }
    // A write that ran, or one sent in flight: the model hands its client
    // no rows once it lands (every flight of the shipped walks lands).
    if predicted.get("ran").is_some() || predicted.get("sent").is_some() {
        return Ok(Input::Rows(Rows::empty()));
    }
    Err(broken(format!(
        "an answer the replay cannot read: {predicted}"
    )))
}

/// Publisher number `i` of actor name `p<i>`.
fn publisher(actor: &str) -> Option<u8> {
    actor.strip_prefix('p')?.parse().ok()
}

/// The jitter an action names (`ClaimLease p0 (lease.insert_claim, jitter 3)`).
fn jitter(action: &str) -> Option<u64> {
    let (_, rest) = action.split_once("jitter ")?;
    rest.trim_end_matches(')').parse().ok()
}

/// Every publisher's events of walk `walk`, in trace order.
fn events(walk: &Json, sql: &[Json]) -> Result<Vec<(u8, Event)>, Failed> {
    let statement = |s: &Json, predicted: &Json| -> Result<Event, Failed> {
        let text = s["sql_ref"]
            .as_u64()
            .and_then(|k| sql.get(usize::try_from(k).ok()?))
            .and_then(Json::as_str)
            .ok_or_else(|| broken(format!("a statement without its SQL: {s}")))?;
        Ok(Event::Statement {
            name: s["name"].as_str().unwrap_or("?").to_owned(),
            params: s["params"].clone(),
            sql: text.to_owned(),
            answer: answer(predicted)?,
        })
    };
    let mut out = Vec::new();
    for step in walk["steps"].as_array().into_iter().flatten() {
        let Some(i) = step["actor"].as_str().and_then(publisher) else {
            continue;
        };
        let action = step["action"].as_str().unwrap_or("");
        if action.starts_with("CrashRestart") {
            out.push((i, Event::Crash));
            continue;
        }
        if let Some(n) = jitter(action) {
            out.push((i, Event::Draw(n)));
        }
        if !step["statement"].is_null() {
            out.push((i, statement(&step["statement"], &step["predicted"])?));
        }
        for folded in step["folded"].as_array().into_iter().flatten() {
            out.push((i, statement(folded, &folded["predicted"])?));
        }
    }
    Ok(out)
}

/// What a publisher runs next, as the model's lifecycle has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Acquire,
    Pass(u8),
    Done,
}

/// A publisher of the replay: where it is in its lifecycle and the machine
/// it runs.
struct Publisher {
    i: u8,
    incarnation: u8,
    rounds: u8,
    held: Option<Lease>,
    phase: Phase,
    open: Option<Open>,
}

/// The model configuration's numbers the lifecycle depends on, read from
/// the corpus's `config` (the Debug text of a `ModelConfig`).
struct Lifecycle {
    acquire_rounds: u8,
    passes: u8,
    packs_per_pass: u8,
}

fn number(config: &str, key: &str) -> Result<u8, Failed> {
    let at = config
        .find(&format!("{key}: "))
        .ok_or_else(|| broken(format!("the corpus config has no `{key}`")))?;
    config[at + key.len() + 2..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .map_err(|_| broken(format!("the corpus config's `{key}` is not a number")))
}

impl Publisher {
    /// The start of this publisher's next machine.
    fn next_start(&mut self, life: &Lifecycle) -> Option<Start> {
        match self.phase {
            Phase::Acquire if self.rounds < life.acquire_rounds => {
                self.rounds += 1;
                Some(Start::Acquire {
                    holder: holder(self.i),
                    held: self.held.clone(),
                    fresh_lease_id: fresh_lease_id(self.i, self.incarnation, 0),
                })
            }
            Phase::Pass(pass) => Some(Start::IndexPass {
                lease: self.held.clone()?,
                descriptors: (0..life.packs_per_pass)
                    .map(|k| descriptor(self.i, pass, k))
                    .collect(),
                id_seed: pass_seed(self.i, self.incarnation, pass),
            }),
            _ => None,
        }
    }

    /// Moves on after the machine of `phase` ended with `done`.
    fn finished(&mut self, life: &Lifecycle, done: &Json, lease: Option<Lease>) {
        let err_kind = done["outcome"]["err"]["kind"].as_str();
        self.phase = match self.phase {
            Phase::Acquire => match lease {
                Some(lease) => {
                    self.held = Some(lease);
                    Phase::Pass(0)
                }
                None => Phase::Acquire,
            },
            Phase::Pass(pass) => {
                if let Some(lease) = lease {
                    self.held = Some(lease);
                }
                // A pass that failed under a lease it still holds runs again.
                let again = err_kind.is_some_and(|k| k != "lease_lost");
                if again && pass + 1 < life.passes {
                    Phase::Pass(pass + 1)
                } else {
                    Phase::Done
                }
            }
            Phase::Done => Phase::Done,
        };
    }
}

/// Runs corpus walk `k` on `side`; returns the events replayed.
pub fn run(k: usize, side: &mut Side<'_>) -> Result<usize, Failed> {
    replay(&walks()?, k, side)
}

/// Runs walk `k` of `corpus` (a walks file of the trace corpus) on `side`.
pub fn replay(corpus: &Json, k: usize, side: &mut Side<'_>) -> Result<usize, Failed> {
    let config = corpus["config"].as_str().unwrap_or("");
    let life = Lifecycle {
        acquire_rounds: number(config, "acquire_rounds")?,
        passes: number(config, "passes")?,
        packs_per_pass: number(config, "packs_per_pass")?,
    };
    let ttl_ticks = number(config, "ttl_ticks")?;
    let cap_ticks = number(config, "cap_ticks")?;
    let tick = capcat_model_check::publication::config::TICK_NS;
    // The model's protocol configuration at its scale: its attempts
    // bounds, a chunk and an insert of one row, no slack.
    let attempts = config
        .split_once("attempts: (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(list, _)| {
            list.split(", ")
                .filter_map(|n| n.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let [claim, allocate, publish] = attempts[..] else {
        return Err(broken("the corpus config has no attempts".to_owned()));
    };
    let cfg = Config::new(u64::from(ttl_ticks) * tick, u64::from(cap_ticks) * tick)
        .and_then(|c| c.with_fence_slack_ns(0))
        .and_then(|c| c.with_attempts(claim, allocate, publish))
        .and_then(|c| c.with_chunk(1))
        .and_then(|c| c.with_insert_rows(1))
        .map_err(|e| broken(format!("the corpus config: {e}")))?;
    let tables = Tables::new("m").map_err(|e| broken(e.to_string()))?;
    let sql: Vec<Json> = corpus["sql"].as_array().cloned().unwrap_or_default();
    let walk = corpus["walks"]
        .get(k)
        .ok_or_else(|| broken(format!("the corpus has no walk {k}")))?;
    let events = events(walk, &sql)?;
    let mut publishers: Vec<Publisher> = Vec::new();
    for (n, (i, event)) in events.iter().enumerate() {
        let at = |what: String| broken(format!("walk {k}, event {n} (publisher p{i}): {what}"));
        while publishers.len() <= usize::from(*i) {
            let i = u8::try_from(publishers.len()).unwrap_or(u8::MAX);
            publishers.push(Publisher {
                i,
                incarnation: 0,
                rounds: 0,
                held: None,
                phase: Phase::Acquire,
                open: None,
            });
        }
        let p = &mut publishers[usize::from(*i)];
        if let Event::Crash = event {
            // The old incarnation's session is left open in the driver, as
            // a crashed process leaves its work: nothing is fed to it again.
            *p = Publisher {
                i: p.i,
                incarnation: p.incarnation + 1,
                rounds: 0,
                held: None,
                phase: Phase::Acquire,
                open: None,
            };
            continue;
        }
        // Finish machines that are done and start the next, until one
        // asks for something.
        let mut bound = 0;
        loop {
            bound += 1;
            if bound > 8 {
                return Err(at("no machine of the lifecycle asks for it".to_owned()));
            }
            if let Some(open) = p.open.as_mut() {
                let Step::Done(done) = &open.current else {
                    break;
                };
                let done = done.clone();
                let lease = open.ended().lease;
                p.finished(&life, &done, lease);
                p.open = None;
            }
            let start = p
                .next_start(&life)
                .ok_or_else(|| at(format!("the publisher is {:?} and starts nothing", p.phase)))?;
            p.open = Some(side.open(Started {
                session: 0,
                tables: tables.clone(),
                config: cfg.clone(),
                start,
            })?);
        }
        let Some(open) = p.open.as_mut() else {
            return Err(at("no open machine".to_owned()));
        };
        let input = match (event, &open.current) {
            (Event::Draw(n), Step::Draw { .. }) => Input::Drawn(*n),
            (
                Event::Statement {
                    name,
                    params,
                    sql,
                    answer,
                },
                Step::Execute(stmt),
            ) => {
                let sent = statement_json(stmt);
                if stmt.name != name || &sent["params"] != params || &stmt.sql != sql {
                    return Err(at(format!(
                        "the trace has {name}, capcat-proto asks for {} (is the corpus \
                         current? `cargo xtask corpus --check`)",
                        stmt.name
                    )));
                }
                answer.clone()
            }
            (event, step) => {
                return Err(at(format!(
                    "the trace has {event:?}, capcat-proto's machine is at {step:?}"
                )));
            }
        };
        side.feed(open, input)?;
    }
    Ok(events.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_walk_of_the_corpus_replays_on_capcat_proto_alone() {
        let corpus = walks().expect("the compiled-in corpus parses");
        let count = corpus["walks"].as_array().map_or(0, Vec::len);
        assert_eq!(count, names().len());
        assert!(count >= 20, "{count}");
        let mut events = 0;
        for k in 0..count {
            events += replay(&corpus, k, &mut Side::Solo).expect("replays");
        }
        // Every publisher step of every walk was followed.
        assert!(events > 20 * 10, "{events}");
    }

    #[test]
    fn a_trace_that_capcat_proto_would_not_send_is_a_kit_error() {
        let mut corpus = walks().expect("parses");
        // The first claim of the first walk now names another term.
        let steps = corpus["walks"][0]["steps"].as_array_mut().expect("steps");
        let claim = steps
            .iter_mut()
            .find(|s| s["statement"]["name"] == "lease.insert_claim")
            .expect("a claim");
        claim["statement"]["params"]["term"]["value"] = Json::String("99".to_owned());
        match replay(&corpus, 0, &mut Side::Solo) {
            Err(Failed::Driver(ConformError::Corpus { what })) => {
                assert!(what.contains("lease.insert_claim"), "{what}");
            }
            other => panic!("expected a corpus error, got {other:?}"),
        }
    }
}
