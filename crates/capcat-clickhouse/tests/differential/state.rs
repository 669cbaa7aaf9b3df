//! Table states: the rows of the five tables the guards read, drawn from
//! small pools chosen to reach every boundary a guard has, and the SQL that
//! loads them into a catalog.
//!
//! - Lease ids whose ClickHouse order (low 64 bits first) is the REVERSE of
//!   their byte order, and one that ties another on the low half, so a head
//!   picked in the wrong order disagrees at every tie.
//! - Expiries at a tombstone (0), well past, one nanosecond either side of
//!   now, and one nanosecond either side of now plus each margin.
//! - Publish ids and packs shared across versions and stores, so that
//!   foreign publish ids, manifest rows without their commit row, duplicate
//!   manifest rows and mirrored pack ids all occur.

use std::collections::BTreeSet;

use capcat_proto::fragments::meaning::{self, HeldRow, LeaseRow, Reach};
use capcat_proto::{Lease, PackRef, Tables};
use proptest::prelude::*;
use uuid::Uuid;

/// The server time every state is judged at (2027): any fixed value works,
/// the clock is a bound parameter.
pub const NOW_NS: u64 = 1_800_000_000_000_000_000;

/// The margins every fence is evaluated with: none, one nanosecond, and the
/// default configuration's (publish timeout 1 s plus 250 ms slack).
pub const MARGINS: [u64; 3] = [0, 1, 1_250_000_000];

/// The lease ids. ClickHouse orders ids 0..4 as 3 < 2 < 1 < 0 < 4; their
/// byte order is 0 < 1 < 2 < 3 < 4.
pub fn lease_ids() -> [Uuid; 5] {
    [
        Uuid::from_u128((1 << 64) | 4),
        Uuid::from_u128((2 << 64) | 3),
        Uuid::from_u128((3 << 64) | 2),
        Uuid::from_u128((4 << 64) | 1),
        Uuid::from_u128((5 << 64) | 4),
    ]
}

/// The holder of each lease id: one lease id always carries one holder.
pub fn holder_of(lease: Uuid) -> String {
    let ids = lease_ids();
    let i = ids.iter().position(|l| *l == lease).unwrap_or(ids.len());
    format!("holder-{i}")
}

/// Publish ids (also the claim ids of the allocator's table).
pub fn publish_ids() -> [Uuid; 3] {
    [
        Uuid::from_u128((7 << 64) | 9),
        Uuid::from_u128((8 << 64) | 8),
        Uuid::from_u128((9 << 64) | 7),
    ]
}

/// Packs: two pack ids, each in two stores (a mirror is a different pack).
pub fn packs() -> [PackRef; 4] {
    let p = [Uuid::from_u128(0xAA), Uuid::from_u128(0xBB)];
    [
        ("s0".to_owned(), p[0]),
        ("s0".to_owned(), p[1]),
        ("s1".to_owned(), p[0]),
        ("s1".to_owned(), p[1]),
    ]
}

/// Expiries relative to [`NOW_NS`], and the tombstone's 0.
pub fn expiries() -> Vec<u64> {
    let mut out = vec![0, NOW_NS - 1_000_000_000, NOW_NS - 1, NOW_NS, NOW_NS + 1];
    for m in MARGINS {
        out.extend([NOW_NS + m, NOW_NS + m + 1, NOW_NS + m + 2]);
    }
    out.push(NOW_NS + 3_000_000_000);
    out.sort_unstable();
    out.dedup();
    out
}

/// The highest version (and term) a state uses.
pub const TOP: u64 = 4;

/// The one write a state ends with, run as the protocol's real statement.
#[derive(Clone, Debug)]
pub enum Write {
    /// `lease.release` by this lease with this margin.
    Release { lease: Uuid, margin: u64 },
    /// `lease.insert_claim`.
    Claim { term: u64, lease: Uuid, ttl: u64 },
    /// `publish.insert_manifest`.
    Manifest {
        version: u64,
        publish_id: Uuid,
        lease: Uuid,
        margin: u64,
        packs: Vec<PackRef>,
    },
    /// `publish.insert_commit_row`.
    CommitRow {
        version: u64,
        publish_id: Uuid,
        lease: Uuid,
        margin: u64,
        manifest_packs: u64,
    },
}

/// The parameter sets each fragment is evaluated under.
#[derive(Clone, Debug)]
pub struct Params {
    /// `LEASE_FENCE` and its rejected forms: (lease id, margin).
    pub fences: Vec<(Uuid, u64)>,
    /// `CLAIM_READ_BACK` and the own-term read-back: (term, lease id).
    pub read_backs: Vec<(u64, Uuid)>,
    /// `VERSION_BARRIER`: the version.
    pub versions: Vec<u64>,
    /// `MANIFEST_COMPLETE`: (version, publish id, packs).
    pub completes: Vec<(u64, Uuid, u64)>,
    /// Membership and the published pairs: how far they reach.
    pub reaches: Vec<Reach>,
    /// `pinned_rows`: the pinned version.
    pub pins: Vec<u64>,
    /// Whether the state runs under `aggregate_functions_null_for_empty = 1`,
    /// where `max()` and `count()` over no rows are NULL: a server setting
    /// a user profile may carry, and the reason for every `ifNull` in the
    /// fragments.
    pub null_for_empty: bool,
}

impl Params {
    /// Every parameter set of the pools (the named edge cases use these).
    pub fn every() -> Self {
        let mut out = Self {
            fences: Vec::new(),
            read_backs: Vec::new(),
            versions: (0..=TOP + 1).collect(),
            completes: Vec::new(),
            reaches: vec![Reach::Published],
            pins: (0..=TOP + 1).collect(),
            null_for_empty: false,
        };
        for lease in lease_ids() {
            out.fences.extend(MARGINS.map(|m| (lease, m)));
            out.read_backs.extend((0..=TOP + 1).map(|t| (t, lease)));
        }
        for version in 1..=TOP {
            for id in publish_ids() {
                out.completes.extend((0..=3).map(|n| (version, id, n)));
            }
        }
        out.reaches.extend((0..=TOP + 1).map(Reach::AtOrBelow));
        out
    }
}

fn params() -> impl Strategy<Value = Params> {
    let reach = prop_oneof![
        Just(Reach::Published),
        (0..=TOP + 1).prop_map(Reach::AtOrBelow)
    ];
    (
        prop::collection::vec((lease_id(), margin()), 2),
        prop::collection::vec((0..=TOP + 1, lease_id()), 2),
        prop::collection::vec(0..=TOP + 1, 1),
        prop::collection::vec((1..=TOP, publish_id(), 0..=3_u64), 2),
        prop::collection::vec(reach, 1),
        prop::collection::vec(0..=TOP + 1, 1),
        any::<bool>(),
    )
        .prop_map(
            |(fences, read_backs, versions, completes, reaches, pins, null_for_empty)| Params {
                fences,
                read_backs,
                versions,
                completes,
                reaches,
                pins,
                null_for_empty,
            },
        )
}

impl State {
    /// The rows a fence naming `lease` is evaluated with: the row of
    /// `lease` highest in the lease order (the head when `lease` heads the
    /// log), the same row one term below and one term above (every key but
    /// the term matches: an edit of the fence's `term =` shows there), and
    /// its lowest row when that is another row (same lease id, not the
    /// head: what the exact-row fence refuses and a fence on the lease id
    /// alone admits). A lease with no row gets a row the state does not
    /// hold. At most four, to keep the probe's cost near one instance per
    /// lease.
    pub fn held_rows(&self, lease: Uuid) -> Vec<HeldRow> {
        let held = |r: &LeaseRow| HeldRow {
            term: r.term,
            lease_id: r.lease_id,
            expires_at_ns: r.expires_at_ns,
        };
        let ordered = meaning::lease_ordered(self.lease.iter().filter(|r| r.lease_id == lease));
        let mut rows: Vec<HeldRow> = ordered
            .first()
            .into_iter()
            .chain(ordered.last())
            .map(|r| held(r))
            .collect();
        rows.dedup();
        if let Some(top) = rows.first().copied() {
            rows.extend(
                [top.term.checked_sub(1), Some(top.term + 1)]
                    .into_iter()
                    .flatten()
                    .map(|term| HeldRow { term, ..top }),
            );
        }
        if rows.is_empty() {
            rows.push(HeldRow {
                term: TOP + 1,
                lease_id: lease,
                expires_at_ns: NOW_NS + 3_000_000_000,
            });
        }
        rows
    }

    /// The lease a write under `lease` is sent with: the row of `lease`
    /// highest in the lease order (the head when `lease` heads the log),
    /// or a row the state does not hold.
    pub fn held_lease(&self, lease: Uuid) -> Lease {
        let own: Vec<&LeaseRow> = self.lease.iter().filter(|r| r.lease_id == lease).collect();
        let row = meaning::lease_head(own).map_or(
            HeldRow {
                term: TOP + 1,
                lease_id: lease,
                expires_at_ns: NOW_NS + 3_000_000_000,
            },
            |r| HeldRow {
                term: r.term,
                lease_id: r.lease_id,
                expires_at_ns: r.expires_at_ns,
            },
        );
        Lease {
            lease_id: lease,
            holder: holder_of(lease),
            term: row.term,
            expires_at_ns: row.expires_at_ns,
            unsettled_until_ns: 0,
        }
    }
}

/// One table state, the reads' arguments and the final write.
#[derive(Clone, Debug)]
pub struct State {
    /// `{p}_publisher_lease`.
    pub lease: Vec<LeaseRow>,
    /// `{p}_version_claims`: (index_version, claim_id).
    pub claims: Vec<(u64, Uuid)>,
    /// `{p}_index_watermark`: (index_version, publish_id).
    pub watermark: Vec<(u64, Uuid)>,
    /// `{p}_snapshot_manifest`: (index_version, publish_id, pack).
    pub manifest: Vec<(u64, Uuid, PackRef)>,
    /// `{p}_pack_inventory_raw`: (pack, index_version, publish_id).
    pub inventory: Vec<(PackRef, u64, Uuid)>,
    /// The packs `index.read_committed` asks about.
    pub asked: BTreeSet<PackRef>,
    /// The version the per-version reads ask about.
    pub read_version: u64,
    /// The final write.
    pub write: Write,
    /// The fragments' parameter sets.
    pub params: Params,
}

fn lease_row() -> impl Strategy<Value = LeaseRow> {
    (
        0..=TOP,
        prop::sample::select(lease_ids().to_vec()),
        prop::sample::select(expiries()),
    )
        .prop_map(|(term, lease_id, expires_at_ns)| LeaseRow {
            term,
            lease_id,
            expires_at_ns,
            holder: holder_of(lease_id),
        })
}

fn pack() -> impl Strategy<Value = PackRef> {
    prop::sample::select(packs().to_vec())
}

fn publish_id() -> impl Strategy<Value = Uuid> {
    prop::sample::select(publish_ids().to_vec())
}

fn lease_id() -> impl Strategy<Value = Uuid> {
    prop::sample::select(lease_ids().to_vec())
}

fn margin() -> impl Strategy<Value = u64> {
    prop::sample::select(MARGINS.to_vec())
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        (lease_id(), margin()).prop_map(|(lease, margin)| Write::Release { lease, margin }),
        (
            0..=TOP + 1,
            lease_id(),
            prop::sample::select(vec![1, 1_000_000_000, 2_000_000_000])
        )
            .prop_map(|(term, lease, ttl)| Write::Claim { term, lease, ttl }),
        (
            0..=TOP + 1,
            publish_id(),
            lease_id(),
            margin(),
            prop::sample::subsequence(packs().to_vec(), 0..=4)
        )
            .prop_map(
                |(version, publish_id, lease, margin, packs)| Write::Manifest {
                    version,
                    publish_id,
                    lease,
                    margin,
                    packs,
                }
            ),
        (0..=TOP + 1, publish_id(), lease_id(), margin(), 0..=4_u64).prop_map(
            |(version, publish_id, lease, margin, manifest_packs)| Write::CommitRow {
                version,
                publish_id,
                lease,
                margin,
                manifest_packs,
            }
        ),
    ]
}

/// Generated table states. Lease logs are biased towards ties at the top
/// term (every row's term is drawn from five), and manifests towards the
/// commit rows' own publishes (both draw from three publish ids).
pub fn state() -> impl Strategy<Value = State> {
    (
        prop::collection::vec(lease_row(), 0..=6),
        prop::collection::vec((1..=TOP, publish_id()), 0..=3),
        prop::collection::vec((1..=TOP, publish_id()), 0..=4),
        prop::collection::vec((1..=TOP, publish_id(), pack()), 0..=6),
        prop::collection::vec((pack(), 1..=TOP, publish_id()), 0..=3),
        prop::collection::btree_set(pack(), 0..=4),
        0..=TOP + 1,
        write(),
        params(),
    )
        .prop_map(
            |(
                lease,
                claims,
                watermark,
                manifest,
                inventory,
                asked,
                read_version,
                write,
                params,
            )| {
                State {
                    lease,
                    claims,
                    watermark,
                    manifest,
                    inventory,
                    asked,
                    read_version,
                    write,
                    params,
                }
            },
        )
}

fn uuid(u: Uuid) -> String {
    format!("toUUID('{u}')")
}

fn text(s: &str) -> String {
    // The pools hold only letters, digits and dashes.
    assert!(
        s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
        "{s}"
    );
    format!("'{s}'")
}

/// The test's own statements that load `state` into empty tables: one
/// INSERT per non-empty table. Every lease row's `acquired_at_ns` is its
/// index, which no guard reads, so a read-back can name the rows it returns.
pub fn load(tables: &Tables, state: &State) -> Vec<String> {
    let mut out = Vec::new();
    let mut insert = |table: String, columns: &str, rows: Vec<String>| {
        if !rows.is_empty() {
            out.push(format!(
                "INSERT INTO {table} ({columns}) VALUES {}",
                rows.join(", ")
            ));
        }
    };
    insert(
        tables.publisher_lease(),
        "term, lease_id, holder, acquired_at_ns, expires_at_ns",
        state
            .lease
            .iter()
            .enumerate()
            .map(|(i, r)| {
                format!(
                    "({}, {}, {}, {i}, {})",
                    r.term,
                    uuid(r.lease_id),
                    text(&r.holder),
                    r.expires_at_ns
                )
            })
            .collect(),
    );
    insert(
        tables.version_claims(),
        "index_version, claim_id, claimed_at_ns",
        state
            .claims
            .iter()
            .map(|(v, id)| format!("({v}, {}, 1)", uuid(*id)))
            .collect(),
    );
    insert(
        tables.index_watermark(),
        "index_version, publish_id, published_at_ns",
        state
            .watermark
            .iter()
            .map(|(v, id)| format!("({v}, {}, 1)", uuid(*id)))
            .collect(),
    );
    insert(
        tables.snapshot_manifest(),
        "index_version, publish_id, store_id, pack_id",
        state
            .manifest
            .iter()
            .map(|(v, id, (s, p))| format!("({v}, {}, {}, {})", uuid(*id), text(s), uuid(*p)))
            .collect(),
    );
    insert(
        tables.pack_inventory_raw(),
        "store_id, pack_id, index_version, publish_id, committed_at_ns",
        state
            .inventory
            .iter()
            .map(|((s, p), v, id)| format!("({}, {}, {v}, {}, 1)", text(s), uuid(*p), uuid(*id)))
            .collect(),
    );
    out
}

/// `sql` run under the state's server settings.
pub fn under_settings(sql: &str, state: &State) -> String {
    if state.params.null_for_empty {
        format!("{sql} SETTINGS aggregate_functions_null_for_empty = 1")
    } else {
        sql.to_owned()
    }
}

/// The tables a state writes, to empty before the next one.
pub fn tables_of(tables: &Tables) -> [String; 5] {
    [
        tables.publisher_lease(),
        tables.version_claims(),
        tables.index_watermark(),
        tables.snapshot_manifest(),
        tables.pack_inventory_raw(),
    ]
}
