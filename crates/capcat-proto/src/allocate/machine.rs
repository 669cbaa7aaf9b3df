use std::collections::BTreeSet;

use uuid::Uuid;

use crate::config::Config;
use crate::decode::{u64_at, uuid_at};
use crate::machine::{Failure, Input, Machine, Step};
use crate::sole_claim::{self, Claimant, Phase, PhaseOf};
use crate::statement::{Rows, Statement};
use crate::tables::Tables;

use super::{AllocateError, sql};

/// Where an allocation is: a head version to skip above while drawing,
/// a version while claiming it.
type State = PhaseOf<Allocate>;

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
            state: Phase::ReadHead,
        }
    }

    /// The claim id this allocation writes.
    pub fn claim_id(&self) -> Uuid {
        self.claim_id
    }
}

impl Claimant for Allocate {
    type Head = u64;
    type Slot = u64;
    type Outcome = Result<u64, AllocateError>;
    const READ_HEAD: &'static str = "allocate.read_head";
    const READ_CLAIMS: &'static str = "allocate.read_claims";

    fn attempt(&self) -> u32 {
        self.attempt
    }

    fn read_head(&self) -> Statement {
        sql::read_head(&self.tables)
    }

    fn insert_claim(&self, version: &u64) -> Statement {
        sql::insert_claim(&self.tables, *version, self.claim_id)
    }

    fn read_claims(&self, version: &u64) -> Statement {
        sql::read_claims(&self.tables, *version)
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
            Ok(head) => Phase::Draw(head),
            Err(bad) => Phase::Done(Err(AllocateError::Malformed {
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
                    return Phase::Done(Err(AllocateError::Malformed {
                        statement: "allocate.read_claims",
                        detail: bad.0,
                    }));
                }
            }
        }
        if ids.len() == 1 && ids.contains(&self.claim_id) {
            return Phase::Done(Ok(version));
        }
        self.attempt += 1;
        if self.attempt >= self.cfg.max_allocate_attempts() {
            Phase::Done(Err(AllocateError::Exhausted {
                attempts: self.attempt,
                last_version: version,
            }))
        } else {
            Phase::ReadHead
        }
    }

    fn above(&self, head: u64, skip: u64) -> State {
        match head.checked_add(1 + skip) {
            Some(version) => Phase::Insert(version),
            None => Phase::Done(Err(AllocateError::Malformed {
                statement: "allocate.read_head",
                detail: format!("head {head} leaves no version above it"),
            })),
        }
    }

    fn failed(statement: &'static str, failure: Failure) -> Self::Outcome {
        Err(AllocateError::Statement { statement, failure })
    }

    fn unexpected(expected: &'static str, got: &'static str) -> Self::Outcome {
        Err(AllocateError::UnexpectedInput { expected, got })
    }
}

impl Machine for Allocate {
    type Outcome = Result<u64, AllocateError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        sole_claim::poll(self, &self.state)
    }

    fn handle(&mut self, input: Input) {
        // The state is consumed by value and the transition names the next
        // one; `ReadHead` only holds the slot while it runs.
        let state = std::mem::replace(&mut self.state, Phase::ReadHead);
        self.state = sole_claim::next(self, state, input);
    }
}
