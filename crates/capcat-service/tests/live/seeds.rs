//! One test per seed bug (002: the storage service).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use capcat_service::{FlushError, Service};

use crate::harness::{self, Mode};

/// Seed: "flush(timeout) took the cycle lock with no deadline ... a catalog
/// that stopped answering held flush past its deadline (still blocked after
/// 20 s)". flush(1 s) against a stalled catalog returns within 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn flush_against_a_stalled_catalog_returns_within_three_seconds() {
    let Some(world) = harness::scenario("flush_stalled", |raw| {
        // Longer than the flush: a cycle stuck on the catalog must not hold it.
        raw.catalog_request_timeout_s = 20.0;
    })
    .await
    else {
        return;
    };
    let service = world.start().await;
    world.catalog.proxy.set(Mode::Stall);
    harness::stage(service.spool(), "stalled", 3);
    // Let a cycle get stuck on the stalled catalog first.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let flushed = service.flush(Duration::from_secs(1)).await;
    let took = started.elapsed();
    assert!(
        matches!(flushed, Err(FlushError::NotDrained { .. })),
        "{flushed:?}"
    );
    assert!(took < Duration::from_secs(3), "flush(1 s) took {took:?}");
    // Dropping the running service (no close) must not block this thread.
    let dropped = Instant::now();
    drop(service);
    assert!(
        dropped.elapsed() < Duration::from_secs(1),
        "drop blocked for {:?}",
        dropped.elapsed()
    );
    world.catalog.proxy.set(Mode::Forward);
}

/// Seed: "One pack too big for the indexer's batch budget stopped all
/// indexing ... a later small pack was never indexed". The poison pack is set
/// aside at once, the later pack indexes, and the next flush names the
/// poison pack once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_poison_pack_is_set_aside_while_later_packs_index() {
    let Some(world) = harness::scenario("poison", |raw| raw.index_batch_budget_bytes = 4000).await
    else {
        return;
    };
    let service = world.start().await;
    let (poison, _) = harness::stage(service.spool(), "poison", 40);
    let (_, payloads) = harness::stage(service.spool(), "small", 2);
    let flushed = service.flush(Duration::from_secs(20)).await;
    match &flushed {
        Err(FlushError::SetAside { packs }) => assert_eq!(packs, &vec![poison.info.pack_id]),
        other => panic!("expected the poison pack named, got {other:?}"),
    }
    assert_eq!(world.read_back_run("small", &payloads).await, 2);
    world.assert_set_aside("poison", poison.info.pack_id).await;
    let snapshot = service.snapshot();
    assert_eq!(snapshot.rejected_packs.len(), 1);
    assert_eq!(snapshot.rejected_packs[0].pack_id, poison.info.pack_id);
    // Named once: the next flush is clean.
    service
        .flush(Duration::from_secs(5))
        .await
        .expect("second flush");
    let close = service.close().await;
    assert!(close.lease_released);
}

/// Seed: "the split path, which every normal backlog larger than the budget
/// takes, had none [test]". Ten two-record packs under a budget the batch
/// exceeds but each pack fits: all ten index, with batch_splits > 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_over_the_budget_splits_until_every_pack_indexes() {
    let Some(world) = harness::scenario("split", |raw| raw.index_batch_budget_bytes = 2000).await
    else {
        return;
    };
    // Staged before start, so the first cycle uploads all ten as one batch.
    let spool = world.spool();
    let mut expected = BTreeMap::new();
    for _ in 0..10 {
        expected.extend(harness::stage(&spool, "split", 2).1);
    }
    let service = world.start().await;
    service.flush(Duration::from_secs(30)).await.expect("flush");
    let snapshot = service.snapshot();
    assert!(snapshot.batch_splits > 0, "{snapshot:?}");
    assert!(snapshot.rejected_packs.is_empty(), "{snapshot:?}");
    assert_eq!(snapshot.indexed, 10);
    // Every stage of the flush ran and was timed.
    let t = snapshot.stage_time;
    assert!(
        t.read_verify_us > 0
            && t.upload_us > 0
            && t.head_verify_us > 0
            && t.describe_us > 0
            && t.index_us > 0,
        "{t:?}"
    );
    assert_eq!(world.read_back_run("split", &expected).await, 20);
    service.close().await;
}

/// Seed: "A pack whose index then fails is kept on a retry list, and flush()
/// reports drained only when that list is empty" and "run_cycle now retries
/// the owed index first and uploads only once nothing is owed, so during an
/// outage new packs stay in the spool". The catalog is cut by a real TCP
/// switch; flush reports not drained and the later pack stays in the spool;
/// restored, both index and read back byte-identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_catalog_cut_mid_run_keeps_later_packs_in_the_spool_then_everything_indexes() {
    let Some(world) = harness::scenario("cut", |_| {}).await else {
        return;
    };
    let service = world.start().await;
    world.catalog.proxy.set(Mode::Cut);
    let (_, mut expected) = harness::stage(service.spool(), "cut", 3);
    harness::eventually(
        "the first pack to be uploaded and owed",
        Duration::from_secs(10),
        || service.snapshot().pending_index == 1,
    )
    .await;
    let (second, payloads) = harness::stage(service.spool(), "cut", 3);
    expected.extend(payloads);
    let flushed = service.flush(Duration::from_secs(1)).await;
    assert!(
        matches!(flushed, Err(FlushError::NotDrained { pending: 2, .. })),
        "{flushed:?}"
    );
    assert!(
        service.spool().is_ready(second.info.pack_id),
        "the second pack left the spool during the outage"
    );
    assert_eq!(service.snapshot().pending_index, 1);
    assert_eq!(service.snapshot().uploaded, 1);
    world.catalog.proxy.set(Mode::Forward);
    service
        .flush(Duration::from_secs(30))
        .await
        .expect("flush after the catalog is back");
    assert_eq!(world.read_back_run("cut", &expected).await, 6);
    let snapshot = service.snapshot();
    assert!(
        snapshot.rejected_packs.is_empty(),
        "an outage counts against no pack: {snapshot:?}"
    );
    service.close().await;
}

/// Seed: "The reconciler validates each uncommitted pack's HEAD metadata ...
/// a pack the pass could not read looked like one it had rightly ignored"
/// and "One foreign object under v1/ otherwise failed the whole
/// committed-ids query". A pack uploaded but never indexed (the process
/// died) is found at start and indexed; foreign objects are skipped and
/// counted, not errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reconcile_at_start_indexes_orphans_and_skips_foreign_objects() {
    let Some(world) = harness::scenario("reconcile", |_| {}).await else {
        return;
    };
    let (_, payloads) = harness::upload_orphan(&world.store, &world.cfg, "orphan", 4).await;
    // Foreign: not a canonical uuid key, a simple-uuid key, and a pack key
    // without metadata.
    harness::put_foreign_objects(&world.store, &world.cfg).await;
    let service = world.start().await;
    service.flush(Duration::from_secs(20)).await.expect("flush");
    let snapshot = service.snapshot();
    assert_eq!(snapshot.reconcile_skipped_objects, 3, "{snapshot:?}");
    assert_eq!(snapshot.reconcile_head_errors, 0, "{snapshot:?}");
    assert_eq!(snapshot.reconcile_recovered, 1, "{snapshot:?}");
    assert_eq!(world.read_back_run("orphan", &payloads).await, 4);
    service.close().await;
}

/// Seed: "With S3 down and ClickHouse healthy, a rival took the lease at
/// about 106 s" (the lease was renewed only inside a cycle, and failed cycles
/// back off to the TTL). The keep-alive renews every TTL/3 on its own task,
/// so while the store is down a rival retrying start() is always refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_store_down_the_lease_is_still_renewed_and_a_rival_cannot_take_it() {
    let test = "lease_s3_down";
    let Some((world, server)) = harness::s3_scenario(test, |raw| {
        raw.lease_ttl_s = 3.0;
        raw.publish_timeout_s = 1.0;
        raw.max_backoff_s = 30.0;
    })
    .await
    else {
        return;
    };
    let (cfg, store) = (&world.cfg, &world.store);
    let service = world.start().await;
    server.proxy.set(Mode::Cut);
    let (sealed, _) = harness::stage(service.spool(), "down", 2);
    harness::stage(service.spool(), "down", 2);
    harness::stage(service.spool(), "down", 2);
    let mut rival_raw = harness::config(test, world.root.path());
    rival_raw.catalog_prefix = cfg.raw.catalog_prefix.clone();
    rival_raw.holder = "rival".to_owned();
    rival_raw.spool_dir = world.root.path().join("rival-spool");
    rival_raw.lease_ttl_s = 3.0;
    rival_raw.publish_timeout_s = 1.0;
    let rival_cfg = rival_raw.validate().unwrap();
    // Four TTLs of rivalry: a lease renewed only by cycles would lapse.
    let until = Instant::now() + Duration::from_secs(12);
    let mut attempts = 0;
    while Instant::now() < until {
        attempts += 1;
        let rival = Service::start(
            rival_cfg.clone(),
            store.clone(),
            world.catalog.direct.clone(),
        )
        .await;
        match rival {
            Err(capcat_service::StartError::Lease(_)) => {}
            Ok(_) => panic!("a rival took the lease after {attempts} attempts with the store down"),
            Err(other) => panic!("unexpected: {other}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let snapshot = service.snapshot();
    assert!(snapshot.lease_renewals >= 3, "{snapshot:?}");
    assert!(
        snapshot.failed_cycles > 0,
        "the store outage never failed a cycle: {snapshot:?}"
    );
    assert!(service.spool().is_ready(sealed.info.pack_id));
    // The first PUT failed, so all three packs are still counted as ready.
    harness::eventually("three packs counted ready", Duration::from_secs(5), || {
        service.snapshot().spool_ready == 3
    })
    .await;
    server.proxy.set(Mode::Forward);
    service
        .flush(Duration::from_secs(40))
        .await
        .expect("flush after the store is back");
    service.close().await;
}
