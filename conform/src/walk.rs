//! Seeded random walks: actors on one simulated catalog, their steps
//! interleaved at random, the clock advancing and failures injected at
//! random. An actor's next start is built from what its last machine left
//! it (the lease it holds, the version it was given), as a capture service
//! does, so a walk covers what exploration from fixed starts cannot:
//! machines racing on the same rows.
//!
//! - `walk/<seed>`: two publishers, each acquiring the lease, allocating and
//!   publishing twice, and releasing (the lease, allocation and publish
//!   machines alone, which is what a minimal native writer implements).
//! - `service/<seed>`: two publishers each running two index passes under
//!   the lease, as the storage service does, and a reader searching and
//!   looking captures up by id meanwhile.

use capcat_proto::descriptor::Locator;
use capcat_proto::reader::{PageSize, SearchFilter, SearchQuery};
use capcat_proto::statement::Expect;
use capcat_proto::{CaptureDescriptor, Failure, Input, Lease, Step, Tables};
use uuid::Uuid;

use crate::explore::{PREFIX, SETUPS};
use crate::kit::{Failed, Open, Side};
use crate::start::{Start, Started};
use crate::world::Catalog;

/// The most steps a walk takes (every publisher is done far sooner).
const MAX_WALK_STEPS: usize = 400;
/// The tick after which the clock stops: the lease's TTL is two ticks in
/// the model setup, so this lets leases expire many times over.
const LAST_TICK: u8 = 40;
/// Publish rounds (or index passes) per publisher before it releases.
const ROUNDS: u8 = 2;
/// Reads the reader of a service walk makes.
const READS: u8 = 4;
/// The tenant of a service walk's captures.
const TENANT: &str = "walk-tenant";
/// Acquire attempts per publisher before it gives up.
const ACQUIRES: u8 = 4;

/// SplitMix64: small, seedable, and the same on every platform.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..below` (`below` at least 1).
    pub fn below(&mut self, below: u64) -> u64 {
        self.next_u64() % below.max(1)
    }

    /// True once in `n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    fn uuid(&mut self) -> Uuid {
        let hi = u128::from(self.next_u64());
        let lo = u128::from(self.next_u64());
        // A v4 UUID's version and variant bits, so the ids look like the
        // ones a service mints.
        let id = (hi << 64) | lo;
        Uuid::from_u128((id & !(0xf << 76) & !(0x3 << 62)) | (0x4 << 76) | (0x2 << 62))
    }
}

/// The two kinds of walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// Two publishers allocating and publishing (`walk/<seed>`).
    Publish,
    /// Two publishers running index passes and a reader (`service/<seed>`).
    Service,
}

impl Flavour {
    /// Its prefix in case names.
    pub fn prefix(self) -> &'static str {
        match self {
            Flavour::Publish => "walk",
            Flavour::Service => "service",
        }
    }

    /// The machines its actors start: a driver must implement them all
    /// for the walk to run.
    pub fn machines(self) -> &'static [&'static str] {
        match self {
            Flavour::Publish => &["acquire", "allocate", "publish", "release"],
            Flavour::Service => &[
                "acquire",
                "index_pass",
                "release",
                "search_page",
                "get_by_ids",
            ],
        }
    }
}

/// What an actor does next.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Next {
    Acquire,
    Allocate,
    Publish(u64),
    Index,
    Release,
    Search,
    Lookup,
    Done,
}

impl Next {
    fn machine(&self) -> &'static str {
        match self {
            Next::Acquire => "acquire",
            Next::Allocate => "allocate",
            Next::Publish(_) => "publish",
            Next::Index => "index_pass",
            Next::Release | Next::Done => "release",
            Next::Search => "search_page",
            Next::Lookup => "get_by_ids",
        }
    }
}

struct Actor {
    name: String,
    flavour: Flavour,
    held: Option<Lease>,
    next: Next,
    open: Option<Open>,
    rounds: u8,
    acquires: u8,
    allocates: u8,
}

impl Actor {
    fn new(name: String, flavour: Flavour, next: Next) -> Self {
        Self {
            name,
            flavour,
            held: None,
            next,
            open: None,
            rounds: 0,
            acquires: 0,
            allocates: 0,
        }
    }
}

/// The name of walk `seed` of `flavour`.
pub fn name(flavour: Flavour, seed: u64) -> String {
    format!("{}/{seed}", flavour.prefix())
}

/// The flavour and seed of the walk named `name`.
pub fn parse(name: &str) -> Option<(Flavour, u64)> {
    let (prefix, seed) = name.split_once('/')?;
    let flavour = [Flavour::Publish, Flavour::Service]
        .into_iter()
        .find(|f| f.prefix() == prefix)?;
    Some((flavour, seed.parse().ok()?))
}

/// What a walk did: its steps, and how many machines ended in each kind
/// of outcome ([`crate::explore::outcome_kind`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Walked {
    /// Steps taken.
    pub steps: usize,
    /// Outcomes by kind.
    pub outcomes: std::collections::BTreeMap<String, usize>,
}

/// Runs walk `seed` of `flavour` on `side`.
pub fn run(flavour: Flavour, seed: u64, side: &mut Side<'_>) -> Result<Walked, Failed> {
    let mut rng = Rng::new(seed);
    let cfg = (SETUPS[0].config)();
    let tables = Tables::new(PREFIX).map_err(|e| {
        Failed::Driver(crate::ConformError::BadMessage {
            what: e.to_string(),
        })
    })?;
    let mut catalog = Catalog {
        db: Default::default(),
        now: 1,
        captures: Vec::new(),
        schema: Default::default(),
    };
    let mut actors: Vec<Actor> = (0..2)
        .map(|i| Actor::new(format!("walker-{i}"), flavour, Next::Acquire))
        .collect();
    if flavour == Flavour::Service {
        actors.push(Actor::new("reader".to_owned(), flavour, Next::Search));
    }
    let mut walked = Walked::default();
    while walked.steps < MAX_WALK_STEPS {
        let busy: Vec<usize> = (0..actors.len())
            .filter(|i| actors[*i].next != Next::Done || actors[*i].open.is_some())
            .collect();
        let Some(&i) = busy.get(rng.below(busy.len() as u64) as usize) else {
            break;
        };
        if catalog.now < LAST_TICK && rng.one_in(6) {
            catalog.advance(1);
        }
        walked.steps += 1;
        let actor = &mut actors[i];
        let Some(open) = actor.open.as_mut() else {
            let Some(start) = next_start(actor, &catalog, &mut rng) else {
                continue;
            };
            actor.open = Some(side.open(Started {
                session: 0,
                tables: tables.clone(),
                config: cfg.clone(),
                start,
            })?);
            continue;
        };
        let input = match &open.current {
            Step::Done(done) => {
                *walked
                    .outcomes
                    .entry(crate::explore::outcome_kind(actor.next.machine(), done))
                    .or_default() += 1;
                let ended = open.ended();
                finished(actor, ended);
                actor.open = None;
                continue;
            }
            Step::Draw { below } => Input::Drawn(rng.below(*below)),
            Step::Execute(stmt) => {
                let stmt = stmt.clone();
                let insert = stmt.expect == Expect::Nothing;
                // An index pass sends about fifteen statements; at one
                // failure in twelve few would ever publish.
                let odds = match flavour {
                    Flavour::Publish => 12,
                    Flavour::Service => 48,
                };
                match rng.below(odds) {
                    // A timeout before the statement ran, or after an INSERT
                    // landed: the client cannot tell which.
                    0 => Input::Failed(Failure::Timeout),
                    1 if insert => {
                        let _ = catalog.answer(&tables, &stmt);
                        Input::Failed(Failure::Timeout)
                    }
                    2 => Input::Failed(Failure::Server {
                        code: 241,
                        message: "Memory limit (total) exceeded (the kit's answer)".to_owned(),
                    }),
                    _ => catalog.answer(&tables, &stmt),
                }
            }
        };
        side.feed(open, input)?;
    }
    Ok(walked)
}

/// A capture of the walk's tenant in `pack`.
fn capture(rng: &mut Rng, pack: &(String, uuid::Uuid)) -> CaptureDescriptor {
    CaptureDescriptor {
        tenant_id: TENANT.to_owned(),
        experiment_id: "walk-exp".to_owned(),
        run_id: format!("run-{}", rng.below(2)),
        captured_at_ns: rng.below(1_000),
        capture_id: rng.uuid(),
        locator: Locator {
            store_id: pack.0.clone(),
            pack_id: pack.1,
            payload_length: 16,
            ..Locator::default()
        },
        step: rng.below(10),
        tensor_name: "x".to_owned(),
        dtype: "float32".to_owned(),
        shape: vec![4],
        ..CaptureDescriptor::default()
    }
}

/// The start of `actor`'s next machine, `None` once it is done.
fn next_start(actor: &mut Actor, catalog: &Catalog, rng: &mut Rng) -> Option<Start> {
    Some(match actor.next.clone() {
        Next::Acquire => {
            actor.acquires += 1;
            Start::Acquire {
                holder: actor.name.clone(),
                held: actor.held.clone(),
                fresh_lease_id: rng.uuid(),
            }
        }
        Next::Allocate => {
            actor.allocates += 1;
            Start::Allocate {
                claim_id: rng.uuid(),
            }
        }
        Next::Publish(version) => {
            let lease = actor.held.clone()?;
            let packs = (0..1 + rng.below(2))
                .map(|_| ("walk-store".to_owned(), rng.uuid()))
                .collect();
            Start::Publish {
                lease,
                version,
                packs,
                publish_id: rng.uuid(),
            }
        }
        Next::Index => {
            let lease = actor.held.clone()?;
            let packs: Vec<(String, uuid::Uuid)> = (0..1 + rng.below(2))
                .map(|_| ("walk-store".to_owned(), rng.uuid()))
                .collect();
            let descriptors = packs
                .iter()
                .flat_map(|pack| {
                    let rows = 1 + rng.below(2);
                    (0..rows).map(|_| capture(rng, pack)).collect::<Vec<_>>()
                })
                .collect();
            Start::IndexPass {
                lease,
                descriptors,
                id_seed: rng.uuid(),
            }
        }
        Next::Release => Start::Release {
            lease: actor.held.clone()?,
        },
        Next::Search => Start::SearchPage {
            query: Box::new(SearchQuery {
                filter: SearchFilter {
                    tenant_id: TENANT.to_owned(),
                    ..SearchFilter::default()
                },
                cursor: None,
                page_size: PageSize::new(1 + rng.below(3)).unwrap_or_default(),
            }),
        },
        Next::Lookup => {
            // Some captures indexed so far, and one nobody wrote.
            let mut ids: Vec<uuid::Uuid> = catalog
                .captures
                .iter()
                .filter(|_| rng.one_in(2))
                .map(|d| d.capture_id)
                .collect();
            ids.push(rng.uuid());
            let head = catalog
                .db
                .watermark
                .iter()
                .map(|(v, _)| *v)
                .max()
                .unwrap_or(0);
            Start::GetByIds {
                tenant: TENANT.to_owned(),
                ids,
                pinned: head,
            }
        }
        Next::Done => return None,
    })
}

/// Moves `actor` on after its machine ended with `ended`.
fn finished(actor: &mut Actor, ended: crate::start::Ended) {
    let after_round = |actor: &mut Actor| {
        actor.rounds += 1;
        match (actor.rounds < ROUNDS, actor.flavour) {
            (true, Flavour::Publish) => Next::Allocate,
            (true, Flavour::Service) => Next::Index,
            (false, _) => Next::Release,
        }
    };
    actor.next = match actor.next {
        Next::Acquire => match ended.lease {
            Some(lease) => {
                actor.held = Some(lease);
                match actor.flavour {
                    Flavour::Publish => Next::Allocate,
                    Flavour::Service => Next::Index,
                }
            }
            None if actor.acquires < ACQUIRES => Next::Acquire,
            None => Next::Done,
        },
        Next::Allocate => match ended.version {
            Some(version) => Next::Publish(version),
            None if actor.allocates < ACQUIRES => Next::Allocate,
            None => Next::Release,
        },
        Next::Publish(_) | Next::Index => {
            if let Some(lease) = ended.lease {
                actor.held = Some(lease);
            }
            after_round(actor)
        }
        Next::Search | Next::Lookup => {
            actor.rounds += 1;
            match (actor.rounds < READS, &actor.next) {
                (false, _) => Next::Done,
                (true, Next::Search) => Next::Lookup,
                (true, _) => Next::Search,
            }
        }
        Next::Release | Next::Done => Next::Done,
    };
}
