//! The reconciler against the real S3 test server.

use std::time::Duration;

use capcat_s3::{PackKey, PackStore};

use crate::harness;

/// Seed: "A HEAD that failed -- a 5xx, a 403, a timeout -- returns
/// found=false, so it took the same branch: counted in
/// reconcile_skipped_objects, with no error recorded ... A HEAD error is
/// now recorded ... and counted in a new snapshot counter,
/// reconcile_head_errors ... The object is left for the next pass."
///
/// The fault is real: the S3 test server (s3s-fs) keeps each object's ETag
/// and checksums in a sidecar file under its root, which HEAD reads and
/// LIST does not. The test overwrites the orphan pack's sidecar with
/// garbage, so the real server lists the key and answers its HEAD with a
/// 500, while every other key is untouched. Each pass counts the orphan
/// as a HEAD error and the three foreign objects as skipped, never the one
/// as the other; the key stays in the store; once the sidecar is repaired
/// the next periodic pass recovers the pack and it indexes byte-identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_head_is_counted_apart_from_foreign_objects_and_retried_next_pass() {
    let Some((world, server)) = harness::s3_scenario("head_error", |raw| {
        raw.reconcile_on_start = true;
        raw.reconcile_interval_s = Some(0.3);
    })
    .await
    else {
        return;
    };
    let (orphan, payloads) = harness::upload_orphan(&world.store, &world.cfg, "orphan", 4).await;
    let foreign = harness::put_foreign_objects(&world.store, &world.cfg).await;
    let key = PackKey::new(world.cfg.prefix.clone(), orphan.info.pack_id).object_key();
    let sidecar = server.internal_info_path(key.as_str());
    let intact = std::fs::read(&sidecar).expect("the server keeps a sidecar for the orphan");
    std::fs::write(&sidecar, b"{ this is not json").unwrap();
    // The fault is the server's own answer, and only for this key.
    let head = world.store.head(&key).await;
    assert!(
        head.as_ref()
            .is_err_and(|e| e.class() != capcat_s3::ErrorClass::NotFound),
        "{head:?}"
    );

    let service = world.start().await;
    let first = service.snapshot();
    assert_eq!(first.reconcile_head_errors, 1, "{first:?}");
    assert_eq!(first.reconcile_skipped_objects, foreign, "{first:?}");
    assert_eq!(first.reconcile_recovered, 0, "{first:?}");
    assert!(first.rejected_packs.is_empty(), "{first:?}");
    let last_error = first
        .last_error
        .clone()
        .expect("the HEAD failure is recorded");
    assert_eq!(
        last_error.kind,
        capcat_service::ErrorKind::Reconcile,
        "{last_error:?}"
    );
    assert!(last_error.transient, "{last_error:?}");
    assert!(
        last_error.message.contains(key.as_str()),
        "last_error must name the key: {last_error:?}"
    );

    // Later passes meet the same fault: one more HEAD error and the same
    // foreign objects skipped each time (both move under one lock).
    harness::eventually("two more reconcile passes", Duration::from_secs(20), || {
        service.snapshot().reconcile_head_errors >= 3
    })
    .await;
    let later = service.snapshot();
    assert_eq!(
        later.reconcile_skipped_objects,
        foreign * later.reconcile_head_errors,
        "a HEAD error was counted as a skipped object: {later:?}"
    );
    assert_eq!(later.reconcile_recovered, 0, "{later:?}");
    assert!(later.rejected_packs.is_empty(), "{later:?}");
    assert!(
        server
            .data
            .path()
            .join(&server.bucket)
            .join(key.as_str())
            .exists(),
        "the pack must stay in the store"
    );

    std::fs::write(&sidecar, &intact).unwrap();
    harness::eventually(
        "the repaired pack recovered by the next pass",
        Duration::from_secs(20),
        || service.snapshot().reconcile_recovered == 1,
    )
    .await;
    service.flush(Duration::from_secs(20)).await.expect("flush");
    assert_eq!(world.read_back_run("orphan", &payloads).await, 4);
    let done = service.snapshot();
    assert!(done.rejected_packs.is_empty(), "{done:?}");
    service.close().await;
}

/// A pack stored before format version 2 (format version 1, metadata with
/// its whole-object SHA-256 and no CRC-64/NVME) is a Capcat pack, not a
/// foreign object: the reconciler verifies it by its SHA-256, the service
/// reads it with the version-1 rules and indexes it, and its records read
/// back byte-identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_version_1_pack_stored_before_the_upgrade_is_recovered_not_skipped() {
    let Some((world, _server)) = harness::s3_scenario("version_1_orphan", |raw| {
        raw.reconcile_on_start = true;
    })
    .await
    else {
        return;
    };
    let (pack_id, payloads) =
        harness::upload_version_1_orphan(&world.store, &world.cfg, "old", 4).await;
    let key = PackKey::new(world.cfg.prefix.clone(), pack_id).object_key();
    let head = world.store.head(&key).await.expect("head");
    assert_eq!(head.metadata.get(capcat_s3::metadata::CRC64NVME), None);

    let service = world.start().await;
    harness::eventually(
        "the version-1 pack recovered",
        Duration::from_secs(20),
        || service.snapshot().reconcile_recovered == 1,
    )
    .await;
    service.flush(Duration::from_secs(20)).await.expect("flush");
    assert_eq!(world.read_back_run("old", &payloads).await, 4);
    let done = service.snapshot();
    assert_eq!(done.reconcile_skipped_objects, 0, "{done:?}");
    assert!(done.rejected_packs.is_empty(), "{done:?}");
    service.close().await;
}
