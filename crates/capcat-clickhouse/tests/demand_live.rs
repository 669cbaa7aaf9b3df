//! Live tests of demand on a real catalog: the embedded engine (libchdb
//! through capcat-chdb and the `Embedded` transport) and, for the
//! publisher's bound, a real TCP endpoint that accepts and never answers.
//!
//! Needs `CAPCAT_LIBCHDB` (or the engine in the cache dir, see `cargo run -p
//! xtask -- fetch-engine`); the engine tests skip with a message otherwise,
//! unless `CAPCAT_REQUIRE_ENGINES=1`. Each test uses its own table prefix.

mod support;

use std::io::Read as _;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capcat_clickhouse::demand::{
    Admission, CompactionError, DemandPublisher, PublisherCounters, PublisherOptions,
    ScanObservation, compact, read_demand, read_folded,
};
use capcat_clickhouse::{Http, HttpOptions, Transport};
use capcat_proto::demand::{
    DEFAULT_READ_LIMIT, DemandEvent, SkipReason, UnknownVersion, fold, status, storage,
};
use capcat_proto::schema::EnsureOutcome;
use capcat_proto::{ColumnType, Param, Tables, Value};
use support::Live;
use uuid::Uuid;

/// A catalog with the full schema (the demand table among it) under a
/// prefix of its own, its transport and its tables; `None` when the engine
/// is missing.
async fn catalog(test: &str) -> Option<(Live, Arc<dyn Transport>, Tables)> {
    let live = Live::start(test).await?;
    let outcome = live.catalog.ensure_schema().await;
    assert!(
        matches!(outcome, Ok(EnsureOutcome::Created)),
        "{test}: {outcome:?}"
    );
    let transport = Arc::clone(live.catalog.transport());
    let tables = live.tables().clone();
    Some((live, transport, tables))
}

async fn append(transport: &dyn Transport, tables: &Tables, event: &DemandEvent) {
    let stmt = storage::append(tables, event, Uuid::new_v4());
    transport
        .execute(&stmt)
        .await
        .unwrap_or_else(|f| panic!("append of {event:?}: {f}"));
}

async fn rows_of(live: &Live) -> u64 {
    live.count(&format!(
        "SELECT count() AS n FROM {}",
        live.tables().demand_events()
    ))
    .await
}

/// SplitMix64: a seeded, dependency-free stream of test values.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A mixed stream over 2 shards, 3 epochs and 3 sources, fewer than 64
/// generations per shard (below the seal-time cap, where the join is a
/// lattice in every dimension, the age clock included).
fn stream(seed: u64, len: usize) -> Vec<DemandEvent> {
    let mut rng = SplitMix(seed);
    (0..len)
        .map(|_| {
            let shard = if rng.below(2) == 0 { "a" } else { "b" };
            let epoch = 1 + rng.below(3);
            let generation = 1 + rng.below(40);
            match rng.below(3) {
                0 => DemandEvent::writer_sealed(
                    shard,
                    epoch,
                    generation,
                    rng.below(1 << 20),
                    1_000 + generation * 10 + rng.below(5),
                ),
                1 => DemandEvent::executor_merged(shard, epoch, rng.below(generation + 1)),
                _ => {
                    let merged = (rng.below(2) == 0).then(|| rng.below(generation + 1));
                    DemandEvent::scan(shard, epoch, generation, merged)
                }
            }
        })
        .collect()
}

/// Appends `events` from `lanes` concurrent tasks.
async fn append_concurrently(
    transport: &Arc<dyn Transport>,
    tables: &Tables,
    events: &[DemandEvent],
    lanes: usize,
) {
    let mut tasks = Vec::new();
    for lane in 0..lanes {
        let transport = Arc::clone(transport);
        let tables = tables.clone();
        let mine: Vec<DemandEvent> = events.iter().skip(lane).step_by(lanes).cloned().collect();
        tasks.push(tokio::spawn(async move {
            for event in &mine {
                append(transport.as_ref(), &tables, event).await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("an append lane");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_from_capcat_proto_holds_the_demand_table() {
    let Some((live, _transport, tables)) = catalog("schema").await else {
        return;
    };
    let columns = live
        .count(&format!(
            "SELECT count() AS n FROM system.columns WHERE database = currentDatabase() \
             AND table = '{}'",
            tables.demand_events()
        ))
        .await;
    assert_eq!(columns, storage::COLUMNS.len() as u64);
    // The guard accepts the catalog it created, demand table included.
    let again = live.catalog.ensure_schema().await;
    assert!(
        matches!(again, Ok(EnsureOutcome::Current { .. })),
        "{again:?}"
    );
    live.finish().await;
}

/// The seed's etcd test, without compare-and-swap: a writer reporting
/// sealed 25 and an executor reporting merged 18 at the same time both
/// survive; then many writer and executor appends race on two shards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writer_and_executor_appends_both_survive_and_fold_correctly() {
    let Some((live, transport, tables)) = catalog("concurrent").await else {
        return;
    };
    let writer = DemandEvent::writer_sealed("s", 1, 25, 2_500, 10_000);
    let executor = DemandEvent::executor_merged("s", 1, 18);
    let (t1, t2) = (Arc::clone(&transport), Arc::clone(&transport));
    let (tb1, tb2) = (tables.clone(), tables.clone());
    let (w, e) = (writer.clone(), executor.clone());
    let a = tokio::spawn(async move { append(t1.as_ref(), &tb1, &w).await });
    let b = tokio::spawn(async move { append(t2.as_ref(), &tb2, &e).await });
    a.await.expect("writer append");
    b.await.expect("executor append");
    let read = read_folded(transport.as_ref(), &tables, None, DEFAULT_READ_LIMIT)
        .await
        .expect("read");
    let s = &read.folded.shards["s"];
    assert_eq!(s.sealed.map(|m| m.value), Some(25));
    assert_eq!(s.merged.map(|m| m.value), Some(18));
    assert_eq!(s.pending(), 7);

    // Writers seal 1..=30 on two shards while executors merge 1..=20,
    // interleaved over four concurrent lanes.
    let mut events = Vec::new();
    for shard in ["x", "y"] {
        for g in 1..=30u64 {
            events.push(DemandEvent::writer_sealed(shard, 2, g, g * 100, 50_000 + g));
            if g <= 20 {
                events.push(DemandEvent::executor_merged(shard, 2, g));
            }
        }
    }
    append_concurrently(&transport, &tables, &events, 4).await;
    assert_eq!(rows_of(&live).await, 2 + 100);
    let report = read_demand(transport.as_ref(), &tables, 60_000)
        .await
        .expect("read_demand");
    assert!(!report.truncated);
    for shard in ["x", "y"] {
        let st = &report.status.shards[shard];
        assert_eq!(st.pending_packs, 10, "{shard}");
        assert_eq!(st.pending_bytes, 3_000, "{shard}");
        // The oldest pending generation is 21, sealed at 50_021.
        assert_eq!(st.oldest_pending_ms, Some(60_000 - 50_021), "{shard}");
    }
    assert_eq!(report.status.total.pending_packs, 7 + 10 + 10);
    assert_eq!(report.status.total.pending_bytes, 2_500 + 3_000 + 3_000);
    assert_eq!(report.status.total.oldest_pending_ms, Some(60_000 - 10_000));
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_from_storage_equals_the_in_memory_fold_age_clock_included() {
    let Some((live, transport, tables)) = catalog("rebuild").await else {
        return;
    };
    // The seed's round 4: merged 40, a new-epoch writer seals 60.
    let mut events = vec![
        DemandEvent::writer_sealed("r4", 1, 40, 400, 10),
        DemandEvent::executor_merged("r4", 1, 40),
        DemandEvent::writer_sealed("r4", 2, 41, 500, 10),
        DemandEvent::writer_sealed("r4", 2, 60, 600, 20),
    ];
    events.extend(stream(0x00de_3a4d, 200));
    append_concurrently(&transport, &tables, &events, 4).await;
    let read = read_folded(transport.as_ref(), &tables, None, DEFAULT_READ_LIMIT)
        .await
        .expect("read");
    let in_memory = fold(&events);
    assert_eq!(read.folded, in_memory);
    assert!(read.folded.skipped.is_empty());
    let now = 100_000;
    let report = read_demand(transport.as_ref(), &tables, now)
        .await
        .expect("read_demand");
    assert_eq!(report.status, status(&in_memory, now));
    let r4 = &report.status.shards["r4"];
    assert_eq!(r4.pending_packs, 20);
    // Generation 41 was sealed at 10 ms: the age clock survives storage
    // (the seed's rebuild said 20 ms here).
    assert_eq!(r4.oldest_pending_ms, Some(now - 10));
    assert!(
        report
            .status
            .shards
            .values()
            .filter(|s| s.oldest_pending_ms.is_some())
            .count()
            >= 2,
        "the stream must exercise the age clock: {report:?}"
    );
    // One shard's read folds that shard only.
    let one = read_folded(
        transport.as_ref(),
        &tables,
        Some("r4".to_owned()),
        DEFAULT_READ_LIMIT,
    )
    .await
    .expect("read one shard");
    assert_eq!(one.folded.shards.len(), 1);
    assert_eq!(one.folded.shards["r4"], in_memory.shards["r4"]);
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_v999_record_is_untouched_by_compaction_and_ignored_by_the_fold() {
    let Some((live, transport, tables)) = catalog("v999").await else {
        return;
    };
    let events = vec![
        DemandEvent::writer_sealed("s", 1, 10, 1_000, 500),
        DemandEvent::writer_sealed("s", 1, 12, 1_200, 700),
        DemandEvent::executor_merged("s", 1, 8),
        DemandEvent::writer_sealed("t", 3, 5, 50, 900),
        DemandEvent::scan("t", 3, 6, Some(2)),
    ];
    for event in &events {
        append(transport.as_ref(), &tables, event).await;
    }
    // A row written by a newer build: the real append statement, with the
    // version column and the text of a schema this build does not know.
    let future_id = Uuid::new_v4();
    let future_text = r#"{"v":999,"sealed":[1,2,3],"meaning":"unknown to v1"}"#;
    let mut future = storage::append(
        &tables,
        &DemandEvent::writer_sealed("s", 9, 1_000_000, 1, 1),
        future_id,
    );
    future.params.insert("v".to_owned(), Param::UInt64(999));
    future
        .params
        .insert("record".to_owned(), Param::String(future_text.to_owned()));
    transport.execute(&future).await.expect("v999 append");

    let now = 10_000;
    let expected = status(&fold(&events), now);
    let before = read_demand(transport.as_ref(), &tables, now)
        .await
        .expect("read_demand");
    assert_eq!(before.status.shards, expected.shards);
    assert_eq!(before.status.total, expected.total);
    assert_eq!(
        before.status.skipped.len(),
        1,
        "{:?}",
        before.status.skipped
    );
    let skipped = &before.status.skipped[0];
    assert_eq!(skipped.shard_id, "s");
    assert_eq!(
        skipped.reason,
        SkipReason::UnknownVersion(UnknownVersion {
            found: 999,
            known: 1
        })
    );

    let report = compact(transport.as_ref(), &tables, DEFAULT_READ_LIMIT)
        .await
        .expect("compaction");
    assert_eq!(report.rows_read, 6);
    assert_eq!(report.rows_unreadable, 1);
    assert_eq!(report.shards_compacted, 2);
    assert_eq!(report.rows_deleted, 5);
    // Two compaction rows and the untouched v999 row.
    assert_eq!(rows_of(&live).await, 3);
    assert_eq!(
        live.rows(
            &format!(
                "SELECT event_id, record FROM {} WHERE v = 999",
                tables.demand_events()
            ),
            &[
                ("event_id", ColumnType::Uuid),
                ("record", ColumnType::String)
            ],
        )
        .await,
        vec![vec![
            Value::Uuid(future_id),
            Value::String(future_text.to_owned())
        ]]
    );
    let after = read_demand(transport.as_ref(), &tables, now)
        .await
        .expect("read_demand after compaction");
    assert_eq!(after, before);

    // A second run finds one readable row per shard: nothing to do.
    let again = compact(transport.as_ref(), &tables, DEFAULT_READ_LIMIT)
        .await
        .expect("second compaction");
    assert_eq!((again.shards_compacted, again.rows_deleted), (0, 0));
    assert_eq!(rows_of(&live).await, 3);
    live.finish().await;
}

/// A TCP endpoint that accepts connections and never answers: a catalog
/// stalled for real, below HTTP. Counts the connections it accepted and
/// keeps them open for the life of the test process.
fn stalled_endpoint() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
    let addr = listener.local_addr().expect("local address");
    let accepted = Arc::new(AtomicUsize::new(0));
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let counter = Arc::clone(&accepted);
    std::thread::spawn(move || {
        // Bounded: a test opens a handful of connections.
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, Ordering::SeqCst);
            // Read what arrives (so the request is sent in full), answer nothing.
            let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
            let _ = stream.read(&mut [0u8; 4096]);
            held.lock().expect("held sockets").push(stream);
        }
    });
    (format!("http://{addr}"), accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publisher_drops_and_counts_when_full_against_a_stalled_endpoint() {
    let (url, accepted) = stalled_endpoint();
    let transport: Arc<dyn Transport> =
        Arc::new(Http::new(&url, HttpOptions::default()).expect("an http transport"));
    let tables = Tables::new("dl_stalled").expect("prefix");
    let options = PublisherOptions {
        timeout: Duration::from_millis(500),
        slots: 4,
    };
    let publisher = DemandPublisher::new(transport, tables, options).expect("publisher");
    let mut admissions = Vec::new();
    for g in 1..=4 {
        admissions.push(publisher.writer_sealed("s", 1, g, 10, 1_000 + g));
    }
    admissions.push(publisher.executor_merged("s", 1, 2));
    admissions.push(publisher.publish_scan(vec![ScanObservation {
        shard_id: "s".to_owned(),
        epoch: 1,
        sealed: 4,
        merged: None,
    }]));
    assert_eq!(
        admissions,
        [
            Admission::Accepted,
            Admission::Accepted,
            Admission::Accepted,
            Admission::Accepted,
            Admission::DroppedFull,
            Admission::DroppedFull,
        ]
    );
    assert_eq!(publisher.in_flight(), 4);
    assert_eq!(publisher.counters().dropped_full, 2);
    assert!(
        publisher.drain(Duration::from_secs(30)).await,
        "every slot comes back after the timeout"
    );
    assert_eq!(
        publisher.counters(),
        PublisherCounters {
            published: 0,
            dropped_full: 2,
            failed: 0,
            timed_out: 4,
            scan_unchanged: 0,
            scan_abandoned: 0,
        }
    );
    assert!(
        accepted.load(Ordering::SeqCst) >= 1,
        "the appends reached the stalled endpoint"
    );
    // Freed slots take new events again.
    assert_eq!(
        publisher.executor_merged("s", 1, 3),
        Admission::Accepted,
        "a slot is free after the drain"
    );
    assert!(publisher.drain(Duration::from_secs(30)).await);
    assert_eq!(publisher.counters().timed_out, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publisher_publishes_writer_and_executor_reports_and_counts_failures() {
    let Some((live, transport, tables)) = catalog("publish").await else {
        return;
    };
    let publisher =
        DemandPublisher::new(Arc::clone(&transport), tables.clone(), Default::default())
            .expect("publisher");
    assert_eq!(
        publisher.writer_sealed("s", 1, 7, 700, 1_000),
        Admission::Accepted
    );
    assert_eq!(publisher.executor_merged("s", 1, 3), Admission::Accepted);
    assert!(publisher.drain(Duration::from_secs(60)).await);
    assert_eq!(
        publisher.counters(),
        PublisherCounters {
            published: 2,
            ..PublisherCounters::default()
        }
    );
    let report = read_demand(transport.as_ref(), &tables, 4_000)
        .await
        .expect("read_demand");
    let s = &report.status.shards["s"];
    assert_eq!(
        (s.pending_packs, s.pending_bytes, s.oldest_pending_ms),
        (4, 700, Some(3_000))
    );

    // A catalog without the table: the engine refuses, the publisher counts.
    let missing = Tables::new("dl_no_such_catalog").expect("prefix");
    let orphan = DemandPublisher::new(transport, missing, Default::default()).expect("publisher");
    assert_eq!(orphan.executor_merged("s", 1, 1), Admission::Accepted);
    assert!(orphan.drain(Duration::from_secs(60)).await);
    assert_eq!(
        orphan.counters(),
        PublisherCounters {
            failed: 1,
            ..PublisherCounters::default()
        }
    );
    live.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_can_only_raise_and_writes_nothing_when_it_raises_nothing() {
    let Some((live, transport, tables)) = catalog("scan").await else {
        return;
    };
    append(
        transport.as_ref(),
        &tables,
        &DemandEvent::writer_sealed("s", 1, 10, 1_000, 100),
    )
    .await;
    append(
        transport.as_ref(),
        &tables,
        &DemandEvent::executor_merged("s", 1, 8),
    )
    .await;
    let publisher =
        DemandPublisher::new(Arc::clone(&transport), tables.clone(), Default::default())
            .expect("publisher");
    let observe = |sealed, merged| ScanObservation {
        shard_id: "s".to_owned(),
        epoch: 1,
        sealed,
        merged,
    };
    // An older sealed and an older merged mark: nothing to raise, nothing written.
    assert_eq!(
        publisher.publish_scan(vec![observe(9, Some(5)), observe(10, None)]),
        Admission::Accepted
    );
    assert!(publisher.drain(Duration::from_secs(60)).await);
    assert_eq!(publisher.counters().scan_unchanged, 2);
    assert_eq!(rows_of(&live).await, 2);

    // A newer sealed mark with an older merged one, and a shard nobody
    // reported: both appended; the merged mark the scan did not know stays.
    let fresh = ScanObservation {
        shard_id: "fresh".to_owned(),
        epoch: 4,
        sealed: 3,
        merged: Some(1),
    };
    assert_eq!(
        publisher.publish_scan(vec![observe(12, Some(2)), fresh, observe(12, Some(2))]),
        Admission::Accepted
    );
    assert!(publisher.drain(Duration::from_secs(60)).await);
    assert_eq!(
        publisher.counters(),
        PublisherCounters {
            published: 2,
            scan_unchanged: 3,
            ..PublisherCounters::default()
        }
    );
    assert_eq!(rows_of(&live).await, 4);
    let report = read_demand(transport.as_ref(), &tables, 1_000)
        .await
        .expect("read_demand");
    assert_eq!(report.status.shards["s"].pending_packs, 4);
    assert_eq!(report.status.shards["fresh"].pending_packs, 2);
    live.finish().await;
}

/// The real engine underneath, with every statement of one name refused
/// before it is sent: a catalog that fails at one chosen step. It evaluates
/// no SQL and applies no guard; the engine decides everything else.
#[derive(Debug)]
struct RefuseNamed {
    inner: Arc<dyn Transport>,
    name: &'static str,
}

impl Transport for RefuseNamed {
    fn execute<'a>(
        &'a self,
        stmt: &'a capcat_proto::Statement,
    ) -> capcat_clickhouse::BoxFuture<'a, Result<capcat_proto::Rows, capcat_proto::Failure>> {
        if stmt.name == self.name {
            return Box::pin(async {
                Err(capcat_proto::Failure::Transport {
                    message: "refused by the test".to_owned(),
                })
            });
        }
        self.inner.execute(stmt)
    }

    fn kind(&self) -> &'static str {
        "refuse-named"
    }
}

/// Compaction appends every folded row before it deletes anything: a failed
/// append deletes nothing, a failed delete leaves old rows beside their
/// compaction rows, and neither changes what the catalog reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_compaction_step_loses_nothing() {
    let Some((live, transport, tables)) = catalog("failed_compaction").await else {
        return;
    };
    let mut events = Vec::new();
    for shard in ["a", "b"] {
        for g in 1..=5 {
            events.push(DemandEvent::writer_sealed(shard, 1, g, g * 10, 100 * g));
        }
        events.push(DemandEvent::executor_merged(shard, 1, 2));
    }
    for event in &events {
        append(transport.as_ref(), &tables, event).await;
    }
    let now = 5_000;
    let before = read_demand(transport.as_ref(), &tables, now)
        .await
        .expect("read_demand");
    assert_eq!(before.status, status(&fold(&events), now));

    let no_append = RefuseNamed {
        inner: Arc::clone(&transport),
        name: "demand.append",
    };
    let error = compact(&no_append, &tables, DEFAULT_READ_LIMIT)
        .await
        .expect_err("the append is refused");
    assert!(
        matches!(
            error,
            CompactionError::Append {
                index: 0,
                of: 2,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(rows_of(&live).await, 12, "nothing deleted, nothing added");

    let no_delete = RefuseNamed {
        inner: Arc::clone(&transport),
        name: "demand.compaction_delete",
    };
    let error = compact(&no_delete, &tables, DEFAULT_READ_LIMIT)
        .await
        .expect_err("the delete is refused");
    assert!(
        matches!(error, CompactionError::Delete { deleted: 0, .. }),
        "{error:?}"
    );
    assert_eq!(
        rows_of(&live).await,
        14,
        "two compaction rows beside the old"
    );
    let after = read_demand(transport.as_ref(), &tables, now)
        .await
        .expect("read_demand");
    assert_eq!(after, before, "the join absorbs the compaction rows");

    // A clean rerun folds everything, the earlier compaction rows included.
    let report = compact(transport.as_ref(), &tables, DEFAULT_READ_LIMIT)
        .await
        .expect("compaction");
    assert_eq!((report.shards_compacted, report.rows_deleted), (2, 14));
    assert_eq!(rows_of(&live).await, 2);
    let last = read_demand(transport.as_ref(), &tables, now)
        .await
        .expect("read_demand");
    assert_eq!(last, before);
    live.finish().await;
}
