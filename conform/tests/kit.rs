//! The kit against real drivers: the reference passes every case; the
//! reference with one guard broken on its way out fails, with a readable
//! first difference and a replay line that reproduces it; drivers that
//! break the protocol get a typed error, never a hang.

use std::time::Duration;

use capcat_conform::ConformError;
use capcat_conform::run::{self, Plan, Verdict};

const REFERENCE: &str = env!("CARGO_BIN_EXE_capcat-conform-reference");

fn plan(driver: String) -> Plan {
    Plan {
        driver,
        case: None,
        walks: 200,
        timeout: Duration::from_secs(10),
    }
}

#[test]
fn the_reference_driver_passes_every_case() {
    let passed = run::run(&plan(REFERENCE.to_owned()), |_, _| {}).expect("every case passes");
    assert_eq!(passed.explored, 28619);
    assert_eq!(passed.walked, 400);
    assert_eq!(passed.replayed, 20);
    assert_eq!(passed.skipped, 0);
    assert!(passed.walk_steps > 400 * 10, "{}", passed.walk_steps);
}

/// The reference driver with its lease fence stripped of the lease id
/// condition as it leaves the process: a native writer's one-token slip.
fn broken_fence() -> String {
    format!("{REFERENCE} | sed -u 's/ AND lease_id = {{lease_id:UUID}}//'")
}

#[test]
fn a_fence_without_its_lease_id_fails_with_a_readable_first_difference() {
    let verdict = run::run(&plan(broken_fence()), |_, _| {}).expect_err("the kit must fail");
    let Verdict::Differs(difference) = &verdict else {
        panic!("expected a difference, got {verdict:?}");
    };
    assert!(
        difference.what.contains("the SQL text differs at byte"),
        "{}",
        difference.what
    );
    let report = run::report(&verdict, &broken_fence());
    for needle in [
        "FAILED: case explore/",
        "lease.release",
        "expected (capcat-proto):",
        "actual (the driver):",
        "trace so far:",
        "replay: capcat-conform --driver",
        "--case explore/",
    ] {
        assert!(
            report.contains(needle),
            "{needle:?} missing from:\n{report}"
        );
    }
    // The replay line runs exactly that case, and it fails the same way.
    let mut again = plan(broken_fence());
    again.case = Some(difference.case.clone());
    match run::run(&again, |_, _| {}) {
        Err(Verdict::Differs(d)) => {
            // The same step differs (the session number is the run's own).
            assert_eq!(d.case, difference.case);
            assert_eq!(d.expected["execute"], difference.expected["execute"]);
            assert_eq!(d.actual["execute"], difference.actual["execute"]);
        }
        other => panic!("the replay did not reproduce the difference: {other:?}"),
    }
}

#[test]
fn a_broken_fence_differs_in_a_trace_of_the_model_s_corpus_too() {
    let mut plan = plan(broken_fence());
    plan.case = Some("corpus/walks-shipped/0".to_owned());
    match run::run(&plan, |_, _| {}) {
        Err(Verdict::Differs(d)) => {
            assert_eq!(d.case, "corpus/walks-shipped/0");
            assert!(d.what.contains("publish.insert_manifest"), "{}", d.what);
        }
        other => panic!("expected a difference, got {other:?}"),
    }
}

#[test]
fn a_dropped_draw_is_caught_at_the_step_it_happens() {
    // A driver that never asks for its jitter draw claims at head + 1 every
    // time: two claimants that collided collide again forever.
    let driver =
        format!("{REFERENCE} | sed -u 's/\"draw\":{{\"below\":[0-9]*}}/\"draw\":{{\"below\":1}}/'");
    let verdict = run::run(&plan(driver), |_, _| {}).expect_err("the kit must fail");
    let Verdict::Differs(d) = verdict else {
        panic!("expected a difference, got {verdict:?}");
    };
    assert!(
        d.what.contains("draw bound 1 where capcat-proto draws 9"),
        "{}",
        d.what
    );
}

fn broke(driver: &str, timeout_s: u64) -> ConformError {
    let mut plan = plan(driver.to_owned());
    plan.timeout = Duration::from_secs(timeout_s);
    match run::run(&plan, |_, _| {}) {
        Err(Verdict::Broke { error, .. }) => error,
        other => panic!("expected the driver to break, got {other:?}"),
    }
}

#[test]
fn drivers_that_break_the_protocol_get_a_typed_error() {
    let hello = |version: u32| {
        format!(
            "echo '{{\"hello\": {{\"protocol\": {version}, \"implementation\": \"x\", \"machines\": [\"allocate\"]}}}}'"
        )
    };
    assert!(matches!(
        broke(&hello(2), 5),
        ConformError::Version { driver: 2, kit: 1 }
    ));
    assert!(matches!(broke(&hello(1), 5), ConformError::Closed { .. }));
    assert!(matches!(
        broke(&format!("{}; sleep 30", hello(1)), 1),
        ConformError::Timeout { seconds: 1, .. }
    ));
    assert!(matches!(
        broke(&format!("{}; echo 'not json'; sleep 5", hello(1)), 5),
        ConformError::BadMessage { .. }
    ));
    assert!(matches!(
        broke(
            &format!("{}; read start; echo '{{\"error\": \"no\"}}'", hello(1)),
            5
        ),
        ConformError::DriverError { .. }
    ));
    assert!(matches!(
        broke("exec /nonexistent/driver", 5),
        ConformError::Closed { .. }
    ));
}

/// A driver stopped on a timeout is stopped with everything its command
/// started: a `sh -c` wrapper's child must not outlive the kit.
#[test]
fn a_driver_that_times_out_is_stopped_with_its_children() {
    let pid_file = std::env::temp_dir().join(format!(
        "capcat-conform-kit-{}-grandchild.pid",
        std::process::id()
    ));
    let driver = format!(
        "echo '{{\"hello\": {{\"protocol\": 1, \"implementation\": \"x\", \"machines\": [\"allocate\"]}}}}'; \
         sleep 30 & echo $! > {}; wait",
        pid_file.display()
    );
    assert!(matches!(
        broke(&driver, 1),
        ConformError::Timeout { seconds: 1, .. }
    ));
    let pid = std::fs::read_to_string(&pid_file).expect("the driver wrote its child's pid");
    let _ = std::fs::remove_file(&pid_file);
    let stat = std::path::PathBuf::from(format!("/proc/{}/stat", pid.trim()));
    // The killed child is gone once its new parent reaps it; until then it
    // is a zombie. Either way it no longer runs. Bounded: 50 x 100 ms.
    let stopped = (0..50).any(|_| {
        let state = std::fs::read_to_string(&stat)
            .ok()
            .and_then(|s| s.rsplit(") ").next().and_then(|rest| rest.chars().next()));
        if matches!(state, None | Some('Z' | 'X')) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
        false
    });
    assert!(stopped, "the driver's child {} still runs", pid.trim());
}

#[test]
fn a_driver_that_implements_some_machines_runs_only_their_cases() {
    // The reference behind a hello that announces only the allocator.
    let driver =
        format!("{REFERENCE} | sed -u 's/\"machines\":\\[[^]]*\\]/\"machines\":[\"allocate\"]/'");
    let passed = run::run(&plan(driver), |_, _| {}).expect("the allocator's cases pass");
    assert_eq!(passed.explored, 966);
    assert_eq!(passed.walked, 0);
    assert_eq!(passed.skipped, 28619 - 966 + 400 + 20);
    assert!(
        passed.summary().contains(
            "acquire, ensure_schema, get_by_ids, index_pass, publish, release, renew, search_page"
        ),
        "{}",
        passed.summary()
    );
}
