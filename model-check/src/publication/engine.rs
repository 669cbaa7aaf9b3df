//! The simulated ClickHouse: append-only tables, a server clock in ticks,
//! and the execution of capcat-proto [`Statement`]s.
//!
//! The engine dispatches on `stmt.name` to know a statement's shape and
//! reads its values from `stmt.params`, but it decides which GUARDS a
//! statement carries only by finding capcat-proto's canonical fragment text
//! ([`fragments::lease_fence`], [`fragments::version_barrier`], the
//! membership predicate) in `stmt.sql`. A statement with no recognised guard
//! runs unguarded, so a builder that drops or edits a fragment loses the
//! guard here too. What a found guard DOES is never written here: every
//! guard and every read is evaluated by its meaning in
//! [`capcat_proto::fragments::meaning`], which capcat-clickhouse's
//! `fragments_live` test checks against the real engine.

use std::collections::BTreeSet;

use capcat_proto::designs::meaning as rejected;
use capcat_proto::designs::{
    lease_id_fence_text, marginless_fence_text, own_term_read_back_text, rows_at_or_below_text,
    version_only_membership_predicate,
};
use capcat_proto::fragments::meaning::{self, HeldRow, Reach};
use capcat_proto::fragments::{
    self, FENCE_MARGIN_PARAM, INDEX_VERSION_PARAM, LEASE_ID_PARAM, MANIFEST_PACKS_PARAM,
    MembershipBound, TERM_PARAM,
};
use capcat_proto::statement::{InsertData, Param, Rows, Statement, Value};
use capcat_proto::{PackRef, Tables};
use uuid::Uuid;

use super::config::TICK_NS;

/// One row of `{p}_publisher_lease`: capcat-proto's, so the model and the
/// fragments' meanings read the same rows. Its derived order is only the
/// BTree set's canonical storage order; the head is found in the server's
/// `LEASE_ORDER` by [`meaning::lease_head`].
pub use capcat_proto::fragments::meaning::LeaseRow;

/// The catalog's tables, append-only, as BTree sets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Db {
    /// `{p}_publisher_lease`.
    pub lease: BTreeSet<LeaseRow>,
    /// `{p}_version_claims`: (index_version, claim_id).
    pub claims: BTreeSet<(u64, Uuid)>,
    /// `{p}_index_watermark`: (index_version, publish_id).
    pub watermark: BTreeSet<(u64, Uuid)>,
    /// `{p}_snapshot_manifest`: (index_version, publish_id, pack).
    pub manifest: BTreeSet<(u64, Uuid, PackRef)>,
    /// `{p}_pack_inventory_raw`: (pack, index_version, publish_id).
    pub inventory: BTreeSet<(PackRef, u64, Uuid)>,
    /// `{p}_capture_raw`, projected to what membership reads: (pack, index_version).
    pub descriptors: BTreeSet<(PackRef, u64)>,
}

/// Which lease fence a statement's SQL carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fence {
    /// No recognised fence: the statement runs unfenced.
    None,
    /// The canonical one-read fence: the head is the lease and outlives
    /// now plus the `fence_margin_ns` parameter.
    OneRead,
    /// The rejected seed fence: the head is the lease and live now.
    Marginless,
    /// The rejected lease-id fence: the head's lease id is the lease's,
    /// whichever of its rows it is, and outlives the margin.
    LeaseIdOnly,
    /// The rejected two-subquery fence: lease_id and expiry are two reads,
    /// which the engine evaluates in two separate steps.
    TwoReads,
}

/// The guards found in a statement's SQL text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Guards {
    /// `VERSION_BARRIER` found.
    pub barrier: bool,
    /// Which fence was found.
    pub fence: Fence,
    /// `MANIFEST_COMPLETE` found.
    pub manifest_complete: bool,
}

/// Finds the canonical guard fragments in `sql`.
pub fn guards(tables: &Tables, sql: &str) -> Guards {
    let fence = if sql.contains(&fragments::lease_fence(tables)) {
        Fence::OneRead
    } else if sql.contains(&marginless_fence_text(tables)) {
        Fence::Marginless
    } else if sql.contains(&lease_id_fence_text(tables)) {
        Fence::LeaseIdOnly
    } else if sql.contains(&capcat_proto::designs::two_subquery_fence_text(tables)) {
        Fence::TwoReads
    } else {
        Fence::None
    };
    Guards {
        barrier: sql.contains(&fragments::version_barrier(tables)),
        fence,
        manifest_complete: sql.contains(&fragments::manifest_complete(tables)),
    }
}

/// Which rows a `lease.read_claims` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReadBack {
    /// The canonical `CLAIM_READ_BACK`: rows at or above the term, and
    /// every live row of another lease.
    RivalsAnywhere,
    /// The rejected seed read-back: rows at the term only.
    OwnTerm,
}

/// Finds the read-back predicate in a `lease.read_claims`.
pub fn read_back(tables: &Tables, sql: &str) -> Option<ReadBack> {
    if sql.contains(&fragments::claim_read_back(tables)) {
        Some(ReadBack::RivalsAnywhere)
    } else if sql.contains(&own_term_read_back_text()) {
        Some(ReadBack::OwnTerm)
    } else {
        None
    }
}

/// The top-level conjuncts of a reader statement's inner WHERE clause
/// (capcat-proto joins them with one separator; see `reader::plan`). The
/// clause ends at the inner query's next clause: a page's `GROUP BY`, a
/// lookup's `ORDER BY` (it keeps whole rows with `LIMIT 1 BY`).
fn reader_conjuncts(sql: &str) -> Vec<&str> {
    let Some(start) = sql.find("\n    WHERE ") else {
        return Vec::new();
    };
    let rest = &sql[start + "\n    WHERE ".len()..];
    let end = ["\n    GROUP BY", "\n    ORDER BY"]
        .iter()
        .filter_map(|clause| rest.find(clause))
        .min()
        .unwrap_or(rest.len());
    rest[..end].split("\n      AND ").collect()
}

/// How a pinned reader statement bounds the descriptor rows it resolves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowBound {
    /// The canonical `pinned_rows`: rows of a version published at or below W.
    Published,
    /// The rejected bound: rows of any version at or below W.
    AtOrBelow,
    /// No bound: every row of a member pack.
    None,
}

/// Finds a pinned reader statement's row bound: one of its conjuncts is
/// exactly `pinned_rows` (the membership predicate's own bound inside its
/// subquery does not count), or the rejected design's text.
pub fn row_bound(tables: &Tables, sql: &str) -> RowBound {
    let conjuncts = reader_conjuncts(sql);
    if conjuncts.contains(&fragments::pinned_rows(tables).as_str()) {
        RowBound::Published
    } else if conjuncts.contains(&rows_at_or_below_text().as_str()) {
        RowBound::AtOrBelow
    } else {
        RowBound::None
    }
}

/// How a reader statement's SQL decides membership.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Membership {
    /// The canonical predicate: manifest rows paired with a commit row on
    /// `(index_version, publish_id)`, at or below W.
    Paired,
    /// The rejected predicate: manifest rows at any published version <= W.
    VersionOnly,
    /// No recognised predicate: every descriptor row is visible.
    None,
}

/// Finds the membership predicate in a reader statement's SQL.
pub fn membership(tables: &Tables, sql: &str) -> Membership {
    let bound = MembershipBound::Pinned;
    if sql.contains(&fragments::membership_predicate(tables, bound)) {
        Membership::Paired
    } else if sql.contains(&version_only_membership_predicate(tables, bound)) {
        Membership::VersionOnly
    } else {
        Membership::None
    }
}

/// The rows an evaluated INSERT will land (computed when its SELECT ran).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Landing {
    /// The guard was false (or nothing to write).
    Nothing,
    /// A lease row (claim or tombstone).
    Lease(LeaseRow),
    /// A version claim.
    Claim(u64, Uuid),
    /// Descriptor rows.
    Descriptors(Vec<(PackRef, u64)>),
    /// Inventory rows.
    Inventory(Vec<(PackRef, u64, Uuid)>),
    /// Manifest rows.
    Manifest(Vec<(u64, Uuid, PackRef)>),
    /// The commit row.
    CommitRow(u64, Uuid),
}

impl Landing {
    /// Whether landing this writes at least one row.
    pub fn writes(&self) -> bool {
        match self {
            Landing::Nothing => false,
            Landing::Descriptors(v) => !v.is_empty(),
            Landing::Inventory(v) => !v.is_empty(),
            Landing::Manifest(v) => !v.is_empty(),
            Landing::Lease(_) | Landing::Claim(..) | Landing::CommitRow(..) => true,
        }
    }
}

/// A statement the engine does not know: a model defect, reported to the
/// machine as a server exception so it shows in the trace.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the simulated engine does not know statement {name} ({what})")]
pub struct Unknown {
    /// The statement's name.
    pub name: &'static str,
    /// What was missing.
    pub what: &'static str,
}

fn param_u64(stmt: &Statement, name: &str) -> Result<u64, Unknown> {
    match stmt.params.get(name) {
        Some(Param::UInt64(v)) => Ok(*v),
        _ => Err(Unknown {
            name: stmt.name,
            what: "a UInt64 parameter",
        }),
    }
}

fn param_uuid(stmt: &Statement, name: &str) -> Result<Uuid, Unknown> {
    match stmt.params.get(name) {
        Some(Param::Uuid(v)) => Ok(*v),
        _ => Err(Unknown {
            name: stmt.name,
            what: "a UUID parameter",
        }),
    }
}

fn param_string(stmt: &Statement, name: &str) -> Result<String, Unknown> {
    match stmt.params.get(name) {
        Some(Param::String(v)) => Ok(v.clone()),
        _ => Err(Unknown {
            name: stmt.name,
            what: "a String parameter",
        }),
    }
}

fn param_packs(stmt: &Statement) -> Result<Vec<PackRef>, Unknown> {
    match stmt.params.get("packs") {
        Some(Param::StorePacks(v)) => Ok(v.clone()),
        _ => Err(Unknown {
            name: stmt.name,
            what: "a packs parameter",
        }),
    }
}

/// The statement's lease id parameter, when it has one.
pub fn lease_param(stmt: &Statement) -> Option<Uuid> {
    param_uuid(stmt, LEASE_ID_PARAM).ok()
}

/// Server nanoseconds at model tick `now`.
pub fn now_ns(now: u8) -> u64 {
    u64::from(now) * TICK_NS
}

impl Db {
    /// The head of the lease log, as `ORDER BY LEASE_ORDER LIMIT 1` reads it.
    pub fn lease_head(&self) -> Option<&LeaseRow> {
        meaning::lease_head(&self.lease)
    }

    /// `LEASE_FENCE`: the head is exactly `held` and its expiry is beyond
    /// now plus the margin.
    pub fn fence_passes(&self, held: HeldRow, now: u8, margin_ns: u64) -> bool {
        meaning::lease_fence(&self.lease, held, now_ns(now), margin_ns)
    }

    /// Whether a release tombstone (expiry 0) carries `lease_id`.
    pub fn released(&self, lease_id: Uuid) -> bool {
        meaning::released(&self.lease, lease_id)
    }

    /// `MANIFEST_COMPLETE`: the distinct packs of manifest rows at
    /// `(version, publish_id)` number `packs`.
    pub fn manifest_complete(&self, version: u64, publish_id: Uuid, packs: u64) -> bool {
        meaning::manifest_complete(&self.manifest, version, publish_id, packs)
    }

    /// Ground truth: is `lease_id` the live head at `now`?
    pub fn is_live_head(&self, lease_id: Uuid, now: u8) -> bool {
        meaning::is_live_head(&self.lease, lease_id, now_ns(now))
    }

    fn published_head(&self) -> u64 {
        meaning::published_head(&self.watermark)
    }

    /// The packs a reader at W sees: descriptor rows whose pack the
    /// membership predicate admits.
    pub fn visible_at(&self, membership: Membership, w: u64) -> BTreeSet<PackRef> {
        let admitted = match membership {
            Membership::Paired => {
                meaning::members(&self.manifest, &self.watermark, Reach::AtOrBelow(w))
            }
            Membership::VersionOnly => {
                rejected::version_only_members(&self.manifest, &self.watermark, Reach::AtOrBelow(w))
            }
            Membership::None => self.descriptors.iter().map(|(p, _)| p.clone()).collect(),
        };
        self.descriptors
            .iter()
            .filter(|(p, _)| admitted.contains(p))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// What a pinned read at W returns, per pack (the model's one capture
    /// per pack): the `index_version` of the row `argMax` resolves to among
    /// the descriptor rows of admitted packs, within the statement's row
    /// bound.
    pub fn resolved_at(
        &self,
        membership: Membership,
        bound: RowBound,
        w: u64,
    ) -> std::collections::BTreeMap<PackRef, u64> {
        let admitted = self.visible_at(membership, w);
        let mut out = std::collections::BTreeMap::new();
        let within = |v: u64| match bound {
            RowBound::Published => meaning::pinned_row(&self.watermark, v, w),
            RowBound::AtOrBelow => rejected::rows_at_or_below(v, w),
            RowBound::None => true,
        };
        for (p, v) in &self.descriptors {
            if admitted.contains(p) && within(*v) {
                let best = out.entry(p.clone()).or_insert(*v);
                *best = (*best).max(*v);
            }
        }
        out
    }

    /// Whether `pack` is visible through a paired manifest row at any version.
    pub fn pack_visible(&self, pack: &PackRef) -> bool {
        meaning::members(&self.manifest, &self.watermark, Reach::Published).contains(pack)
    }

    /// Runs a read statement at `now` and returns its rows.
    pub fn read(&self, tables: &Tables, stmt: &Statement, now: u8) -> Result<Rows, Unknown> {
        let rows = match stmt.name {
            "lease.read_head" => meaning::read_head(&self.lease, now_ns(now))
                .iter()
                .map(meaning::HeadRow::values)
                .collect(),
            "lease.read_claims" => {
                let term = param_u64(stmt, TERM_PARAM)?;
                let lease_id = param_uuid(stmt, LEASE_ID_PARAM)?;
                let how = read_back(tables, &stmt.sql).ok_or(Unknown {
                    name: stmt.name,
                    what: "a read-back predicate",
                })?;
                let rows = match how {
                    ReadBack::RivalsAnywhere => {
                        meaning::claim_read_back(&self.lease, term, lease_id, now_ns(now))
                    }
                    ReadBack::OwnTerm => rejected::own_term_read_back(&self.lease, term),
                };
                rows.into_iter()
                    .map(|r| vec![Value::Uuid(r.lease_id), Value::UInt64(r.expires_at_ns)])
                    .collect()
            }
            "allocate.read_head" => vec![vec![Value::UInt64(meaning::allocation_head(
                &self.claims,
                &self.watermark,
            ))]],
            "allocate.read_claims" => {
                let version = param_u64(stmt, INDEX_VERSION_PARAM)?;
                meaning::ids_at(&self.claims, version)
                    .into_iter()
                    .map(|id| vec![Value::Uuid(id)])
                    .collect()
            }
            "index.read_committed" => {
                let asked: BTreeSet<PackRef> = param_packs(stmt)?.into_iter().collect();
                meaning::committed(self.inventory.iter().map(|(p, _, _)| p), &asked)
                    .into_iter()
                    .map(|(s, p)| vec![Value::String(s), Value::Uuid(p)])
                    .collect()
            }
            "publish.read_publish_ids" => {
                let version = param_u64(stmt, INDEX_VERSION_PARAM)?;
                meaning::ids_at(&self.watermark, version)
                    .into_iter()
                    .map(|id| vec![Value::Uuid(id)])
                    .collect()
            }
            "publish.read_highest_publish_ids" => {
                meaning::ids_at(&self.watermark, self.published_head())
                    .into_iter()
                    .map(|id| vec![Value::Uuid(id)])
                    .collect()
            }
            "reader.pin_snapshot" => vec![vec![Value::UInt64(self.published_head())]],
            _ => {
                let _ = tables;
                return Err(Unknown {
                    name: stmt.name,
                    what: "a read of this name",
                });
            }
        };
        Ok(Rows(rows))
    }

    /// Evaluates an INSERT's SELECT (and WHERE clause) at `now`: the rows it
    /// will land. For the two-subquery fence this is the SECOND read; the
    /// first read's verdict comes in as `first_read_id_ok`.
    pub fn evaluate(
        &self,
        tables: &Tables,
        stmt: &Statement,
        now: u8,
        first_read_id_ok: Option<bool>,
    ) -> Result<Landing, Unknown> {
        let g = guards(tables, &stmt.sql);
        let version_ok = |v: u64| !g.barrier || meaning::version_barrier(&self.watermark, v);
        let fence_ok = || -> Result<bool, Unknown> {
            Ok(match g.fence {
                Fence::None => true,
                Fence::OneRead => self.fence_passes(
                    fragments::fenced_row(stmt).ok_or(Unknown {
                        name: stmt.name,
                        what: "the lease row its fence names",
                    })?,
                    now,
                    param_u64(stmt, FENCE_MARGIN_PARAM)?,
                ),
                Fence::LeaseIdOnly => rejected::lease_id_fence(
                    &self.lease,
                    param_uuid(stmt, LEASE_ID_PARAM)?,
                    now_ns(now),
                    param_u64(stmt, FENCE_MARGIN_PARAM)?,
                ),
                Fence::Marginless => rejected::marginless_fence(
                    &self.lease,
                    param_uuid(stmt, LEASE_ID_PARAM)?,
                    now_ns(now),
                ),
                Fence::TwoReads => {
                    let id_ok = match first_read_id_ok {
                        Some(ok) => ok,
                        None => self.head_id_is(param_uuid(stmt, LEASE_ID_PARAM)?),
                    };
                    id_ok
                        && rejected::head_outlives(
                            &self.lease,
                            now_ns(now),
                            param_u64(stmt, FENCE_MARGIN_PARAM)?,
                        )
                }
            })
        };
        let complete_ok = |v: u64, id: Uuid| -> Result<bool, Unknown> {
            Ok(!g.manifest_complete
                || self.manifest_complete(v, id, param_u64(stmt, MANIFEST_PACKS_PARAM)?))
        };
        Ok(match stmt.name {
            "lease.insert_claim" => Landing::Lease(LeaseRow {
                term: param_u64(stmt, TERM_PARAM)?,
                lease_id: param_uuid(stmt, LEASE_ID_PARAM)?,
                expires_at_ns: meaning::claim_expiry(now_ns(now), param_u64(stmt, "ttl_ns")?),
                holder: param_string(stmt, "holder")?,
            }),
            "lease.release" => {
                if fence_ok()? {
                    Landing::Lease(LeaseRow {
                        term: meaning::release_term(&self.lease),
                        lease_id: param_uuid(stmt, LEASE_ID_PARAM)?,
                        expires_at_ns: 0,
                        holder: param_string(stmt, "holder")?,
                    })
                } else {
                    Landing::Nothing
                }
            }
            "allocate.insert_claim" => Landing::Claim(
                param_u64(stmt, INDEX_VERSION_PARAM)?,
                param_uuid(stmt, "claim_id")?,
            ),
            "index.insert_descriptors" => match &stmt.data {
                Some(InsertData::Descriptors(rows)) => {
                    Landing::Descriptors(rows.iter().map(|d| (d.pack(), d.index_version)).collect())
                }
                _ => {
                    return Err(Unknown {
                        name: stmt.name,
                        what: "descriptor rows as its data",
                    });
                }
            },
            "index.insert_inventory" => {
                let v = param_u64(stmt, INDEX_VERSION_PARAM)?;
                let id = param_uuid(stmt, "publish_id")?;
                Landing::Inventory(param_packs(stmt)?.into_iter().map(|p| (p, v, id)).collect())
            }
            "publish.insert_manifest" => {
                let v = param_u64(stmt, INDEX_VERSION_PARAM)?;
                let id = param_uuid(stmt, "publish_id")?;
                if version_ok(v) && fence_ok()? {
                    Landing::Manifest(param_packs(stmt)?.into_iter().map(|p| (v, id, p)).collect())
                } else {
                    Landing::Nothing
                }
            }
            "publish.insert_commit_row" => {
                let v = param_u64(stmt, INDEX_VERSION_PARAM)?;
                let id = param_uuid(stmt, "publish_id")?;
                if version_ok(v) && fence_ok()? && complete_ok(v, id)? {
                    Landing::CommitRow(v, id)
                } else {
                    Landing::Nothing
                }
            }
            _ => {
                return Err(Unknown {
                    name: stmt.name,
                    what: "an INSERT of this name",
                });
            }
        })
    }

    /// The first read of the two-subquery fence: is the head's lease_id ours?
    pub fn head_id_is(&self, lease_id: Uuid) -> bool {
        rejected::head_id_is(&self.lease, lease_id)
    }

    /// Lands evaluated rows.
    pub fn land(&mut self, landing: Landing) {
        match landing {
            Landing::Nothing => {}
            Landing::Lease(row) => {
                self.lease.insert(row);
            }
            Landing::Claim(v, id) => {
                self.claims.insert((v, id));
            }
            Landing::Descriptors(rows) => self.descriptors.extend(rows),
            Landing::Inventory(rows) => self.inventory.extend(rows),
            Landing::Manifest(rows) => self.manifest.extend(rows),
            Landing::CommitRow(v, id) => {
                self.watermark.insert((v, id));
            }
        }
    }
}

/// Whether `name` is a claim: an unconditional INSERT whose SELECT stamps
/// the server clock (lease claims) or names a version (allocator claims).
pub fn is_claim(name: &str) -> bool {
    matches!(name, "lease.insert_claim" | "allocate.insert_claim")
}

/// Whether a statement is a conditional INSERT the engine runs in two
/// steps (evaluate, then land), interleavable with everything else.
pub fn is_conditional_insert(name: &str) -> bool {
    matches!(
        name,
        "publish.insert_manifest" | "publish.insert_commit_row" | "lease.release"
    )
}

#[cfg(test)]
mod tests {
    use capcat_proto::designs::Design;
    use capcat_proto::publish::sql::insert_commit_row;
    use capcat_proto::{Config, Tables};

    use super::*;
    use crate::publication::test_lease;

    fn tables() -> Tables {
        Tables::new("m").expect("valid prefix")
    }

    fn commit_row(design: Design) -> Statement {
        let cfg = Config::default();
        let stmt = insert_commit_row(&tables(), &cfg, 1, Uuid::from_u128(1), &test_lease(), 0);
        design.rewrite(stmt, &tables(), &cfg)
    }

    #[test]
    fn the_engine_finds_both_guards_in_the_shipped_publish_statement() {
        let g = guards(&tables(), &commit_row(Design::Shipped).sql);
        assert_eq!(
            g,
            Guards {
                barrier: true,
                fence: Fence::OneRead,
                manifest_complete: true,
            }
        );
    }

    #[test]
    fn a_statement_whose_fence_text_is_gone_runs_unfenced() {
        let cut =
            capcat_proto::designs::without_lease_fence(&commit_row(Design::Shipped), &tables());
        assert_eq!(guards(&tables(), &cut.sql).fence, Fence::None);
        assert_eq!(
            guards(&tables(), &commit_row(Design::BarrierOnly).sql).fence,
            Fence::None
        );
        assert_eq!(
            guards(&tables(), &commit_row(Design::TwoSubqueryFence).sql).fence,
            Fence::TwoReads
        );
    }

    /// The model's reader reads a page; a lookup carries the same pinned
    /// conditions, and the engine must read them alike whatever follows the
    /// WHERE clause (a page's `GROUP BY`, a lookup's `ORDER BY ... LIMIT 1
    /// BY`), under every design that rewrites them.
    #[test]
    fn the_engine_reads_the_same_pinned_conditions_in_a_page_and_a_lookup() {
        use capcat_proto::reader::{SearchFilter, SearchQuery, get_by_ids, search_page};

        let t = tables();
        let cfg = Config::default();
        let ids = BTreeSet::from([Uuid::from_u128(7)]);
        let mut lookup = get_by_ids(&t, "acme", &ids, 3).expect("a lookup");
        assert_eq!(lookup.len(), 1);
        let lookup = lookup.remove(0);
        let query = SearchQuery {
            filter: SearchFilter {
                tenant_id: "acme".to_owned(),
                ..SearchFilter::default()
            },
            ..SearchQuery::default()
        };
        let page = search_page(&t, &query, 3).expect("a page");
        for (design, bound, member) in [
            (Design::Shipped, RowBound::Published, Membership::Paired),
            (
                Design::UnpublishedRowsResolve,
                RowBound::AtOrBelow,
                Membership::Paired,
            ),
            (Design::RowsAbovePinned, RowBound::None, Membership::Paired),
            (
                Design::MembershipOnVersionAlone,
                RowBound::Published,
                Membership::VersionOnly,
            ),
        ] {
            for stmt in [&page, &lookup] {
                let read = design.rewrite(stmt.clone(), &t, &cfg);
                assert_eq!(row_bound(&t, &read.sql), bound, "{design:?}: {}", read.sql);
                assert_eq!(
                    membership(&t, &read.sql),
                    member,
                    "{design:?}: {}",
                    read.sql
                );
            }
        }
        // The clause ends where the inner query's next clause begins: the
        // last conjunct is the membership predicate, nothing after it.
        for stmt in [&page, &lookup] {
            let conjuncts = reader_conjuncts(&stmt.sql);
            assert_eq!(
                conjuncts.last().copied(),
                Some(fragments::membership_predicate(&t, MembershipBound::Pinned).as_str()),
                "{}",
                stmt.sql
            );
        }
    }

    #[test]
    fn an_unfenced_commit_row_lands_without_a_lease_and_a_fenced_one_does_not() {
        let db = Db::default();
        let fenced = db.evaluate(&tables(), &commit_row(Design::Shipped), 0, None);
        assert_eq!(
            fenced,
            Ok(Landing::Nothing),
            "no lease row: the fence is false"
        );
        let unfenced = db.evaluate(&tables(), &commit_row(Design::BarrierOnly), 0, None);
        assert_eq!(unfenced, Ok(Landing::CommitRow(1, Uuid::from_u128(1))));
    }
}
