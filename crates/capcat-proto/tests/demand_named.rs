//! The seed's counterexamples, by name, and the rules they taught.

mod demand_support;

use std::collections::BTreeMap;

use capcat_proto::demand::storage::{self, StoredEvent};
use capcat_proto::demand::{
    CURRENT_VERSION, DemandEvent, DemandRecord, Mark, SEALED_TIMES_CAP, SkipReason, Source,
    UnknownVersion, decode, encode, fold, status,
};
use capcat_proto::{Param, Value};
use demand_support::{FakeTable, permutations, run_compaction, store, stored_events, tables};
use uuid::Uuid;

fn pending_in_every_order(events: &[DemandEvent], shard: &str) -> Vec<u64> {
    permutations(events)
        .iter()
        .map(|order| fold(order).shards[shard].pending())
        .collect()
}

fn rebuilt(events: &[DemandEvent]) -> capcat_proto::demand::Folded {
    storage::rebuild(&store(&tables(), events).read())
}

#[test]
fn marks_order_by_generation_then_epoch() {
    // A new-epoch writer continues the generation numbering, so a higher
    // generation from an older epoch is still the higher mark.
    assert!(Mark::new(60, 1) > Mark::new(40, 2));
    assert!(Mark::new(40, 2) > Mark::new(40, 1));
    assert_eq!(Mark::new(40, 2).max(Mark::new(60, 1)), Mark::new(60, 1));
}

#[test]
fn round3_old_epoch_merge_and_new_epoch_flush_give_one_answer_in_every_order() {
    // Before the fix: 20 forward, 60 reverse.
    let events = [
        DemandEvent::writer_sealed("s", 1, 40, 4_000, 1_000),
        DemandEvent::executor_merged("s", 1, 40),
        DemandEvent::writer_sealed("s", 2, 60, 2_000, 2_000),
    ];
    for pending in pending_in_every_order(&events, "s") {
        assert_eq!(pending, 20);
    }
    for order in [&events[1..], &[events[2].clone(), events[1].clone()][..]] {
        assert_eq!(fold(order).shards["s"].pending(), 20);
    }
}

#[test]
fn round3_flush_and_scan_with_older_sealed_and_newer_merged_give_one_answer() {
    // Before the fix: 20 forward, 10 reverse (the scan's lower sealed mark
    // was taken with its merged mark, or rejected with it).
    let flush = DemandEvent::writer_sealed("s", 1, 30, 3_000, 1_000);
    let scan = DemandEvent::scan("s", 1, 20, Some(10));
    for order in [[flush.clone(), scan.clone()], [scan, flush]] {
        let folded = fold(&order);
        let record = &folded.shards["s"];
        assert_eq!(record.sealed, Some(Mark::new(30, 1)));
        assert_eq!(record.merged, Some(Mark::new(10, 1)));
        assert_eq!(record.pending(), 20);
        assert_eq!(rebuilt(&order).shards["s"].pending(), 20);
    }
}

#[test]
fn round4_merged_40_then_new_epoch_writer_flushes_60_is_20_pending_in_every_order_and_after_rebuild()
 {
    // Ordering marks by epoch first made this 60 in both orders. A late
    // report under the new epoch of an older merge (30) must not win over
    // the generation-40 merge either: the generation decides, not the epoch.
    let events = [
        DemandEvent::executor_merged("s", 1, 40),
        DemandEvent::writer_sealed("s", 2, 60, 6_000, 1_000),
    ];
    for order in permutations(&events) {
        assert_eq!(fold(&order).shards["s"].pending(), 20);
        assert_eq!(rebuilt(&order).shards["s"].pending(), 20);
    }
    let with_late = [
        events[0].clone(),
        events[1].clone(),
        DemandEvent::executor_merged("s", 2, 30),
    ];
    for order in permutations(&with_late) {
        assert_eq!(fold(&order).shards["s"].pending(), 20);
        assert_eq!(rebuilt(&order).shards["s"].pending(), 20);
    }
}

#[test]
fn round4_age_clock_agrees_in_memory_and_rebuilt() {
    // Generation 41 sealed at 1000 (epoch 1), merged through 40, then a
    // new-epoch writer seals 42 at 1010. At 1020 the oldest pending pack
    // (41) has waited 20 ms; the seed's in-memory fold said 10 (reset by the
    // newer flush) while its rebuild said 20.
    let events = [
        DemandEvent::writer_sealed("s", 1, 40, 100, 900),
        DemandEvent::writer_sealed("s", 1, 41, 100, 1_000),
        DemandEvent::executor_merged("s", 1, 40),
        DemandEvent::writer_sealed("s", 2, 42, 100, 1_010),
    ];
    for order in permutations(&events) {
        let in_memory = fold(&order);
        let from_storage = rebuilt(&order);
        assert_eq!(in_memory.shards["s"].oldest_pending_ms(1_020), Some(20));
        assert_eq!(from_storage.shards["s"].oldest_pending_ms(1_020), Some(20));
        assert_eq!(status(&in_memory, 1_020), status(&from_storage, 1_020));
    }
}

#[test]
fn the_writer_never_forgets_merged() {
    // Stored sealed=10 merged=8; the writer publishes sealed=12 without a
    // merged mark. Before: merged lost, 12 pending on rebuild. Now: 4.
    let events = [
        DemandEvent::writer_sealed("s", 1, 10, 1_000, 1_000),
        DemandEvent::executor_merged("s", 1, 8),
        DemandEvent::writer_sealed("s", 1, 12, 1_000, 1_100),
    ];
    for order in permutations(&events) {
        let folded = fold(&order);
        assert_eq!(folded.shards["s"].merged, Some(Mark::new(8, 1)));
        assert_eq!(folded.shards["s"].pending(), 4);
        assert_eq!(rebuilt(&order).shards["s"].pending(), 4);
    }
}

#[test]
fn a_lower_value_from_any_source_changes_nothing() {
    let base = fold(&[
        DemandEvent::writer_sealed("s", 2, 50, 5_000, 1_000),
        DemandEvent::executor_merged("s", 2, 30),
    ]);
    let lower = [
        DemandEvent::writer_sealed("s", 2, 20, 10, 2_000),
        DemandEvent::writer_sealed("s", 3, 20, 10, 2_000),
        DemandEvent::executor_merged("s", 2, 10),
        DemandEvent::executor_merged("s", 3, 29),
        DemandEvent::scan("s", 2, 40, Some(20)),
        DemandEvent::scan("s", 1, 49, None),
    ];
    for event in &lower {
        let mut folded = base.clone();
        folded.absorb(event);
        assert_eq!(folded, base, "{:?} changed the record", event.source);
    }
}

#[test]
fn a_scan_can_only_raise_marks() {
    let mut folded = fold(&[
        DemandEvent::writer_sealed("s", 1, 10, 1_000, 1_000),
        DemandEvent::executor_merged("s", 1, 6),
    ]);
    folded.absorb(&DemandEvent::scan("s", 1, 12, None));
    let record = &folded.shards["s"];
    assert_eq!(record.sealed, Some(Mark::new(12, 1)));
    assert_eq!(
        record.merged,
        Some(Mark::new(6, 1)),
        "a scan without merged lowered it"
    );
    assert_eq!(record.pending(), 6);
}

#[test]
fn the_age_clock_is_not_reset_by_a_newer_flush_and_moves_on_merge() {
    let mut folded = fold(&[DemandEvent::writer_sealed("s", 1, 1, 10, 1_000)]);
    assert_eq!(folded.shards["s"].oldest_pending_ms(1_500), Some(500));
    folded.absorb(&DemandEvent::writer_sealed("s", 1, 2, 10, 1_400));
    assert_eq!(folded.shards["s"].oldest_pending_ms(1_500), Some(500));
    folded.absorb(&DemandEvent::executor_merged("s", 1, 1));
    assert_eq!(folded.shards["s"].oldest_pending_ms(1_500), Some(100));
    folded.absorb(&DemandEvent::executor_merged("s", 1, 2));
    assert_eq!(folded.shards["s"].oldest_pending_ms(1_500), None);
    assert_eq!(folded.shards["s"].pending_bytes(), 0);
    assert!(folded.shards["s"].sealed_times.is_empty());
}

#[test]
fn a_re_reported_seal_keeps_the_earliest_time() {
    // A writer that retries its report, or a second process re-reporting
    // the same generation later, must not make the backlog look younger.
    let first = DemandEvent::writer_sealed("s", 1, 7, 100, 1_000);
    let again = DemandEvent::writer_sealed("s", 2, 7, 100, 1_900);
    for order in [[first.clone(), again.clone()], [again, first]] {
        assert_eq!(
            fold(&order).shards["s"].oldest_pending_ms(2_000),
            Some(1_000)
        );
        assert_eq!(
            rebuilt(&order).shards["s"].oldest_pending_ms(2_000),
            Some(1_000)
        );
    }
}

#[test]
fn counts_stay_exact_beyond_the_cap() {
    let mut events: Vec<_> = (1..=200)
        .map(|g| DemandEvent::writer_sealed("s", 1, g, 100, 1_000 + g))
        .collect();
    events.push(DemandEvent::executor_merged("s", 1, 10));
    let reversed: Vec<_> = events.iter().rev().cloned().collect();
    for order in [&events, &reversed] {
        for folded in [fold(order), rebuilt(order)] {
            let record = &folded.shards["s"];
            assert_eq!(record.pending(), 190);
            assert_eq!(record.sealed, Some(Mark::new(200, 1)));
            assert!(record.sealed_times.len() <= SEALED_TIMES_CAP);
            // The lowest unmerged generation (11) keeps its seal time.
            assert_eq!(record.sealed_times.keys().next(), Some(&11));
            assert_eq!(record.oldest_pending_ms(2_000), Some(2_000 - 1_011));
        }
    }
}

#[test]
fn beyond_the_cap_only_the_age_clock_is_bounded() {
    // 100 generations sealed one by one, then merged through 70 at once:
    // the 64 kept seal times were all at or below 70, so no seal time of a
    // pending generation is known. Counts stay exact; the age is unknown
    // until the next flush, never wrong in the other direction (older).
    let mut events: Vec<_> = (1..=100)
        .map(|g| DemandEvent::writer_sealed("s", 1, g, 100, 1_000 + g))
        .collect();
    events.push(DemandEvent::executor_merged("s", 1, 70));
    let folded = fold(&events);
    let record = &folded.shards["s"];
    assert_eq!(record.pending(), 30);
    assert_eq!(record.oldest_pending_ms(2_000), None);
    let mut later = folded.clone();
    later.absorb(&DemandEvent::writer_sealed("s", 1, 101, 100, 1_500));
    assert_eq!(later.shards["s"].oldest_pending_ms(2_000), Some(500));
}

#[test]
fn the_default_record_is_version_1_and_version_0_reads_as_1() {
    assert_eq!(DemandRecord::default().v, CURRENT_VERSION);
    assert_eq!(CURRENT_VERSION, 1);
    let text = "{\"v\":0,\"sealed\":5,\"sealed_epoch\":1,\"merged\":null,\"merged_epoch\":null,\
                \"bytes\":7,\"sealed_times\":[[5,100]]}";
    let record = decode(text).expect("a v=0 record decodes");
    assert_eq!(record.v, 1);
    assert_eq!(record.pending(), 5);
    let old = DemandRecord {
        v: 0,
        ..record.clone()
    };
    assert_eq!(old.join(&DemandRecord::default()).expect("v=0 joins").v, 1);
}

#[test]
fn an_unknown_version_is_skipped_by_the_fold_with_a_typed_reason() {
    let good = DemandEvent::writer_sealed("s", 1, 5, 10, 1_000);
    let mut newer = DemandEvent::writer_sealed("s", 1, 500, 10, 1);
    newer.record.v = 999;
    let folded = fold(&[good.clone(), newer]);
    assert_eq!(folded.shards, fold(&[good]).shards);
    assert_eq!(folded.skipped.len(), 1);
    assert_eq!(
        folded.skipped[0].reason,
        SkipReason::UnknownVersion(UnknownVersion {
            found: 999,
            known: 1
        })
    );
    assert_eq!(
        DemandRecord {
            v: 2,
            ..DemandRecord::default()
        }
        .join(&DemandRecord::default()),
        Err(UnknownVersion { found: 2, known: 1 })
    );
}

#[test]
fn a_stored_v999_record_is_untouched() {
    let t = tables();
    let events = [
        DemandEvent::writer_sealed("s", 1, 5, 10, 1_000),
        DemandEvent::executor_merged("s", 1, 2),
        DemandEvent::writer_sealed("s", 1, 6, 10, 1_100),
    ];
    let mut table = store(&t, &events);
    let newer_id = Uuid::from_u128(999);
    let newer_row = vec![
        Value::Uuid(newer_id),
        Value::String("s".to_owned()),
        Value::String("writer".to_owned()),
        Value::UInt64(999),
        Value::String("{\"v\":999,\"anything\":[\"a future shape\"]}".to_owned()),
        Value::UInt64(0),
    ];
    table.push_raw(newer_row.clone());
    // The body alone is also refused by its first key.
    assert!(matches!(
        decode("{\"v\":999,\"anything\":[\"a future shape\"]}"),
        Err(capcat_proto::demand::DecodeError::UnknownVersion { found: 999, .. })
    ));

    let before = storage::rebuild(&table.read());
    assert_eq!(before.shards["s"].pending(), 4);
    assert_eq!(before.skipped.len(), 1);
    assert!(matches!(
        before.skipped[0].reason,
        SkipReason::UnknownVersion(UnknownVersion { found: 999, .. })
    ));

    // A compaction folds the readable rows and deletes only them.
    let stored: Vec<StoredEvent> = storage::decode_rows(&table.read())
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    let mut next = 1_000u128;
    let plan = storage::compaction(&t, &stored, || {
        next += 1;
        Uuid::from_u128(next)
    });
    for delete in &plan.deletes {
        let Some(Param::Uuids(ids)) = delete.params.get("event_ids") else {
            panic!("delete without ids");
        };
        assert!(
            !ids.contains(&newer_id),
            "compaction would delete a v=999 row"
        );
        assert!(delete.sql.contains("v <= {v:UInt64}"));
    }
    run_compaction(&mut table, &plan);
    assert_eq!(table.len(), 2, "one compacted row and the v=999 row");
    assert!(table.read().0.contains(&newer_row), "the v=999 row changed");
    let after = storage::rebuild(&table.read());
    assert_eq!(after.shards, before.shards);
    assert_eq!(after.skipped, before.skipped);
}

#[test]
fn compaction_preserves_the_fold_and_is_idempotent() {
    let t = tables();
    let events = demand_support::stream(77, 200, true);
    let mut table = store(&t, &events);
    let before = storage::rebuild(&table.read());
    let mut next = 10_000u128;
    let mut ids = || {
        next += 1;
        Uuid::from_u128(next)
    };
    let plan = storage::compaction(&t, &stored_events(&table), &mut ids);
    assert_eq!(plan.appends.len(), 2, "one compacted row per shard");
    run_compaction(&mut table, &plan);
    assert_eq!(table.len(), 2);
    assert_eq!(
        demand_support::observable(&storage::rebuild(&table.read())),
        demand_support::observable(&before)
    );
    // Appends that landed with their deletes lost: the join absorbs them.
    let mut half_done = store(&t, &events);
    for s in &plan.appends {
        half_done.execute(s);
    }
    assert_eq!(
        demand_support::observable(&storage::rebuild(&half_done.read())),
        demand_support::observable(&before)
    );
    // A second compaction of a compacted table has nothing to do.
    let again = storage::compaction(&t, &stored_events(&table), &mut ids);
    assert!(again.appends.is_empty() && again.deletes.is_empty());
}

#[test]
fn concurrent_appends_from_writer_and_executor_both_survive() {
    // No read-modify-write: each publisher appends its own row, in either
    // order, and the fold sees both.
    let writer = DemandEvent::writer_sealed("s", 1, 25, 2_500, 1_000);
    let executor = DemandEvent::executor_merged("s", 1, 18);
    for order in [[writer.clone(), executor.clone()], [executor, writer]] {
        let folded = rebuilt(&order);
        let record = &folded.shards["s"];
        assert_eq!(record.sealed, Some(Mark::new(25, 1)));
        assert_eq!(record.merged, Some(Mark::new(18, 1)));
        assert_eq!(record.pending(), 7);
    }
}

#[test]
fn status_sums_shards_and_takes_the_oldest_age() {
    let folded = fold(&[
        DemandEvent::writer_sealed("a", 1, 3, 300, 1_000),
        DemandEvent::writer_sealed("b", 1, 5, 500, 2_000),
        DemandEvent::executor_merged("b", 1, 1),
        DemandEvent::writer_sealed("c", 1, 2, 200, 500),
        DemandEvent::executor_merged("c", 1, 2),
    ]);
    let s = status(&folded, 3_000);
    assert_eq!(s.shards["a"].pending_packs, 3);
    assert_eq!(s.shards["b"].pending_packs, 4);
    assert_eq!(s.shards["c"].pending_packs, 0);
    assert_eq!(s.shards["c"].pending_bytes, 0);
    assert_eq!(s.shards["c"].oldest_pending_ms, None);
    // Shard b's generation 1 is merged; its oldest known pending seal is
    // generation 5's, since 2..=4 were never reported with times.
    assert_eq!(s.shards["b"].oldest_pending_ms, Some(1_000));
    assert_eq!(s.total.pending_packs, 7);
    assert_eq!(s.total.pending_bytes, 800);
    assert_eq!(s.total.oldest_pending_ms, Some(2_000));
}

#[test]
fn source_names_round_trip() {
    for source in [
        Source::Writer,
        Source::Executor,
        Source::Scan,
        Source::Compaction,
    ] {
        assert_eq!(Source::from_name(source.as_str()), Some(source));
    }
    assert_eq!(Source::from_name("planner"), None);
}

#[test]
fn a_row_of_unknown_source_or_bad_text_is_skipped_and_kept() {
    let mut table = FakeTable::default();
    let text = encode(&DemandRecord {
        sealed: Some(Mark::new(3, 1)),
        sealed_times: BTreeMap::from([(3, 10)]),
        ..DemandRecord::default()
    });
    table.push_raw(vec![
        Value::Uuid(Uuid::from_u128(1)),
        Value::String("s".to_owned()),
        Value::String("planner".to_owned()),
        Value::UInt64(1),
        Value::String(text),
        Value::UInt64(1),
    ]);
    table.push_raw(vec![
        Value::Uuid(Uuid::from_u128(2)),
        Value::String("s".to_owned()),
        Value::String("writer".to_owned()),
        Value::UInt64(1),
        Value::String("{\"v\":1,\"sealed\":".to_owned()),
        Value::UInt64(2),
    ]);
    table.push_raw(vec![Value::Null]);
    let folded = storage::rebuild(&table.read());
    assert!(folded.shards.is_empty());
    assert_eq!(folded.skipped.len(), 3);
    assert!(
        folded
            .skipped
            .iter()
            .any(|s| matches!(s.reason, SkipReason::UnknownSource { .. }))
    );
    assert!(
        folded
            .skipped
            .iter()
            .any(|s| matches!(s.reason, SkipReason::Undecodable(_)))
    );
    assert!(
        folded
            .skipped
            .iter()
            .any(|s| matches!(s.reason, SkipReason::MalformedRow { index: 0, .. }))
    );
    // Nothing readable, so a compaction has nothing to delete.
    let plan = storage::compaction(&tables(), &stored_events(&table), Uuid::nil);
    assert!(plan.deletes.is_empty());
}
