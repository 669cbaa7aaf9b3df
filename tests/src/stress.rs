//! [`run_stress`]: N publishers and M readers on one embedded engine, with
//! takeovers, releases, stalls and crashes, checked as they go.
//!
//! - Each publisher is a tokio task with its own [`Catalog`] over its own
//!   [`RecordingTransport`] (its own engine connections): acquire the lease
//!   (waiting while another publisher holds it), index a fresh pack per pass
//!   through `Catalog::index`, sometimes release cleanly.
//! - A crash is `JoinHandle::abort`: the task and its lease handle vanish
//!   mid-pass (a statement in flight still runs to completion inside
//!   libchdb), and a new incarnation with a fresh lease id starts. The
//!   crashed lease stays the head until it expires: the next acquirer takes
//!   it over.
//! - Each reader pins W, reads the members of W, looks captures up at W
//!   through the reader machine, and re-reads an earlier W.
//! - The controller runs the table checks every `check_every`, bounded in
//!   passes (`rounds`) and in time (`time_budget`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use capcat_chdb::Engine;
use capcat_clickhouse::{Catalog, CatalogError, Embedded, LeaseHandle};
use capcat_proto::designs::Design;
use capcat_proto::{
    Config, Failure, IndexError, IndexReport, LeaseError, PackRef, PublishError, Tables,
};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::checker::{Checker, FenceVerdicts, Violation};
use crate::fixtures::{self, TENANT};
use crate::ledger::{Counters, Ledger, PassOutcome};
use crate::recording::{RecordingTransport, StallPlan};
use crate::rng::Rng;

/// Upper bound on one publisher's loop iterations (acquire tries and
/// passes); the pass count and the time budget end a run long before.
const MAX_PUBLISHER_STEPS: u32 = 1_000_000;
/// The window (ms) in which a publisher refused by a live holder asks again.
const HELD_WAIT_MS: (u64, u64) = (50, 800);
/// The pause (ms) between a reader's iterations: readers observe; paced
/// faster, they take the engine from the publishers whose races they watch.
const READER_PAUSE_MS: (u64, u64) = (20, 60);
/// Upper bound on one reader's iterations.
const MAX_READER_STEPS: u32 = 1_000_000;
/// Most capture ids one lookup asks for (well under `MAX_LOOKUP_IDS`).
const LOOKUP_IDS: usize = 400;
/// How long the controller waits for a task to finish after the stop.
const JOIN_WAIT: Duration = Duration::from_secs(30);
/// How long the final check waits for statements of crashed tasks to
/// finish inside the engine.
const QUIESCE_WAIT: Duration = Duration::from_secs(15);

/// What a stress run does.
#[derive(Clone, Debug)]
pub struct StressOptions {
    /// The seed every decision derives from.
    pub seed: u64,
    /// Index passes to run (all publishers together).
    pub rounds: u64,
    /// Wall-clock bound; the run stops at whichever bound comes first.
    pub time_budget: Duration,
    /// One protocol configuration per publisher (its lease TTL).
    pub publishers: Vec<Config>,
    /// The design every publisher runs: the shipped one, or a rejected one
    /// to show the checker catching it.
    pub design: Design,
    /// Readers.
    pub readers: usize,
    /// How publishers' guarded INSERTs are held back.
    pub stall: StallPlan,
    /// Per mille of passes after which the holder releases the lease.
    pub release_per_mille: u64,
    /// Range (ms) of the pause between crashes; `None`: no crashes.
    pub crash_every_ms: Option<(u64, u64)>,
    /// How often the controller checks the tables.
    pub check_every: Duration,
    /// End the run at the first violation (the mutation runs).
    pub stop_at_first_violation: bool,
}

/// What a stress run did and found.
#[derive(Clone, Debug)]
pub struct StressReport {
    /// The seed.
    pub seed: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Event counters (passes, races, faults).
    pub counters: BTreeMap<&'static str, u64>,
    /// How the final check judged the guarded INSERTs.
    pub verdicts: FenceVerdicts,
    /// Table checks run.
    pub checks: u64,
    /// Distinct versions pinned by readers.
    pub watermarks: usize,
    /// Every property violation found.
    pub violations: Vec<Violation>,
}

impl fmt::Display for StressReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {:#x}: {:.1} s, {} table checks, {} versions pinned",
            self.seed,
            self.elapsed.as_secs_f64(),
            self.checks,
            self.watermarks
        )?;
        let counters: Vec<String> = self
            .counters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(f, "  {}", counters.join(" "))?;
        writeln!(
            f,
            "  guarded INSERTs: {} proven fenced out, {} possibly live, {} undetermined",
            self.verdicts.fenced_out, self.verdicts.maybe_live, self.verdicts.undetermined
        )?;
        writeln!(f, "  violations: {}", self.violations.len())?;
        for v in &self.violations {
            writeln!(f, "    {}: {}", v.property, v.detail)?;
        }
        Ok(())
    }
}

/// Why a stress run could not run (violations are in the report, not here).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StressError {
    /// Setting the catalog up failed.
    #[error("stress setup: {0}")]
    Setup(#[from] CatalogError),
    /// A checker read failed.
    #[error("stress check could not read the tables: {0}")]
    Check(Failure),
}

#[derive(Debug)]
struct Shared {
    engine: Engine,
    tables: Tables,
    ledger: Arc<Ledger>,
    checker: Arc<Checker>,
    stall: StallPlan,
    design: Design,
    release_per_mille: u64,
    stop: Arc<AtomicBool>,
    next_pass: AtomicU64,
    rounds: u64,
}

impl Shared {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

async fn pause(rng: &mut Rng, low_ms: u64, high_ms: u64) {
    tokio::time::sleep(Duration::from_millis(rng.between(low_ms, high_ms))).await;
}

/// Sorts a pass's result into an outcome, and whether the lease is still held.
fn classify(result: Result<IndexReport, CatalogError>, c: &Counters) -> (PassOutcome, bool) {
    match result {
        Ok(IndexReport::Indexed {
            version,
            publish_id,
            packs,
            attempts,
            ..
        }) => {
            Counters::bump(&c.won);
            c.lost_races
                .fetch_add(u64::from(attempts.saturating_sub(1)), Ordering::Relaxed);
            let outcome = PassOutcome::Won {
                version,
                publish_id,
                packs,
                attempts,
            };
            (outcome, true)
        }
        Ok(IndexReport::NothingToDo { skipped }) => {
            Counters::bump(&c.failed);
            let why = format!("a pass of fresh packs found nothing to do: {skipped:?}");
            (PassOutcome::Failed(why), true)
        }
        Err(CatalogError::Index(IndexError::LeaseLost { .. })) => {
            Counters::bump(&c.lease_lost);
            (PassOutcome::LeaseLost, false)
        }
        Err(CatalogError::Index(IndexError::Publish(PublishError::Renew { .. }))) => {
            Counters::bump(&c.lease_lost);
            (PassOutcome::RenewRefused, false)
        }
        Err(CatalogError::Index(IndexError::Conflict {
            version,
            publish_id,
            ..
        })) => {
            Counters::bump(&c.conflicts);
            (
                PassOutcome::Conflict {
                    version,
                    publish_id,
                },
                false,
            )
        }
        Err(CatalogError::Index(IndexError::Exhausted { attempts, .. })) => {
            Counters::bump(&c.exhausted);
            c.lost_races
                .fetch_add(u64::from(attempts), Ordering::Relaxed);
            (PassOutcome::Exhausted, false)
        }
        // The settle rule put the attempt off: nothing was written; the
        // holder keeps its lease and a later pass publishes.
        Err(CatalogError::Index(IndexError::Unsettled { .. })) => {
            Counters::bump(&c.unsettled);
            (PassOutcome::Failed("unsettled".to_owned()), true)
        }
        // A guarded statement whose effect is unknown (a late start): the
        // holder keeps its lease, as the storage service does, so its next
        // pass meets the settle rule.
        Err(CatalogError::Index(IndexError::Publish(PublishError::Statement {
            ref failure,
            ..
        }))) if failure.leaves_statement_running() => {
            Counters::bump(&c.failed);
            (PassOutcome::Failed(format!("abandoned: {failure}")), true)
        }
        Err(other) => {
            Counters::bump(&c.failed);
            tracing::warn!(error = %other, "index pass failed");
            (PassOutcome::Failed(other.to_string()), false)
        }
    }
}

async fn publisher(shared: Arc<Shared>, index: usize, incarnation: u64, config: Config, rng: Rng) {
    let name = format!("p{index}");
    let actor = format!("p{index}.{incarnation}");
    let mut rng = rng.fork(incarnation);
    let transport = Arc::new(RecordingTransport::new(
        Embedded::new(shared.engine.clone()),
        shared.tables.clone(),
        actor.clone(),
        Arc::clone(&shared.ledger),
        shared.stall,
        rng.fork(u64::MAX),
        Arc::clone(&shared.stop),
    ));
    let catalog = Catalog::new(transport.clone(), shared.tables.clone(), config)
        .with_jitter_seed(rng.next_u64())
        .with_design(shared.design);
    let counters = &shared.ledger.counters;
    let mut handle: Option<LeaseHandle> = None;
    for _ in 0..MAX_PUBLISHER_STEPS {
        if shared.stopped() {
            break;
        }
        let Some(held) = handle.as_mut() else {
            match catalog.acquire_lease(&name).await {
                Ok(h) => {
                    shared.ledger.acquired(&name);
                    handle = Some(h);
                }
                Err(CatalogError::Lease(LeaseError::Held { .. })) => {
                    Counters::bump(&counters.held_refusals);
                    // Ask again at a random moment within a wide window.
                    // Publishers asking at the same moment (at the holder's
                    // expiry, or every few ms) claim the same term, contest
                    // it, and since capcat-proto 4498a74 every contested
                    // live term is waited out for a whole TTL: runs where the
                    // waiting publishers polled every 10-60 ms published 1
                    // pass in 17.
                    pause(&mut rng, HELD_WAIT_MS.0, HELD_WAIT_MS.1).await;
                }
                Err(CatalogError::Lease(LeaseError::Contested { .. })) => {
                    Counters::bump(&counters.contested_claims);
                    pause(&mut rng, 10, 60).await;
                }
                Err(other) => {
                    tracing::warn!(actor, error = %other, "acquire failed");
                    pause(&mut rng, 10, 60).await;
                }
            }
            continue;
        };
        let pass = shared.next_pass.fetch_add(1, Ordering::Relaxed);
        if pass >= shared.rounds {
            break;
        }
        Counters::bump(&counters.passes);
        let store = format!("store-{}", rng.below(2));
        let descriptors = fixtures::pack(&mut rng, &store, 2, pass * 2);
        let packs: BTreeSet<PackRef> = descriptors.iter().map(|d| d.pack()).collect();
        let ids: Vec<Uuid> = descriptors.iter().map(|d| d.capture_id).collect();
        shared.ledger.begin_pass(pass, &actor, packs, &ids);
        transport.set_pass(Some(pass));
        let result = catalog.index(held, descriptors).await;
        transport.set_pass(None);
        let (outcome, keep) = classify(result, counters);
        tracing::debug!(actor, pass, ?outcome, "pass ended");
        shared.ledger.end_pass(pass, outcome);
        if !keep {
            handle = None;
            pause(&mut rng, 5, 40).await;
        } else if rng.chance(shared.release_per_mille) {
            if held.release().await.is_ok() {
                Counters::bump(&counters.releases);
            }
            handle = None;
            // Step back so the release is a handover, not a re-acquire.
            pause(&mut rng, 40, 120).await;
        } else {
            pause(&mut rng, 0, 10).await;
        }
    }
}

async fn reader(shared: Arc<Shared>, index: usize, mut rng: Rng) {
    let name = format!("r{index}");
    let catalog = Catalog::new(
        Arc::new(Embedded::new(shared.engine.clone())),
        shared.tables.clone(),
        Config::default(),
    );
    let checker = &shared.checker;
    let counters = &shared.ledger.counters;
    for _ in 0..MAX_READER_STEPS {
        if shared.stopped() {
            break;
        }
        pause(&mut rng, READER_PAUSE_MS.0, READER_PAUSE_MS.1).await;
        let Ok(w) = catalog.pin().await else {
            Counters::bump(&counters.reader_errors);
            continue;
        };
        Counters::bump(&counters.pins);
        let Ok(members) = checker.members_at(w).await else {
            Counters::bump(&counters.reader_errors);
            continue;
        };
        checker.observe_members(&name, w, members.clone());
        // The captures minted so far (a random window when there are many):
        // ids of passes published at or below W must resolve, and the rest
        // must not, the same way every time.
        let captures = shared.ledger.captures();
        let skip = rng.below(captures.len().saturating_sub(LOOKUP_IDS) as u64 + 1);
        let ids: BTreeSet<Uuid> = captures
            .iter()
            .skip(usize::try_from(skip).unwrap_or(0))
            .take(LOOKUP_IDS)
            .copied()
            .collect();
        if !ids.is_empty() {
            match catalog.get_by_ids(TENANT, ids, w).await {
                Ok(lookup) => {
                    Counters::bump(&counters.lookups);
                    checker.observe_lookup(&name, &lookup, &members);
                }
                Err(_) => Counters::bump(&counters.reader_errors),
            }
        }
        if let Some(old) = checker.pick_seen(&mut rng) {
            match checker.members_at(old).await {
                Ok(again) => {
                    Counters::bump(&counters.rereads);
                    checker.observe_members(&name, old, again);
                }
                Err(_) => Counters::bump(&counters.reader_errors),
            }
        }
    }
}

fn spawn_publisher(
    shared: &Arc<Shared>,
    index: usize,
    incarnation: u64,
    config: &Config,
    rng: &Rng,
) -> JoinHandle<()> {
    tokio::spawn(publisher(
        Arc::clone(shared),
        index,
        incarnation,
        config.clone(),
        rng.fork(index as u64),
    ))
}

async fn join_bounded(handle: JoinHandle<()>) {
    let abort = handle.abort_handle();
    if tokio::time::timeout(JOIN_WAIT, handle).await.is_err() {
        tracing::warn!("a stress task did not stop within {JOIN_WAIT:?}; aborting it");
        abort.abort();
    }
}

/// Runs the stress on `engine` under `tables` (a prefix of the caller's own;
/// the schema is created here). Violations are in the report.
pub async fn run_stress(
    engine: Engine,
    tables: Tables,
    opts: StressOptions,
) -> Result<StressReport, StressError> {
    let started = Instant::now();
    let setup = Catalog::new(
        Arc::new(Embedded::new(engine.clone())),
        tables.clone(),
        Config::default(),
    );
    setup.ensure_schema().await?;
    let ledger = Arc::new(Ledger::new());
    let checker = Arc::new(Checker::new(
        Arc::new(Embedded::new(engine.clone())),
        tables.clone(),
        Arc::clone(&ledger),
    ));
    let shared = Arc::new(Shared {
        engine: engine.clone(),
        tables,
        ledger: Arc::clone(&ledger),
        checker: Arc::clone(&checker),
        stall: opts.stall,
        design: opts.design,
        release_per_mille: opts.release_per_mille,
        stop: Arc::new(AtomicBool::new(false)),
        next_pass: AtomicU64::new(0),
        rounds: opts.rounds,
    });
    let mut rng = Rng::new(opts.seed);
    let publisher_rng = rng.fork(1);
    let mut publishers: Vec<(JoinHandle<()>, u64)> = opts
        .publishers
        .iter()
        .enumerate()
        .map(|(i, cfg)| (spawn_publisher(&shared, i, 0, cfg, &publisher_rng), 0))
        .collect();
    let readers: Vec<JoinHandle<()>> = (0..opts.readers)
        .map(|i| tokio::spawn(reader(Arc::clone(&shared), i, rng.fork(1_000 + i as u64))))
        .collect();

    let draw_crash = |rng: &mut Rng| {
        opts.crash_every_ms
            .map(|(low, high)| Instant::now() + Duration::from_millis(rng.between(low, high)))
    };
    let mut next_crash = draw_crash(&mut rng);
    let mut next_check = Instant::now() + opts.check_every;
    let deadline = started + opts.time_budget;
    let ticks = opts.time_budget.as_millis() / 25 + 1;
    for _ in 0..ticks {
        tokio::time::sleep(Duration::from_millis(25)).await;
        let now = Instant::now();
        if next_crash.is_some_and(|at| now >= at) && !publishers.is_empty() {
            let i = usize::try_from(rng.below(publishers.len() as u64)).unwrap_or(0);
            let (handle, incarnation) = &mut publishers[i];
            if !handle.is_finished() {
                handle.abort();
                Counters::bump(&ledger.counters.crashes);
                *incarnation += 1;
                tracing::debug!(publisher = i, incarnation, "publisher crashed");
                *handle = spawn_publisher(
                    &shared,
                    i,
                    *incarnation,
                    &opts.publishers[i],
                    &publisher_rng,
                );
            }
            next_crash = draw_crash(&mut rng);
        }
        if now >= next_check {
            checker.check_tables().await.map_err(StressError::Check)?;
            next_check = Instant::now() + opts.check_every;
        }
        let done = publishers.iter().all(|(h, _)| h.is_finished());
        let broken = opts.stop_at_first_violation && !checker.violations().is_empty();
        if done || broken || Instant::now() >= deadline {
            break;
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    for (handle, _) in publishers {
        join_bounded(handle).await;
    }
    for handle in readers {
        join_bounded(handle).await;
    }
    // Statements of crashed tasks still run inside libchdb: let them land
    // before the final check, so it judges every row they could write.
    for _ in 0..QUIESCE_WAIT.as_millis() / 50 {
        if engine.stats().in_use == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    checker.check_tables().await.map_err(StressError::Check)?;
    Ok(StressReport {
        seed: opts.seed,
        elapsed: started.elapsed(),
        counters: ledger.counters.snapshot(),
        verdicts: checker.verdicts(),
        checks: checker.checks(),
        watermarks: checker.commit_rows_seen(),
        violations: checker.violations(),
    })
}
