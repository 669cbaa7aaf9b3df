//! The set-aside rule for a pack the indexer refuses on its own.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::Duration;

use capcat_service::FlushError;

use crate::harness::{self, Mode};
use crate::refuse::RefusePack;

/// Refusals after which the test cuts the catalog.
const CUT_AFTER: u32 = 2;

/// Seed: "a pack the indexer refuses on its own is set aside after
/// max_index_attempts (5). A batch that threw -- an outage -- still counts
/// against no pack." The real engine refuses one pack's descriptors (see
/// `refuse.rs`). After its second refusal the catalog is cut by the proxy
/// for more failing cycles than the three attempts it has left; restored,
/// the pack is refused exactly three more times, so exactly five in all,
/// and set aside: named once by flush, in `rejected_packs`, still in the
/// store. The packs sealed meanwhile stayed in the spool during the
/// outage and index after it, byte-identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_pack_is_set_aside_after_exactly_max_index_attempts_and_an_outage_counts_against_none()
 {
    let test = "refused";
    let poison = uuid::Uuid::new_v4();
    let wrapper: OnceLock<Arc<RefusePack>> = OnceLock::new();
    let Some(world) = harness::scenario_wrapped(
        test,
        |raw| {
            raw.max_index_attempts = 5;
            raw.max_backoff_s = 0.2;
        },
        |inner, proxy| {
            let refuse = Arc::new(RefusePack::new(
                inner,
                poison,
                Some((CUT_AFTER, proxy.switch())),
            ));
            wrapper.set(Arc::clone(&refuse)).expect("wrapped once");
            refuse
        },
    )
    .await
    else {
        return;
    };
    let refuse = wrapper.get().expect("the catalog was wrapped");
    // The poison pack, sealed under the id the wrapper refuses.
    let (poison_pack, _) = harness::pack_with_id(poison, "refused-poison", 3);
    world
        .spool()
        .write_sealed(poison, &poison_pack.bytes)
        .unwrap();
    let service = world.start().await;

    harness::eventually(
        "the catalog cut after the second refusal",
        Duration::from_secs(20),
        || refuse.refused_alone.load(Ordering::SeqCst) == CUT_AFTER,
    )
    .await;
    // Sealed during the outage: they stay in the spool while the poison
    // pack is owed.
    let mut expected = std::collections::BTreeMap::new();
    for _ in 0..2 {
        expected.extend(harness::stage(service.spool(), "refused-later", 2).1);
    }
    let failed_at_cut = service.snapshot().failed_cycles;
    harness::eventually(
        "six failing cycles of outage",
        Duration::from_secs(20),
        || service.snapshot().failed_cycles >= failed_at_cut + 6,
    )
    .await;
    let during = service.snapshot();
    assert!(
        during.rejected_packs.is_empty(),
        "an outage counted against the pack: {during:?}"
    );
    assert_eq!(refuse.refused_alone.load(Ordering::SeqCst), CUT_AFTER);
    assert_eq!(
        during.uploaded, 1,
        "uploads went on during the outage: {during:?}"
    );

    world.catalog.proxy.set(Mode::Forward);
    let flushed = service.flush(Duration::from_secs(30)).await;
    match &flushed {
        Err(FlushError::SetAside { packs }) => assert_eq!(packs, &vec![poison]),
        other => panic!("expected the refused pack named, got {other:?}"),
    }
    assert_eq!(
        refuse.refused_alone.load(Ordering::SeqCst),
        5,
        "the pack must be refused on its own exactly max_index_attempts times"
    );
    let snapshot = service.snapshot();
    assert_eq!(snapshot.rejected_packs.len(), 1, "{snapshot:?}");
    assert_eq!(snapshot.rejected_packs[0].pack_id, poison);
    assert!(
        snapshot.rejected_packs[0]
            .reason
            .starts_with("refused 5 times"),
        "{snapshot:?}"
    );
    assert_eq!(world.read_back_run("refused-later", &expected).await, 4);
    world.assert_set_aside("refused-poison", poison).await;
    // Named once; no further attempt at the set-aside pack.
    service
        .flush(Duration::from_secs(10))
        .await
        .expect("second flush");
    assert_eq!(refuse.refused_alone.load(Ordering::SeqCst), 5);
    assert_eq!(refuse.carried_in_batches.load(Ordering::SeqCst), 0);
    service.close().await;
}

/// A batch holding a pack the engine refuses is refused whole (the wrapper
/// refuses any batch carrying it, as the engine refuses a batch holding one
/// bad row). The service halves until the culprit is alone; the healthy
/// packs of the same batch index, and a refusal of the culprit alone does
/// not stop the pass nor fail the cycle (no failed cycle, so no backoff
/// doubling); after `max_index_attempts` refusals alone it is set aside.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_refused_for_one_pack_is_halved_and_the_healthy_packs_index() {
    let test = "refused_batch";
    let poison = uuid::Uuid::new_v4();
    let wrapper: OnceLock<Arc<RefusePack>> = OnceLock::new();
    let Some(world) = harness::scenario_wrapped(
        test,
        |raw| raw.max_index_attempts = 3,
        |inner, _proxy| {
            let refuse = Arc::new(RefusePack::new(inner, poison, None).refusing_any_batch());
            wrapper.set(Arc::clone(&refuse)).expect("wrapped once");
            refuse
        },
    )
    .await
    else {
        return;
    };
    let refuse = wrapper.get().expect("the catalog was wrapped");
    // Staged before start, so the first cycle uploads all five and offers
    // them to the indexer as one batch, the poison pack in the middle.
    let spool = world.spool();
    let mut expected = std::collections::BTreeMap::new();
    for _ in 0..2 {
        expected.extend(harness::stage(&spool, "batch-healthy", 2).1);
    }
    let (poison_pack, _) = harness::pack_with_id(poison, "batch-poison", 3);
    spool.write_sealed(poison, &poison_pack.bytes).unwrap();
    for _ in 0..2 {
        expected.extend(harness::stage(&spool, "batch-healthy", 2).1);
    }
    let service = world.start().await;
    match service.flush(Duration::from_secs(30)).await {
        Err(FlushError::SetAside { packs }) => assert_eq!(packs, vec![poison]),
        other => panic!("expected the refused pack named, got {other:?}"),
    }
    let snapshot = service.snapshot();
    assert!(snapshot.batch_splits > 0, "{snapshot:?}");
    assert!(
        refuse.carried_in_batches.load(Ordering::SeqCst) > 0,
        "no multi-pack batch carried the poison pack: the halving path was not exercised"
    );
    assert_eq!(refuse.refused_alone.load(Ordering::SeqCst), 3);
    assert_eq!(snapshot.indexed, 4, "{snapshot:?}");
    assert_eq!(
        snapshot.failed_cycles, 0,
        "a pack refused on its own failed the cycle: {snapshot:?}"
    );
    assert_eq!(snapshot.rejected_packs.len(), 1, "{snapshot:?}");
    assert!(
        snapshot.rejected_packs[0]
            .reason
            .starts_with("refused 3 times"),
        "{snapshot:?}"
    );
    assert_eq!(world.read_back_run("batch-healthy", &expected).await, 8);
    world.assert_set_aside("batch-poison", poison).await;
    service.close().await;
}
