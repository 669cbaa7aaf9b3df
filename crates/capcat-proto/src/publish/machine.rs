use std::collections::BTreeSet;

use uuid::Uuid;

use crate::config::{Config, VariantName};
use crate::decode::uuid_at;
use crate::lease::{Lease, LeaseClaim, LeaseError, LeaseHead, describe_input};
use crate::machine::{Input, Machine, Step};
use crate::statement::Rows;
use crate::tables::Tables;

use super::{LostRace, PackRef, PublishError, PublishOutcome, sql};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum State {
    Renew(Box<LeaseClaim>),
    Manifest { chunk: usize },
    Watermark,
    ReadBack,
    ReadHead { found: BTreeSet<Uuid> },
    Done(Result<PublishOutcome, PublishError>),
}

/// Publishes `packs` as version V under a lease. See the module docs.
///
/// Statements of an uncontested publish of up to one chunk of packs:
/// `lease.read_head`, `lease.insert_claim`, `lease.read_claims` (the
/// renewal), `publish.insert_manifest`, `publish.insert_watermark`,
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

    fn finish(&mut self, outcome: Result<PublishOutcome, PublishError>) {
        self.state = State::Done(outcome);
    }

    /// A guarded INSERT failed. When its effect is unknown it may still
    /// start on the server and land, up to the expiry of the row its fence
    /// names: the lease records that before anything else is sent.
    fn guarded_failed(&mut self, statement: &'static str, failure: crate::machine::Failure) {
        if failure.leaves_statement_running() {
            self.lease.abandoned_statement();
        }
        self.statement_failed(statement, failure);
    }

    fn statement_failed(&mut self, statement: &'static str, failure: crate::machine::Failure) {
        self.finish(Err(PublishError::Statement {
            statement,
            version: self.version,
            publish_id: self.publish_id,
            failure,
        }));
    }

    fn on_renewed(&mut self, outcome: Result<Lease, LeaseError>) {
        match outcome {
            Ok(lease) if lease.unsettled() => {
                let stamped_at = lease.claimed_at_ns(self.cfg.lease_ttl_ns());
                let until_ns = lease.unsettled_until_ns;
                self.lease = lease;
                self.finish(Ok(PublishOutcome::Unsettled {
                    version: self.version,
                    publish_id: self.publish_id,
                    until_ns,
                    wait_ns: until_ns.saturating_sub(stamped_at).saturating_add(1),
                }));
            }
            Ok(lease) => {
                self.lease = lease;
                self.state = State::Manifest { chunk: 0 };
            }
            Err(LeaseError::NotHeld { head, .. }) => self.finish(Ok(PublishOutcome::LeaseLost {
                version: self.version,
                publish_id: self.publish_id,
                head,
            })),
            Err(source) => self.finish(Err(PublishError::Renew {
                version: self.version,
                source,
            })),
        }
    }

    fn on_read_back(&mut self, rows: &Rows) {
        let mut found = BTreeSet::new();
        for row in &rows.0 {
            match uuid_at(row, 0, "publish_id") {
                Ok(id) => {
                    found.insert(id);
                }
                Err(bad) => {
                    return self.finish(Err(PublishError::Malformed {
                        statement: "publish.read_publish_ids",
                        detail: bad.0,
                    }));
                }
            }
        }
        let (version, publish_id) = (self.version, self.publish_id);
        if self.cfg.is(VariantName::CountOnlyReadBack) && !found.is_empty() {
            return self.finish(Ok(PublishOutcome::Won {
                version,
                publish_id,
            }));
        }
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
            return self.finish(Ok(outcome));
        }
        // Mine is absent. Whether that is a lost race or a lost lease depends
        // on the head: the head read is a separate statement, paid only here.
        self.state = State::ReadHead { found };
    }

    fn on_head(&mut self, found: BTreeSet<Uuid>, rows: &Rows) {
        let head = match crate::lease::parse_head(rows) {
            Ok(head) => head,
            Err(bad) => {
                return self.finish(Err(PublishError::Malformed {
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
        self.finish(Ok(if lost {
            PublishOutcome::LeaseLost {
                version,
                publish_id,
                head,
            }
        } else {
            PublishOutcome::LostRace(LostRace {
                version,
                publish_id,
                found,
            })
        }));
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
                    self.on_renewed(outcome);
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
            State::Watermark => Step::Execute(sql::insert_watermark(
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
            #[cfg(any(test, feature = "mutations"))]
            State::ReadBack if self.cfg.is(VariantName::PostWriteCheck) => {
                Step::Execute(sql::read_highest_publish_ids(&self.tables))
            }
            State::ReadBack => Step::Execute(sql::read_publish_ids(&self.tables, self.version)),
            State::ReadHead { .. } => Step::Execute(crate::lease::sql::read_head(&self.tables)),
            State::Done(outcome) => Step::Done(outcome.clone()),
        }
    }

    fn handle(&mut self, input: Input) {
        match (self.state.clone(), input) {
            (State::Done(_), _) => {}
            (State::Renew(mut claim), input) => {
                claim.handle(input);
                self.state = State::Renew(claim);
            }
            (State::Manifest { chunk }, Input::Rows(_)) => {
                self.state = if chunk + 1 < self.chunks() {
                    State::Manifest { chunk: chunk + 1 }
                } else {
                    State::Watermark
                };
            }
            // The watermark must never be written unless every manifest row
            // is known to stand: a failed chunk ends the attempt here.
            (State::Manifest { .. }, Input::Failed(failure)) => {
                self.guarded_failed("publish.insert_manifest", failure);
            }
            (State::Watermark, Input::Rows(_)) => self.state = State::ReadBack,
            (State::Watermark, Input::Failed(failure)) => {
                self.guarded_failed("publish.insert_watermark", failure);
            }
            (State::ReadBack, Input::Rows(rows)) => self.on_read_back(&rows),
            (State::ReadBack, Input::Failed(failure)) => {
                self.statement_failed("publish.read_publish_ids", failure);
            }
            (State::ReadHead { found }, Input::Rows(rows)) => self.on_head(found, &rows),
            (State::ReadHead { .. }, Input::Failed(failure)) => {
                self.statement_failed("lease.read_head", failure);
            }
            (_, input) => self.finish(Err(PublishError::UnexpectedInput {
                expected: "rows or a failure",
                got: describe_input(&input),
            })),
        }
    }
}
