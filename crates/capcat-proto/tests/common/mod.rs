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

/// One row of the fake lease log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRow {
    pub term: u64,
    pub lease_id: Uuid,
    pub holder: String,
    pub expires_at_ns: u64,
}

/// ClickHouse's UUID collation: the second half of the text form (the low
/// 64 bits) compares first. Python's and Rust's orderings disagree with it.
pub fn ch_uuid_key(u: Uuid) -> (u64, u64) {
    let v = u.as_u128();
    (v as u64, (v >> 64) as u64)
}

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

    fn ordered(&self) -> Vec<LeaseRow> {
        let mut rows = self.rows.clone();
        // LEASE_ORDER: term DESC, lease_id DESC, expires_at_ns DESC.
        rows.sort_by(|a, b| {
            (b.term, ch_uuid_key(b.lease_id), b.expires_at_ns).cmp(&(
                a.term,
                ch_uuid_key(a.lease_id),
                a.expires_at_ns,
            ))
        });
        rows
    }

    /// The head row, if any.
    pub fn head(&self) -> Option<LeaseRow> {
        self.ordered().into_iter().next()
    }

    /// The fence as the server evaluates it, with the statement's margin.
    pub fn fence_admits(&self, lease_id: Uuid, margin_ns: u64) -> bool {
        self.head().is_some_and(|h| {
            h.lease_id == lease_id && h.expires_at_ns > self.now_ns.saturating_add(margin_ns)
        })
    }

    /// Answers a lease statement; `None` for statements it does not know.
    pub fn respond(&mut self, stmt: &Statement) -> Option<Input> {
        let tables = self.tables.clone().expect("log built with tables");
        match stmt.name {
            "lease.read_head" => {
                let limit = if stmt.sql.contains("LIMIT 2") { 2 } else { 1 };
                let ordered = self.ordered();
                // The term columns are computed from the log's rows, as the
                // server computes them: the latest expiry of any row at the
                // head term.
                let head_term = ordered.first().map_or(0, |r| r.term);
                let term_expires_at_ns = ordered
                    .iter()
                    .filter(|r| r.term == head_term)
                    .map(|r| r.expires_at_ns)
                    .max()
                    .unwrap_or(0);
                let rows = ordered
                    .iter()
                    .take(limit)
                    .map(|r| {
                        head_row_in_term(
                            r.term,
                            r.lease_id,
                            &r.holder,
                            r.expires_at_ns,
                            r.expires_at_ns > self.now_ns,
                            term_expires_at_ns,
                            term_expires_at_ns > self.now_ns,
                        )
                    })
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
                    expires_at_ns: self.now_ns + u64_param(stmt, "ttl_ns"),
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
                let now = self.now_ns;
                let released = |id: Uuid| {
                    self.rows
                        .iter()
                        .any(|r| r.lease_id == id && r.expires_at_ns == 0)
                };
                let rows = self
                    .rows
                    .iter()
                    .filter(|r| {
                        r.term >= term
                            || (r.lease_id != lease_id
                                && r.expires_at_ns > now
                                && !released(r.lease_id))
                    })
                    .map(|r| claim_row(r.lease_id, r.expires_at_ns))
                    .collect();
                Some(rows_input(rows))
            }
            "lease.release" => {
                let lease_id = uuid_param(stmt, "lease_id");
                let fenced = stmt
                    .sql
                    .contains(&capcat_proto::fragments::lease_fence(&tables));
                if !fenced || self.fence_admits(lease_id, u64_param(stmt, "fence_margin_ns")) {
                    let term = self.rows.iter().map(|r| r.term).max().unwrap_or(0) + 1;
                    self.rows.push(LeaseRow {
                        term,
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
    pub manifest: Vec<(u64, Uuid, String, Uuid)>,
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
        let max = self.watermark.iter().map(|(v, _)| *v).max().unwrap_or(0);
        let barrier_ok = !stmt.sql.contains(&barrier) || max < version;
        let fence_ok = !stmt.sql.contains(&fence)
            || self.lease.fence_admits(
                uuid_param(stmt, "lease_id"),
                u64_param(stmt, "fence_margin_ns"),
            );
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
            "allocate.read_head" => {
                let head = self
                    .claims
                    .iter()
                    .map(|c| c.0)
                    .chain(self.watermark.iter().map(|w| w.0))
                    .max()
                    .unwrap_or(0);
                rows(vec![vec![Value::UInt64(head)]])
            }
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
                    self.claims
                        .iter()
                        .filter(|c| c.0 == v)
                        .map(|c| uuid_row(c.1))
                        .collect(),
                )
            }
            "publish.insert_manifest" => {
                if self.guard_passes(stmt) {
                    let v = u64_param(stmt, "index_version");
                    let p = uuid_param(stmt, "publish_id");
                    for (store, pack) in Self::packs(stmt) {
                        self.manifest.push((v, p, store, pack));
                    }
                }
                ok()
            }
            "publish.insert_watermark" => {
                let complete = capcat_proto::fragments::manifest_complete(&self.tables);
                let (v, p) = (
                    u64_param(stmt, "index_version"),
                    uuid_param(stmt, "publish_id"),
                );
                let members: std::collections::BTreeSet<(&String, &Uuid)> = self
                    .manifest
                    .iter()
                    .filter(|m| m.0 == v && m.1 == p)
                    .map(|m| (&m.2, &m.3))
                    .collect();
                let complete_ok = !stmt.sql.contains(&complete)
                    || u64::try_from(members.len()).ok() == Some(u64_param(stmt, "manifest_packs"));
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
                let ids: std::collections::BTreeSet<Uuid> = self
                    .watermark
                    .iter()
                    .filter(|w| w.0 == v)
                    .map(|w| w.1)
                    .collect();
                rows(ids.into_iter().map(uuid_row).collect())
            }
            "index.read_committed" => {
                let wanted = Self::packs(stmt);
                let found: std::collections::BTreeSet<(String, Uuid)> = self
                    .inventory
                    .iter()
                    .map(|i| (i.0.clone(), i.1))
                    .filter(|p| wanted.contains(p))
                    .collect();
                rows(
                    found
                        .into_iter()
                        .map(|(s, p)| vec![Value::String(s), Value::Uuid(p)])
                        .collect(),
                )
            }
            "index.insert_descriptors" => {
                match stmt.params.get("rows") {
                    Some(capcat_proto::Param::Descriptors(d)) => {
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
    /// rows paired with a watermark row of the same publish.
    pub fn visible_packs(&self) -> std::collections::BTreeSet<(String, Uuid)> {
        self.manifest
            .iter()
            .filter(|m| self.watermark.iter().any(|w| w.0 == m.0 && w.1 == m.1))
            .map(|m| (m.2.clone(), m.3))
            .collect()
    }
}
