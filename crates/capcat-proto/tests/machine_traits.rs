//! Every publication machine is plain data: `Clone + Eq + Hash + Debug`, so
//! the stateright models can keep the real machines inside their states, and
//! a clone replays identically (determinism).

mod common;

use std::fmt::Debug;
use std::hash::Hash;

use capcat_proto::config::Config;
use capcat_proto::{Allocate, IndexPass, Lease, LeaseClaim, Machine, Publish, Release, Tables};
use common::{FakeCatalog, drive, id};

fn plain_data<T: Clone + Eq + Hash + Debug>() {}

#[test]
fn every_machine_and_outcome_is_plain_data() {
    plain_data::<LeaseClaim>();
    plain_data::<Release>();
    plain_data::<Allocate>();
    plain_data::<Publish>();
    plain_data::<IndexPass>();
    plain_data::<<LeaseClaim as Machine>::Outcome>();
    plain_data::<<Release as Machine>::Outcome>();
    plain_data::<<Allocate as Machine>::Outcome>();
    plain_data::<<Publish as Machine>::Outcome>();
    plain_data::<<IndexPass as Machine>::Outcome>();
}

#[test]
fn a_cloned_machine_replays_the_same_statements_and_outcome() {
    let tables = Tables::new("t").expect("prefix");
    let mut cat = FakeCatalog::new(&tables, 1_000);
    let mut acquire =
        LeaseClaim::acquire(tables.clone(), Config::default(), "a".into(), None, id(1));
    let lease: Lease = drive(&mut acquire, |s| cat.respond(s), |_| 0, 100)
        .outcome
        .expect("lease");
    let packs = [("s3".to_owned(), id(9))].into_iter().collect();
    let original = Publish::new(tables, Config::default(), lease, 1, packs, id(50));
    let mut a = original.clone();
    let mut b = original;
    let mut cat_b = cat.clone();
    let run_a = drive(&mut a, |s| cat.respond(s), |_| 0, 100);
    let run_b = drive(&mut b, |s| cat_b.respond(s), |_| 0, 100);
    assert_eq!(run_a.statements, run_b.statements);
    assert_eq!(run_a.outcome, run_b.outcome);
    assert_eq!(a, b);
}
