//! The exploration's starts: every machine from the arguments that lead it
//! down its distinct paths, under the two configurations, and the captures
//! the catalog's reads are answered with.

use capcat_model_check::publication::config::TICK_NS;
use capcat_proto::reader::{Cursor, PageSize, Range, SearchFilter, SearchQuery};
use capcat_proto::{CaptureDescriptor, Config, Lease, PackRef};
use uuid::Uuid;

use crate::start::Start;
use crate::world::World;

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
pub(super) fn captures() -> Vec<CaptureDescriptor> {
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
