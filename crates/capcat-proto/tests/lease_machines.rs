//! Transition tests of the lease machines, and the seed's lease bugs as
//! named tests.

mod common;

use capcat_proto::config::Config;
use capcat_proto::designs::Design;
use capcat_proto::{Input, Lease, LeaseClaim, LeaseError, Machine, Release, Step, Tables};
use common::{LeaseLog, LeaseRow, drive, id};

const TTL: u64 = 30_000_000_000;

fn tables() -> Tables {
    Tables::new("t").expect("valid prefix")
}

fn cfg() -> Config {
    Config::default()
}

fn acquire(
    log: &mut LeaseLog,
    holder: &str,
    held: Option<Lease>,
    fresh: u128,
) -> Result<Lease, LeaseError> {
    let mut m = LeaseClaim::acquire(tables(), cfg(), holder.to_owned(), held, id(fresh));
    drive(
        &mut m,
        |s| log.respond(s).expect("lease statement"),
        |_| 0,
        100,
    )
    .outcome
}

#[test]
fn acquire_on_an_empty_table_claims_term_one_with_a_server_stamped_expiry() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let mut m = LeaseClaim::acquire(tables(), cfg(), "a".into(), None, id(7));
    let run = drive(
        &mut m,
        |s| log.respond(s).expect("lease statement"),
        |_| 0,
        100,
    );
    assert_eq!(
        run.names(),
        ["lease.read_head", "lease.insert_claim", "lease.read_claims"]
    );
    assert_eq!(run.draws, [1], "the first claim draws from a window of one");
    let lease = run.outcome.expect("acquired");
    assert_eq!(
        (lease.lease_id, lease.term, lease.expires_at_ns),
        (id(7), 1, 1_000 + TTL)
    );
}

#[test]
fn a_live_foreign_lease_is_refused_naming_its_holder_and_writes_nothing() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    acquire(&mut log, "healthy", None, 1).expect("first acquire");
    let rows_before = log.rows.clone();
    let err = acquire(&mut log, "other", None, 2).expect_err("held");
    assert_eq!(
        err,
        LeaseError::Held {
            holder: "healthy".into(),
            lease_id: id(1),
            term: 1,
            expires_at_ns: 1_000 + TTL
        }
    );
    assert_eq!(log.rows, rows_before);
}

#[test]
fn an_expired_foreign_lease_is_taken_over_with_a_fresh_lease_id() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    acquire(&mut log, "old", None, 1).expect("first acquire");
    log.now_ns += TTL + 1;
    let lease = acquire(&mut log, "new", None, 2).expect("takeover");
    assert_eq!((lease.lease_id, lease.term), (id(2), 2));
}

/// Seed bug: a holder could not re-acquire its own lease (it minted a fresh
/// lease_id, became a stranger to its own row and was refused as held by
/// itself).
#[test]
fn holder_reacquire_keeps_its_lease_id_at_a_new_term() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let first = acquire(&mut log, "a", None, 1).expect("acquire");
    log.now_ns += 5;
    let again = acquire(&mut log, "a", Some(first.clone()), 99).expect("re-acquire by the holder");
    assert_eq!(
        again.lease_id, first.lease_id,
        "the fencing identity is kept"
    );
    assert!(again.term > first.term);
    assert!(again.expires_at_ns > first.expires_at_ns);
    assert!(log.fence_admits_lease(&again, 0));
    assert!(
        !log.fence_admits_lease(&first, 0),
        "the fence names one row: what was sent under the old one is fenced out"
    );
}

/// The rejected design, played as its caller plays it: a holder that
/// re-acquires under a fresh lease id, forgetting the lease it holds, is a
/// stranger to its own live row and is refused by itself (`OneLiveLease`'s
/// self-lockout). Shows the test above can fail.
#[test]
fn the_fresh_lease_id_design_is_refused_by_its_own_live_lease() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let first = acquire(&mut log, "a", None, 1).expect("acquire");
    assert_eq!(
        Design::FreshLeaseIdOnReacquire.acts(),
        capcat_proto::designs::Acts::Caller
    );
    let again = acquire(&mut log, "a", None, 99);
    assert!(
        matches!(
            again,
            Err(LeaseError::Held { lease_id, ref holder, .. })
                if lease_id == first.lease_id && holder == "a"
        ),
        "{again:?}"
    );
}

/// Two claimants that read the same head both claim `head + 1 + draw`.
/// Interleaved so both append before either reads back.
fn contend(log: &mut LeaseLog, draws: (u64, u64)) -> (LeaseClaim, LeaseClaim) {
    let mut a = LeaseClaim::acquire(tables(), cfg(), "a".into(), None, id(1));
    let mut b = LeaseClaim::acquire(tables(), cfg(), "b".into(), None, id(2));
    for m in [&mut a, &mut b] {
        let Step::Execute(head) = m.poll() else {
            panic!("head read first")
        };
        m.handle(log.respond(&head).expect("head"));
    }
    for (m, d) in [(&mut a, draws.0), (&mut b, draws.1)] {
        let Step::Draw { .. } = m.poll() else {
            panic!("then a draw")
        };
        m.handle(Input::Drawn(d));
        let Step::Execute(claim) = m.poll() else {
            panic!("then the claim")
        };
        m.handle(log.respond(&claim).expect("claim"));
    }
    for m in [&mut a, &mut b] {
        let Step::Execute(back) = m.poll() else {
            panic!("then the read-back")
        };
        m.handle(log.respond(&back).expect("read-back"));
    }
    (a, b)
}

#[test]
fn a_contested_term_is_abandoned_by_every_claimant() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let (mut a, mut b) = contend(&mut log, (0, 0));
    for m in [&mut a, &mut b] {
        assert_eq!(m.attempts(), 2, "the second attempt has started");
        match m.poll() {
            Step::Execute(s) => assert_eq!(s.name, "lease.read_head", "both go round again"),
            other => panic!("a contested claimant must not finish: {other:?}"),
        }
    }
    // Nobody holds the contested term, but its head row may belong to a
    // claimant that read itself back as sole before the rival claim landed
    // and still has a fenced statement in flight: a third party waits the
    // head out, and takes the next term only once it has expired.
    match acquire(&mut log, "c", None, 3) {
        Err(LeaseError::Held { term: 1, .. }) => {}
        other => panic!("a live contested head must be waited out: {other:?}"),
    }
    log.now_ns += TTL;
    let lease = acquire(&mut log, "c", None, 3).expect("an expired contested head is takeable");
    assert_eq!(lease.term, 2);
}

/// Seed bug: the claim retry had no jitter, so contenders that collided on
/// `head.term + 1` collided again on every retry.
#[test]
fn claim_retry_without_jitter_is_fixed_retries_draw_from_a_widening_window() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let (mut a, mut b) = contend(&mut log, (0, 0));
    let mut windows = Vec::new();
    let mut terms = Vec::new();
    // A live contested head is waited out (see
    // `a_contested_term_is_abandoned_by_every_claimant`); by the time the
    // claimants read the head again it has expired.
    log.now_ns += TTL;
    for m in [&mut a, &mut b] {
        let Step::Execute(head) = m.poll() else {
            panic!()
        };
        m.handle(log.respond(&head).expect("head"));
    }
    for (m, d) in [(&mut a, 3), (&mut b, 6)] {
        let Step::Draw { below } = m.poll() else {
            panic!("a retry draws")
        };
        windows.push(below);
        m.handle(Input::Drawn(d));
        let Step::Execute(claim) = m.poll() else {
            panic!()
        };
        terms.push(common::u64_param(&claim, "term"));
        m.handle(log.respond(&claim).expect("claim"));
    }
    assert_eq!(windows, [9, 9], "attempt 1 draws from randbelow(8 * 1 + 1)");
    assert_eq!(
        terms,
        [1 + 1 + 3, 1 + 1 + 6],
        "the draw is skipped over the head term"
    );
    let outcomes: Vec<_> = [&mut a, &mut b]
        .into_iter()
        .map(|m| drive(m, |s| log.respond(s).expect("lease"), |_| 0, 100).outcome)
        .collect();
    // Spread apart, each claim stands alone at its term, but each read-back
    // also sees the other's live claim: neither may hold while the other
    // could (the rival-aware read-back; a lower live claim may belong to a
    // holder with a statement in flight). Contention costs one TTL.
    assert!(
        outcomes.iter().all(Result::is_err),
        "two live claims refuse each other: {outcomes:?}"
    );
    log.now_ns += TTL;
    acquire(&mut log, "c", None, 7).expect("once both claims expired, the lease is free");
}

#[test]
fn claim_attempts_are_bounded() {
    // Every read-back shows a second claimant at our term.
    let cfg = cfg().with_attempts(3, 3, 3).expect("valid");
    let mut m = LeaseClaim::acquire(tables(), cfg, "a".into(), None, id(1));
    let run = drive(
        &mut m,
        |s| match s.name {
            "lease.read_head" => common::rows(vec![]),
            "lease.insert_claim" => common::ok(),
            _ => common::rows(vec![
                common::claim_row(id(1), 5),
                common::claim_row(id(2), 5),
            ]),
        },
        |below| below - 1,
        100,
    );
    assert_eq!(run.draws, [1, 9, 17]);
    assert!(
        matches!(run.outcome, Err(LeaseError::Contested { attempts: 3, .. })),
        "{:?}",
        run.outcome
    );
}

#[test]
fn a_failed_claim_insert_is_decided_by_the_read_back() {
    let mut m = LeaseClaim::acquire(tables(), cfg(), "a".into(), None, id(1));
    let run = drive(
        &mut m,
        |s| match s.name {
            "lease.read_head" => common::rows(vec![]),
            "lease.insert_claim" => Input::Failed(capcat_proto::Failure::Timeout),
            _ => common::rows(vec![common::claim_row(id(1), 5)]),
        },
        |_| 0,
        100,
    );
    assert_eq!(run.outcome.expect("the claim landed").term, 1);
}

#[test]
fn renew_extends_the_same_lease_by_a_whole_ttl_at_a_new_term() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let lease = acquire(&mut log, "a", None, 1).expect("acquire");
    log.now_ns += 1_000_000_000;
    let mut m = LeaseClaim::renew(tables(), cfg(), lease.clone());
    let renewed = drive(&mut m, |s| log.respond(s).expect("lease"), |_| 0, 100)
        .outcome
        .expect("renewed");
    assert_eq!(renewed.lease_id, lease.lease_id);
    assert!(renewed.term > lease.term);
    assert!(
        renewed.expires_at_ns > lease.expires_at_ns,
        "strictly later"
    );
    assert_eq!(
        renewed.expires_at_ns,
        log.now_ns + TTL,
        "a whole TTL from the server's now"
    );
}

/// The settle rule, as the spec's `settled` states it: a renewal settles an
/// abandoned statement only when the server stamped its claim after the
/// expiry of the row the statement named. The rule is strict with one
/// nanosecond to spare: the fence's margin makes such a statement land
/// strictly before that expiry, so a claim stamped at it would be safe too
/// (the model holds with `>=`; its state counts move). Code, spec and model
/// keep the one strict rule, and this pins it on both sides.
#[test]
fn a_renewal_settles_an_abandoned_statement_only_when_stamped_after_the_row_it_named_expired() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let mut lease = acquire(&mut log, "a", None, 1).expect("acquire");
    let named_expiry = log.now_ns + 5_000;
    lease.unsettled_until_ns = named_expiry;
    log.now_ns = named_expiry;
    let mut m = LeaseClaim::renew(tables(), cfg(), lease);
    let at_the_moment = drive(&mut m, |s| log.respond(s).expect("lease"), |_| 0, 100)
        .outcome
        .expect("renewed");
    assert_eq!(at_the_moment.claimed_at_ns(TTL), named_expiry);
    assert_eq!(
        at_the_moment.unsettled_until_ns, named_expiry,
        "stamped at the named row's expiry: still unsettled"
    );
    log.now_ns = named_expiry + 1;
    let mut m = LeaseClaim::renew(tables(), cfg(), at_the_moment);
    let after = drive(&mut m, |s| log.respond(s).expect("lease"), |_| 0, 100)
        .outcome
        .expect("renewed");
    assert!(!after.unsettled(), "stamped one nanosecond later: settled");
}

/// A head term with a rival's row beside the holder's is contested, so
/// nobody holds it and a renewal is refused; two rows of the holder's own
/// lease at one term (a late row of an earlier attempt) are no contest.
#[test]
fn renew_is_refused_over_a_contested_head_but_not_over_two_rows_of_its_own() {
    // In ClickHouse's UUID order `own` sorts above `rival`, so the holder's
    // row is the head row and the rival's the second row the read returns.
    let own = uuid::Uuid::parse_str("ffffffff-ffff-ffff-ffff-ffffffffffff").expect("uuid");
    let rival = uuid::Uuid::parse_str("00000000-0000-0000-0000-000000000001").expect("uuid");
    let lease = Lease {
        lease_id: own,
        holder: "a".into(),
        term: 4,
        expires_at_ns: u64::MAX,
        unsettled_until_ns: 0,
    };
    let row = |lease_id| LeaseRow {
        term: 4,
        lease_id,
        holder: "x".into(),
        expires_at_ns: u64::MAX,
    };
    let mut log = LeaseLog::new(&tables(), 1_000);
    log.rows.extend([row(own), row(rival)]);
    assert_eq!(log.head().map(|h| h.lease_id), Some(own));
    let mut m = LeaseClaim::renew(tables(), cfg(), lease.clone());
    let run = drive(&mut m, |s| log.respond(s).expect("lease"), |_| 0, 100);
    assert_eq!(run.names(), ["lease.read_head"], "refused without a claim");
    match run.outcome {
        Err(LeaseError::NotHeld {
            head: Some(head), ..
        }) => assert!(head.contested && head.lease_id == own, "{head:?}"),
        other => panic!("a contested head is nobody's: {other:?}"),
    }

    let mut log = LeaseLog::new(&tables(), 1_000);
    log.rows.extend([row(own), row(own)]);
    let mut m = LeaseClaim::renew(tables(), cfg(), lease);
    let renewed = drive(&mut m, |s| log.respond(s).expect("lease"), |_| 0, 100)
        .outcome
        .expect("two rows of its own lease are not a contest");
    assert_eq!((renewed.lease_id, renewed.term), (own, 5));
}

#[test]
fn renew_refuses_a_foreign_head_without_writing() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let stale = acquire(&mut log, "a", None, 1).expect("acquire");
    log.now_ns += TTL + 1;
    acquire(&mut log, "b", None, 2).expect("takeover");
    let mut m = LeaseClaim::renew(tables(), cfg(), stale);
    let run = drive(&mut m, |s| log.respond(s).expect("lease"), |_| 0, 100);
    assert_eq!(
        run.names(),
        ["lease.read_head"],
        "refused client-side: no claim issued"
    );
    assert!(
        matches!(run.outcome, Err(LeaseError::NotHeld { head: Some(ref h), .. }) if h.lease_id == id(2))
    );
}

#[test]
fn renew_refuses_an_empty_lease_table() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let lease = Lease {
        lease_id: id(1),
        holder: "a".into(),
        term: 1,
        expires_at_ns: 5,
        unsettled_until_ns: 0,
    };
    let mut m = LeaseClaim::renew(tables(), cfg(), lease);
    let run = drive(&mut m, |s| log.respond(s).expect("lease"), |_| 0, 100);
    assert!(matches!(
        run.outcome,
        Err(LeaseError::NotHeld { head: None, .. })
    ));
}

fn release(log: &mut LeaseLog, design: Design, lease: Lease) -> Result<(), LeaseError> {
    let mut m = design.wrap(tables(), cfg(), Release::new(tables(), cfg(), lease));
    let run = drive(&mut m, |s| log.respond(s).expect("lease"), |_| 0, 10);
    assert_eq!(run.names(), ["lease.release"], "release is ONE statement");
    run.outcome
}

#[test]
fn release_by_the_holder_writes_a_tombstone_and_frees_the_lease() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let lease = acquire(&mut log, "a", None, 1).expect("acquire");
    release(&mut log, Design::Shipped, lease).expect("released");
    assert_eq!(
        log.head().map(|h| h.expires_at_ns),
        Some(0),
        "the tombstone is the head"
    );
    acquire(&mut log, "b", None, 2).expect("free at once, without waiting out the TTL");
}

/// Seed bug: an orderly release by a stale writer revoked a healthy
/// holder's live lease (it wrote a tombstone above whatever head stood).
#[test]
fn stale_release_does_not_revoke_a_live_successor() {
    for (design, revoked) in [(Design::Shipped, false), (Design::UnfencedRelease, true)] {
        let mut log = LeaseLog::new(&tables(), 1_000);
        let stale = acquire(&mut log, "stale", None, 1).expect("acquire");
        log.now_ns += TTL + 1;
        let healthy = acquire(&mut log, "healthy", None, 2).expect("takeover");
        release(&mut log, design, stale).expect("the statement ran");
        assert_eq!(log.fence_admits_lease(&healthy, 0), !revoked, "{design}");
        // Even over a revoked head, the healthy lease's live row refuses a
        // third claimant's read-back: the unfenced tombstone costs the
        // healthy holder its fence, never a second holder beside it.
        let third = acquire(&mut log, "third", None, 3);
        assert!(third.is_err(), "{design}: {third:?}");
    }
}

#[test]
fn a_failed_release_keeps_the_lease() {
    let lease = Lease {
        lease_id: id(1),
        holder: "a".into(),
        term: 1,
        expires_at_ns: 5,
        unsettled_until_ns: 0,
    };
    let mut m = Release::new(tables(), cfg(), lease.clone());
    let run = drive(
        &mut m,
        |_| Input::Failed(capcat_proto::Failure::Timeout),
        |_| 0,
        10,
    );
    assert!(matches!(
        run.outcome,
        Err(LeaseError::Statement {
            statement: "lease.release",
            ..
        })
    ));
    assert_eq!(
        m.lease(),
        &lease,
        "the caller still has its token to retry with"
    );
}

#[test]
fn the_head_is_ordered_by_clickhouse_uuid_collation() {
    // Two claims at one term: the fake orders them as the server does, and
    // either way the head term is contested, so nobody holds it.
    let mut log = LeaseLog::new(&tables(), 1_000);
    let low_first = uuid::Uuid::parse_str("00000000-0000-0000-ffff-ffffffffffff").expect("uuid");
    let high_first = uuid::Uuid::parse_str("ffffffff-ffff-ffff-0000-000000000000").expect("uuid");
    for lease_id in [high_first, low_first] {
        log.rows.push(LeaseRow {
            term: 4,
            lease_id,
            holder: "x".into(),
            expires_at_ns: u64::MAX,
        });
    }
    assert_eq!(log.head().map(|h| h.lease_id), Some(low_first));
    match acquire(&mut log, "c", None, 3) {
        Err(LeaseError::Held { lease_id, .. }) => assert_eq!(lease_id, low_first),
        other => panic!("a live contested head is waited out: {other:?}"),
    }
    for row in &mut log.rows {
        row.expires_at_ns = log.now_ns;
    }
    let lease = acquire(&mut log, "c", None, 3).expect("an expired contested head is takeable");
    assert_eq!(lease.term, 5);
}

/// Model-checker finding (the late release tombstone): a release computes its
/// tombstone's term (`max(term) + 1`) when it is evaluated, so a new holder
/// may claim that same term first and read itself back as its sole claimant.
/// The dead tombstone then lands beside it and becomes the head row of the
/// term. A term is held while ANY row at it is live: an acquire must wait
/// out the new holder's claim, not take the term at once because the head
/// row is dead (which let the new holder's in-flight commit row land under a
/// reader's pin).
#[test]
fn a_dead_tombstone_heading_a_term_with_a_live_foreign_claim_is_held_until_the_claim_expires() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let holder = Lease {
        lease_id: id(2),
        holder: "new".into(),
        term: 2,
        expires_at_ns: 1_000 + TTL,
        unsettled_until_ns: 0,
    };
    // Low 64 bits all ones: the tombstone sorts above the holder's row under
    // ClickHouse's UUID collation, so it is the head row.
    let tombstone = id(u128::from(u64::MAX));
    log.rows.extend([
        LeaseRow {
            term: 2,
            lease_id: holder.lease_id,
            holder: holder.holder.clone(),
            expires_at_ns: holder.expires_at_ns,
        },
        LeaseRow {
            term: 2,
            lease_id: tombstone,
            holder: "stale".into(),
            expires_at_ns: 0,
        },
    ]);
    assert_eq!(log.head().map(|h| h.lease_id), Some(tombstone));
    let rows_before = log.rows.clone();
    let err = acquire(&mut log, "c", None, 3).expect_err("the term is held by a live claim");
    assert_eq!(
        err,
        LeaseError::Held {
            holder: "stale".into(),
            lease_id: tombstone,
            term: 2,
            expires_at_ns: holder.expires_at_ns,
        },
        "names the head row and when the term's last live row expires"
    );
    assert_eq!(log.rows, rows_before, "a held acquire writes nothing");
    log.now_ns = holder.expires_at_ns;
    let lease = acquire(&mut log, "c", None, 3).expect("every row at the term has expired");
    assert_eq!((lease.lease_id, lease.term), (id(3), 3));
}

/// TLC found it (`OneLiveLease`'s self-lockout half): an acquire whose
/// read-back was refused by a rival's live claim left its own claim row as
/// the head; the retry read that row as another lease's live head and was
/// refused by itself, waiting out a TTL for nothing. The claim id is the
/// acquire's own: the retry claims above its abandoned row.
#[test]
fn an_acquire_retry_is_never_refused_by_its_own_abandoned_claim() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let mut a = LeaseClaim::acquire(tables(), cfg(), "a".into(), None, id(2));
    // a read the head while the table was empty...
    let Step::Execute(head) = a.poll() else {
        panic!("a head read")
    };
    assert_eq!(head.name, "lease.read_head");
    a.handle(common::rows(vec![]));
    assert!(matches!(a.poll(), Step::Draw { .. }));
    a.handle(Input::Drawn(0));
    // ...then b claimed the same term and still holds its row live.
    let b = acquire(&mut log, "b", None, 1).expect("b holds term 1");
    assert_eq!(b.term, 1);
    let Step::Execute(claim) = a.poll() else {
        panic!("a's claim")
    };
    a.handle(log.respond(&claim).expect("claim"));
    let Step::Execute(read_back) = a.poll() else {
        panic!("a's read-back")
    };
    a.handle(log.respond(&read_back).expect("read-back"));
    // Refused (b's row is live): a retries from a fresh head read, and its
    // own abandoned row heads the contested term.
    let Step::Execute(head) = a.poll() else {
        panic!("a retry reads the head")
    };
    assert_eq!(head.name, "lease.read_head");
    a.handle(log.respond(&head).expect("head"));
    match a.poll() {
        Step::Draw { .. } => {}
        other => panic!("the retry must claim above its own row, not stop: {other:?}"),
    }
}

/// A released lease is not held: a renewal over its own tombstone is refused
/// and writes nothing (every rival's read-back ignores a released lease's
/// rows, so a row under a released id would be invisible to them).
#[test]
fn a_renewal_over_its_own_tombstone_is_refused() {
    let mut log = LeaseLog::new(&tables(), 1_000);
    let lease = acquire(&mut log, "a", None, 1).expect("acquire");
    release(&mut log, Design::Shipped, lease.clone()).expect("released");
    let rows_before = log.rows.len();
    let mut m = LeaseClaim::renew(tables(), cfg(), lease);
    let outcome = drive(&mut m, |s| log.respond(s).expect("lease"), |_| 0, 10).outcome;
    assert!(
        matches!(outcome, Err(LeaseError::NotHeld { .. })),
        "{outcome:?}"
    );
    assert_eq!(log.rows.len(), rows_before, "no claim under a released id");
}
