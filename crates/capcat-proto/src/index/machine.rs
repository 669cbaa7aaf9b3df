use std::collections::BTreeSet;
use std::sync::Arc;

use uuid::Uuid;

use crate::allocate::Allocate;
use crate::config::Config;
use crate::descriptor::{CaptureDescriptor, MAX_INSERT_DATA_BYTES, descriptor_chunks};
use crate::lease::Lease;
use crate::machine::{Input, Machine, Step};
use crate::publish::{PackRef, Publish, PublishError, PublishOutcome};
use crate::tables::Tables;

use super::{IndexError, IndexReport, ReadCommitted, sql};

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

/// The columns of a descriptor that the descriptor tables sort by (its
/// capture identity, store and pack), the most selective first: the
/// columns of [`crate::descriptor::CAPTURE_SORT_KEY`], as
/// `SORT_KEY_COLUMNS` names them (a test holds the two together).
type SortKey<'a> = (Uuid, Uuid, &'a str, &'a str, &'a str, &'a str, u64);

/// The column behind each field of [`SortKey`], in its order (read only
/// by the test that holds it to the tables' key).
#[cfg(test)]
const SORT_KEY_COLUMNS: [&str; 7] = [
    "capture_id",
    "pack_id",
    "store_id",
    "tenant_id",
    "experiment_id",
    "run_id",
    "captured_at_ns",
];

fn sort_key(d: &CaptureDescriptor) -> SortKey<'_> {
    (
        d.capture_id,
        d.locator.pack_id,
        &d.locator.store_id,
        &d.tenant_id,
        &d.experiment_id,
        &d.run_id,
        d.captured_at_ns,
    )
}

/// A descriptor of `descriptors` whose sorting key another one shares, if
/// any. Sorted rather than hashed: the machine draws no randomness, and
/// sorting references costs about a millisecond for a pass of 12,288 rows.
fn described_twice(descriptors: &[CaptureDescriptor]) -> Option<&CaptureDescriptor> {
    let mut rows: Vec<&CaptureDescriptor> = descriptors.iter().collect();
    rows.sort_unstable_by(|a, b| sort_key(a).cmp(&sort_key(b)));
    rows.windows(2).find_map(|pair| match pair {
        [a, b] if sort_key(a) == sort_key(b) => Some(*b),
        _ => None,
    })
}

/// What the inventory write is followed by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Then {
    Report(IndexReport),
    Fail(IndexError),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum State {
    ReadCommitted(Box<ReadCommitted>),
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
    /// The descriptor rows of the pending packs stamped with the current
    /// attempt's version, one shared slice per descriptor INSERT: computed
    /// once per attempt, when its version is allocated, handed to each
    /// INSERT without copying a row, and dropped once they are written (so
    /// no state carries an old version).
    stamped: Vec<Arc<[CaptureDescriptor]>>,
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
        let state = if let Some(twice) = described_twice(&descriptors) {
            State::Done(Err(IndexError::DuplicateDescriptor {
                capture_id: twice.capture_id,
                store_id: twice.locator.store_id.clone(),
                pack_id: twice.locator.pack_id,
            }))
        } else if batch.is_empty() {
            State::Done(Ok(IndexReport::NothingToDo {
                skipped: BTreeSet::new(),
            }))
        } else {
            State::ReadCommitted(Box::new(ReadCommitted::new(
                tables.clone(),
                batch.iter().cloned().collect(),
                cfg.chunk(),
            )))
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
            stamped: Vec::new(),
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

    /// The publish this pass is running, while it runs one.
    pub fn publishing(&self) -> Option<&Publish> {
        match &self.state {
            State::Publish(publish) => Some(publish),
            _ => None,
        }
    }

    /// The publish attempt whose packs the pass is recording in the
    /// inventory now (after that publish made them visible), if it is.
    pub fn recording(&self) -> Option<Uuid> {
        match &self.state {
            State::Inventory { publish_id, .. } => Some(*publish_id),
            _ => None,
        }
    }

    /// The packs of the batch not yet in the inventory (known once the
    /// replay guard has been read).
    pub fn pending(&self) -> &[PackRef] {
        &self.pending
    }

    fn chunk_of<T: Clone>(&self, items: &[T], i: usize) -> Vec<T> {
        items
            .iter()
            .skip(i * self.cfg.chunk())
            .take(self.cfg.chunk())
            .cloned()
            .collect()
    }

    fn chunk_count(&self, len: usize) -> usize {
        len.div_ceil(self.cfg.chunk())
    }

    fn start_attempt(&self) -> State {
        let (claim_id, _) = attempt_ids(self.id_seed, self.attempt);
        State::Allocate(Box::new(Allocate::new(
            self.tables.clone(),
            self.cfg.clone(),
            claim_id,
        )))
    }

    /// The attempt holds `version`: stamp the pending packs' descriptor
    /// rows with it and cut them into INSERTs of at most the configured
    /// rows per INSERT and [`MAX_INSERT_DATA_BYTES`] of data.
    fn start_descriptors(&mut self, version: u64) -> State {
        // Borrowed keys: a descriptor's pack is looked up without building
        // a `PackRef` (and its string) per row.
        let pending: BTreeSet<(&str, Uuid)> = self
            .pending
            .iter()
            .map(|(store_id, pack_id)| (store_id.as_str(), *pack_id))
            .collect();
        let stamped: Vec<CaptureDescriptor> = self
            .descriptors
            .iter()
            .filter(|d| pending.contains(&(d.locator.store_id.as_str(), d.locator.pack_id)))
            .map(|d| CaptureDescriptor {
                index_version: version,
                ..d.clone()
            })
            .collect();
        let ranges = descriptor_chunks(&stamped, self.cfg.insert_rows(), MAX_INSERT_DATA_BYTES);
        // The chunks are consecutive ranges covering every row in order, so
        // moving the rows out one range at a time gives each its rows.
        let mut rows = stamped.into_iter();
        self.stamped = ranges
            .into_iter()
            .map(|range| rows.by_ref().take(range.len()).collect())
            .collect();
        debug_assert!(rows.next().is_none(), "a row fell outside every chunk");
        State::Descriptors { version, chunk: 0 }
    }

    fn start_publish(&mut self, version: u64) -> State {
        self.stamped = Vec::new();
        let (_, publish_id) = attempt_ids(self.id_seed, self.attempt);
        State::Publish(Box::new(Publish::new(
            self.tables.clone(),
            self.cfg.clone(),
            self.lease.clone(),
            version,
            self.pending.iter().cloned().collect(),
            publish_id,
        )))
    }

    fn on_committed(&mut self, committed: BTreeSet<PackRef>) -> State {
        self.committed = committed;
        self.pending = self
            .batch
            .iter()
            .filter(|p| !self.committed.contains(*p))
            .cloned()
            .collect();
        if self.pending.is_empty() {
            let skipped = self.batch.iter().cloned().collect();
            return State::Done(Ok(IndexReport::NothingToDo { skipped }));
        }
        self.start_attempt()
    }

    /// How many descriptor rows the pending packs have.
    fn pending_descriptors(&self) -> usize {
        let pending: BTreeSet<&PackRef> = self.pending.iter().collect();
        self.descriptors
            .iter()
            .filter(|d| pending.contains(&d.pack()))
            .count()
    }

    fn skipped(&self) -> BTreeSet<PackRef> {
        self.batch
            .iter()
            .filter(|p| self.committed.contains(*p))
            .cloned()
            .collect()
    }

    fn on_published(&mut self, outcome: Result<PublishOutcome, PublishError>) -> State {
        let packs: BTreeSet<PackRef> = self.pending.iter().cloned().collect();
        let recording = |version, publish_id, then| State::Inventory {
            version,
            publish_id,
            chunk: 0,
            then: Box::new(then),
        };
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
                    descriptors: self.pending_descriptors(),
                    attempts: self.attempt + 1,
                };
                recording(version, publish_id, Then::Report(report))
            }
            Ok(PublishOutcome::LostRace(race)) => {
                self.attempt += 1;
                if self.attempt >= self.cfg.max_publish_attempts() {
                    State::Done(Err(IndexError::Exhausted {
                        attempts: self.attempt,
                        last: race,
                    }))
                } else {
                    self.start_attempt()
                }
            }
            Err(PublishError::LeaseLost {
                version,
                publish_id,
                head,
            }) => State::Done(Err(IndexError::LeaseLost {
                version,
                publish_id,
                head,
            })),
            Err(PublishError::Unsettled {
                version,
                until_ns,
                wait_ns,
                ..
            }) => State::Done(Err(IndexError::Unsettled {
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
                recording(version, publish_id, Then::Fail(fail))
            }
            Err(e) => State::Done(Err(IndexError::Publish(e))),
        }
    }

    /// The state after `state` handles `input`.
    fn next(&mut self, state: State, input: Input) -> State {
        match (state, input) {
            (done @ State::Done(_), _) => done,
            (State::ReadCommitted(mut read), input) => {
                read.handle(input);
                State::ReadCommitted(read)
            }
            (State::Allocate(mut alloc), input) => {
                alloc.handle(input);
                State::Allocate(alloc)
            }
            (State::Publish(mut publish), input) => {
                publish.handle(input);
                State::Publish(publish)
            }
            (State::Descriptors { version, chunk }, Input::Rows(_)) => {
                if chunk + 1 < self.stamped.len() {
                    State::Descriptors {
                        version,
                        chunk: chunk + 1,
                    }
                } else {
                    self.start_publish(version)
                }
            }
            (State::Descriptors { .. }, Input::Failed(failure)) => {
                State::Done(Err(IndexError::Statement {
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
                    State::Inventory {
                        version,
                        publish_id,
                        chunk: chunk + 1,
                        then,
                    }
                } else {
                    State::Done(match *then {
                        Then::Report(report) => Ok(report),
                        Then::Fail(error) => Err(error),
                    })
                }
            }
            (
                State::Inventory {
                    version,
                    publish_id,
                    ..
                },
                Input::Failed(failure),
            ) => State::Done(Err(IndexError::Inventory {
                version,
                publish_id,
                failure,
            })),
            // Only the nested allocation and publish ask for draws.
            (State::Descriptors { .. } | State::Inventory { .. }, input @ Input::Drawn(_)) => {
                State::Done(Err(IndexError::UnexpectedInput {
                    expected: "rows or a failure",
                    got: input.describe(),
                }))
            }
        }
    }
}

impl Machine for IndexPass {
    type Outcome = Result<IndexReport, IndexError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        match &mut self.state {
            State::ReadCommitted(read) => match read.poll() {
                Step::Execute(stmt) => Step::Execute(stmt),
                Step::Draw { below } => Step::Draw { below },
                Step::Done(Ok(committed)) => {
                    self.state = self.on_committed(committed);
                    self.poll()
                }
                Step::Done(Err(e)) => {
                    self.state = State::Done(Err(e));
                    self.poll()
                }
            },
            State::Allocate(alloc) => match alloc.poll() {
                Step::Execute(stmt) => Step::Execute(stmt),
                Step::Draw { below } => Step::Draw { below },
                Step::Done(Ok(version)) => {
                    self.state = self.start_descriptors(version);
                    self.poll()
                }
                Step::Done(Err(e)) => {
                    self.state = State::Done(Err(IndexError::Allocate(e)));
                    self.poll()
                }
            },
            State::Descriptors { chunk, .. } => {
                let rows = self.stamped.get(*chunk).cloned().unwrap_or_default();
                Step::Execute(sql::insert_descriptors(&self.tables, rows))
            }
            State::Publish(publish) => match publish.poll() {
                Step::Execute(stmt) => Step::Execute(stmt),
                Step::Draw { below } => Step::Draw { below },
                Step::Done(outcome) => {
                    self.lease = publish.lease().clone();
                    self.state = self.on_published(outcome);
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
                let packs = self.chunk_of(&self.pending, chunk);
                match sql::commit_packs(&self.tables, version, publish_id, packs) {
                    Ok(stmt) => Step::Execute(stmt),
                    Err(e) => {
                        self.state = State::Done(Err(e));
                        self.poll()
                    }
                }
            }
            State::Done(outcome) => Step::Done(outcome.clone()),
        }
    }

    fn handle(&mut self, input: Input) {
        // The state is consumed by value (a nested machine moves as its
        // box) and the transition names the next one; an empty outcome only
        // holds the slot while it runs.
        let placeholder = State::Done(Ok(IndexReport::NothingToDo {
            skipped: BTreeSet::new(),
        }));
        let state = std::mem::replace(&mut self.state, placeholder);
        self.state = self.next(state, input);
    }
}

#[cfg(test)]
mod sort_key_tests {
    use std::collections::BTreeSet;

    use crate::descriptor::{CAPTURE_BY_ID_SORT_KEY, CAPTURE_SORT_KEY};

    use super::SORT_KEY_COLUMNS;

    /// The duplicate check compares exactly the columns both descriptor
    /// tables collapse on: a column added to their key, and not to the
    /// check, would let it pass rows a merge would then collapse.
    #[test]
    fn the_duplicate_check_compares_the_descriptor_tables_sorting_key() {
        let checked: BTreeSet<&str> = SORT_KEY_COLUMNS.into_iter().collect();
        assert_eq!(checked.len(), SORT_KEY_COLUMNS.len());
        for key in [CAPTURE_SORT_KEY, CAPTURE_BY_ID_SORT_KEY] {
            assert_eq!(checked, key.iter().copied().collect::<BTreeSet<_>>());
        }
    }
}
