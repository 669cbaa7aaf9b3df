//! The join's laws and the fold's order independence, by proptest.
//!
//! Failing cases persist to `proptest-regressions/demand_proptest.txt`
//! (committed) and are replayed first on every run.

mod demand_support;

use std::collections::BTreeMap;

use capcat_proto::demand::{DemandEvent, DemandRecord, Mark, decode, encode, fold, storage};
use demand_support::{MAX_GENERATION, event_from, observable, shuffled, store, tables};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/demand_proptest.txt",
        ))),
        ..ProptestConfig::default()
    }
}

fn mark() -> impl Strategy<Value = Option<Mark>> {
    proptest::option::of((0..MAX_GENERATION, 1u64..=3).prop_map(|(v, e)| Mark::new(v, e)))
}

/// Records of the stream domain, normalized: fewer than `SEALED_TIMES_CAP`
/// generations in all, so every law holds exactly, age clock included.
fn record() -> impl Strategy<Value = DemandRecord> {
    (
        0u32..=1,
        mark(),
        mark(),
        0u64..10_000,
        proptest::collection::btree_map(0..MAX_GENERATION, 1_000u64..6_000, 0..6),
    )
        .prop_map(|(v, sealed, merged, bytes, sealed_times)| {
            DemandRecord {
                v,
                sealed,
                merged,
                bytes,
                sealed_times,
            }
            .normalized()
        })
}

fn event() -> impl Strategy<Value = DemandEvent> {
    (any::<[u64; 6]>(), any::<bool>())
        .prop_map(|(choice, with_merged)| event_from(choice, with_merged))
}

fn join(a: &DemandRecord, b: &DemandRecord) -> DemandRecord {
    a.join(b).expect("generated records have known versions")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn join_is_commutative(a in record(), b in record()) {
        prop_assert_eq!(join(&a, &b), join(&b, &a));
    }

    #[test]
    fn join_is_associative(a in record(), b in record(), c in record()) {
        prop_assert_eq!(join(&join(&a, &b), &c), join(&a, &join(&b, &c)));
    }

    #[test]
    fn join_is_idempotent(a in record()) {
        prop_assert_eq!(join(&a, &a), a.clone());
        prop_assert_eq!(join(&a, &DemandRecord::default()), a);
    }

    #[test]
    fn join_is_an_upper_bound_of_every_mark(a in record(), b in record()) {
        let j = join(&a, &b);
        prop_assert!(j.sealed >= a.sealed && j.sealed >= b.sealed);
        prop_assert!(j.merged >= a.merged && j.merged >= b.merged);
        prop_assert!(j.bytes >= a.bytes.max(b.bytes));
    }

    #[test]
    fn fold_ignores_order_and_duplication(
        events in proptest::collection::vec(event(), 0..40),
        seed in any::<u64>(),
    ) {
        let expected = observable(&fold(&events));
        let reversed: Vec<_> = events.iter().rev().cloned().collect();
        prop_assert_eq!(observable(&fold(&reversed)), expected.clone());
        let order = shuffled(&events, seed);
        prop_assert_eq!(observable(&fold(&order)), expected.clone());
        let doubled: Vec<_> = order.iter().chain(events.iter()).cloned().collect();
        prop_assert_eq!(observable(&fold(&doubled)), expected);
    }

    #[test]
    fn fold_equals_rebuild_including_the_age_clock(events in proptest::collection::vec(event(), 0..40)) {
        let rebuilt = storage::rebuild(&store(&tables(), &events).read());
        prop_assert!(rebuilt.skipped.is_empty());
        prop_assert_eq!(observable(&rebuilt), observable(&fold(&events)));
    }

    /// `MergedNeverForgotten` (spec/DemandFold.tla): no event from any
    /// source lowers a record's merged mark or loses it.
    #[test]
    fn merged_never_forgotten(a in record(), e in event()) {
        prop_assert!(join(&a, &e.record).merged >= a.merged);
    }

    /// `PendingCountsGenerations` (spec/DemandFold.tla): pending is sealed
    /// minus merged generations, whatever their epochs.
    #[test]
    fn pending_counts_generations(
        sealed in 0..MAX_GENERATION, merged in 0..MAX_GENERATION,
        sealed_epoch in 1u64..=3, merged_epoch in 1u64..=3,
    ) {
        let folded = fold(&[
            DemandEvent::executor_merged("s", merged_epoch, merged),
            DemandEvent::writer_sealed("s", sealed_epoch, sealed, 1, 1),
        ]);
        prop_assert_eq!(folded.shards["s"].pending(), sealed.saturating_sub(merged));
    }

    /// The backlog over every shard is the sum of each shard's pending
    /// packs, whatever else the events carry.
    #[test]
    fn total_pending_sums_every_shard(events in proptest::collection::vec(event(), 0..40)) {
        let folded = fold(&events);
        let sum: u64 = folded.shards.values().map(DemandRecord::pending).sum();
        prop_assert_eq!(folded.total_pending(), sum);
    }

    #[test]
    fn the_stored_text_round_trips(a in record()) {
        prop_assert_eq!(decode(&encode(&a)), Ok(a));
    }

    #[test]
    fn decoding_any_text_returns_a_typed_answer(text in ".{0,200}") {
        // No panic, whatever the text; a success is a normalized record.
        if let Ok(record) = decode(&text) {
            prop_assert_eq!(record.clone().normalized(), record);
        }
    }

    #[test]
    fn decoding_a_damaged_text_returns_a_typed_answer(a in record(), cut in any::<usize>(), byte in any::<u8>()) {
        let text = encode(&a);
        let at = cut % text.len();
        let mut damaged = text.into_bytes();
        damaged[at] = byte;
        if let Ok(text) = String::from_utf8(damaged) {
            let _ = decode(&text);
        }
    }
}

#[test]
fn a_record_beyond_the_generators_range_keeps_its_counts() {
    // The generators stay below the cap on purpose; this pins the range.
    let times: BTreeMap<u64, u64> = (0..MAX_GENERATION).map(|g| (g, g)).collect();
    assert!(times.len() < capcat_proto::demand::SEALED_TIMES_CAP);
}
