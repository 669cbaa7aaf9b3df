//! [`RecordingTransport`]: a publisher's own connection to the engine that
//! records every statement in the [`Ledger`] and, as an adversarial
//! scheduler, delays some guarded INSERTs.
//!
//! It never changes a statement and never applies a guard: the SQL, the
//! parameters and the settings reach the engine exactly as capcat-proto
//! emitted them. It only chooses WHEN a statement is sent, which is what a
//! slow network or a paused process would do.
//!
//! It also starts some commit-row INSERTs late: the client hears `Timeout`
//! at once and the unchanged statement reaches the engine later
//! ([`StallPlan::late_start_every`]), which is what the settle rule and
//! the exact-row fence exist for.
//!
//! The one deliberate stall: after a publish attempt has renewed its lease,
//! its first guarded INSERT may be held back until the lease head is
//! another lease (a takeover), polling the head with capcat-proto's own
//! `lease.read_head`. That is the schedule under which a missing fence
//! lets a taken-over publisher write; with the fence, the INSERT lands
//! nothing.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use capcat_clickhouse::{BoxFuture, Embedded, Transport};
use capcat_proto::{Failure, Param, Rows, Statement, Tables, Value};
use uuid::Uuid;

use crate::ledger::{Counters, Ledger};
use crate::rng::Rng;

/// How often a stalled publish polls the lease head.
const STALL_POLL: Duration = Duration::from_millis(20);

/// When a [`RecordingTransport`] holds statements back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallPlan {
    /// Per mille of publish attempts stalled until a takeover.
    pub takeover_per_mille: u64,
    /// The longest a stall waits for a takeover.
    pub max_stall: Duration,
    /// Upper bound of the random pause (ms) before every guarded INSERT, so
    /// the manifest and commit-row statements of different publishers
    /// interleave at different offsets.
    pub jitter_ms: u64,
    /// Every how many commit-row INSERTs of the run (counted across every
    /// publisher and incarnation; 0: never) one STARTS late: the client is
    /// told `Timeout` at once (as a transport that gave up would), and the
    /// very statement is handed to the engine later, unchanged, as a query
    /// queued on the server or held up on the network would be. Counted,
    /// not drawn, so a run with a few commit rows is sure to have one.
    pub late_start_every: u64,
    /// The longest a late start waits before the engine runs it.
    pub max_late: Duration,
    /// Every how many publish attempts of the run (0: never) one holds its
    /// first guarded INSERT until LESS than the execution cap is left on
    /// the lease row it names (a client descheduled after its renewal),
    /// and then sends it. The exact-row fence asks for the cap plus the
    /// slack to be left, so such a statement must land nothing; the seed's
    /// marginless fence lets it pass while the lease is still live, and
    /// its rows may then land after the lease has lapsed. Counted as
    /// `short_lease_sends`; rows that landed anyway as
    /// `short_lease_landed`.
    pub short_lease_every: u64,
    /// The fence text the guarded statements carry.
    pub fence: FenceText,
}

/// The fence text a [`RecordingTransport`] sends in guarded INSERTs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceText {
    /// The statements as capcat-proto builds them.
    Shipped,
    /// The rejected `MarginlessFence` (capcat-proto's
    /// `designs::marginless_fence`): the head must only be live now.
    Marginless,
}

impl StallPlan {
    /// No stalls and no pauses: statements go out as the machine emits them.
    pub fn none() -> Self {
        Self {
            takeover_per_mille: 0,
            max_stall: Duration::ZERO,
            jitter_ms: 0,
            late_start_every: 0,
            max_late: Duration::ZERO,
            short_lease_every: 0,
            fence: FenceText::Shipped,
        }
    }
}

/// A recording, stalling transport over the embedded engine. See the
/// module docs.
#[derive(Debug)]
pub struct RecordingTransport {
    inner: Embedded,
    tables: Tables,
    actor: String,
    ledger: Arc<Ledger>,
    plan: StallPlan,
    rng: Mutex<Rng>,
    pass: AtomicU64,
    stalled: Mutex<BTreeSet<Uuid>>,
    stop: Arc<AtomicBool>,
}

/// `pass` value meaning "not in a pass".
const NO_PASS: u64 = u64::MAX;

impl RecordingTransport {
    /// A transport for `actor` over `inner`, recording into `ledger`. A
    /// stall ends early once `stop` is set (the run is ending).
    pub fn new(
        inner: Embedded,
        tables: Tables,
        actor: String,
        ledger: Arc<Ledger>,
        plan: StallPlan,
        rng: Rng,
        stop: Arc<AtomicBool>,
    ) -> Self {
        Self {
            inner,
            tables,
            actor,
            ledger,
            plan,
            rng: Mutex::new(rng),
            pass: AtomicU64::new(NO_PASS),
            stalled: Mutex::new(BTreeSet::new()),
            stop,
        }
    }

    /// Tags the statements that follow with pass `pass` (`None`: none).
    pub fn set_pass(&self, pass: Option<u64>) {
        self.pass.store(pass.unwrap_or(NO_PASS), Ordering::Relaxed);
    }

    fn draw<T>(&self, f: impl FnOnce(&mut Rng) -> T) -> T {
        f(&mut self.rng.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Holds a guarded INSERT back per the plan; true when it was held
    /// until less than the cap was left on its lease.
    async fn before(&self, stmt: &Statement) -> bool {
        let guarded = matches!(
            stmt.name,
            "publish.insert_manifest" | "publish.insert_commit_row"
        );
        if !guarded {
            return false;
        }
        let pause = self.draw(|r| r.below(self.plan.jitter_ms + 1));
        if pause > 0 {
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
        let (Some(Param::Uuid(publish_id)), Some(Param::Uuid(lease_id))) =
            (stmt.params.get("publish_id"), stmt.params.get("lease_id"))
        else {
            return false;
        };
        // Decide once per attempt, at its first guarded statement.
        let first = self
            .stalled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(*publish_id);
        if !first {
            return false;
        }
        let attempt = self
            .ledger
            .counters
            .attempts
            .fetch_add(1, Ordering::Relaxed);
        if let every @ 1.. = self.plan.short_lease_every
            && attempt % every == every / 2
            && let Some(Param::UInt64(expires_ns)) = stmt.params.get("lease_expires_ns")
            && let Some(cap_s) = stmt.settings.max_execution_time_s
        {
            return self
                .stall_until_short(*expires_ns, u64::from(cap_s) * 1_000_000_000)
                .await;
        }
        if self.draw(|r| r.chance(self.plan.takeover_per_mille)) {
            self.stall_until_takeover(*lease_id).await;
        }
        false
    }

    /// Waits until less than the statement's execution cap `cap_ns` (and
    /// more than nothing) is left on the lease row expiring at `expires_ns`
    /// (server nanoseconds; the embedded engine's clock is the host's):
    /// between a tenth and nine tenths of the cap, drawn. Bounded by the
    /// lease's own life.
    ///
    /// Returns whether the statement now goes out short, and only then
    /// counts it: a run that stops first sends it at once, with its whole
    /// lease left, and a fence that lets that one through is right to.
    /// Counting it anyway once reported a correct fence as broken (a CI run
    /// whose time bound fell inside this wait).
    async fn stall_until_short(&self, expires_ns: u64, cap_ns: u64) -> bool {
        let left_ns = self.draw(|r| cap_ns / 10 + r.below(cap_ns * 8 / 10));
        let until = expires_ns.saturating_sub(left_ns);
        let wait = until.saturating_sub(crate::ledger::now_ns());
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        if wait > 0 {
            tokio::time::sleep(Duration::from_nanos(wait)).await;
        }
        // A sleep ends no earlier than asked, so less than `left_ns` is
        // left now; asserted, since a short send that is not short would
        // make `short_lease_landed` accuse the fence of a harness slip.
        let left_now = expires_ns.saturating_sub(crate::ledger::now_ns());
        assert!(
            left_now < cap_ns,
            "a short-lease send with {left_now} ns left of a {cap_ns} ns cap"
        );
        Counters::bump(&self.ledger.counters.short_lease_sends);
        true
    }

    /// After a short-lease send: whether its rows landed (counted as
    /// `short_lease_landed`). Read at once, with the statement's own keys.
    async fn count_short_lease_landing(&self, stmt: &Statement) {
        let (Some(Param::UInt64(v)), Some(Param::Uuid(id))) = (
            stmt.params.get("index_version"),
            stmt.params.get("publish_id"),
        ) else {
            return;
        };
        let table = if stmt.name == "publish.insert_commit_row" {
            self.tables.index_watermark()
        } else {
            self.tables.snapshot_manifest()
        };
        let probe = Statement {
            name: "test.short_lease_rows",
            sql: format!(
                "SELECT toUInt64(count()) AS n FROM {table} \
                 WHERE index_version = {v} AND publish_id = toUUID('{id}')"
            ),
            params: std::collections::BTreeMap::new(),
            settings: capcat_proto::statement::Settings::default(),
            expect: capcat_proto::statement::Expect::Rows(vec![capcat_proto::statement::Column {
                name: "n",
                ty: capcat_proto::statement::ColumnType::UInt64,
            }]),
            data: None,
        };
        if let Ok(Rows(rows)) = self.inner.execute(&probe).await
            && rows
                .first()
                .is_some_and(|row| matches!(row.first(), Some(Value::UInt64(n)) if *n > 0))
        {
            Counters::bump(&self.ledger.counters.short_lease_landed);
            tracing::warn!(
                actor = self.actor,
                statement = stmt.name,
                "a short-lease send landed rows"
            );
        }
    }

    /// Waits (bounded by the plan) until the lease head is not `lease_id`.
    async fn stall_until_takeover(&self, lease_id: Uuid) {
        Counters::bump(&self.ledger.counters.stalls);
        let polls = (self.plan.max_stall.as_millis() / STALL_POLL.as_millis()).max(1);
        let head = capcat_proto::lease::sql::read_head(&self.tables);
        for _ in 0..polls {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            tokio::time::sleep(STALL_POLL).await;
            let Ok(Rows(rows)) = self.inner.execute(&head).await else {
                continue;
            };
            let head_id = rows.first().and_then(|row| match row.get(1) {
                Some(Value::Uuid(id)) => Some(*id),
                _ => None,
            });
            if head_id.is_some_and(|id| id != lease_id) {
                Counters::bump(&self.ledger.counters.stalls_taken_over);
                tracing::debug!(actor = self.actor, %lease_id, "stalled publish resumes after a takeover");
                return;
            }
        }
        tracing::debug!(actor = self.actor, %lease_id, "stalled publish resumes without a takeover");
    }
}

impl RecordingTransport {
    /// Hands `stmt` to the engine after a random delay, recorded when it
    /// really runs, with nobody waiting for it. Bounded by the plan's
    /// `max_late`; a late statement still pending when the run stops runs
    /// at once, so the final checks see every row it lands.
    fn start_late(&self, stmt: &Statement, pass: Option<u64>) {
        Counters::bump(&self.ledger.counters.late_starts);
        let delay = Duration::from_millis(self.draw(|r| {
            r.below(u64::try_from(self.plan.max_late.as_millis()).unwrap_or(u64::MAX) + 1)
        }));
        let (inner, ledger, stop) = (
            self.inner.clone(),
            Arc::clone(&self.ledger),
            Arc::clone(&self.stop),
        );
        let (actor, stmt) = (self.actor.clone(), stmt.clone());
        tokio::spawn(async move {
            let step = Duration::from_millis(10);
            let mut waited = Duration::ZERO;
            while waited < delay && !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(step).await;
                waited += step;
            }
            let index = ledger.begin(&actor, pass, stmt.name, &stmt.params);
            let result = inner.execute(&stmt).await;
            ledger.finish(index, result.is_ok());
            tracing::debug!(
                actor,
                statement = stmt.name,
                ?waited,
                ok = result.is_ok(),
                "late start ran"
            );
        });
    }
}

impl Transport for RecordingTransport {
    fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
        Box::pin(async move {
            let rewritten;
            let stmt = match self.plan.fence {
                FenceText::Shipped => stmt,
                FenceText::Marginless => {
                    rewritten = capcat_proto::designs::marginless_fence(stmt, &self.tables);
                    &rewritten
                }
            };
            let short = self.before(stmt).await;
            let pass = match self.pass.load(Ordering::Relaxed) {
                NO_PASS => None,
                p => Some(p),
            };
            let nth = (stmt.name == "publish.insert_commit_row").then(|| {
                self.ledger
                    .counters
                    .watermarks
                    .fetch_add(1, Ordering::Relaxed)
            });
            if let (Some(n), every @ 1..) = (nth, self.plan.late_start_every)
                && n % every == every / 2
            {
                // What the client saw: the statement failed. Recorded so,
                // the checker does not judge the pass by an outcome that
                // does not describe the row's fate (the late run is
                // recorded on its own when it happens).
                let index = self
                    .ledger
                    .begin(&self.actor, pass, stmt.name, &stmt.params);
                self.ledger.finish(index, false);
                self.start_late(stmt, pass);
                return Err(Failure::Timeout);
            }
            let index = self
                .ledger
                .begin(&self.actor, pass, stmt.name, &stmt.params);
            let result = self.inner.execute(stmt).await;
            self.ledger.finish(index, result.is_ok());
            if short && result.is_ok() {
                self.count_short_lease_landing(stmt).await;
            }
            result
        })
    }

    fn kind(&self) -> &'static str {
        "embedded-recording"
    }
}
