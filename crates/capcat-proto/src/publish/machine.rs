use std::collections::BTreeSet;

use uuid::Uuid;

use crate::config::Config;
use crate::decode::uuid_at;
use crate::lease::{Lease, LeaseClaim, LeaseError, LeaseHead};
use crate::machine::{Failure, Input, Machine, Step};
use crate::statement::Rows;
use crate::tables::Tables;

use super::{LostRace, PackRef, PublishError, PublishOutcome, sql};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum State {
    Renew(Box<LeaseClaim>),
    Manifest { chunk: usize },
    CommitRow,
    ReadBack,
    ReadHead { found: BTreeSet<Uuid> },
    Done(Result<PublishOutcome, PublishError>),
}

/// Publishes `packs` as version V under a lease. See the module docs.
///
/// Statements of an uncontested publish of up to one chunk of packs:
/// `lease.read_head`, `lease.insert_claim`, `lease.read_claims` (the
/// renewal), `publish.insert_manifest`, `publish.insert_commit_row`,
/// `publish.read_publish_ids`: six. A lost attempt adds `lease.read_head`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Publish {
    tables: Tables,
    cfg: Config,
    lease: Lease,
    version: u64,
    packs: Vec<PackRef>,
    publish_id: Uuid,
    state: State,
}

impl Publish {
    /// Publish `packs` at `version` under `lease`, as attempt `publish_id`
    /// (a fresh v4 UUID per attempt, never a claim id).
    pub fn new(
        tables: Tables,
        cfg: Config,
        lease: Lease,
        version: u64,
        packs: BTreeSet<PackRef>,
        publish_id: Uuid,
    ) -> Self {
        let state = if version == 0 {
            State::Done(Err(PublishError::VersionZero))
        } else if packs.is_empty() {
            State::Done(Err(PublishError::NoPacks { version }))
        } else {
            State::Renew(Box::new(LeaseClaim::renew(
                tables.clone(),
                cfg.clone(),
                lease.clone(),
            )))
        };
        Self {
            tables,
            cfg,
            lease,
            version,
            packs: packs.into_iter().collect(),
            publish_id,
            state,
        }
    }

    /// The lease as of the last renewal (its term and expiry move forward;
    /// its `lease_id` never changes). Callers keep this one.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The version being published.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// This attempt's id.
    pub fn publish_id(&self) -> Uuid {
        self.publish_id
    }

    fn chunks(&self) -> usize {
        self.packs.len().div_ceil(self.cfg.chunk())
    }

    fn chunk(&self, i: usize) -> Vec<PackRef> {
        self.packs
            .iter()
            .skip(i * self.cfg.chunk())
            .take(self.cfg.chunk())
            .cloned()
            .collect()
    }

    /// A guarded INSERT failed. When its effect is unknown it may still
    /// start on the server and land, up to the expiry of the row its fence
    /// names: the lease records that before anything else is sent.
    fn guarded_failed(&mut self, statement: &'static str, failure: Failure) -> State {
        if failure.leaves_statement_running() {
            self.lease.abandoned_statement();
        }
        self.statement_failed(statement, failure)
    }

    fn statement_failed(&self, statement: &'static str, failure: Failure) -> State {
        State::Done(Err(PublishError::Statement {
            statement,
            version: self.version,
            publish_id: self.publish_id,
            failure,
        }))
    }

    fn on_renewed(&mut self, outcome: Result<Lease, LeaseError>) -> State {
        let (version, publish_id) = (self.version, self.publish_id);
        State::Done(Err(match outcome {
            Ok(lease) if lease.unsettled() => {
                let stamped_at = lease.claimed_at_ns(self.cfg.lease_ttl_ns());
                let until_ns = lease.unsettled_until_ns;
                self.lease = lease;
                PublishError::Unsettled {
                    version,
                    publish_id,
                    until_ns,
                    wait_ns: until_ns.saturating_sub(stamped_at).saturating_add(1),
                }
            }
            Ok(lease) => {
                self.lease = lease;
                return State::Manifest { chunk: 0 };
            }
            Err(LeaseError::NotHeld { head, .. }) => PublishError::LeaseLost {
                version,
                publish_id,
                head,
            },
            Err(source) => PublishError::Renew { version, source },
        }))
    }

    /// The state after `state` handles `input`.
    fn next(&mut self, state: State, input: Input) -> State {
        match (state, input) {
            (done @ State::Done(_), _) => done,
            (State::Renew(mut claim), input) => {
                claim.handle(input);
                State::Renew(claim)
            }
            (State::Manifest { chunk }, Input::Rows(_)) => {
                if chunk + 1 < self.chunks() {
                    State::Manifest { chunk: chunk + 1 }
                } else {
                    State::CommitRow
                }
            }
            // The commit row must never be written unless every manifest row
            // is known to stand: a failed chunk ends the attempt here.
            (State::Manifest { .. }, Input::Failed(failure)) => {
                self.guarded_failed("publish.insert_manifest", failure)
            }
            (State::CommitRow, Input::Rows(_)) => State::ReadBack,
            (State::CommitRow, Input::Failed(failure)) => {
                self.guarded_failed("publish.insert_commit_row", failure)
            }
            (State::ReadBack, Input::Rows(rows)) => self.on_read_back(&rows),
            (State::ReadBack, Input::Failed(failure)) => {
                self.statement_failed("publish.read_publish_ids", failure)
            }
            (State::ReadHead { found }, Input::Rows(rows)) => self.on_head(found, &rows),
            (State::ReadHead { .. }, Input::Failed(failure)) => {
                self.statement_failed("lease.read_head", failure)
            }
            // No state of a publish but its renewal asks for a draw.
            (
                State::Manifest { .. }
                | State::CommitRow
                | State::ReadBack
                | State::ReadHead { .. },
                input @ Input::Drawn(_),
            ) => State::Done(Err(PublishError::UnexpectedInput {
                expected: "rows or a failure",
                got: input.describe(),
            })),
        }
    }

    fn on_read_back(&self, rows: &Rows) -> State {
        let mut found = BTreeSet::new();
        for row in &rows.0 {
            match uuid_at(row, 0, "publish_id") {
                Ok(id) => {
                    found.insert(id);
                }
                Err(bad) => {
                    return State::Done(Err(PublishError::Malformed {
                        statement: "publish.read_publish_ids",
                        detail: bad.0,
                    }));
                }
            }
        }
        let (version, publish_id) = (self.version, self.publish_id);
        if found.contains(&publish_id) {
            let all_foreign: BTreeSet<Uuid> =
                found.into_iter().filter(|id| *id != publish_id).collect();
            let outcome = match all_foreign.first() {
                None => PublishOutcome::Won {
                    version,
                    publish_id,
                },
                Some(foreign) => PublishOutcome::Conflict {
                    version,
                    publish_id,
                    foreign: *foreign,
                    all_foreign: all_foreign.clone(),
                },
            };
            return State::Done(Ok(outcome));
        }
        // Mine is absent. Whether that is a lost race or a lost lease depends
        // on the head: the head read is a separate statement, paid only here.
        State::ReadHead { found }
    }

    fn on_head(&self, found: BTreeSet<Uuid>, rows: &Rows) -> State {
        let head = match crate::lease::parse_head(rows) {
            Ok(head) => head,
            Err(bad) => {
                return State::Done(Err(PublishError::Malformed {
                    statement: "lease.read_head",
                    detail: bad.0,
                }));
            }
        };
        let (version, publish_id) = (self.version, self.publish_id);
        // Another live head means our fence fails at every version: a lost
        // lease. Our own head, even expired, is a race: nobody else holds the
        // lease, and the next attempt's renewal decides whether we still can.
        let lost = head.as_ref().is_some_and(|h: &LeaseHead| {
            h.live && (h.contested || h.lease_id != self.lease.lease_id)
        });
        State::Done(if lost {
            Err(PublishError::LeaseLost {
                version,
                publish_id,
                head,
            })
        } else {
            Ok(PublishOutcome::LostRace(LostRace {
                version,
                publish_id,
                found,
            }))
        })
    }
}

impl Machine for Publish {
    type Outcome = Result<PublishOutcome, PublishError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        match &mut self.state {
            State::Renew(claim) => match claim.poll() {
                Step::Execute(stmt) => Step::Execute(stmt),
                Step::Draw { below } => Step::Draw { below },
                Step::Done(outcome) => {
                    self.state = self.on_renewed(outcome);
                    self.poll()
                }
            },
            State::Manifest { chunk } => {
                let chunk = *chunk;
                Step::Execute(sql::insert_manifest(
                    &self.tables,
                    &self.cfg,
                    self.version,
                    self.publish_id,
                    &self.lease,
                    self.chunk(chunk),
                ))
            }
            State::CommitRow => Step::Execute(sql::insert_commit_row(
                &self.tables,
                &self.cfg,
                self.version,
                self.publish_id,
                &self.lease,
                // The packs are a set (built from a BTreeSet), so their
                // count is the number of distinct manifest rows expected. A
                // usize always fits a u64 on the targets this crate builds for.
                u64::try_from(self.packs.len()).unwrap_or(u64::MAX),
            )),
            State::ReadBack => Step::Execute(sql::read_publish_ids(&self.tables, self.version)),
            State::ReadHead { .. } => Step::Execute(crate::lease::sql::read_head(&self.tables)),
            State::Done(outcome) => Step::Done(outcome.clone()),
        }
    }

    fn handle(&mut self, input: Input) {
        // The state is consumed by value (a nested machine moves as its
        // box) and the transition names the next one; `ReadBack` only holds
        // the slot while it runs.
        let state = std::mem::replace(&mut self.state, State::ReadBack);
        self.state = self.next(state, input);
    }
}
