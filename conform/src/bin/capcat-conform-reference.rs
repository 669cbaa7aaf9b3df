//! The reference driver: capcat-proto's machines behind the driver
//! protocol (docs/native-writers.md). The kit runs against it in `cargo
//! xtask test`; it is also a worked example of a driver's loop.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::process::ExitCode;

use capcat_conform::ConformError;
use capcat_conform::start::{MACHINES, Reference, Started};
use capcat_conform::wire::{PROTOCOL_VERSION, input_from, step_json};
use capcat_proto::Step;
use serde_json::{Value as Json, json};

fn main() -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let hello = json!({ "hello": {
        "protocol": PROTOCOL_VERSION,
        "implementation": concat!("capcat-proto ", env!("CARGO_PKG_VERSION")),
        "machines": MACHINES,
    }});
    if writeln!(out, "{hello}").and_then(|()| out.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    let mut sessions: BTreeMap<u64, Box<dyn Reference>> = BTreeMap::new();
    for line in std::io::stdin().lock().lines() {
        let reply = line
            .map_err(|source| ConformError::Io {
                doing: "reading the kit's message",
                source,
            })
            .and_then(|line| {
                serde_json::from_str::<Json>(&line).map_err(|e| ConformError::BadMessage {
                    what: format!("not JSON ({e}): {line}"),
                })
            })
            .and_then(|message| answer(&mut sessions, &message));
        let reply = match reply {
            Ok(Some(reply)) => reply,
            Ok(None) => return ExitCode::SUCCESS,
            Err(e) => {
                let _ = writeln!(out, "{}", json!({ "error": e.to_string() }));
                let _ = out.flush();
                return ExitCode::FAILURE;
            }
        };
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            return ExitCode::FAILURE;
        }
    }
    // The kit closed our input without a bye.
    ExitCode::FAILURE
}

/// The reply to one message; `None` after `bye`.
fn answer(
    sessions: &mut BTreeMap<u64, Box<dyn Reference>>,
    message: &Json,
) -> Result<Option<Json>, ConformError> {
    if message.get("bye").is_some() {
        return Ok(None);
    }
    let (session, step) = if let Some(start) = message.get("start") {
        let started = Started::from_json(start)?;
        let mut machine = started.start.build(started.tables, started.config);
        let step = machine.poll();
        sessions.insert(started.session, machine);
        (started.session, step)
    } else {
        let (session, input) = input_from(message)?;
        let machine = sessions
            .get_mut(&session)
            .ok_or_else(|| ConformError::BadMessage {
                what: format!("an input for session {session}, which is not open"),
            })?;
        machine.handle(input);
        (session, machine.poll())
    };
    if matches!(step, Step::Done(_)) {
        // A finished session is forgotten: the kit opens a new one for its
        // next case, so the map stays as small as the sessions in flight.
        sessions.remove(&session);
    }
    Ok(Some(step_json(session, &step)))
}
