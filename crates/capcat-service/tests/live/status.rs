//! The status file a running service writes for `capcat status`.

use std::time::Duration;

use capcat_service::read_status;

use crate::harness::{self, Mode};

/// A running service's snapshot is readable from another process through
/// `<spool_dir>/status.json`: rewritten once per status interval (its counters move while
/// the service runs), and a last time on close, marked closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_service_writes_its_snapshot_to_the_status_file() {
    let Some(world) = harness::scenario("status_file", |_| {}).await else {
        return;
    };
    let cfg = &world.cfg;
    let service = world.start().await;
    harness::stage(service.spool(), "status", 2);
    service.flush(Duration::from_secs(20)).await.expect("flush");
    let spool_dir = cfg.raw.spool_dir.clone();
    let mut first = None;
    harness::eventually(
        "a status file showing the indexed pack",
        Duration::from_secs(10),
        || match read_status(&spool_dir).expect("a readable status file") {
            Some(status) if status.snapshot.indexed == 1 => {
                first = Some(status);
                true
            }
            _ => false,
        },
    )
    .await;
    let first = first.unwrap();
    assert_eq!(first.pid, std::process::id());
    assert!(!first.closed);
    assert_eq!(first.catalog_prefix, cfg.raw.catalog_prefix);
    assert_eq!(first.snapshot.uploaded, 1);
    assert!(first.snapshot.lease_held);
    // Rewritten each status interval: the cycle counter and the time move on.
    harness::eventually("a later status file", Duration::from_secs(10), || {
        read_status(&spool_dir).unwrap().is_some_and(|s| {
            s.snapshot.cycles > first.snapshot.cycles && s.written_at >= first.written_at
        })
    })
    .await;
    service.close().await;
    let last = read_status(&spool_dir)
        .unwrap()
        .expect("the status after close");
    assert!(last.closed, "{last:?}");
    assert!(!last.snapshot.lease_held, "{last:?}");
    assert_eq!(last.snapshot.indexed, 1);
}

/// The status file is written by a task of its own, not by the cycle loop:
/// with the catalog stalled (connections accepted, nothing answered) and a
/// cycle stuck on an index pass for far longer than the status interval,
/// `written_at` still advances while the cycle counter does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_status_file_moves_on_while_a_cycle_is_stuck_on_a_stalled_catalog() {
    let Some(world) = harness::scenario("status_stalled", |raw| {
        // Long enough that the stuck cycle outlives the test's window.
        raw.lease_ttl_s = 120.0;
        raw.publish_timeout_s = 60.0;
        raw.catalog_request_timeout_s = 60.0;
        raw.status_interval_s = 0.1;
    })
    .await
    else {
        return;
    };
    let spool_dir = world.cfg.raw.spool_dir.clone();
    let service = world.start().await;
    world.catalog.proxy.set(Mode::Stall);
    harness::stage(service.spool(), "status_stalled", 2);
    // The pack uploads (local store) and its index pass stalls; the first
    // status file showing it owed was written during the stuck cycle.
    let mut stuck = None;
    harness::eventually(
        "a status file showing the cycle stuck owing the pack",
        Duration::from_secs(10),
        || match read_status(&spool_dir).unwrap() {
            Some(s) if s.snapshot.uploaded == 1 && s.snapshot.pending_index == 1 => {
                stuck = Some(s);
                true
            }
            _ => false,
        },
    )
    .await;
    let stuck = stuck.unwrap();
    harness::eventually(
        "a status written while the cycle is stuck",
        Duration::from_secs(5),
        || {
            read_status(&spool_dir)
                .unwrap()
                .is_some_and(|s| s.written_at > stuck.written_at + 500)
        },
    )
    .await;
    let later = read_status(&spool_dir).unwrap().expect("a status file");
    assert_eq!(
        later.snapshot.cycles, stuck.snapshot.cycles,
        "the cycle was not stuck: the test proves nothing"
    );
    assert_eq!(later.snapshot.indexed, 0);
    world.catalog.proxy.set(Mode::Forward);
    service.flush(Duration::from_secs(30)).await.expect("flush");
    service.close().await;
}
