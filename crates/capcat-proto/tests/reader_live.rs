//! Live tests of the reader and the schema on the real engine (libchdb via
//! capcat-chdb). The unit suites pin the statements' TEXT; only a server
//! evaluating the WHERE clause can prove their MEANING, which is what these
//! do: composite pack membership, publish pairing, the tie-break surviving a
//! merge, strict pagination, the public view, and the guard on real
//! `system.tables` rows.
//!
//! Needs `CAPCAT_LIBCHDB` (or the engine in the cache dir); skips with a
//! message otherwise, unless `CAPCAT_REQUIRE_ENGINES=1`.

use std::collections::BTreeSet;

use capcat_chdb::{Engine, Request};
use capcat_proto::descriptor::{CaptureDescriptor, Locator};
use capcat_proto::index::sql::insert_descriptors;
use capcat_proto::reader::{
    Cursor, GetByIds, PageSize, SearchFilter, SearchPage, SearchQuery, result_columns,
};
use capcat_proto::schema::{Diagnosis, EnsureOutcome, EnsureSchema, SchemaError};
use capcat_proto::{Input, Tables};
use uuid::Uuid;

mod live_support;

use live_support::{drive, execute};

/// The one engine of this test process (see `live_support::engine`).
fn engine(test: &str) -> Option<&'static Engine> {
    live_support::engine(test, "capcat-reader-live")
}

fn sql(engine: &Engine, text: &str) -> String {
    let out = engine
        .execute(&Request::new(text).format("TabSeparated"))
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    String::from_utf8_lossy(&out).trim().to_owned()
}

fn ensure(engine: &Engine, tables: &Tables) -> Result<EnsureOutcome, SchemaError> {
    drive(engine, &mut EnsureSchema::new(tables.clone()))
}

fn pack(n: u128) -> Uuid {
    Uuid::from_u128(0x9000 + n)
}

fn capture(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn descriptor(
    id: u128,
    store: &str,
    pack_id: Uuid,
    version: u64,
    offset: u64,
) -> CaptureDescriptor {
    CaptureDescriptor {
        tenant_id: "acme".to_owned(),
        experiment_id: "exp".to_owned(),
        run_id: "run".to_owned(),
        captured_at_ns: 1_000 + u64::try_from(id).expect("small"),
        capture_id: capture(id),
        locator: Locator {
            store_id: store.to_owned(),
            pack_id,
            payload_offset: offset,
            payload_length: offset + 1,
            payload_sha256: format!("{offset:064x}"),
        },
        index_version: version,
        step: 7,
        tensor_name: "encoder.w".to_owned(),
        dtype: "f32".to_owned(),
        shape: vec![2, 3],
        ..CaptureDescriptor::default()
    }
}

fn write_descriptors(engine: &Engine, tables: &Tables, rows: Vec<CaptureDescriptor>) {
    let stmt = insert_descriptors(tables, rows);
    assert!(
        matches!(execute(engine, &stmt), Input::Rows(_)),
        "descriptor insert"
    );
}

/// Writes one descriptor row for each of `ids`, all in `pack_id` of
/// `store` at `version`, every payload at `offset`.
fn describe_all(
    engine: &Engine,
    t: &Tables,
    ids: &[u128],
    (store, pack_id): (&str, Uuid),
    version: u64,
    offset: u64,
) {
    write_descriptors(
        engine,
        t,
        ids.iter()
            .map(|i| descriptor(*i, store, pack_id, version, offset))
            .collect(),
    );
}

/// Stands in for a publish that landed: manifest rows and the commit row
/// of the same publish. (The publish machine's own live tests cover how
/// those rows get there; here only their meaning to a reader matters.)
fn publish(engine: &Engine, t: &Tables, version: u64, publish_id: u128, packs: &[(&str, Uuid)]) {
    manifest(engine, t, version, publish_id, packs);
    commit_row(engine, t, version, publish_id);
}

fn manifest(engine: &Engine, t: &Tables, version: u64, publish_id: u128, packs: &[(&str, Uuid)]) {
    let values: Vec<String> = packs
        .iter()
        .map(|(store, p)| {
            format!(
                "({version}, '{}', '{store}', '{p}')",
                Uuid::from_u128(publish_id)
            )
        })
        .collect();
    sql(
        engine,
        &format!(
            "INSERT INTO {} (index_version, publish_id, store_id, pack_id) VALUES {}",
            t.snapshot_manifest(),
            values.join(", ")
        ),
    );
}

fn commit_row(engine: &Engine, t: &Tables, version: u64, publish_id: u128) {
    sql(
        engine,
        &format!(
            "INSERT INTO {} (index_version, publish_id) VALUES ({version}, '{}')",
            t.index_watermark(),
            Uuid::from_u128(publish_id)
        ),
    );
}

fn lookup(engine: &Engine, t: &Tables, ids: &[u128], w: u64) -> Vec<CaptureDescriptor> {
    let ids: BTreeSet<Uuid> = ids.iter().map(|i| capture(*i)).collect();
    let mut m = GetByIds::new(t.clone(), "acme", ids, w).expect("valid lookup");
    let found = drive(engine, &mut m).expect("lookup runs");
    found.records.into_values().collect()
}

/// The first page (of up to 10) of tenant `acme`: pinned at the published
/// head by the page itself when `pinned` is `None`, else at `pinned`
/// through a cursor before the tenant's first capture.
fn page_from_start(engine: &Engine, t: &Tables, pinned: Option<u64>) -> Vec<CaptureDescriptor> {
    let cursor = pinned.map(|pinned| Cursor {
        pinned,
        tenant_id: "acme".to_owned(),
        experiment_id: String::new(),
        run_id: String::new(),
        captured_at_ns: 0,
        capture_id: Uuid::nil(),
    });
    let query = SearchQuery {
        filter: SearchFilter {
            tenant_id: "acme".to_owned(),
            ..SearchFilter::default()
        },
        cursor,
        page_size: PageSize::new(10).expect("in range"),
    };
    drive(
        engine,
        &mut SearchPage::new(t.clone(), query).expect("valid"),
    )
    .expect("page runs")
    .records
}

fn fresh(engine: &Engine, prefix: &str) -> Tables {
    let t = Tables::new(prefix).expect("valid prefix");
    assert_eq!(ensure(engine, &t), Ok(EnsureOutcome::Created));
    t
}

#[test]
fn reader_live_a_mirror_with_the_same_pack_id_stays_out_of_an_earlier_snapshot() {
    let Some(engine) = engine("reader_live_a_mirror...") else {
        return;
    };
    let t = fresh(engine, "rl_mirror");
    // Pack P in store A, published at version 1.
    write_descriptors(engine, &t, vec![descriptor(1, "store-a", pack(1), 1, 10)]);
    publish(engine, &t, 1, 0xa1, &[("store-a", pack(1))]);
    // The same pack id copied to store B, published later at version 2.
    write_descriptors(engine, &t, vec![descriptor(1, "store-b", pack(1), 2, 20)]);
    publish(engine, &t, 2, 0xa2, &[("store-b", pack(1))]);

    // Pinned at W = 1, the mirror must not be admitted: matching on pack_id
    // alone would admit it, and argMax would resolve to store B.
    let at_1 = lookup(engine, &t, &[1], 1);
    assert_eq!(at_1.len(), 1);
    assert_eq!(at_1[0].locator.store_id, "store-a");
    // The search path pins through a cursor and must agree.
    let page = page_from_start(engine, &t, Some(1));
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].locator.store_id, "store-a");
    // At W = 2 the later publish supersedes.
    assert_eq!(lookup(engine, &t, &[1], 2)[0].locator.store_id, "store-b");
}

#[test]
fn reader_live_manifest_rows_without_their_own_commit_row_admit_nothing() {
    let Some(engine) = engine("reader_live_manifest_rows...") else {
        return;
    };
    let t = fresh(engine, "rl_pairing");
    write_descriptors(engine, &t, vec![descriptor(1, "s", pack(1), 1, 10)]);
    // A losing publish left manifest rows at V = 1; a DIFFERENT publish owns
    // the commit row at V = 1. Pairing on the version alone would admit
    // the loser's pack.
    manifest(engine, &t, 1, 0xdead, &[("s", pack(1))]);
    commit_row(engine, &t, 1, 0xbeef);
    assert!(lookup(engine, &t, &[1], 1).is_empty());
    assert_eq!(
        sql(engine, &format!("SELECT count() FROM {}", t.capture_view())),
        "0"
    );
    // The view and the reader agree once the pack is really published.
    publish(engine, &t, 2, 0xc0de, &[("s", pack(1))]);
    assert_eq!(lookup(engine, &t, &[1], 2).len(), 1);
    assert_eq!(
        sql(engine, &format!("SELECT count() FROM {}", t.capture_view())),
        "1"
    );
}

#[test]
fn reader_live_a_tie_at_one_version_resolves_to_one_whole_pack_before_and_after_a_merge() {
    let Some(engine) = engine("reader_live_a_tie...") else {
        return;
    };
    let t = fresh(engine, "rl_tie");
    // One index pass, one version, two packs describing the same captures.
    let ids: Vec<u128> = (1..=20).collect();
    describe_all(engine, &t, &ids, ("s", pack(1)), 5, 100);
    describe_all(engine, &t, &ids, ("s", pack(2)), 5, 200);
    publish(engine, &t, 5, 0x55, &[("s", pack(1)), ("s", pack(2))]);

    let before = lookup(engine, &t, &ids, 5);
    assert_eq!(before.len(), 20);
    for d in &before {
        // The highest (store_id, pack_id) wins, and every locator field
        // comes from that one row.
        assert_eq!(d.locator.pack_id, pack(2), "{d:?}");
        assert_eq!(d.locator.payload_offset, 200);
        assert_eq!(d.locator.payload_length, 201);
    }
    // A lookup reads `capture_by_id`, which the feed fills with the same
    // rows; merging both tables must leave what it resolves unchanged.
    for table in [t.capture_raw(), t.capture_by_id()] {
        sql(engine, &format!("OPTIMIZE TABLE {table} FINAL"));
        assert_eq!(lookup(engine, &t, &ids, 5), before, "after merging {table}");
        // Both rows survive the merge: pack identity is in the sort key.
        assert_eq!(
            sql(engine, &format!("SELECT count() FROM {table}")),
            "40",
            "{table}"
        );
    }
    // The public view shows both published rows; supersession is the
    // reader's job, not the view's.
    assert_eq!(
        sql(
            engine,
            &format!(
                "SELECT count() FROM {} WHERE capture_id = '{}'",
                t.capture_view(),
                capture(1)
            )
        ),
        "2"
    );
}

/// The version leads the resolution order: a capture described again at a
/// later version, from a store and pack that sort LOWER, resolves to the
/// later row, on a lookup (which keeps the row with `LIMIT 1 BY`) and on a
/// page (which aggregates with `argMax`) alike. Ordered on store or pack
/// first, either would keep the earlier row.
#[test]
fn reader_live_a_later_version_supersedes_a_higher_store_and_pack() {
    let Some(engine) = engine("reader_live_a_later_version...") else {
        return;
    };
    let t = fresh(engine, "rl_later");
    let ids: Vec<u128> = (1..=5).collect();
    describe_all(engine, &t, &ids, ("store-z", pack(9)), 1, 100);
    publish(engine, &t, 1, 0xb1, &[("store-z", pack(9))]);
    describe_all(engine, &t, &ids, ("store-a", pack(1)), 2, 200);
    publish(engine, &t, 2, 0xb2, &[("store-a", pack(1))]);

    for (w, store, pack_id, offset) in [(1, "store-z", pack(9), 100), (2, "store-a", pack(1), 200)]
    {
        let found = lookup(engine, &t, &ids, w);
        assert_eq!(found.len(), ids.len(), "W = {w}");
        for d in &found {
            assert_eq!(
                (
                    d.locator.store_id.as_str(),
                    d.locator.pack_id,
                    d.index_version
                ),
                (store, pack_id, w),
                "lookup at W = {w}: {d:?}"
            );
            // The whole row is the winner's, not a mix of the two.
            assert_eq!(
                (d.locator.payload_offset, d.locator.payload_length),
                (offset, offset + 1)
            );
        }
        // W = 2 is the published head, which a first page pins itself;
        // W = 1 is read through a cursor pinned there, as the mirror test
        // does.
        let records = page_from_start(engine, &t, (w == 1).then_some(1));
        assert_eq!(records.len(), ids.len(), "W = {w}");
        assert_eq!(
            records, found,
            "the page and the lookup resolve alike at W = {w}"
        );
    }
}

#[test]
fn reader_live_pages_are_strict_and_cover_every_capture_once() {
    let Some(engine) = engine("reader_live_pages...") else {
        return;
    };
    let t = fresh(engine, "rl_pages");
    write_descriptors(
        engine,
        &t,
        (1..=7)
            .map(|i| descriptor(i, "s", pack(1), 1, 10))
            .collect(),
    );
    publish(engine, &t, 1, 0x11, &[("s", pack(1))]);
    // Unpublished captures in another pack must never appear.
    write_descriptors(
        engine,
        &t,
        (8..=9)
            .map(|i| descriptor(i, "s", pack(9), 2, 10))
            .collect(),
    );

    let mut seen = Vec::new();
    let mut cursor = None;
    for _ in 0..10 {
        let query = SearchQuery {
            filter: SearchFilter {
                tenant_id: "acme".to_owned(),
                ..SearchFilter::default()
            },
            cursor: cursor.clone(),
            page_size: PageSize::new(3).expect("in range"),
        };
        let page = drive(
            engine,
            &mut SearchPage::new(t.clone(), query).expect("valid"),
        )
        .expect("page runs");
        seen.extend(page.records.iter().map(|d| d.capture_id));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let expected: Vec<Uuid> = (1..=7).map(capture).collect();
    assert_eq!(seen, expected);
}

#[test]
fn reader_live_floats_and_shapes_decode_exactly() {
    let Some(engine) = engine("reader_live_floats...") else {
        return;
    };
    let t = fresh(engine, "rl_floats");
    let mut d = descriptor(1, "s", pack(1), 1, 10);
    d.summary.minimum = (-0.0f64).into();
    d.summary.maximum = f64::INFINITY.into();
    d.summary.mean = 0.1f64.into();
    d.summary.abs_max = 9_007_199_254_740_993f64.into();
    d.shape = vec![];
    write_descriptors(engine, &t, vec![d.clone()]);
    publish(engine, &t, 1, 0x11, &[("s", pack(1))]);
    assert_eq!(lookup(engine, &t, &[1], 1), vec![d]);
    assert_eq!(result_columns().len(), 23);
}

#[test]
fn schema_live_ensure_is_idempotent_and_reinstalls_a_dropped_view() {
    let Some(engine) = engine("schema_live_ensure...") else {
        return;
    };
    let t = fresh(engine, "sl_idem");
    assert_eq!(
        ensure(engine, &t),
        Ok(EnsureOutcome::Current {
            recreated_views: BTreeSet::new()
        })
    );
    sql(engine, &format!("DROP VIEW {}", t.capture_view()));
    assert_eq!(
        ensure(engine, &t),
        Ok(EnsureOutcome::Current {
            recreated_views: BTreeSet::from([t.capture_view()])
        })
    );
    assert_eq!(
        sql(
            engine,
            &format!("SELECT count() FROM {}", t.schema_version())
        ),
        "1"
    );
}

#[test]
fn schema_live_a_cleared_stamp_over_a_catalog_missing_a_table_is_refused() {
    let Some(engine) = engine("schema_live_cleared...") else {
        return;
    };
    let t = fresh(engine, "sl_cleared");
    write_descriptors(engine, &t, vec![descriptor(1, "s", pack(1), 1, 0)]);
    sql(engine, &format!("TRUNCATE TABLE {}", t.schema_version()));
    sql(engine, &format!("DROP TABLE {}", t.publisher_lease()));
    match ensure(engine, &t) {
        Err(SchemaError::Refused(r)) => match &r.diagnosis {
            Diagnosis::MissingTables { holding, .. } => {
                assert_eq!(holding.get(&t.capture_raw()), Some(&Some(1)), "{r}");
            }
            other => panic!("expected missing tables, got {other:?}"),
        },
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Nothing was created behind the refusal.
    assert_eq!(
        sql(engine, &format!("EXISTS TABLE {}", t.publisher_lease())),
        "0"
    );
}

/// The same cleared stamp over the same missing table, with no row in any
/// table: nothing is at stake (it is what an install killed part way
/// leaves), so the install is finished and stamped.
#[test]
fn schema_live_a_cleared_stamp_over_empty_tables_is_finished() {
    let Some(engine) = engine("schema_live_cleared_empty...") else {
        return;
    };
    let t = fresh(engine, "sl_cleared_empty");
    sql(engine, &format!("TRUNCATE TABLE {}", t.schema_version()));
    sql(engine, &format!("DROP TABLE {}", t.publisher_lease()));
    assert_eq!(ensure(engine, &t), Ok(EnsureOutcome::Completed));
    assert_eq!(
        sql(engine, &format!("EXISTS TABLE {}", t.publisher_lease())),
        "1"
    );
    assert_eq!(
        sql(
            engine,
            &format!("SELECT count() FROM {}", t.schema_version())
        ),
        "1"
    );
}

#[test]
fn schema_live_an_older_ddl_catalog_is_refused_with_its_real_sort_key() {
    let Some(engine) = engine("schema_live_older...") else {
        return;
    };
    let t = Tables::new("sl_older").expect("valid prefix");
    // The older DDL, written out by hand (not generated from this build, or
    // the fixture would agree with whatever the build does): descriptors
    // ordered by capture identity alone, no publish_id anywhere, no stamp.
    sql(
        engine,
        &format!(
            "CREATE TABLE {} (tenant_id String, experiment_id String, run_id String, \
             captured_at_ns UInt64, capture_id UUID, store_id String, pack_id UUID, \
             index_version UInt64) ENGINE = ReplacingMergeTree(index_version) \
             ORDER BY (tenant_id, experiment_id, run_id, captured_at_ns, capture_id)",
            t.capture_raw()
        ),
    );
    sql(
        engine,
        &format!(
            "CREATE TABLE {} (index_version UInt64, published_at_ns UInt64) \
             ENGINE = MergeTree ORDER BY index_version",
            t.index_watermark()
        ),
    );
    sql(
        engine,
        &format!(
            "CREATE TABLE {} (index_version UInt64, store_id String, pack_id UUID) \
             ENGINE = MergeTree ORDER BY index_version",
            t.snapshot_manifest()
        ),
    );
    let refusal = match ensure(engine, &t) {
        Err(SchemaError::Refused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let message = refusal.to_string();
    for needle in [
        "is (tenant_id, experiment_id, run_id, captured_at_ns, capture_id) but this build requires",
        "`sl_older_index_watermark` lacks it",
        "`sl_older_snapshot_manifest` lacks it",
        "the membership table `sl_older_snapshot_manifest` exists, so a missing manifest is NOT what is wrong",
    ] {
        assert!(message.contains(needle), "missing {needle:?} in {message}");
    }
    assert_eq!(
        sql(engine, &format!("EXISTS TABLE {}", t.schema_version())),
        "0",
        "a refused catalog gets no DDL"
    );
}

/// `reader.admitted_packs` on the engine: pages of two over packs whose
/// ids ClickHouse orders differently from their bytes (random v4 ids),
/// across two stores, list every admitted pack once; a pack of a publish
/// without its commit row, and one published above W, are not listed.
#[test]
fn reader_live_admitted_packs_lists_every_admitted_pack_once_across_pages() {
    let Some(engine) = engine("admitted_packs") else {
        return;
    };
    let t = fresh(engine, "rl_admitted");
    // Ids chosen so byte order and ClickHouse's UUID order disagree: the
    // high and low 64-bit halves rank them in opposite orders.
    let ids: Vec<Uuid> = (0..7_u128)
        .map(|i| Uuid::from_u128(((7 - i) << 64) | i))
        .collect();
    let admitted: Vec<(&str, Uuid)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (if i % 3 == 0 { "b" } else { "a" }, *id))
        .collect();
    publish(engine, &t, 1, 1, &admitted[..4]);
    publish(engine, &t, 2, 2, &admitted[4..]);
    // Lost: manifest rows without the commit row of their publish.
    manifest(engine, &t, 3, 3, &[("a", pack(1))]);
    let mut list = capcat_proto::reader::AdmittedPacks::new(t.clone(), 2);
    let listed = drive(engine, &mut list).expect("the listing runs");
    assert_eq!(listed.pinned, 2);
    let expected: Vec<(String, Uuid)> = admitted
        .iter()
        .map(|(s, id)| ((*s).to_owned(), *id))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(listed.packs, expected);
    // A later publish is in a later listing, which pins the new head.
    publish(engine, &t, 4, 4, &[("a", pack(2))]);
    let mut again = capcat_proto::reader::AdmittedPacks::new(t, 3);
    let listed = drive(engine, &mut again).expect("the listing runs");
    assert_eq!((listed.pinned, listed.packs.len()), (4, 8));
}
