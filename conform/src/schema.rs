//! The schema machine in the kit: `ensure_schema`'s start and outcome, and
//! the server's own tables it reads (`system.tables`, `system.columns`,
//! the stamp, the membership counts), simulated from capcat-proto's list of
//! catalog objects so that every verdict can be reached.

use std::collections::{BTreeMap, BTreeSet};

use capcat_proto::schema::{
    CatalogObject, Diagnosis, EnsureOutcome, EnsureSchema, LegacyObject, ObjectKind,
    SCHEMA_VERSION, SchemaError,
};
use capcat_proto::statement::Param;
use capcat_proto::{Input, Machine, Rows, Statement, Step, Tables, Value};
use serde_json::{Value as Json, json};

use crate::start::{Ended, Reference};

/// The server's tables as the schema probes see them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SchemaCatalog {
    /// Objects by name: (engine, sorting key).
    objects: BTreeMap<String, (String, String)>,
    /// Rows each table holds (`system.tables.total_rows`); a table not
    /// named holds none, and a view reports NULL.
    rows: BTreeMap<String, u64>,
    /// Columns by table.
    columns: BTreeMap<String, BTreeSet<String>>,
    /// The stamp table's versions.
    stamps: BTreeSet<u64>,
    /// `count()` of the inventory, and of manifest rows a commit row pairs.
    membership: (u64, u64),
}

/// The engine a freshly created object of `kind` reports.
fn engine(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Table => "MergeTree",
        ObjectKind::View => "View",
        ObjectKind::Feed => "MaterializedView",
    }
}

/// The catalogs the schema machine starts against, by name.
pub const WORLDS: [&str; 13] = [
    "fresh",
    "current",
    "unstamped-empty",
    "install-killed",
    "install-killed-with-rows",
    "unstamped",
    "missing-table",
    "other-version",
    "missing-view",
    "leftover-view",
    "wrong-kind",
    "missing-column",
    "inventory-without-membership",
];

impl SchemaCatalog {
    fn create(&mut self, tables: &Tables, object: CatalogObject) {
        let name = object.name(tables);
        self.objects
            .entry(name.clone())
            .or_insert_with(|| (engine(object.kind()).to_owned(), String::new()));
        self.columns.entry(name).or_insert_with(|| {
            object
                .required_columns()
                .into_iter()
                .map(str::to_owned)
                .collect()
        });
    }

    /// The catalog named `world` (one of [`WORLDS`]).
    pub fn world(tables: &Tables, world: &str) -> Self {
        let mut c = Self::default();
        if world == "fresh" {
            return c;
        }
        if world == "leftover-view" {
            c.create(tables, CatalogObject::CaptureView);
            c.objects.insert(
                LegacyObject::ALL[0].name(tables),
                ("MergeTree".to_owned(), String::new()),
            );
            return c;
        }
        if let Some(at_stake) = world.strip_prefix("install-killed") {
            // The install was killed after the stamp table and the two
            // descriptor tables: the stamp is empty, the rest is missing.
            for object in &CatalogObject::ALL[..3] {
                c.create(tables, *object);
            }
            if at_stake == "-with-rows" {
                c.rows.insert(CatalogObject::CaptureRaw.name(tables), 12);
            }
            return c;
        }
        for object in CatalogObject::ALL {
            c.create(tables, object);
        }
        c.stamps.insert(SCHEMA_VERSION);
        // A catalog in use: every table holds rows, the inventory as many
        // as the membership counts say.
        for object in CatalogObject::ALL {
            if object.kind() == ObjectKind::Table && object != CatalogObject::SchemaVersion {
                c.rows.insert(object.name(tables), 3);
            }
        }
        c.membership = (3, 3);
        match world {
            "unstamped-empty" => {
                c.stamps.clear();
            }
            "unstamped" => {
                c.stamps.clear();
                c.objects.remove(&CatalogObject::SchemaVersion.name(tables));
            }
            "missing-table" => {
                c.objects.remove(&CatalogObject::VersionClaims.name(tables));
            }
            "other-version" => {
                c.stamps = [SCHEMA_VERSION + 1].into_iter().collect();
            }
            "missing-view" => {
                c.objects
                    .remove(&CatalogObject::PackInventoryView.name(tables));
            }
            "wrong-kind" => {
                c.objects.insert(
                    CatalogObject::CaptureRaw.name(tables),
                    ("View".to_owned(), String::new()),
                );
            }
            "missing-column" => {
                if let Some(cols) = c.columns.get_mut(&CatalogObject::CaptureRaw.name(tables)) {
                    cols.remove("tensor_name");
                }
            }
            "inventory-without-membership" => {
                c.membership = (5, 0);
                c.rows
                    .insert(CatalogObject::PackInventoryRaw.name(tables), 5);
            }
            _ => {}
        }
        c
    }

    /// The rows a `schema.*` statement returns, applying its DDL; `None`
    /// for a statement that is not the schema machine's.
    pub fn answer(&mut self, tables: &Tables, stmt: &Statement) -> Option<Rows> {
        let names = || match stmt.params.get("names") {
            Some(Param::Strings(names)) => names.iter().cloned().collect::<BTreeSet<_>>(),
            _ => BTreeSet::new(),
        };
        let text = |s: &str| Value::String(s.to_owned());
        let rows = match stmt.name {
            "schema.check_access" => vec![vec![Value::UInt64(1)]],
            "schema.read_tables" => {
                let names = names();
                self.objects
                    .iter()
                    .filter(|(name, _)| names.contains(*name))
                    .map(|(name, (engine, key))| {
                        let held = if *name == CatalogObject::SchemaVersion.name(tables) {
                            self.stamps.len() as u64
                        } else {
                            self.rows.get(name).copied().unwrap_or(0)
                        };
                        let total_rows = if engine.ends_with("MergeTree") {
                            Value::UInt64(held)
                        } else {
                            Value::Null
                        };
                        vec![text(name), text(engine), text(key), total_rows]
                    })
                    .collect()
            }
            "schema.read_columns" => {
                let names = names();
                self.columns
                    .iter()
                    .filter(|(table, _)| {
                        names.contains(*table) && self.objects.contains_key(*table)
                    })
                    .flat_map(|(table, cols)| cols.iter().map(move |c| vec![text(table), text(c)]))
                    .collect()
            }
            "schema.read_stamp" => self
                .stamps
                .iter()
                .map(|v| vec![Value::UInt64(*v)])
                .collect(),
            "schema.count_membership" => vec![vec![
                Value::UInt64(self.membership.0),
                Value::UInt64(self.membership.1),
            ]],
            "schema.stamp" => {
                // The stamp's condition is read off the statement text, not
                // assumed: a stamp sent without it stamps unconditionally,
                // as the server would.
                let stamp_table = CatalogObject::SchemaVersion.name(tables);
                let guarded = stmt
                    .sql
                    .contains(&format!("WHERE (SELECT count() FROM {stamp_table}) = 0"));
                let version = match stmt.params.get("version") {
                    Some(Param::UInt64(v)) => *v,
                    _ => return None,
                };
                if !guarded || self.stamps.is_empty() {
                    self.stamps.insert(version);
                }
                Vec::new()
            }
            name if name.starts_with("schema.create_") => {
                let object = CatalogObject::ALL
                    .into_iter()
                    .find(|o| o.create(tables).name == name)?;
                self.create(tables, object);
                Vec::new()
            }
            _ => return None,
        };
        Some(Rows(rows))
    }
}

fn diagnosis(d: &Diagnosis) -> &'static str {
    match d {
        Diagnosis::WrongKind { .. } => "wrong_kind",
        Diagnosis::Leftovers { .. } => "leftovers",
        Diagnosis::Unstamped(_) => "unstamped",
        Diagnosis::OtherVersion { .. } => "other_version",
        Diagnosis::MissingTables { .. } => "missing_tables",
        Diagnosis::MissingColumns { .. } => "missing_columns",
        Diagnosis::InventoryWithoutMembership { .. } => "inventory_without_membership",
        Diagnosis::MembershipUncounted => "membership_uncounted",
        _ => "unknown",
    }
}

/// A schema error. A refusal is compared by its diagnosis; its words (what
/// to drop, what to rerun) are the implementation's, in `detail`.
pub fn schema_error(e: &SchemaError) -> Json {
    match e {
        SchemaError::Refused(refusal) => json!({
            "kind": "refused", "diagnosis": diagnosis(&refusal.diagnosis),
            "detail": refusal.to_string(),
        }),
        SchemaError::Statement { statement, failure } => {
            crate::outcome::statement_failed(statement, failure)
        }
        SchemaError::Malformed { statement, message } => {
            crate::outcome::malformed(statement, message)
        }
        other => json!({ "kind": "unknown", "detail": other.to_string() }),
    }
}

fn ensured(outcome: &Result<EnsureOutcome, SchemaError>) -> Json {
    json!({ "outcome": match outcome {
        Ok(EnsureOutcome::Created) => json!({ "ok": "created" }),
        Ok(EnsureOutcome::Completed) => json!({ "ok": "completed" }),
        Ok(EnsureOutcome::Current { recreated_views }) => {
            json!({ "ok": { "current": { "recreated_views": recreated_views } } })
        }
        Err(e) => json!({ "err": schema_error(e) }),
    }})
}

/// capcat-proto's schema machine for `tables`.
pub fn ensure(tables: Tables) -> Box<dyn Reference> {
    Box::new(Ensuring(EnsureSchema::new(tables)))
}

struct Ensuring(EnsureSchema);

impl Reference for Ensuring {
    fn poll(&mut self) -> Step<Json> {
        match self.0.poll() {
            Step::Execute(stmt) => Step::Execute(stmt),
            Step::Draw { below } => Step::Draw { below },
            Step::Done(outcome) => Step::Done(ensured(&outcome)),
        }
    }
    fn handle(&mut self, input: Input) {
        self.0.handle(input);
    }
    fn ended(&mut self) -> Ended {
        Ended::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs capcat-proto's schema machine against `world`, answering from
    /// the simulated catalog, and names its outcome as the kit reports it.
    fn outcome_in(world: &str) -> Json {
        let tables = Tables::new("cc").expect("valid prefix");
        let mut catalog = SchemaCatalog::world(&tables, world);
        let mut machine = EnsureSchema::new(tables.clone());
        for _ in 0..=CatalogObject::ALL.len() + 6 {
            match machine.poll() {
                Step::Execute(stmt) => {
                    let rows = catalog
                        .answer(&tables, &stmt)
                        .expect("every statement is the schema machine's");
                    machine.handle(Input::Rows(rows));
                }
                Step::Done(outcome) => return ensured(&outcome)["outcome"].clone(),
                Step::Draw { .. } => panic!("the schema machine never draws"),
            }
        }
        panic!("{world}: the machine did not finish within its statement bound");
    }

    /// Each world reaches the verdict it is named for; in particular an
    /// install killed part way is finished unless a table holds rows.
    #[test]
    fn every_world_reaches_the_outcome_it_is_named_for() {
        let refused =
            |diagnosis: &str| json!({ "err": { "kind": "refused", "diagnosis": diagnosis } });
        let expected = [
            ("fresh", json!({ "ok": "created" })),
            (
                "current",
                json!({ "ok": { "current": { "recreated_views": [] } } }),
            ),
            ("unstamped-empty", json!({ "ok": "completed" })),
            ("install-killed", json!({ "ok": "completed" })),
            ("install-killed-with-rows", refused("missing_tables")),
            ("unstamped", refused("unstamped")),
            ("missing-table", refused("missing_tables")),
            ("other-version", refused("other_version")),
            (
                "missing-view",
                json!({ "ok": { "current": { "recreated_views": ["cc_pack_inventory"] } } }),
            ),
            ("leftover-view", refused("leftovers")),
            ("wrong-kind", refused("wrong_kind")),
            ("missing-column", refused("missing_columns")),
            (
                "inventory-without-membership",
                refused("inventory_without_membership"),
            ),
        ];
        assert_eq!(expected.len(), WORLDS.len());
        for (world, want) in expected {
            let mut got = outcome_in(world);
            if let Some(err) = got.get_mut("err").and_then(Json::as_object_mut) {
                err.remove("detail");
            }
            assert_eq!(got, want, "{world}");
        }
        // Finishing the killed install leaves a catalog the next run finds current.
        let tables = Tables::new("cc").expect("valid prefix");
        let mut catalog = SchemaCatalog::world(&tables, "install-killed");
        let mut machine = EnsureSchema::new(tables.clone());
        while let Step::Execute(stmt) = machine.poll() {
            let rows = catalog.answer(&tables, &stmt).expect("a schema statement");
            machine.handle(Input::Rows(rows));
        }
        assert_eq!(catalog.stamps, BTreeSet::from([SCHEMA_VERSION]));
        assert_eq!(catalog.objects.len(), CatalogObject::ALL.len());
    }

    /// Every interleaving of `installers` schema machines started at once
    /// on the catalog named `world`, statement by statement (the server
    /// runs each statement atomically; between two of one machine's
    /// statements any of the others may run). Returns the number of
    /// distinct states explored and every outcome reached, and asserts
    /// on the way that each machine ends within its statement bound.
    fn explore_concurrent_installs(
        world: &str,
        installers: usize,
    ) -> (usize, BTreeSet<String>, BTreeSet<SchemaCatalogEnd>) {
        let tables = Tables::new("cc").expect("valid prefix");
        let start = (
            SchemaCatalog::world(&tables, world),
            vec![EnsureSchema::new(tables.clone()); installers],
        );
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![start.clone()];
        seen.insert(start);
        let mut outcomes = BTreeSet::new();
        let mut ends = BTreeSet::new();
        // Bounded: the product of a few machine states and catalogs.
        while let Some((catalog, machines)) = stack.pop() {
            assert!(seen.len() < 1_000_000, "the exploration is unbounded");
            let mut all_done = true;
            for i in 0..machines.len() {
                let mut machine = machines[i].clone();
                match machine.poll() {
                    Step::Execute(stmt) => {
                        all_done = false;
                        let mut catalog = catalog.clone();
                        let rows = catalog
                            .answer(&tables, &stmt)
                            .expect("every statement is the schema machine's");
                        machine.handle(Input::Rows(rows));
                        let mut next = machines.clone();
                        next[i] = machine;
                        // The installers are alike, so a state and its
                        // permutations reach the same outcomes: keep one.
                        next.sort_by_cached_key(fingerprint);
                        let state = (catalog, next);
                        if seen.insert(state.clone()) {
                            stack.push(state);
                        }
                    }
                    Step::Done(outcome) => {
                        let mut named = ensured(&outcome)["outcome"].clone();
                        if let Some(err) = named.get_mut("err").and_then(Json::as_object_mut) {
                            err.retain(|k, _| k != "detail");
                        }
                        outcomes.insert(named.to_string());
                    }
                    Step::Draw { .. } => panic!("the schema machine never draws"),
                }
            }
            if all_done {
                ends.insert(SchemaCatalogEnd {
                    objects: catalog.objects.len(),
                    stamps: catalog.stamps.clone(),
                });
            }
        }
        (seen.len(), outcomes, ends)
    }

    /// A machine's hash, to put alike installers in one order.
    fn fingerprint(machine: &EnsureSchema) -> u64 {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut hasher = DefaultHasher::new();
        machine.hash(&mut hasher);
        hasher.finish()
    }

    /// What a catalog holds once every installer has finished.
    #[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct SchemaCatalogEnd {
        objects: usize,
        stamps: BTreeSet<u64>,
    }

    /// Two (and three) processes that start `ensure_schema` at once on a
    /// fresh catalog, or on one an install left half made, all succeed in
    /// every order the server may run their statements in, and leave a
    /// whole, stamped catalog. A process that lists the other's tables
    /// half made and reads its finished stamp afterwards would see a
    /// stamped catalog with tables missing and refuse it: the stamp is
    /// read before the objects it vouches for.
    #[test]
    fn concurrent_installs_succeed_in_every_interleaving() {
        let whole = BTreeSet::from([SchemaCatalogEnd {
            objects: CatalogObject::ALL.len(),
            stamps: BTreeSet::from([SCHEMA_VERSION]),
        }]);
        let ok =
            |names: &[&str]| -> BTreeSet<String> { names.iter().map(|n| n.to_string()).collect() };
        let current = r#"{"ok":{"current":{"recreated_views":[]}}}"#;
        let mut sizes = Vec::new();
        for (world, installers) in [("fresh", 2), ("install-killed", 2), ("fresh", 3)] {
            let (states, outcomes, ends) = explore_concurrent_installs(world, installers);
            let expected = if world == "fresh" {
                ok(&[r#"{"ok":"created"}"#, r#"{"ok":"completed"}"#, current])
            } else {
                ok(&[r#"{"ok":"completed"}"#, current])
            };
            // Equal, not a subset: every outcome is reached, so the
            // schedules that read another install half made were run.
            assert_eq!(
                outcomes, expected,
                "{world} x{installers}: an installer failed, or a schedule was not run"
            );
            assert_eq!(ends, whole, "{world} x{installers}");
            sizes.push(states);
        }
        // Pinned, so that a change to the probes or the DDL that shrinks
        // the schedules explored is seen.
        assert_eq!(sizes, vec![451, 242, 8968]);
    }
}
