//! Spool files the uploader will not upload: bytes that are not a valid
//! pack, and a valid pack under another pack's name. Each is renamed
//! `.rejected` beside the spool (kept, never deleted) and named by the
//! flush, while the packs listed before and after it upload and index.
//! The uploader reads each file back while the one before it uploads, so
//! this is also the test that reading ahead keeps the listing's outcomes.

use std::collections::BTreeSet;
use std::time::Duration;

use capcat_service::FlushError;
use uuid::Uuid;

use crate::harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn spool_files_that_are_not_their_pack_are_set_aside_and_the_rest_index() {
    let Some(world) = harness::scenario("spool_files", |_| {}).await else {
        return;
    };
    let spool = world.spool();
    let (_, first) = harness::stage(&spool, "first", 3);
    // A pack with its last payload byte flipped: its record digest fails.
    let (corrupt, _) = harness::pack("corrupt", 2, 8);
    let mut bytes = corrupt.bytes.to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    let corrupt_id = corrupt.info.pack_id;
    spool.write_sealed(corrupt_id, &bytes).expect("stage");
    // A valid pack under a name that is not its id.
    let (holds, _) = harness::pack("mislabeled", 2, 8);
    let named = Uuid::new_v4();
    spool.write_sealed(named, &holds.bytes).expect("stage");
    let (_, last_run) = harness::stage(&spool, "last", 3);

    let service = world.start().await;
    match service.flush(Duration::from_secs(20)).await {
        Err(FlushError::SetAside { packs }) => assert_eq!(
            packs.into_iter().collect::<BTreeSet<_>>(),
            BTreeSet::from([corrupt_id, named])
        ),
        other => panic!("expected both refused files named, got {other:?}"),
    }
    assert_eq!(world.read_back_run("first", &first).await, 3);
    assert_eq!(world.read_back_run("last", &last_run).await, 3);
    for id in [corrupt_id, named] {
        let ready = spool.ready_path(id);
        assert!(!ready.exists(), "{} still offered", ready.display());
        assert!(
            ready.with_extension("rejected").exists(),
            "the refused file {id} was not kept beside the spool"
        );
    }
    let snapshot = service.snapshot();
    assert_eq!(
        (snapshot.uploaded, snapshot.indexed),
        (2, 2),
        "{snapshot:?}"
    );
    assert_eq!(snapshot.spool_ready, 0, "{snapshot:?}");
    let reason = |id: Uuid| {
        snapshot
            .rejected_packs
            .iter()
            .find(|r| r.pack_id == id)
            .map(|r| r.reason.clone())
            .unwrap_or_default()
    };
    assert!(
        reason(corrupt_id).contains("not a valid pack"),
        "{snapshot:?}"
    );
    assert!(
        reason(named).contains(&format!("holds pack {}", holds.info.pack_id)),
        "{snapshot:?}"
    );
    assert!(service.close().await.lease_released);
}
