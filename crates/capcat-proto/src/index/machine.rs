use std::collections::BTreeSet;

use uuid::Uuid;

use crate::allocate::Allocate;
use crate::config::{Config, VariantName};
use crate::decode::{string_at, uuid_at};
use crate::descriptor::{
    CaptureDescriptor, MAX_DESCRIPTOR_PARAM_BYTES, descriptor_chunks, insert_descriptors,
};
use crate::lease::{Lease, describe_input};
use crate::machine::{Input, Machine, Step};
use crate::publish::{PackRef, Publish, PublishOutcome};
use crate::statement::{Rows, Statement};
use crate::tables::Tables;

use super::{IndexError, IndexReport, sql};

/// The claim id and publish id of publish attempt `attempt` (0-based),
/// derived from the pass's `id_seed`.
///
/// The machine draws no randomness, so ids come from the caller: one random
/// v4 seed per pass, from which each attempt derives two distinct ids by
/// XOR-ing a small counter into the seed's (random) low bits. Distinct
/// counters give distinct ids, claim ids and publish ids never coincide, and
/// two passes with independent seeds collide only with the probability of
/// two random UUIDs colliding.
pub fn attempt_ids(id_seed: Uuid, attempt: u32) -> (Uuid, Uuid) {
    let n = u128::from(attempt) * 2;
    (
        Uuid::from_u128(id_seed.as_u128() ^ (n + 1)),
        Uuid::from_u128(id_seed.as_u128() ^ (n + 2)),
    )
}

/// What the inventory write is followed by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Then {
    Report(IndexReport),
    Fail(IndexError),
    /// `InventoryBeforePublish` variant only: publish after recording.
    Publish,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum State {
    ReadCommitted {
        chunk: usize,
    },
    Allocate(Box<Allocate>),
    Descriptors {
        version: u64,
        chunk: usize,
    },
    Publish(Box<Publish>),
    Inventory {
        version: u64,
        publish_id: Uuid,
        chunk: usize,
        then: Box<Then>,
    },
    Done(Result<IndexReport, IndexError>),
}

/// One index pass over a batch of descriptors. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IndexPass {
    tables: Tables,
    cfg: Config,
    lease: Lease,
    id_seed: Uuid,
    descriptors: Vec<CaptureDescriptor>,
    batch: Vec<PackRef>,
    committed: BTreeSet<PackRef>,
    pending: Vec<PackRef>,
    attempt: u32,
    state: State,
}

impl IndexPass {
    /// Index `descriptors` (any order; their packs are the batch) under
    /// `lease`. `id_seed` is a fresh random v4 UUID per pass (see
    /// [`attempt_ids`]). The descriptors' `index_version` is ignored and
    /// overwritten with each allocated version.
    pub fn new(
        tables: Tables,
        cfg: Config,
        lease: Lease,
        descriptors: Vec<CaptureDescriptor>,
        id_seed: Uuid,
    ) -> Self {
        let batch: BTreeSet<PackRef> = descriptors.iter().map(CaptureDescriptor::pack).collect();
        let state = if batch.is_empty() {
            State::Done(Ok(IndexReport::NothingToDo {
                skipped: BTreeSet::new(),
            }))
        } else {
            State::ReadCommitted { chunk: 0 }
        };
        Self {
            tables,
            cfg,
            lease,
            id_seed,
            descriptors,
            batch: batch.into_iter().collect(),
            committed: BTreeSet::new(),
            pending: Vec::new(),
            attempt: 0,
            state,
        }
    }

    /// The lease as of the last renewal; callers keep this one.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Publish attempts started so far.
    pub fn attempts(&self) -> u32 {
        self.attempt + 1
    }

    fn chunk_of<T: Clone>(&self, items: &[T], i: usize) -> Vec<T> {
        items
            .iter()
            .skip(i * self.cfg.chunk())
            .take(self.cfg.chunk())
            .cloned()
            .collect()
    }

    /// The descriptor INSERTs of `rows`: at most the configured chunk of
    /// rows and [`MAX_DESCRIPTOR_PARAM_BYTES`] of parameter text each.
    fn descriptor_chunks(&self, rows: &[CaptureDescriptor]) -> Vec<std::ops::Range<usize>> {
        descriptor_chunks(rows, self.cfg.chunk(), MAX_DESCRIPTOR_PARAM_BYTES)
    }

    fn chunk_count(&self, len: usize) -> usize {
        len.div_ceil(self.cfg.chunk())
    }

    /// The descriptor rows of the pending packs, stamped with `version`.
    fn rows_at(&self, version: u64) -> Vec<CaptureDescriptor> {
        let pending: BTreeSet<&PackRef> = self.pending.iter().collect();
        self.descriptors
            .iter()
            .filter(|d| pending.contains(&d.pack()))
            .map(|d| CaptureDescriptor {
                index_version: version,
                ..d.clone()
            })
            .collect()
    }

    fn finish(&mut self, outcome: Result<IndexReport, IndexError>) {
        self.state = State::Done(outcome);
    }

    fn start_attempt(&mut self) {
        let (claim_id, _) = attempt_ids(self.id_seed, self.attempt);
        self.state = State::Allocate(Box::new(Allocate::new(
            self.tables.clone(),
            self.cfg.clone(),
            claim_id,
        )));
    }

    fn start_publish(&mut self, version: u64) {
        let (_, publish_id) = attempt_ids(self.id_seed, self.attempt);
        self.state = State::Publish(Box::new(Publish::new(
            self.tables.clone(),
            self.cfg.clone(),
            self.lease.clone(),
            version,
            self.pending.iter().cloned().collect(),
            publish_id,
        )));
    }

    fn on_committed(&mut self, chunk: usize, rows: &Rows) {
        for row in &rows.0 {
            let pack = string_at(row, 0, "store_id")
                .and_then(|s| uuid_at(row, 1, "pack_id").map(|p| (s, p)));
            match pack {
                Ok(pack) => {
                    self.committed.insert(pack);
                }
                Err(bad) => {
                    return self.finish(Err(IndexError::Malformed {
                        statement: "index.read_committed",
                        detail: bad.0,
                    }));
                }
            }
        }
        if chunk + 1 < self.chunk_count(self.batch.len()) {
            self.state = State::ReadCommitted { chunk: chunk + 1 };
            return;
        }
        self.pending = self
            .batch
            .iter()
            .filter(|p| !self.committed.contains(*p))
            .cloned()
            .collect();
        if self.pending.is_empty() {
            let skipped = self.batch.iter().cloned().collect();
            return self.finish(Ok(IndexReport::NothingToDo { skipped }));
        }
        self.start_attempt();
    }

    fn skipped(&self) -> BTreeSet<PackRef> {
        self.batch
            .iter()
            .filter(|p| self.committed.contains(*p))
            .cloned()
            .collect()
    }

    fn on_published(
        &mut self,
        publish: &Publish,
        outcome: Result<PublishOutcome, crate::publish::PublishError>,
    ) {
        self.lease = publish.lease().clone();
        let packs: BTreeSet<PackRef> = self.pending.iter().cloned().collect();
        match outcome {
            Ok(PublishOutcome::Won {
                version,
                publish_id,
            }) => {
                let report = IndexReport::Indexed {
                    version,
                    publish_id,
                    packs,
                    skipped: self.skipped(),
                    descriptors: self.rows_at(version).len(),
                    attempts: self.attempt + 1,
                };
                if self.cfg.is(VariantName::InventoryBeforePublish) {
                    return self.finish(Ok(report));
                }
                self.state = State::Inventory {
                    version,
                    publish_id,
                    chunk: 0,
                    then: Box::new(Then::Report(report)),
                };
            }
            Ok(PublishOutcome::LostRace(race)) => {
                self.attempt += 1;
                if self.attempt >= self.cfg.max_publish_attempts() {
                    self.finish(Err(IndexError::Exhausted {
                        attempts: self.attempt,
                        last: race,
                    }));
                } else {
                    self.start_attempt();
                }
            }
            Ok(PublishOutcome::LeaseLost {
                version,
                publish_id,
                head,
            }) => self.finish(Err(IndexError::LeaseLost {
                version,
                publish_id,
                head,
            })),
            Ok(PublishOutcome::Unsettled {
                version,
                until_ns,
                wait_ns,
                ..
            }) => self.finish(Err(IndexError::Unsettled {
                version,
                wait_ns,
                until_ns,
            })),
            Ok(PublishOutcome::Conflict {
                version,
                publish_id,
                foreign,
                all_foreign,
            }) => {
                let fail = IndexError::Conflict {
                    version,
                    publish_id,
                    foreign,
                    all_foreign,
                    packs,
                };
                if self.cfg.is(VariantName::InventoryBeforePublish) {
                    return self.finish(Err(fail));
                }
                self.state = State::Inventory {
                    version,
                    publish_id,
                    chunk: 0,
                    then: Box::new(Then::Fail(fail)),
                };
            }
            Err(e) => self.finish(Err(IndexError::Publish(e))),
        }
    }

    fn inventory_statement(
        &self,
        version: u64,
        publish_id: Uuid,
        chunk: usize,
    ) -> Result<Statement, IndexError> {
        sql::commit_packs(
            &self.tables,
            version,
            publish_id,
            self.chunk_of(&self.pending, chunk),
        )
    }
}

impl Machine for IndexPass {
    type Outcome = Result<IndexReport, IndexError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        match &mut self.state {
            State::ReadCommitted { chunk } => {
                let chunk = *chunk;
                Step::Execute(sql::read_committed(
                    &self.tables,
                    self.chunk_of(&self.batch, chunk),
                ))
            }
            State::Allocate(alloc) => match alloc.poll() {
                Step::Execute(stmt) => Step::Execute(stmt),
                Step::Draw { below } => Step::Draw { below },
                Step::Done(Ok(version)) => {
                    self.state = State::Descriptors { version, chunk: 0 };
                    self.poll()
                }
                Step::Done(Err(e)) => {
                    self.finish(Err(IndexError::Allocate(e)));
                    self.poll()
                }
            },
            State::Descriptors { version, chunk } => {
                let (version, chunk) = (*version, *chunk);
                let rows = self.rows_at(version);
                let range = self
                    .descriptor_chunks(&rows)
                    .get(chunk)
                    .cloned()
                    .unwrap_or(0..0);
                Step::Execute(insert_descriptors(&self.tables, rows[range].to_vec()))
            }
            State::Publish(publish) => match publish.poll() {
                Step::Execute(stmt) => Step::Execute(stmt),
                Step::Draw { below } => Step::Draw { below },
                Step::Done(outcome) => {
                    let publish = publish.clone();
                    self.on_published(&publish, outcome);
                    self.poll()
                }
            },
            State::Inventory {
                version,
                publish_id,
                chunk,
                ..
            } => {
                let (version, publish_id, chunk) = (*version, *publish_id, *chunk);
                match self.inventory_statement(version, publish_id, chunk) {
                    Ok(stmt) => Step::Execute(stmt),
                    Err(e) => {
                        self.finish(Err(e));
                        self.poll()
                    }
                }
            }
            State::Done(outcome) => Step::Done(outcome.clone()),
        }
    }

    fn handle(&mut self, input: Input) {
        match (self.state.clone(), input) {
            (State::Done(_), _) => {}
            (State::ReadCommitted { chunk }, Input::Rows(rows)) => self.on_committed(chunk, &rows),
            (State::ReadCommitted { .. }, Input::Failed(failure)) => {
                self.finish(Err(IndexError::Statement {
                    statement: "index.read_committed",
                    failure,
                }))
            }
            (State::Allocate(mut alloc), input) => {
                alloc.handle(input);
                self.state = State::Allocate(alloc);
            }
            (State::Publish(mut publish), input) => {
                publish.handle(input);
                self.state = State::Publish(publish);
            }
            (State::Descriptors { version, chunk }, Input::Rows(_)) => {
                if chunk + 1 < self.descriptor_chunks(&self.rows_at(version)).len() {
                    self.state = State::Descriptors {
                        version,
                        chunk: chunk + 1,
                    };
                } else if self.cfg.is(VariantName::InventoryBeforePublish) {
                    let (_, publish_id) = attempt_ids(self.id_seed, self.attempt);
                    self.state = State::Inventory {
                        version,
                        publish_id,
                        chunk: 0,
                        then: Box::new(Then::Publish),
                    };
                } else {
                    self.start_publish(version);
                }
            }
            (State::Descriptors { .. }, Input::Failed(failure)) => {
                self.finish(Err(IndexError::Statement {
                    statement: "index.insert_descriptors",
                    failure,
                }))
            }
            (
                State::Inventory {
                    version,
                    publish_id,
                    chunk,
                    then,
                },
                Input::Rows(_),
            ) => {
                if chunk + 1 < self.chunk_count(self.pending.len()) {
                    self.state = State::Inventory {
                        version,
                        publish_id,
                        chunk: chunk + 1,
                        then,
                    };
                } else {
                    match *then {
                        Then::Report(report) => self.finish(Ok(report)),
                        Then::Fail(error) => self.finish(Err(error)),
                        Then::Publish => self.start_publish(version),
                    }
                }
            }
            (
                State::Inventory {
                    version,
                    publish_id,
                    ..
                },
                Input::Failed(failure),
            ) => {
                self.finish(Err(IndexError::Inventory {
                    version,
                    publish_id,
                    failure,
                }));
            }
            (_, input) => self.finish(Err(IndexError::UnexpectedInput {
                expected: "rows or a failure",
                got: describe_input(&input),
            })),
        }
    }
}
