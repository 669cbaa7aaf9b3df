//! [`Checker`]: the model's safety properties, asserted on the real tables
//! and on what the actors recorded.
//!
//! What it can and cannot observe (see docs/model-checking.md):
//! - `PinnedSnapshotNeverGrows`: exact. Readers re-read the members of
//!   every version they pinned; any change is a violation.
//! - `FencedOutWritesNothing`: a lower bound. The engine does not say when
//!   it evaluated a WHERE clause, so the checker only judges a guarded
//!   INSERT it can PROVE was fenced out: every lease row of its lease had
//!   landed before the INSERT was sent, and the highest lease row known to
//!   have landed by then is another lease's, or its own but expired. Rows
//!   whose landing time is unknown (a crashed or failed claim) are left out,
//!   which can only make the verdict "undetermined", never a false alarm.
//! - `ReportedMeansVisible`: exact for every reported `Won` and for every
//!   lost attempt of a pass whose statements all completed.
//! - `InventoryOnlyAfterPublish`: exact on the tables (every inventory row
//!   pairs with a commit row and a manifest row) and on the records
//!   (every inventory INSERT was sent after its publish's commit-row INSERT
//!   came back).
//! - `VersionsUnique`: one publish per version in the watermark table, and one
//!   attempt per version among the guarded INSERTs sent.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use capcat_clickhouse::Transport;
use capcat_proto::reader::Lookup;
use capcat_proto::{Failure, PackRef, Tables};
use uuid::Uuid;

use crate::ledger::{Ledger, PassOutcome, Record};
use crate::observed::{LeaseRow, Observed, members_at, observe};
use crate::properties as names;
use crate::rng::Rng;
use capcat_proto::fragments::meaning;

/// Slack (ns) between the engine's clock read and ours: an expiry counts as
/// passed only this long before the statement was sent.
const CLOCK_SLACK_NS: u64 = 1_000_000;

/// The most pinned versions whose snapshots the checker remembers; beyond it the
/// oldest are forgotten (a bounded memory, never a skipped comparison of a
/// pinned version still remembered).
const MAX_REMEMBERED: usize = 4_096;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A property the run broke, with what was seen.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    /// The property's name (as in the model, the TLA+ spec and the docs).
    pub property: &'static str,
    /// What was seen.
    pub detail: String,
}

/// How the guarded INSERTs of the last table check were judged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FenceVerdicts {
    /// Proven fenced out at evaluation (their rows, if any, are violations).
    pub fenced_out: u64,
    /// Possibly live at evaluation (the fence may have passed).
    pub maybe_live: u64,
    /// Not judged: a write of their lease has no known landing time.
    pub undetermined: u64,
}

/// Whether a guarded INSERT's fence could have passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fence {
    FencedOut,
    MaybeLive,
    Undetermined,
}

/// The checker. See the module docs.
#[derive(Debug)]
pub struct Checker {
    transport: Arc<dyn Transport>,
    tables: Tables,
    ledger: Arc<Ledger>,
    violations: Mutex<BTreeSet<Violation>>,
    snapshots: Mutex<BTreeMap<u64, BTreeSet<PackRef>>>,
    lookups: Mutex<BTreeMap<u64, BTreeMap<Uuid, Option<PackRef>>>>,
    verdicts: Mutex<FenceVerdicts>,
    checks: AtomicU64,
}

impl Checker {
    /// A checker reading through `transport`.
    pub fn new(transport: Arc<dyn Transport>, tables: Tables, ledger: Arc<Ledger>) -> Self {
        Self {
            transport,
            tables,
            ledger,
            violations: Mutex::new(BTreeSet::new()),
            snapshots: Mutex::new(BTreeMap::new()),
            lookups: Mutex::new(BTreeMap::new()),
            verdicts: Mutex::new(FenceVerdicts::default()),
            checks: AtomicU64::new(0),
        }
    }

    fn violate(&self, property: &'static str, detail: String) {
        let violation = Violation { property, detail };
        if lock(&self.violations).insert(violation.clone()) {
            tracing::error!(property, detail = violation.detail, "property violated");
        }
    }

    /// Every violation so far.
    pub fn violations(&self) -> Vec<Violation> {
        lock(&self.violations).iter().cloned().collect()
    }

    /// How many table checks ran.
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }

    /// The fence verdicts of the last table check.
    pub fn verdicts(&self) -> FenceVerdicts {
        *lock(&self.verdicts)
    }

    /// How many distinct versions readers pinned.
    pub fn commit_rows_seen(&self) -> usize {
        lock(&self.snapshots).len()
    }

    /// The members at the pinned version `pinned`, read now.
    pub async fn members_at(&self, pinned: u64) -> Result<BTreeSet<PackRef>, Failure> {
        members_at(self.transport.as_ref(), &self.tables, pinned).await
    }

    /// `PinnedSnapshotNeverGrows`: `members` were read at `pinned`; the
    /// first read of a pinned version is its snapshot, and every later read must
    /// equal it.
    pub fn observe_members(&self, reader: &str, pinned: u64, members: BTreeSet<PackRef>) {
        let mut snapshots = lock(&self.snapshots);
        match snapshots.get(&pinned) {
            Some(first) if *first != members => {
                let grew: Vec<_> = members.difference(first).collect();
                let shrank: Vec<_> = first.difference(&members).collect();
                let detail = format!(
                    "{reader}: the snapshot at W={pinned} changed: added {grew:?}, removed {shrank:?}"
                );
                drop(snapshots);
                self.violate(names::PINNED_SNAPSHOT_NEVER_GROWS, detail);
            }
            Some(_) => {}
            None => {
                if snapshots.len() >= MAX_REMEMBERED
                    && let Some(oldest) = snapshots.keys().next().copied()
                {
                    snapshots.remove(&oldest);
                }
                snapshots.insert(pinned, members);
            }
        }
    }

    /// `PinnedSnapshotNeverGrows` through the reader machine: a lookup at
    /// `pinned` resolves only captures of member packs, and every id
    /// asked before resolves the same way (found in the same pack, or not
    /// found) every time.
    pub fn observe_lookup(&self, reader: &str, lookup: &Lookup, members: &BTreeSet<PackRef>) {
        let w = lookup.pinned;
        for (id, d) in &lookup.records {
            if !members.contains(&d.pack()) {
                self.violate(
                    names::PINNED_SNAPSHOT_NEVER_GROWS,
                    format!(
                        "{reader}: get_by_ids at W={w} resolved capture {id} to pack {:?}, which \
                         is not a member at W",
                        d.pack()
                    ),
                );
            }
        }
        let mut lookups = lock(&self.lookups);
        if !lookups.contains_key(&w)
            && lookups.len() >= MAX_REMEMBERED
            && let Some(oldest) = lookups.keys().next().copied()
        {
            lookups.remove(&oldest);
        }
        let seen = lookups.entry(w).or_default();
        let now: BTreeMap<Uuid, Option<PackRef>> = lookup
            .records
            .iter()
            .map(|(id, d)| (*id, Some(d.pack())))
            .chain(lookup.missing.iter().map(|id| (*id, None)))
            .collect();
        let mut changed = Vec::new();
        for (id, pack) in now {
            match seen.get(&id) {
                Some(before) if *before != pack => changed.push((id, before.clone(), pack)),
                Some(_) => {}
                None => {
                    seen.insert(id, pack);
                }
            }
        }
        drop(lookups);
        if !changed.is_empty() {
            self.violate(
                names::PINNED_SNAPSHOT_NEVER_GROWS,
                format!("{reader}: get_by_ids at W={w} changed (id, before, now): {changed:?}"),
            );
        }
    }

    /// A version pinned before, drawn with `rng`.
    pub fn pick_seen(&self, rng: &mut Rng) -> Option<u64> {
        let snapshots = lock(&self.snapshots);
        let n = snapshots.len() as u64;
        let i = usize::try_from(rng.below(n)).ok()?;
        snapshots.keys().nth(i).copied()
    }

    /// Reads the tables and asserts every table-level property.
    pub async fn check_tables(&self) -> Result<(), Failure> {
        // The records and passes first: everything they say completed had
        // landed before the tables are read.
        let records = self.ledger.records();
        let passes = self.ledger.passes();
        let observed = observe(self.transport.as_ref(), &self.tables).await?;
        self.inventory_only_after_publish(&records, &observed);
        self.versions_unique(&records, &observed);
        self.reported_means_visible(&records, &passes, &observed);
        let verdicts = self.fenced_out_writes_nothing(&records, &observed);
        *lock(&self.verdicts) = verdicts;
        self.checks.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn inventory_only_after_publish(&self, records: &[Record], observed: &Observed) {
        for (store, pack, version, publish_id) in &observed.inventory {
            let paired = observed.watermark.contains(&(*version, *publish_id))
                && observed
                    .manifest
                    .contains(&(*version, *publish_id, store.clone(), *pack));
            if !paired {
                self.violate(
                    names::INVENTORY_ONLY_AFTER_PUBLISH,
                    format!(
                        "inventory holds ({store}, {pack}) at V={version} (publish {publish_id}) \
                         without its commit row and manifest row"
                    ),
                );
            }
        }
        let commit_row_landed: BTreeMap<Uuid, u64> = records
            .iter()
            .filter(|r| r.name == "publish.insert_commit_row")
            .filter_map(|r| Some((r.uuid_param("publish_id")?, r.ended_ok()?)))
            .collect();
        for r in records
            .iter()
            .filter(|r| r.name == "index.insert_inventory")
        {
            let Some(publish_id) = r.uuid_param("publish_id") else {
                continue;
            };
            let after = commit_row_landed
                .get(&publish_id)
                .is_some_and(|end| *end < r.start_ns);
            if !after {
                self.violate(
                    names::INVENTORY_ONLY_AFTER_PUBLISH,
                    format!(
                        "{} sent an inventory INSERT for publish {publish_id} before that \
                         publish's commit-row INSERT came back",
                        r.actor
                    ),
                );
            }
        }
    }

    fn versions_unique(&self, records: &[Record], observed: &Observed) {
        let mut by_version: BTreeMap<u64, BTreeSet<Uuid>> = BTreeMap::new();
        for (version, publish_id) in &observed.watermark {
            by_version.entry(*version).or_default().insert(*publish_id);
        }
        for (version, ids) in by_version.iter().filter(|(_, ids)| ids.len() > 1) {
            self.violate(
                names::VERSIONS_UNIQUE,
                format!(
                    "the watermark table holds {} publishes at V={version}: {ids:?}",
                    ids.len()
                ),
            );
        }
        let mut attempts: BTreeMap<u64, BTreeSet<(String, Uuid)>> = BTreeMap::new();
        for r in records.iter().filter(|r| is_guarded(r)) {
            if let (Some(v), Some(id)) = (r.u64_param("index_version"), r.uuid_param("publish_id"))
            {
                attempts.entry(v).or_default().insert((r.actor.clone(), id));
            }
        }
        for (version, who) in attempts.iter().filter(|(_, who)| who.len() > 1) {
            self.violate(
                names::VERSIONS_UNIQUE,
                format!("V={version} was published by more than one attempt: {who:?}"),
            );
        }
    }

    fn reported_means_visible(
        &self,
        records: &[Record],
        passes: &BTreeMap<u64, crate::ledger::Pass>,
        observed: &Observed,
    ) {
        let mut by_pass: BTreeMap<u64, Vec<&Record>> = BTreeMap::new();
        for r in records {
            if let Some(p) = r.pass {
                by_pass.entry(p).or_default().push(r);
            }
        }
        for (n, pass) in passes {
            let Some(outcome) = &pass.outcome else {
                continue;
            };
            let visible_ok = match outcome {
                PassOutcome::Won {
                    version,
                    publish_id,
                    packs,
                    ..
                } => {
                    let stands = observed.watermark.contains(&(*version, *publish_id));
                    let missing: Vec<&PackRef> = packs
                        .iter()
                        .filter(|(s, p)| {
                            !observed
                                .manifest
                                .contains(&(*version, *publish_id, s.clone(), *p))
                        })
                        .collect();
                    if !stands || !missing.is_empty() {
                        self.violate(
                            names::REPORTED_MEANS_VISIBLE,
                            format!(
                                "pass {n} ({}) reported Won at V={version} (publish \
                                 {publish_id}), but the commit row stands: {stands}, manifest \
                                 rows missing: {missing:?}",
                                pass.actor
                            ),
                        );
                    }
                    Some(*publish_id)
                }
                PassOutcome::Conflict { publish_id, .. } => Some(*publish_id),
                _ => None,
            };
            let ours: Vec<&Record> = by_pass
                .get(n)
                .map(|rs| {
                    rs.iter()
                        .filter(|r| r.actor == pass.actor)
                        .copied()
                        .collect()
                })
                .unwrap_or_default();
            // A pass with a failed or unfinished statement may have left a
            // row whose fate its outcome does not describe: not judged.
            if ours.iter().any(|r| r.ended_ok().is_none()) {
                continue;
            }
            for r in ours
                .iter()
                .filter(|r| r.name == "publish.insert_commit_row")
            {
                let (Some(v), Some(id)) =
                    (r.u64_param("index_version"), r.uuid_param("publish_id"))
                else {
                    continue;
                };
                if Some(id) != visible_ok && observed.watermark.contains(&(v, id)) {
                    self.violate(
                        names::REPORTED_MEANS_VISIBLE,
                        format!(
                            "pass {n} ({}) reported attempt {id} at V={v} as not published \
                             ({outcome:?}), but its commit row stands",
                            pass.actor
                        ),
                    );
                }
            }
        }
    }

    fn fenced_out_writes_nothing(&self, records: &[Record], observed: &Observed) -> FenceVerdicts {
        let mut verdicts = FenceVerdicts::default();
        let landed = landing_times(records, &observed.lease);
        let complete = self.ledger.dropped() == 0;
        for g in records.iter().filter(|r| is_guarded(r)) {
            let verdict = if complete {
                fence_at(records, &observed.lease, &landed, g)
            } else {
                Fence::Undetermined
            };
            match verdict {
                Fence::MaybeLive => verdicts.maybe_live += 1,
                Fence::Undetermined => verdicts.undetermined += 1,
                Fence::FencedOut => {
                    verdicts.fenced_out += 1;
                    let (Some(v), Some(id)) =
                        (g.u64_param("index_version"), g.uuid_param("publish_id"))
                    else {
                        continue;
                    };
                    let landed_rows: Vec<String> = if g.name == "publish.insert_commit_row" {
                        observed
                            .watermark
                            .iter()
                            .filter(|row| **row == (v, id))
                            .map(|row| format!("commit row {row:?}"))
                            .collect()
                    } else {
                        g.packs_param()
                            .into_iter()
                            .filter(|(s, p)| observed.manifest.contains(&(v, id, s.clone(), *p)))
                            .map(|pack| format!("manifest {pack:?}"))
                            .collect()
                    };
                    if !landed_rows.is_empty() {
                        self.violate(
                            names::FENCED_OUT_WRITES_NOTHING,
                            format!(
                                "{} sent {} (V={v}, publish {id}, lease {:?}) after its lease \
                                 was provably not the live head, and it landed {landed_rows:?}",
                                g.actor,
                                g.name,
                                g.uuid_param("lease_id")
                            ),
                        );
                    }
                }
            }
        }
        verdicts
    }
}

fn is_guarded(r: &Record) -> bool {
    matches!(
        r.name,
        "publish.insert_manifest" | "publish.insert_commit_row"
    )
}

fn is_lease_write(r: &Record) -> bool {
    matches!(r.name, "lease.insert_claim" | "lease.release")
}

/// When each lease row is known to have landed (an upper bound), by its
/// position in the observed log; `None` when unknown.
fn landing_times(records: &[Record], lease: &[LeaseRow]) -> Vec<Option<u64>> {
    let mut claims: BTreeMap<(u64, Uuid), u64> = BTreeMap::new();
    let mut releases: BTreeMap<Uuid, Vec<Option<u64>>> = BTreeMap::new();
    for r in records {
        match r.name {
            "lease.insert_claim" => {
                if let (Some(term), Some(id), Some(end)) =
                    (r.u64_param("term"), r.uuid_param("lease_id"), r.ended_ok())
                {
                    let slot = claims.entry((term, id)).or_insert(end);
                    *slot = (*slot).min(end);
                }
            }
            "lease.release" => {
                if let Some(id) = r.uuid_param("lease_id") {
                    releases.entry(id).or_default().push(r.ended_ok());
                }
            }
            _ => {}
        }
    }
    lease
        .iter()
        .map(|row| {
            if row.expires_at_ns == 0 {
                // A tombstone landed by the end of the release that wrote
                // it; with several releases of one lease, by the last end,
                // and not at all knowably if any of them did not complete.
                let ends = releases.get(&row.lease_id)?;
                ends.iter()
                    .copied()
                    .collect::<Option<Vec<u64>>>()?
                    .into_iter()
                    .max()
            } else {
                claims.get(&(row.term, row.lease_id)).copied()
            }
        })
        .collect()
}

/// Whether guarded INSERT `g`'s fence could have passed when the engine
/// evaluated it (some time after `g.start_ns`).
fn fence_at(records: &[Record], lease: &[LeaseRow], landed: &[Option<u64>], g: &Record) -> Fence {
    let Some(own) = g.uuid_param("lease_id") else {
        return Fence::Undetermined;
    };
    let start = g.start_ns;
    // Every write of this lease sent before g must be known to have landed
    // before g was sent; otherwise an own row could still turn up as head.
    let own_settled = records
        .iter()
        .filter(|r| {
            is_lease_write(r) && r.uuid_param("lease_id") == Some(own) && r.start_ns < start
        })
        .all(|r| r.ended_ok().is_some_and(|end| end < start));
    if !own_settled {
        return Fence::Undetermined;
    }
    // The highest row (in the fence's own order) known to have landed
    // before g was sent. Later or unknown rows can only be higher rows of
    // OTHER leases (every own row is settled), which keep the fence false.
    let head = meaning::lease_head(
        lease
            .iter()
            .zip(landed)
            .filter(|(_, at)| at.is_some_and(|at| at < start))
            .map(|(row, _)| row),
    );
    match head {
        None => Fence::FencedOut,
        Some(h) if h.lease_id != own => Fence::FencedOut,
        Some(h) if h.expires_at_ns.saturating_add(CLOCK_SLACK_NS) <= start => Fence::FencedOut,
        Some(_) => Fence::MaybeLive,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use capcat_clickhouse::BoxFuture;
    use capcat_proto::{Param, Rows, Statement};

    use super::*;
    use crate::ledger::End;

    const MS: u64 = 1_000_000;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn record(
        name: &'static str,
        params: &[(&str, Param)],
        start: u64,
        end: Option<(u64, bool)>,
    ) -> Record {
        Record {
            actor: "p".to_owned(),
            pass: None,
            name,
            params: params
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect::<BTreeMap<_, _>>(),
            start_ns: start,
            end: end.map(|(end_ns, ok)| End { end_ns, ok }),
        }
    }

    fn claim(term: u64, lease: Uuid, start: u64, end: Option<(u64, bool)>) -> Record {
        record(
            "lease.insert_claim",
            &[
                ("term", Param::UInt64(term)),
                ("lease_id", Param::Uuid(lease)),
            ],
            start,
            end,
        )
    }

    fn commit_row_insert(lease: Uuid, start: u64) -> Record {
        record(
            "publish.insert_commit_row",
            &[
                ("index_version", Param::UInt64(5)),
                ("publish_id", Param::Uuid(id(99))),
                ("lease_id", Param::Uuid(lease)),
            ],
            start,
            Some((start + MS, true)),
        )
    }

    fn row(term: u64, lease: Uuid, expires: u64) -> LeaseRow {
        LeaseRow {
            term,
            lease_id: lease,
            expires_at_ns: expires,
            holder: "h".to_owned(),
        }
    }

    fn verdict(records: &[Record], lease: &[LeaseRow]) -> Fence {
        let g = records.last().expect("the guarded INSERT is last");
        let landed = landing_times(records, lease);
        fence_at(records, lease, &landed, g)
    }

    const L: u128 = 1;
    const M: u128 = 2;
    const START: u64 = 100 * MS;
    const LIVE: u64 = 10_000 * MS;

    #[test]
    fn the_own_live_head_may_pass_the_fence() {
        let records = [
            claim(1, id(L), MS, Some((2 * MS, true))),
            commit_row_insert(id(L), START),
        ];
        assert_eq!(verdict(&records, &[row(1, id(L), LIVE)]), Fence::MaybeLive);
    }

    #[test]
    fn a_takeover_landed_before_the_insert_proves_it_fenced_out() {
        let records = [
            claim(1, id(L), MS, Some((2 * MS, true))),
            claim(2, id(M), 50 * MS, Some((60 * MS, true))),
            commit_row_insert(id(L), START),
        ];
        let lease = [row(1, id(L), LIVE), row(2, id(M), LIVE)];
        assert_eq!(verdict(&records, &lease), Fence::FencedOut);
    }

    #[test]
    fn a_takeover_landing_after_the_insert_was_sent_proves_nothing() {
        let records = [
            claim(1, id(L), MS, Some((2 * MS, true))),
            claim(2, id(M), 50 * MS, Some((START + MS, true))),
            commit_row_insert(id(L), START),
        ];
        let lease = [row(1, id(L), LIVE), row(2, id(M), LIVE)];
        assert_eq!(verdict(&records, &lease), Fence::MaybeLive);
        // Nor does one whose landing is unknown (its task crashed).
        let records = [
            claim(1, id(L), MS, Some((2 * MS, true))),
            claim(2, id(M), 50 * MS, None),
            commit_row_insert(id(L), START),
        ];
        assert_eq!(verdict(&records, &lease), Fence::MaybeLive);
    }

    #[test]
    fn an_own_lease_expired_before_the_insert_is_fenced_out() {
        let records = [
            claim(1, id(L), MS, Some((2 * MS, true))),
            commit_row_insert(id(L), START),
        ];
        assert_eq!(
            verdict(&records, &[row(1, id(L), 50 * MS)]),
            Fence::FencedOut
        );
        // Within the clock slack it is not judged expired.
        let at_edge = START - CLOCK_SLACK_NS / 2;
        assert_eq!(
            verdict(&records, &[row(1, id(L), at_edge)]),
            Fence::MaybeLive
        );
    }

    #[test]
    fn an_own_claim_that_failed_leaves_the_verdict_undetermined() {
        let records = [
            claim(1, id(L), MS, Some((2 * MS, true))),
            claim(2, id(L), 10 * MS, Some((11 * MS, false))),
            claim(3, id(M), 50 * MS, Some((60 * MS, true))),
            commit_row_insert(id(L), START),
        ];
        let lease = [row(1, id(L), LIVE), row(3, id(M), LIVE)];
        assert_eq!(verdict(&records, &lease), Fence::Undetermined);
    }

    #[test]
    fn an_own_release_tombstone_fences_out() {
        let release = record(
            "lease.release",
            &[("lease_id", Param::Uuid(id(L)))],
            10 * MS,
            Some((11 * MS, true)),
        );
        let records = [
            claim(1, id(L), MS, Some((2 * MS, true))),
            release,
            commit_row_insert(id(L), START),
        ];
        assert_eq!(
            verdict(&records, &[row(1, id(L), LIVE), row(2, id(L), 0)]),
            Fence::FencedOut
        );
    }

    #[test]
    fn within_a_contested_term_the_server_order_picks_the_head() {
        // ClickHouse compares a UUID's low half first: `low` is the head
        // although Rust's byte order puts `high` above it, and the order the
        // rows were read in does not matter.
        let high = Uuid::from_u128((5 << 64) | 1);
        let low = id(M);
        for lease in [
            [row(1, high, LIVE), row(1, low, LIVE)],
            [row(1, low, LIVE), row(1, high, LIVE)],
        ] {
            let records = |own| {
                [
                    claim(1, high, MS, Some((2 * MS, true))),
                    claim(1, low, MS, Some((3 * MS, true))),
                    commit_row_insert(own, START),
                ]
            };
            assert_eq!(verdict(&records(high), &lease), Fence::FencedOut);
            assert_eq!(verdict(&records(low), &lease), Fence::MaybeLive);
        }
    }

    #[derive(Debug)]
    struct Unreachable;

    impl Transport for Unreachable {
        fn execute<'a>(&'a self, _: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
            Box::pin(async { panic!("the unit tests never read tables") })
        }
        fn kind(&self) -> &'static str {
            "unreachable"
        }
    }

    fn checker() -> Checker {
        Checker::new(
            Arc::new(Unreachable),
            Tables::new("unit").expect("a valid prefix"),
            Arc::new(Ledger::new()),
        )
    }

    #[test]
    fn a_row_landed_by_a_fenced_out_insert_is_a_violation() {
        let records = [
            claim(1, id(L), MS, Some((2 * MS, true))),
            claim(2, id(M), 50 * MS, Some((60 * MS, true))),
            commit_row_insert(id(L), START),
        ];
        let mut observed = Observed {
            lease: vec![row(1, id(L), LIVE), row(2, id(M), LIVE)],
            ..Observed::default()
        };
        let c = checker();
        let verdicts = c.fenced_out_writes_nothing(&records, &observed);
        assert_eq!(verdicts.fenced_out, 1);
        assert!(c.violations().is_empty(), "nothing landed yet");
        observed.watermark.insert((5, id(99)));
        c.fenced_out_writes_nothing(&records, &observed);
        let v = c.violations();
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].property, names::FENCED_OUT_WRITES_NOTHING);
    }

    #[test]
    fn a_pinned_snapshot_that_changes_is_a_violation() {
        let c = checker();
        let a: BTreeSet<PackRef> = [("s".to_owned(), id(7))].into();
        c.observe_members("r0", 3, a.clone());
        c.observe_members("r1", 3, a.clone());
        assert!(c.violations().is_empty());
        let mut grown = a;
        grown.insert(("s".to_owned(), id(8)));
        c.observe_members("r0", 3, grown);
        let v = c.violations();
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].property, names::PINNED_SNAPSHOT_NEVER_GROWS);
    }

    #[test]
    fn a_won_whose_rows_do_not_stand_and_a_lost_attempt_that_stands_are_violations() {
        let c = checker();
        let ledger = &c.ledger;
        let pack = ("s".to_owned(), id(7));
        ledger.begin_pass(0, "p", [pack.clone()].into(), &[]);
        ledger.end_pass(
            0,
            PassOutcome::Won {
                version: 5,
                publish_id: id(99),
                packs: [pack.clone()].into(),
                attempts: 1,
            },
        );
        let mut observed = Observed::default();
        observed.watermark.insert((5, id(99)));
        observed
            .manifest
            .insert((5, id(99), pack.0.clone(), pack.1));
        c.reported_means_visible(&[], &ledger.passes(), &observed);
        assert!(c.violations().is_empty());
        observed.manifest.clear();
        c.reported_means_visible(&[], &ledger.passes(), &observed);
        assert_eq!(c.violations().len(), 1);
        // A lost attempt of a finished pass whose commit row stands.
        let c = checker();
        c.ledger.begin_pass(1, "p", [pack].into(), &[]);
        c.ledger.end_pass(1, PassOutcome::LeaseLost);
        let mut lost = commit_row_insert(id(L), START);
        lost.pass = Some(1);
        c.reported_means_visible(&[lost], &c.ledger.passes(), &observed);
        assert_eq!(c.violations().len(), 1);
        assert_eq!(c.violations()[0].property, names::REPORTED_MEANS_VISIBLE);
    }
}
