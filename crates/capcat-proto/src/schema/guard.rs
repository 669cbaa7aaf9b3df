//! The schema guard: a pure function from what the server reports to a verdict.
//!
//! The catalog is a projection over immutable packs, so the guard never
//! migrates: it creates a fresh catalog, finishes an install that stopped
//! before its stamp while no row is at stake, accepts (and repairs the
//! views of) a current one, and refuses everything else with a diagnosis
//! read off the server and the instruction that rebuilds it. `CREATE TABLE IF NOT EXISTS`
//! is a no-op against a live table, so without the guard an older catalog
//! would silently keep its old sort key and membership tables, and an
//! upgraded catalog's full inventory beside an empty manifest would make the
//! reconciler skip every pack while no reader can see any of them.

use std::collections::{BTreeMap, BTreeSet};

use crate::descriptor::CAPTURE_SORT_KEY;
use crate::schema::objects::{CatalogObject, LegacyObject, ObjectKind, drop_schema};
use crate::tables::Tables;

/// The schema version this build creates and reads.
///
/// Every build of Capcat stamps its catalog, and this build creates the
/// stamp table before any other object, so a catalog holding objects of
/// ours without a stamp table was not created by this build's
/// `ensure_schema`.
///
/// Version 2 added `{p}_capture_by_id` and its feed: a version-1 catalog
/// has descriptor rows the lookup table never received, so it is refused
/// and rebuilt from the store like any other incompatible catalog.
pub const SCHEMA_VERSION: u64 = 2;

/// One object as `system.tables` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObservedObject {
    /// `system.tables.engine`, e.g. `ReplacingMergeTree` or `View`.
    pub engine: String,
    /// `system.tables.sorting_key`, e.g. `tenant_id, capture_id` (empty for views).
    pub sorting_key: String,
    /// `system.tables.total_rows`: the rows the object holds, exact for a
    /// MergeTree table; `None` for a view, or when the server cannot tell
    /// without reading the data.
    pub total_rows: Option<u64>,
}

/// What `{p}_schema_version` holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StampState {
    /// There is no stamp table.
    Absent,
    /// The stamp table exists and holds no row: an install that stopped
    /// before stamping, or a stamp an operator cleared.
    Empty,
    /// The distinct versions the stamp table holds (normally exactly one).
    Versions(BTreeSet<u64>),
}

/// The two counts behind the inventory-without-membership check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MembershipCounts {
    /// Rows in `{p}_pack_inventory_raw`.
    pub inventory_rows: u64,
    /// Manifest rows paired with a commit row of the same
    /// `(index_version, publish_id)`: membership that actually admits packs.
    pub effective_membership_rows: u64,
}

/// Everything the guard reads from the server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Observed {
    /// Objects under our names (and recognised legacy names), by name.
    pub objects: BTreeMap<String, ObservedObject>,
    /// Column names of those objects, by object name.
    pub columns: BTreeMap<String, BTreeSet<String>>,
    /// The stamp.
    pub stamp: StampState,
    /// The membership counts, when they were read.
    pub membership: Option<MembershipCounts>,
}

/// What the stamp said when a stamped (or stamp-table-bearing) catalog is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StampSeen {
    /// The stamp table exists and is empty.
    Empty,
    /// The stamp names this build's version.
    Current,
}

/// An object standing under one of our names with the wrong kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WrongKind {
    /// What the name should be.
    pub expected: ObjectKind,
    /// The engine that stands there instead.
    pub engine: String,
}

/// An unstamped, non-empty catalog, described by what it actually holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UnstampedCatalog {
    /// The stamp table's name.
    pub stamp_table: String,
    /// Our objects that are present.
    pub present: BTreeSet<String>,
    /// Our objects that are absent.
    pub missing: BTreeSet<String>,
    /// Recognised legacy objects that are present.
    pub legacy_present: BTreeSet<String>,
    /// The descriptor table's name.
    pub descriptor_table: String,
    /// The descriptor sort key this build requires.
    pub sort_key_required: Vec<String>,
    /// The descriptor sort key found, when the descriptor table exists.
    pub sort_key_found: Option<Vec<String>>,
    /// Each membership table (the manifest, and the legacy commit log) and
    /// whether it exists.
    pub membership_tables: BTreeMap<String, bool>,
    /// For the watermark and the manifest: `None` when the table is absent,
    /// otherwise whether it carries a `publish_id` column.
    pub publish_id: BTreeMap<String, Option<bool>>,
}

impl UnstampedCatalog {
    /// Whether the descriptor sort key found is the one required.
    pub fn sort_key_matches(&self) -> bool {
        self.sort_key_found.as_deref() == Some(self.sort_key_required.as_slice())
    }

    /// The differences this catalog does NOT have, as sentences. An
    /// operator who checks a claimed difference and finds it false concludes
    /// the guard is spurious and works around it, so the diagnosis says
    /// plainly which of the known differences are absent.
    pub fn not_wrong(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.sort_key_matches() {
            out.push(format!(
                "the descriptor sort key of `{}` is NOT what is wrong with this catalog",
                self.descriptor_table
            ));
        }
        for (table, present) in &self.membership_tables {
            if *present && !self.legacy_present.contains(table) {
                out.push(format!(
                    "the membership table `{table}` exists, so a missing manifest is NOT what is wrong"
                ));
            }
        }
        if !self.publish_id.is_empty() && self.publish_id.values().all(|p| *p == Some(true)) {
            out.push(
                "both the watermark and the manifest carry `publish_id`, so membership pairing \
                 is NOT what is wrong"
                    .to_owned(),
            );
        }
        if self.missing.is_empty() {
            out.push("no object of this build is missing".to_owned());
        }
        out
    }
}

/// Why the guard refuses a catalog.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Diagnosis {
    /// Objects stand under our names with the wrong kind (a table where a
    /// view belongs, a view or materialized view where a table belongs).
    WrongKind {
        /// The offending objects, by name.
        objects: BTreeMap<String, WrongKind>,
    },
    /// No table of ours stands, only views and objects of an earlier design
    /// (a drop that missed them). Nothing survives to rebuild from.
    Leftovers {
        /// The leftover objects.
        objects: BTreeSet<String>,
    },
    /// A non-empty catalog without a stamp table.
    Unstamped(Box<UnstampedCatalog>),
    /// The stamp names versions this build does not read.
    OtherVersion {
        /// The versions found.
        found: BTreeSet<u64>,
        /// The version this build reads.
        required: u64,
    },
    /// A catalog with a stamp table is missing tables, where rows are at
    /// stake: the stamp names this build's version, or a table of ours
    /// holds rows (or does not say how many it holds).
    MissingTables {
        /// What the stamp said.
        stamp: StampSeen,
        /// The absent tables.
        missing: BTreeSet<String>,
        /// The present tables that hold rows, or do not say (`None`), by
        /// name. Empty when the stamp alone decided.
        holding: BTreeMap<String, Option<u64>>,
    },
    /// Tables lack columns this build writes or reads.
    MissingColumns {
        /// What the stamp said.
        stamp: StampSeen,
        /// The absent columns, by table.
        missing: BTreeMap<String, BTreeSet<String>>,
    },
    /// The inventory says packs were indexed, but no manifest row pairs
    /// with a commit row: the next pass would skip every pack as already
    /// committed and none would ever become visible.
    InventoryWithoutMembership {
        /// The inventory table.
        inventory: String,
        /// The manifest table.
        manifest: String,
        /// The watermark table.
        watermark: String,
        /// The counts read.
        counts: MembershipCounts,
    },
    /// The membership counts were not read, so the catalog cannot be
    /// accepted (the guard fails closed).
    MembershipUncounted,
}

/// What the operator must do about a refusal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Instruction {
    /// Drop every catalog object, recreate, and re-index every pack.
    Rebuild {
        /// The drop statements, views first, from the same object table
        /// the DDL is generated from (plus any legacy object present).
        drops: Vec<String>,
        /// The inventory table, named because it must go with the rest.
        inventory: String,
    },
    /// Drop only these objects and run `ensure_schema` again; there is
    /// nothing to rebuild.
    DropAndRerun {
        /// The drop statements.
        drops: Vec<String>,
    },
    /// Run `ensure_schema` again.
    Rerun,
}

/// A refusal: what was found and what to do.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Refusal {
    /// The prefix of the refused catalog.
    pub prefix: String,
    /// What is wrong.
    pub diagnosis: Diagnosis,
    /// What to do.
    pub instruction: Instruction,
}

/// The guard's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Nothing of ours exists: create everything, then stamp.
    Fresh,
    /// An install that stopped before stamping: the stamp table is empty,
    /// and either the catalog is otherwise whole or no table of ours holds
    /// a row (an install killed part way, before any writer was let in).
    /// Rerun the idempotent DDL, then stamp.
    Incomplete {
        /// Tables and feeds to create; the full DDL runs anyway.
        missing_tables: BTreeSet<String>,
        /// Views to (re)create; the full DDL runs anyway.
        missing_views: BTreeSet<String>,
    },
    /// A current catalog. Missing views are recreated: they hold no rows
    /// and a recreated projection cannot disagree with the surviving tables.
    Current {
        /// Views to recreate.
        missing_views: BTreeSet<String>,
    },
    /// Refused, with the diagnosis and the instruction.
    Refuse(Box<Refusal>),
}

/// The descriptor sort key as a list, from `system.tables.sorting_key`.
pub fn parse_sort_key(sorting_key: &str) -> Vec<String> {
    sorting_key
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn rebuild(tables: &Tables, observed: &Observed) -> Instruction {
    let mut drops: Vec<String> = drop_schema(tables).into_iter().map(|s| s.sql).collect();
    for legacy in LegacyObject::ALL {
        let name = legacy.name(tables);
        if observed.objects.contains_key(&name) {
            drops.push(format!("DROP TABLE IF EXISTS {name}"));
        }
    }
    Instruction::Rebuild {
        drops,
        inventory: tables.pack_inventory_raw(),
    }
}

fn refuse(tables: &Tables, diagnosis: Diagnosis, instruction: Instruction) -> Verdict {
    Verdict::Refuse(Box::new(Refusal {
        prefix: tables.prefix().to_owned(),
        diagnosis,
        instruction,
    }))
}

/// Judges a catalog from what the server reported.
///
/// Order matters and each step says why: an object of the wrong kind would
/// make the DDL fail half way, so it is named first; a catalog holding only
/// leftovers of an earlier design has nothing to rebuild from; the stamp
/// decides whether the rest of the catalog is ours; and even an empty stamp
/// runs the missing-table, column and membership checks, because clearing
/// the stamp is the obvious workaround for a refused operator. Under an
/// empty stamp a missing table is refused only where rows are at stake: a
/// part-made catalog whose tables hold no row is an install killed part
/// way (or still running in another process), and is finished.
pub fn judge(tables: &Tables, observed: &Observed) -> Verdict {
    if observed.objects.is_empty() {
        return Verdict::Fresh;
    }

    let ours: Vec<(CatalogObject, String)> = CatalogObject::ALL
        .iter()
        .map(|o| (*o, o.name(tables)))
        .collect();

    let mut wrong = BTreeMap::new();
    for (object, name) in &ours {
        if let Some(found) = observed.objects.get(name)
            && !object.kind().matches_engine(&found.engine)
        {
            wrong.insert(
                name.clone(),
                WrongKind {
                    expected: object.kind(),
                    engine: found.engine.clone(),
                },
            );
        }
    }
    if !wrong.is_empty() {
        let drops = wrong
            .iter()
            .map(|(name, w)| {
                let keyword = if w.engine == "View" || w.engine == "MaterializedView" {
                    "VIEW"
                } else {
                    "TABLE"
                };
                format!("DROP {keyword} IF EXISTS {name}")
            })
            .collect();
        return refuse(
            tables,
            Diagnosis::WrongKind { objects: wrong },
            Instruction::DropAndRerun { drops },
        );
    }

    let present: BTreeSet<String> = ours
        .iter()
        .filter(|(_, name)| observed.objects.contains_key(name))
        .map(|(_, name)| name.clone())
        .collect();
    let legacy_present: BTreeSet<String> = LegacyObject::ALL
        .iter()
        .map(|o| o.name(tables))
        .filter(|name| observed.objects.contains_key(name))
        .collect();
    // Without a single table of ours there are no catalog rows: whatever
    // stands (views, an earlier design's leftovers) is dropped and the
    // install rerun. Prescribing the full rebuild here would send an
    // operator to re-index every pack over tables that do not exist.
    let tables_present = ours
        .iter()
        .any(|(o, name)| o.kind() == ObjectKind::Table && present.contains(name));
    if !tables_present {
        let mut drops: Vec<String> = ours
            .iter()
            .filter(|(_, name)| present.contains(name))
            .map(|(o, name)| format!("DROP {} IF EXISTS {name}", o.kind().keyword()))
            .collect();
        drops.extend(
            legacy_present
                .iter()
                .map(|name| format!("DROP TABLE IF EXISTS {name}")),
        );
        let objects = present.union(&legacy_present).cloned().collect();
        return refuse(
            tables,
            Diagnosis::Leftovers { objects },
            Instruction::DropAndRerun { drops },
        );
    }

    let stamp = match &observed.stamp {
        StampState::Absent => {
            let unstamped = describe_unstamped(tables, observed, present, legacy_present);
            return refuse(
                tables,
                Diagnosis::Unstamped(Box::new(unstamped)),
                rebuild(tables, observed),
            );
        }
        StampState::Empty => StampSeen::Empty,
        StampState::Versions(found) => {
            if found.len() == 1 && found.contains(&SCHEMA_VERSION) {
                StampSeen::Current
            } else {
                return refuse(
                    tables,
                    Diagnosis::OtherVersion {
                        found: found.clone(),
                        required: SCHEMA_VERSION,
                    },
                    rebuild(tables, observed),
                );
            }
        }
    };

    let missing_tables: BTreeSet<String> = ours
        .iter()
        .filter(|(o, name)| o.kind().required_once_stamped() && !present.contains(name))
        .map(|(_, name)| name.clone())
        .collect();
    if !missing_tables.is_empty() {
        // A stamped catalog that lost a table is refused outright. An empty
        // stamp over missing tables is an install that stopped part way
        // (this build creates the stamp table first and writes the stamp
        // row last), or a stamp an operator cleared. Which of the two does
        // not matter; whether rows are at stake does. With no row in any
        // table under our names, no writer was ever let in, so creating the
        // missing objects cannot leave a table without rows it should hold
        // (a lookup table behind its feed, an inventory without its
        // manifest). A table that does not say how many rows it holds
        // counts as holding some: the guard fails closed.
        let holding = match stamp {
            StampSeen::Current => BTreeMap::new(),
            StampSeen::Empty => holding_rows(tables, observed),
        };
        if stamp == StampSeen::Current || !holding.is_empty() {
            return refuse(
                tables,
                Diagnosis::MissingTables {
                    stamp,
                    missing: missing_tables,
                    holding,
                },
                rebuild(tables, observed),
            );
        }
    }

    // Absent objects are not judged here: a missing table was refused
    // above unless nothing is at stake, and views require no columns.
    let mut missing_columns = BTreeMap::new();
    for (object, name) in ours.iter().filter(|(_, name)| present.contains(name)) {
        let have = observed.columns.get(name);
        let lacking: BTreeSet<String> = object
            .required_columns()
            .into_iter()
            .filter(|c| !have.is_some_and(|h| h.contains(*c)))
            .map(str::to_owned)
            .collect();
        if !lacking.is_empty() {
            missing_columns.insert(name.clone(), lacking);
        }
    }
    if !missing_columns.is_empty() {
        return refuse(
            tables,
            Diagnosis::MissingColumns {
                stamp,
                missing: missing_columns,
            },
            rebuild(tables, observed),
        );
    }

    match observed.membership {
        // Tables are missing and none holds a row: there is no membership
        // to count, and the inventory is empty.
        _ if !missing_tables.is_empty() => {}
        None => {
            return refuse(tables, Diagnosis::MembershipUncounted, Instruction::Rerun);
        }
        Some(counts) if counts.inventory_rows > 0 && counts.effective_membership_rows == 0 => {
            return refuse(
                tables,
                Diagnosis::InventoryWithoutMembership {
                    inventory: tables.pack_inventory_raw(),
                    manifest: tables.snapshot_manifest(),
                    watermark: tables.index_watermark(),
                    counts,
                },
                rebuild(tables, observed),
            );
        }
        Some(_) => {}
    }

    let missing_views: BTreeSet<String> = ours
        .iter()
        .filter(|(o, name)| o.kind() == ObjectKind::View && !present.contains(name))
        .map(|(_, name)| name.clone())
        .collect();
    match stamp {
        StampSeen::Empty => Verdict::Incomplete {
            missing_tables,
            missing_views,
        },
        StampSeen::Current => Verdict::Current { missing_views },
    }
}

/// The tables under our names (this build's and the recognised legacy
/// ones) that hold rows, or do not say how many they hold.
fn holding_rows(tables: &Tables, observed: &Observed) -> BTreeMap<String, Option<u64>> {
    let tables_of_ours = CatalogObject::ALL
        .iter()
        .filter(|o| o.kind() == ObjectKind::Table)
        .map(|o| o.name(tables));
    let legacy = LegacyObject::ALL.iter().map(|o| o.name(tables));
    tables_of_ours
        .chain(legacy)
        .filter_map(|name| {
            let found = observed.objects.get(&name)?;
            (found.total_rows != Some(0)).then_some((name, found.total_rows))
        })
        .collect()
}

fn describe_unstamped(
    tables: &Tables,
    observed: &Observed,
    present: BTreeSet<String>,
    legacy_present: BTreeSet<String>,
) -> UnstampedCatalog {
    let missing = CatalogObject::ALL
        .iter()
        .map(|o| o.name(tables))
        .filter(|name| !present.contains(name))
        .collect();
    let descriptor_table = tables.capture_raw();
    let sort_key_found = observed
        .objects
        .get(&descriptor_table)
        .map(|o| parse_sort_key(&o.sorting_key));
    let mut membership_tables = BTreeMap::new();
    let manifest = tables.snapshot_manifest();
    membership_tables.insert(manifest.clone(), present.contains(&manifest));
    for legacy in LegacyObject::ALL {
        let name = legacy.name(tables);
        let here = legacy_present.contains(&name);
        membership_tables.insert(name, here);
    }
    let mut publish_id = BTreeMap::new();
    for name in [tables.index_watermark(), manifest] {
        let state = observed.objects.get(&name).map(|_| {
            observed
                .columns
                .get(&name)
                .is_some_and(|c| c.contains("publish_id"))
        });
        publish_id.insert(name, state);
    }
    UnstampedCatalog {
        stamp_table: tables.schema_version(),
        present,
        missing,
        legacy_present,
        descriptor_table,
        sort_key_required: CAPTURE_SORT_KEY.iter().map(|s| (*s).to_owned()).collect(),
        sort_key_found,
        membership_tables,
        publish_id,
    }
}
