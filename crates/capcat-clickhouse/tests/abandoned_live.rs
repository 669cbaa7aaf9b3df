//! A statement the client gave up on, still running on the server.
//!
//! A real client can give up on a statement the server still runs: its own
//! request timeout, a dropped connection. If it then acted at once (read
//! back and retried, renewed and published again, released), its first
//! statement could land after the next one. The driver waits out the
//! statement's fence margin (`Statement::settle_ns`) before it feeds such
//! a failure back, so a statement the server started promptly has finished
//! by then; one the server starts later is the settle rule's (the lease is
//! unsettled, and its release is refused here).
//!
//! The test's transport gives up on the commit-row INSERT at once (it
//! returns `Timeout` while the statement, held on the server by `AND
//! sleep(s) = 0` after its guard, goes on running) and records, for every
//! later statement, whether the abandoned one had finished when it arrived.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use capcat_clickhouse::{BoxFuture, Catalog, CatalogError, Transport};
use capcat_proto::{Config, Failure, LeaseError, Rows, Statement};
use support::{Live, capture_ids, pack_of};
use uuid::Uuid;

/// Gives up on the first statement named `target`.
#[derive(Debug)]
struct Abandoning {
    inner: Arc<dyn Transport>,
    target: &'static str,
    /// How long the server holds the abandoned statement after its guard.
    hold_s: f64,
    abandoned: AtomicBool,
    finished: Arc<AtomicBool>,
    /// Every statement after the abandoned one, and whether the abandoned
    /// one had finished when it was sent.
    after: Mutex<Vec<(&'static str, bool)>>,
}

impl Transport for Abandoning {
    fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
        Box::pin(async move {
            if stmt.name == self.target && !self.abandoned.swap(true, Ordering::SeqCst) {
                let mut held = stmt.clone();
                held.sql = format!("{} AND sleep({}) = 0", stmt.sql, self.hold_s);
                let inner = Arc::clone(&self.inner);
                let finished = Arc::clone(&self.finished);
                tokio::spawn(async move {
                    let result = inner.execute(&held).await;
                    assert!(
                        result.is_ok(),
                        "the held statement itself failed: {result:?}"
                    );
                    finished.store(true, Ordering::SeqCst);
                });
                return Err(Failure::Timeout);
            }
            if self.abandoned.load(Ordering::SeqCst) {
                self.after
                    .lock()
                    .expect("no panic while recording")
                    .push((stmt.name, self.finished.load(Ordering::SeqCst)));
            }
            self.inner.execute(stmt).await
        })
    }

    fn kind(&self) -> &'static str {
        "abandoning"
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_commit_row_given_up_on_is_settled_before_its_failure_reaches_the_caller() {
    // TTL 4 s, cap 2 s, fence margin 2.25 s: the server holds the statement
    // 1 s, 1 s inside its cap (a loaded CI machine added 0.26 s of work to a
    // held statement), so it lands after the client has given up and before
    // the driver's settle wait ends.
    let config = Config::new(4_000_000_000, 2_000_000_000).expect("2 s below 4 s");
    let Some(live) = Live::start_with("abandoned_commit_row", config.clone()).await else {
        return;
    };
    live.catalog.ensure_schema().await.expect("ensure_schema");
    let abandoning = Arc::new(Abandoning {
        inner: Arc::clone(live.catalog.transport()),
        target: "publish.insert_commit_row",
        hold_s: 1.0,
        abandoned: AtomicBool::new(false),
        finished: Arc::new(AtomicBool::new(false)),
        after: Mutex::new(Vec::new()),
    });
    let transport: Arc<dyn Transport> = abandoning.clone();
    let catalog = Catalog::new(transport, live.tables().clone(), config);
    let mut lease = catalog.acquire_lease("publisher").await.expect("acquire");
    let rows = pack_of("acme", &capture_ids(3), 0, "s", Uuid::new_v4());
    let result = catalog.index(&mut lease, rows).await;
    // What the caller does next (retry the pass, release the lease) must
    // not race the abandoned statement: it had finished when the failure
    // came back.
    let settled_on_return = abandoning.finished.load(Ordering::SeqCst);
    assert!(
        abandoning.abandoned.load(Ordering::SeqCst),
        "the commit-row INSERT was never sent"
    );
    assert!(
        settled_on_return,
        "the pass returned ({result:?}) while the abandoned commit-row INSERT could still land"
    );
    let after = abandoning.after.lock().expect("no panic").clone();
    assert!(
        after.iter().all(|(_, settled)| *settled),
        "a statement was sent while the abandoned commit-row INSERT could still land: {after:?}"
    );
    // The failure is ambiguous and reported as such; the row it left is
    // the one the guard admitted (the lease was live and the version free).
    assert!(
        result.is_err(),
        "a timed-out commit row is not a won publish: {result:?}"
    );
    let t = live.tables();
    assert_eq!(
        live.rows_in(&t.index_watermark()).await,
        1,
        "the held row landed"
    );
    // The settle rule: the statement the driver gave up on could have
    // started later (the server starts a query when it gets to it), so the
    // lease sends no tombstone until a renewal proves the row it named
    // expired; it is left to expire, and no tombstone is written.
    let leases_before = live.rows_in(&t.publisher_lease()).await;
    match lease.release().await {
        Err(CatalogError::Lease(LeaseError::Unsettled { until_ns, .. })) => {
            assert_eq!(until_ns, lease.lease().expires_at_ns, "the row it named");
        }
        other => panic!("a release after an abandoned commit row: {other:?}"),
    }
    assert_eq!(
        live.rows_in(&t.publisher_lease()).await,
        leases_before,
        "no tombstone was sent"
    );
    live.finish().await;
}
