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

fn hazard(design: Design) -> ModelConfig {
    ModelConfig::short_clock(design)
}

// ---- The shipped design, exhaustively ----------------------------------

/// 2 publishers + 1 reader + a free clock of 3 ticks (a lease renewed at
/// tick 1 expires inside the bounds) + 1 crash, and late starts: no timing
/// assumption, the clock may tick between any two steps and a guarded
/// statement may start on the server at any time after its send.
#[test]
fn shipped_design_holds_every_property_with_two_publishers_a_reader_a_free_clock_and_a_crash() {
    assert_holds(ci(Design::Shipped), 1_904_638);
}

#[test]
fn shipped_design_holds_with_a_foreign_row_at_a_version() {
    assert_holds(ModelConfig::with_foreign_row(Design::Shipped), 207_944);
}

#[test]
fn shipped_design_holds_with_holders_re_acquiring() {
    assert_holds(ModelConfig::with_reacquire(Design::Shipped), 269_057);
}

/// A contested claim retries with `Step::Draw { below: 9 }`: every jitter
/// value is a separate action, and the reader is present.
#[test]
fn shipped_design_holds_with_claim_retries_enumerating_every_jitter_value_beside_a_reader() {
    assert_holds(ModelConfig::with_claim_retries(Design::Shipped), 749_794);
}

/// A stale holder releasing, with the crash: the late release tombstone
/// (a tombstone evaluated while its releaser still owned a live row at a
/// contested term) is the finding this configuration was built for.
#[test]
fn a_late_release_tombstone_over_a_new_holders_term_holds() {
    assert_holds(ModelConfig::with_release(Design::Shipped), 701_854);
}

/// Passes that run again under the same lease after a failure: a
/// commit row told it timed out may start later, and the holder publishes
/// another batch once its renewal proves the abandoned statement dead.
#[test]
fn shipped_design_holds_with_passes_that_run_again_after_a_timeout() {
    assert_holds(ModelConfig::with_passes(Design::Shipped), 1_399_735);
}

/// A lease long enough for a statement started after its client gave up
/// to pass its fence, passes that run again, and a release: the schedules
/// that grew a pinned snapshot before the exact-row fence and the settle
/// rule.
#[test]
fn shipped_design_holds_with_late_starts_inside_a_long_lease() {
    assert_holds(ModelConfig::with_long_lease(Design::Shipped), 673_419);
}

/// Claims (lease and version) stamped by the server when it starts them,
/// landing later, and landing after their client was told they failed,
/// with holders re-acquiring: a late renewal lands above or beside the row
/// its holder's fence names.
#[test]
fn shipped_design_holds_with_claims_that_land_late_or_after_their_client_gave_up() {
    assert_holds(ModelConfig::with_late_claims(Design::Shipped), 339_660);
}

/// Two manifest chunks per publish attempt, passes that run again and the
/// crash.
#[test]
fn shipped_design_holds_with_two_manifest_chunks_per_publish() {
    assert_holds(ModelConfig::with_two_chunks(Design::Shipped), 799_234);
}

/// `MANIFEST_COMPLETE` is implied by the exact-row fence: along one
/// client's statements the fence is monotone (the head only rises in the
/// lease order and the clock only advances, so once it refuses a chunk it
/// refuses the commit row too), and the design without it holds with two
/// chunks. It stays in the commit row as a check the server makes instead
/// of an argument (docs/model-checking.md). This test pins that finding:
/// it turns red if a schedule is found in which the guard is what keeps
/// a property.
#[test]
fn the_manifest_check_is_implied_by_the_exact_row_fence_with_two_chunks() {
    let cfg = ModelConfig {
        strip_manifest_check: true,
        crashes: 0,
        ..ModelConfig::with_two_chunks(Design::Shipped)
    };
    // The switch really takes the guard out of what the model sends.
    let model = PublicationModel::new(cfg.clone()).expect("valid configuration");
    let lease = capcat_proto::Lease {
        lease_id: uuid::Uuid::from_u128(1),
        term: 1,
        holder: "p0".to_owned(),
        expires_at_ns: 2_000_000_000,
        unsettled_until_ns: 0,
    };
    let commit_row = capcat_proto::publish::sql::insert_commit_row(
        model.tables(),
        model.proto(),
        1,
        uuid::Uuid::from_u128(2),
        &lease,
        2,
    );
    let complete = capcat_proto::fragments::manifest_complete(model.tables());
    assert!(commit_row.sql.contains(&complete));
    assert!(!model.as_sent(commit_row).sql.contains(&complete));
    assert_holds(cfg, 106_296);
}

#[test]
fn shipped_design_holds_liveness_a_holder_that_keeps_renewing_publishes() {
    assert_holds(ModelConfig::liveness(Design::Shipped), 340);
}

/// No CI configuration assumes that a statement starts when it is sent, and
/// every one has the reader.
#[test]
fn late_starts_are_on_in_every_ci_configuration() {
    for (name, cfg) in ModelConfig::ci_set(Design::Shipped) {
        assert!(cfg.late_start, "{name} assumes statements start when sent");
        assert!(cfg.reader, "{name} has no reader");
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
        ModelConfig::with_foreign_row(Design::CountOnlyReadBack),
        n::REPORTED_MEANS_VISIBLE,
        18,
    );
}

#[test]
fn membership_on_version_alone_is_found() {
    assert_found(
        ModelConfig::with_foreign_row(Design::MembershipOnVersionAlone),
        n::PINNED_SNAPSHOT_NEVER_GROWS,
        17,
    );
}

#[test]
fn unfenced_release_is_found() {
    assert_found(
        ModelConfig {
            crashes: 0,
            ..ModelConfig::with_release(Design::UnfencedRelease)
        },
        n::ONE_LIVE_LEASE,
        12,
    );
}

#[test]
fn fresh_lease_id_on_re_acquire_is_found() {
    assert_found(
        ModelConfig::with_reacquire(Design::FreshLeaseIdOnReacquire),
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

/// The seed's fence (live now, no margin): a commit row evaluated just
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

/// A pinned read without `index_version <= W`: a crashed pass re-indexes
/// its pack above W and the pinned read resolves the new row.
#[test]
fn rows_above_the_pinned_version_are_found() {
    assert_found(
        hazard(Design::RowsAbovePinned),
        n::PINNED_READS_NEVER_CHANGE,
        25,
    );
}

// Four rejected designs need searches of minutes each: the seed's
// own-term read-back (claim retries beside a reader), the fence on the lease
// id alone (passes that run again), acting at once after a timeout and rows
// of unpublished versions (a long lease). Each is found by capcat-tests'
// corpus check (`tests/tests/corpus.rs`), which runs the breadth-first
// search of the same configuration (`traces::rejected_designs` takes it
// from the same constructors) and compares the whole counterexample, step
// for step, with the committed one, and checks the steps that make each
// what it is. Searching them here as well would run each search twice in
// the suite (about nine minutes of CI's time) for a weaker check: a length.

// ---- The mutation guard -------------------------------------------------

/// The publish statements rebuilt with the fence text cut out (through
/// capcat-proto's `designs::without_lease_fence` rewrite, never by copying
/// SQL): the engine stops applying the fence and the model fails.
#[test]
fn publish_statements_without_the_fence_text_fail_the_model() {
    let cfg = ModelConfig {
        strip_fence: true,
        ..hazard(Design::Shipped)
    };
    assert_found(cfg, n::FENCED_OUT_WRITES_NOTHING, 14);
}
