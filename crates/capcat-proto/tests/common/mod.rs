//! A scripted driver for the publication machines: runs a machine against a
//! responder that answers each statement by name, records what was asked.
//!
//! The responder returns canned rows; it never evaluates a guard. These are
//! unit tests of pure transition logic, so "the server said X" is the input
//! and the machine's reaction is what is asserted.

#![allow(dead_code, unreachable_pub)]

use capcat_proto::{Input, Machine, Rows, Statement, Step, Value};
use uuid::Uuid;

/// What a run did.
#[derive(Debug)]
pub struct Run<O> {
    /// Every statement executed, in order.
    pub statements: Vec<Statement>,
    /// The `below` of every draw, in order.
    pub draws: Vec<u64>,
    /// The outcome.
    pub outcome: O,
}

impl<O> Run<O> {
    /// The names of the statements executed, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.statements.iter().map(|s| s.name).collect()
    }
    /// The statements with this name.
    pub fn named(&self, name: &str) -> Vec<&Statement> {
        self.statements.iter().filter(|s| s.name == name).collect()
    }
}

/// Drives `machine` to its outcome. Panics (test failure) if it takes more
/// than `max_steps` steps: every machine is bounded.
pub fn drive<M: Machine>(
    machine: &mut M,
    mut respond: impl FnMut(&Statement) -> Input,
    mut draw: impl FnMut(u64) -> u64,
    max_steps: usize,
) -> Run<M::Outcome> {
    let mut statements = Vec::new();
    let mut draws = Vec::new();
    for _ in 0..max_steps {
        match machine.poll() {
            Step::Execute(stmt) => {
                let input = respond(&stmt);
                statements.push(stmt);
                machine.handle(input);
            }
            Step::Draw { below } => {
                assert!(below >= 1, "a draw window is never empty");
                draws.push(below);
                machine.handle(Input::Drawn(draw(below)));
            }
            Step::Done(outcome) => {
                return Run {
                    statements,
                    draws,
                    outcome,
                };
            }
        }
    }
    panic!("machine did not finish within {max_steps} steps");
}

/// Rows from plain values.
pub fn rows(rows: Vec<Vec<Value>>) -> Input {
    Input::Rows(Rows(rows))
}

/// No rows (what an INSERT returns).
pub fn ok() -> Input {
    Input::Rows(Rows::empty())
}

/// One `lease.read_head` row whose row is the only one at its term (the
/// term's latest expiry and liveness are the row's own).
pub fn head_row(
    term: u64,
    lease_id: Uuid,
    holder: &str,
    expires_at_ns: u64,
    live: bool,
) -> Vec<Value> {
    head_row_in_term(
        term,
        lease_id,
        holder,
        expires_at_ns,
        live,
        expires_at_ns,
        live,
    )
}

/// One `lease.read_head` row with the head term's latest expiry and
/// liveness given separately (other rows stand at the head term).
pub fn head_row_in_term(
    term: u64,
    lease_id: Uuid,
    holder: &str,
    expires_at_ns: u64,
    live: bool,
    term_expires_at_ns: u64,
    term_live: bool,
) -> Vec<Value> {
    vec![
        Value::UInt64(term),
        Value::Uuid(lease_id),
        Value::String(holder.to_owned()),
        Value::UInt64(expires_at_ns),
        Value::UInt64(u64::from(live)),
        Value::UInt64(term_expires_at_ns),
        Value::UInt64(u64::from(term_live)),
    ]
}

/// One `lease.read_claims` row.
pub fn claim_row(lease_id: Uuid, expires_at_ns: u64) -> Vec<Value> {
    vec![Value::Uuid(lease_id), Value::UInt64(expires_at_ns)]
}

/// A one-column UUID row.
pub fn uuid_row(id: Uuid) -> Vec<Value> {
    vec![Value::Uuid(id)]
}

/// A deterministic UUID for tests.
pub fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

/// The UInt64 parameter `name` of `stmt`.
pub fn u64_param(stmt: &Statement, name: &str) -> u64 {
    match stmt.params.get(name) {
        Some(capcat_proto::Param::UInt64(v)) => *v,
        other => panic!("{} has no UInt64 param {name}: {other:?}", stmt.name),
    }
}

/// The UUID parameter `name` of `stmt`.
pub fn uuid_param(stmt: &Statement, name: &str) -> Uuid {
    match stmt.params.get(name) {
        Some(capcat_proto::Param::Uuid(v)) => *v,
        other => panic!("{} has no UUID param {name}: {other:?}", stmt.name),
    }
}

use capcat_proto::fragments::meaning;
/// One row of the fake lease log: capcat-proto's own, so the fake's
/// guards are evaluated by the fragments' meanings
/// (`capcat_proto::fragments::meaning`), the functions the differential test
/// checks against the engine.
pub use capcat_proto::fragments::meaning::LeaseRow;

/// An in-memory lease log with a server clock.
///
/// It evaluates the lease fence ONLY when the statement's SQL carries the
/// canonical fragment verbatim (read off the statement, never assumed from a
/// parameter being present), so deleting the fence from a builder makes the
/// fake write unconditionally, exactly as a server would.
#[derive(Clone, Debug, Default)]
pub struct LeaseLog {
    pub rows: Vec<LeaseRow>,
    pub now_ns: u64,
    pub tables: Option<capcat_proto::Tables>,
}

impl LeaseLog {
    pub fn new(tables: &capcat_proto::Tables, now_ns: u64) -> Self {
        Self {
            rows: Vec::new(),
            now_ns,
            tables: Some(tables.clone()),
        }
    }

    /// The head row, if any.
    pub fn head(&self) -> Option<LeaseRow> {
        meaning::lease_head(&self.rows).cloned()
    }

    /// The fence as the server evaluates it, with the row and the margin
    /// the statement names.
    pub fn fence_admits(&self, stmt: &Statement) -> bool {
        let held = capcat_proto::fragments::fenced_row(stmt)
            .unwrap_or_else(|| panic!("{} names no lease row", stmt.name));
        meaning::lease_fence(
            &self.rows,
            held,
            self.now_ns,
            u64_param(stmt, "fence_margin_ns"),
        )
    }

    /// The fence as it judges `lease`'s statements (the row `lease` holds)
    /// with margin `margin_ns`.
    pub fn fence_admits_lease(&self, lease: &capcat_proto::Lease, margin_ns: u64) -> bool {
        meaning::lease_fence(&self.rows, lease.held_row(), self.now_ns, margin_ns)
    }

    /// Answers a lease statement; `None` for statements it does not know.
    pub fn respond(&mut self, stmt: &Statement) -> Option<Input> {
        let tables = self.tables.clone().expect("log built with tables");
        match stmt.name {
            "lease.read_head" => {
                let limit = if stmt.sql.contains("LIMIT 2") { 2 } else { 1 };
                let rows = meaning::read_head(&self.rows, self.now_ns)
                    .iter()
                    .take(limit)
                    .map(meaning::HeadRow::values)
                    .collect();
                Some(rows_input(rows))
            }
            "lease.insert_claim" => {
                let holder = match stmt.params.get("holder") {
                    Some(capcat_proto::Param::String(h)) => h.clone(),
                    other => panic!("claim without holder: {other:?}"),
                };
                self.rows.push(LeaseRow {
                    term: u64_param(stmt, "term"),
                    lease_id: uuid_param(stmt, "lease_id"),
                    holder,
                    expires_at_ns: meaning::claim_expiry(self.now_ns, u64_param(stmt, "ttl_ns")),
                });
                Some(ok())
            }
            "lease.read_claims" => {
                let term = u64_param(stmt, "term");
                let lease_id = uuid_param(stmt, "lease_id");
                // The read-back predicate is read off the statement: the
                // canonical one sees every row at or above the term and every
                // live row of another lease; anything else is refused.
                assert!(
                    stmt.sql
                        .contains(&capcat_proto::fragments::claim_read_back(&tables)),
                    "the fake knows only the canonical read-back: {}",
                    stmt.sql
                );
                let rows = meaning::claim_read_back(&self.rows, term, lease_id, self.now_ns)
                    .into_iter()
                    .map(|r| claim_row(r.lease_id, r.expires_at_ns))
                    .collect();
                Some(rows_input(rows))
            }
            "lease.release" => {
                let lease_id = uuid_param(stmt, "lease_id");
                let fenced = stmt
                    .sql
                    .contains(&capcat_proto::fragments::lease_fence(&tables));
                if !fenced || self.fence_admits(stmt) {
                    self.rows.push(LeaseRow {
                        term: meaning::release_term(&self.rows),
                        lease_id,
                        holder: "tombstone".to_owned(),
                        expires_at_ns: 0,
                    });
                }
                Some(ok())
            }
            _ => None,
        }
    }
}

fn rows_input(rows: Vec<Vec<Value>>) -> Input {
    Input::Rows(Rows(rows))
}

/// An in-memory catalog: the lease log plus the publication tables.
///
/// Guards are read off the statement: the barrier applies only if the SQL
/// carries `version_barrier` verbatim, the fence only if it carries
/// `lease_fence` verbatim. Rows of a statement land at once (the model
/// checker is where evaluation and landing interleave).
#[derive(Clone, Debug)]
pub struct FakeCatalog {
    pub lease: LeaseLog,
    pub tables: capcat_proto::Tables,
    pub claims: Vec<(u64, Uuid)>,
    pub watermark: Vec<(u64, Uuid)>,
    pub manifest: Vec<(u64, Uuid, capcat_proto::PackRef)>,
    pub inventory: Vec<(String, Uuid, u64, Uuid)>,
    pub descriptors: Vec<capcat_proto::CaptureDescriptor>,
    /// Statement names to fail once each (ambiguous failures).
    pub fail_next: Vec<&'static str>,
}

impl FakeCatalog {
    pub fn new(tables: &capcat_proto::Tables, now_ns: u64) -> Self {
        Self {
            lease: LeaseLog::new(tables, now_ns),
            tables: tables.clone(),
            claims: Vec::new(),
            watermark: Vec::new(),
            manifest: Vec::new(),
            inventory: Vec::new(),
            descriptors: Vec::new(),
            fail_next: Vec::new(),
        }
    }

    fn guard_passes(&self, stmt: &Statement) -> bool {
        let barrier = capcat_proto::fragments::version_barrier(&self.tables);
        let fence = capcat_proto::fragments::lease_fence(&self.tables);
        let version = u64_param(stmt, "index_version");
        let barrier_ok =
            !stmt.sql.contains(&barrier) || meaning::version_barrier(&self.watermark, version);
        let fence_ok = !stmt.sql.contains(&fence) || self.lease.fence_admits(stmt);
        barrier_ok && fence_ok
    }

    fn packs(stmt: &Statement) -> Vec<(String, Uuid)> {
        match stmt.params.get("packs") {
            Some(capcat_proto::Param::StorePacks(p)) => p.clone(),
            other => panic!("{} has no packs: {other:?}", stmt.name),
        }
    }

    /// Answers any publication statement.
    pub fn respond(&mut self, stmt: &Statement) -> Input {
        if let Some(pos) = self.fail_next.iter().position(|n| *n == stmt.name) {
            self.fail_next.remove(pos);
            return Input::Failed(capcat_proto::Failure::Timeout);
        }
        if let Some(input) = self.lease.respond(stmt) {
            return input;
        }
        match stmt.name {
            "allocate.read_head" => rows(vec![vec![Value::UInt64(meaning::allocation_head(
                &self.claims,
                &self.watermark,
            ))]]),
            "allocate.insert_claim" => {
                self.claims.push((
                    u64_param(stmt, "index_version"),
                    uuid_param(stmt, "claim_id"),
                ));
                ok()
            }
            "allocate.read_claims" => {
                let v = u64_param(stmt, "index_version");
                rows(
                    meaning::ids_at(&self.claims, v)
                        .into_iter()
                        .map(uuid_row)
                        .collect(),
                )
            }
            "publish.insert_manifest" => {
                if self.guard_passes(stmt) {
                    let v = u64_param(stmt, "index_version");
                    let p = uuid_param(stmt, "publish_id");
                    for pack in Self::packs(stmt) {
                        self.manifest.push((v, p, pack));
                    }
                }
                ok()
            }
            "publish.insert_commit_row" => {
                let complete = capcat_proto::fragments::manifest_complete(&self.tables);
                let (v, p) = (
                    u64_param(stmt, "index_version"),
                    uuid_param(stmt, "publish_id"),
                );
                let complete_ok = !stmt.sql.contains(&complete)
                    || meaning::manifest_complete(
                        &self.manifest,
                        v,
                        p,
                        u64_param(stmt, "manifest_packs"),
                    );
                if self.guard_passes(stmt) && complete_ok {
                    self.watermark.push((
                        u64_param(stmt, "index_version"),
                        uuid_param(stmt, "publish_id"),
                    ));
                }
                ok()
            }
            "publish.read_publish_ids" => {
                let v = u64_param(stmt, "index_version");
                rows(
                    meaning::ids_at(&self.watermark, v)
                        .into_iter()
                        .map(uuid_row)
                        .collect(),
                )
            }
            "index.read_committed" => {
                let wanted = Self::packs(stmt).into_iter().collect();
                let inventory = self.inventory.iter().map(|(s, p, _, _)| (s.clone(), *p));
                let held: Vec<capcat_proto::PackRef> = inventory.collect();
                rows(
                    meaning::committed(&held, &wanted)
                        .into_iter()
                        .map(|(s, p)| vec![Value::String(s), Value::Uuid(p)])
                        .collect(),
                )
            }
            "index.insert_descriptors" => {
                // The rows are the statement's data: the text must say so,
                // or a real server would read no rows (or the wrong ones).
                assert!(
                    stmt.sql.ends_with(") FORMAT RowBinary"),
                    "a descriptor insert whose text does not take RowBinary data: {}",
                    stmt.sql
                );
                match &stmt.data {
                    Some(capcat_proto::InsertData::Descriptors(d)) => {
                        self.descriptors.extend(d.iter().cloned())
                    }
                    other => panic!("descriptor insert without rows: {other:?}"),
                }
                ok()
            }
            "index.insert_inventory" => {
                let v = u64_param(stmt, "index_version");
                let p = uuid_param(stmt, "publish_id");
                for (store, pack) in Self::packs(stmt) {
                    self.inventory.push((store, pack, v, p));
                }
                ok()
            }
            other => panic!("the fake catalog does not know {other}"),
        }
    }

    /// The packs visible at or below the highest published version: manifest
    /// rows paired with a commit row of the same publish.
    pub fn visible_packs(&self) -> std::collections::BTreeSet<(String, Uuid)> {
        meaning::members(&self.manifest, &self.watermark, meaning::Reach::Published)
    }
}
