//! `ReadDemand`: the read-and-fold machine a transport drives.

mod demand_support;

use capcat_proto::demand::{DemandEvent, ReadDemand, fold, status};
use capcat_proto::{Failure, Input, Machine, Param, Step};
use demand_support::{store, tables};

#[test]
fn a_read_folds_the_rows_it_gets_and_says_when_it_was_cut_short() {
    let events = [
        DemandEvent::writer_sealed("a", 1, 5, 500, 1_000),
        DemandEvent::executor_merged("a", 1, 2),
        DemandEvent::writer_sealed("b", 1, 3, 300, 2_000),
    ];
    let table = store(&tables(), &events);

    let mut whole = ReadDemand::new(tables(), None, 3);
    let Step::Execute(statement) = whole.poll() else {
        panic!("a read starts with a statement");
    };
    assert_eq!(statement.name, "demand.read_events");
    assert_eq!(statement.params.get("limit"), Some(&Param::UInt64(4)));
    whole.handle(Input::Rows(table.read()));
    let Step::Done(Ok(read)) = whole.poll() else {
        panic!("a read with rows is done");
    };
    assert!(!read.truncated);
    assert_eq!(read.folded.shards, fold(&events).shards);
    assert_eq!(status(&read.folded, 3_000).total.pending_packs, 6);
    assert_eq!(whole.poll(), Step::Done(Ok(read)), "done stays done");

    // A limit of 2 folds the two newest rows and reports the cut.
    let mut cut = ReadDemand::new(tables(), None, 2);
    let _ = cut.poll();
    cut.handle(Input::Rows(table.read()));
    let Step::Done(Ok(read)) = cut.poll() else {
        panic!("done");
    };
    assert!(read.truncated);
    assert_eq!(read.folded.shards, fold(&events[1..]).shards);
}

#[test]
fn a_failed_read_is_returned_and_a_shard_read_filters() {
    let mut read = ReadDemand::new(tables(), Some("a".to_owned()), 10);
    let Step::Execute(statement) = read.poll() else {
        panic!("a read starts with a statement");
    };
    assert_eq!(statement.name, "demand.read_shard_events");
    assert_eq!(
        statement.params.get("shard_id"),
        Some(&Param::String("a".to_owned()))
    );
    read.handle(Input::Failed(Failure::Timeout));
    assert_eq!(read.poll(), Step::Done(Err(Failure::Timeout)));
    read.handle(Input::Rows(capcat_proto::Rows::empty()));
    assert_eq!(read.poll(), Step::Done(Err(Failure::Timeout)));
}
