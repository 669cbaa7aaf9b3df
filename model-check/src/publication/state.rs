//! The publication model's state: the real capcat-proto machines of every
//! actor, the statements in flight, the simulated ClickHouse, the clock, and
//! the history the properties read.

use std::collections::{BTreeMap, BTreeSet};

use capcat_proto::designs::Designed;
use capcat_proto::lease::{Lease, LeaseClaim, Release};
use capcat_proto::statement::Statement;
use capcat_proto::{IndexPass, PackRef};
use uuid::Uuid;

use super::engine::{Db, Landing, Membership};

/// Where a publisher is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// About to acquire the lease (fresh start or after a restart).
    Start,
    /// Acquiring (or, for a holder, re-acquiring) the lease.
    Acquire(Box<Designed<LeaseClaim>>),
    /// Running its index pass under the lease.
    Pass(Box<Designed<IndexPass>>),
    /// Releasing its lease after the pass (possibly as a stale holder).
    Release(Box<Designed<Release>>),
    /// Finished.
    Done,
}

/// How a publisher's index pass ended, for the liveness property.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PassEnd {
    /// `IndexReport::Indexed`: published and recorded.
    Indexed,
    /// `IndexReport::NothingToDo`: already recorded by an earlier pass.
    NothingToDo,
    /// `IndexError::LeaseLost`: the lease was taken over.
    LeaseLost,
    /// Anything else (exhausted, a statement failure, a conflict).
    Failed,
}

/// One publisher process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Publisher {
    /// Restarts so far; part of every id this incarnation mints.
    pub incarnation: u8,
    /// Lease acquisitions started by this incarnation.
    pub rounds: u8,
    /// Whether this incarnation has re-acquired already.
    pub reacquired: bool,
    /// The machine it is running.
    pub phase: Phase,
    /// The lease this incarnation holds, if any.
    pub held: Option<Lease>,
    /// Whether this incarnation ever held the lease.
    pub held_ever: bool,
    /// Index passes this incarnation started after its first (a failed
    /// pass runs again under the same lease, up to `ModelConfig::passes`).
    pub passes: u8,
    /// Every lease id this incarnation has held (a design that forgets its
    /// lease still owns the row it wrote).
    pub own_lease_ids: BTreeSet<Uuid>,
    /// Whether it waits on a conditional INSERT in flight.
    pub waiting: bool,
    /// How its pass ended.
    pub ended: Option<PassEnd>,
}

/// Who is waiting for a statement in flight.
pub type Owner = (u8, u8);

/// How far the engine has got with a conditional INSERT.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Eval {
    /// Sent, not yet evaluated.
    Pending,
    /// The two-subquery fence's first read is done.
    FirstRead {
        /// Whether the head's lease_id matched.
        id_ok: bool,
    },
    /// Evaluated: these rows land next (none if the guard was false).
    Evaluated {
        /// What lands.
        landing: Landing,
        /// Ground truth at evaluation: the statement's lease was NOT the
        /// live head (only for statements that carry a lease id).
        fenced_out: bool,
    },
}

/// A statement in flight in the engine.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Flight {
    /// The client waiting for it; a crashed client's statement has an
    /// owner whose incarnation is gone.
    pub owner: Owner,
    /// The statement, as the machine (or a mutation hook) built it.
    pub stmt: Statement,
    /// Server tick it was sent at; `max_execution_time` counts from here.
    pub issued_at: u8,
    /// Its cap in ticks, from `stmt.settings.max_execution_time_s`.
    pub cap: Option<u8>,
    /// Engine progress.
    pub eval: Eval,
    /// Late starts only (`ModelConfig::late_start`): the tick the server
    /// started it at, from which its cap counts (`None`: not started, or
    /// late starts off, when the cap counts from `issued_at`).
    pub started_at: Option<u8>,
    /// Late starts only: its client was told `Timeout` before it started;
    /// whatever it does later reaches nobody.
    pub detached: bool,
}

impl Flight {
    /// `stmt`, sent by `owner` at tick `now`: not started, its client
    /// waiting, its cap (in ticks) from its `max_execution_time`.
    pub fn sent(owner: Owner, stmt: Statement, now: u8) -> Self {
        let cap = stmt
            .settings
            .max_execution_time_s
            .map(|c| u8::try_from(c).unwrap_or(u8::MAX));
        Self {
            owner,
            stmt,
            issued_at: now,
            cap,
            eval: Eval::Pending,
            started_at: None,
            detached: false,
        }
    }
}

/// What the reader pinned.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pinned {
    /// The pinned version.
    pub version: u64,
    /// The membership predicate found in its statement's SQL.
    pub membership: Membership,
    /// How its statement bounds the descriptor rows it resolves.
    pub rows_bounded: super::engine::RowBound,
    /// What the snapshot at W held when W was pinned.
    pub snapshot: BTreeSet<PackRef>,
    /// What the read returned when W was pinned: per member pack, the
    /// `index_version` of the row it resolved to.
    pub rows: BTreeMap<PackRef, u64>,
}

/// The reader.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReaderState {
    /// What it pinned, once it has.
    pub pinned: Option<Pinned>,
    /// What its re-read returned, once it has re-read.
    pub reread: Option<BTreeSet<PackRef>>,
    /// The rows its re-read resolved, once it has re-read.
    pub reread_rows: Option<BTreeMap<PackRef, u64>>,
}

/// What happened, as the properties need it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct History {
    /// A guarded statement landed rows although its lease was not the live
    /// head when its guard was read.
    pub fenced_out_landed: bool,
    /// A release tombstone landed although the releaser was not the live
    /// head when its guard was read.
    pub release_by_non_holder: bool,
    /// A holder's acquire was refused as held by its own live lease.
    pub refused_by_own_lease: bool,
    /// Attempts reported `Won` (via `IndexReport::Indexed`): version,
    /// publish id, packs.
    pub won: BTreeSet<(u64, Uuid, BTreeSet<PackRef>)>,
    /// Attempts reported lost (`LostRace`, `LeaseLost`): their publish ids.
    pub lost: BTreeSet<Uuid>,
    /// Publish attempts per version (by publish id), recorded when their
    /// first guarded statement is sent.
    pub publishes_at: BTreeMap<u64, BTreeSet<Uuid>>,
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Server clock, in ticks.
    pub now: u8,
    /// The catalog.
    pub db: Db,
    /// Conditional INSERTs (and a crashed client's orphans) in flight, in
    /// the order they were sent.
    pub flights: Vec<Flight>,
    /// The publishers.
    pub publishers: Vec<Publisher>,
    /// The reader.
    pub reader: ReaderState,
    /// Crashes left.
    pub crashes_left: u8,
    /// Foreign rows left.
    pub foreign_left: u8,
    /// History for the properties.
    pub history: History,
}
