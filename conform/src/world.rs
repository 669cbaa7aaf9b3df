//! The catalog the kit answers from: the model checker's simulated engine
//! (`capcat_model_check::publication::engine::Db`), whose rows, guard
//! meanings and landings are the ones the design is checked with, and a
//! server clock in the model's ticks.

use capcat_model_check::publication::config::TICK_NS;
use capcat_model_check::publication::engine::{Db, LeaseRow};
use capcat_proto::statement::{Expect, InsertData};
use capcat_proto::{Config, Failure, Input, Lease, Rows, Statement, Tables};
use uuid::Uuid;

use crate::schema::SchemaCatalog;

/// The caller's lease id in the exploration's catalogs.
pub const OWN: Uuid = Uuid::from_u128(0x0a0a_0000_0000_4000_8000_0000_0000_0001);
/// Another publisher's lease id (and its claims and publishes).
pub const FOREIGN: Uuid = Uuid::from_u128(0x0f0f_0000_0000_4000_8000_0000_0000_0002);
/// The tick the exploration's clock starts at, late enough for rows that
/// expired before it.
pub const START_TICK: u8 = 5;
/// The term of the rows the exploration's catalogs start with.
pub const HEAD_TERM: u64 = 3;

/// A simulated catalog and its clock.
#[derive(Clone, Debug)]
pub struct Catalog {
    /// The tables.
    pub db: Db,
    /// The server clock, in ticks of [`TICK_NS`].
    pub now: u8,
    /// The captures a reader statement is answered from
    /// ([`crate::reader::answer`]).
    pub captures: Vec<capcat_proto::CaptureDescriptor>,
    /// The server's own tables, as the schema machine reads them.
    pub schema: SchemaCatalog,
}

/// Server nanoseconds at `tick`.
pub fn ns(tick: u8) -> u64 {
    u64::from(tick) * TICK_NS
}

impl Catalog {
    /// Runs `stmt` as the engine would, at the current tick: a read returns
    /// its rows; an INSERT lands what its guards admit and returns no rows.
    pub fn answer(&mut self, tables: &Tables, stmt: &Statement) -> Input {
        let unknown = |e: capcat_model_check::publication::engine::Unknown| {
            Input::Failed(Failure::Server {
                code: 62,
                message: e.to_string(),
            })
        };
        if let Some(rows) = crate::reader::answer(&self.captures, stmt) {
            return Input::Rows(rows);
        }
        if let Some(rows) = self.schema.answer(tables, stmt) {
            return Input::Rows(rows);
        }
        if stmt.expect == Expect::Nothing {
            match self.db.evaluate(tables, stmt, self.now, None) {
                Ok(landing) => {
                    // The model's tables keep a descriptor's pack and
                    // version; the readers' answers need the whole row.
                    if let (true, Some(InsertData::Descriptors(rows))) =
                        (landing.writes(), &stmt.data)
                    {
                        self.captures.extend(rows.iter().cloned());
                    }
                    self.db.land(landing);
                    Input::Rows(Rows::empty())
                }
                Err(e) => unknown(e),
            }
        } else {
            match self.db.read(tables, stmt, self.now) {
                Ok(rows) => Input::Rows(rows),
                Err(e) => unknown(e),
            }
        }
    }

    /// Lets the server clock run `ticks` on (saturating at the last tick).
    pub fn advance(&mut self, ticks: u8) {
        self.now = self.now.saturating_add(ticks);
    }
}

/// The catalogs the exploration starts machines against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum World {
    /// No rows at all.
    Empty,
    /// The caller's lease is the live head.
    OwnLive,
    /// Another publisher's lease is the live head.
    ForeignLive,
    /// The caller's lease is the head, expired.
    OwnExpired,
    /// The caller and another publisher both claimed the head term.
    Contested,
    /// The caller released its lease (a tombstone over its live row).
    Released,
    /// A version above any the caller asks for is already published.
    PublishedAbove,
    /// One of the schema machine's catalogs
    /// ([`crate::schema::WORLDS`], by index); its lease tables are empty.
    Schema(usize),
}

impl World {
    /// Every world, in the order the kit runs them.
    pub const ALL: [World; 7] = [
        World::Empty,
        World::OwnLive,
        World::ForeignLive,
        World::OwnExpired,
        World::Contested,
        World::Released,
        World::PublishedAbove,
    ];

    /// The world's name in case names.
    pub fn name(self) -> &'static str {
        match self {
            World::Empty => "empty",
            World::OwnLive => "own-live",
            World::ForeignLive => "foreign-live",
            World::OwnExpired => "own-expired",
            World::Contested => "contested",
            World::Released => "released",
            World::PublishedAbove => "published-above",
            World::Schema(i) => crate::schema::WORLDS.get(i).copied().unwrap_or("?"),
        }
    }

    /// The worlds the schema machine starts against.
    pub fn schema_worlds() -> impl Iterator<Item = World> {
        (0..crate::schema::WORLDS.len()).map(World::Schema)
    }

    /// The world named `name`.
    pub fn from_name(name: &str) -> Option<World> {
        World::ALL
            .into_iter()
            .chain(World::schema_worlds())
            .find(|w| w.name() == name)
    }

    /// The caller's lease as this world's head row names it (live for a
    /// TTL from [`START_TICK`]).
    pub fn own_lease(cfg: &Config) -> Lease {
        Lease {
            lease_id: OWN,
            holder: "kit-own".to_owned(),
            term: HEAD_TERM,
            expires_at_ns: ns(START_TICK) + cfg.lease_ttl_ns(),
            unsettled_until_ns: 0,
        }
    }

    /// The catalog this world starts with, under `cfg`, for tables named
    /// by `tables`.
    pub fn catalog(self, cfg: &Config, tables: &Tables) -> Catalog {
        let own = Self::own_lease(cfg);
        let row = |term: u64, lease_id: Uuid, expires_at_ns: u64, holder: &str| LeaseRow {
            term,
            lease_id,
            expires_at_ns,
            holder: holder.to_owned(),
        };
        let own_row = row(own.term, OWN, own.expires_at_ns, &own.holder);
        let foreign_row = row(HEAD_TERM, FOREIGN, own.expires_at_ns, "kit-rival");
        let mut db = Db::default();
        match self {
            World::Empty => {}
            World::OwnLive => {
                db.lease.insert(own_row);
            }
            World::ForeignLive => {
                db.lease.insert(foreign_row);
            }
            World::OwnExpired => {
                db.lease
                    .insert(row(HEAD_TERM, OWN, ns(START_TICK - 1), "kit-own"));
            }
            World::Contested => {
                db.lease.insert(own_row);
                db.lease.insert(foreign_row);
            }
            World::Released => {
                db.lease.insert(own_row);
                db.lease.insert(row(HEAD_TERM + 1, OWN, 0, "kit-own"));
            }
            World::PublishedAbove => {
                db.lease.insert(own_row);
                db.claims.insert((9, FOREIGN));
                db.watermark.insert((9, FOREIGN));
            }
            World::Schema(_) => {}
        }
        let schema = match self {
            World::Schema(_) => SchemaCatalog::world(tables, self.name()),
            _ => SchemaCatalog::default(),
        };
        Catalog {
            db,
            now: START_TICK,
            captures: Vec::new(),
            schema,
        }
    }
}
