//! Seeded random walks: two publishers on one simulated catalog, each
//! acquiring the lease, allocating and publishing twice and releasing,
//! their steps interleaved at random, the clock advancing and failures
//! injected at random. A publisher's next start is built from what its
//! last machine left it (the lease it holds, the version it was given),
//! as a capture service does, so a walk covers what exploration from fixed
//! starts cannot: two machines racing on the same rows.

use capcat_proto::statement::Expect;
use capcat_proto::{Failure, Input, Lease, Step, Tables};
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
/// Publish rounds per publisher before it releases.
const ROUNDS: u8 = 2;
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

/// What a publisher does next.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Next {
    Acquire,
    Allocate,
    Publish(u64),
    Release,
    Done,
}

struct Publisher {
    name: String,
    held: Option<Lease>,
    next: Next,
    open: Option<Open>,
    rounds: u8,
    acquires: u8,
    allocates: u8,
}

/// The name of walk `seed`.
pub fn name(seed: u64) -> String {
    format!("walk/{seed}")
}

/// The seed of the walk named `name`.
pub fn parse(name: &str) -> Option<u64> {
    name.strip_prefix("walk/")?.parse().ok()
}

/// The machines a walk starts.
pub const MACHINES: [&str; 4] = ["acquire", "allocate", "publish", "release"];

/// What a walk did: its steps, and how many machines ended in each kind
/// of outcome ([`crate::explore::outcome_kind`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Walked {
    /// Steps taken.
    pub steps: usize,
    /// Outcomes by kind.
    pub outcomes: std::collections::BTreeMap<String, usize>,
}

/// Runs walk `seed` on `side`.
pub fn run(seed: u64, side: &mut Side<'_>) -> Result<Walked, Failed> {
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
    };
    let mut publishers: Vec<Publisher> = (0..2)
        .map(|i| Publisher {
            name: format!("walker-{i}"),
            held: None,
            next: Next::Acquire,
            open: None,
            rounds: 0,
            acquires: 0,
            allocates: 0,
        })
        .collect();
    let mut walked = Walked::default();
    while walked.steps < MAX_WALK_STEPS {
        let busy: Vec<usize> = (0..publishers.len())
            .filter(|i| publishers[*i].next != Next::Done || publishers[*i].open.is_some())
            .collect();
        let Some(&i) = busy.get(rng.below(busy.len() as u64) as usize) else {
            break;
        };
        if catalog.now < LAST_TICK && rng.one_in(6) {
            catalog.advance(1);
        }
        walked.steps += 1;
        let p = &mut publishers[i];
        let Some(open) = p.open.as_mut() else {
            let Some(start) = next_start(p, &mut rng) else {
                continue;
            };
            p.open = Some(side.open(Started {
                session: 0,
                tables: tables.clone(),
                config: cfg.clone(),
                start,
            })?);
            continue;
        };
        let input = match &open.current {
            Step::Done(done) => {
                let machine = match p.next {
                    Next::Acquire => "acquire",
                    Next::Allocate => "allocate",
                    Next::Publish(_) => "publish",
                    Next::Release | Next::Done => "release",
                };
                *walked
                    .outcomes
                    .entry(crate::explore::outcome_kind(machine, done))
                    .or_default() += 1;
                let ended = open.ended();
                finished(p, ended);
                p.open = None;
                continue;
            }
            Step::Draw { below } => Input::Drawn(rng.below(*below)),
            Step::Execute(stmt) => {
                let stmt = stmt.clone();
                let insert = stmt.expect == Expect::Nothing;
                match rng.below(12) {
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

/// The start of publisher `p`'s next machine, `None` once it is done.
fn next_start(p: &mut Publisher, rng: &mut Rng) -> Option<Start> {
    Some(match p.next.clone() {
        Next::Acquire => {
            p.acquires += 1;
            Start::Acquire {
                holder: p.name.clone(),
                held: p.held.clone(),
                fresh_lease_id: rng.uuid(),
            }
        }
        Next::Allocate => {
            p.allocates += 1;
            Start::Allocate {
                claim_id: rng.uuid(),
            }
        }
        Next::Publish(version) => {
            let lease = p.held.clone()?;
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
        Next::Release => Start::Release {
            lease: p.held.clone()?,
        },
        Next::Done => return None,
    })
}

/// Moves publisher `p` on after its machine ended with `ended`.
fn finished(p: &mut Publisher, ended: crate::start::Ended) {
    p.next = match p.next {
        Next::Acquire => match ended.lease {
            Some(lease) => {
                p.held = Some(lease);
                Next::Allocate
            }
            None if p.acquires < ACQUIRES => Next::Acquire,
            None => Next::Done,
        },
        Next::Allocate => match ended.version {
            Some(version) => Next::Publish(version),
            None if p.allocates < ACQUIRES => Next::Allocate,
            None => Next::Release,
        },
        Next::Publish(_) => {
            if let Some(lease) = ended.lease {
                p.held = Some(lease);
            }
            p.rounds += 1;
            if p.rounds < ROUNDS {
                Next::Allocate
            } else {
                Next::Release
            }
        }
        Next::Release | Next::Done => Next::Done,
    };
}
