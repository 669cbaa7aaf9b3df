//! The catalog's live behaviours (seed 000_c340ae718cc42a42) on the real
//! ClickHouse engine: embedded libchdb by default, the `clickhouse` crate
//! through capcat-chdb's HTTP front with `CAPCAT_CATALOG_TRANSPORT=http`,
//! and a real clickhouse-server with `CAPCAT_CLICKHOUSE_URL` (see
//! `support`). Every test works on a prefix of its own.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use capcat_clickhouse::{Catalog, CatalogError, LeaseHandle};
use capcat_proto::designs::Design;
use capcat_proto::reader::{Cursor, PageSize, SearchFilter, SearchQuery};
use capcat_proto::schema::{Diagnosis, EnsureOutcome, Instruction, SchemaError, StampSeen};
use capcat_proto::{
    CaptureDescriptor, ColumnType, IndexReport, Input, LeaseError, Machine, PackRef, Publish, Step,
    Value,
};
use support::{Live, capture_ids, pack_of, short_lease_config};
use uuid::Uuid;

const TENANT: &str = "acme";

fn ok<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Every page of the tenant's captures at the head, `size` per page.
async fn walk(catalog: &Catalog, size: u64) -> (u64, Vec<CaptureDescriptor>) {
    let mut query = tenant_query(None, size);
    let mut out = Vec::new();
    let mut pinned = None;
    for _ in 0..10_000 {
        let page = ok("search", catalog.search(query.clone()).await);
        pinned.get_or_insert(page.pinned);
        assert_eq!(Some(page.pinned), pinned, "a page moved off its snapshot");
        out.extend(page.records);
        match page.next {
            Some(cursor) => query.cursor = Some(cursor),
            None => return (page.pinned, out),
        }
    }
    panic!("the walk did not end");
}

fn by_id(records: Vec<CaptureDescriptor>) -> BTreeMap<Uuid, CaptureDescriptor> {
    let mut out = BTreeMap::new();
    for r in records {
        let id = r.capture_id;
        assert!(out.insert(id, r).is_none(), "capture {id} returned twice");
    }
    out
}

fn indexed_version(report: &IndexReport) -> u64 {
    match report {
        IndexReport::Indexed { version, .. } => *version,
        other => panic!("expected an indexed pass, got {other:?}"),
    }
}

/// The descriptor `d` as a reader returns it once published at `version`.
fn at(d: &CaptureDescriptor, version: u64) -> CaptureDescriptor {
    CaptureDescriptor {
        index_version: version,
        ..d.clone()
    }
}

/// The tenant's captures, `size` a page: the first page (`cursor` `None`,
/// which pins the head) or the page after `cursor`.
fn tenant_query(cursor: Option<Cursor>, size: u64) -> SearchQuery {
    SearchQuery {
        filter: SearchFilter {
            tenant_id: TENANT.to_owned(),
            ..SearchFilter::default()
        },
        cursor,
        page_size: ok("page size", PageSize::new(size)),
    }
}

/// A pack of `captures` fresh captures of the tenant, in a pack of its own.
fn fresh_pack(captures: usize) -> Vec<CaptureDescriptor> {
    pack_of(TENANT, &capture_ids(captures), 0, "s", Uuid::new_v4())
}

/// The catalog for `test` on `config` with its schema ensured: the opening
/// of every test that writes through the protocol. `None`: no engine.
async fn ensured_with(test: &str, config: capcat_proto::Config) -> Option<Live> {
    let live = Live::start_with(test, config).await?;
    ok("ensure", live.catalog.ensure_schema().await);
    Some(live)
}

/// [`ensured_with`] on the default protocol configuration.
async fn ensured(test: &str) -> Option<Live> {
    ensured_with(test, capcat_proto::Config::default()).await
}

/// An ensured catalog for `test` on `config` and the publisher lease, taken
/// as `holder`: the opening of every test that publishes.
async fn holding_with(
    test: &str,
    config: capcat_proto::Config,
    holder: &str,
) -> Option<(Live, LeaseHandle)> {
    let live = ensured_with(test, config).await?;
    let lease = ok("acquire", live.catalog.acquire_lease(holder).await);
    Some((live, lease))
}

/// [`holding_with`] on the default protocol configuration.
async fn holding(test: &str, holder: &str) -> Option<(Live, LeaseHandle)> {
    holding_with(test, capcat_proto::Config::default(), holder).await
}

/// One index pass of `rows` under `lease`, which must publish: returns the
/// version it published at.
async fn index_pass(c: &Catalog, lease: &mut LeaseHandle, rows: Vec<CaptureDescriptor>) -> u64 {
    indexed_version(&ok("index", c.index(lease, rows).await))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_packs_describing_one_capture_resolve_to_one_pack_everywhere() {
    let chunk_of_5 = capcat_proto::Config::default()
        .with_chunk(5)
        .expect("chunk 5");
    let Some((live, mut lease)) =
        holding_with("two_packs_one_capture", chunk_of_5, "indexer").await
    else {
        return;
    };
    let c = &live.catalog;
    let ids = capture_ids(30);
    let (p1, p2) = (Uuid::new_v4(), Uuid::new_v4());
    let a = pack_of(TENANT, &ids, 0, "store-a", p1);
    let b = pack_of(TENANT, &ids, 0, "store-a", p2);
    // Interleave the two packs' rows across the 5-row INSERT chunks so the
    // engine holds them in several parts, in both orders: a resolution that
    // depended on physical order would pick different packs for different
    // captures.
    let mut rows = Vec::new();
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        if i % 2 == 0 {
            rows.extend([x.clone(), y.clone()]);
        } else {
            rows.extend([y.clone(), x.clone()]);
        }
    }
    let version = index_pass(c, &mut lease, rows).await;
    let packs: BTreeMap<Uuid, &Vec<CaptureDescriptor>> = [(p1, &a), (p2, &b)].into();
    let want: BTreeSet<Uuid> = ids.iter().copied().collect();

    let mut chosen = None;
    for round in ["as written", "after OPTIMIZE TABLE ... FINAL"] {
        for _ in 0..3 {
            let (w, page) = walk(c, 7).await;
            assert_eq!(w, version);
            let lookup = ok("resolve", c.resolve(TENANT, want.clone(), version).await);
            let page = by_id(page);
            assert_eq!(page, lookup, "{round}: a page and a lookup disagree");
            let resolved: BTreeSet<Uuid> = page.values().map(|d| d.locator.pack_id).collect();
            assert_eq!(
                resolved.len(),
                1,
                "{round}: captures resolved to {resolved:?}"
            );
            let pack = *resolved.first().expect("one pack");
            assert_eq!(
                *chosen.get_or_insert(pack),
                pack,
                "{round}: the winner moved"
            );
            // Every field, the whole locator included, from that one pack.
            let expected: BTreeMap<Uuid, CaptureDescriptor> = packs[&pack]
                .iter()
                .map(|d| (d.capture_id, at(d, version)))
                .collect();
            assert_eq!(page, expected, "{round}");
        }
        if round == "as written" {
            // A page reads the descriptor table and a lookup its copy keyed
            // by id; both are merged, and the next round checks that the
            // two reads still agree.
            for table in [live.tables().capture_raw(), live.tables().capture_by_id()] {
                live.exec(&format!("OPTIMIZE TABLE {table} FINAL")).await;
                // Pack identity is in the sort key: the merge kept both rows.
                let n = live.rows_in(&table).await;
                assert_eq!(n, 60, "{table}");
            }
        }
    }
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pages_walk_every_capture_exactly_once_and_filters_narrow() {
    let Some((live, mut lease)) = holding("pages_walk", "indexer").await else {
        return;
    };
    let c = &live.catalog;
    let ids = capture_ids(250);
    let rows = pack_of(TENANT, &ids, 0, "store-a", Uuid::new_v4());
    let version = index_pass(c, &mut lease, rows.clone()).await;
    for size in [7, 100, 250, 1000] {
        let (_, all) = walk(c, size).await;
        assert_eq!(all.len(), 250, "page size {size}");
        let all = by_id(all);
        assert_eq!(all.len(), 250);
    }
    // Filters: each narrows to exactly the rows it names.
    type Predicate = Box<dyn Fn(&CaptureDescriptor) -> bool>;
    let filters: Vec<(SearchFilter, Predicate)> = vec![
        (
            SearchFilter {
                experiment_id: Some("exp1".into()),
                ..SearchFilter::default()
            },
            Box::new(|d| d.experiment_id == "exp1"),
        ),
        (
            SearchFilter {
                run_id: Some("run0".into()),
                dtype: Some("f32".into()),
                ..SearchFilter::default()
            },
            Box::new(|d| d.run_id == "run0" && d.dtype == "f32"),
        ),
        (
            SearchFilter {
                tensor_name_prefix: Some("encoder.layers.3".into()),
                step: capcat_proto::reader::Range {
                    from: Some(10),
                    until: Some(200),
                },
                ..SearchFilter::default()
            },
            Box::new(|d| {
                d.tensor_name.starts_with("encoder.layers.3") && (10..=200).contains(&d.step)
            }),
        ),
        (
            SearchFilter {
                captured_at_ns: capcat_proto::reader::Range {
                    from: Some(1_000_100),
                    until: Some(1_000_100),
                },
                ..SearchFilter::default()
            },
            Box::new(|d| d.captured_at_ns == 1_000_100),
        ),
    ];
    for (filter, pred) in filters {
        let query = SearchQuery {
            filter: SearchFilter {
                tenant_id: TENANT.to_owned(),
                ..filter
            },
            cursor: None,
            page_size: ok("size", PageSize::new(5000)),
        };
        let page = ok("search", c.search(query).await);
        let got: BTreeSet<Uuid> = page.records.iter().map(|d| d.capture_id).collect();
        let want: BTreeSet<Uuid> = rows
            .iter()
            .filter(|d| pred(d))
            .map(|d| d.capture_id)
            .collect();
        assert!(!want.is_empty());
        assert_eq!(got, want);
        assert!(page.records.iter().all(|d| d.index_version == version));
    }
    // Another tenant sees nothing.
    let other = SearchQuery {
        filter: SearchFilter {
            tenant_id: "someone-else".into(),
            ..SearchFilter::default()
        },
        cursor: None,
        page_size: PageSize::default(),
    };
    assert!(ok("search", c.search(other).await).records.is_empty());
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_foreign_row_at_v_makes_the_publish_raise_and_admits_nothing_of_ours() {
    let Some((live, mut lease)) = holding("foreign_row_at_v", "publisher").await else {
        return;
    };
    let c = &live.catalog;
    let ids = capture_ids(10);
    let pack = Uuid::new_v4();
    let rows = pack_of(TENANT, &ids, 0, "store-a", pack);
    // Descriptors are inert until a publish admits their pack.
    let insert = capcat_proto::index::sql::insert_descriptors(live.tables(), rows);
    ok("descriptors", c.transport().execute(&insert).await);
    let version = ok("allocate", c.allocate_version().await);
    let foreign = Uuid::new_v4();
    live.exec(&format!(
        "INSERT INTO {} (index_version, publish_id) VALUES ({version}, '{foreign}')",
        live.tables().index_watermark()
    ))
    .await;
    let packs: BTreeSet<PackRef> = [("store-a".to_owned(), pack)].into();
    let ours = match c.publish_snapshot(&mut lease, version, packs).await {
        Err(CatalogError::LostRace(race)) => {
            assert_eq!(race.version, version);
            assert_eq!(race.found, BTreeSet::from([foreign]));
            race.publish_id
        }
        other => panic!("expected the publish to raise a lost race, got {other:?}"),
    };
    let at_v = live
        .rows(
            &format!(
                "SELECT publish_id FROM {} WHERE index_version = {version}",
                live.tables().index_watermark()
            ),
            &[("publish_id", ColumnType::Uuid)],
        )
        .await;
    assert_eq!(
        at_v,
        vec![vec![Value::Uuid(foreign)]],
        "the foreign row is the only one at V"
    );
    let mine = live
        .count(&format!(
            "SELECT count() AS n FROM {} WHERE publish_id = '{ours}'",
            live.tables().snapshot_manifest()
        ))
        .await;
    assert_eq!(mine, 0, "the barrier let our manifest rows land");
    // No snapshot admits our pack: not at the head, not through the view.
    let head = ok("pin", c.pin().await);
    assert_eq!(head, version);
    let lookup = ok(
        "lookup",
        c.get_by_ids(TENANT, ids.iter().copied().collect(), head)
            .await,
    );
    assert!(lookup.records.is_empty(), "{:?}", lookup.records.keys());
    let view = live.rows_in(&live.tables().capture_view()).await;
    assert_eq!(view, 0);
    live.finish().await;
}

/// Rows sent as an INSERT's data go with `InsertData::SETTINGS` on every
/// transport: the engine does not collapse rows of one sorting key inside
/// the inserted block (`optimize_on_insert = 0`), in either descriptor
/// table. The index pass never sends such rows (it refuses the batch); the
/// statement is built by hand to see the setting at work.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rows_sent_as_data_are_not_collapsed_while_they_are_inserted() {
    let Some(live) = ensured("data_insert_settings").await else {
        return;
    };
    let pack = Uuid::new_v4();
    let mut rows = pack_of(TENANT, &capture_ids(3), 0, "store-a", pack);
    let mut twin = rows[1].clone();
    twin.locator.payload_offset += 1_000;
    rows.push(twin);
    let insert = capcat_proto::index::sql::insert_descriptors(live.tables(), rows);
    ok(
        "descriptors",
        live.catalog.transport().execute(&insert).await,
    );
    for table in [live.tables().capture_raw(), live.tables().capture_by_id()] {
        let stored = live
            .count(&format!("SELECT count() AS n FROM {table}"))
            .await;
        assert_eq!(stored, 4, "{table}: the twin rows were collapsed on insert");
    }
    live.finish().await;
}

/// Drives `publish` until it is about to run its first guarded INSERT.
async fn run_until_guarded<M: Machine<Outcome: std::fmt::Debug>>(live: &Live, publish: &mut M) {
    for _ in 0..100 {
        match publish.poll() {
            Step::Execute(stmt) if stmt.name == "publish.insert_manifest" => return,
            Step::Execute(stmt) => {
                let input = match live.catalog.transport().execute(&stmt).await {
                    Ok(rows) => Input::Rows(rows),
                    Err(f) => Input::Failed(f),
                };
                publish.handle(input);
            }
            Step::Draw { .. } => publish.handle(Input::Drawn(0)),
            Step::Done(outcome) => {
                panic!("the publish ended before its guarded INSERTs: {outcome:?}")
            }
        }
    }
    panic!("the publish never reached its guarded INSERTs");
}

/// A publisher renews, then loses its lease to a takeover before its guarded
/// INSERTs run; returns its outcome and whether the publication tables
/// changed. `config` picks the design under test.
async fn taken_over_publisher(test: &str, design: Design) -> Option<bool> {
    let config = short_lease_config();
    let (live, mut a) = holding_with(test, config.clone(), "publisher-a").await?;
    let c = &live.catalog;
    let first = capture_ids(12);
    let rows = pack_of(TENANT, &first, 0, "store-a", Uuid::new_v4());
    let w1 = index_pass(c, &mut a, rows).await;
    let (pinned_w, pinned_page) = walk(c, 5).await;
    assert_eq!(pinned_w, w1);

    // A prepares a publish of a second pack: descriptors, version, renewal.
    let second = capture_ids(12);
    let pack = Uuid::new_v4();
    let insert = capcat_proto::index::sql::insert_descriptors(
        live.tables(),
        pack_of(TENANT, &second, 100, "store-a", pack),
    );
    ok("descriptors", c.transport().execute(&insert).await);
    let version = ok("allocate", c.allocate_version().await);
    let publish = Publish::new(
        live.tables().clone(),
        config.clone(),
        a.lease().clone(),
        version,
        [("store-a".to_owned(), pack)].into(),
        Uuid::new_v4(),
    );
    let mut publish = design.wrap(live.tables().clone(), config.clone(), publish);
    run_until_guarded(&live, &mut publish).await;

    // The lease expires under A and B takes it over.
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    let b_catalog = live.second_catalog(config);
    let _b = ok("B takes over", b_catalog.acquire_lease("publisher-b").await);
    let before = live.publication_tables().await;

    // A's guarded INSERTs run now.
    let mut outcome = None;
    for _ in 0..100 {
        match publish.poll() {
            Step::Execute(stmt) => {
                let input = match c.transport().execute(&stmt).await {
                    Ok(rows) => Input::Rows(rows),
                    Err(f) => Input::Failed(f),
                };
                publish.handle(input);
            }
            Step::Draw { .. } => publish.handle(Input::Drawn(0)),
            Step::Done(o) => {
                outcome = Some(o);
                break;
            }
        }
    }
    let outcome = outcome.expect("the publish finished");
    let after = live.publication_tables().await;
    let changed = before != after;
    if !changed {
        assert!(
            matches!(outcome, Err(capcat_proto::PublishError::LeaseLost { .. })),
            "{outcome:?}"
        );
    }
    // A reader pinned before resolves the same page, at the same pinned version.
    let ids: BTreeSet<Uuid> = pinned_page.iter().map(|d| d.capture_id).collect();
    let again = ok("resolve", c.resolve(TENANT, ids, pinned_w).await);
    assert_eq!(again, by_id(pinned_page));
    // And A's own stale index pass is refused without writing.
    let before = live.publication_tables().await;
    let stale = c
        .index(
            &mut a,
            pack_of(TENANT, &capture_ids(3), 200, "store-a", Uuid::new_v4()),
        )
        .await;
    assert!(stale.is_err(), "a stale publisher indexed: {stale:?}");
    if !changed {
        assert_eq!(before, live.publication_tables().await);
    }
    live.finish().await;
    Some(changed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_publisher_whose_lease_was_taken_over_writes_nothing() {
    if let Some(changed) = taken_over_publisher("taken_over", Design::Shipped).await {
        assert!(
            !changed,
            "FencedOutWritesNothing: the watermark or manifest table changed"
        );
    }
}

/// The rejected barrier-only design, on the same script: the real engine
/// lets the fenced-out publisher write. This is the proof that the test
/// above can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_barrier_only_design_lets_a_taken_over_publisher_write() {
    if let Some(changed) = taken_over_publisher("barrier_only", Design::BarrierOnly).await {
        assert!(
            changed,
            "the barrier-only design wrote nothing: the scenario lost its teeth"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_fence_over_an_empty_lease_table_evaluates_without_error() {
    let Some(live) = ensured("fence_empty_lease").await else {
        return;
    };
    let c = &live.catalog;
    let t = live.tables();
    let cfg = c.config();
    let (v, publish_id) = (1, Uuid::new_v4());
    let lease = capcat_proto::Lease {
        lease_id: Uuid::new_v4(),
        holder: "nobody".to_owned(),
        term: 1,
        expires_at_ns: u64::MAX >> 2,
        unsettled_until_ns: 0,
    };
    let statements = [
        capcat_proto::publish::sql::insert_manifest(
            t,
            cfg,
            v,
            publish_id,
            &lease,
            vec![("store-a".to_owned(), Uuid::new_v4())],
        ),
        capcat_proto::publish::sql::insert_commit_row(t, cfg, v, publish_id, &lease, 1),
        capcat_proto::lease::sql::release(t, cfg, &lease),
    ];
    for stmt in &statements {
        ok(stmt.name, c.transport().execute(stmt).await);
    }
    let (watermark, manifest) = live.publication_tables().await;
    assert!(watermark.is_empty() && manifest.is_empty());
    let leases = live.rows_in(&t.publisher_lease()).await;
    assert_eq!(
        leases, 0,
        "a release over an empty lease table wrote a tombstone"
    );
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_public_view_shows_only_published_rows() {
    let Some(live) = ensured("public_view").await else {
        return;
    };
    let c = &live.catalog;
    let t = live.tables().clone();
    let view_ids = |rows: Vec<Vec<Value>>| -> Vec<(Uuid, Uuid)> {
        rows.into_iter()
            .map(|r| match r.as_slice() {
                [Value::Uuid(capture), Value::Uuid(pack)] => (*capture, *pack),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let view_sql = format!(
        "SELECT capture_id, pack_id FROM {} ORDER BY capture_id, pack_id",
        t.capture_view()
    );
    let view_cols = [
        ("capture_id", ColumnType::Uuid),
        ("pack_id", ColumnType::Uuid),
    ];

    // An emptied membership bound: nothing published yet, descriptor rows
    // written and manifest rows standing without their commit row.
    let orphan_ids = capture_ids(4);
    let orphan = Uuid::new_v4();
    let insert = capcat_proto::index::sql::insert_descriptors(
        &t,
        pack_of(TENANT, &orphan_ids, 0, "store-a", orphan),
    );
    ok("descriptors", c.transport().execute(&insert).await);
    live.exec(&format!(
        "INSERT INTO {} (index_version, publish_id, store_id, pack_id) VALUES (1, '{}', 'store-a', '{orphan}')",
        t.snapshot_manifest(),
        Uuid::new_v4()
    ))
    .await;
    assert!(view_ids(live.rows(&view_sql, &view_cols).await).is_empty());

    // Publish pack P, then pack Q describing two of P's captures.
    let mut lease = ok("acquire", c.acquire_lease("indexer").await);
    let ids = capture_ids(5);
    let (p, q) = (Uuid::new_v4(), Uuid::new_v4());
    index_pass(c, &mut lease, pack_of(TENANT, &ids, 0, "store-a", p)).await;
    index_pass(c, &mut lease, pack_of(TENANT, &ids[..2], 0, "store-b", q)).await;
    // An unpublished batch: descriptors only.
    let unpublished = Uuid::new_v4();
    let insert = capcat_proto::index::sql::insert_descriptors(
        &t,
        pack_of(TENANT, &capture_ids(3), 50, "store-a", unpublished),
    );
    ok("descriptors", c.transport().execute(&insert).await);

    // ClickHouse orders UUIDs differently from Rust: compare as sorted here.
    let mut shown = view_ids(live.rows(&view_sql, &view_cols).await);
    shown.sort();
    let mut expected: Vec<(Uuid, Uuid)> = ids.iter().map(|i| (*i, p)).collect();
    expected.extend(ids[..2].iter().map(|i| (*i, q)));
    expected.sort();
    assert_eq!(
        shown, expected,
        "only published rows, a two-pack capture twice"
    );
    live.finish().await;
}

// ---- schema refusal ----

/// The descriptor table of every earlier catalog below, written out
/// literally (not generated from our code), sorted by `sort_key`.
fn capture_raw_ddl(p: &str, sort_key: &str) -> String {
    format!(
        "CREATE TABLE {p}_capture_raw (tenant_id String, experiment_id String, run_id String, \
         captured_at_ns UInt64, capture_id UUID, store_id String, pack_id UUID, \
         index_version UInt64, step UInt64, tensor_name String, dtype String, \
         shape Array(UInt64), summary_version UInt32, element_count UInt64, minimum Float64, \
         maximum Float64, mean Float64, l2_norm Float64, abs_max Float64, \
         zero_fraction Float64, payload_offset UInt64, payload_length UInt64, \
         payload_sha256 String) ENGINE = ReplacingMergeTree(index_version) \
         ORDER BY ({sort_key})"
    )
}

/// The catalog as the seed's predecessor built it, written out literally (not
/// generated from our code): descriptor key without pack identity, a commit
/// log for membership, a watermark table without publish_id, no manifest, no lease,
/// no claims, no stamp.
fn older_ddl(p: &str) -> Vec<String> {
    vec![
        capture_raw_ddl(
            p,
            "tenant_id, experiment_id, run_id, captured_at_ns, capture_id",
        ),
        format!(
            "CREATE TABLE {p}_pack_inventory_raw (store_id String, pack_id UUID, \
             index_version UInt64, committed_at_ns UInt64) \
             ENGINE = ReplacingMergeTree(index_version) ORDER BY (store_id, pack_id)"
        ),
        format!(
            "CREATE TABLE {p}_index_watermark (index_version UInt64, published_at_ns UInt64) \
             ENGINE = MergeTree ORDER BY index_version"
        ),
        format!(
            "CREATE TABLE {p}_pack_commit_log (index_version UInt64, store_id String, \
             pack_id UUID) ENGINE = MergeTree ORDER BY (index_version, store_id, pack_id)"
        ),
        format!(
            "CREATE VIEW {p}_capture AS SELECT * FROM {p}_capture_raw FINAL WHERE \
             (store_id, pack_id) IN (SELECT store_id, pack_id FROM {p}_pack_commit_log)"
        ),
    ]
}

async fn names_present(live: &Live, names: &[String]) -> BTreeMap<String, (String, String)> {
    let list = names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    live.rows(
        &format!(
            "SELECT name, engine, sorting_key FROM system.tables WHERE database = currentDatabase() \
             AND name IN ({list})"
        ),
        &[("name", ColumnType::String), ("engine", ColumnType::String), ("sorting_key", ColumnType::String)],
    )
    .await
    .into_iter()
    .map(|r| match r.as_slice() {
        [Value::String(n), Value::String(e), Value::String(k)] => (n.clone(), (e.clone(), k.clone())),
        other => panic!("{other:?}"),
    })
    .collect()
}

async fn has_column(live: &Live, table: &str, column: &str) -> bool {
    live.count(&format!(
        "SELECT count() AS n FROM system.columns WHERE database = currentDatabase() \
         AND table = '{table}' AND name = '{column}'"
    ))
    .await
        == 1
}

/// Checks every claim of an unstamped refusal against the live schema:
/// what it names present and absent, the legacy objects, the sort key it
/// quotes, the membership tables, the publish_id columns, and each "NOT
/// wrong" sentence. Returns what system.tables holds under our names.
async fn check_unstamped_claims(
    live: &Live,
    refused: &capcat_proto::schema::Refusal,
) -> BTreeMap<String, (String, String)> {
    let t = live.tables();
    let p = t.prefix();
    let message = refused.to_string();
    println!("{message}");
    let Diagnosis::Unstamped(u) = &refused.diagnosis else {
        panic!("expected an unstamped diagnosis: {message}");
    };
    let mut all: Vec<String> = capcat_proto::schema::CatalogObject::ALL
        .iter()
        .map(|o| o.name(t))
        .collect();
    all.push(format!("{p}_pack_commit_log"));
    let live_objects = names_present(live, &all).await;
    for name in &u.present {
        assert!(live_objects.contains_key(name), "claimed present: {name}");
        assert!(message.contains(&format!("`{name}`")), "{name} not named");
    }
    for name in &u.missing {
        assert!(!live_objects.contains_key(name), "claimed absent: {name}");
        assert!(message.contains(&format!("`{name}`")), "{name} not named");
    }
    assert_eq!(
        u.present.len() + u.missing.len(),
        capcat_proto::schema::CatalogObject::ALL.len()
    );
    for name in &u.legacy_present {
        assert!(live_objects.contains_key(name), "claimed legacy: {name}");
    }
    match (&u.sort_key_found, live_objects.get(&t.capture_raw())) {
        (Some(found), Some((_, live_key))) => {
            assert_eq!(
                &found.join(", "),
                live_key,
                "the sort key claimed is not the live one"
            );
            assert!(message.contains(&format!("({live_key})")), "{message}");
            let required = capcat_proto::descriptor::CAPTURE_SORT_KEY.join(", ");
            assert_eq!(u.sort_key_matches(), *live_key == required);
        }
        (None, None) => {}
        (claimed, here) => panic!("sort key claimed {claimed:?}, live {here:?}"),
    }
    for (table, present) in &u.membership_tables {
        assert_eq!(
            *present,
            live_objects.contains_key(table),
            "membership table {table}"
        );
    }
    for (table, carries) in &u.publish_id {
        let here = live_objects.contains_key(table);
        match carries {
            None => assert!(!here, "{table} claimed absent"),
            Some(c) => assert_eq!(*c, has_column(live, table, "publish_id").await, "{table}"),
        }
    }
    for sentence in u.not_wrong() {
        assert!(
            message.contains(&sentence),
            "{sentence:?} missing from {message}"
        );
    }
    live_objects
}

fn refusal(r: Result<EnsureOutcome, CatalogError>) -> Box<capcat_proto::schema::Refusal> {
    match r {
        Err(CatalogError::Schema(SchemaError::Refused(refusal))) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_older_catalog_is_refused_truthfully_and_the_rebuild_restores_every_capture() {
    let Some(live) = Live::start("older_ddl").await else {
        return;
    };
    let c = &live.catalog;
    let t = live.tables().clone();
    let p = t.prefix().to_owned();
    for ddl in older_ddl(&p) {
        live.exec(&ddl).await;
    }
    // The old catalog's rows: two packs, each capture once.
    let ids = capture_ids(8);
    let (p1, p2) = (Uuid::new_v4(), Uuid::new_v4());
    let mut originals = pack_of(TENANT, &ids[..4], 0, "store-a", p1);
    originals.extend(pack_of(TENANT, &ids[4..], 4, "store-b", p2));
    let insert = capcat_proto::index::sql::insert_descriptors(&t, originals.clone());
    ok("old rows", c.transport().execute(&insert).await);
    live.exec(&format!(
        "INSERT INTO {p}_pack_commit_log VALUES (1, 'store-a', '{p1}'), (1, 'store-b', '{p2}')"
    ))
    .await;

    let refused = refusal(c.ensure_schema().await);
    let message = refused.to_string();
    println!("{message}");
    let live_objects = check_unstamped_claims(&live, &refused).await;
    let Diagnosis::Unstamped(u) = &refused.diagnosis else {
        unreachable!("checked above");
    };
    assert!(u.legacy_present.contains(&format!("{p}_pack_commit_log")));
    assert!(!u.sort_key_matches(), "the old key lacks pack identity");
    let mut all: Vec<String> = capcat_proto::schema::CatalogObject::ALL
        .iter()
        .map(|o| o.name(&t))
        .collect();
    all.push(format!("{p}_pack_commit_log"));
    // Nothing was created by the refused ensure.
    assert_eq!(names_present(&live, &all).await, live_objects);

    // The documented rebuild: drop everything it lists, ensure, acquire,
    // reconcile every pack in the object store.
    let Instruction::Rebuild { drops, inventory } = &refused.instruction else {
        panic!("expected the rebuild instruction: {message}");
    };
    assert!(drops.iter().any(|d| d.contains(inventory.as_str())));
    for drop in drops {
        live.exec(drop).await;
    }
    assert!(
        names_present(&live, &all).await.is_empty(),
        "the rebuild's drops left objects"
    );
    assert_eq!(
        ok("ensure", c.ensure_schema().await),
        EnsureOutcome::Created
    );
    let mut lease = ok("acquire", c.acquire_lease("reconciler").await);
    // The object store holds the two packs; reconcile them pack by pack.
    for pack in [p1, p2] {
        let rows: Vec<CaptureDescriptor> = originals
            .iter()
            .filter(|d| d.locator.pack_id == pack)
            .cloned()
            .collect();
        ok("reconcile", c.index(&mut lease, rows).await);
    }
    let head = ok("pin", c.pin().await);
    let restored = ok(
        "resolve",
        c.resolve(TENANT, ids.iter().copied().collect(), head).await,
    );
    for d in &originals {
        assert_eq!(
            restored[&d.capture_id].locator, d.locator,
            "capture {}",
            d.capture_id
        );
    }
    live.finish().await;
}

/// A catalog of this design from before the stamp existed, written out
/// literally: the right descriptor key, the manifest, publish_id on both
/// membership tables, and no stamp table.
fn pre_stamp_ddl(p: &str) -> Vec<String> {
    vec![
        capture_raw_ddl(
            p,
            "tenant_id, experiment_id, run_id, captured_at_ns, capture_id, store_id, pack_id",
        ),
        format!(
            "CREATE TABLE {p}_index_watermark (index_version UInt64, publish_id UUID, \
             published_at_ns UInt64) ENGINE = MergeTree ORDER BY (index_version, publish_id)"
        ),
        format!(
            "CREATE TABLE {p}_snapshot_manifest (index_version UInt64, publish_id UUID, \
             store_id String, pack_id UUID) ENGINE = MergeTree \
             ORDER BY (index_version, publish_id, store_id, pack_id)"
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pre_stamp_catalog_is_refused_saying_what_is_not_wrong() {
    let Some(live) = Live::start("pre_stamp_ddl").await else {
        return;
    };
    for ddl in pre_stamp_ddl(live.tables().prefix()) {
        live.exec(&ddl).await;
    }
    let refused = refusal(live.catalog.ensure_schema().await);
    check_unstamped_claims(&live, &refused).await;
    let Diagnosis::Unstamped(u) = &refused.diagnosis else {
        unreachable!("checked above");
    };
    assert!(u.sort_key_matches());
    assert!(
        u.not_wrong().len() >= 3,
        "sort key, manifest and pairing are all fine here: {:?}",
        u.not_wrong()
    );
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_healthy_catalog_with_its_manifest_truncated_is_refused() {
    let Some((live, mut lease)) = holding("manifest_truncated", "indexer").await else {
        return;
    };
    let c = &live.catalog;
    index_pass(c, &mut lease, fresh_pack(3)).await;
    assert!(matches!(
        ok("ensure again", c.ensure_schema().await),
        EnsureOutcome::Current { .. }
    ));
    live.exec(&format!(
        "TRUNCATE TABLE {}",
        live.tables().snapshot_manifest()
    ))
    .await;
    let refused = refusal(c.ensure_schema().await);
    match &refused.diagnosis {
        Diagnosis::InventoryWithoutMembership { counts, .. } => {
            assert_eq!(counts.effective_membership_rows, 0);
            assert_eq!(counts.inventory_rows, 1);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(refused.instruction, Instruction::Rebuild { .. }));
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stamp_cleared_by_an_operator_is_still_refused_when_tables_are_missing() {
    let Some((live, mut lease)) = holding("stamp_cleared", "indexer").await else {
        return;
    };
    let c = &live.catalog;
    let t = live.tables();
    index_pass(c, &mut lease, fresh_pack(3)).await;
    live.exec(&format!("TRUNCATE TABLE {}", t.schema_version()))
        .await;
    live.exec(&format!("DROP TABLE {}", t.index_watermark()))
        .await;
    let refused = refusal(c.ensure_schema().await);
    match &refused.diagnosis {
        Diagnosis::MissingTables {
            stamp,
            missing,
            holding,
        } => {
            assert_eq!(*stamp, StampSeen::Empty);
            assert_eq!(missing, &BTreeSet::from([t.index_watermark()]));
            // The server's own count of the rows at stake.
            assert_eq!(holding.get(&t.capture_raw()), Some(&Some(3)));
            assert_eq!(holding.get(&t.pack_inventory_raw()), Some(&Some(1)));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        refused
            .to_string()
            .contains(&format!("`{}`", t.index_watermark()))
    );
    live.finish().await;
}

/// An install killed after each of its statements (the stamp table first,
/// then every table, the feed and the views, the stamp row last) is
/// finished by the next `ensure_schema`, and the finished catalog indexes,
/// publishes and reads like a fresh one. The same killed install with one
/// row in a table is refused: rows are at stake.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_install_killed_after_any_statement_is_finished_by_the_next_run() {
    let Some(live) = Live::start("install_killed").await else {
        return;
    };
    let c = &live.catalog;
    let t = live.tables().clone();
    let install = capcat_proto::schema::create_schema(&t);
    for killed_after in 0..=install.len() {
        for statement in &install[..killed_after] {
            live.exec(&statement.sql).await;
        }
        let outcome = ok("ensure after the kill", c.ensure_schema().await);
        let expected = if killed_after == 0 {
            EnsureOutcome::Created
        } else {
            EnsureOutcome::Completed
        };
        assert_eq!(outcome, expected, "killed after {killed_after} statements");
        assert!(
            matches!(
                ok("ensure again", c.ensure_schema().await),
                EnsureOutcome::Current { .. }
            ),
            "killed after {killed_after} statements"
        );
        ok("drop", c.drop_schema().await);
    }

    // The descriptor tables stand with a row in one of them, the rest is
    // missing, the stamp is empty: refused, naming the row.
    for statement in &install[..3] {
        live.exec(&statement.sql).await;
    }
    live.exec(&format!(
        "INSERT INTO {} (tenant_id, capture_id, store_id, pack_id) \
         VALUES ('acme', generateUUIDv4(), 's', generateUUIDv4())",
        t.capture_raw()
    ))
    .await;
    let refused = refusal(c.ensure_schema().await);
    match &refused.diagnosis {
        Diagnosis::MissingTables { stamp, holding, .. } => {
            assert_eq!(*stamp, StampSeen::Empty);
            assert_eq!(
                holding,
                &BTreeMap::from([(t.capture_raw(), Some(1))]),
                "{refused}"
            );
        }
        other => panic!("{other:?}"),
    }
    live.exec(&format!("TRUNCATE TABLE {}", t.capture_raw()))
        .await;

    // Emptied again, it is finished, and works.
    assert_eq!(
        ok("ensure", c.ensure_schema().await),
        EnsureOutcome::Completed
    );
    let mut lease = ok("acquire", c.acquire_lease("indexer").await);
    let version = index_pass(c, &mut lease, fresh_pack(4)).await;
    assert!(version > 0);
    let (_, seen) = walk(c, 10).await;
    assert_eq!(seen.len(), 4);
    live.finish().await;
}

/// Two processes starting on one fresh catalog at once: each may read the
/// other's install half made (an empty stamp table, some tables, no row),
/// and each must finish it rather than refuse it or report a stamped
/// catalog with objects missing. Several rounds, each on
/// its own prefix, because how the two interleave is up to the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_installing_one_catalog_at_once_both_succeed() {
    let Some(live) = Live::start("install_race").await else {
        return;
    };
    let base = live.tables().prefix().to_owned();
    let mut outcomes = BTreeSet::new();
    for round in 0..12 {
        let tables = capcat_proto::Tables::new(&format!("{base}_{round}")).expect("a prefix");
        // A process of its own: its own transport, on the round's prefix.
        let process = || {
            let transport = live.second_catalog(capcat_proto::Config::default());
            Catalog::new(
                Arc::clone(transport.transport()),
                tables.clone(),
                capcat_proto::Config::default(),
            )
        };
        let (first, second) = (process(), process());
        // The second starts a little later each round, so that some
        // rounds find the first's install half made.
        let stagger = Duration::from_millis(round * 4);
        let (a, b) = tokio::join!(first.ensure_schema(), async {
            tokio::time::sleep(stagger).await;
            second.ensure_schema().await
        });
        for outcome in [a, b] {
            let outcome = ok("a concurrent ensure", outcome);
            // A stamp is written after every view, and the guard lists the
            // objects after reading it, so a process that finds the other's
            // stamp finds every view too: reporting one missing would mean
            // it listed before it read the stamp (the race this guards).
            if let EnsureOutcome::Current { recreated_views } = &outcome {
                assert!(
                    recreated_views.is_empty(),
                    "a concurrent install reported views missing from a stamped catalog: {outcome}"
                );
            }
            outcomes.insert(outcome.to_string());
        }
        assert!(matches!(
            ok("ensure after both", first.ensure_schema().await),
            EnsureOutcome::Current { .. }
        ));
        ok("drop", first.drop_schema().await);
    }
    println!("outcomes seen: {outcomes:?}");
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stray_lone_table_is_named() {
    let Some(live) = Live::start("stray_lone_table").await else {
        return;
    };
    let c = &live.catalog;
    let p = live.tables().prefix().to_owned();
    // A leftover of the earlier design, alone.
    live.exec(&format!(
        "CREATE TABLE {p}_pack_commit_log (index_version UInt64, store_id String, pack_id UUID) \
         ENGINE = MergeTree ORDER BY index_version"
    ))
    .await;
    let refused = refusal(c.ensure_schema().await);
    let name = format!("{p}_pack_commit_log");
    match &refused.diagnosis {
        Diagnosis::Leftovers { objects } => assert_eq!(objects, &BTreeSet::from([name.clone()])),
        other => panic!("{other:?}"),
    }
    assert!(refused.to_string().contains(&format!("`{name}`")));
    live.exec(&format!("DROP TABLE {name}")).await;
    // One of our own tables, alone and unstamped, is named as present.
    live.exec(&format!(
        "CREATE TABLE {} (index_version UInt64, claim_id UUID, claimed_at_ns UInt64) \
         ENGINE = MergeTree ORDER BY index_version",
        live.tables().version_claims()
    ))
    .await;
    let refused = refusal(c.ensure_schema().await);
    match &refused.diagnosis {
        Diagnosis::Unstamped(u) => {
            assert_eq!(u.present, BTreeSet::from([live.tables().version_claims()]));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        refused
            .to_string()
            .contains(&format!("`{}`", live.tables().version_claims()))
    );
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stale_writers_release_cannot_revoke_a_healthy_holders_lease() {
    let Some((live, mut stale)) =
        holding_with("stale_release", short_lease_config(), "stale").await
    else {
        return;
    };
    let c = &live.catalog;
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    let healthy_catalog = live.second_catalog(short_lease_config());
    let mut healthy = ok("takeover", healthy_catalog.acquire_lease("healthy").await);
    let before = live.rows_in(&live.tables().publisher_lease()).await;
    // The stale writer shuts down cleanly: its release runs to completion...
    ok("stale release", stale.release().await);
    let after = live.rows_in(&live.tables().publisher_lease()).await;
    assert_eq!(before, after, "the stale release wrote a tombstone");
    // ...and the healthy holder still holds, renews and publishes.
    ok("renew", healthy.renew().await);
    index_pass(&healthy_catalog, &mut healthy, fresh_pack(2)).await;
    // The stale writer cannot come back while the healthy lease is live.
    match c.acquire_lease("stale-again").await {
        Err(CatalogError::Lease(LeaseError::Held { holder, .. })) => assert_eq!(holder, "healthy"),
        other => panic!("{other:?}"),
    }
    ok("healthy release", healthy.release().await);
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mirrored_pack_is_not_admitted_to_a_snapshot_pinned_before_it() {
    let Some((live, mut lease)) = holding("mirrored_pack", "indexer").await else {
        return;
    };
    let c = &live.catalog;
    let ids = capture_ids(9);
    let pack = Uuid::new_v4();
    let w1 = index_pass(c, &mut lease, pack_of(TENANT, &ids, 0, "store-a", pack)).await;
    // A search pinned at W1, one page taken.
    let first = ok("search", c.search(tenant_query(None, 4)).await);
    assert_eq!(first.pinned, w1);
    let cursor: Cursor = first.next.clone().expect("more pages");
    // The mirror: the SAME pack id in a second store, at a later version.
    let w2 = index_pass(c, &mut lease, pack_of(TENANT, &ids, 0, "store-b", pack)).await;
    assert!(w2 > w1);
    // The pinned search continues at W1 and sees only store-a.
    let mut records = first.records;
    let mut next = Some(cursor);
    while let Some(cursor) = next {
        let page = ok("search", c.search(tenant_query(Some(cursor), 4)).await);
        assert_eq!(page.pinned, w1);
        records.extend(page.records);
        next = page.next;
    }
    let records = by_id(records);
    assert_eq!(records.len(), 9);
    assert!(
        records
            .values()
            .all(|d| d.locator.store_id == "store-a" && d.index_version == w1)
    );
    let set: BTreeSet<Uuid> = ids.iter().copied().collect();
    let at_w1 = ok("lookup", c.resolve(TENANT, set.clone(), w1).await);
    assert!(
        at_w1.values().all(|d| d.locator.store_id == "store-a"),
        "the mirror entered W1"
    );
    let at_w2 = ok("lookup", c.resolve(TENANT, set, w2).await);
    assert!(
        at_w2.values().all(|d| d.locator.store_id == "store-b"),
        "newest wins at W2"
    );
    live.finish().await;
}

/// What one publisher's turn in a race trial came to.
#[derive(Debug)]
enum Turn {
    /// Its pass published these captures at this version.
    Published { version: u64, ids: BTreeSet<Uuid> },
    /// It held a lease and its pass was fenced out (the lease was released
    /// or taken over under it): nothing of these captures may ever be
    /// visible.
    FencedOut { ids: BTreeSet<Uuid> },
    /// It held a lease and its pass failed some other way (an ambiguous
    /// statement failure, a lost version race).
    Failed(String),
    /// It could not acquire the lease.
    Idle,
}

/// Acquire attempts a publisher makes at the start of its turn, 1 ms apart:
/// a trial's release lands within a few milliseconds of its start, and
/// taking the lease then is the takeover that races the holder's own pass.
const QUICK_ACQUIRES: u32 = 6;
/// How often a patient acquirer waits out a held term before giving up its
/// turn. A term is held while any row at it is live, so a release that lands
/// beside the holder's own renewal leaves the term held until that renewal
/// expires (one TTL): the acquirer sleeps until the expiry the refusal
/// reports, plus jitter, and tries again.
const HELD_WAITS: u32 = 3;
/// The jitter added to every wait, so two waiting acquirers do not claim
/// the freed term at the same instant (a contested claim costs both of them).
const WAIT_JITTER_MS: u64 = 150;

/// The server's clock (nanoseconds): what a held term's expiry is measured
/// against, so a real clickhouse-server with a skewed clock waits correctly.
async fn server_now_ns(catalog: &Catalog) -> Option<u64> {
    let now = support::raw(
        "SELECT toUInt64(toUnixTimestamp64Nano(now64(9))) AS n",
        capcat_proto::Expect::Rows(vec![capcat_proto::Column {
            name: "n",
            ty: ColumnType::UInt64,
        }]),
    );
    let rows = catalog.transport().execute(&now).await.ok()?;
    match rows.0.as_slice() {
        [row] => match row.as_slice() {
            [Value::UInt64(n)] => Some(*n),
            _ => None,
        },
        _ => None,
    }
}

/// The expiry a refused acquire reports: when the head term stops being held.
fn held_until(e: &CatalogError) -> Option<u64> {
    match e {
        CatalogError::Lease(LeaseError::Held { expires_at_ns, .. }) => Some(*expires_at_ns),
        _ => None,
    }
}

/// One publisher's attempt to take the lease within its turn. An impatient
/// publisher (another one holds the lease and nothing releases it) tries
/// once. A patient one tries [`QUICK_ACQUIRES`] times, then waits out a held
/// term up to [`HELD_WAITS`] times, each time until the reported expiry plus
/// jitter (a contested claim, which reports no expiry, waits the jitter
/// only). Every wait is bounded by one TTL.
async fn acquire_in_turn(
    catalog: &Catalog,
    name: &'static str,
    patient: bool,
    taken: &AtomicBool,
    jitter: &capcat_clickhouse::Jitter,
) -> (Option<LeaseHandle>, u32) {
    let quick = if patient { QUICK_ACQUIRES } else { 1 };
    let mut expiry = None;
    for attempt in 0..quick {
        match catalog.acquire_lease(name).await {
            Ok(h) => {
                taken.store(true, Ordering::Relaxed);
                return (Some(h), 0);
            }
            Err(e) => expiry = held_until(&e),
        }
        if attempt + 1 < quick {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    if !patient {
        return (None, 0);
    }
    let ttl = Duration::from_nanos(catalog.config().lease_ttl_ns());
    for wait in 1..=HELD_WAITS {
        // The other publisher took the lease in this trial: it renews it
        // through its whole pass, so waiting for it within the trial is
        // waiting for nothing.
        if taken.load(Ordering::Relaxed) {
            return (None, wait - 1);
        }
        let until_expiry = match expiry {
            Some(at) => {
                let now = server_now_ns(catalog).await.unwrap_or(at);
                Duration::from_nanos(at.saturating_sub(now)).min(ttl)
            }
            None => Duration::ZERO,
        };
        let spread = Duration::from_millis(1 + jitter.below(WAIT_JITTER_MS));
        tokio::time::sleep(until_expiry + spread).await;
        match catalog.acquire_lease(name).await {
            Ok(h) => {
                taken.store(true, Ordering::Relaxed);
                return (Some(h), wait);
            }
            Err(e) => expiry = held_until(&e),
        }
    }
    (None, HELD_WAITS)
}

/// One publisher's turn in a race trial: (re)acquire the lease if it holds
/// none, then index its pack; a pass that fails drops the handle. Returns
/// the turn and how many held terms it waited out.
async fn publisher_turn(
    catalog: &Catalog,
    handle: &mut Option<LeaseHandle>,
    rows: Vec<CaptureDescriptor>,
    name: &'static str,
    patient: bool,
    taken: &AtomicBool,
    jitter: &capcat_clickhouse::Jitter,
) -> (Turn, u32) {
    let mut waits = 0;
    if handle.is_none() {
        (*handle, waits) = acquire_in_turn(catalog, name, patient, taken, jitter).await;
    }
    let Some(h) = handle.as_mut() else {
        return (Turn::Idle, waits);
    };
    let ids: BTreeSet<Uuid> = rows.iter().map(|d| d.capture_id).collect();
    let turn = match catalog.index(h, rows).await {
        Ok(report) => Turn::Published {
            version: indexed_version(&report),
            ids,
        },
        Err(CatalogError::Index(capcat_proto::IndexError::LeaseLost { .. })) => {
            *handle = None;
            Turn::FencedOut { ids }
        }
        Err(e) => {
            *handle = None;
            Turn::Failed(e.to_string())
        }
    };
    (turn, waits)
}

/// Trials of the two-publisher race (`CAPCAT_RACE_TRIALS`, default 60:
/// 20 to 45 s on either transport, most of it held terms waited out).
fn race_trials() -> u32 {
    std::env::var("CAPCAT_RACE_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60)
}

/// One trial in this many releases the holder's lease mid-pass. The others
/// let the holder publish while the other publisher finds the lease held:
/// with every trial releasing, most trials would wait out a held term.
const RELEASE_EVERY: u32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_publishers_race_and_no_pinned_snapshot_ever_grows() {
    // A 2 s TTL: a term held by a renewal a release landed beside frees up
    // within a trial or two, where the 30 s default would stall the race.
    let Some(live) = Live::start_with("publisher_race", short_lease_config()).await else {
        return;
    };
    let a = live.second_catalog(short_lease_config());
    let b = live.second_catalog(short_lease_config());
    let reader = live.second_catalog(short_lease_config());
    ok("ensure", a.ensure_schema().await);
    let mut handles = [Some(ok("acquire", a.acquire_lease("a").await)), None];
    let catalogs = [a.clone(), b.clone()];
    let jitter = capcat_clickhouse::Jitter::from_os();
    let mut all_ids: BTreeSet<Uuid> = BTreeSet::new();
    let mut never_visible: BTreeSet<Uuid> = BTreeSet::new();
    let mut seen: BTreeMap<u64, BTreeMap<Uuid, CaptureDescriptor>> = BTreeMap::new();
    let (mut published, mut fenced, mut failed, mut idle) = (0u32, 0u32, 0u32, 0u32);
    let (mut taken_over, mut held_waits) = (0u32, 0u32);
    let trials = race_trials();
    let started = std::time::Instant::now();
    for trial in 0..trials {
        // Each publisher indexes a pack of its own. In one trial of
        // RELEASE_EVERY the holder's lease is released concurrently at a
        // random moment and the other publisher takes the lease over and
        // publishes, so guarded INSERTs of a publisher losing its lease
        // overlap the successor's. A publisher without a lease waits out a
        // held term only when nothing else would ever free it: in a release
        // trial, or when nobody holds the lease.
        let packs: Vec<Vec<CaptureDescriptor>> = (0..2)
            .map(|i| {
                pack_of(
                    TENANT,
                    &capture_ids(2),
                    u64::from(trial * 2 + i),
                    "s",
                    Uuid::new_v4(),
                )
            })
            .collect();
        for p in &packs {
            all_ids.extend(p.iter().map(|d| d.capture_id));
        }
        let releases = trial % RELEASE_EVERY == RELEASE_EVERY - 1;
        let holder_lease = handles.iter().flatten().next().map(|h| h.lease().clone());
        let patient = releases || holder_lease.is_none();
        let ids = all_ids.clone();
        let taken = AtomicBool::new(false);
        let [ha, hb] = &mut handles;
        let release = async {
            tokio::time::sleep(Duration::from_micros(u64::from(trial % 7) * 700)).await;
            if let Some(lease) = holder_lease.filter(|_| releases) {
                let mut machine =
                    capcat_proto::Release::new(a.tables().clone(), a.config().clone(), lease);
                let _ = capcat_clickhouse::drive(
                    "race.release",
                    &mut machine,
                    reader.transport().as_ref(),
                    &capcat_clickhouse::Jitter::from_seed(u64::from(trial)),
                )
                .await;
            }
        };
        let observe = async {
            let w = ok("pin", reader.pin().await);
            let found = ok("lookup", reader.get_by_ids(TENANT, ids.clone(), w).await);
            (w, found.records)
        };
        let mut packs = packs.into_iter();
        let ((ra, wa), (rb, wb), (), (w, records)) = tokio::join!(
            publisher_turn(
                &catalogs[0],
                ha,
                packs.next().expect("pack a"),
                "a",
                patient,
                &taken,
                &jitter
            ),
            publisher_turn(
                &catalogs[1],
                hb,
                packs.next().expect("pack b"),
                "b",
                patient,
                &taken,
                &jitter
            ),
            release,
            observe,
        );
        held_waits += wa + wb;
        let published_now = [&ra, &rb]
            .iter()
            .filter(|t| matches!(t, Turn::Published { .. }))
            .count();
        let fenced_now = [&ra, &rb]
            .iter()
            .filter(|t| matches!(t, Turn::FencedOut { .. }))
            .count();
        // The race this test exists for: one publisher fenced out while the
        // other, having taken the lease over, published in the same trial.
        if published_now == 1 && fenced_now == 1 {
            taken_over += 1;
        }
        for turn in [ra, rb] {
            match turn {
                Turn::Published { version, ids } => {
                    published += 1;
                    // ReportedMeansVisible: a Won pass's captures resolve at
                    // its version, every one to its own pack's row.
                    let at_v = ok("lookup", reader.resolve(TENANT, ids.clone(), version).await);
                    assert!(
                        at_v.values().all(|d| d.index_version == version),
                        "trial {trial}: a pass reported version {version} but reads {at_v:?}"
                    );
                }
                Turn::FencedOut { ids } => {
                    fenced += 1;
                    never_visible.extend(ids);
                }
                Turn::Failed(why) => {
                    failed += 1;
                    println!("trial {trial}: a pass failed: {why}");
                }
                Turn::Idle => idle += 1,
            }
        }
        // PinnedSnapshotNeverGrows: a version pinned once resolves the same
        // captures, to the same rows, every time after.
        let previous = seen.entry(w).or_insert_with(|| records.clone());
        assert_eq!(
            previous, &records,
            "trial {trial}: the snapshot at W={w} changed"
        );
        // And one earlier pinned version, re-read with every id minted since.
        let (old_w, old) = seen
            .iter()
            .nth(trial as usize % seen.len())
            .expect("at least the version just pinned");
        let again = ok(
            "lookup",
            reader.get_by_ids(TENANT, all_ids.clone(), *old_w).await,
        );
        assert_eq!(
            &again.records, old,
            "trial {trial}: the snapshot at W={old_w} grew"
        );
    }
    // FencedOutWritesNothing: no capture of a fenced-out pass is visible at
    // the final head (each pack's captures are its own and never retried).
    let head = ok("pin", reader.pin().await);
    let leaked = ok(
        "lookup",
        reader.get_by_ids(TENANT, never_visible, head).await,
    );
    assert!(
        leaked.records.is_empty(),
        "fenced-out passes are visible at W={head}: {:?}",
        leaked.records
    );
    println!(
        "{trials} trials in {:.1} s ({:?}): {published} passes published, {fenced} fenced out \
         ({taken_over} beside their successor's publish), {failed} failed otherwise, {idle} idle, \
         {held_waits} held terms waited out, {} pinned versions observed",
        started.elapsed().as_secs_f64(),
        live.target,
        seen.len()
    );
    assert!(
        taken_over > 0,
        "no pass was ever fenced out beside its successor's publish: the publishers never raced"
    );
    assert!(
        published >= trials / 3,
        "only {published} passes published in {trials} trials: the race barely ran"
    );
    assert!(seen.len() > 1, "the reader never saw the catalog move");
    live.finish().await;
}

// ---- the transport itself ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_transport_binds_values_as_parameters_and_maps_failures() {
    let Some(live) = Live::start("transport_mapping").await else {
        return;
    };
    let t = live.catalog.transport();
    let nasty = "it's a \"quote\", a \\ backslash,\ta tab,\na newline, {braces} and ' OR 1=1 --";
    let pack = Uuid::new_v4();
    let mut stmt = support::raw(
        "SELECT {s:String} AS s, length({pairs:Array(Tuple(String, UUID))}) AS n, \
         tupleElement({pairs:Array(Tuple(String, UUID))}[1], 2) AS u",
        capcat_proto::Expect::Rows(vec![
            capcat_proto::Column {
                name: "s",
                ty: ColumnType::String,
            },
            capcat_proto::Column {
                name: "n",
                ty: ColumnType::UInt64,
            },
            capcat_proto::Column {
                name: "u",
                ty: ColumnType::Uuid,
            },
        ]),
    );
    stmt.params.insert(
        "s".to_owned(),
        capcat_proto::Param::String(nasty.to_owned()),
    );
    stmt.params.insert(
        "pairs".to_owned(),
        capcat_proto::Param::StorePacks(vec![(nasty.to_owned(), pack), ("b".to_owned(), pack)]),
    );
    let rows = ok("select", t.execute(&stmt).await);
    assert_eq!(
        rows.0,
        vec![vec![
            Value::String(nasty.to_owned()),
            Value::UInt64(2),
            Value::Uuid(pack)
        ]]
    );

    // A result whose shape is not the expected one is Malformed.
    let mut wrong = stmt.clone();
    wrong.expect = capcat_proto::Expect::Rows(vec![capcat_proto::Column {
        name: "s",
        ty: ColumnType::String,
    }]);
    assert!(matches!(
        t.execute(&wrong).await,
        Err(capcat_proto::Failure::Malformed { .. })
    ));

    // A server exception keeps its code and text.
    let missing = support::raw(
        "SELECT 1 FROM no_such_table_anywhere",
        capcat_proto::Expect::Nothing,
    );
    match t.execute(&missing).await {
        Err(capcat_proto::Failure::Server { code, message }) => {
            assert_eq!(code, 60, "{message}");
            assert!(message.contains("no_such_table_anywhere"), "{message}");
        }
        other => panic!("expected UNKNOWN_TABLE, got {other:?}"),
    }

    // The statement's max_execution_time reaches the server and its
    // exception is a Timeout.
    let mut slow = support::raw(
        "SELECT sleepEachRow(0.5) FROM numbers(20) SETTINGS max_block_size = 1",
        capcat_proto::Expect::Nothing,
    );
    slow.settings.max_execution_time_s = Some(1);
    assert_eq!(t.execute(&slow).await, Err(capcat_proto::Failure::Timeout));
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_a_transport_failure_and_a_silent_one_a_timeout() {
    // Nothing listens on a port we just bound and dropped.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("an ephemeral port")
        .port();
    let http = capcat_clickhouse::Http::new(
        &format!("http://127.0.0.1:{port}"),
        capcat_clickhouse::HttpOptions::default(),
    )
    .expect("a valid URL");
    let stmt = support::raw("SELECT 1", capcat_proto::Expect::Nothing);
    assert!(matches!(
        capcat_clickhouse::Transport::execute(&http, &stmt).await,
        Err(capcat_proto::Failure::Transport { .. })
    ));
    // A server that accepts and never answers: the request timeout fires.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = silent.local_addr().expect("addr");
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let http = capcat_clickhouse::Http::new(
        &format!("http://{addr}"),
        capcat_clickhouse::HttpOptions {
            request_timeout: Duration::from_millis(300),
            ..capcat_clickhouse::HttpOptions::default()
        },
    )
    .expect("a valid URL");
    assert_eq!(
        capcat_clickhouse::Transport::execute(&http, &stmt).await,
        Err(capcat_proto::Failure::Timeout)
    );
    hold.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_holder_reacquiring_keeps_its_lease_id_and_a_live_lease_is_held() {
    let Some((live, mut a)) = holding("reacquire", "a").await else {
        return;
    };
    let c = &live.catalog;
    let id = a.lease().lease_id;
    let term = a.lease().term;
    ok("reacquire", a.reacquire().await);
    assert_eq!(
        a.lease().lease_id,
        id,
        "a re-acquiring holder became a stranger"
    );
    assert!(a.lease().term > term);
    ok("renew", a.renew().await);
    assert_eq!(a.lease().lease_id, id);
    match live
        .second_catalog(c.config().clone())
        .acquire_lease("b")
        .await
    {
        Err(CatalogError::Lease(LeaseError::Held {
            holder, lease_id, ..
        })) => {
            assert_eq!((holder.as_str(), lease_id), ("a", id));
        }
        other => panic!("{other:?}"),
    }
    ok("release", a.release().await);
    assert!(matches!(
        a.renew().await,
        Err(CatalogError::Released { .. })
    ));
    let b = ok(
        "acquire after release",
        live.second_catalog(c.config().clone())
            .acquire_lease("b")
            .await,
    );
    assert_ne!(b.lease().lease_id, id);
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_constructors_validate_and_join_the_process_engine() {
    // Validation needs no engine.
    assert!(matches!(
        Catalog::http(
            "ftp://ch:21",
            "capcat",
            capcat_clickhouse::HttpOptions::default()
        ),
        Err(CatalogError::Http(
            capcat_clickhouse::HttpError::UnsupportedScheme { .. }
        ))
    ));
    assert!(matches!(
        Catalog::http(
            "http://ch:8123",
            "bad-prefix",
            capcat_clickhouse::HttpOptions::default()
        ),
        Err(CatalogError::Prefix(_))
    ));
    let Some(live) = Live::start("constructors").await else {
        return;
    };
    let Some(engine) = live.engine() else {
        println!("constructors: the target has no in-process engine; validation checked only");
        return;
    };
    // The embedded constructor joins the engine this process already runs...
    let joined = ok(
        "embedded",
        Catalog::embedded(engine.data_path(), live.tables().prefix()),
    );
    assert_eq!(
        ok("ensure", joined.ensure_schema().await),
        EnsureOutcome::Created
    );
    assert!(matches!(
        ok(
            "ensure via the test's catalog",
            live.catalog.ensure_schema().await
        ),
        EnsureOutcome::Current { .. }
    ));
    // ...and refuses a second data path in the same process.
    let other = tempfile::tempdir().expect("a temp dir");
    assert!(matches!(
        Catalog::embedded(other.path(), "capcat"),
        Err(CatalogError::Engine(
            capcat_chdb::ChdbError::OtherPathOpen { .. }
        ))
    ));
    live.finish().await;
}
