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

fn ci(design: Design) -> ModelConfig {
    ModelConfig::ci(design)
}

/// The hazard configurations: the CI configuration with a clock of two
/// ticks (one TTL) and one hazard switched on, always with the reader. The
/// three-tick clock of the CI configuration multiplies each of them by four
/// to ten; `capcat-model-check check Publication --ticks 3 ...` runs them
/// there (docs/model-checking.md records the figures).
fn hazard(design: Design) -> ModelConfig {
    ModelConfig {
        max_ticks: 2,
        ..ci(design)
    }
}

/// A stale holder releasing, with the crash.
fn with_release(design: Design) -> ModelConfig {
    ModelConfig {
        release: true,
        ..hazard(design)
    }
}

fn with_foreign_row(design: Design) -> ModelConfig {
    ModelConfig {
        foreign_writes: 1,
        crashes: 0,
        ..hazard(design)
    }
}

fn with_reacquire(design: Design) -> ModelConfig {
    ModelConfig {
        reacquire: true,
        ..hazard(design)
    }
}

/// Claim retries enumerate every jitter value of the 9-wide window, with
/// the reader (the hazard that grew a pinned snapshot in 36 steps on the
/// design before the rival-aware read-back).
fn with_claim_retries(design: Design) -> ModelConfig {
    ModelConfig {
        attempts: (2, 1, 1),
        crashes: 0,
        ..hazard(design)
    }
}

// ---- The shipped design, exhaustively ----------------------------------

/// 2 publishers + 1 reader + a free clock of 3 ticks (a lease renewed at
/// tick 1 expires inside the bounds) + 1 crash: no timing assumption, the
/// clock may tick between any two steps.
#[test]
fn shipped_design_holds_every_property_with_two_publishers_a_reader_a_free_clock_and_a_crash() {
    assert_holds(ci(Design::Shipped), 1_497_300);
}

#[test]
fn shipped_design_holds_with_a_foreign_row_at_a_version() {
    assert_holds(with_foreign_row(Design::Shipped), 197_138);
}

#[test]
fn shipped_design_holds_with_holders_re_acquiring() {
    assert_holds(with_reacquire(Design::Shipped), 250_541);
}

/// A contested claim retries with `Step::Draw { below: 9 }`: every jitter
/// value is a separate action, and the reader is present.
#[test]
fn shipped_design_holds_with_claim_retries_enumerating_every_jitter_value_beside_a_reader() {
    assert_holds(with_claim_retries(Design::Shipped), 731_110);
}

/// A stale holder releasing, with the crash: the late release tombstone
/// (a tombstone evaluated while its releaser still owned a live row at a
/// contested term) is the finding this configuration was built for.
#[test]
fn a_late_release_tombstone_over_a_new_holders_term_holds() {
    assert_holds(with_release(Design::Shipped), 687_771);
}

#[test]
fn shipped_design_holds_liveness_a_holder_that_keeps_renewing_publishes() {
    assert_holds(ModelConfig::liveness(Design::Shipped), 340);
}

// ---- A known gap of the shipped design --------------------------------

/// Late starts (`ModelConfig::late_start`): a guarded statement may start on
/// the server long after its send, its cap counted from its start, while
/// its client (told `Timeout` at send + cap by the driver's settle wait)
/// releases. A lease of four ticks leaves the release its margin.
fn with_late_starts() -> ModelConfig {
    ModelConfig {
        late_start: true,
        release: true,
        ttl_ticks: 4,
        max_ticks: 3,
        crashes: 0,
        ..ci(Design::Shipped)
    }
}

/// The SHIPPED design fails here: p0's watermark INSERT starts only after
/// p0 was told it timed out and released; it passes the fence (the release
/// has not landed yet), p1 takes over on the strength of the tombstone,
/// publishes v2, the reader pins W = 2, and p0's row at v1 lands under it.
/// This test asserts the checker FINDS it; it turns red the day the
/// protocol closes the gap (docs/model-checking.md names the candidate
/// fix), and must then become an `assert_holds`.
#[test]
fn a_statement_started_late_after_its_client_released_grows_a_pinned_snapshot() {
    let trace = assert_found(with_late_starts(), "PinnedSnapshotNeverGrows", 37);
    let steps = trace.join("\n");
    for step in [
        "KillAtCap publish.insert_watermark of p0",
        "IssueRelease p0",
        "EvaluateGuard publish.insert_watermark of p0",
        "LandRows publish.insert_watermark of p0",
    ] {
        assert!(steps.contains(step), "{step} missing from\n{steps}");
    }
}

// ---- Every rejected design is found -----------------------------------

#[test]
fn barrier_only_publish_is_found() {
    assert_found(
        hazard(Design::BarrierOnly),
        n::FENCED_OUT_WRITES_NOTHING,
        14,
    );
}

#[test]
fn post_write_highest_check_is_found() {
    assert_found(
        hazard(Design::PostWriteCheck),
        n::FENCED_OUT_WRITES_NOTHING,
        14,
    );
}

#[test]
fn two_subquery_fence_is_found() {
    assert_found(
        hazard(Design::TwoSubqueryFence),
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
    assert_found(
        ModelConfig {
            crashes: 0,
            ..with_release(Design::UnfencedRelease)
        },
        n::ONE_LIVE_LEASE,
        12,
    );
}

#[test]
fn fresh_lease_id_on_re_acquire_is_found() {
    assert_found(
        with_reacquire(Design::FreshLeaseIdOnReacquire),
        n::ONE_LIVE_LEASE,
        4,
    );
}

/// In the liveness model too the rejected re-acquire is refused by its own
/// live lease. (It no longer starves for good: its next acquire round
/// claims under the incarnation's claim id, which is the lease it forgot.)
#[test]
fn fresh_lease_id_on_re_acquire_is_refused_by_its_own_lease_in_the_liveness_model() {
    assert_found(
        ModelConfig::liveness(Design::FreshLeaseIdOnReacquire),
        n::ONE_LIVE_LEASE,
        4,
    );
}

#[test]
fn publish_without_an_execution_cap_is_found() {
    assert_found(
        hazard(Design::NoExecutionCap),
        n::PINNED_SNAPSHOT_NEVER_GROWS,
        33,
    );
}

/// With the margin fence a cap at the TTL can never pass: nothing is ever
/// published (a liveness failure, not a safety one).
#[test]
fn execution_cap_at_the_lease_ttl_never_publishes() {
    let report = run(ModelConfig::liveness(Design::CapAtLeastTtl), false);
    assert!(
        report
            .counterexamples
            .contains_key(n::HOLDER_EVENTUALLY_PUBLISHES),
        "liveness held:\n{}",
        report.render()
    );
}

#[test]
fn inventory_before_publish_is_found() {
    assert_found(
        hazard(Design::InventoryBeforePublish),
        n::INVENTORY_ONLY_AFTER_PUBLISH,
        7,
    );
}

/// The design as it stood when the model found it: an acquire that takes a
/// contested live head term at once, with the own-term read-back of that
/// time. (Under the rival-aware read-back the acquire-side rule is no
/// longer needed for safety; it stays as a liveness measure.)
#[test]
fn acquire_taking_a_contested_term_at_once_is_found() {
    assert_found(
        hazard(Design::ContestedTermTakenAtOnce),
        n::PINNED_SNAPSHOT_NEVER_GROWS,
        36,
    );
}

/// The seed's fence (live now, no margin): a watermark evaluated just
/// before its lease expired lands after a successor published and the
/// reader pinned W (counterexample 1 of the relaxed checker).
#[test]
fn marginless_fence_is_found() {
    assert_found(
        hazard(Design::MarginlessFence),
        n::PINNED_SNAPSHOT_NEVER_GROWS,
        33,
    );
}

/// The seed's read-back (the claimed term only): a claim retry lands above
/// a live renewal and holds beside it (counterexample 2).
#[test]
fn own_term_read_back_is_found_with_claim_retries() {
    assert_found(
        with_claim_retries(Design::OwnTermReadBack),
        n::PINNED_SNAPSHOT_NEVER_GROWS,
        34,
    );
}

/// A pinned read without `index_version <= W`: a crashed pass re-indexes
/// its pack above W and the pinned read resolves the new row.
#[test]
fn rows_above_the_watermark_are_found() {
    assert_found(
        hazard(Design::RowsAboveWatermark),
        n::PINNED_READS_NEVER_CHANGE,
        25,
    );
}

// ---- The mutation guard -------------------------------------------------

/// The publish statements rebuilt with the fence text cut out (through
/// capcat-proto's `mutations::without_lease_fence` hook, never by copying
/// SQL): the engine stops applying the fence and the model fails.
#[test]
fn publish_statements_without_the_fence_text_fail_the_model() {
    let cfg = ModelConfig {
        strip_fence: true,
        ..hazard(Design::Shipped)
    };
    assert_found(cfg, n::FENCED_OUT_WRITES_NOTHING, 14);
}
