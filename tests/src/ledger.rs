//! [`Ledger`]: what the stress's actors did, as the checker needs it.
//!
//! Every statement a publisher sends is recorded with the wall-clock
//! nanoseconds at which it was handed to the engine and at which its result
//! came back. The embedded engine runs in this process and stamps rows with
//! `now64(9)` from the same system clock, so a record's start is a lower
//! bound on when the engine evaluated the statement, and its end an upper
//! bound on when its rows became visible. A statement whose task was
//! aborted (a simulated crash) keeps no end: libchdb still runs it to
//! completion on its blocking thread, so when its rows landed is unknown.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use capcat_proto::{PackRef, Param};
use uuid::Uuid;

/// The most statements one run records. The stress is bounded in passes, so
/// this is only reached by a misconfigured run; past it, records are
/// dropped and counted (and the checker refuses to call the run clean).
pub const MAX_RECORDS: usize = 2_000_000;

/// Wall-clock nanoseconds since the Unix epoch: the clock `now64(9)` reads
/// (capcat-clickhouse's one reading of the wall clock).
pub use capcat_clickhouse::unix_now_ns as now_ns;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking actor leaves plain records behind, still consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How a recorded statement ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct End {
    /// When the result came back.
    pub end_ns: u64,
    /// Whether the engine reported success.
    pub ok: bool,
}

/// One statement an actor sent.
#[derive(Clone, Debug)]
pub struct Record {
    /// The actor (`p<publisher>.<incarnation>`).
    pub actor: String,
    /// The pass the actor was running, if any.
    pub pass: Option<u64>,
    /// The statement's stable name (`publish.insert_commit_row`, ...).
    pub name: &'static str,
    /// Its bound parameters, as capcat-proto emitted them.
    pub params: BTreeMap<String, Param>,
    /// When it was handed to the engine.
    pub start_ns: u64,
    /// When it came back; `None` while in flight or after a crash.
    pub end: Option<End>,
}

impl Record {
    /// A `UInt64` parameter.
    pub fn u64_param(&self, name: &str) -> Option<u64> {
        match self.params.get(name) {
            Some(Param::UInt64(v)) => Some(*v),
            _ => None,
        }
    }

    /// A `UUID` parameter.
    pub fn uuid_param(&self, name: &str) -> Option<Uuid> {
        match self.params.get(name) {
            Some(Param::Uuid(v)) => Some(*v),
            _ => None,
        }
    }

    /// The `packs` parameter.
    pub fn packs_param(&self) -> Vec<PackRef> {
        match self.params.get("packs") {
            Some(Param::StorePacks(packs)) => packs.clone(),
            _ => Vec::new(),
        }
    }

    /// Completed successfully, with its end time.
    pub fn ended_ok(&self) -> Option<u64> {
        self.end.filter(|e| e.ok).map(|e| e.end_ns)
    }
}

/// How a pass ended, as the publisher saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PassOutcome {
    /// `Catalog::index` reported the packs published.
    Won {
        /// The version.
        version: u64,
        /// The winning attempt.
        publish_id: Uuid,
        /// The packs published.
        packs: BTreeSet<PackRef>,
        /// Publish attempts used (attempts - 1 races were lost).
        attempts: u32,
    },
    /// Fenced out: the lease was no longer this publisher's.
    LeaseLost,
    /// The renewal before the publish found the lease gone.
    RenewRefused,
    /// Published beside a foreign publish at one version.
    Conflict {
        /// The version.
        version: u64,
        /// This pass's publish id.
        publish_id: Uuid,
    },
    /// Every attempt lost its version race.
    Exhausted,
    /// Anything else (a statement failure, a malformed row).
    Failed(String),
}

/// One index pass.
#[derive(Clone, Debug)]
pub struct Pass {
    /// The actor that ran it.
    pub actor: String,
    /// The packs it indexed.
    pub packs: BTreeSet<PackRef>,
    /// How it ended; `None` while running or after a crash.
    pub outcome: Option<PassOutcome>,
}

/// Event counters of a run (races observed, faults injected).
#[derive(Debug, Default)]
pub struct Counters {
    /// Index passes started.
    pub passes: AtomicU64,
    /// Passes that published.
    pub won: AtomicU64,
    /// Version races lost inside passes that went on (attempts beyond the first).
    pub lost_races: AtomicU64,
    /// Passes fenced out (`LeaseLost`) or refused at renewal.
    pub lease_lost: AtomicU64,
    /// Passes ending in `Conflict`.
    pub conflicts: AtomicU64,
    /// Passes that lost every version race.
    pub exhausted: AtomicU64,
    /// Passes that failed otherwise.
    pub failed: AtomicU64,
    /// Successful lease acquisitions.
    pub acquisitions: AtomicU64,
    /// Acquisitions by a different actor than the previous holder.
    pub handovers: AtomicU64,
    /// Acquires refused because a live lease was held.
    pub held_refusals: AtomicU64,
    /// Acquires that gave up on contested terms.
    pub contested_claims: AtomicU64,
    /// Clean, fenced releases.
    pub releases: AtomicU64,
    /// Publisher tasks aborted mid-flight.
    pub crashes: AtomicU64,
    /// Publishes stalled after their renewal until a takeover (or a bound).
    pub stalls: AtomicU64,
    /// Stalls that ended with another lease at the head: the stalled
    /// publisher's guarded INSERTs then ran against a taken-over lease.
    pub stalls_taken_over: AtomicU64,
    /// Commit-row INSERTs sent (by every publisher of the run).
    pub watermarks: AtomicU64,
    /// Commit-row INSERTs told `Timeout` at once and started on the engine
    /// later (a late start).
    pub late_starts: AtomicU64,
    /// Publish attempts put off by the settle rule (`IndexError::Unsettled`).
    pub unsettled: AtomicU64,
    /// Publish attempts that sent a guarded INSERT (counted at the first).
    pub attempts: AtomicU64,
    /// Guarded INSERTs sent with less than the execution cap left on their
    /// lease (`StallPlan::short_lease_every`).
    pub short_lease_sends: AtomicU64,
    /// Short-lease sends whose rows landed: never, with the shipped fence.
    pub short_lease_landed: AtomicU64,
    /// Versions pinned by readers.
    pub pins: AtomicU64,
    /// Earlier pinned versions re-read.
    pub rereads: AtomicU64,
    /// Reader lookups (`get_by_ids`) at a pinned version.
    pub lookups: AtomicU64,
    /// Reader statements that failed (counted, never a violation by
    /// themselves).
    pub reader_errors: AtomicU64,
}

impl Counters {
    /// Adds one to `counter`.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Every counter by name, for the report.
    pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        BTreeMap::from([
            ("passes", get(&self.passes)),
            ("won", get(&self.won)),
            ("lost_races", get(&self.lost_races)),
            ("lease_lost", get(&self.lease_lost)),
            ("conflicts", get(&self.conflicts)),
            ("exhausted", get(&self.exhausted)),
            ("failed", get(&self.failed)),
            ("acquisitions", get(&self.acquisitions)),
            ("handovers", get(&self.handovers)),
            ("held_refusals", get(&self.held_refusals)),
            ("contested_claims", get(&self.contested_claims)),
            ("releases", get(&self.releases)),
            ("crashes", get(&self.crashes)),
            ("stalls", get(&self.stalls)),
            ("stalls_taken_over", get(&self.stalls_taken_over)),
            ("late_starts", get(&self.late_starts)),
            ("unsettled", get(&self.unsettled)),
            ("attempts", get(&self.attempts)),
            ("short_lease_sends", get(&self.short_lease_sends)),
            ("short_lease_landed", get(&self.short_lease_landed)),
            ("pins", get(&self.pins)),
            ("rereads", get(&self.rereads)),
            ("lookups", get(&self.lookups)),
            ("reader_errors", get(&self.reader_errors)),
        ])
    }
}

/// The shared record of a run.
#[derive(Debug, Default)]
pub struct Ledger {
    records: Mutex<Vec<Record>>,
    dropped: AtomicU64,
    passes: Mutex<BTreeMap<u64, Pass>>,
    captures: Mutex<Vec<Uuid>>,
    last_holder: Mutex<Option<String>>,
    /// The run's counters.
    pub counters: Counters,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `actor` sends a statement now; returns its index.
    pub fn begin(
        &self,
        actor: &str,
        pass: Option<u64>,
        name: &'static str,
        params: &BTreeMap<String, Param>,
    ) -> Option<usize> {
        let mut records = lock(&self.records);
        if records.len() >= MAX_RECORDS {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        records.push(Record {
            actor: actor.to_owned(),
            pass,
            name,
            params: params.clone(),
            start_ns: now_ns(),
            end: None,
        });
        Some(records.len() - 1)
    }

    /// Records that the statement at `index` came back.
    pub fn finish(&self, index: Option<usize>, ok: bool) {
        let end_ns = now_ns();
        if let Some(i) = index
            && let Some(record) = lock(&self.records).get_mut(i)
        {
            record.end = Some(End { end_ns, ok });
        }
    }

    /// Records dropped past [`MAX_RECORDS`].
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// A copy of every record so far.
    pub fn records(&self) -> Vec<Record> {
        lock(&self.records).clone()
    }

    /// Records that `actor` starts pass `pass` over `packs` minting `captures`.
    pub fn begin_pass(&self, pass: u64, actor: &str, packs: BTreeSet<PackRef>, captures: &[Uuid]) {
        lock(&self.captures).extend_from_slice(captures);
        lock(&self.passes).insert(
            pass,
            Pass {
                actor: actor.to_owned(),
                packs,
                outcome: None,
            },
        );
    }

    /// Records how pass `pass` ended.
    pub fn end_pass(&self, pass: u64, outcome: PassOutcome) {
        if let Some(p) = lock(&self.passes).get_mut(&pass) {
            p.outcome = Some(outcome);
        }
    }

    /// A copy of every pass so far.
    pub fn passes(&self) -> BTreeMap<u64, Pass> {
        lock(&self.passes).clone()
    }

    /// Every capture id minted so far (in minting order).
    pub fn captures(&self) -> Vec<Uuid> {
        lock(&self.captures).clone()
    }

    /// Records an acquisition by `publisher`; counts a handover when the
    /// previous holder was another publisher.
    pub fn acquired(&self, publisher: &str) {
        Counters::bump(&self.counters.acquisitions);
        let mut last = lock(&self.last_holder);
        if last.as_deref().is_some_and(|l| l != publisher) {
            Counters::bump(&self.counters.handovers);
        }
        *last = Some(publisher.to_owned());
    }
}
