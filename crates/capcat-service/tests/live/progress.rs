//! Issue 16: a flush that waits while the backlog shrinks.
//!
//! `capcat drain` used to give up at a fixed total deadline: after 200
//! killed demo runs its flush stopped at 30 s with hundreds of packs still
//! pending, although every cycle was indexing more. `flush_while_progressing`
//! gives up only when its stall time passes with no pack becoming queryable.
//!
//! The catalog here is the real engine behind a transport that holds every
//! commit-row INSERT for [`HOLD`], so each pack takes at least that long to
//! publish on any machine, and a backlog of [`PACKS`] packs takes several
//! times the stall time in all.

use std::sync::Arc;
use std::time::{Duration, Instant};

use capcat_clickhouse::{BoxFuture, Transport};
use capcat_proto::{Failure, Rows, Statement};
use capcat_service::{FlushError, FlushProgress};

use crate::harness::{self, Mode};

/// How long every commit-row INSERT is held before it is sent.
const HOLD: Duration = Duration::from_millis(400);
/// The stall time of the flushes: well above one pack's publish (the hold
/// plus a loaded machine's work), well below the backlog's total.
const STALL: Duration = Duration::from_secs(2);
/// The backlog: at least `PACKS * HOLD` = 4.8 s to publish, over twice
/// [`STALL`].
const PACKS: usize = 12;

/// Holds every commit-row INSERT for [`HOLD`], then sends it unchanged.
#[derive(Debug)]
struct SlowPublish {
    inner: Arc<dyn Transport>,
}

impl Transport for SlowPublish {
    fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
        Box::pin(async move {
            if stmt.name == "publish.insert_commit_row" {
                tokio::time::sleep(HOLD).await;
            }
            self.inner.execute(stmt).await
        })
    }

    fn kind(&self) -> &'static str {
        "slow-publish"
    }
}

async fn slow_world(test: &str) -> Option<harness::Scenario<capcat_s3::LocalStore>> {
    harness::scenario_wrapped(
        test,
        // One pack per cycle: each cycle ends with one more pack queryable.
        |raw| raw.max_packs_per_cycle = 1,
        |inner, _proxy| Arc::new(SlowPublish { inner }),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backlog_longer_than_the_stall_time_drains_while_it_advances() {
    let Some(world) = slow_world("flush_progressing").await else {
        return;
    };
    let spool = world.spool();
    let mut expected = std::collections::BTreeMap::new();
    for _ in 0..PACKS {
        expected.extend(harness::stage(&spool, "backlog", 2).1);
    }
    let service = world.start().await;
    let started = Instant::now();
    let mut seen: Vec<FlushProgress> = Vec::new();
    let flushed = service
        .flush_while_progressing(STALL, |p| seen.push(p))
        .await;
    let took = started.elapsed();
    let report = flushed.expect("a backlog that advances drains");
    assert_eq!(report.packs, PACKS);
    assert!(
        took > STALL,
        "the backlog took {took:?}, not longer than the stall time: the test shows nothing"
    );
    // Every step seen, in order, from nothing to everything.
    assert_eq!(
        seen.first(),
        Some(&FlushProgress {
            done: 0,
            total: PACKS
        })
    );
    assert_eq!(
        seen.last(),
        Some(&FlushProgress {
            done: PACKS,
            total: PACKS
        })
    );
    assert!(seen.windows(2).all(|w| w[0].done < w[1].done), "{seen:?}");
    assert_eq!(world.read_back_run("backlog", &expected).await, 2 * PACKS);
    assert!(service.close().await.lease_released);
}

/// The same backlog under a fixed total deadline of the stall time: the
/// deadline passes while packs are still pending. This is what `drain` did.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fixed_deadline_gives_up_on_the_same_backlog() {
    let Some(world) = slow_world("flush_fixed_deadline").await else {
        return;
    };
    let spool = world.spool();
    for _ in 0..PACKS {
        harness::stage(&spool, "backlog", 2);
    }
    let service = world.start().await;
    match service.flush(STALL).await {
        Err(FlushError::NotDrained { pending, .. }) => assert!(pending > 0),
        other => panic!("a {STALL:?} deadline on a {PACKS}-pack backlog: {other:?}"),
    }
    // The backlog still drains for a caller that waits.
    service
        .flush_while_progressing(STALL, |_| {})
        .await
        .expect("drains");
    assert!(service.close().await.lease_released);
}

/// A flush that stops advancing still gives up, within its stall time of
/// the last pack that became queryable.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flush_that_stops_advancing_gives_up_after_the_stall_time() {
    let Some(world) = slow_world("flush_stalls").await else {
        return;
    };
    let service = world.start().await;
    // The catalog answers nothing from now on.
    world.catalog.proxy.set(Mode::Stall);
    harness::stage(service.spool(), "stalled", 2);
    let started = Instant::now();
    let flushed = service.flush_while_progressing(STALL, |_| {}).await;
    let took = started.elapsed();
    assert!(
        matches!(flushed, Err(FlushError::NotDrained { pending: 1, .. })),
        "{flushed:?}"
    );
    assert!(
        took < STALL + Duration::from_secs(2),
        "a flush with no progress took {took:?}"
    );
    world.catalog.proxy.set(Mode::Forward);
}
