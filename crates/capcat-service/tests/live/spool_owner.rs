//! Spool ownership: one owner per spool directory, by an exclusive lock.

use std::time::Duration;

use capcat_service::{Service, StartError, read_status, spool::OPEN_SUFFIX};
use uuid::Uuid;

use crate::harness;

/// A second owner on a running service's spool (what `capcat drain` on a
/// live demo's directory is) is refused at once with `SpoolBusy` naming the
/// running process, before it sweeps: the `.open` pack the running sink is
/// writing survives, and the running service's status file is untouched.
/// Once the service closes, a new owner starts (and sweeps the stale file).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_owner_is_refused_before_it_sweeps_a_running_services_spool() {
    let Some(world) = harness::scenario("spool_owner", |_| {}).await else {
        return;
    };
    let service = world.start().await;
    let spool_dir = world.cfg.raw.spool_dir.clone();
    let open = spool_dir.join(format!("{}{OPEN_SUFFIX}", Uuid::new_v4()));
    std::fs::write(&open, b"a pack the running sink is writing").expect("an .open file");
    harness::eventually("the first status file", Duration::from_secs(10), || {
        read_status(&spool_dir).unwrap().is_some()
    })
    .await;

    let started = std::time::Instant::now();
    let second = Service::start(
        world.cfg.clone(),
        world.store.clone(),
        world.catalog.client.clone(),
    )
    .await;
    match second {
        Err(StartError::SpoolBusy {
            spool_dir: busy,
            holder: Some(holder),
        }) => {
            assert_eq!(busy, spool_dir);
            assert_eq!(holder.pid, std::process::id());
            assert_eq!(holder.holder, world.cfg.raw.holder);
        }
        other => panic!("expected SpoolBusy naming the running service, got {other:?}"),
    }
    // Refused at once: no lease wait, no catalog round trip to time out.
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(open.exists(), "the running service's .open pack was swept");
    assert!(service.snapshot().lease_held);
    let status = read_status(&spool_dir).unwrap().expect("status");
    assert!(!status.closed);

    service.close().await;
    assert!(read_status(&spool_dir).unwrap().expect("status").closed);
    let next = world.start().await;
    assert!(!open.exists(), "the new owner sweeps the stale .open file");
    next.close().await;
}

/// A service that does not own its spool takes no lock, sweeps nothing and
/// never writes the status file (the owner's status is not overwritten).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_service_not_owning_its_spool_writes_no_status_file() {
    let Some(world) = harness::scenario("spool_not_owner", |raw| raw.owns_spool = false).await
    else {
        return;
    };
    let spool_dir = world.cfg.raw.spool_dir.clone();
    let service = world.start().await;
    let open = spool_dir.join(format!("{}{OPEN_SUFFIX}", Uuid::new_v4()));
    std::fs::write(&open, b"another process's open pack").expect("an .open file");
    harness::stage(service.spool(), "not_owner", 2);
    service.flush(Duration::from_secs(20)).await.expect("flush");
    service.close().await;
    assert!(read_status(&spool_dir).unwrap().is_none());
    assert!(open.exists());
    assert!(
        !spool_dir
            .join(capcat_service::owner_lock::OWNER_LOCK_FILE_NAME)
            .exists()
    );
}
