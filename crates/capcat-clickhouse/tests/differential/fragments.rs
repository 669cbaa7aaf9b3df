//! The fragment instances of one state: every guard fragment under every
//! parameter set of the pools, each paired with what its meaning predicts.
//!
//! Set-valued fragments (the claim read-back, membership, the pinned row
//! bound, the published pairs) are evaluated over numbered candidates and
//! reported as a bitmask of the candidates they admit, so one UInt64 column
//! carries a whole set.

use std::collections::BTreeSet;

use capcat_proto::designs::meaning as rejected;
use capcat_proto::designs::{
    lease_id_fence_text, marginless_fence_text, own_term_read_back_text, rows_at_or_below_text,
    version_only_membership_predicate,
};
use capcat_proto::fragments::meaning::{self, Reach};
use capcat_proto::fragments::{
    self, FENCE_MARGIN_PARAM, INDEX_VERSION_PARAM, LEASE_EXPIRES_PARAM, LEASE_ID_PARAM,
    LEASE_TERM_PARAM, MANIFEST_PACKS_PARAM, MembershipBound, PINNED_VERSION_PARAM, TERM_PARAM,
};
use capcat_proto::{PackRef, Param, Tables};
use uuid::Uuid;

use super::probe::{CLOCK_PARAM, Probe, bind_clock};
use super::state::{NOW_NS, State, TOP, packs, publish_ids};

fn clock() -> (&'static str, Param) {
    (
        CLOCK_PARAM,
        Param::Int64(i64::try_from(NOW_NS).expect("2027 fits an Int64")),
    )
}

fn mask(bits: impl IntoIterator<Item = usize>) -> u64 {
    bits.into_iter().fold(0, |m, i| m | (1 << i))
}

/// Numbered candidates a set-valued fragment is evaluated over: the values
/// and the subquery `(SELECT i, <columns> FROM values(...))` that lists them.
struct Candidates<T> {
    items: Vec<T>,
    sql: String,
}

impl<T: Ord> Candidates<T> {
    /// `schema` names and types the columns after `i` (as `values()` takes
    /// them); `render` writes one item's column values.
    fn new(columns: &str, schema: &str, items: Vec<T>, render: impl Fn(&T) -> String) -> Self {
        let rows: Vec<String> = items
            .iter()
            .enumerate()
            .map(|(i, item)| format!("({i}, {})", render(item)))
            .collect();
        let sql = format!(
            "(SELECT i, {columns} FROM values('i UInt64, {schema}', {}))",
            rows.join(", ")
        );
        Self { items, sql }
    }

    /// The bitmask the engine reports for `predicate` over these candidates.
    fn admitted_by(&self, predicate: &str) -> String {
        admitted_by(predicate, &self.sql)
    }

    /// The bitmask of the candidates in `admitted`, as the meaning predicts.
    fn mask(&self, admitted: &BTreeSet<T>) -> u64 {
        mask(
            self.items
                .iter()
                .enumerate()
                .filter(|(_, item)| admitted.contains(*item))
                .map(|(i, _)| i),
        )
    }
}

/// Every pack of the pool and one no table holds.
fn pack_candidates() -> Candidates<PackRef> {
    let mut all = packs().to_vec();
    all.push(("s9".to_owned(), Uuid::from_u128(0xCC)));
    Candidates::new(
        "store_id, pack_id",
        "store_id String, pack_id UUID",
        all,
        |(s, p)| format!("'{s}', '{p}'"),
    )
}

/// Every (index_version, publish_id) of the pools.
fn pair_candidates() -> Candidates<(u64, Uuid)> {
    let mut all = Vec::new();
    for v in 0..=TOP + 1 {
        for id in publish_ids() {
            all.push((v, id));
        }
    }
    Candidates::new(
        "index_version, publish_id",
        "index_version UInt64, publish_id UUID",
        all,
        |(v, id)| format!("{v}, '{id}'"),
    )
}

fn admitted_by(predicate: &str, candidates: &str) -> String {
    format!("(SELECT groupBitOr(bitShiftLeft(toUInt64(1), i)) FROM {candidates} WHERE {predicate})")
}

/// Adds every lease fragment's instances.
fn lease_fragments(probe: &mut Probe, tables: &Tables, state: &State) {
    let fence = bind_clock(&fragments::lease_fence(tables), true);
    let lease_id_fence = bind_clock(&lease_id_fence_text(tables), true);
    let marginless = bind_clock(&marginless_fence_text(tables), true);
    let two_reads = bind_clock(
        &capcat_proto::designs::two_subquery_fence_text(tables),
        true,
    );
    for &(lease, margin) in &state.params.fences {
        let params = [
            clock(),
            (LEASE_ID_PARAM, Param::Uuid(lease)),
            (FENCE_MARGIN_PARAM, Param::UInt64(margin)),
        ];
        for held in state.held_rows(lease) {
            probe.add(
                format!("LEASE_FENCE(row {held:?}, margin {margin})"),
                &fence,
                &[
                    clock(),
                    (LEASE_ID_PARAM, Param::Uuid(lease)),
                    (LEASE_TERM_PARAM, Param::UInt64(held.term)),
                    (LEASE_EXPIRES_PARAM, Param::UInt64(held.expires_at_ns)),
                    (FENCE_MARGIN_PARAM, Param::UInt64(margin)),
                ],
                u64::from(meaning::lease_fence(&state.lease, held, NOW_NS, margin)),
            );
        }
        probe.add(
            format!("lease-id fence(lease {lease}, margin {margin})"),
            &lease_id_fence,
            &params,
            u64::from(rejected::lease_id_fence(
                &state.lease,
                lease,
                NOW_NS,
                margin,
            )),
        );
        // Evaluated in ONE statement, the two reads see one snapshot;
        // the model splits them into two steps to show why that is not
        // something to rely on.
        probe.add(
            format!("two-subquery fence(lease {lease}, margin {margin})"),
            &two_reads,
            &params,
            u64::from(
                rejected::head_id_is(&state.lease, lease)
                    && rejected::head_outlives(&state.lease, NOW_NS, margin),
            ),
        );
        probe.add(
            format!("marginless fence(lease {lease})"),
            &marginless,
            &[clock(), (LEASE_ID_PARAM, Param::Uuid(lease))],
            u64::from(rejected::marginless_fence(&state.lease, lease, NOW_NS)),
        );
    }

    // The read-back returns rows: candidates are the lease rows themselves,
    // numbered by `acquired_at_ns` (see `state::load`).
    let read_back = bind_clock(&fragments::claim_read_back(tables), true);
    let own_term = own_term_read_back_text();
    let index_of = |r: &meaning::LeaseRow| {
        // Rows are numbered by position; equal rows are told apart by it too.
        state
            .lease
            .iter()
            .position(|x| std::ptr::eq(x, r))
            .expect("a row of the state")
    };
    let over_lease = |predicate: &str| {
        format!(
            "(SELECT groupBitOr(bitShiftLeft(toUInt64(1), acquired_at_ns)) FROM {} WHERE {predicate})",
            tables.publisher_lease()
        )
    };
    for &(term, lease) in &state.params.read_backs {
        let expected = mask(
            meaning::claim_read_back(&state.lease, term, lease, NOW_NS)
                .into_iter()
                .map(index_of),
        );
        probe.add(
            format!("CLAIM_READ_BACK(term {term}, lease {lease})"),
            &over_lease(&read_back),
            &[
                clock(),
                (TERM_PARAM, Param::UInt64(term)),
                (LEASE_ID_PARAM, Param::Uuid(lease)),
            ],
            expected,
        );
        probe.add(
            format!("own-term read-back(term {term})"),
            &over_lease(&own_term),
            &[(TERM_PARAM, Param::UInt64(term))],
            mask(
                rejected::own_term_read_back(&state.lease, term)
                    .into_iter()
                    .map(index_of),
            ),
        );
    }
}

/// Adds the publication fragments' instances.
fn publication_fragments(probe: &mut Probe, tables: &Tables, state: &State) {
    let barrier = bind_clock(&fragments::version_barrier(tables), false);
    for &version in &state.params.versions {
        probe.add(
            format!("VERSION_BARRIER(version {version})"),
            &barrier,
            &[(INDEX_VERSION_PARAM, Param::UInt64(version))],
            u64::from(meaning::version_barrier(&state.watermark, version)),
        );
    }

    let complete = bind_clock(&fragments::manifest_complete(tables), false);
    for &(version, publish_id, packs) in &state.params.completes {
        probe.add(
            format!("MANIFEST_COMPLETE(version {version}, publish {publish_id}, packs {packs})"),
            &complete,
            &[
                (INDEX_VERSION_PARAM, Param::UInt64(version)),
                ("publish_id", Param::Uuid(publish_id)),
                (MANIFEST_PACKS_PARAM, Param::UInt64(packs)),
            ],
            u64::from(meaning::manifest_complete(
                &state.manifest,
                version,
                publish_id,
                packs,
            )),
        );
    }

    let packs = pack_candidates();
    let pairs = pair_candidates();
    for &reach in &state.params.reaches {
        let (bound, w) = match reach {
            Reach::Published => (MembershipBound::Published, None),
            Reach::AtOrBelow(w) => (MembershipBound::Pinned, Some(w)),
        };
        let params: Vec<(&str, Param)> = w
            .map(|w| (PINNED_VERSION_PARAM, Param::UInt64(w)))
            .into_iter()
            .collect();
        probe.add(
            format!("membership({reach:?})"),
            &packs.admitted_by(&fragments::membership_predicate(tables, bound)),
            &params,
            packs.mask(&meaning::members(&state.manifest, &state.watermark, reach)),
        );
        probe.add(
            format!("version-only membership({reach:?})"),
            &packs.admitted_by(&version_only_membership_predicate(tables, bound)),
            &params,
            packs.mask(&rejected::version_only_members(
                &state.manifest,
                &state.watermark,
                reach,
            )),
        );
        probe.add(
            format!("published pairs({reach:?})"),
            &pairs.admitted_by(&fragments::published_pairs(tables, bound)),
            &params,
            pairs.mask(&meaning::published_pairs(&state.watermark, reach)),
        );
    }
    for &w in &state.params.pins {
        probe.add(
            format!("pinned rows(W {w})"),
            &admitted_by(
                &fragments::pinned_rows(tables),
                "(SELECT number AS i, number AS index_version FROM numbers(6))",
            ),
            &[(PINNED_VERSION_PARAM, Param::UInt64(w))],
            mask(
                (0..6)
                    .filter(|v| meaning::pinned_row(&state.watermark, *v, w))
                    .map(|v| v as usize),
            ),
        );
        probe.add(
            format!("rows at or below (W {w})"),
            &admitted_by(
                &rows_at_or_below_text(),
                "(SELECT number AS i, number AS index_version FROM numbers(6))",
            ),
            &[(PINNED_VERSION_PARAM, Param::UInt64(w))],
            mask(
                (0..6)
                    .filter(|v| rejected::rows_at_or_below(*v, w))
                    .map(|v| v as usize),
            ),
        );
    }
}

/// Every fragment instance of `state`.
pub fn probe(tables: &Tables, state: &State) -> Probe {
    let mut probe = Probe::default();
    lease_fragments(&mut probe, tables, state);
    publication_fragments(&mut probe, tables, state);
    probe
}
