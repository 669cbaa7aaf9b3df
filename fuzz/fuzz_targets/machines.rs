//! Feeds arbitrary answers to every capcat-proto machine: the rows (or the
//! failure, or the draw) each statement gets back are chosen by the input,
//! typed after the statement's `Expect` columns most of the time and
//! ill-typed, too wide, too narrow, too many or empty the rest, with ids
//! from a pool that holds the machine's own and strangers'. This is where
//! each machine's row decoding of its results runs (`decode_records`, the
//! pinned-version and lease readers, the demand fold of `storage::rebuild`,
//! the schema probe).
//!
//! Properties: no machine panics whatever it is handed; every machine
//! reaches `Step::Done` within `MAX_STEPS` (its attempt bounds hold, no
//! loop on bad input); once done it keeps returning the same outcome and
//! ignores what it is handed; a `Step::Draw` always asks for a bound of at
//! least 1.

#![no_main]

use std::collections::BTreeSet;
use std::fmt::Debug;

use arbitrary::{Arbitrary, Unstructured};
use capcat_proto::demand::ReadDemand;
use capcat_proto::descriptor::CaptureDescriptor;
use capcat_proto::index::{ReadCommitted, attempt_ids};
use capcat_proto::reader::{
    Cursor, GetByIds, PageSize, PinSnapshot, SearchFilter, SearchPage, SearchQuery,
};
use capcat_proto::schema::EnsureSchema;
use capcat_proto::{
    Allocate, ColumnType, Config, Expect, Failure, IndexPass, Input, Lease, LeaseClaim, Machine,
    PackRef, Publish, Release, Rows, Statement, Step, Tables, Value,
};
use libfuzzer_sys::fuzz_target;
use uuid::Uuid;

/// More steps than any machine's attempt bounds allow (the index pass, the
/// longest, runs well under a thousand with the bounds below).
const MAX_STEPS: usize = 20_000;

const SEED: Uuid = Uuid::from_u128(0xabcd_0000_0000_0000_0000_0000_0000_0000);
const LEASE_ID: Uuid = Uuid::from_u128(1);
const PUBLISH_ID: Uuid = Uuid::from_u128(50);

fn tables() -> Tables {
    Tables::new("p").expect("a valid prefix")
}

fn cfg() -> Config {
    Config::default()
        .with_attempts(3, 3, 3)
        .expect("valid bounds")
        .with_chunk(2)
        .expect("valid chunk")
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

fn packs() -> Vec<PackRef> {
    (0..3)
        .map(|i| ("s3".to_owned(), Uuid::from_u128(1_000 + i)))
        .collect()
}

/// Ids an answer may carry: the machines' own and strangers'.
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
    ids.extend(packs().into_iter().map(|(_, id)| id));
    ids
}

#[derive(Arbitrary, Debug)]
enum AnyString {
    Pool(u8),
    Any(String),
}

const STRINGS: [&str; 8] = ["a", "s3", "", "1,2,3", "F32", "t", "{\"v\":1}", "x,y"];

fn value(u: &mut Unstructured<'_>, ty: ColumnType, ids: &[Uuid]) -> Value {
    let wrong = u.ratio(1, 12).unwrap_or(false);
    let ty = if wrong {
        [
            ColumnType::UInt64,
            ColumnType::Int64,
            ColumnType::String,
            ColumnType::Uuid,
        ][usize::from(u.arbitrary::<u8>().unwrap_or(0) % 4)]
    } else {
        ty
    };
    match ty {
        ColumnType::Uuid => Value::Uuid(ids[u.choose_index(ids.len()).unwrap_or(0)]),
        ColumnType::String => match AnyString::arbitrary(u) {
            Ok(AnyString::Any(s)) => Value::String(s),
            Ok(AnyString::Pool(i)) => Value::String(STRINGS[usize::from(i) % STRINGS.len()].into()),
            Err(_) => Value::String(String::new()),
        },
        ColumnType::Int64 => Value::Int64(u.arbitrary::<i64>().unwrap_or(0) % 5),
        ColumnType::NullableUInt64 if u.ratio(1, 3).unwrap_or(false) => Value::Null,
        _ => Value::UInt64(match u.arbitrary::<u8>().unwrap_or(0) {
            255 => u64::MAX,
            254 => u.arbitrary().unwrap_or(0),
            b => u64::from(b % 5),
        }),
    }
}

/// The answer to `stmt`, chosen by the input.
fn answer(u: &mut Unstructured<'_>, stmt: &Statement, ids: &[Uuid]) -> Input {
    if u.is_empty() {
        // Out of input: an empty answer, which must also end the machine.
        return Input::Rows(Rows::empty());
    }
    match u.arbitrary::<u8>().unwrap_or(0) % 16 {
        0 => Input::Failed(Failure::Timeout),
        1 => Input::Failed(Failure::Server {
            code: u.arbitrary().unwrap_or(0),
            message: String::new(),
        }),
        2 => Input::Failed(Failure::Transport {
            message: "reset".into(),
        }),
        3 => Input::Failed(Failure::Malformed {
            message: "garbled".into(),
        }),
        4 => Input::Drawn(u.arbitrary().unwrap_or(0)),
        _ => {
            let columns: Vec<ColumnType> = match &stmt.expect {
                Expect::Nothing => Vec::new(),
                Expect::Rows(cols) => cols.iter().map(|c| c.ty).collect(),
            };
            let count = match u.arbitrary::<u8>().unwrap_or(0) {
                250..=255 => usize::from(u.arbitrary::<u8>().unwrap_or(0)),
                b => usize::from(b % 4),
            };
            let mut rows = Vec::with_capacity(count);
            for _ in 0..count {
                let mut row: Vec<Value> = columns.iter().map(|&ty| value(u, ty, ids)).collect();
                match u.arbitrary::<u8>().unwrap_or(0) {
                    0 => {
                        row.pop();
                    }
                    1 => row.push(Value::UInt64(0)),
                    _ => {}
                }
                rows.push(row);
            }
            Input::Rows(Rows(rows))
        }
    }
}

/// Drives `m` on the input's answers and checks the machine contract.
fn drive<M>(mut m: M, u: &mut Unstructured<'_>)
where
    M: Machine + Debug,
    M::Outcome: PartialEq + Debug,
{
    let ids = id_pool();
    for _ in 0..MAX_STEPS {
        match m.poll() {
            Step::Execute(stmt) => {
                let input = answer(u, &stmt, &ids);
                m.handle(input);
            }
            Step::Draw { below } => {
                assert!(below >= 1, "a draw below 0");
                let d = u.arbitrary::<u64>().unwrap_or(0);
                let d = if u.ratio(1, 10).unwrap_or(false) {
                    d
                } else {
                    d % below
                };
                m.handle(Input::Drawn(d));
            }
            Step::Done(outcome) => {
                // Done is final: the same outcome, whatever it is handed.
                let Step::Done(again) = m.poll() else {
                    panic!("a done machine asked for more");
                };
                assert_eq!(again, outcome);
                m.handle(Input::Rows(Rows::empty()));
                m.handle(Input::Drawn(0));
                let Step::Done(last) = m.poll() else {
                    panic!("a done machine woke up");
                };
                assert_eq!(last, outcome);
                return;
            }
        }
    }
    panic!("no outcome within {MAX_STEPS} steps: {m:?}");
}

fn descriptors() -> Vec<CaptureDescriptor> {
    packs()
        .into_iter()
        .enumerate()
        .map(|(i, (store_id, pack_id))| {
            let mut d = CaptureDescriptor {
                capture_id: Uuid::from_u128(i as u128),
                tenant_id: "t".into(),
                ..CaptureDescriptor::default()
            };
            d.locator.store_id = store_id;
            d.locator.pack_id = pack_id;
            d
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(which) = u.arbitrary::<u8>() else {
        return;
    };
    match which % 12 {
        0 => drive(
            LeaseClaim::acquire(
                tables(),
                cfg(),
                "a".into(),
                Some(lease()),
                Uuid::from_u128(2),
            ),
            &mut u,
        ),
        1 => drive(LeaseClaim::renew(tables(), cfg(), lease()), &mut u),
        2 => drive(Release::new(tables(), cfg(), lease()), &mut u),
        3 => drive(
            Allocate::new(tables(), cfg(), attempt_ids(SEED, 0).0),
            &mut u,
        ),
        4 => drive(
            Publish::new(
                tables(),
                cfg(),
                lease(),
                3,
                packs().into_iter().collect(),
                PUBLISH_ID,
            ),
            &mut u,
        ),
        5 => drive(
            IndexPass::new(tables(), cfg(), lease(), descriptors(), SEED),
            &mut u,
        ),
        6 => drive(ReadCommitted::new(tables(), packs(), 2), &mut u),
        7 => drive(EnsureSchema::new(tables()), &mut u),
        8 => drive(PinSnapshot::new(tables()), &mut u),
        9 => {
            let cursor = u.arbitrary::<bool>().unwrap_or(false).then(|| Cursor {
                pinned: 3,
                tenant_id: "t".into(),
                experiment_id: "e".into(),
                run_id: "r".into(),
                captured_at_ns: 5,
                capture_id: Uuid::from_u128(1),
            });
            let query = SearchQuery {
                filter: SearchFilter {
                    tenant_id: "t".into(),
                    ..SearchFilter::default()
                },
                cursor,
                page_size: PageSize::new(2).expect("a valid page size"),
            };
            drive(
                SearchPage::new(tables(), query).expect("a valid query"),
                &mut u,
            );
        }
        10 => {
            let ids: BTreeSet<Uuid> = (0..3).map(Uuid::from_u128).collect();
            drive(
                GetByIds::new(tables(), "t", ids, 0).expect("a valid lookup"),
                &mut u,
            );
        }
        _ => drive(ReadDemand::new(tables(), None, 4), &mut u),
    }
});
