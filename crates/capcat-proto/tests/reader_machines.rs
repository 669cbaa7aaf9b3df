//! The reader's machines over canned server answers, and row decoding.

use std::collections::BTreeSet;

use capcat_proto::descriptor::{CaptureDescriptor, F64Bits, Locator, SummaryColumns};
use capcat_proto::reader::{
    Cursor, GetByIds, Lookup, Page, PageSize, ReaderError, SearchFilter, SearchPage, SearchQuery,
    decode_records, encode_record, result_columns,
};
use capcat_proto::{Failure, Input, Machine, Param, Rows, Step, Tables, Value};
use uuid::Uuid;

fn tables() -> Tables {
    Tables::new("cc").expect("valid prefix")
}

fn descriptor(id: u128) -> CaptureDescriptor {
    CaptureDescriptor {
        tenant_id: "acme".to_owned(),
        experiment_id: "exp".to_owned(),
        run_id: "run".to_owned(),
        captured_at_ns: 1_000 + u64::try_from(id).expect("small"),
        capture_id: Uuid::from_u128(id),
        locator: Locator {
            store_id: "s3-a".to_owned(),
            pack_id: Uuid::from_u128(900),
            payload_offset: 64,
            payload_length: 128,
            payload_sha256: "ab".repeat(32),
        },
        index_version: 3,
        step: 12,
        tensor_name: "encoder.w".to_owned(),
        dtype: "i64".to_owned(),
        shape: vec![2, 3],
        summary: SummaryColumns {
            summary_version: 2,
            element_count: 6,
            minimum: F64Bits::new(-0.0),
            maximum: F64Bits::new(f64::NAN),
            mean: F64Bits::new(1.5),
            l2_norm: F64Bits::new(f64::INFINITY),
            abs_max: F64Bits::new(9.223_372_036_854_776e18),
            zero_fraction: F64Bits::new(0.25),
        },
    }
}

fn rows(ids: &[u128]) -> Input {
    Input::Rows(Rows(
        ids.iter()
            .map(|id| encode_record(&descriptor(*id)))
            .collect(),
    ))
}

fn head(w: u64) -> Input {
    Input::Rows(Rows(vec![vec![Value::UInt64(w)]]))
}

/// Runs a machine, answering each statement in turn; returns the issued
/// statements and the outcome.
fn drive<M: Machine>(
    machine: &mut M,
    answers: Vec<Input>,
) -> (Vec<capcat_proto::Statement>, M::Outcome) {
    let mut answers = answers.into_iter();
    let mut issued = Vec::new();
    for _ in 0..32 {
        match machine.poll() {
            Step::Execute(statement) => {
                issued.push(statement);
                machine.handle(answers.next().expect("an answer for every statement"));
            }
            Step::Done(outcome) => return (issued, outcome),
            Step::Draw { .. } => panic!("the reader never draws"),
        }
    }
    panic!("the machine did not finish within 32 steps");
}

fn query(page: u64, cursor: Option<Cursor>) -> SearchQuery {
    SearchQuery {
        filter: SearchFilter {
            tenant_id: "acme".to_owned(),
            ..SearchFilter::default()
        },
        cursor,
        page_size: PageSize::new(page).expect("in range"),
    }
}

#[test]
fn reader_decoding_is_the_inverse_of_encoding_bit_for_bit() {
    let records: Vec<CaptureDescriptor> = (1..=3).map(descriptor).collect();
    let encoded = Rows(records.iter().map(encode_record).collect());
    let decoded = decode_records("reader.search_page", &encoded).expect("well-formed");
    assert_eq!(decoded, records);
    // Floats travel as their bits: -0.0 and NaN survive exactly.
    assert_eq!(
        decoded[0].summary.minimum.get().to_bits(),
        (-0.0f64).to_bits()
    );
    assert!(decoded[0].summary.maximum.get().is_nan());
}

#[test]
fn reader_a_row_of_the_wrong_width_is_refused_not_slid() {
    let mut row = encode_record(&descriptor(1));
    row.remove(8);
    let error = decode_records("reader.search_page", &Rows(vec![row])).expect_err("short row");
    assert!(matches!(error, ReaderError::Malformed { .. }), "{error}");
    assert_eq!(result_columns().len(), encode_record(&descriptor(1)).len());
}

#[test]
fn reader_a_value_of_the_wrong_type_is_a_typed_error() {
    let mut row = encode_record(&descriptor(1));
    row[4] = Value::String("not a uuid".to_owned());
    assert!(matches!(
        decode_records("reader.get_by_ids", &Rows(vec![row])),
        Err(ReaderError::Malformed {
            statement: "reader.get_by_ids",
            ..
        })
    ));
}

#[test]
fn reader_a_first_page_pins_the_head_and_hands_out_a_cursor_at_it() {
    let mut machine = SearchPage::new(tables(), query(2, None)).expect("valid query");
    let (issued, outcome) = drive(&mut machine, vec![head(7), rows(&[1, 2, 3])]);
    assert_eq!(issued[0].name, "reader.pin_snapshot");
    assert_eq!(issued[1].name, "reader.search_page");
    assert_eq!(
        issued[1].params.get("pinned_version"),
        Some(&Param::UInt64(7))
    );
    let page: Page = outcome.expect("a page");
    assert_eq!(page.records, vec![descriptor(1), descriptor(2)]);
    assert_eq!(page.next, Some(Cursor::after(7, &descriptor(2))));
}

#[test]
fn reader_the_last_page_has_no_cursor() {
    let mut machine = SearchPage::new(tables(), query(2, None)).expect("valid query");
    let (_, outcome) = drive(&mut machine, vec![head(7), rows(&[1, 2])]);
    assert_eq!(outcome.expect("a page").next, None);
}

#[test]
fn reader_a_cursor_page_reads_at_the_cursor_pinned_version_not_the_head() {
    let cursor = Cursor::after(7, &descriptor(2));
    let mut machine = SearchPage::new(tables(), query(2, Some(cursor))).expect("valid query");
    let (issued, outcome) = drive(&mut machine, vec![head(12), rows(&[3])]);
    assert_eq!(
        issued[1].params.get("pinned_version"),
        Some(&Param::UInt64(7))
    );
    assert_eq!(outcome.expect("a page").pinned, 7);
}

#[test]
fn reader_a_server_behind_the_pinned_version_fails_loudly() {
    let cursor = Cursor::after(7, &descriptor(2));
    let mut machine = SearchPage::new(tables(), query(2, Some(cursor))).expect("valid query");
    let (issued, outcome) = drive(&mut machine, vec![head(5)]);
    assert_eq!(issued.len(), 1);
    assert_eq!(
        outcome,
        Err(ReaderError::SnapshotAhead { pinned: 7, head: 5 })
    );
}

#[test]
fn reader_a_failed_statement_is_reported_by_name() {
    let mut machine = SearchPage::new(tables(), query(2, None)).expect("valid query");
    let (_, outcome) = drive(&mut machine, vec![head(7), Input::Failed(Failure::Timeout)]);
    assert_eq!(
        outcome,
        Err(ReaderError::Statement {
            statement: "reader.search_page",
            failure: Failure::Timeout
        })
    );
}

#[test]
fn reader_get_by_ids_reports_what_did_not_resolve() {
    let ids = BTreeSet::from([Uuid::from_u128(1), Uuid::from_u128(2)]);
    let mut machine = GetByIds::new(tables(), "acme", ids, 7).expect("valid lookup");
    let (issued, outcome) = drive(&mut machine, vec![head(7), rows(&[1])]);
    assert_eq!(
        issued.iter().map(|s| s.name).collect::<Vec<_>>(),
        ["reader.pin_snapshot", "reader.get_by_ids"]
    );
    let lookup: Lookup = outcome.expect("a lookup");
    assert_eq!(lookup.missing, BTreeSet::from([Uuid::from_u128(2)]));
    assert_eq!(
        lookup.resolve(),
        Err(ReaderError::Unresolved {
            tenant: "acme".to_owned(),
            pinned: 7,
            missing: BTreeSet::from([Uuid::from_u128(2)])
        })
    );
}

#[test]
fn reader_get_by_ids_resolves_every_chunk() {
    let ids: BTreeSet<Uuid> = (0..1_500u128).map(Uuid::from_u128).collect();
    let mut machine = GetByIds::new(tables(), "acme", ids, 7).expect("valid lookup");
    let first: Vec<u128> = (0..1_000).collect();
    let second: Vec<u128> = (1_000..1_500).collect();
    let (issued, outcome) = drive(&mut machine, vec![head(9), rows(&first), rows(&second)]);
    assert_eq!(issued.len(), 3);
    let resolved = outcome.expect("a lookup").resolve().expect("all resolve");
    assert_eq!(resolved.len(), 1_500);
}

#[test]
fn reader_get_by_ids_refuses_a_row_it_did_not_ask_for() {
    let ids = BTreeSet::from([Uuid::from_u128(1)]);
    let mut machine = GetByIds::new(tables(), "acme", ids, 7).expect("valid lookup");
    let (_, outcome) = drive(&mut machine, vec![head(7), rows(&[1, 99])]);
    assert!(
        matches!(outcome, Err(ReaderError::Malformed { .. })),
        "{outcome:?}"
    );
}

#[test]
fn reader_get_by_ids_fails_when_the_server_is_behind_w() {
    let ids = BTreeSet::from([Uuid::from_u128(1)]);
    let mut machine = GetByIds::new(tables(), "acme", ids, 7).expect("valid lookup");
    let (_, outcome) = drive(&mut machine, vec![head(6)]);
    assert_eq!(
        outcome,
        Err(ReaderError::SnapshotAhead { pinned: 7, head: 6 })
    );
}

#[test]
fn reader_an_empty_lookup_only_checks_the_head() {
    let mut machine = GetByIds::new(tables(), "acme", BTreeSet::new(), 7).expect("valid lookup");
    let (issued, outcome) = drive(&mut machine, vec![head(7)]);
    assert_eq!(issued.len(), 1);
    assert!(outcome.expect("a lookup").records.is_empty());
}
