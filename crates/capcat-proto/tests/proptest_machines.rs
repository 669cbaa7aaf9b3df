//! Property tests: every machine against arbitrary server responses.
//!
//! Whatever the server answers (well-typed rows, ill-typed rows, failures,
//! out-of-range draws), every machine ends in a typed outcome without
//! panicking, within its attempt bound, and never reports success unless its
//! read-back held exactly its own identity.

use std::collections::BTreeSet;

use capcat_proto::config::Config;
use capcat_proto::descriptor::CaptureDescriptor;
use capcat_proto::index::attempt_ids;
use capcat_proto::{
    Allocate, ColumnType, Expect, Failure, IndexPass, IndexReport, Input, Lease, LeaseClaim,
    Machine, PackRef, Publish, PublishOutcome, Release, Rows, Statement, Step, Tables, Value,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use uuid::Uuid;

const SEED: Uuid = Uuid::from_u128(0xabcd_0000_0000_0000_0000_0000_0000_0000);
const PUBLISH_ID: Uuid = Uuid::from_u128(50);
const LEASE_ID: Uuid = Uuid::from_u128(1);

fn tables() -> Tables {
    Tables::new("p").expect("valid prefix")
}

fn cfg() -> Config {
    Config::default()
        .with_attempts(3, 3, 3)
        .expect("valid bounds")
        .with_chunk(2)
        .expect("valid chunk")
}

/// The ids a response may mention: the machines' own and some strangers.
fn id_pool() -> Vec<Uuid> {
    let mut ids = vec![
        LEASE_ID,
        Uuid::from_u128(2),
        PUBLISH_ID,
        Uuid::from_u128(77),
    ];
    for attempt in 0..3 {
        let (c, p) = attempt_ids(SEED, attempt);
        ids.push(c);
        ids.push(p);
    }
    ids
}

/// One scripted server answer, interpreted against the statement asked.
#[derive(Clone, Debug)]
struct Answer {
    kind: u8,
    rows: Vec<Vec<u8>>,
    draw: u64,
}

fn answer() -> impl Strategy<Value = Answer> {
    (
        0u8..32,
        prop::collection::vec(prop::collection::vec(any::<u8>(), 6), 0..4),
        0u64..40,
    )
        .prop_map(|(kind, rows, draw)| Answer { kind, rows, draw })
}

fn value_for(ty: ColumnType, byte: u8) -> Value {
    let pool = id_pool();
    // One time in sixteen, a value of the wrong type.
    if byte % 16 == 15 {
        return Value::String("garbage".into());
    }
    match ty {
        ColumnType::Uuid => Value::Uuid(pool[usize::from(byte) % pool.len()]),
        ColumnType::String => Value::String(["a", "b", "s3"][usize::from(byte) % 3].into()),
        ColumnType::Int64 => Value::Int64(i64::from(byte % 8) - 2),
        _ => Value::UInt64(match byte % 8 {
            7 => u64::MAX,
            v => u64::from(v % 3),
        }),
    }
}

fn respond(stmt: &Statement, a: &Answer, ctx: &Ctx) -> Input {
    match a.kind {
        0 => Input::Failed(Failure::Timeout),
        1 => Input::Failed(Failure::Server {
            code: 125,
            message: "Scalar subquery returned empty result".into(),
        }),
        2 => Input::Drawn(a.draw),
        3..=24 => honest(stmt, ctx),
        25..=28 => plausible(stmt, a, ctx),
        _ => match &stmt.expect {
            Expect::Nothing => Input::Rows(Rows::empty()),
            Expect::Rows(cols) => Input::Rows(Rows(
                a.rows
                    .iter()
                    .map(|bytes| {
                        cols.iter()
                            .zip(bytes)
                            .map(|(c, b)| value_for(c.ty, *b))
                            .collect()
                    })
                    .collect(),
            )),
        },
    }
}

/// The ids the machine last wrote, by parameter name: a read-back names only
/// a version or a term, so an honest server answers with what was written.
type Ctx = std::collections::BTreeMap<String, Uuid>;

fn remember(ctx: &mut Ctx, stmt: &Statement) {
    for (name, param) in &stmt.params {
        if let capcat_proto::Param::Uuid(u) = param {
            ctx.insert(name.clone(), *u);
        }
    }
}

/// The answer of a server on which nothing else is happening: the
/// statement's own ids alone, the caller's lease live at the head. Runs made
/// mostly of these reach the machines' success paths, where the interesting
/// properties live.
fn honest(stmt: &Statement, ctx: &Ctx) -> Input {
    let own = |name: &str| ctx.get(name).map(|u| vec![Value::Uuid(*u)]);
    let rows = match stmt.name {
        "lease.read_head" => vec![vec![
            Value::UInt64(1),
            Value::Uuid(LEASE_ID),
            Value::String("a".into()),
            Value::UInt64(99),
            Value::UInt64(1),
        ]],
        // The read-back names only the term; the claimant is the lease's.
        "lease.read_claims" => vec![vec![Value::Uuid(LEASE_ID), Value::UInt64(99)]],
        "allocate.read_head" => vec![vec![Value::UInt64(2)]],
        "allocate.read_claims" => own("claim_id").into_iter().collect(),
        "publish.read_publish_ids" => own("publish_id").into_iter().collect(),
        _ => Vec::new(),
    };
    Input::Rows(Rows(rows))
}

/// An answer a real server could give: the statement's own ids, a
/// stranger's, or both, so the interesting outcomes are reached often.
fn plausible(stmt: &Statement, a: &Answer, ctx: &Ctx) -> Input {
    let bits = a.rows.first().map_or(0, |r| r[0]);
    let stranger = Uuid::from_u128(77);
    let pick = |own: Option<Uuid>| -> Vec<Vec<Value>> {
        let mut ids = Vec::new();
        if bits & 1 == 1 || bits & 2 == 0 {
            ids.extend(own);
        }
        if bits & 2 == 2 {
            ids.push(stranger);
        }
        ids.into_iter()
            .map(|u| vec![Value::Uuid(u), Value::UInt64(u64::from(bits))])
            .collect()
    };
    let rows = match stmt.name {
        "lease.read_head" => {
            let lease_id = if bits & 4 == 0 { LEASE_ID } else { stranger };
            let mut rows = vec![vec![
                Value::UInt64(u64::from(bits % 5)),
                Value::Uuid(lease_id),
                Value::String("a".into()),
                Value::UInt64(99),
                Value::UInt64(u64::from(bits & 8 == 0)),
            ]];
            if bits & 48 == 48 {
                rows.clear();
            }
            rows
        }
        "lease.read_claims" => pick(Some(LEASE_ID)),
        "allocate.read_head" => vec![vec![Value::UInt64(u64::from(bits % 4))]],
        "allocate.read_claims" => pick(ctx.get("claim_id").copied())
            .into_iter()
            .map(|r| r[..1].to_vec())
            .collect(),
        "publish.read_publish_ids" => pick(ctx.get("publish_id").copied())
            .into_iter()
            .map(|r| r[..1].to_vec())
            .collect(),
        "index.read_committed" => match stmt.params.get("packs") {
            Some(capcat_proto::Param::StorePacks(p)) => p
                .iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << (i % 8)) != 0 && bits & 32 == 32)
                .map(|(_, (s, u))| vec![Value::String(s.clone()), Value::Uuid(*u)])
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    Input::Rows(Rows(rows))
}

/// Drives a machine through the scripted answers (cycling), recording the
/// answer given to each statement name last.
fn run<M: Machine>(m: &mut M, answers: &[Answer]) -> (M::Outcome, Vec<(&'static str, Input)>) {
    let mut log = Vec::new();
    let mut ctx = Ctx::new();
    for step in 0..10_000 {
        let a = &answers[step % answers.len()];
        match m.poll() {
            Step::Execute(stmt) => {
                remember(&mut ctx, &stmt);
                let input = respond(&stmt, a, &ctx);
                log.push((stmt.name, input.clone()));
                m.handle(input);
            }
            Step::Draw { below } => {
                assert!(below >= 1);
                // Mostly in range; sometimes not, which must be refused.
                let d = if a.kind == 31 {
                    a.draw + below
                } else {
                    a.draw % below
                };
                m.handle(Input::Drawn(d));
            }
            Step::Done(outcome) => return (outcome, log),
        }
    }
    panic!("no outcome within 10000 steps");
}

fn ids_in(input: &Input) -> Option<BTreeSet<Uuid>> {
    match input {
        Input::Rows(rows) => rows
            .0
            .iter()
            .map(|r| match r.first() {
                Some(Value::Uuid(u)) => Some(*u),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

fn last(log: &[(&'static str, Input)], name: &str) -> Option<Input> {
    log.iter()
        .rev()
        .find(|(n, _)| *n == name)
        .map(|(_, i)| i.clone())
}

fn count(log: &[(&'static str, Input)], name: &str) -> usize {
    log.iter().filter(|(n, _)| *n == name).count()
}

fn lease() -> Lease {
    Lease {
        lease_id: LEASE_ID,
        holder: "a".into(),
        term: 1,
        expires_at_ns: 10,
        unsettled_until_ns: 0,
    }
}

fn packs() -> BTreeSet<PackRef> {
    (0..3)
        .map(|i| ("s3".to_owned(), Uuid::from_u128(1_000 + i)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2048,
        // Relative to the crate directory, where cargo runs tests; committed.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/proptest_machines.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn lease_claims_end_typed_and_win_only_alone(answers in prop::collection::vec(answer(), 1..40), renew: bool) {
        let mut m = if renew {
            LeaseClaim::renew(tables(), cfg(), lease())
        } else {
            LeaseClaim::acquire(tables(), cfg(), "a".into(), Some(lease()), Uuid::from_u128(2))
        };
        let (outcome, log) = run(&mut m, &answers);
        prop_assert!(count(&log, "lease.insert_claim") <= 3);
        if let Ok(won) = outcome {
            let back = last(&log, "lease.read_claims").and_then(|i| ids_in(&i));
            prop_assert_eq!(back, Some(BTreeSet::from([won.lease_id])));
            if renew {
                prop_assert_eq!(won.lease_id, LEASE_ID);
            }
        }
    }

    #[test]
    fn allocations_end_typed_and_own_their_version_alone(answers in prop::collection::vec(answer(), 1..40)) {
        let claim = attempt_ids(SEED, 0).0;
        let mut m = Allocate::new(tables(), cfg(), claim);
        let (outcome, log) = run(&mut m, &answers);
        prop_assert!(count(&log, "allocate.insert_claim") <= 3);
        if outcome.is_ok() {
            let back = last(&log, "allocate.read_claims").and_then(|i| ids_in(&i));
            prop_assert_eq!(back, Some(BTreeSet::from([claim])));
        }
    }

    #[test]
    fn publishes_never_win_without_their_own_id_alone(answers in prop::collection::vec(answer(), 1..40)) {
        let mut m = Publish::new(tables(), cfg(), lease(), 3, packs(), PUBLISH_ID);
        let (outcome, log) = run(&mut m, &answers);
        prop_assert!(count(&log, "publish.insert_commit_row") <= 1);
        let back = last(&log, "publish.read_publish_ids").and_then(|i| ids_in(&i));
        match outcome {
            Ok(PublishOutcome::Won { publish_id, version }) => {
                prop_assert_eq!((publish_id, version), (PUBLISH_ID, 3));
                prop_assert_eq!(back, Some(BTreeSet::from([PUBLISH_ID])));
                // Every manifest chunk was acknowledged before the commit row.
                prop_assert_eq!(count(&log, "publish.insert_manifest"), 2);
            }
            Ok(PublishOutcome::Conflict { foreign, .. }) => {
                let back = back.unwrap_or_default();
                prop_assert!(back.contains(&PUBLISH_ID) && back.contains(&foreign) && foreign != PUBLISH_ID);
            }
            Ok(PublishOutcome::LostRace(race)) => {
                prop_assert!(!race.found.contains(&PUBLISH_ID));
            }
            Err(capcat_proto::PublishError::Unsettled { .. }) => {
                prop_assert!(false, "a lease with nothing abandoned is never put off");
            }
            Err(capcat_proto::PublishError::Statement { statement, ref failure, .. })
                if statement.starts_with("publish.insert_") =>
            {
                // A guarded INSERT whose effect is unknown leaves the lease
                // unsettled until the expiry of the row it named; one the
                // server finished with does not.
                prop_assert_eq!(m.lease().unsettled(), failure.leaves_statement_running());
                if failure.leaves_statement_running() {
                    prop_assert_eq!(m.lease().unsettled_until_ns, m.lease().expires_at_ns);
                }
            }
            Err(_) => {}
        }
    }

    #[test]
    fn index_passes_end_typed_within_their_bounds(answers in prop::collection::vec(answer(), 1..60)) {
        let descriptors: Vec<CaptureDescriptor> = packs()
            .into_iter()
            .enumerate()
            .map(|(i, (store_id, pack_id))| {
                let mut d = CaptureDescriptor { capture_id: Uuid::from_u128(i as u128), ..CaptureDescriptor::default() };
                d.locator.store_id = store_id;
                d.locator.pack_id = pack_id;
                d
            })
            .collect();
        let mut m = IndexPass::new(tables(), cfg(), lease(), descriptors, SEED);
        let (outcome, log) = run(&mut m, &answers);
        prop_assert!(count(&log, "publish.read_publish_ids") <= 3);
        prop_assert!(count(&log, "allocate.insert_claim") <= 9);
        if let Ok(IndexReport::Indexed { publish_id, attempts, .. }) = outcome {
            prop_assert!((1..=3).contains(&attempts));
            prop_assert_eq!(publish_id, attempt_ids(SEED, attempts - 1).1);
            let back = last(&log, "publish.read_publish_ids").and_then(|i| ids_in(&i));
            prop_assert_eq!(back, Some(BTreeSet::from([publish_id])));
            // The inventory comes only after that read-back.
            let read = log.iter().rposition(|(n, _)| *n == "publish.read_publish_ids");
            let first_inventory = log.iter().position(|(n, _)| *n == "index.insert_inventory");
            prop_assert!(first_inventory > read);
        }
    }

    #[test]
    fn releases_end_typed(answers in prop::collection::vec(answer(), 1..4)) {
        let mut m = Release::new(tables(), cfg(), lease());
        let (_, log) = run(&mut m, &answers);
        prop_assert_eq!(log.len(), 1);
    }
}
