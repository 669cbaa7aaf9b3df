//! A lease claim that fails at the client and lands later does not lock
//! its own process out.
//!
//! The TLA+ spec with late claims found it (`OneLiveLease`, its
//! self-lockout part): an acquire's claim INSERT fails at the client (a
//! timeout, a dropped connection), its read-back sees nothing and the
//! acquire is refused; the claim then lands, a live row under the id that
//! acquire presented. The next acquire used to mint a fresh id, read that
//! row as a rival's live lease and be refused for up to one TTL by its own
//! claim. A catalog now presents an id that never held again
//! (`claim_id.rs`), so the late row reads as its own and the next acquire
//! claims over it.
//!
//! The test's transport fails the first claim INSERT at once and hands the
//! very statement to the engine 300 ms later.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use capcat_clickhouse::{BoxFuture, Catalog, Transport};
use capcat_proto::{Failure, Rows, Statement};
use support::{Live, short_lease_config};

/// Fails the first `lease.insert_claim` at the client and runs it later.
#[derive(Debug)]
struct LateClaim {
    inner: Arc<dyn Transport>,
    delayed: AtomicBool,
    landed: Arc<AtomicBool>,
}

impl Transport for LateClaim {
    fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
        Box::pin(async move {
            if stmt.name == "lease.insert_claim" && !self.delayed.swap(true, Ordering::SeqCst) {
                let (inner, landed, stmt) = (
                    Arc::clone(&self.inner),
                    Arc::clone(&self.landed),
                    stmt.clone(),
                );
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let result = inner.execute(&stmt).await;
                    assert!(result.is_ok(), "the late claim itself failed: {result:?}");
                    landed.store(true, Ordering::SeqCst);
                });
                return Err(Failure::Transport {
                    message: "connection reset (test)".to_owned(),
                });
            }
            self.inner.execute(stmt).await
        })
    }

    fn kind(&self) -> &'static str {
        "late-claim"
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_that_failed_at_the_client_and_landed_later_does_not_lock_its_process_out() {
    // TTL 2 s, one claim attempt per acquire: the first acquire is refused
    // on its read-back, before its claim lands.
    let config = short_lease_config()
        .with_attempts(1, 3, 3)
        .expect("valid attempt bounds");
    let Some(live) = Live::start_with("late_claim", config.clone()).await else {
        return;
    };
    live.catalog.ensure_schema().await.expect("ensure_schema");
    let late = Arc::new(LateClaim {
        inner: Arc::clone(live.catalog.transport()),
        delayed: AtomicBool::new(false),
        landed: Arc::new(AtomicBool::new(false)),
    });
    let transport: Arc<dyn Transport> = late.clone();
    let catalog = Catalog::new(transport, live.tables().clone(), config);
    let first = catalog.acquire_lease("publisher").await;
    assert!(
        first.is_err(),
        "the first acquire read back before its claim landed: {first:?}"
    );
    // Bounded wait for the late claim (it lands 300 ms after its send).
    for _ in 0..100 {
        if late.landed.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        late.landed.load(Ordering::SeqCst),
        "the late claim never landed"
    );
    assert_eq!(
        live.rows_in(&live.tables().publisher_lease()).await,
        1,
        "the late claim is the one live row"
    );
    // Within the late row's TTL: the same process acquires at once.
    let lease = catalog
        .acquire_lease("publisher")
        .await
        .expect("the next acquire reads its own late claim as its own and holds");
    assert_eq!(lease.lease().term, 2, "it claimed over its own late row");
}
