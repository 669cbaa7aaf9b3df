//! Transition tests of the sole-claimant version allocator.

mod common;

use capcat_proto::config::Config;
use capcat_proto::{Allocate, AllocateError, Failure, Input, Machine, Step, Tables};
use common::{FakeCatalog, drive, id};

fn tables() -> Tables {
    Tables::new("t").expect("valid prefix")
}

#[test]
fn an_uncontested_allocation_takes_head_plus_one() {
    let mut cat = FakeCatalog::new(&tables(), 0);
    cat.watermark.push((4, id(9)));
    let mut m = Allocate::new(tables(), Config::default(), id(1));
    assert_eq!(m.claim_id(), id(1));
    let run = drive(&mut m, |s| cat.respond(s), |_| 0, 100);
    assert_eq!(
        run.outcome,
        Ok(5),
        "above the published head even with no claims"
    );
    assert_eq!(
        run.names(),
        [
            "allocate.read_head",
            "allocate.insert_claim",
            "allocate.read_claims"
        ]
    );
    assert!(
        run.statements
            .iter()
            .filter(|s| s.name != "allocate.insert_claim")
            .all(|s| s.settings.select_sequential_consistency)
    );
}

#[test]
fn a_contested_version_is_abandoned_and_retried_with_a_wider_window() {
    let mut cat = FakeCatalog::new(&tables(), 0);
    let mut a = Allocate::new(tables(), Config::default(), id(1));
    let mut b = Allocate::new(tables(), Config::default(), id(2));
    // Both read head 0, both claim 1, both read back two claimants.
    for m in [&mut a, &mut b] {
        let Step::Execute(s) = m.poll() else { panic!() };
        m.handle(cat.respond(&s));
    }
    for m in [&mut a, &mut b] {
        assert_eq!(m.poll(), Step::Draw { below: 1 });
        m.handle(Input::Drawn(0));
        let Step::Execute(s) = m.poll() else { panic!() };
        m.handle(cat.respond(&s));
    }
    for m in [&mut a, &mut b] {
        let Step::Execute(s) = m.poll() else { panic!() };
        m.handle(cat.respond(&s));
    }
    let mut draws = [3, 7].into_iter();
    let outcomes: Vec<_> = [&mut a, &mut b]
        .into_iter()
        .map(|m| {
            let d = draws.next().unwrap_or(0);
            let run = drive(m, |s| cat.respond(s), move |_| d, 100);
            assert_eq!(run.draws, [9], "attempt 1 draws from randbelow(9)");
            run.outcome
        })
        .collect();
    // a claims above the contested 1; b then reads a's 5 as the head.
    assert_eq!(outcomes, [Ok(1 + 1 + 3), Ok(5 + 1 + 7)]);
}

#[test]
fn allocation_attempts_are_bounded() {
    let cfg = Config::default().with_attempts(1, 4, 1).expect("valid");
    let mut m = Allocate::new(tables(), cfg, id(1));
    let run = drive(
        &mut m,
        |s| match s.name {
            "allocate.read_head" => common::rows(vec![vec![capcat_proto::Value::UInt64(0)]]),
            "allocate.read_claims" => {
                common::rows(vec![common::uuid_row(id(1)), common::uuid_row(id(2))])
            }
            _ => common::ok(),
        },
        |_| 0,
        100,
    );
    assert_eq!(
        run.outcome,
        Err(AllocateError::Exhausted {
            attempts: 4,
            last_version: 1
        })
    );
    assert_eq!(run.draws, [1, 9, 17, 25]);
}

#[test]
fn a_failed_claim_insert_is_decided_by_the_read_back_and_a_failed_read_is_an_error() {
    let mut cat = FakeCatalog::new(&tables(), 0);
    cat.fail_next.push("allocate.insert_claim");
    let mut m = Allocate::new(tables(), Config::default(), id(1));
    let run = drive(&mut m, |s| cat.respond(s), |_| 0, 100);
    // The fake dropped the row, so the read-back finds nobody: retry, and
    // the version nobody holds is claimed again.
    assert_eq!(run.outcome, Ok(1));
    assert_eq!(run.named("allocate.read_claims").len(), 2);
    let mut m = Allocate::new(tables(), Config::default(), id(1));
    let run = drive(&mut m, |_| Input::Failed(Failure::Timeout), |_| 0, 100);
    assert!(matches!(
        run.outcome,
        Err(AllocateError::Statement {
            statement: "allocate.read_head",
            ..
        })
    ));
}

#[test]
fn an_out_of_range_draw_is_refused_not_trusted() {
    let mut m = Allocate::new(tables(), Config::default(), id(1));
    let run = drive(
        &mut m,
        |_| common::rows(vec![vec![capcat_proto::Value::UInt64(0)]]),
        |below| below,
        100,
    );
    assert!(matches!(
        run.outcome,
        Err(AllocateError::UnexpectedInput { .. })
    ));
}

/// The head read returns one row (`max()` over the watermark); any other
/// count is a malformed answer, never a head taken from its first row.
#[test]
fn a_head_read_of_other_than_one_row_is_malformed() {
    for count in [0, 2] {
        let mut m = Allocate::new(tables(), Config::default(), id(1));
        let row = vec![capcat_proto::Value::UInt64(4)];
        let run = drive(
            &mut m,
            |_| common::rows(vec![row.clone(); count]),
            |_| 0,
            100,
        );
        assert_eq!(run.names(), ["allocate.read_head"], "{count} rows");
        assert!(
            matches!(
                run.outcome,
                Err(AllocateError::Malformed {
                    statement: "allocate.read_head",
                    ..
                })
            ),
            "{count} rows: {:?}",
            run.outcome
        );
    }
}
