//! The status file a running service writes for `capcat status`.

use std::time::Duration;

use capcat_service::read_status;

use crate::harness;

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
