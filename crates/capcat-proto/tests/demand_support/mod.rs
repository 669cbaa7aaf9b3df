//! Shared helpers of the demand tests: the stream domain (2 shards,
//! 3 epochs, 3 sources), a seeded permutation, and an in-memory table that
//! "executes" the append and delete statements by their parameters.

// Each test binary uses a subset of these helpers.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use capcat_proto::demand::storage::{self, Compaction, StoredEvent};
use capcat_proto::demand::{DemandEvent, DemandRecord, Folded, Mark, status};
use capcat_proto::{Param, Rows, Statement, Tables, Value};
use uuid::Uuid;

/// The shards of the stream domain.
pub const SHARDS: [&str; 2] = ["shard-a", "shard-b"];
/// The epochs of the stream domain.
pub const EPOCHS: [u64; 3] = [1, 2, 3];
/// Generations stay below this, so fewer than `SEALED_TIMES_CAP` distinct
/// generations exist per shard and the age clock is exact.
pub const MAX_GENERATION: u64 = 48;
/// The clock every status is read at.
pub const NOW_MS: u64 = 1_000_000;

/// SplitMix64: a deterministic generator for the seeded streams.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A deterministic Fisher–Yates shuffle driven by `seed`.
pub fn shuffled<T: Clone>(items: &[T], seed: u64) -> Vec<T> {
    let mut out = items.to_vec();
    let mut rng = SplitMix(seed);
    for i in (1..out.len()).rev() {
        let j = usize::try_from(rng.below(i as u64 + 1)).expect("index fits in usize");
        out.swap(i, j);
    }
    out
}

/// One event of the stream domain, from the writer, executor or scan.
pub fn event_from(choice: [u64; 6], with_merged: bool) -> DemandEvent {
    let [shard, epoch, source, value, other, time] = choice;
    let shard = SHARDS[usize::try_from(shard % 2).expect("small")];
    let epoch = EPOCHS[usize::try_from(epoch % 3).expect("small")];
    let value = value % MAX_GENERATION;
    let source = if with_merged { source % 3 } else { 0 };
    match source {
        0 => DemandEvent::writer_sealed(shard, epoch, value, other % 10_000, 1_000 + time % 5_000),
        1 => DemandEvent::executor_merged(shard, epoch, value),
        _ => {
            let merged = other % MAX_GENERATION;
            DemandEvent::scan(
                shard,
                epoch,
                value,
                merged.is_multiple_of(2).then_some(merged),
            )
        }
    }
}

/// A seeded stream of `len` events of the domain.
pub fn stream(seed: u64, len: usize, with_merged: bool) -> Vec<DemandEvent> {
    let mut rng = SplitMix(seed);
    (0..len)
        .map(|_| {
            let choice = [
                rng.next_u64(),
                rng.next_u64(),
                rng.next_u64(),
                rng.next_u64(),
                rng.next_u64(),
                rng.next_u64(),
            ];
            event_from(choice, with_merged)
        })
        .collect()
}

/// Every permutation of `items` (Heap's algorithm; `items` is small).
pub fn permutations<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
    fn heap<T: Clone>(k: usize, items: &mut Vec<T>, out: &mut Vec<Vec<T>>) {
        if k <= 1 {
            out.push(items.clone());
            return;
        }
        for i in 0..k - 1 {
            heap(k - 1, items, out);
            if k.is_multiple_of(2) {
                items.swap(i, k - 1);
            } else {
                items.swap(0, k - 1);
            }
        }
        heap(k - 1, items, out);
    }
    let mut items = items.to_vec();
    let mut out = Vec::new();
    let k = items.len();
    heap(k, &mut items, &mut out);
    out
}

/// What must agree between two folds: the records, every derived figure
/// and the age clock.
pub fn observable(folded: &Folded) -> (BTreeMap<String, DemandRecord>, status::DemandStatus) {
    (folded.shards.clone(), status(folded, NOW_MS))
}

/// A record with arbitrary dimensions in the domain, normalized.
pub fn record_from(seed: u64) -> DemandRecord {
    let mut rng = SplitMix(seed);
    let mark = |rng: &mut SplitMix| {
        (rng.below(4) != 0).then(|| Mark::new(rng.below(MAX_GENERATION), 1 + rng.below(3)))
    };
    let sealed = mark(&mut rng);
    let merged = mark(&mut rng);
    let mut sealed_times = BTreeMap::new();
    for _ in 0..rng.below(6) {
        sealed_times.insert(rng.below(MAX_GENERATION), 1_000 + rng.below(5_000));
    }
    DemandRecord {
        v: u32::try_from(rng.below(2)).expect("small"),
        sealed,
        merged,
        bytes: rng.below(10_000),
        sealed_times,
    }
    .normalized()
}

/// An in-memory `{p}_demand_events`: runs the demand append and delete
/// statements by their parameters, stamps rows with a counter as the
/// server clock, and answers reads with the rows the read statement
/// describes.
#[derive(Debug, Default)]
pub struct FakeTable {
    rows: Vec<Vec<Value>>,
    clock_ns: u64,
}

impl FakeTable {
    pub fn execute(&mut self, statement: &Statement) {
        match statement.name {
            "demand.append" => {
                self.clock_ns += 1;
                let p = &statement.params;
                let (
                    Some(Param::Uuid(id)),
                    Some(Param::String(shard)),
                    Some(Param::String(source)),
                    Some(Param::UInt64(v)),
                    Some(Param::String(record)),
                ) = (
                    p.get("event_id"),
                    p.get("shard_id"),
                    p.get("source"),
                    p.get("v"),
                    p.get("record"),
                )
                else {
                    panic!("append statement without its parameters: {statement:?}");
                };
                self.rows.push(vec![
                    Value::Uuid(*id),
                    Value::String(shard.clone()),
                    Value::String(source.clone()),
                    Value::UInt64(*v),
                    Value::String(record.clone()),
                    Value::UInt64(self.clock_ns),
                ]);
            }
            "demand.compaction_delete" => {
                let Some(Param::Uuids(ids)) = statement.params.get("event_ids") else {
                    panic!("delete without ids: {statement:?}");
                };
                let Some(Param::UInt64(max_v)) = statement.params.get("v") else {
                    panic!("delete without its version bound: {statement:?}");
                };
                self.rows.retain(|row| {
                    let (Value::Uuid(id), Value::UInt64(v)) = (&row[0], &row[3]) else {
                        panic!("row shape");
                    };
                    !(ids.contains(id) && v <= max_v)
                });
            }
            other => panic!("the fake table does not run {other}"),
        }
    }

    /// Appends a raw row, e.g. a record of a newer schema.
    pub fn push_raw(&mut self, row: Vec<Value>) {
        self.clock_ns += 1;
        self.rows.push(row);
    }

    /// The rows, newest first, as `read_events` orders them.
    pub fn read(&self) -> Rows {
        let mut rows = self.rows.clone();
        rows.reverse();
        Rows(rows)
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }
}

/// Appends every event through the real append statement.
pub fn store(tables: &Tables, events: &[DemandEvent]) -> FakeTable {
    let mut table = FakeTable::default();
    for (i, event) in events.iter().enumerate() {
        let id = Uuid::from_u128(i as u128 + 1);
        table.execute(&storage::append(tables, event, id));
    }
    table
}

/// Runs a compaction plan: appends, then deletes.
pub fn run_compaction(table: &mut FakeTable, plan: &Compaction) {
    for s in &plan.appends {
        table.execute(s);
    }
    for s in &plan.deletes {
        table.execute(s);
    }
}

/// The readable stored events of a table.
pub fn stored_events(table: &FakeTable) -> Vec<StoredEvent> {
    storage::decode_rows(&table.read())
        .into_iter()
        .filter_map(Result::ok)
        .collect()
}

pub fn tables() -> Tables {
    Tables::new("cc").expect("valid prefix")
}
