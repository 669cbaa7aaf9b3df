//! What the kit's cases reach: every outcome of every machine, in the
//! exploration and in the walks. A case generator that stops reaching an
//! outcome leaves the drivers' handling of it unchecked, so the outcomes
//! reached are pinned, and so is the number of cases.

use std::collections::{BTreeMap, BTreeSet};

use capcat_conform::explore;
use capcat_conform::kit::Side;
use capcat_conform::walk;

/// Every outcome kind the exploration must reach.
const EXPLORED: &[&str] = &[
    "acquire err contested",
    "acquire err held",
    "acquire err malformed",
    "acquire err statement",
    "acquire err unexpected_input",
    "acquire ok",
    "allocate err exhausted",
    "allocate err malformed",
    "allocate err statement",
    "allocate err unexpected_input",
    "allocate ok",
    "ensure_schema err malformed",
    "ensure_schema err refused inventory_without_membership",
    "ensure_schema err refused leftovers",
    "ensure_schema err refused missing_columns",
    "ensure_schema err refused missing_tables",
    "ensure_schema err refused other_version",
    "ensure_schema err refused unstamped",
    "ensure_schema err refused wrong_kind",
    "ensure_schema err statement",
    "ensure_schema ok completed",
    "ensure_schema ok created",
    "ensure_schema ok current",
    "get_by_ids err malformed",
    "get_by_ids err snapshot_ahead",
    "get_by_ids err statement",
    "get_by_ids ok",
    "index_pass err allocate exhausted",
    "index_pass err allocate malformed",
    "index_pass err allocate statement",
    "index_pass err allocate unexpected_input",
    "index_pass err conflict",
    "index_pass err exhausted",
    "index_pass err inventory",
    "index_pass err lease_lost",
    "index_pass err malformed",
    "index_pass err publish malformed",
    "index_pass err publish renew",
    "index_pass err publish statement",
    "index_pass err publish unexpected_input",
    "index_pass err statement",
    "index_pass err unexpected_input",
    "index_pass err unsettled",
    "index_pass ok indexed",
    "index_pass ok nothing_to_do",
    "publish err lease_lost",
    "publish err malformed",
    "publish err no_packs",
    "publish err renew contested",
    "publish err renew malformed",
    "publish err renew statement",
    "publish err renew unexpected_input",
    "publish err statement",
    "publish err unexpected_input",
    "publish err unsettled",
    "publish err version_zero",
    "publish ok conflict",
    "publish ok lost_race",
    "publish ok won",
    "release err statement",
    "release err unexpected_input",
    "release err unsettled",
    "release ok",
    "renew err contested",
    "renew err malformed",
    "renew err not_held",
    "renew err statement",
    "renew err unexpected_input",
    "renew ok",
    "search_page err cursor_tenant_mismatch",
    "search_page err inverted_range",
    "search_page err malformed",
    "search_page err missing_tenant",
    "search_page err statement",
    "search_page ok",
];

/// The outcomes two publishers racing must reach in 200 walks. A `conflict`
/// is not among them: two commit rows at one version is what the guards
/// prevent, and the walks run the shipped guards.
const WALKED: &[&str] = &[
    "acquire err contested",
    "acquire err held",
    "acquire err statement",
    "acquire ok",
    "allocate err exhausted",
    "allocate err statement",
    "allocate ok",
    "publish err lease_lost",
    "publish err renew contested",
    "publish err renew statement",
    "publish err statement",
    "publish err unsettled",
    "publish ok lost_race",
    "publish ok won",
    "release err statement",
    "release err unsettled",
    "release ok",
];

#[test]
fn the_exploration_reaches_every_outcome_of_every_machine() {
    let cases = explore::cases();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for case in &cases {
        let (_, kind) = case
            .run(&mut Side::Solo)
            .expect("capcat-proto alone runs every case");
        *kinds.entry(kind).or_default() += 1;
    }
    let reached: BTreeSet<&str> = kinds.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = EXPLORED.iter().copied().collect();
    assert_eq!(reached, expected, "{kinds:#?}");
    assert_eq!(cases.len(), 28619, "the exploration's size changed");
}

#[test]
fn every_case_name_parses_back_to_its_case() {
    for case in explore::cases() {
        let name = case.name();
        assert_eq!(explore::Case::parse(&name).as_ref(), Some(&case), "{name}");
    }
    for flavour in [walk::Flavour::Publish, walk::Flavour::Service] {
        assert_eq!(walk::parse(&walk::name(flavour, 17)), Some((flavour, 17)));
    }
    assert_eq!(
        explore::Case::parse("explore/model/no-such-start/empty"),
        None
    );
}

#[test]
fn two_racing_publishers_reach_every_outcome_but_a_conflict() {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for seed in 0..200 {
        let walked = walk::run(walk::Flavour::Publish, seed, &mut Side::Solo)
            .expect("capcat-proto alone runs every walk");
        for (kind, n) in walked.outcomes {
            *kinds.entry(kind).or_default() += n;
        }
    }
    let reached: BTreeSet<&str> = kinds.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = WALKED.iter().copied().collect();
    assert_eq!(reached, expected, "{kinds:#?}");
}

/// What two publishers indexing and a reader reach in 200 service walks.
const SERVICE: &[&str] = &[
    "acquire err contested",
    "acquire err held",
    "acquire err statement",
    "acquire ok",
    "get_by_ids err statement",
    "get_by_ids ok",
    "index_pass err allocate exhausted",
    "index_pass err allocate statement",
    "index_pass err exhausted",
    "index_pass err inventory",
    "index_pass err lease_lost",
    "index_pass err publish renew",
    "index_pass err publish statement",
    "index_pass err statement",
    "index_pass ok indexed",
    "release err statement",
    "release err unsettled",
    "release ok",
    "search_page err statement",
    "search_page ok",
];

#[test]
fn publishers_indexing_beside_a_reader_reach_every_outcome_but_a_conflict() {
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for seed in 0..200 {
        let walked = walk::run(walk::Flavour::Service, seed, &mut Side::Solo)
            .expect("capcat-proto alone runs every walk");
        for (kind, n) in walked.outcomes {
            *kinds.entry(kind).or_default() += n;
        }
    }
    let reached: BTreeSet<&str> = kinds.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = SERVICE.iter().copied().collect();
    assert_eq!(reached, expected, "{kinds:#?}");
    // Most passes publish or lose the lease to the clock; a run where none
    // publishes would leave the readers nothing but empty answers.
    assert!(kinds["index_pass ok indexed"] >= 100, "{kinds:#?}");
}
