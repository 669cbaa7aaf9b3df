//! `AdmittedPacks` (the listing behind `capcat verify`) over canned server
//! answers: it pins, pages with a strict keyset after the server's last
//! row, and refuses answers that repeat a pack or run past the page.

use capcat_proto::fragments::{MembershipBound, published_pairs};
use capcat_proto::reader::{AdmittedPacks, ReaderError};
use capcat_proto::{Input, Machine, Param, Rows, Step, Tables, Value};
use uuid::Uuid;

fn tables() -> Tables {
    Tables::new("cc").expect("valid prefix")
}

fn row(store: &str, pack: u128) -> Vec<Value> {
    vec![
        Value::String(store.to_owned()),
        Value::Uuid(Uuid::from_u128(pack)),
    ]
}

fn execute(machine: &mut AdmittedPacks) -> capcat_proto::Statement {
    match machine.poll() {
        Step::Execute(stmt) => stmt,
        other => panic!("expected a statement, got {other:?}"),
    }
}

#[test]
fn admitted_packs_are_listed_page_by_page_after_the_last_one() {
    let mut list = AdmittedPacks::new(tables(), 2);
    assert_eq!(execute(&mut list).name, "reader.pin_snapshot");
    list.handle(Input::Rows(Rows(vec![vec![Value::UInt64(5)]])));
    let first = execute(&mut list);
    assert_eq!(first.name, "reader.admitted_packs");
    assert_eq!(first.params.get("pinned_version"), Some(&Param::UInt64(5)));
    assert_eq!(first.params.get("limit"), Some(&Param::UInt64(2)));
    assert!(!first.params.contains_key("after_pack_id"));
    // The pairing every pinned read uses, verbatim.
    assert!(
        first
            .sql
            .contains(&published_pairs(&tables(), MembershipBound::Pinned)),
        "{}",
        first.sql
    );
    // The server's order, which for UUIDs is not Rust's: the next page
    // starts after the server's last row.
    list.handle(Input::Rows(Rows(vec![row("a", 2), row("a", 1)])));
    let second = execute(&mut list);
    assert_eq!(
        second.params.get("after_pack_id"),
        Some(&Param::Uuid(Uuid::from_u128(1)))
    );
    assert_eq!(
        second.params.get("after_store_id"),
        Some(&Param::String("a".to_owned()))
    );
    assert!(
        second.sql.contains("(store_id, pack_id) > ("),
        "{}",
        second.sql
    );
    list.handle(Input::Rows(Rows(vec![row("b", 1)])));
    let Step::Done(Ok(admitted)) = list.poll() else {
        panic!("a short page ends the listing")
    };
    assert_eq!(admitted.pinned, 5);
    assert_eq!(
        admitted.packs,
        vec![
            ("a".to_owned(), Uuid::from_u128(1)),
            ("a".to_owned(), Uuid::from_u128(2)),
            ("b".to_owned(), Uuid::from_u128(1)),
        ]
    );
}

#[test]
fn admitted_packs_of_an_unpublished_catalog_are_none_without_a_page() {
    let mut list = AdmittedPacks::new(tables(), 2);
    execute(&mut list);
    list.handle(Input::Rows(Rows(vec![vec![Value::UInt64(0)]])));
    let Step::Done(Ok(admitted)) = list.poll() else {
        panic!("W = 0 admits nothing")
    };
    assert_eq!((admitted.pinned, admitted.packs.len()), (0, 0));
}

#[test]
fn admitted_packs_refuse_a_page_repeating_a_pack_or_too_long() {
    for page in [
        vec![row("a", 1), row("a", 1)],
        vec![row("a", 1), row("a", 2), row("a", 3)],
        vec![vec![Value::UInt64(1), Value::Uuid(Uuid::from_u128(1))]],
    ] {
        let mut list = AdmittedPacks::new(tables(), 2);
        execute(&mut list);
        list.handle(Input::Rows(Rows(vec![vec![Value::UInt64(1)]])));
        execute(&mut list);
        list.handle(Input::Rows(Rows(page.clone())));
        assert!(
            matches!(
                list.poll(),
                Step::Done(Err(ReaderError::Malformed {
                    statement: "reader.admitted_packs",
                    ..
                }))
            ),
            "{page:?}"
        );
    }
}

#[test]
fn admitted_packs_report_a_failed_statement_by_name() {
    let mut list = AdmittedPacks::new(tables(), 2);
    execute(&mut list);
    list.handle(Input::Rows(Rows(vec![vec![Value::UInt64(1)]])));
    execute(&mut list);
    list.handle(Input::Failed(capcat_proto::Failure::Timeout));
    assert!(matches!(
        list.poll(),
        Step::Done(Err(ReaderError::Statement {
            statement: "reader.admitted_packs",
            ..
        }))
    ));
}
