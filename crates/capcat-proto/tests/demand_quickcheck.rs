//! The join's laws and the fold's order independence, by quickcheck: a
//! second, independently written generator over the same domain.

mod demand_support;

use capcat_proto::demand::{DemandEvent, DemandRecord, Mark, fold, storage};
use demand_support::{EPOCHS, MAX_GENERATION, SHARDS, observable, shuffled, store, tables};
use quickcheck::{Arbitrary, Gen, QuickCheck};

#[derive(Clone, Debug)]
struct Record(DemandRecord);

#[derive(Clone, Debug)]
struct Event(DemandEvent);

fn small(g: &mut Gen, below: u64) -> u64 {
    u64::arbitrary(g) % below
}

fn mark(g: &mut Gen) -> Option<Mark> {
    bool::arbitrary(g).then(|| {
        Mark::new(
            small(g, MAX_GENERATION),
            *g.choose(&EPOCHS).expect("epochs"),
        )
    })
}

impl Arbitrary for Record {
    fn arbitrary(g: &mut Gen) -> Self {
        let mut sealed_times = std::collections::BTreeMap::new();
        for _ in 0..small(g, 6) {
            sealed_times.insert(small(g, MAX_GENERATION), 1_000 + small(g, 5_000));
        }
        Self(
            DemandRecord {
                v: u32::from(bool::arbitrary(g)),
                sealed: mark(g),
                merged: mark(g),
                bytes: small(g, 10_000),
                sealed_times,
            }
            .normalized(),
        )
    }
}

impl Arbitrary for Event {
    fn arbitrary(g: &mut Gen) -> Self {
        let shard = *g.choose(&SHARDS).expect("shards");
        let epoch = *g.choose(&EPOCHS).expect("epochs");
        let value = small(g, MAX_GENERATION);
        Self(match small(g, 3) {
            0 => DemandEvent::writer_sealed(
                shard,
                epoch,
                value,
                small(g, 10_000),
                1_000 + small(g, 5_000),
            ),
            1 => DemandEvent::executor_merged(shard, epoch, value),
            _ => {
                let merged = bool::arbitrary(g).then(|| small(g, MAX_GENERATION));
                DemandEvent::scan(shard, epoch, value, merged)
            }
        })
    }
}

fn join(a: &DemandRecord, b: &DemandRecord) -> DemandRecord {
    a.join(b).expect("generated records have known versions")
}

fn check<A: quickcheck::Testable>(property: A) {
    QuickCheck::new()
        .tests(1_000)
        .rng(Gen::new(40))
        .quickcheck(property);
}

#[test]
fn join_is_commutative() {
    fn property(a: Record, b: Record) -> bool {
        join(&a.0, &b.0) == join(&b.0, &a.0)
    }
    check(property as fn(Record, Record) -> bool);
}

#[test]
fn join_is_associative() {
    fn property(a: Record, b: Record, c: Record) -> bool {
        join(&join(&a.0, &b.0), &c.0) == join(&a.0, &join(&b.0, &c.0))
    }
    check(property as fn(Record, Record, Record) -> bool);
}

#[test]
fn join_is_idempotent() {
    fn property(a: Record) -> bool {
        join(&a.0, &a.0) == a.0 && join(&DemandRecord::default(), &a.0) == a.0
    }
    check(property as fn(Record) -> bool);
}

#[test]
fn fold_ignores_order_and_duplication() {
    fn property(events: Vec<Event>, seed: u64) -> bool {
        let events: Vec<DemandEvent> = events.into_iter().map(|e| e.0).collect();
        let expected = observable(&fold(&events));
        let reversed: Vec<_> = events.iter().rev().cloned().collect();
        let order = shuffled(&events, seed);
        let doubled: Vec<_> = events.iter().flat_map(|e| [e.clone(), e.clone()]).collect();
        observable(&fold(&reversed)) == expected
            && observable(&fold(&order)) == expected
            && observable(&fold(&doubled)) == expected
    }
    check(property as fn(Vec<Event>, u64) -> bool);
}

#[test]
fn fold_equals_rebuild_including_the_age_clock() {
    fn property(events: Vec<Event>) -> bool {
        let events: Vec<DemandEvent> = events.into_iter().map(|e| e.0).collect();
        let rebuilt = storage::rebuild(&store(&tables(), &events).read());
        rebuilt.skipped.is_empty() && observable(&rebuilt) == observable(&fold(&events))
    }
    check(property as fn(Vec<Event>) -> bool);
}
