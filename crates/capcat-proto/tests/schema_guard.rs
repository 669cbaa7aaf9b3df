//! The schema guard's verdicts, one named test per case, fed with the rows
//! `system.tables` and `system.columns` actually return.

use std::collections::{BTreeMap, BTreeSet};

use capcat_proto::schema::{
    CatalogObject, Diagnosis, EnsureOutcome, EnsureSchema, Instruction, MembershipCounts,
    ObjectKind, Observed, SCHEMA_VERSION, SchemaError, StampSeen, StampState, Verdict, drop_schema,
    judge, parse_columns, parse_tables,
};
use capcat_proto::{Failure, Input, Machine, Rows, Step, Tables, Value};

fn tables() -> Tables {
    Tables::new("cc").expect("valid prefix")
}

fn s(text: &str) -> Value {
    Value::String(text.to_owned())
}

const SORT_KEY: &str =
    "tenant_id, experiment_id, run_id, captured_at_ns, capture_id, store_id, pack_id";
const BY_ID_SORT_KEY: &str =
    "tenant_id, capture_id, experiment_id, run_id, captured_at_ns, store_id, pack_id";
const OLD_SORT_KEY: &str = "tenant_id, experiment_id, run_id, captured_at_ns, capture_id";

/// What `system.tables` reports for a catalog this build created.
fn current_table_rows(t: &Tables) -> Vec<(String, String, String)> {
    CatalogObject::ALL
        .iter()
        .map(|o| {
            let (engine, key) = match o {
                CatalogObject::CaptureRaw => ("ReplacingMergeTree", SORT_KEY),
                CatalogObject::CaptureById => ("ReplacingMergeTree", BY_ID_SORT_KEY),
                CatalogObject::CaptureByIdFeed => ("MaterializedView", ""),
                CatalogObject::PackInventoryRaw => ("ReplacingMergeTree", "store_id, pack_id"),
                CatalogObject::IndexWatermark => ("MergeTree", "index_version, publish_id"),
                CatalogObject::SnapshotManifest => {
                    ("MergeTree", "index_version, publish_id, store_id, pack_id")
                }
                CatalogObject::VersionClaims => ("MergeTree", "index_version, claim_id"),
                CatalogObject::PublisherLease => ("MergeTree", "term, lease_id"),
                CatalogObject::DemandEvents => ("MergeTree", "shard_id, appended_at_ns, event_id"),
                CatalogObject::SchemaVersion => ("MergeTree", ""),
                CatalogObject::CaptureView | CatalogObject::PackInventoryView => ("View", ""),
            };
            (o.name(t), engine.to_owned(), key.to_owned())
        })
        .collect()
}

/// What `system.columns` reports for a catalog this build created.
fn current_column_rows(t: &Tables) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for o in CatalogObject::ALL {
        for c in o.required_columns() {
            out.push((o.name(t), c.to_owned()));
        }
    }
    out
}

/// The rows of `schema.read_tables`. `total_rows` is NULL for a view and,
/// for a table, the rows a catalog in use holds: three, like the healthy
/// membership counts below ([`emptied`] makes every table empty).
fn table_rows(rows: &[(String, String, String)]) -> Rows {
    Rows(
        rows.iter()
            .map(|(n, e, k)| {
                let total_rows = if e.ends_with("MergeTree") {
                    Value::UInt64(3)
                } else {
                    Value::Null
                };
                vec![s(n), s(e), s(k), total_rows]
            })
            .collect(),
    )
}

/// `observed` with every table holding no row: a catalog no writer has
/// written to.
fn emptied(mut observed: Observed) -> Observed {
    for object in observed.objects.values_mut() {
        if object.total_rows.is_some() {
            object.total_rows = Some(0);
        }
    }
    observed
}

fn column_rows(rows: &[(String, String)]) -> Rows {
    Rows(rows.iter().map(|(t, c)| vec![s(t), s(c)]).collect())
}

fn observed(
    tables: &[(String, String, String)],
    columns: &[(String, String)],
    stamp: StampState,
    membership: Option<MembershipCounts>,
) -> Observed {
    Observed {
        objects: parse_tables(&table_rows(tables)).expect("well-formed rows"),
        columns: parse_columns(&column_rows(columns)).expect("well-formed rows"),
        stamp,
        membership,
    }
}

fn stamped() -> StampState {
    StampState::Versions(BTreeSet::from([SCHEMA_VERSION]))
}

fn healthy_counts() -> Option<MembershipCounts> {
    Some(MembershipCounts {
        inventory_rows: 3,
        effective_membership_rows: 3,
    })
}

fn refusal(verdict: Verdict) -> capcat_proto::schema::Refusal {
    match verdict {
        Verdict::Refuse(r) => *r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn without(rows: &[(String, String, String)], name: &str) -> Vec<(String, String, String)> {
    rows.iter().filter(|r| r.0 != name).cloned().collect()
}

/// The "older DDL" catalog: ordered by capture identity alone, membership
/// through the commit log, a watermark and a manifest without
/// `publish_id`, no lease, no stamp.
fn older_ddl_catalog(t: &Tables) -> Observed {
    let tables = vec![
        (
            t.capture_raw(),
            "ReplacingMergeTree".to_owned(),
            OLD_SORT_KEY.to_owned(),
        ),
        (
            t.pack_inventory_raw(),
            "ReplacingMergeTree".to_owned(),
            "store_id, pack_id".to_owned(),
        ),
        (
            t.index_watermark(),
            "MergeTree".to_owned(),
            "index_version".to_owned(),
        ),
        (
            t.snapshot_manifest(),
            "MergeTree".to_owned(),
            "index_version, store_id, pack_id".to_owned(),
        ),
        (
            "cc_pack_commit_log".to_owned(),
            "MergeTree".to_owned(),
            "index_version".to_owned(),
        ),
        (t.capture_view(), "View".to_owned(), String::new()),
        (t.pack_inventory_view(), "View".to_owned(), String::new()),
    ];
    let mut columns = Vec::new();
    for c in ["index_version", "published_at_ns"] {
        columns.push((t.index_watermark(), c.to_owned()));
    }
    for c in ["index_version", "store_id", "pack_id"] {
        columns.push((t.snapshot_manifest(), c.to_owned()));
    }
    observed(&tables, &columns, StampState::Absent, None)
}

#[test]
fn schema_an_empty_server_is_fresh() {
    let verdict = judge(&tables(), &observed(&[], &[], StampState::Absent, None));
    assert_eq!(verdict, Verdict::Fresh);
}

#[test]
fn schema_a_stamped_whole_catalog_is_current() {
    let t = tables();
    let o = observed(
        &current_table_rows(&t),
        &current_column_rows(&t),
        stamped(),
        healthy_counts(),
    );
    assert_eq!(
        judge(&t, &o),
        Verdict::Current {
            missing_views: BTreeSet::new()
        }
    );
}

#[test]
fn schema_a_current_catalog_missing_views_has_them_recreated_not_refused() {
    let t = tables();
    let rows = without(
        &without(&current_table_rows(&t), &t.capture_view()),
        &t.pack_inventory_view(),
    );
    let o = observed(&rows, &current_column_rows(&t), stamped(), healthy_counts());
    assert_eq!(
        judge(&t, &o),
        Verdict::Current {
            missing_views: BTreeSet::from([t.capture_view(), t.pack_inventory_view()])
        }
    );
}

#[test]
fn schema_an_older_ddl_catalog_is_described_by_what_it_holds() {
    let t = tables();
    let r = refusal(judge(&t, &older_ddl_catalog(&t)));
    let Diagnosis::Unstamped(found) = &r.diagnosis else {
        panic!("expected an unstamped diagnosis, got {:?}", r.diagnosis);
    };
    assert_eq!(
        found.sort_key_found.as_ref().map(|k| k.join(", ")),
        Some(OLD_SORT_KEY.to_owned())
    );
    assert_eq!(found.sort_key_required.join(", "), SORT_KEY);
    assert!(!found.sort_key_matches());
    assert_eq!(
        found.membership_tables,
        BTreeMap::from([
            ("cc_pack_commit_log".to_owned(), true),
            (t.snapshot_manifest(), true),
        ])
    );
    assert_eq!(
        found.publish_id,
        BTreeMap::from([
            (t.index_watermark(), Some(false)),
            (t.snapshot_manifest(), Some(false))
        ])
    );
    assert_eq!(
        found.missing,
        BTreeSet::from([
            t.capture_by_id(),
            t.capture_by_id_feed(),
            t.version_claims(),
            t.publisher_lease(),
            t.demand_events(),
            t.schema_version()
        ])
    );
    // What is NOT wrong: the manifest exists. The sort key and publish_id
    // ARE wrong, so no sentence may say otherwise.
    assert_eq!(
        found.not_wrong(),
        vec![
            "the membership table `cc_snapshot_manifest` exists, so a missing manifest is NOT \
             what is wrong"
                .to_owned()
        ]
    );
    let message = r.to_string();
    for needle in [
        "is (tenant_id, experiment_id, run_id, captured_at_ns, capture_id) but this build requires \
         (tenant_id, experiment_id, run_id, captured_at_ns, capture_id, store_id, pack_id)",
        "`cc_pack_commit_log` present",
        "`cc_snapshot_manifest` present",
        "`cc_index_watermark` lacks it",
        "`cc_snapshot_manifest` lacks it",
        "absent: `cc_capture_by_id`, `cc_capture_by_id_feed`, `cc_demand_events`, \
         `cc_publisher_lease`, `cc_schema_version`, `cc_version_claims`",
        "What is NOT wrong: the membership table `cc_snapshot_manifest` exists",
        "DROP TABLE IF EXISTS cc_pack_commit_log",
        "`cc_pack_inventory_raw` included",
    ] {
        assert!(
            message.contains(needle),
            "missing {needle:?} in:\n{message}"
        );
    }
    assert!(
        !message.contains("NOT what is wrong with this catalog"),
        "{message}"
    );
}

#[test]
fn schema_an_unstamped_catalog_with_the_right_sort_key_says_the_sort_key_is_not_wrong() {
    // The seed's immediate predecessor: pack identity already in the key,
    // the manifest already there, only publish_id and the stamp missing.
    let t = tables();
    let rows = without(
        &without(&current_table_rows(&t), &t.schema_version()),
        &t.publisher_lease(),
    );
    let columns: Vec<(String, String)> = current_column_rows(&t)
        .into_iter()
        .filter(|(_, c)| c != "publish_id")
        .collect();
    let r = refusal(judge(
        &t,
        &observed(&rows, &columns, StampState::Absent, None),
    ));
    let message = r.to_string();
    assert!(
        message.contains(
            "What is NOT wrong: the descriptor sort key of `cc_capture_raw` is NOT what is wrong \
             with this catalog; the membership table `cc_snapshot_manifest` exists"
        ),
        "{message}"
    );
    assert!(!message.contains("but this build requires"), "{message}");
    assert!(
        message.contains("`cc_index_watermark` lacks it"),
        "{message}"
    );
}

#[test]
fn schema_a_single_absent_object_is_named_as_absent() {
    // The seed rendered the singular case as "`X`, which is present".
    let t = tables();
    let rows = without(&current_table_rows(&t), &t.schema_version());
    let r = refusal(judge(
        &t,
        &observed(&rows, &current_column_rows(&t), StampState::Absent, None),
    ));
    let message = r.to_string();
    assert!(
        message.contains("; absent: `cc_schema_version`."),
        "{message}"
    );
    assert!(!message.contains("which is present"), "{message}");
}

#[test]
fn schema_a_leftover_legacy_table_alone_is_dropped_not_rebuilt() {
    let t = tables();
    let rows = vec![(
        "cc_pack_commit_log".to_owned(),
        "MergeTree".to_owned(),
        "index_version".to_owned(),
    )];
    let r = refusal(judge(&t, &observed(&rows, &[], StampState::Absent, None)));
    assert_eq!(
        r.diagnosis,
        Diagnosis::Leftovers {
            objects: BTreeSet::from(["cc_pack_commit_log".to_owned()])
        }
    );
    assert_eq!(
        r.instruction,
        Instruction::DropAndRerun {
            drops: vec!["DROP TABLE IF EXISTS cc_pack_commit_log".to_owned()]
        }
    );
    assert!(!r.to_string().contains("To rebuild"), "{r}");
}

#[test]
fn schema_an_object_of_the_wrong_kind_is_named() {
    let t = tables();
    let mut rows = current_table_rows(&t);
    for row in &mut rows {
        if row.0 == t.capture_view() {
            row.1 = "MergeTree".to_owned();
        }
        if row.0 == t.publisher_lease() {
            row.1 = "View".to_owned();
        }
    }
    let r = refusal(judge(
        &t,
        &observed(&rows, &current_column_rows(&t), stamped(), healthy_counts()),
    ));
    let Diagnosis::WrongKind { objects } = &r.diagnosis else {
        panic!("expected WrongKind, got {:?}", r.diagnosis);
    };
    assert_eq!(objects[&t.capture_view()].expected, ObjectKind::View);
    assert_eq!(objects[&t.publisher_lease()].expected, ObjectKind::Table);
    let message = r.to_string();
    assert!(
        message.contains("`cc_capture` should be a view but is a MergeTree"),
        "{message}"
    );
    assert!(
        message.contains("`cc_publisher_lease` should be a table but is a View"),
        "{message}"
    );
    assert!(
        message.contains("DROP VIEW IF EXISTS cc_publisher_lease"),
        "{message}"
    );
}

#[test]
fn schema_a_stamp_of_another_version_is_refused_with_the_rebuild_instruction() {
    let t = tables();
    let o = observed(
        &current_table_rows(&t),
        &current_column_rows(&t),
        StampState::Versions(BTreeSet::from([SCHEMA_VERSION + 1])),
        healthy_counts(),
    );
    let r = refusal(judge(&t, &o));
    assert_eq!(
        r.diagnosis,
        Diagnosis::OtherVersion {
            found: BTreeSet::from([SCHEMA_VERSION + 1]),
            required: SCHEMA_VERSION
        }
    );
    assert!(r.to_string().contains("To rebuild"), "{r}");
}

#[test]
fn schema_a_stamped_catalog_missing_a_table_is_refused() {
    let t = tables();
    let rows = without(&current_table_rows(&t), &t.publisher_lease());
    let r = refusal(judge(
        &t,
        &observed(&rows, &current_column_rows(&t), stamped(), healthy_counts()),
    ));
    assert_eq!(
        r.diagnosis,
        Diagnosis::MissingTables {
            stamp: StampSeen::Current,
            missing: BTreeSet::from([t.publisher_lease()]),
            holding: BTreeMap::new(),
        }
    );
}

/// A stamp names a catalog writers were let into: a table missing from it is
/// refused even when every table left is empty, since rows written and
/// then dropped with the table are beyond what the guard can see.
#[test]
fn schema_a_stamped_catalog_missing_a_table_is_refused_even_when_empty() {
    let t = tables();
    let rows = without(&current_table_rows(&t), &t.snapshot_manifest());
    let r = refusal(judge(
        &t,
        &emptied(observed(
            &rows,
            &current_column_rows(&t),
            stamped(),
            healthy_counts(),
        )),
    ));
    assert_eq!(
        r.diagnosis,
        Diagnosis::MissingTables {
            stamp: StampSeen::Current,
            missing: BTreeSet::from([t.snapshot_manifest()]),
            holding: BTreeMap::new(),
        }
    );
}

/// A version-1 catalog (before the lookup table and its feed) is refused as
/// another version: its descriptor rows never reached a lookup table, so
/// creating one now would hide every capture from `get_by_ids`.
#[test]
fn schema_a_version_one_catalog_without_the_lookup_table_is_refused_with_the_rebuild() {
    let t = tables();
    let rows = without(
        &without(&current_table_rows(&t), &t.capture_by_id()),
        &t.capture_by_id_feed(),
    );
    let columns: Vec<(String, String)> = current_column_rows(&t)
        .into_iter()
        .filter(|(table, _)| *table != t.capture_by_id())
        .collect();
    let r = refusal(judge(
        &t,
        &observed(
            &rows,
            &columns,
            StampState::Versions(BTreeSet::from([1])),
            healthy_counts(),
        ),
    ));
    assert_eq!(SCHEMA_VERSION, 2);
    assert_eq!(
        r.diagnosis,
        Diagnosis::OtherVersion {
            found: BTreeSet::from([1]),
            required: SCHEMA_VERSION
        }
    );
    assert!(r.to_string().contains("reconcile every pack"), "{r}");
}

/// The feed holds no rows, yet a stamped catalog without it is refused like
/// one missing a table: its lookup table stopped receiving rows, and
/// recreating the feed would not bring back the ones it missed.
#[test]
fn schema_a_stamped_catalog_missing_its_feed_is_refused() {
    let t = tables();
    let rows = without(&current_table_rows(&t), &t.capture_by_id_feed());
    let r = refusal(judge(
        &t,
        &observed(&rows, &current_column_rows(&t), stamped(), healthy_counts()),
    ));
    assert_eq!(
        r.diagnosis,
        Diagnosis::MissingTables {
            stamp: StampSeen::Current,
            missing: BTreeSet::from([t.capture_by_id_feed()]),
            holding: BTreeMap::new(),
        }
    );
}

/// A plain view where the feed should stand is of the wrong kind: it would
/// copy nothing.
#[test]
fn schema_a_plain_view_under_the_feeds_name_is_the_wrong_kind() {
    let t = tables();
    let mut rows = without(&current_table_rows(&t), &t.capture_by_id_feed());
    rows.push((t.capture_by_id_feed(), "View".to_owned(), String::new()));
    let r = refusal(judge(
        &t,
        &observed(&rows, &current_column_rows(&t), stamped(), healthy_counts()),
    ));
    match r.diagnosis {
        Diagnosis::WrongKind { objects } => {
            assert_eq!(objects[&t.capture_by_id_feed()].expected, ObjectKind::Feed);
        }
        other => panic!("expected the wrong kind, got {other:?}"),
    }
}

#[test]
fn schema_an_empty_stamp_still_runs_the_missing_table_check() {
    // Clearing the stamp is the obvious workaround for a refused operator;
    // the seed accepted it and created the missing table beside old rows.
    let t = tables();
    let rows = without(&current_table_rows(&t), &t.publisher_lease());
    let r = refusal(judge(
        &t,
        &observed(
            &rows,
            &current_column_rows(&t),
            StampState::Empty,
            healthy_counts(),
        ),
    ));
    let Diagnosis::MissingTables {
        stamp,
        missing,
        holding,
    } = &r.diagnosis
    else {
        panic!("expected missing tables, got {:?}", r.diagnosis);
    };
    assert_eq!(*stamp, StampSeen::Empty);
    assert_eq!(missing, &BTreeSet::from([t.publisher_lease()]));
    assert_eq!(holding.get(&t.capture_raw()), Some(&Some(3)));
    let message = r.to_string();
    assert!(message.contains("holds no row"), "{message}");
    assert!(!message.contains("it is stamped"), "{message}");
    assert!(
        message.contains("`cc_capture_raw` holds 3 rows"),
        "{message}"
    );
}

/// An install killed part way: the stamp table (created first) is empty,
/// some tables stand, none holds a row. Nothing is at stake, so the guard
/// finishes the install instead of sending the operator to drop it.
#[test]
fn schema_an_install_killed_part_way_is_finished_at_every_point() {
    let t = tables();
    let all = current_table_rows(&t);
    let columns = current_column_rows(&t);
    assert_eq!(CatalogObject::ALL[0], CatalogObject::SchemaVersion);
    // `created` objects stand: from the stamp table alone to every object.
    for created in 1..=CatalogObject::ALL.len() {
        let standing: Vec<_> = all[..created].to_vec();
        let mut o = emptied(observed(&standing, &columns, StampState::Empty, None));
        let mut verdict = judge(&t, &o);
        if let Verdict::Refuse(r) = &verdict {
            // With every table and the feed standing, the membership is
            // counted first, as over any whole catalog.
            assert_eq!(r.diagnosis, Diagnosis::MembershipUncounted);
            assert!(
                CatalogObject::ALL[created..]
                    .iter()
                    .all(|o| o.kind() == ObjectKind::View)
            );
            o.membership = Some(MembershipCounts {
                inventory_rows: 0,
                effective_membership_rows: 0,
            });
            verdict = judge(&t, &o);
        }
        let Verdict::Incomplete {
            missing_tables,
            missing_views,
        } = &verdict
        else {
            panic!("{created} objects standing: {verdict:?}");
        };
        let absent = |kinds: &[ObjectKind]| -> BTreeSet<String> {
            CatalogObject::ALL[created..]
                .iter()
                .filter(|o| kinds.contains(&o.kind()))
                .map(|o| o.name(&t))
                .collect()
        };
        assert_eq!(
            missing_tables,
            &absent(&[ObjectKind::Table, ObjectKind::Feed])
        );
        assert_eq!(missing_views, &absent(&[ObjectKind::View]));
    }
}

/// The same empty stamp over the same missing table is refused as soon as
/// one table left holds a row, or does not say how many it holds.
#[test]
fn schema_an_empty_stamp_over_missing_tables_is_refused_when_one_row_is_at_stake() {
    let t = tables();
    let rows = without(&current_table_rows(&t), &t.snapshot_manifest());
    for total_rows in [Some(1), None] {
        let mut o = emptied(observed(
            &rows,
            &current_column_rows(&t),
            StampState::Empty,
            None,
        ));
        if let Some(inventory) = o.objects.get_mut(&t.pack_inventory_raw()) {
            inventory.total_rows = total_rows;
        }
        let r = refusal(judge(&t, &o));
        assert_eq!(
            r.diagnosis,
            Diagnosis::MissingTables {
                stamp: StampSeen::Empty,
                missing: BTreeSet::from([t.snapshot_manifest()]),
                holding: BTreeMap::from([(t.pack_inventory_raw(), total_rows)]),
            }
        );
        assert!(matches!(r.instruction, Instruction::Rebuild { .. }));
    }
}

/// An empty legacy table beside an interrupted install is no row at stake;
/// one holding rows is.
#[test]
fn schema_a_legacy_table_holding_rows_is_at_stake_too() {
    let t = tables();
    let mut rows = current_table_rows(&t)[..3].to_vec();
    rows.push((
        "cc_pack_commit_log".to_owned(),
        "MergeTree".to_owned(),
        "index_version".to_owned(),
    ));
    let o = observed(&rows, &current_column_rows(&t), StampState::Empty, None);
    let r = refusal(judge(&t, &o));
    assert!(
        r.to_string().contains("`cc_pack_commit_log` holds 3 rows"),
        "{r}"
    );
    assert!(matches!(judge(&t, &emptied(o)), Verdict::Incomplete { .. }));
}

#[test]
fn schema_an_empty_stamp_over_tables_without_publish_id_is_refused_before_any_ddl() {
    // Seed: the DDL died half way with "Unknown identifier publish_id".
    let t = tables();
    let columns: Vec<(String, String)> = current_column_rows(&t)
        .into_iter()
        .filter(|(_, c)| c != "publish_id")
        .collect();
    let r = refusal(judge(
        &t,
        &observed(
            &current_table_rows(&t),
            &columns,
            StampState::Empty,
            healthy_counts(),
        ),
    ));
    assert_eq!(
        r.diagnosis,
        Diagnosis::MissingColumns {
            stamp: StampSeen::Empty,
            missing: BTreeMap::from([
                (
                    t.pack_inventory_raw(),
                    BTreeSet::from(["publish_id".to_owned()])
                ),
                (
                    t.index_watermark(),
                    BTreeSet::from(["publish_id".to_owned()])
                ),
                (
                    t.snapshot_manifest(),
                    BTreeSet::from(["publish_id".to_owned()])
                ),
            ])
        }
    );
}

#[test]
fn schema_an_empty_stamp_still_runs_the_inventory_check() {
    let t = tables();
    let counts = MembershipCounts {
        inventory_rows: 2,
        effective_membership_rows: 0,
    };
    let r = refusal(judge(
        &t,
        &observed(
            &current_table_rows(&t),
            &current_column_rows(&t),
            StampState::Empty,
            Some(counts),
        ),
    ));
    assert!(
        matches!(r.diagnosis, Diagnosis::InventoryWithoutMembership { .. }),
        "{r}"
    );
}

#[test]
fn schema_inventory_without_effective_membership_is_refused() {
    // A truncated watermark table leaves manifest rows that pair with nothing:
    // counting the manifest alone would accept this catalog.
    let t = tables();
    let counts = MembershipCounts {
        inventory_rows: 4,
        effective_membership_rows: 0,
    };
    let r = refusal(judge(
        &t,
        &observed(
            &current_table_rows(&t),
            &current_column_rows(&t),
            stamped(),
            Some(counts),
        ),
    ));
    let message = r.to_string();
    assert!(
        message.contains("`cc_pack_inventory_raw` holds 4 rows"),
        "{message}"
    );
    assert!(
        message.contains("on (index_version, publish_id)"),
        "{message}"
    );
    assert!(message.contains("To rebuild"), "{message}");
}

#[test]
fn schema_an_uncounted_membership_is_never_accepted() {
    let t = tables();
    let r = refusal(judge(
        &t,
        &observed(
            &current_table_rows(&t),
            &current_column_rows(&t),
            stamped(),
            None,
        ),
    ));
    assert_eq!(r.diagnosis, Diagnosis::MembershipUncounted);
}

#[test]
fn schema_an_empty_stamp_over_a_whole_catalog_is_an_unfinished_install() {
    let t = tables();
    let o = observed(
        &current_table_rows(&t),
        &current_column_rows(&t),
        StampState::Empty,
        Some(MembershipCounts {
            inventory_rows: 0,
            effective_membership_rows: 0,
        }),
    );
    assert_eq!(
        judge(&t, &o),
        Verdict::Incomplete {
            missing_tables: BTreeSet::new(),
            missing_views: BTreeSet::new()
        }
    );
}

#[test]
fn schema_the_rebuild_instruction_drops_exactly_what_drop_schema_drops() {
    let t = tables();
    let rows = without(&current_table_rows(&t), &t.schema_version());
    let r = refusal(judge(
        &t,
        &observed(&rows, &current_column_rows(&t), StampState::Absent, None),
    ));
    let Instruction::Rebuild { drops, inventory } = &r.instruction else {
        panic!("expected a rebuild, got {:?}", r.instruction);
    };
    let expected: Vec<String> = drop_schema(&t).into_iter().map(|s| s.sql).collect();
    assert_eq!(drops, &expected);
    assert_eq!(inventory, &t.pack_inventory_raw());
    for object in CatalogObject::ALL {
        assert!(
            r.to_string().contains(&object.name(&t)),
            "{} not named",
            object.name(&t)
        );
    }
}

// ----- The EnsureSchema machine over canned server answers. -----

/// Runs the machine, answering each statement from `answer`; returns the
/// statement names issued and the outcome.
fn drive(
    mut answer: impl FnMut(&str) -> Input,
) -> (Vec<String>, Result<EnsureOutcome, SchemaError>) {
    let mut machine = EnsureSchema::new(tables());
    let mut issued = Vec::new();
    for _ in 0..64 {
        match machine.poll() {
            Step::Execute(statement) => {
                issued.push(statement.name.to_owned());
                let input = answer(statement.name);
                machine.handle(input);
            }
            Step::Done(outcome) => return (issued, outcome),
            Step::Draw { .. } => panic!("the schema machine never draws"),
        }
    }
    panic!("the machine did not finish within 64 steps: {issued:?}");
}

fn counts_row(inventory: u64, effective: u64) -> Input {
    Input::Rows(Rows(vec![vec![
        Value::UInt64(inventory),
        Value::UInt64(effective),
    ]]))
}

#[test]
fn schema_ensure_on_a_fresh_server_creates_everything_and_stamps_last() {
    let (issued, outcome) = drive(|_| Input::Rows(Rows::empty()));
    assert_eq!(outcome, Ok(EnsureOutcome::Created));
    let mut expected = vec![
        "schema.read_tables".to_owned(),
        "schema.read_columns".to_owned(),
    ];
    expected.extend(
        capcat_proto::schema::create_schema(&tables())
            .iter()
            .map(|s| s.name.to_owned()),
    );
    expected.push("schema.stamp".to_owned());
    assert_eq!(issued, expected);
}

/// What a whole catalog stamped with this build's version answers to
/// every probe but the listing (which each test gives itself): every
/// required column, the current stamp, counted membership, and nothing to
/// the DDL.
fn stamped_catalog_answer(t: &Tables, statement: &str) -> Input {
    match statement {
        "schema.read_columns" => Input::Rows(column_rows(&current_column_rows(t))),
        "schema.read_stamp" => Input::Rows(Rows(vec![vec![Value::UInt64(SCHEMA_VERSION)]])),
        "schema.count_membership" => counts_row(5, 5),
        _ => Input::Rows(Rows::empty()),
    }
}

#[test]
fn schema_ensure_on_a_current_catalog_reinstalls_the_views_and_reports_the_missing_one() {
    let t = tables();
    let rows = without(&current_table_rows(&t), &t.capture_view());
    let (issued, outcome) = drive(|name| match name {
        "schema.read_tables" => Input::Rows(table_rows(&rows)),
        other => stamped_catalog_answer(&t, other),
    });
    assert_eq!(
        outcome,
        Ok(EnsureOutcome::Current {
            recreated_views: BTreeSet::from([t.capture_view()])
        })
    );
    assert_eq!(
        issued,
        [
            "schema.read_tables",
            "schema.read_stamp",
            "schema.read_tables",
            "schema.read_columns",
            "schema.count_membership",
            "schema.create_capture_view",
            "schema.create_pack_inventory_view"
        ]
    );
}

/// Another process's install finished between the first listing and the
/// stamp read: the first listing holds the stamp table and nothing else,
/// the stamp is current, and the listing after it holds every object. The
/// verdict is the later listing's (a whole, current catalog), never the
/// first's, which would be a stamped catalog with tables missing.
#[test]
fn schema_ensure_judges_the_listing_taken_after_the_stamp() {
    let t = tables();
    let stamp_table_only: Vec<(String, String, String)> = current_table_rows(&t)
        .into_iter()
        .filter(|(name, _, _)| *name == t.schema_version())
        .collect();
    assert_eq!(stamp_table_only.len(), 1);
    let mut listings = vec![stamp_table_only, current_table_rows(&t)].into_iter();
    let (issued, outcome) = drive(|name| match name {
        "schema.read_tables" => Input::Rows(table_rows(
            &listings
                .next()
                .expect("the machine lists the objects twice"),
        )),
        other => stamped_catalog_answer(&t, other),
    });
    assert_eq!(
        outcome,
        Ok(EnsureOutcome::Current {
            recreated_views: BTreeSet::new()
        })
    );
    assert_eq!(
        &issued[..4],
        [
            "schema.read_tables",
            "schema.read_stamp",
            "schema.read_tables",
            "schema.read_columns"
        ]
    );
}

#[test]
fn schema_ensure_refuses_without_issuing_any_ddl() {
    let t = tables();
    let older = older_ddl_catalog(&t);
    let rows: Vec<(String, String, String)> = older
        .objects
        .iter()
        .map(|(n, o)| (n.clone(), o.engine.clone(), o.sorting_key.clone()))
        .collect();
    let (issued, outcome) = drive(|name| match name {
        "schema.read_tables" => Input::Rows(table_rows(&rows)),
        _ => Input::Rows(Rows::empty()),
    });
    assert_eq!(issued, ["schema.read_tables", "schema.read_columns"]);
    assert!(
        matches!(outcome, Err(SchemaError::Refused(ref r)) if matches!(r.diagnosis, Diagnosis::Unstamped(_))),
        "{outcome:?}"
    );
}

#[test]
fn schema_ensure_counts_membership_even_under_an_empty_stamp() {
    let t = tables();
    let (issued, outcome) = drive(|name| match name {
        "schema.read_tables" => Input::Rows(table_rows(&current_table_rows(&t))),
        "schema.read_columns" => Input::Rows(column_rows(&current_column_rows(&t))),
        "schema.read_stamp" => Input::Rows(Rows::empty()),
        "schema.count_membership" => counts_row(7, 0),
        _ => Input::Rows(Rows::empty()),
    });
    assert_eq!(
        issued,
        [
            "schema.read_tables",
            "schema.read_stamp",
            "schema.read_tables",
            "schema.read_columns",
            "schema.count_membership"
        ]
    );
    assert!(
        matches!(outcome, Err(SchemaError::Refused(ref r)) if matches!(r.diagnosis, Diagnosis::InventoryWithoutMembership { .. })),
        "{outcome:?}"
    );
}

#[test]
fn schema_ensure_completes_an_unfinished_install() {
    let t = tables();
    let (issued, outcome) = drive(|name| match name {
        "schema.read_tables" => Input::Rows(table_rows(&current_table_rows(&t))),
        "schema.read_columns" => Input::Rows(column_rows(&current_column_rows(&t))),
        "schema.count_membership" => counts_row(0, 0),
        _ => Input::Rows(Rows::empty()),
    });
    assert_eq!(outcome, Ok(EnsureOutcome::Completed));
    assert_eq!(issued.last().map(String::as_str), Some("schema.stamp"));
}

#[test]
fn schema_ensure_reports_a_failed_statement_by_name() {
    let (_, outcome) = drive(|name| {
        if name == "schema.create_snapshot_manifest" {
            Input::Failed(Failure::Timeout)
        } else {
            Input::Rows(Rows::empty())
        }
    });
    assert_eq!(
        outcome,
        Err(SchemaError::Statement {
            statement: "schema.create_snapshot_manifest",
            failure: Failure::Timeout
        })
    );
}

#[test]
fn schema_malformed_probe_rows_are_a_typed_error() {
    let (_, outcome) = drive(|name| match name {
        "schema.read_tables" => Input::Rows(Rows(vec![vec![s("cc_capture_raw")]])),
        _ => Input::Rows(Rows::empty()),
    });
    assert!(
        matches!(
            outcome,
            Err(SchemaError::Malformed {
                statement: "schema.read_tables",
                ..
            })
        ),
        "{outcome:?}"
    );
}

/// `total_rows` as the server sends it: a count, or NULL (a view, or a
/// table that cannot tell), which the guard must keep apart from 0, since
/// only 0 lets it finish an install beside missing tables.
#[test]
fn schema_total_rows_are_read_as_a_count_or_unknown() {
    let row = |rows: Value| vec![s("cc_capture_raw"), s("MergeTree"), s(SORT_KEY), rows];
    let parsed =
        |rows: Value| parse_tables(&Rows(vec![row(rows)])).map(|o| o["cc_capture_raw"].total_rows);
    assert_eq!(parsed(Value::UInt64(0)), Ok(Some(0)));
    assert_eq!(parsed(Value::UInt64(7)), Ok(Some(7)));
    assert_eq!(parsed(Value::Null), Ok(None));
    assert!(matches!(
        parsed(s("7")),
        Err(SchemaError::Malformed {
            statement: "schema.read_tables",
            ..
        })
    ));
    // The three columns of the earlier probe are refused, not read as 0.
    assert!(matches!(
        parse_tables(&Rows(vec![vec![
            s("cc_capture_raw"),
            s("MergeTree"),
            s(SORT_KEY)
        ]])),
        Err(SchemaError::Malformed { .. })
    ));
}

#[test]
fn schema_views_without_any_table_are_dropped_not_rebuilt() {
    let t = tables();
    let rows = vec![
        (t.capture_view(), "View".to_owned(), String::new()),
        (
            "cc_pack_commit_log".to_owned(),
            "MergeTree".to_owned(),
            String::new(),
        ),
    ];
    let r = refusal(judge(&t, &observed(&rows, &[], StampState::Absent, None)));
    assert_eq!(
        r.diagnosis,
        Diagnosis::Leftovers {
            objects: BTreeSet::from([t.capture_view(), "cc_pack_commit_log".to_owned()])
        }
    );
    assert_eq!(
        r.instruction,
        Instruction::DropAndRerun {
            drops: vec![
                "DROP VIEW IF EXISTS cc_capture".to_owned(),
                "DROP TABLE IF EXISTS cc_pack_commit_log".to_owned()
            ]
        }
    );
}
