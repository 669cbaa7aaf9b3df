//! The demand fold model: every order and duplication of the writer's,
//! executor's and scan's events folds to the rebuild, and each rejected
//! fold is found.

use capcat_model_check::demand::{DemandModel, FoldDesign};
use capcat_model_check::names::demand_fold as n;
use capcat_model_check::run::{RunOptions, check};

fn run(design: FoldDesign) -> capcat_model_check::run::CheckReport {
    let report = check(DemandModel::new(design, 2), RunOptions::default());
    println!("{}\n{}", design.name(), report.render());
    report
}

#[test]
fn shipped_fold_is_the_same_in_every_order_and_duplication() {
    let report = run(FoldDesign::Shipped);
    assert!(report.holds(), "{}", report.render());
    assert_eq!(report.unique_states, 46, "unique-state count moved");
}

#[test]
fn event_as_unit_is_found() {
    let report = run(FoldDesign::EventAsUnit);
    assert_eq!(
        report
            .counterexamples
            .get(n::MERGED_NEVER_FORGOTTEN)
            .map(Vec::len),
        Some(2)
    );
}

#[test]
fn epoch_major_order_is_found() {
    let report = run(FoldDesign::EpochMajorOrder);
    assert_eq!(
        report
            .counterexamples
            .get(n::PENDING_COUNTS_GENERATIONS)
            .map(Vec::len),
        Some(2)
    );
}

#[test]
fn writer_overwriting_merged_is_found() {
    let report = run(FoldDesign::WriterOverwritesMerged);
    assert_eq!(
        report
            .counterexamples
            .get(n::MERGED_NEVER_FORGOTTEN)
            .map(Vec::len),
        Some(2)
    );
    assert!(report.counterexamples.contains_key(n::FOLD_EQUALS_REBUILD));
}
