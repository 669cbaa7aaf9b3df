//! The publication model, checked exhaustively: the shipped design holds
//! every property, and the checker FINDS a counterexample for every
//! rejected design under the same bounds, printed as a numbered trace.
//!
//! Unique-state counts and counterexample lengths are pinned: a change to
//! capcat-proto's machines or statements that moves them is a change to
//! what was proven, and must be looked at (and the figures in
//! docs/model-checking.md updated).

use capcat_model_check::names::publication as n;
use capcat_model_check::publication::{Design, ModelConfig, PublicationModel};
use capcat_model_check::run::{CheckReport, RunOptions, check};

fn run(cfg: ModelConfig, stop_at_first: bool) -> CheckReport {
    let label = format!("{:?}", cfg);
    let model = PublicationModel::new(cfg).expect("the test configurations are valid");
    let report = check(
        model,
        RunOptions {
            threads: 1,
            stop_at_first,
            progress: None,
            depth_first: false,
        },
    );
    println!("{label}\n{}", report.render());
    report
}

/// The shipped design holds every property, exhaustively, in `cfg`.
fn assert_holds(cfg: ModelConfig, unique_states: usize) {
    let report = run(cfg, false);
    assert!(
        report.holds(),
        "the shipped design failed:\n{}",
        report.render()
    );
    assert!(report.complete);
    assert_eq!(
        report.unique_states, unique_states,
        "unique-state count moved"
    );
}

/// The checker finds a counterexample to `property` for `design` in `cfg`,
/// of exactly `steps` steps (the shortest one: breadth-first search).
fn assert_found(cfg: ModelConfig, property: &str, steps: usize) -> Vec<String> {
    let report = run(cfg, true);
    let trace = report
        .counterexamples
        .get(property)
        .unwrap_or_else(|| panic!("no counterexample to {property}:\n{}", report.render()))
        .clone();
    assert_eq!(
        trace.len(),
        steps,
        "counterexample length moved:\n{}",
        report.render()
    );
    assert!(trace[0].starts_with(" 1. "), "traces are numbered");
    trace
}

/// A full run (not stopped at the first counterexample) finds every listed
/// property failing, each with a shortest trace of the given length.
fn assert_found_all(cfg: ModelConfig, expected: &[(&str, usize)]) {
    let report = run(cfg, false);
    for (property, steps) in expected {
        let trace = report
            .counterexamples
            .get(property)
            .unwrap_or_else(|| panic!("no counterexample to {property}:\n{}", report.render()));
        assert_eq!(
            trace.len(),
            *steps,
            "{property}: counterexample length moved"
        );
    }
}

fn ci(design: Design) -> ModelConfig {
    ModelConfig::ci(design)
}

/// A stale holder releasing, with the CI crash: the crash stayed off while
/// capcat-proto's acquire took a term whose head row was a dead tombstone
/// (the late release tombstone below); it is back on since the acquire
/// waits out every live row at the head term.
fn with_release(design: Design) -> ModelConfig {
    ModelConfig {
        release: true,
        ..ci(design)
    }
}

fn with_foreign_row(design: Design) -> ModelConfig {
    ModelConfig {
        foreign_writes: 1,
        crashes: 0,
        ..ci(design)
    }
}

fn with_reacquire(design: Design) -> ModelConfig {
    ModelConfig {
        reacquire: true,
        ..ci(design)
    }
}

// ---- The shipped design, exhaustively ----------------------------------

/// 2 publishers + 1 reader + lease expiry (clock 2 ticks = one TTL) +
/// 1 crash: the smallest configuration CI checks exhaustively.
#[test]
fn shipped_design_holds_every_property_with_two_publishers_a_reader_expiry_and_a_crash() {
    assert_holds(ci(Design::Shipped), 145_122);
}

#[test]
fn shipped_design_holds_with_a_foreign_row_at_a_version() {
    assert_holds(with_foreign_row(Design::Shipped), 146_362);
}

#[test]
fn shipped_design_holds_with_holders_re_acquiring() {
    assert_holds(with_reacquire(Design::Shipped), 222_601);
}

/// A contested claim retries with `Step::Draw { below: 9 }`: every jitter
/// value is a separate action.
#[test]
fn shipped_design_holds_with_claim_retries_enumerating_every_jitter_value() {
    assert_holds(
        ModelConfig {
            attempts: (2, 1, 1),
            crashes: 0,
            reader: false,
            ..ci(Design::Shipped)
        },
        76_030,
    );
}

#[test]
fn shipped_design_holds_liveness_a_holder_that_keeps_renewing_publishes() {
    assert_holds(ModelConfig::liveness(Design::Shipped), 330);
}

// ---- Every rejected design is found -----------------------------------

#[test]
fn barrier_only_publish_is_found() {
    assert_found_all(
        ci(Design::BarrierOnly),
        &[
            (n::FENCED_OUT_WRITES_NOTHING, 14),
            (n::PINNED_SNAPSHOT_NEVER_GROWS, 33),
        ],
    );
}

#[test]
fn post_write_highest_check_is_found() {
    assert_found_all(
        ci(Design::PostWriteCheck),
        &[
            (n::FENCED_OUT_WRITES_NOTHING, 14),
            (n::PINNED_SNAPSHOT_NEVER_GROWS, 33),
            (n::REPORTED_MEANS_VISIBLE, 34),
        ],
    );
}

#[test]
fn two_subquery_fence_is_found() {
    assert_found(
        ci(Design::TwoSubqueryFence),
        n::FENCED_OUT_WRITES_NOTHING,
        17,
    );
}

#[test]
fn count_only_read_back_is_found() {
    assert_found(
        with_foreign_row(Design::CountOnlyReadBack),
        n::REPORTED_MEANS_VISIBLE,
        18,
    );
}

#[test]
fn membership_on_version_alone_is_found() {
    assert_found(
        with_foreign_row(Design::MembershipOnVersionAlone),
        n::PINNED_SNAPSHOT_NEVER_GROWS,
        17,
    );
}

#[test]
fn unfenced_release_is_found() {
    assert_found(with_release(Design::UnfencedRelease), n::ONE_LIVE_LEASE, 12);
}

#[test]
fn fresh_lease_id_on_re_acquire_is_found() {
    assert_found(
        with_reacquire(Design::FreshLeaseIdOnReacquire),
        n::ONE_LIVE_LEASE,
        4,
    );
}

#[test]
fn fresh_lease_id_on_re_acquire_breaks_liveness() {
    let cfg = ModelConfig::liveness(Design::FreshLeaseIdOnReacquire);
    let report = run(cfg, false);
    let trace = report
        .counterexamples
        .get(n::HOLDER_EVENTUALLY_PUBLISHES)
        .unwrap_or_else(|| panic!("liveness held:\n{}", report.render()));
    assert_eq!(trace.len(), 7, "counterexample length moved");
}

#[test]
fn publish_without_an_execution_cap_is_found() {
    assert_found(
        ci(Design::NoExecutionCap),
        n::PINNED_SNAPSHOT_NEVER_GROWS,
        33,
    );
}

#[test]
fn execution_cap_at_the_lease_ttl_is_found() {
    assert_found(
        ci(Design::CapAtLeastTtl),
        n::PINNED_SNAPSHOT_NEVER_GROWS,
        33,
    );
}

#[test]
fn inventory_before_publish_is_found() {
    assert_found(
        ci(Design::InventoryBeforePublish),
        n::INVENTORY_ONLY_AFTER_PUBLISH,
        7,
    );
}

/// An acquire that takes a contested live head term at once (capcat-proto's
/// acquire until the model found this; now only
/// `Config::with_wait_out_contested_term(false)`) grows a pinned snapshot.
#[test]
fn acquire_taking_a_contested_term_at_once_is_found() {
    assert_found(
        ci(Design::ContestedTermTakenAtOnce),
        n::PINNED_SNAPSHOT_NEVER_GROWS,
        36,
    );
}

/// A finding the shipped design had until capcat-proto's acquire waited out
/// every live row at the head term: a claimant whose renewal lost a
/// contested term still owns a live row carrying its lease_id, so its fenced
/// release passes and writes a tombstone at `max(term) + 1` computed at
/// evaluation; a new holder claims that term before the tombstone lands, and
/// the dead tombstone becomes the head row of the new holder's term. The old
/// acquire took that term at once (46 steps to a grown pinned snapshot); the
/// shipped acquire sees the term's live row (`lease.read_head`'s
/// `term_live`) and waits, so the same configuration (a stale holder
/// releasing, with the CI crash) now holds exhaustively.
#[test]
fn a_late_release_tombstone_over_a_new_holders_term_holds() {
    assert_holds(with_release(Design::Shipped), 519_389);
}

// ---- The mutation guard -------------------------------------------------

/// The publish statements rebuilt with the fence text cut out (through
/// capcat-proto's `mutations::without_lease_fence` hook, never by copying
/// SQL): the engine stops applying the fence and the model fails.
#[test]
fn publish_statements_without_the_fence_text_fail_the_model() {
    let cfg = ModelConfig {
        strip_fence: true,
        ..ci(Design::Shipped)
    };
    assert_found(cfg, n::FENCED_OUT_WRITES_NOTHING, 14);
}
