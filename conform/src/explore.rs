//! The bounded exhaustive exploration: every machine, from a set of starts,
//! against catalogs in several states, with the answer at each step (and at
//! up to two steps of a run) replaced by every other shape it can take.

use capcat_model_check::publication::config::TICK_NS;
use capcat_proto::reader::{Cursor, PageSize, Range, SearchFilter, SearchQuery};
use capcat_proto::statement::{Expect, Value};
use capcat_proto::{
    CaptureDescriptor, Config, Failure, Input, Lease, PackRef, Rows, Statement, Step, Tables,
};
use uuid::Uuid;

use crate::kit::{Failed, Side};
use crate::start::{Start, Started};
use crate::world::{Catalog, FOREIGN, OWN, World};

/// The most steps one machine may take in a case. capcat-proto's machines
/// end far sooner under the kit's attempt bounds; a driver that loops is
/// stopped here by the reference reaching `Done` first.
const MAX_STEPS: usize = 256;

/// The table prefix of every case.
pub const PREFIX: &str = "t";

/// The lease id a fresh claim carries.
const FRESH: Uuid = Uuid::from_u128(0x0b0b_0000_0000_4000_8000_0000_0000_0003);
/// The claim id of an allocation.
const CLAIM: Uuid = Uuid::from_u128(0x0c0c_0000_0000_4000_8000_0000_0000_0004);
/// The id of a publish attempt.
const PUBLISH: Uuid = Uuid::from_u128(0x0d0d_0000_0000_4000_8000_0000_0000_0005);
/// The id seed of an index pass.
const SEED: Uuid = Uuid::from_u128(0x0505_0000_0000_4000_8000_0000_0000_0100);

/// The tenant of the exploration's captures.
const TENANT: &str = "kit-tenant";

/// The id of capture `n`.
fn capture_id(n: u128) -> Uuid {
    Uuid::from_u128(0xca97_0000_0000_4000_8000_0000_0000_0000 + n)
}

/// The captures the exploration's catalog answers reads with: three of
/// the tenant, in two packs, out of key order.
fn captures() -> Vec<CaptureDescriptor> {
    let pack = |n: u128| ("kit-store".to_owned(), Uuid::from_u128(0x0e0e_0000 + n));
    let mut out: Vec<CaptureDescriptor> = [(2, 1), (0, 0), (1, 1)]
        .into_iter()
        .map(|(i, p)| descriptor(i, pack(p)))
        .collect();
    for d in &mut out {
        d.index_version = 1;
    }
    out
}

/// Descriptor `i` of the exploration's index passes, in `pack`: a row with
/// a value in every column (a NaN and a -0.0 among the summary's floats,
/// text beyond ASCII), so a driver that mis-encodes any column of the
/// descriptor INSERT's data differs.
fn descriptor(i: usize, pack: PackRef) -> CaptureDescriptor {
    let f = capcat_proto::descriptor::F64Bits::new;
    let i64 = i as u64;
    CaptureDescriptor {
        tenant_id: "kit-tenant".to_owned(),
        experiment_id: "exp-\u{fc}".to_owned(),
        run_id: "run-1".to_owned(),
        captured_at_ns: 1_700_000_000_000_000_000 + i64,
        capture_id: capture_id(u128::from(i64)),
        locator: capcat_proto::descriptor::Locator {
            store_id: pack.0,
            pack_id: pack.1,
            payload_offset: 4096 * i64,
            payload_length: 1792,
            payload_sha256: "ab".repeat(32),
        },
        index_version: 0,
        step: 7 + i64,
        tensor_name: format!("model.layers.{i}.mlp"),
        dtype: "bfloat16".to_owned(),
        shape: vec![896, 1],
        summary: capcat_proto::descriptor::SummaryColumns {
            summary_version: 2,
            element_count: 896,
            minimum: f(-0.0),
            maximum: f(3.5),
            mean: f(f64::NAN),
            l2_norm: f(1e-310),
            abs_max: f(f64::INFINITY),
            zero_fraction: f(0.25),
        },
    }
}

/// A protocol configuration the cases run under.
#[derive(Debug)]
pub struct Setup {
    /// Its name in case names.
    pub name: &'static str,
    /// The configuration.
    pub config: fn() -> Config,
}

fn model_config() -> Config {
    // The model checker's scale: a TTL of two ticks, a cap of one, no slack;
    // two attempts of everything (so a bound is reached within a case), and
    // a chunk and an insert of one row (so one publish sends several).
    Config::new(2 * TICK_NS, TICK_NS)
        .and_then(|c| c.with_fence_slack_ns(0))
        .and_then(|c| c.with_attempts(2, 2, 2))
        .and_then(|c| c.with_chunk(1))
        .and_then(|c| c.with_insert_rows(1))
        .unwrap_or_default()
}

/// The two configurations: the model's scale and the shipped defaults.
pub const SETUPS: [Setup; 2] = [
    Setup {
        name: "model",
        config: model_config,
    },
    Setup {
        name: "default",
        config: Config::default,
    },
];

/// The starts, by name: every machine, from the arguments that lead it
/// down its distinct paths.
pub fn starts(cfg: &Config) -> Vec<(&'static str, Start)> {
    let own = World::own_lease(cfg);
    let unsettled = Lease {
        unsettled_until_ns: own.expires_at_ns,
        ..own.clone()
    };
    let pack = |n: u128| ("kit-store".to_owned(), Uuid::from_u128(0x0e0e_0000 + n));
    let publish = |lease: &Lease, version: u64, packs: u128| Start::Publish {
        lease: lease.clone(),
        version,
        packs: (0..packs).map(pack).collect(),
        publish_id: PUBLISH,
    };
    let search = |query: SearchQuery| Start::SearchPage {
        query: Box::new(query),
    };
    let query = |size: u64, after: Option<&CaptureDescriptor>| SearchQuery {
        filter: SearchFilter {
            tenant_id: TENANT.to_owned(),
            ..SearchFilter::default()
        },
        cursor: after.map(|d| Cursor::after(0, d)),
        page_size: PageSize::new(size).unwrap_or_default(),
    };
    // Ids 0, 1 and 2 are the catalog's captures; any other is missing.
    let lookup = |ids: &[u128], pinned: u64| Start::GetByIds {
        tenant: TENANT.to_owned(),
        ids: ids.iter().map(|n| capture_id(*n)).collect(),
        pinned,
    };
    let index = |lease: &Lease, packs: &[u128]| Start::IndexPass {
        lease: lease.clone(),
        descriptors: packs
            .iter()
            .enumerate()
            .map(|(i, n)| descriptor(i, pack(*n)))
            .collect(),
        id_seed: SEED,
    };
    vec![
        (
            "acquire-fresh",
            Start::Acquire {
                holder: "kit-own".to_owned(),
                held: None,
                fresh_lease_id: FRESH,
            },
        ),
        (
            "acquire-held",
            Start::Acquire {
                holder: "kit-own".to_owned(),
                held: Some(own.clone()),
                fresh_lease_id: FRESH,
            },
        ),
        ("renew", Start::Renew { lease: own.clone() }),
        ("release", Start::Release { lease: own.clone() }),
        (
            "release-unsettled",
            Start::Release {
                lease: unsettled.clone(),
            },
        ),
        ("allocate", Start::Allocate { claim_id: CLAIM }),
        ("publish-one", publish(&own, 1, 1)),
        ("publish-chunks", publish(&own, 2, 3)),
        ("publish-unsettled", publish(&unsettled, 1, 1)),
        (
            "publish-unsorted",
            // Listed out of order and with a repeat: the machine publishes
            // the set, sorted, and counts each pack once.
            Start::Publish {
                lease: own.clone(),
                version: 1,
                packs: [2, 0, 2, 1].into_iter().map(pack).collect(),
                publish_id: PUBLISH,
            },
        ),
        ("publish-version-zero", publish(&own, 0, 1)),
        ("publish-no-packs", publish(&own, 1, 0)),
        ("index-one", index(&own, &[0])),
        ("index-two-packs", index(&own, &[0, 1, 1])),
        ("index-nothing", index(&own, &[])),
        ("index-unsettled", index(&unsettled, &[0])),
        ("search-first", search(query(2, None))),
        ("search-after", search(query(2, Some(&captures()[0])))),
        (
            "search-inverted-range",
            search(SearchQuery {
                filter: SearchFilter {
                    step: Range {
                        from: Some(5),
                        until: Some(2),
                    },
                    ..query(2, None).filter
                },
                ..query(2, None)
            }),
        ),
        (
            "search-foreign-cursor",
            search(SearchQuery {
                cursor: Some(Cursor::after(
                    0,
                    &CaptureDescriptor {
                        tenant_id: "kit-other".to_owned(),
                        ..captures()[0].clone()
                    },
                )),
                ..query(2, None)
            }),
        ),
        ("search-no-tenant", search(SearchQuery::default())),
        ("get-some", lookup(&[0, 2, 9], 0)),
        ("get-two-chunks", lookup(&(0..1001).collect::<Vec<_>>(), 0)),
        ("get-ahead", lookup(&[1], 5)),
        ("ensure-schema", Start::EnsureSchema),
    ]
}

/// An answer in place of the engine's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Alt {
    /// A server exception; nothing ran.
    ServerError,
    /// A timeout; the statement did not land.
    Timeout,
    /// A timeout after the INSERT landed.
    TimeoutLanded,
    /// A lost connection; the statement did not land.
    Transport,
    /// The adapter could not read the server's answer.
    MalformedAnswer,
    /// One row whose every value is a string.
    BadRow,
    /// One row with no values.
    ShortRow,
    /// The engine's rows and one more: the first row again with every UUID
    /// another publisher's.
    RivalRow,
    /// No rows where the engine returned some.
    NoRows,
    /// A draw where rows were asked for.
    DrawnNotRows,
    /// The server clock jumps a TTL before the statement runs.
    Late,
    /// The top of the jitter window.
    DrawTop,
    /// One past the top of the jitter window.
    DrawOutside,
    /// Rows where a draw was asked for.
    RowsNotDrawn,
    /// The engine's rows with every unsigned integer sent as a
    /// (non-negative) signed one, which a reader of `UInt64` accepts.
    SignedValues,
    /// The engine's rows with every `live` flag 2: a flag is 0 or 1.
    FlagTwo,
    /// The engine's rows and one more whose every value is a string.
    BadExtraRow,
    /// The engine's rows and two more: the first row again under two other
    /// publishers' ids, the larger id first.
    TwoRivals,
    /// The engine's rows under another publisher's ids, every `live` flag
    /// 0: a dead stranger's head.
    DeadRival,
}

impl Alt {
    const ALL: [Alt; 19] = [
        Alt::ServerError,
        Alt::Timeout,
        Alt::TimeoutLanded,
        Alt::Transport,
        Alt::MalformedAnswer,
        Alt::BadRow,
        Alt::ShortRow,
        Alt::RivalRow,
        Alt::NoRows,
        Alt::DrawnNotRows,
        Alt::Late,
        Alt::DrawTop,
        Alt::DrawOutside,
        Alt::RowsNotDrawn,
        Alt::SignedValues,
        Alt::FlagTwo,
        Alt::BadExtraRow,
        Alt::TwoRivals,
        Alt::DeadRival,
    ];

    /// The answers varied at a second step of the same run: those that
    /// keep a machine going (a later step exists to vary) rather than end it.
    const SECOND: [Alt; 5] = [
        Alt::Timeout,
        Alt::TimeoutLanded,
        Alt::RivalRow,
        Alt::Late,
        Alt::DrawTop,
    ];

    /// Its name in case names.
    pub fn name(self) -> &'static str {
        match self {
            Alt::ServerError => "server-error",
            Alt::Timeout => "timeout",
            Alt::TimeoutLanded => "timeout-landed",
            Alt::Transport => "transport",
            Alt::MalformedAnswer => "malformed",
            Alt::BadRow => "bad-row",
            Alt::ShortRow => "short-row",
            Alt::RivalRow => "rival-row",
            Alt::NoRows => "no-rows",
            Alt::DrawnNotRows => "drawn-not-rows",
            Alt::Late => "late",
            Alt::DrawTop => "draw-top",
            Alt::DrawOutside => "draw-outside",
            Alt::RowsNotDrawn => "rows-not-drawn",
            Alt::SignedValues => "signed-values",
            Alt::FlagTwo => "flag-two",
            Alt::BadExtraRow => "bad-extra-row",
            Alt::TwoRivals => "two-rivals",
            Alt::DeadRival => "dead-rival",
        }
    }

    fn from_name(name: &str) -> Option<Alt> {
        Alt::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether this answer has a meaning at a step of `shape`.
    fn fits(self, shape: Shape) -> bool {
        match shape {
            Shape::Draw { below } => match self {
                Alt::DrawTop => below > 1,
                Alt::DrawOutside | Alt::RowsNotDrawn => true,
                _ => false,
            },
            Shape::Insert => matches!(
                self,
                Alt::ServerError
                    | Alt::Timeout
                    | Alt::TimeoutLanded
                    | Alt::Transport
                    | Alt::DrawnNotRows
                    | Alt::Late
            ),
            Shape::Read { rows, flags } => match self {
                Alt::RivalRow
                | Alt::NoRows
                | Alt::SignedValues
                | Alt::BadExtraRow
                | Alt::TwoRivals => rows,
                Alt::FlagTwo | Alt::DeadRival => rows && flags,
                Alt::TimeoutLanded | Alt::DrawTop | Alt::DrawOutside | Alt::RowsNotDrawn => false,
                _ => true,
            },
        }
    }
}

/// What a step of a run looked like, before any answer was varied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A jitter draw.
    Draw {
        /// Its bound.
        below: u64,
    },
    /// An INSERT (no rows expected).
    Insert,
    /// A read; `rows` when the engine returned at least one.
    Read {
        /// Whether the engine's answer had rows.
        rows: bool,
        /// Whether it has `live` flag columns.
        flags: bool,
    },
}

/// One case: a start under a setup against a world, with the answers
/// varied at these steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    setup: usize,
    start: usize,
    world: World,
    varied: Vec<(usize, Alt)>,
}

impl Case {
    /// The case's name: `explore/<setup>/<start>/<world>[/<step>:<answer>]...`.
    pub fn name(&self) -> String {
        let cfg = (SETUPS[self.setup].config)();
        let start = starts(&cfg).get(self.start).map_or("?", |(name, _)| *name);
        let mut name = format!(
            "explore/{}/{start}/{}",
            SETUPS[self.setup].name,
            self.world.name()
        );
        for (step, alt) in &self.varied {
            name.push_str(&format!("/{step}:{}", alt.name()));
        }
        name
    }

    /// The case named `name`, when it is well formed (whether the
    /// exploration enumerates it is another matter: any variation of any
    /// step may be run by name).
    pub fn parse(name: &str) -> Option<Case> {
        let mut parts = name.split('/');
        if parts.next()? != "explore" {
            return None;
        }
        let setup_name = parts.next()?;
        let setup = SETUPS.iter().position(|s| s.name == setup_name)?;
        let start_name = parts.next()?;
        let cfg = (SETUPS[setup].config)();
        let start = starts(&cfg).iter().position(|(n, _)| *n == start_name)?;
        let world = World::from_name(parts.next()?)?;
        let mut varied = Vec::new();
        for part in parts {
            let (step, alt) = part.split_once(':')?;
            varied.push((step.parse().ok()?, Alt::from_name(alt)?));
        }
        Some(Case {
            setup,
            start,
            world,
            varied,
        })
    }

    /// The machine this case starts.
    pub fn machine(&self) -> &'static str {
        let cfg = (SETUPS[self.setup].config)();
        starts(&cfg)
            .get(self.start)
            .map_or("?", |(_, start)| start.machine())
    }

    /// Runs the case on `side`; returns the shape of every step and the
    /// kind of the outcome ([`outcome_kind`]).
    pub fn run(&self, side: &mut Side<'_>) -> Result<(Vec<Shape>, String), Failed> {
        let cfg = (SETUPS[self.setup].config)();
        let tables = Tables::new(PREFIX).map_err(|e| {
            Failed::Driver(crate::ConformError::BadMessage {
                what: e.to_string(),
            })
        })?;
        let start = starts(&cfg)
            .into_iter()
            .nth(self.start)
            .map(|(_, s)| s)
            .ok_or_else(|| {
                Failed::Driver(crate::ConformError::UnknownCase { name: self.name() })
            })?;
        let mut catalog = self.world.catalog(&cfg, &tables);
        catalog.captures = captures();
        let ttl_ticks = u8::try_from(cfg.lease_ttl_ns() / TICK_NS).unwrap_or(u8::MAX);
        let start_machine = start.machine();
        let mut open = side.open(Started {
            session: 0,
            tables: tables.clone(),
            config: cfg,
            start,
        })?;
        let mut shapes = Vec::new();
        for step in 0..MAX_STEPS {
            let alt = self
                .varied
                .iter()
                .find(|(at, _)| *at == step)
                .map(|(_, alt)| *alt);
            let (shape, input) = match &open.current {
                Step::Done(done) => return Ok((shapes, outcome_kind(start_machine, done))),
                Step::Draw { below } => (Shape::Draw { below: *below }, draw_answer(*below, alt)),
                Step::Execute(stmt) => {
                    let stmt = stmt.clone();
                    answer(&mut catalog, &tables, &stmt, alt, ttl_ticks)
                }
            };
            shapes.push(shape);
            side.feed(&mut open, input)?;
        }
        Ok((shapes, format!("{start_machine}: did not end")))
    }
}

/// Another publisher's id that sorts after [`FOREIGN`] (in byte order, as
/// the outcomes list ids, and in ClickHouse's order).
const FOREIGN_HIGH: Uuid = Uuid::from_u128(0xf0f0_0000_0000_4000_8000_0000_0000_0f02);

/// `row` with every UUID replaced by `id`.
fn with_ids(row: &[Value], id: Uuid) -> Vec<Value> {
    row.iter()
        .map(|v| match v {
            Value::Uuid(_) => Value::Uuid(id),
            other => other.clone(),
        })
        .collect()
}

/// The positions of a read's `live` flags (`live`, `term_live`).
fn flag_columns(stmt: &Statement) -> Vec<usize> {
    match &stmt.expect {
        Expect::Rows(columns) => columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.name.ends_with("live"))
            .map(|(i, _)| i)
            .collect(),
        Expect::Nothing => Vec::new(),
    }
}

fn draw_answer(below: u64, alt: Option<Alt>) -> Input {
    match alt {
        Some(Alt::DrawTop) => Input::Drawn(below - 1),
        Some(Alt::DrawOutside) => Input::Drawn(below),
        Some(Alt::RowsNotDrawn) => Input::Rows(Rows::empty()),
        _ => Input::Drawn(0),
    }
}

/// The engine's answer to `stmt`, or the varied one, and the step's shape.
fn answer(
    catalog: &mut Catalog,
    tables: &Tables,
    stmt: &Statement,
    alt: Option<Alt>,
    ttl_ticks: u8,
) -> (Shape, Input) {
    let insert = stmt.expect == Expect::Nothing;
    if alt == Some(Alt::Late) {
        catalog.advance(ttl_ticks);
    }
    // The engine runs the statement unless the varied answer says it never
    // ran (a server error, a timeout or a lost connection before it landed).
    let runs = !matches!(alt, Some(Alt::ServerError | Alt::Timeout | Alt::Transport));
    let engine = if runs || !insert {
        catalog.answer(tables, stmt)
    } else {
        Input::Rows(Rows::empty())
    };
    let rows = match &engine {
        Input::Rows(rows) => rows.clone(),
        _ => Rows::empty(),
    };
    let shape = if insert {
        Shape::Insert
    } else {
        Shape::Read {
            rows: !rows.0.is_empty(),
            flags: !flag_columns(stmt).is_empty(),
        }
    };
    let input = match alt {
        None | Some(Alt::Late) => engine,
        Some(Alt::ServerError) => Input::Failed(Failure::Server {
            code: 241,
            message: "Memory limit (total) exceeded (the kit's answer)".to_owned(),
        }),
        Some(Alt::Timeout | Alt::TimeoutLanded) => Input::Failed(Failure::Timeout),
        Some(Alt::Transport) => Input::Failed(Failure::Transport {
            message: "connection reset by peer (the kit's answer)".to_owned(),
        }),
        Some(Alt::MalformedAnswer) => Input::Failed(Failure::Malformed {
            message: "expected 2 columns, got 1 (the kit's answer)".to_owned(),
        }),
        Some(Alt::BadRow) => Input::Rows(Rows(vec![vec![Value::String("kit".to_owned())]])),
        Some(Alt::ShortRow) => Input::Rows(Rows(vec![Vec::new()])),
        Some(Alt::RivalRow) => {
            let mut rows = rows;
            if let Some(first) = rows.0.first() {
                let rival = first
                    .iter()
                    .map(|v| match v {
                        Value::Uuid(id) if *id != FOREIGN => Value::Uuid(FOREIGN),
                        Value::Uuid(_) => Value::Uuid(OWN),
                        other => other.clone(),
                    })
                    .collect();
                rows.0.push(rival);
            }
            Input::Rows(rows)
        }
        Some(Alt::NoRows) => Input::Rows(Rows::empty()),
        Some(Alt::SignedValues) => Input::Rows(Rows(
            rows.0
                .into_iter()
                .map(|row| {
                    row.into_iter()
                        .map(|v| match v {
                            Value::UInt64(n) => {
                                i64::try_from(n).map_or(Value::UInt64(n), Value::Int64)
                            }
                            other => other,
                        })
                        .collect()
                })
                .collect(),
        )),
        Some(Alt::FlagTwo) => {
            let flags = flag_columns(stmt);
            Input::Rows(Rows(
                rows.0
                    .into_iter()
                    .map(|mut row| {
                        for i in &flags {
                            if let Some(v) = row.get_mut(*i) {
                                *v = Value::UInt64(2);
                            }
                        }
                        row
                    })
                    .collect(),
            ))
        }
        Some(Alt::BadExtraRow) => {
            let mut rows = rows;
            let width = rows.0.first().map_or(1, Vec::len);
            rows.0.push(vec![Value::String("kit".to_owned()); width]);
            Input::Rows(rows)
        }
        Some(Alt::TwoRivals) => {
            let mut rows = rows;
            if let Some(first) = rows.0.first().cloned() {
                for id in [FOREIGN_HIGH, FOREIGN] {
                    rows.0.push(with_ids(&first, id));
                }
            }
            Input::Rows(rows)
        }
        Some(Alt::DeadRival) => {
            let flags = flag_columns(stmt);
            Input::Rows(Rows(
                rows.0
                    .iter()
                    .map(|row| {
                        let mut row = with_ids(row, FOREIGN);
                        for i in &flags {
                            if let Some(v) = row.get_mut(*i) {
                                *v = Value::UInt64(0);
                            }
                        }
                        row
                    })
                    .collect(),
            ))
        }
        Some(Alt::DrawnNotRows) => Input::Drawn(0),
        Some(Alt::DrawTop | Alt::DrawOutside | Alt::RowsNotDrawn) => engine,
    };
    (shape, input)
}

/// Every case of the exploration, in the order the kit runs them. Learned
/// by running capcat-proto alone: a case's steps are known only once the
/// answers before them are.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (setup, config) in SETUPS.iter().enumerate() {
        let cfg = (config.config)();
        for (start, (_, machine)) in starts(&cfg).iter().enumerate() {
            // The schema machine reads the server's own tables, and the
            // others the protocol's: each runs against its own catalogs.
            let worlds: Vec<World> = match machine {
                Start::EnsureSchema => World::schema_worlds().collect(),
                _ => World::ALL.to_vec(),
            };
            for world in worlds {
                let base = Case {
                    setup,
                    start,
                    world,
                    varied: Vec::new(),
                };
                let shapes = solo_shapes(&base);
                out.push(base.clone());
                for (i, shape) in shapes.iter().enumerate() {
                    for alt in Alt::ALL.into_iter().filter(|a| a.fits(*shape)) {
                        let once = Case {
                            varied: vec![(i, alt)],
                            ..base.clone()
                        };
                        out.push(once.clone());
                        if !Alt::SECOND.contains(&alt) {
                            continue;
                        }
                        for (j, later) in solo_shapes(&once).iter().enumerate().skip(i + 1) {
                            for alt2 in Alt::SECOND.into_iter().filter(|a| a.fits(*later)) {
                                out.push(Case {
                                    varied: vec![(i, alt), (j, alt2)],
                                    ..base.clone()
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

fn solo_shapes(case: &Case) -> Vec<Shape> {
    // capcat-proto alone never fails to run a case: only a driver can.
    case.run(&mut Side::Solo)
        .map(|(shapes, _)| shapes)
        .unwrap_or_default()
}

/// What kind of outcome a done object holds, with the machine's name:
/// `publish ok won`, `acquire err held`; what the coverage tests count.
pub fn outcome_kind(machine: &str, done: &serde_json::Value) -> String {
    let outcome = &done["outcome"];
    if let Some(err) = outcome.get("err") {
        let kind = err["kind"].as_str().unwrap_or("?");
        // What an error wraps (a renewal's error, a refusal's diagnosis)
        // is part of its kind: each is a different path through a machine.
        let inner = err
            .get("source")
            .and_then(|s| s["kind"].as_str())
            .or_else(|| err["diagnosis"].as_str());
        return match inner {
            Some(inner) => format!("{machine} err {kind} {inner}"),
            None => format!("{machine} err {kind}"),
        };
    }
    // A publish's `ok` is an object of one key, its kind; a lease is an
    // object of several fields, and the other machines' `ok` is a number or
    // null.
    match outcome.get("ok") {
        Some(serde_json::Value::Object(ok)) if ok.len() == 1 => format!(
            "{machine} ok {}",
            ok.keys().next().map_or("?", String::as_str)
        ),
        Some(serde_json::Value::String(ok)) => format!("{machine} ok {ok}"),
        _ => format!("{machine} ok"),
    }
}
