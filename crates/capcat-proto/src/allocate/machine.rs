use std::collections::BTreeSet;

use uuid::Uuid;

use crate::config::{Config, jitter_window};
use crate::decode::{u64_at, uuid_at};
use crate::machine::{Input, Machine, Step};
use crate::statement::Rows;
use crate::tables::Tables;

use super::{AllocateError, sql};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum State {
    ReadHead,
    Draw { head: u64 },
    Insert { version: u64 },
    ReadBack { version: u64 },
    Done(Result<u64, AllocateError>),
}

/// Allocates one catalog version. Outcome: the version, owned by
/// `claim_id` alone, or why not.
///
/// Statements per uncontested allocation: `allocate.read_head`,
/// `allocate.insert_claim`, `allocate.read_claims` (plus one `Step::Draw`).
/// Bounded by [`Config::max_allocate_attempts`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Allocate {
    tables: Tables,
    cfg: Config,
    claim_id: Uuid,
    attempt: u32,
    state: State,
}

impl Allocate {
    /// Allocate a version claimed as `claim_id` (a fresh v4 UUID per
    /// allocation; never reused as a publish id).
    pub fn new(tables: Tables, cfg: Config, claim_id: Uuid) -> Self {
        Self {
            tables,
            cfg,
            claim_id,
            attempt: 0,
            state: State::ReadHead,
        }
    }

    /// The claim id this allocation writes.
    pub fn claim_id(&self) -> Uuid {
        self.claim_id
    }

    fn on_head(&self, rows: &Rows) -> State {
        let head = match rows.0.first() {
            Some(row) if rows.0.len() == 1 => u64_at(row, 0, "head"),
            _ => Err(crate::decode::BadRow(format!(
                "expected one row, got {}",
                rows.0.len()
            ))),
        };
        match head {
            Ok(head) => State::Draw { head },
            Err(bad) => State::Done(Err(AllocateError::Malformed {
                statement: "allocate.read_head",
                detail: bad.0,
            })),
        }
    }

    fn on_read_back(&mut self, version: u64, rows: &Rows) -> State {
        let mut ids = BTreeSet::new();
        for row in &rows.0 {
            match uuid_at(row, 0, "claim_id") {
                Ok(id) => {
                    ids.insert(id);
                }
                Err(bad) => {
                    return State::Done(Err(AllocateError::Malformed {
                        statement: "allocate.read_claims",
                        detail: bad.0,
                    }));
                }
            }
        }
        if ids.len() == 1 && ids.contains(&self.claim_id) {
            return State::Done(Ok(version));
        }
        self.attempt += 1;
        if self.attempt >= self.cfg.max_allocate_attempts() {
            State::Done(Err(AllocateError::Exhausted {
                attempts: self.attempt,
                last_version: version,
            }))
        } else {
            State::ReadHead
        }
    }

    /// The state after `state` handles `input`.
    fn next(&mut self, state: State, input: Input) -> State {
        let window = jitter_window(self.attempt);
        match (state, input) {
            (done @ State::Done(_), _) => done,
            (State::ReadHead, Input::Rows(rows)) => self.on_head(&rows),
            (State::ReadHead, Input::Failed(failure)) => {
                State::Done(Err(AllocateError::Statement {
                    statement: "allocate.read_head",
                    failure,
                }))
            }
            (State::Draw { head }, Input::Drawn(skip)) if skip < window => {
                match head.checked_add(1 + skip) {
                    Some(version) => State::Insert { version },
                    None => State::Done(Err(AllocateError::Malformed {
                        statement: "allocate.read_head",
                        detail: format!("head {head} leaves no version above it"),
                    })),
                }
            }
            // A failed claim INSERT may still land: the read-back decides.
            (State::Insert { version }, Input::Rows(_) | Input::Failed(_)) => {
                State::ReadBack { version }
            }
            (State::ReadBack { version }, Input::Rows(rows)) => self.on_read_back(version, &rows),
            (State::ReadBack { .. }, Input::Failed(failure)) => {
                State::Done(Err(AllocateError::Statement {
                    statement: "allocate.read_claims",
                    failure,
                }))
            }
            (State::Draw { .. }, input) => State::Done(Err(AllocateError::UnexpectedInput {
                expected: "a draw within the jitter window",
                got: input.describe(),
            })),
            (
                State::ReadHead | State::Insert { .. } | State::ReadBack { .. },
                input @ Input::Drawn(_),
            ) => State::Done(Err(AllocateError::UnexpectedInput {
                expected: "rows or a failure",
                got: input.describe(),
            })),
        }
    }
}

impl Machine for Allocate {
    type Outcome = Result<u64, AllocateError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        match &self.state {
            State::ReadHead => Step::Execute(sql::read_head(&self.tables)),
            State::Draw { .. } => Step::Draw {
                below: jitter_window(self.attempt),
            },
            State::Insert { version } => {
                Step::Execute(sql::insert_claim(&self.tables, *version, self.claim_id))
            }
            State::ReadBack { version } => Step::Execute(sql::read_claims(&self.tables, *version)),
            State::Done(outcome) => Step::Done(outcome.clone()),
        }
    }

    fn handle(&mut self, input: Input) {
        // The state is consumed by value and the transition names the next
        // one; `ReadHead` only holds the slot while it runs.
        let state = std::mem::replace(&mut self.state, State::ReadHead);
        self.state = self.next(state, input);
    }
}
