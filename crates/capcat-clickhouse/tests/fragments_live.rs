//! Guards checked by meaning: every guard fragment and every read the model
//! interprets, evaluated on the real engine over generated table states and
//! compared with its meaning in `capcat_proto::fragments::meaning`, the one
//! place the model checker, the unit-test fakes and the trace replay take
//! their semantics from.
//!
//! Each state loads the five tables the guards read, evaluates every
//! fragment under every parameter set of the pools in one SELECT, runs the
//! protocol's own read statements, and ends with one of the protocol's
//! writes (a release, a claim, a manifest chunk or a commit row), whose
//! landed rows are compared with the prediction. The server clock is bound
//! to the state's "now" by replacing `SERVER_NOW_NS`; a separate test checks
//! that text against the host clock.
//!
//! A disagreement fails with the state, the instance and both values, and
//! proptest shrinks the state; the failing seed is kept in
//! `fragments_live.proptest-regressions`, which is committed.
//!
//! Runs on the embedded engine by default and through the HTTP front with
//! `CAPCAT_CATALOG_TRANSPORT=http` (see `support`). `CAPCAT_FRAGMENT_STATES`
//! sets the number of generated states (default 2,000).

mod differential;
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use capcat_clickhouse::Transport;
use capcat_proto::fragments::SERVER_NOW_NS;
use capcat_proto::fragments::meaning::LeaseRow;
use capcat_proto::{ColumnType, Tables, Value};
use differential::state::{self, MARGINS, NOW_NS, State, Write, lease_ids, packs, publish_ids};
use differential::{fragments, statements};
use proptest::test_runner::{
    Config as RunnerConfig, FileFailurePersistence, TestCaseError, TestRunner,
};
use support::Live;

/// Runs one state; `Err` carries every disagreement.
async fn check(transport: &dyn Transport, tables: &Tables, state: &State) -> Result<usize, String> {
    let exec = |sql: String| async move {
        transport
            .execute(&support::raw(&sql, capcat_proto::Expect::Nothing))
            .await
            .map_err(|f| format!("{sql}: {f}"))
    };
    for table in state::tables_of(tables) {
        exec(format!("TRUNCATE TABLE {table}")).await?;
    }
    for sql in state::load(tables, state) {
        exec(sql).await?;
    }
    let probe = fragments::probe(tables, state);
    let mut select = probe.statement();
    select.sql = state::under_settings(&select.sql, state);
    let rows = transport
        .execute(&select)
        .await
        .map_err(|f| format!("the fragment probe: {f}"))?;
    let [row] = rows.0.as_slice() else {
        return Err(format!("the fragment probe returned {} rows", rows.0.len()));
    };
    let mut disagreements = probe.disagreements(row);
    disagreements.extend(statements::reads(transport, tables, state).await?);
    disagreements.extend(statements::write(transport, tables, state).await?);
    if disagreements.is_empty() {
        Ok(probe.len())
    } else {
        Err(format!(
            "{} disagreement(s) between the engine and the meanings:\n  {}\nstate: {state:#?}",
            disagreements.len(),
            disagreements.join("\n  ")
        ))
    }
}

fn row(term: u64, lease: usize, expires_at_ns: u64) -> LeaseRow {
    let lease_id = lease_ids()[lease];
    LeaseRow {
        term,
        lease_id,
        expires_at_ns,
        holder: state::holder_of(lease_id),
    }
}

fn empty(write: Write) -> State {
    State {
        lease: Vec::new(),
        claims: Vec::new(),
        watermark: Vec::new(),
        manifest: Vec::new(),
        inventory: Vec::new(),
        asked: packs().into_iter().collect(),
        read_version: 1,
        write,
        params: state::Params::every(),
    }
}

/// The named edge cases, run before the generated states.
fn edge_cases() -> Vec<(&'static str, State)> {
    let l = lease_ids();
    let p = publish_ids();
    let k = packs();
    let m = MARGINS[2];
    let commit_row = |version, publish_id, manifest_packs| Write::CommitRow {
        version,
        publish_id,
        lease: l[0],
        margin: m,
        manifest_packs,
    };
    let live = NOW_NS + 3_000_000_000;
    vec![
        (
            "empty tables fence everybody out",
            empty(commit_row(1, p[0], 0)),
        ),
        (
            "two leases tied at the top term, server order against byte order",
            State {
                lease: vec![row(2, 0, live), row(2, 3, live), row(1, 1, live)],
                ..empty(Write::Release {
                    lease: l[0],
                    margin: m,
                })
            },
        ),
        (
            "the same tie inserted the other way round",
            State {
                lease: vec![row(2, 3, live), row(2, 0, live)],
                ..empty(Write::Release {
                    lease: l[3],
                    margin: m,
                })
            },
        ),
        (
            "two leases tied on the low half of their ids",
            State {
                lease: vec![row(3, 0, live), row(3, 4, live)],
                ..empty(Write::Release {
                    lease: l[4],
                    margin: 0,
                })
            },
        ),
        (
            "a tombstone tied at the head term with a live row of its lease",
            State {
                lease: vec![row(3, 1, live), row(3, 1, 0), row(2, 2, live)],
                read_version: 3,
                ..empty(Write::Claim {
                    term: 4,
                    lease: l[2],
                    ttl: 1,
                })
            },
        ),
        (
            "head expiry exactly at now plus the margin",
            State {
                lease: vec![row(1, 0, NOW_NS + m)],
                ..empty(commit_row(1, p[0], 0))
            },
        ),
        (
            "head expiry one nanosecond past now plus the margin",
            State {
                lease: vec![row(1, 0, NOW_NS + m + 1)],
                ..empty(commit_row(1, p[0], 0))
            },
        ),
        (
            "head expiry one nanosecond past now, no margin",
            State {
                lease: vec![row(1, 0, NOW_NS + 1)],
                ..empty(Write::Release {
                    lease: l[0],
                    margin: 0,
                })
            },
        ),
        (
            "head expiring exactly now",
            State {
                lease: vec![row(1, 0, NOW_NS)],
                ..empty(Write::Release {
                    lease: l[0],
                    margin: 0,
                })
            },
        ),
        (
            "a released rival's live row, and a live rival below the claimed term",
            State {
                lease: vec![
                    row(1, 1, live),
                    row(2, 1, 0),
                    row(2, 2, live),
                    row(4, 3, live),
                ],
                read_version: 4,
                ..empty(Write::Claim {
                    term: 4,
                    lease: l[3],
                    ttl: 2_000_000_000,
                })
            },
        ),
        (
            "a commit row at V closes the barrier",
            State {
                lease: vec![row(1, 0, live)],
                watermark: vec![(2, p[1])],
                manifest: vec![(2, p[0], k[0].clone())],
                ..empty(commit_row(2, p[0], 1))
            },
        ),
        (
            "a commit row above V closes the barrier",
            State {
                lease: vec![row(1, 0, live)],
                watermark: vec![(3, p[1])],
                manifest: vec![(2, p[0], k[0].clone())],
                ..empty(commit_row(2, p[0], 1))
            },
        ),
        (
            "a commit row below V leaves the barrier open",
            State {
                lease: vec![row(1, 0, live)],
                watermark: vec![(1, p[1])],
                manifest: vec![(2, p[0], k[0].clone())],
                ..empty(commit_row(2, p[0], 1))
            },
        ),
        (
            "a foreign publish id's manifest rows at a published version",
            State {
                watermark: vec![(2, p[0])],
                manifest: vec![(2, p[1], k[1].clone()), (2, p[0], k[0].clone())],
                ..empty(commit_row(3, p[2], 0))
            },
        ),
        (
            "manifest rows without their commit row, one of them twice",
            State {
                lease: vec![row(1, 0, live)],
                manifest: vec![
                    (1, p[0], k[0].clone()),
                    (1, p[0], k[0].clone()),
                    (1, p[0], k[1].clone()),
                ],
                ..empty(commit_row(1, p[0], 3))
            },
        ),
        (
            "the same manifest, the commit row asking for the distinct count",
            State {
                lease: vec![row(1, 0, live)],
                manifest: vec![
                    (1, p[0], k[0].clone()),
                    (1, p[0], k[0].clone()),
                    (1, p[0], k[1].clone()),
                ],
                ..empty(commit_row(1, p[0], 2))
            },
        ),
        (
            // Found by a generated state when MANIFEST_COMPLETE counted pack
            // ids alone (uniqExact(pack_id)).
            "one publish naming the same pack id in two stores",
            State {
                lease: vec![row(1, 0, live)],
                manifest: vec![(3, p[1], k[3].clone()), (3, p[1], k[1].clone())],
                ..empty(Write::CommitRow {
                    version: 3,
                    publish_id: p[1],
                    lease: l[0],
                    margin: m,
                    manifest_packs: 1,
                })
            },
        ),
        (
            // Found by a generated state when the barrier read min() for
            // max(): the barrier must read the HIGHEST published version.
            "two commit rows, the barrier between them",
            State {
                lease: vec![row(1, 0, live)],
                watermark: vec![(4, p[0]), (1, p[0])],
                manifest: vec![(2, p[1], k[0].clone())],
                ..empty(commit_row(2, p[1], 1))
            },
        ),
        (
            "a pack id mirrored to a second store",
            State {
                watermark: vec![(1, p[0])],
                manifest: vec![(1, p[0], k[0].clone())],
                inventory: vec![(k[0].clone(), 1, p[0])],
                ..empty(Write::Manifest {
                    version: 2,
                    publish_id: p[1],
                    lease: l[1],
                    margin: 0,
                    packs: vec![k[2].clone()],
                })
            },
        ),
        (
            "a live head's manifest chunk above the published head",
            State {
                lease: vec![row(1, 2, live)],
                watermark: vec![(1, p[0])],
                ..empty(Write::Manifest {
                    version: 2,
                    publish_id: p[1],
                    lease: l[2],
                    margin: m,
                    packs: k.to_vec(),
                })
            },
        ),
    ]
}

fn states() -> u32 {
    std::env::var("CAPCAT_FRAGMENT_STATES")
        .ok()
        .map(|s| s.parse().expect("CAPCAT_FRAGMENT_STATES is a number"))
        .unwrap_or(2_000)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

#[test]
fn every_fragment_means_on_the_engine_what_the_model_believes() {
    let rt = runtime();
    let Some(live) = rt.block_on(Live::start("fragments_differential")) else {
        return;
    };
    rt.block_on(live.catalog.ensure_schema())
        .expect("ensure_schema");
    let transport: Arc<dyn Transport> = live.catalog.transport().clone();
    let tables = live.tables().clone();
    let started = Instant::now();

    // Every edge case under both values of the one server setting the
    // fragments' `ifNull`s exist for.
    let mut instances = 0;
    for (name, mut state) in edge_cases() {
        for null_for_empty in [false, true] {
            state.params.null_for_empty = null_for_empty;
            match rt.block_on(check(transport.as_ref(), &tables, &state)) {
                Ok(n) => instances += n,
                Err(e) => panic!("edge case {name:?} (null_for_empty {null_for_empty}): {e}"),
            }
        }
    }

    let cases = states();
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        max_shrink_iters: 256,
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..RunnerConfig::default()
    });
    let counted = std::cell::Cell::new(0_usize);
    let result = runner.run(&state::state(), |state| {
        let n = rt
            .block_on(check(transport.as_ref(), &tables, &state))
            .map_err(TestCaseError::fail)?;
        counted.set(counted.get() + n);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    instances += counted.get();
    println!(
        "{} named edge cases (each under both settings) and {cases} generated states \
         (every fragment in each): \
         {instances} fragment evaluations in {:.1} s",
        edge_cases().len(),
        started.elapsed().as_secs_f64()
    );
    rt.block_on(live.finish());
}

/// The clock every fence reads is the server's, in nanoseconds: between two
/// host clock readings taken around it (the engine runs on this machine),
/// and not rounded to micro- or milliseconds.
#[test]
fn the_server_clock_text_reads_nanoseconds_of_the_host_clock() {
    let rt = runtime();
    let Some(live) = rt.block_on(Live::start("fragments_clock")) else {
        return;
    };
    let host_ns = || {
        u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_nanos(),
        )
        .expect("before 2554")
    };
    let mut whole_microseconds = 0;
    let samples = 20;
    for _ in 0..samples {
        let before = host_ns();
        let rows = rt.block_on(live.rows(
            &format!("SELECT toInt64({SERVER_NOW_NS}) AS now"),
            &[("now", ColumnType::Int64)],
        ));
        let after = host_ns();
        let [row] = rows.as_slice() else {
            panic!("{rows:?}")
        };
        let [Value::Int64(now)] = row.as_slice() else {
            panic!("{row:?}")
        };
        let now = u64::try_from(*now).expect("after 1970");
        // The engine's clock and ours may disagree by the clock reads'
        // granularity; a second is far beyond that and far below any unit
        // mistake (milliseconds read as nanoseconds are off by 10^6).
        let slack = Duration::from_secs(1).as_nanos() as u64;
        assert!(
            before.saturating_sub(slack) <= now && now <= after + slack,
            "{SERVER_NOW_NS} = {now}, host clock {before}..{after}"
        );
        if now % 1_000 == 0 {
            whole_microseconds += 1;
        }
    }
    assert!(
        whole_microseconds < samples,
        "{samples} readings of {SERVER_NOW_NS} were all whole microseconds: not a nanosecond clock"
    );
    rt.block_on(live.finish());
}
