//! `snapshot().lease_held` reports whether the service holds the lease, not
//! whether the lease's lock is taken.

use std::time::Duration;

use crate::harness::{self, Mode};

/// The lease is lost (the catalog stalled past its TTL, a rival took it),
/// then the cycle tries to take it again against a stalled catalog, holding
/// the lease's lock for the whole attempt. All that time the service holds
/// no lease, and the snapshot must say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lease_held_is_false_while_a_lost_lease_is_being_reacquired() {
    let Some(world) = harness::scenario("lease_state", |raw| {
        raw.lease_ttl_s = 3.0;
        raw.publish_timeout_s = 1.0;
    })
    .await
    else {
        return;
    };
    let service = world.start().await;
    assert!(service.snapshot().lease_held);
    // Nothing reaches the catalog through the proxy for longer than the
    // TTL, so the lease expires; a rival (straight to the engine) takes it.
    world.catalog.proxy.set(Mode::Stall);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut rival = world
        .catalog
        .direct
        .acquire_lease("rival")
        .await
        .expect("the expired lease is free for a rival");
    world.catalog.proxy.set(Mode::Forward);
    harness::eventually(
        "the renewal finding the lease lost",
        Duration::from_secs(10),
        || !service.snapshot().lease_held,
    )
    .await;
    // The cycle now re-acquires under the lease's lock, against a stalled
    // catalog: the lock stays taken for each whole attempt.
    world.catalog.proxy.set(Mode::Stall);
    harness::stage(service.spool(), "lease_state", 2);
    harness::eventually(
        "the pack uploaded and owed",
        Duration::from_secs(10),
        || service.snapshot().pending_index == 1,
    )
    .await;
    for _ in 0..40 {
        let snapshot = service.snapshot();
        assert!(!snapshot.lease_held, "{snapshot:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    world.catalog.proxy.set(Mode::Forward);
    rival.release().await.expect("the rival lets go");
    service.flush(Duration::from_secs(20)).await.expect("flush");
    assert!(service.snapshot().lease_held);
    service.close().await;
}
