//! The publication model: stateright `Model` over the real capcat-proto
//! machines and the simulated engine.

use std::collections::BTreeSet;

use capcat_proto::descriptor::Locator;
use capcat_proto::designs::{Designable, Designed};
use capcat_proto::fragments::PINNED_VERSION_PARAM;
use capcat_proto::index::attempt_ids;
use capcat_proto::lease::{LeaseClaim, LeaseError, Release};
use capcat_proto::reader::{SearchFilter, SearchPage, SearchQuery};
use capcat_proto::statement::{Expect, Param, Rows, Statement};
use capcat_proto::{
    CaptureDescriptor, Config, ConfigError, Failure, IndexError, IndexPass, IndexReport, Input,
    Machine, PackRef, Step, Tables,
};
use stateright::{Model, Property};
use uuid::Uuid;

use super::action::{Action, client_action_name};
use super::config::ModelConfig;
use super::design::Design;
use super::engine::{self, Db, Unknown, guards, is_claim, is_conditional_insert, lease_param};
use super::properties;
use super::state::{Eval, Flight, History, PassEnd, Phase, Pinned, Publisher, ReaderState, State};
use super::strict;

/// The catalog prefix the model's statements are built under.
pub const PREFIX: &str = "m";
/// The foreign writer's publish id.
pub const FOREIGN_PUBLISH_ID: Uuid = Uuid::from_u128(0xF0F0_0000_0000_0000_0000_0000_0000_0001);

/// Why a model could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The protocol configuration is invalid (e.g. a cap not below the TTL
    /// for a design that is not `CapAtLeastTtl`).
    #[error("invalid protocol configuration: {0}")]
    Config(#[from] ConfigError),
    /// Too many or too few publishers.
    #[error("publishers must be between 1 and 4, got {0}")]
    Publishers(u8),
    /// Too many or too few packs per index pass.
    #[error("packs per pass must be between 1 and 4, got {0}")]
    PacksPerPass(u8),
}

/// The publication model.
#[derive(Clone, Debug)]
pub struct PublicationModel {
    /// How it was built.
    pub cfg: ModelConfig,
    proto: Config,
    tables: Tables,
}

/// The pack publisher `i` indexes in its index pass number `pass`.
///
/// The first pass after a failed one retries the same batch (the storage
/// service's next cycle does), so a pack can be indexed twice and gain
/// descriptor rows at a second version. The pass after that carries a
/// batch of its own: a retried batch does not always keep the failed
/// pass's packs (the service halves a refused batch and sets a pack aside
/// after repeated refusals), so what a late-landing statement of a failed
/// pass makes visible need not be in any later publish.
pub fn pack_of(i: u8, pass: u8) -> PackRef {
    nth_pack_of(i, pass, 0)
}

/// Pack number `k` of publisher `i`'s index pass number `pass` (a pass
/// indexes `ModelConfig::packs_per_pass` packs, one manifest chunk each).
pub fn nth_pack_of(i: u8, pass: u8, k: u8) -> PackRef {
    let batch = pass.saturating_sub(1);
    (
        "s".to_owned(),
        Uuid::from_u128(
            0xFACC_0000 + u128::from(i) + (u128::from(batch) << 8) + (u128::from(k) << 16),
        ),
    )
}

/// The pack the foreign writer names.
pub fn foreign_pack() -> PackRef {
    ("s".to_owned(), Uuid::from_u128(0xF0F0_0000))
}

/// Descriptor `k` of publisher `i`'s index pass number `pass`: what the
/// model's passes index (and the conformance kit rebuilds when it replays
/// the model's traces).
pub fn descriptor(i: u8, pass: u8, k: u8) -> CaptureDescriptor {
    let (store_id, pack_id) = nth_pack_of(i, pass, k);
    CaptureDescriptor {
        tenant_id: "t".to_owned(),
        experiment_id: "e".to_owned(),
        run_id: "r".to_owned(),
        capture_id: Uuid::from_u128(
            0xCA97_0000
                + u128::from(i)
                + (u128::from(pass.saturating_sub(1)) << 8)
                + (u128::from(k) << 16),
        ),
        locator: Locator {
            store_id,
            pack_id,
            ..Locator::default()
        },
        tensor_name: "x".to_owned(),
        dtype: "float32".to_owned(),
        ..CaptureDescriptor::default()
    }
}

/// Publisher `i`'s holder name.
pub fn holder(i: u8) -> String {
    format!("p{i}")
}

/// The claim id of publisher `i`'s incarnation: one per incarnation, reused
/// by every acquire round until it holds (as capcat-clickhouse's `Catalog`
/// does), so a round is never refused by the claim an earlier round
/// abandoned. `round` distinguishes only the rejected re-acquire design's
/// freshly minted id.
pub fn fresh_lease_id(i: u8, incarnation: u8, round: u8) -> Uuid {
    Uuid::from_u128(
        ((u128::from(i) + 1) << 96)
            | (u128::from(incarnation) << 64)
            | (u128::from(round) << 32)
            | 0xA,
    )
}

/// The id seed of publisher `i`'s index pass number `pass` in its
/// incarnation `incarnation`.
pub fn pass_seed(i: u8, incarnation: u8, pass: u8) -> Uuid {
    Uuid::from_u128(
        ((u128::from(i) + 1) << 96)
            | (u128::from(incarnation) << 64)
            | (0xB << 40)
            | (u128::from(pass) << 32),
    )
}

/// What a phase's machine asks for next.
enum Next {
    Execute(Statement),
    Draw(u64),
    Done,
}

fn poll(phase: &mut Phase) -> Next {
    fn map<T>(step: Step<T>) -> Next {
        match step {
            Step::Execute(s) => Next::Execute(s),
            Step::Draw { below } => Next::Draw(below),
            Step::Done(_) => Next::Done,
        }
    }
    match phase {
        Phase::Acquire(m) => map(m.poll()),
        Phase::Pass(m) => map(m.poll()),
        Phase::Release(m) => map(m.poll()),
        Phase::Start | Phase::Done => Next::Done,
    }
}

fn feed(phase: &mut Phase, input: Input) {
    match phase {
        Phase::Acquire(m) => m.handle(input),
        Phase::Pass(m) => m.handle(input),
        Phase::Release(m) => m.handle(input),
        Phase::Start | Phase::Done => {}
    }
}

/// The statement a phase will send after drawing `draw` (for claims).
fn statement_after(phase: &Phase, draw: Option<u64>) -> Option<Statement> {
    let mut probe = phase.clone();
    match (poll(&mut probe), draw) {
        (Next::Execute(s), _) => Some(s),
        (Next::Draw(_), Some(d)) => {
            feed(&mut probe, Input::Drawn(d));
            match poll(&mut probe) {
                Next::Execute(s) => Some(s),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A statement the engine does not know stops the check (see `strict`): a
/// path ended by a made-up server error would pass every property.
fn unknown_failure(e: &Unknown) -> Input {
    strict::stop(e)
}

impl PublicationModel {
    /// Builds the model `cfg` describes.
    pub fn new(cfg: ModelConfig) -> Result<Self, BuildError> {
        if !(1..=4).contains(&cfg.publishers) {
            return Err(BuildError::Publishers(cfg.publishers));
        }
        if !(1..=4).contains(&cfg.packs_per_pass) {
            return Err(BuildError::PacksPerPass(cfg.packs_per_pass));
        }
        let proto = cfg.proto()?;
        let tables = Tables::new(PREFIX).expect("the model's prefix is a valid identifier");
        Ok(Self { cfg, proto, tables })
    }

    /// The catalog names the model's statements use.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The capcat-proto configuration the machines run with.
    pub fn proto(&self) -> &Config {
        &self.proto
    }

    /// A statement as it is sent: the design's rewrites are already in it
    /// (the machines run wrapped in [`Design::wrap`]); a test-only switch
    /// may cut a guard out of it here, through capcat-proto's designs.
    pub fn as_sent(&self, stmt: Statement) -> Statement {
        use capcat_proto::designs as d;
        let publish = matches!(
            stmt.name,
            "publish.insert_manifest" | "publish.insert_commit_row"
        );
        if self.cfg.strip_manifest_check && stmt.name == "publish.insert_commit_row" {
            d::without_manifest_check(&stmt, &self.tables)
        } else if self.cfg.strip_fence && publish {
            d::without_lease_fence(&stmt, &self.tables)
        } else {
            stmt
        }
    }

    /// `machine` run as the model's design.
    fn designed<M: Designable>(&self, machine: M) -> Box<Designed<M>> {
        Box::new(
            self.cfg
                .design
                .wrap(self.tables.clone(), self.proto.clone(), machine),
        )
    }

    fn new_publisher(&self, incarnation: u8) -> Publisher {
        Publisher {
            incarnation,
            rounds: 0,
            reacquired: false,
            phase: Phase::Start,
            held: None,
            held_ever: false,
            passes: 0,
            own_lease_ids: BTreeSet::new(),
            waiting: false,
            ended: None,
        }
    }

    /// Runs a publisher's machines through every step that is not an
    /// action of its own: starting an acquire, outcomes, and the index
    /// pass's `index.read_committed` and `index.insert_descriptors` (an
    /// atomic read of the replay guard and an inert, unguarded write, run
    /// together with the step before them).
    fn advance(&self, s: &mut State, i: usize) {
        let now = s.now;
        for _ in 0..32 {
            let p = &mut s.publishers[i];
            if p.waiting {
                return;
            }
            let idx = u8::try_from(i).expect("at most 4 publishers");
            match &mut p.phase {
                Phase::Done => return,
                Phase::Start => {
                    if p.rounds >= self.cfg.acquire_rounds {
                        p.phase = Phase::Done;
                        return;
                    }
                    p.rounds += 1;
                    let claim_id = fresh_lease_id(idx, p.incarnation, 0);
                    // The claim id is this incarnation's own row whether or
                    // not it ever holds: refused by it is a self-lockout.
                    p.own_lease_ids.insert(claim_id);
                    p.phase = Phase::Acquire(self.designed(LeaseClaim::acquire(
                        self.tables.clone(),
                        self.proto.clone(),
                        holder(idx),
                        p.held.clone(),
                        claim_id,
                    )));
                }
                Phase::Acquire(claim) => match claim.poll() {
                    Step::Done(outcome) => self.on_acquired(s, i, outcome),
                    _ => return,
                },
                Phase::Pass(pass) => match pass.poll() {
                    Step::Execute(stmt)
                        if matches!(
                            stmt.name,
                            "index.read_committed" | "index.insert_descriptors"
                        ) =>
                    {
                        let input = self.run_atomically(&mut s.db, &stmt, now);
                        pass.handle(input);
                    }
                    Step::Done(outcome) => {
                        let pass = pass.inner().clone();
                        self.on_pass_done(s, i, &pass, outcome);
                    }
                    _ => return,
                },
                Phase::Release(release) => match release.poll() {
                    Step::Done(_) => p.phase = Phase::Done,
                    _ => return,
                },
            }
        }
        strict::stop(&format!("publisher {i} did not settle in 32 steps"));
    }

    fn on_acquired(
        &self,
        s: &mut State,
        i: usize,
        outcome: Result<capcat_proto::Lease, LeaseError>,
    ) {
        let idx = u8::try_from(i).expect("at most 4 publishers");
        let p = &mut s.publishers[i];
        match outcome {
            Ok(lease) => {
                p.held = Some(lease.clone());
                p.held_ever = true;
                p.own_lease_ids.insert(lease.lease_id);
                if self.cfg.reacquire && !p.reacquired {
                    p.reacquired = true;
                    // The rejected design mints a fresh lease_id: it does not
                    // present the lease it holds (and, as in the seed, forgets
                    // it), so its own live head is a stranger's.
                    let held = if self.cfg.design == Design::FreshLeaseIdOnReacquire {
                        p.held = None;
                        None
                    } else {
                        Some(lease)
                    };
                    let claim_id = fresh_lease_id(idx, p.incarnation, p.rounds + 100);
                    p.own_lease_ids.insert(claim_id);
                    p.phase = Phase::Acquire(self.designed(LeaseClaim::acquire(
                        self.tables.clone(),
                        self.proto.clone(),
                        holder(idx),
                        held,
                        claim_id,
                    )));
                } else {
                    p.phase = self.pass(idx, p.incarnation, 0, lease);
                }
            }
            Err(LeaseError::Held { lease_id, .. }) => {
                if p.own_lease_ids.contains(&lease_id) {
                    s.history.refused_by_own_lease = true;
                }
                p.phase = Phase::Start;
            }
            Err(_) => p.phase = Phase::Start,
        }
    }

    /// Index pass number `pass` of publisher `idx`'s incarnation, under `lease`.
    fn pass(&self, idx: u8, incarnation: u8, pass: u8, lease: capcat_proto::Lease) -> Phase {
        Phase::Pass(
            self.designed(IndexPass::new(
                self.tables.clone(),
                self.proto.clone(),
                lease,
                (0..self.cfg.packs_per_pass)
                    .map(|k| descriptor(idx, pass, k))
                    .collect(),
                pass_seed(idx, incarnation, pass),
            )),
        )
    }

    fn on_pass_done(
        &self,
        s: &mut State,
        i: usize,
        pass: &IndexPass,
        outcome: Result<IndexReport, IndexError>,
    ) {
        let p = &mut s.publishers[i];
        let idx = u8::try_from(i).expect("at most 4 publishers");
        let seed = pass_seed(idx, p.incarnation, p.passes);
        // A pass that failed under a lease it still holds (a statement
        // failure, an unsettled lease, every version lost) is run again on
        // the service's next cycle, under the same lease.
        let again = matches!(
            outcome,
            Err(ref e) if !matches!(e, IndexError::LeaseLost { .. })
        );
        let lost_before = |n: u32| (0..n).map(move |a| attempt_ids(seed, a).1);
        let current = pass.attempts().saturating_sub(1);
        let h = &mut s.history;
        p.ended = Some(match outcome {
            Ok(IndexReport::Indexed {
                version,
                publish_id,
                packs,
                attempts,
                ..
            }) => {
                h.won.insert((version, publish_id, packs));
                h.lost.extend(lost_before(attempts.saturating_sub(1)));
                PassEnd::Indexed
            }
            Ok(IndexReport::NothingToDo { .. }) => PassEnd::NothingToDo,
            Err(IndexError::LeaseLost { publish_id, .. }) => {
                h.lost.insert(publish_id);
                h.lost.extend(lost_before(current));
                PassEnd::LeaseLost
            }
            Err(IndexError::Exhausted { attempts, .. }) => {
                h.lost.extend(lost_before(attempts));
                PassEnd::Failed
            }
            Err(_) => {
                h.lost.extend(lost_before(current));
                PassEnd::Failed
            }
        });
        let mut lease = pass.lease().clone();
        if self.cfg.design == Design::NoSettleAfterTimeout {
            // The rejected design: a caller that forgets its abandoned
            // statements renews, publishes and releases as if none could
            // still land.
            lease.unsettled_until_ns = 0;
        }
        p.held = Some(lease.clone());
        p.phase = if again && p.passes + 1 < self.cfg.passes {
            p.passes += 1;
            self.pass(idx, p.incarnation, p.passes, lease)
        } else if self.cfg.release {
            Phase::Release(self.designed(Release::new(
                self.tables.clone(),
                self.proto.clone(),
                lease,
            )))
        } else {
            Phase::Done
        };
    }

    /// Runs a read or an unconditional INSERT in one step.
    fn run_atomically(&self, db: &mut Db, stmt: &Statement, now: u8) -> Input {
        if stmt.expect == Expect::Nothing {
            match db.evaluate(&self.tables, stmt, now, None) {
                Ok(landing) => {
                    db.land(landing);
                    Input::Rows(Rows::empty())
                }
                Err(e) => unknown_failure(&e),
            }
        } else {
            match db.read(&self.tables, stmt, now) {
                Ok(rows) => Input::Rows(rows),
                Err(e) => unknown_failure(&e),
            }
        }
    }

    fn client_step(&self, s: &mut State, i: usize, draw: Option<u64>) {
        let now = s.now;
        let p = &mut s.publishers[i];
        let stmt = match poll(&mut p.phase) {
            Next::Execute(stmt) => stmt,
            Next::Draw(_) => {
                feed(&mut p.phase, Input::Drawn(draw.unwrap_or(0)));
                match poll(&mut p.phase) {
                    Next::Execute(stmt) => stmt,
                    _ => return,
                }
            }
            Next::Done => return,
        };
        let stmt = self.as_sent(stmt);
        if is_conditional_insert(stmt.name) {
            if let Err(defect) = strict::check_guarded(&self.tables, &stmt) {
                strict::stop(&defect);
            }
            if let (Some(Param::UInt64(v)), Some(Param::Uuid(id))) = (
                stmt.params
                    .get(capcat_proto::fragments::INDEX_VERSION_PARAM),
                stmt.params.get("publish_id"),
            ) {
                s.history.publishes_at.entry(*v).or_default().insert(*id);
            }
            Self::send(s, i, stmt, now);
        } else if self.cfg.late_claims && is_claim(stmt.name) {
            // Late claims: the server stamps the claim when it starts it
            // (EvaluateGuard) and makes its row visible later (LandRows);
            // its client waits, or gives up (AbandonStatement).
            Self::send(s, i, stmt, now);
        } else {
            let input = self.run_atomically(&mut s.db, &stmt, now);
            feed(&mut s.publishers[i].phase, input);
        }
        self.advance(s, i);
    }

    /// Puts `stmt` in flight for publisher `i`, which waits for it.
    fn send(s: &mut State, i: usize, stmt: Statement, now: u8) {
        let p = &mut s.publishers[i];
        let owner = (
            u8::try_from(i).expect("at most 4 publishers"),
            p.incarnation,
        );
        s.flights.push(Flight::sent(owner, stmt, now));
        p.waiting = true;
    }

    /// Late claims: the client of claim `k` stops waiting (a transport
    /// timeout, a dropped connection) and is told it failed; the claim
    /// stays in flight with no client and may still be stamped and land.
    fn abandon(&self, s: &mut State, k: usize) {
        s.flights[k].detached = true;
        let owner = s.flights[k].owner;
        self.deliver(
            s,
            owner,
            Input::Failed(Failure::Transport {
                message: "the client gave up on the claim".to_owned(),
            }),
        );
    }

    /// Whether `f`'s client may give up on it before it lands: a late
    /// claim whose client still waits.
    fn may_abandon(&self, f: &Flight) -> bool {
        self.cfg.late_claims && !f.detached && is_claim(f.stmt.name)
    }

    /// Whether `f` may still evaluate or land at `now`. With late starts a
    /// statement that has not started may start at any time, and a started
    /// one runs until its start plus its cap (ClickHouse counts
    /// `max_execution_time` from the query's start); otherwise the cap
    /// counts from the send.
    fn within_cap(&self, f: &Flight, now: u8) -> bool {
        let from = if self.cfg.late_start {
            match f.started_at {
                None => return true,
                Some(start) => start,
            }
        } else {
            f.issued_at
        };
        f.cap
            .is_none_or(|c| u16::from(now) <= u16::from(from) + u16::from(c))
    }

    /// Late starts: whether `f`'s client is still waiting on a statement
    /// that has not started although its settle time (send plus cap) has
    /// passed, so the driver hands it `Timeout` now.
    fn client_gives_up(&self, f: &Flight, now: u8) -> bool {
        self.cfg.late_start
            && !f.detached
            && f.started_at.is_none()
            && f.cap
                .is_some_and(|c| u16::from(now) > u16::from(f.issued_at) + u16::from(c))
    }

    fn deliver(&self, s: &mut State, owner: (u8, u8), input: Input) {
        let i = usize::from(owner.0);
        let p = &mut s.publishers[i];
        if p.incarnation == owner.1 && p.waiting {
            p.waiting = false;
            feed(&mut p.phase, input);
            self.advance(s, i);
        }
    }

    fn evaluate(&self, s: &mut State, k: usize) {
        let now = s.now;
        if self.cfg.late_start && s.flights[k].started_at.is_none() {
            s.flights[k].started_at = Some(now);
        }
        let f = &s.flights[k];
        let g = guards(&self.tables, &f.stmt.sql);
        let eval = match (&f.eval, g.fence) {
            (Eval::Pending, engine::Fence::TwoReads) => Eval::FirstRead {
                id_ok: lease_param(&f.stmt).is_some_and(|l| s.db.head_id_is(l)),
            },
            (eval, _) => {
                let first = match eval {
                    Eval::FirstRead { id_ok } => Some(*id_ok),
                    _ => None,
                };
                let landing = match s.db.evaluate(&self.tables, &f.stmt, now, first) {
                    Ok(landing) => landing,
                    Err(e) => strict::stop(&e),
                };
                let fenced_out = is_conditional_insert(f.stmt.name)
                    && lease_param(&f.stmt).is_some_and(|l| !s.db.is_live_head(l, now));
                Eval::Evaluated {
                    landing,
                    fenced_out,
                }
            }
        };
        s.flights[k].eval = eval;
    }

    fn land(&self, s: &mut State, k: usize) {
        let f = s.flights.remove(k);
        let detached = f.detached;
        if let Eval::Evaluated {
            landing,
            fenced_out,
        } = f.eval
        {
            if landing.writes() && fenced_out {
                s.history.fenced_out_landed = true;
                if f.stmt.name == "lease.release" {
                    s.history.release_by_non_holder = true;
                }
            }
            s.db.land(landing);
        }
        if !detached {
            self.deliver(s, f.owner, Input::Rows(Rows::empty()));
        }
    }

    fn kill(&self, s: &mut State, k: usize) {
        if self.client_gives_up(&s.flights[k], s.now) {
            // Late starts: the client hears `Timeout`, the statement stays.
            s.flights[k].detached = true;
            let owner = s.flights[k].owner;
            self.deliver(s, owner, Input::Failed(Failure::Timeout));
            return;
        }
        let f = s.flights.remove(k);
        if !f.detached {
            self.deliver(s, f.owner, Input::Failed(Failure::Timeout));
        }
    }

    fn crash(&self, s: &mut State, i: usize, orphan: bool) {
        let now = s.now;
        s.crashes_left -= 1;
        let p = &s.publishers[i];
        if orphan && let Some(stmt) = statement_after(&p.phase, Some(0)) {
            // Left in flight with its owner's incarnation, which the crash
            // ends: nobody is told of it.
            let owner = (
                u8::try_from(i).expect("at most 4 publishers"),
                p.incarnation,
            );
            s.flights.push(Flight::sent(owner, stmt, now));
        }
        let incarnation = p.incarnation + 1;
        s.publishers[i] = self.new_publisher(incarnation);
        self.advance(s, i);
    }

    fn reader_statement(&self, s: &State) -> Option<(u64, Statement)> {
        let query = SearchQuery {
            filter: SearchFilter {
                tenant_id: "t".to_owned(),
                ..SearchFilter::default()
            },
            ..SearchQuery::default()
        };
        let mut page = SearchPage::new(self.tables.clone(), query).ok()?;
        let Step::Execute(pin) = page.poll() else {
            return None;
        };
        let rows = s.db.read(&self.tables, &pin, s.now).ok()?;
        page.handle(Input::Rows(rows));
        let Step::Execute(search) = page.poll() else {
            return None;
        };
        let search = self.cfg.design.rewrite(search, &self.tables, &self.proto);
        match search.params.get(PINNED_VERSION_PARAM) {
            Some(Param::UInt64(w)) => Some((*w, search)),
            _ => None,
        }
    }

    fn pin(&self, s: &mut State) {
        match self.reader_statement(s) {
            Some((version, stmt)) => {
                let membership = engine::membership(&self.tables, &stmt.sql);
                let rows_bounded = engine::row_bound(&self.tables, &stmt.sql);
                let snapshot = s.db.visible_at(membership, version);
                let rows = s.db.resolved_at(membership, rows_bounded, version);
                s.reader.pinned = Some(Pinned {
                    version,
                    membership,
                    rows_bounded,
                    snapshot,
                    rows,
                });
            }
            None => strict::stop(&"the reader machine did not build its statements"),
        }
    }

    /// Whether no action is enabled in `s` (whatever the properties say).
    pub fn is_terminal(&self, s: &State) -> bool {
        let mut actions = Vec::new();
        self.enabled(s, &mut actions);
        actions.is_empty()
    }

    /// Whether a safety property fails in `s`. Such a state is made
    /// terminal: its descendants would fail too, and exploring them only
    /// costs time.
    fn violated(&self, s: &State) -> bool {
        !(properties::pinned_snapshot_never_grows(self, s)
            && properties::fenced_out_writes_nothing(self, s)
            && properties::reported_means_visible(self, s)
            && properties::inventory_only_after_publish(self, s)
            && properties::one_live_lease(self, s)
            && properties::versions_unique(self, s)
            && properties::pinned_reads_never_change(self, s))
    }

    /// Every action enabled in `s`.
    fn enabled(&self, s: &State, actions: &mut Vec<Action>) {
        self.enabled_actions(s, actions);
    }
}

impl Model for PublicationModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut db = Db::default();
        if self.cfg.foreign_writes > 0 {
            // The foreign writer's descriptor row, at the version its one
            // manifest or commit row names: inert until a manifest row
            // paired with a commit row admits its pack. (At version 0,
            // never published, a pinned read would never resolve it, and a
            // pack admitted by membership would show in the model's snapshot
            // but never in what the real read returns.)
            db.descriptors.insert((foreign_pack(), 1));
        }
        let mut s = State {
            now: 0,
            db,
            flights: Vec::new(),
            publishers: (0..self.cfg.publishers)
                .map(|_| self.new_publisher(0))
                .collect(),
            reader: ReaderState::default(),
            crashes_left: self.cfg.crashes,
            foreign_left: self.cfg.foreign_writes,
            history: History::default(),
        };
        for i in 0..s.publishers.len() {
            self.advance(&mut s, i);
        }
        vec![s]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        // The liveness model is small and needs the paths past a safety
        // failure (a holder refused by its own lease never publishes).
        if self.cfg.liveness || !self.violated(s) {
            self.enabled(s, actions);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        self.step(last, action)
    }

    fn format_action(&self, action: &Action) -> String {
        action.to_string()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all(self.cfg.liveness)
    }
}

impl PublicationModel {
    /// Every action enabled in `s`.
    fn enabled_actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.now < self.cfg.max_ticks {
            actions.push(Action::Tick);
        }
        for (i, p) in s.publishers.iter().enumerate() {
            let publisher = u8::try_from(i).expect("at most 4 publishers");
            if p.waiting || matches!(p.phase, Phase::Done | Phase::Start) {
                continue;
            }
            let mut probe = p.phase.clone();
            let draws: Vec<Option<u64>> = match poll(&mut probe) {
                Next::Execute(_) => vec![None],
                Next::Draw(below) => (0..below).map(Some).collect(),
                Next::Done => vec![],
            };
            for draw in draws {
                let Some(stmt) = statement_after(&p.phase, draw) else {
                    continue;
                };
                let stmt = self.as_sent(stmt);
                let Some(name) = client_action_name(stmt.name) else {
                    strict::stop(&format!("no action name for {}:\n{}", stmt.name, stmt.sql))
                };
                actions.push(Action::Client {
                    publisher,
                    name,
                    statement: stmt.name,
                    draw,
                });
            }
        }
        for (k, f) in s.flights.iter().enumerate() {
            let (statement, publisher) = (f.stmt.name, f.owner.0);
            if self.may_abandon(f) {
                actions.push(Action::Abandon {
                    flight: k,
                    statement,
                    publisher,
                });
            }
            if self.client_gives_up(f, s.now) {
                actions.push(Action::Kill {
                    flight: k,
                    statement,
                    publisher,
                });
            }
            if self.within_cap(f, s.now) {
                if matches!(f.eval, Eval::Evaluated { .. }) {
                    actions.push(Action::Land {
                        flight: k,
                        statement,
                        publisher,
                    });
                } else {
                    actions.push(Action::Evaluate {
                        flight: k,
                        statement,
                        publisher,
                    });
                }
            } else {
                actions.push(Action::Kill {
                    flight: k,
                    statement,
                    publisher,
                });
            }
        }
        if self.cfg.reader {
            match (&s.reader.pinned, &s.reader.reread) {
                (None, _) => actions.push(Action::PinSnapshot),
                (Some(_), None) => actions.push(Action::ReReadSnapshot),
                _ => {}
            }
        }
        if s.crashes_left > 0 {
            for (i, p) in s.publishers.iter().enumerate() {
                if matches!(p.phase, Phase::Done) {
                    continue;
                }
                let publisher = u8::try_from(i).expect("at most 4 publishers");
                actions.push(Action::CrashRestart {
                    publisher,
                    orphan: false,
                });
                let pending_insert = !p.waiting
                    && statement_after(&p.phase, Some(0)).is_some_and(|st| {
                        st.expect == Expect::Nothing && !is_conditional_insert(st.name)
                    });
                if self.cfg.crash_mid_statement && pending_insert {
                    actions.push(Action::CrashRestart {
                        publisher,
                        orphan: true,
                    });
                }
            }
        }
        // The foreign writer is serialised with the publishers' conditional
        // INSERTs (it never writes while one is evaluated and not landed):
        // an out-of-protocol row overlapping a guarded INSERT is a second
        // unfenced publisher, which no design can survive.
        let overlapping = s.flights.iter().any(|f| {
            matches!(f.eval, Eval::Evaluated { .. }) && f.stmt.name.starts_with("publish.")
        });
        if s.foreign_left > 0 && !overlapping {
            // One foreign row at version 1, the first version the
            // allocator hands out, keeps the branching small.
            for watermark in [false, true] {
                actions.push(Action::ForeignInsert {
                    watermark,
                    version: 1,
                });
            }
        }
    }

    /// The state after `action`.
    fn step(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => s.now += 1,
            Action::Client {
                publisher, draw, ..
            } => self.client_step(&mut s, usize::from(publisher), draw),
            Action::Evaluate { flight, .. } => self.evaluate(&mut s, flight),
            Action::Land { flight, .. } => self.land(&mut s, flight),
            Action::Kill { flight, .. } => self.kill(&mut s, flight),
            Action::Abandon { flight, .. } => self.abandon(&mut s, flight),
            Action::PinSnapshot => self.pin(&mut s),
            Action::ReReadSnapshot => {
                if let Some(p) = &s.reader.pinned {
                    s.reader.reread = Some(s.db.visible_at(p.membership, p.version));
                    s.reader.reread_rows =
                        Some(s.db.resolved_at(p.membership, p.rows_bounded, p.version));
                }
            }
            Action::CrashRestart { publisher, orphan } => {
                self.crash(&mut s, usize::from(publisher), orphan)
            }
            Action::ForeignInsert { watermark, version } => {
                s.foreign_left -= 1;
                if watermark {
                    s.db.watermark.insert((version, FOREIGN_PUBLISH_ID));
                } else {
                    s.db.manifest
                        .insert((version, FOREIGN_PUBLISH_ID, foreign_pack()));
                }
            }
        }
        Some(s)
    }
}

/// The packs a set of publishers index in their first passes, for tests
/// and docs.
pub fn packs(publishers: u8) -> BTreeSet<PackRef> {
    (0..publishers).map(|i| pack_of(i, 0)).collect()
}
