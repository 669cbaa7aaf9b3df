//! Property tests of the reader machines over arbitrary server answers.

use std::collections::BTreeSet;

use capcat_proto::descriptor::CaptureDescriptor;
use capcat_proto::reader::{
    GetByIds, PageSize, ReaderError, SearchFilter, SearchPage, SearchQuery, encode_record,
};
use capcat_proto::{Failure, Input, Machine, Rows, Step, Tables, Value};
use proptest::prelude::*;
use uuid::Uuid;

fn tables() -> Tables {
    Tables::new("cc").expect("valid prefix")
}

fn record(id: u128) -> Vec<Value> {
    encode_record(&CaptureDescriptor {
        tenant_id: "acme".to_owned(),
        capture_id: Uuid::from_u128(id),
        ..CaptureDescriptor::default()
    })
}

fn arb_input() -> impl Strategy<Value = Input> {
    prop_oneof![
        3 => (0u64..10).prop_map(|w| Input::Rows(Rows(vec![vec![Value::UInt64(w)]]))),
        3 => proptest::collection::vec(0u128..6, 0..8)
            .prop_map(|ids| Input::Rows(Rows(ids.into_iter().map(record).collect()))),
        1 => Just(Input::Rows(Rows::empty())),
        1 => Just(Input::Rows(Rows(vec![vec![Value::Null]]))),
        1 => Just(Input::Failed(Failure::Timeout)),
        1 => (0u64..3).prop_map(Input::Drawn),
    ]
}

proptest! {
    #[test]
    fn reader_a_search_page_ends_typed_within_two_statements_and_never_overfills(
        page in 1u64..5,
        answers in proptest::collection::vec(arb_input(), 0..4),
    ) {
        let query = SearchQuery {
            filter: SearchFilter { tenant_id: "acme".to_owned(), ..SearchFilter::default() },
            cursor: None,
            page_size: PageSize::new(page).expect("in range"),
        };
        let mut machine = SearchPage::new(tables(), query).expect("valid query");
        let mut answers = answers.into_iter();
        let mut statements = 0;
        let outcome = loop {
            match machine.poll() {
                Step::Execute(_) => {
                    statements += 1;
                    prop_assert!(statements <= 2);
                    machine.handle(answers.next().unwrap_or(Input::Rows(Rows::empty())));
                }
                Step::Done(outcome) => break outcome,
                Step::Draw { .. } => prop_assert!(false, "the reader never draws"),
            }
        };
        if let Ok(found) = outcome {
            prop_assert!(found.records.len() as u64 <= page);
            if found.next.is_some() { prop_assert_eq!(found.records.len() as u64, page); }
        }
    }

    #[test]
    fn reader_a_lookup_never_reports_an_id_both_found_and_missing(
        ids in proptest::collection::btree_set(0u128..6, 0..5),
        answers in proptest::collection::vec(arb_input(), 0..4),
    ) {
        let ids: BTreeSet<Uuid> = ids.into_iter().map(Uuid::from_u128).collect();
        let mut machine = GetByIds::new(tables(), "acme", ids.clone(), 3).expect("valid lookup");
        let mut answers = answers.into_iter();
        let outcome = loop {
            match machine.poll() {
                Step::Execute(_) => machine.handle(answers.next().unwrap_or(Input::Rows(Rows::empty()))),
                Step::Done(outcome) => break outcome,
                Step::Draw { .. } => prop_assert!(false, "the reader never draws"),
            }
        };
        match outcome {
            Ok(lookup) => {
                let found: BTreeSet<Uuid> = lookup.records.keys().copied().collect();
                prop_assert!(found.is_disjoint(&lookup.missing));
                prop_assert_eq!(&found | &lookup.missing, ids);
            }
            Err(ReaderError::SnapshotAhead { pinned, head }) => prop_assert!(head < pinned),
            Err(_) => {}
        }
    }
}
