//! Transition tests of Publish(V, packs) for every outcome, and the seed's
//! publish bugs as named tests.

mod common;

use std::collections::BTreeSet;

use capcat_proto::config::{Config, ConfigError};
use capcat_proto::designs::Design;
use capcat_proto::fragments::{lease_fence, manifest_complete, version_barrier};
use capcat_proto::{
    Failure, Input, Lease, LeaseClaim, Machine, PackRef, Publish, PublishError, PublishOutcome,
    Step, Tables,
};
use common::{FakeCatalog, drive, id};
use uuid::Uuid;

const TTL: u64 = 30_000_000_000;

fn tables() -> Tables {
    Tables::new("t").expect("valid prefix")
}

fn packs(n: u128) -> BTreeSet<PackRef> {
    (0..n).map(|i| ("s3".to_owned(), id(1_000 + i))).collect()
}

/// A catalog in which `holder` holds a fresh lease.
fn catalog_with_lease(lease_id: u128) -> (FakeCatalog, Lease) {
    let mut cat = FakeCatalog::new(&tables(), 1_000);
    let mut m = LeaseClaim::acquire(tables(), Config::default(), "a".into(), None, id(lease_id));
    let lease = drive(&mut m, |s| cat.respond(s), |_| 0, 100)
        .outcome
        .expect("acquired");
    (cat, lease)
}

fn publish(
    cat: &mut FakeCatalog,
    cfg: Config,
    lease: Lease,
    version: u64,
    publish_id: Uuid,
) -> common::Run<Result<PublishOutcome, PublishError>> {
    let mut m = Publish::new(tables(), cfg, lease, version, packs(2), publish_id);
    drive(&mut m, |s| cat.respond(s), |_| 0, 100)
}

#[test]
fn a_publish_names_its_version_attempt_and_lease() {
    let (_, lease) = catalog_with_lease(1);
    let m = Publish::new(
        tables(),
        Config::default(),
        lease.clone(),
        7,
        packs(2),
        id(50),
    );
    assert_eq!((m.version(), m.publish_id()), (7, id(50)));
    assert_eq!(m.lease(), &lease);
}

#[test]
fn an_uncontested_publish_wins_in_six_statements() {
    let (mut cat, lease) = catalog_with_lease(1);
    let run = publish(&mut cat, Config::default(), lease, 1, id(50));
    assert_eq!(
        run.outcome,
        Ok(PublishOutcome::Won {
            version: 1,
            publish_id: id(50)
        })
    );
    assert_eq!(
        run.names(),
        [
            "lease.read_head",
            "lease.insert_claim",
            "lease.read_claims",
            "publish.insert_manifest",
            "publish.insert_commit_row",
            "publish.read_publish_ids"
        ]
    );
    assert_eq!(cat.visible_packs(), packs(2));
}

#[test]
fn both_publish_inserts_carry_barrier_and_fence_verbatim_with_the_timeout_cap() {
    let (mut cat, lease) = catalog_with_lease(1);
    let run = publish(&mut cat, Config::default(), lease, 1, id(50));
    let guard = format!(
        "WHERE {} AND {}",
        version_barrier(&tables()),
        lease_fence(&tables())
    );
    let commit_row_guard = format!("{guard} AND {}", manifest_complete(&tables()));
    for (name, ending) in [
        ("publish.insert_manifest", &guard),
        ("publish.insert_commit_row", &commit_row_guard),
    ] {
        let stmt = run.named(name)[0];
        assert!(stmt.sql.ends_with(ending.as_str()), "{name}: {}", stmt.sql);
        assert_eq!(
            stmt.params.get("fence_margin_ns"),
            Some(&capcat_proto::Param::UInt64(10_250_000_000)),
            "{name}: the margin is the cap plus the slack"
        );
        assert_eq!(stmt.settings.max_execution_time_s, Some(10), "{name}");
        assert!(stmt.settings.select_sequential_consistency, "{name}");
    }
    assert!(
        run.named("publish.read_publish_ids")[0]
            .settings
            .select_sequential_consistency
    );
}

#[test]
fn a_publish_at_or_below_the_published_head_is_a_lost_race_that_wrote_nothing() {
    let (mut cat, lease) = catalog_with_lease(1);
    cat.watermark.push((5, id(77)));
    let run = publish(&mut cat, Config::default(), lease, 5, id(50));
    match run.outcome {
        Ok(PublishOutcome::LostRace(race)) => {
            assert_eq!((race.version, race.publish_id), (5, id(50)));
            assert_eq!(race.found, BTreeSet::from([id(77)]));
        }
        other => panic!("expected a lost race: {other:?}"),
    }
    assert!(
        cat.manifest.is_empty(),
        "the barrier refused the manifest rows too"
    );
}

/// Seed bug: the read-back asked "does a row for V exist?", so a foreign
/// row alone at V read as success.
#[test]
fn a_foreign_row_alone_at_v_is_a_lost_race_not_a_win() {
    for (design, won) in [(Design::Shipped, false), (Design::CountOnlyReadBack, true)] {
        let (mut cat, lease) = catalog_with_lease(1);
        let cfg = Config::default();
        let publish = Publish::new(tables(), cfg.clone(), lease, 3, packs(1), id(50));
        let mut m = design.wrap(tables(), cfg, publish);
        let run = drive(
            &mut m,
            |s| match s.name {
                "publish.read_publish_ids" => common::rows(vec![common::uuid_row(id(77))]),
                _ => cat.respond(s),
            },
            |_| 0,
            100,
        );
        assert_eq!(
            matches!(run.outcome, Ok(PublishOutcome::Won { .. })),
            won,
            "{design}: {:?}",
            run.outcome
        );
    }
}

/// Seed bug: a foreign row arriving at V AFTER ours failed the check and was
/// reported as a lost race, so the indexer republished a batch that was
/// already visible.
#[test]
fn foreign_row_read_back_after_ours_is_a_conflict_naming_it() {
    let (mut cat, lease) = catalog_with_lease(1);
    let mut m = Publish::new(tables(), Config::default(), lease, 3, packs(1), id(50));
    let run = drive(
        &mut m,
        |s| match s.name {
            "publish.read_publish_ids" => {
                common::rows(vec![common::uuid_row(id(50)), common::uuid_row(id(77))])
            }
            _ => cat.respond(s),
        },
        |_| 0,
        100,
    );
    assert_eq!(
        run.outcome,
        Ok(PublishOutcome::Conflict {
            version: 3,
            publish_id: id(50),
            foreign: id(77),
            all_foreign: BTreeSet::from([id(77)]),
        })
    );
}

fn canned_loss(
    head: Vec<capcat_proto::Value>,
    lease: &Lease,
) -> Result<PublishOutcome, PublishError> {
    let ours = lease.lease_id;
    let mut m = Publish::new(
        tables(),
        Config::default(),
        lease.clone(),
        3,
        packs(1),
        id(50),
    );
    let mut head_reads = 0;
    drive(
        &mut m,
        |s| match s.name {
            "lease.read_head" => {
                head_reads += 1;
                if head_reads == 1 {
                    common::rows(vec![common::head_row(1, ours, "a", 10, true)])
                } else {
                    common::rows(vec![head.clone()])
                }
            }
            "lease.read_claims" => common::rows(vec![common::claim_row(ours, 20)]),
            "publish.read_publish_ids" => common::rows(vec![]),
            _ => common::ok(),
        },
        |_| 0,
        100,
    )
    .outcome
}

#[test]
fn mine_absent_with_a_live_foreign_head_is_lease_lost() {
    let lease = Lease {
        lease_id: id(1),
        holder: "a".into(),
        term: 1,
        expires_at_ns: 10,
        unsettled_until_ns: 0,
    };
    let out = canned_loss(common::head_row(9, id(2), "b", 99, true), &lease);
    assert!(
        matches!(out, Err(PublishError::LeaseLost { head: Some(ref h), .. }) if h.lease_id == id(2)),
        "{out:?}"
    );
}

#[test]
fn mine_absent_with_an_own_but_expired_head_is_a_race() {
    let lease = Lease {
        lease_id: id(1),
        holder: "a".into(),
        term: 1,
        expires_at_ns: 10,
        unsettled_until_ns: 0,
    };
    let out = canned_loss(common::head_row(2, id(1), "a", 20, false), &lease);
    assert!(matches!(out, Ok(PublishOutcome::LostRace(_))), "{out:?}");
}

#[test]
fn mine_absent_with_an_expired_foreign_head_is_a_race() {
    let lease = Lease {
        lease_id: id(1),
        holder: "a".into(),
        term: 1,
        expires_at_ns: 10,
        unsettled_until_ns: 0,
    };
    let out = canned_loss(common::head_row(9, id(2), "b", 20, false), &lease);
    assert!(matches!(out, Ok(PublishOutcome::LostRace(_))), "{out:?}");
}

#[test]
fn a_taken_over_publisher_is_refused_at_renewal_and_issues_nothing_else() {
    let (mut cat, stale) = catalog_with_lease(1);
    cat.lease.now_ns += TTL + 1;
    let mut m = LeaseClaim::acquire(tables(), Config::default(), "b".into(), None, id(2));
    drive(&mut m, |s| cat.respond(s), |_| 0, 100)
        .outcome
        .expect("takeover");
    let run = publish(&mut cat, Config::default(), stale, 1, id(50));
    assert_eq!(run.names(), ["lease.read_head"]);
    assert!(matches!(run.outcome, Err(PublishError::LeaseLost { .. })));
}

/// A takeover wedged between the renewal and the guarded INSERTs: the fence
/// inside each INSERT is the only thing that can stop it.
#[test]
fn a_takeover_after_the_renewal_is_fenced_out_and_writes_nothing() {
    for (design, lands) in [(Design::Shipped, false), (Design::BarrierOnly, true)] {
        let (mut cat, lease) = catalog_with_lease(1);
        let cfg = Config::default();
        let publish = Publish::new(tables(), cfg.clone(), lease, 1, packs(2), id(50));
        let mut m = design.wrap(tables(), cfg, publish);
        // Run the renewal.
        loop {
            match m.poll() {
                Step::Execute(s) if s.name.starts_with("lease.") => {
                    let input = cat.respond(&s);
                    m.handle(input);
                }
                Step::Draw { .. } => m.handle(Input::Drawn(0)),
                Step::Execute(_) => break,
                Step::Done(o) => panic!("renewal failed: {o:?}"),
            }
        }
        // The publisher stalls past its TTL; another takes over.
        cat.lease.now_ns += TTL + 1;
        let mut b = LeaseClaim::acquire(tables(), Config::default(), "b".into(), None, id(2));
        drive(&mut b, |s| cat.respond(s), |_| 0, 100)
            .outcome
            .expect("takeover");
        let run = drive(&mut m, |s| cat.respond(s), |_| 0, 100);
        assert_eq!(!cat.manifest.is_empty(), lands, "{design}: manifest");
        assert_eq!(!cat.watermark.is_empty(), lands, "{design}: commit row");
        if !lands {
            assert!(
                matches!(run.outcome, Err(PublishError::LeaseLost { .. })),
                "{:?}",
                run.outcome
            );
        }
    }
}

/// Seed bug: the fence compared a tuple to a scalar subquery, which raises
/// "Scalar subquery returned empty result" on an empty lease table instead
/// of refusing. The fence counts the head row, so no rows means 0, not an
/// error. (The server-side half of this is a live test in the adapter.)
#[test]
fn empty_lease_table_fence_counts_the_head_row_instead_of_comparing_a_tuple() {
    let fence = lease_fence(&tables());
    assert!(fence.starts_with(
        "(SELECT count() FROM (SELECT term, lease_id, expires_at_ns FROM t_publisher_lease "
    ));
    assert!(fence.ends_with(") = 1"));
    assert!(
        !fence.contains("(lease_id, expires_at_ns >"),
        "no tuple comparison: {fence}"
    );
    assert_eq!(
        fence.matches("FROM t_publisher_lease").count(),
        1,
        "one read of the lease table"
    );
    // And an empty lease table refuses every publisher.
    let mut cat = FakeCatalog::new(&tables(), 1_000);
    let lease = Lease {
        lease_id: id(1),
        holder: "a".into(),
        term: 1,
        expires_at_ns: u64::MAX,
        unsettled_until_ns: 0,
    };
    let run = publish(&mut cat, Config::default(), lease, 1, id(50));
    assert!(
        matches!(run.outcome, Err(PublishError::LeaseLost { head: None, .. })),
        "{:?}",
        run.outcome
    );
    assert!(cat.watermark.is_empty());
}

#[test]
fn publishing_version_zero_or_no_packs_is_refused_before_any_statement() {
    let lease = Lease {
        lease_id: id(1),
        holder: "a".into(),
        term: 1,
        expires_at_ns: 10,
        unsettled_until_ns: 0,
    };
    let mut m = Publish::new(
        tables(),
        Config::default(),
        lease.clone(),
        0,
        packs(1),
        id(50),
    );
    assert_eq!(m.poll(), Step::Done(Err(PublishError::VersionZero)));
    let mut m = Publish::new(
        tables(),
        Config::default(),
        lease,
        4,
        BTreeSet::new(),
        id(50),
    );
    assert_eq!(
        m.poll(),
        Step::Done(Err(PublishError::NoPacks { version: 4 }))
    );
}

#[test]
fn manifest_members_go_in_chunks_of_at_most_1000() {
    let (mut cat, lease) = catalog_with_lease(1);
    let mut m = Publish::new(tables(), Config::default(), lease, 1, packs(2_500), id(50));
    let run = drive(&mut m, |s| cat.respond(s), |_| 0, 100);
    assert!(matches!(run.outcome, Ok(PublishOutcome::Won { .. })));
    let sizes: Vec<usize> = run
        .named("publish.insert_manifest")
        .iter()
        .map(|s| match s.params.get("packs") {
            Some(capcat_proto::Param::StorePacks(p)) => p.len(),
            _ => 0,
        })
        .collect();
    assert_eq!(sizes, [1_000, 1_000, 500]);
    let names = run.names();
    assert_eq!(
        names[names.len() - 2],
        "publish.insert_commit_row",
        "commit row after every chunk"
    );
    assert_eq!(cat.visible_packs().len(), 2_500);
}

#[test]
fn a_failed_manifest_chunk_never_writes_the_commit_row() {
    let (mut cat, lease) = catalog_with_lease(1);
    cat.fail_next.push("publish.insert_manifest");
    let run = publish(&mut cat, Config::default(), lease, 1, id(50));
    assert!(matches!(
        run.outcome,
        Err(PublishError::Statement {
            statement: "publish.insert_manifest",
            failure: Failure::Timeout,
            ..
        })
    ));
    assert!(run.named("publish.insert_commit_row").is_empty());
}

#[test]
fn a_failed_commit_row_insert_is_an_error_not_a_race() {
    let (mut cat, lease) = catalog_with_lease(1);
    cat.fail_next.push("publish.insert_commit_row");
    let run = publish(&mut cat, Config::default(), lease, 1, id(50));
    assert!(matches!(
        run.outcome,
        Err(PublishError::Statement {
            statement: "publish.insert_commit_row",
            ..
        })
    ));
}

#[test]
fn the_renewed_lease_is_handed_back_to_the_caller() {
    let (mut cat, lease) = catalog_with_lease(1);
    let mut m = Publish::new(
        tables(),
        Config::default(),
        lease.clone(),
        1,
        packs(1),
        id(50),
    );
    drive(&mut m, |s| cat.respond(s), |_| 0, 100);
    assert_eq!(m.lease().lease_id, lease.lease_id);
    assert!(m.lease().term > lease.term);
}

/// Seed bug: `max_execution_time` is in whole seconds and truncates, so a
/// fractional publish timeout silently became 0 ("unlimited").
#[test]
fn whole_seconds_timeout_is_required_and_below_the_ttl() {
    assert_eq!(
        Config::new(TTL, 1_500_000_000),
        Err(ConfigError::PublishTimeoutNotWholeSeconds {
            publish_timeout_ns: 1_500_000_000
        })
    );
    assert_eq!(Config::new(TTL, 0), Err(ConfigError::PublishTimeoutZero));
    assert_eq!(
        Config::new(TTL, TTL),
        Err(ConfigError::PublishTimeoutNotBelowTtl {
            publish_timeout_ns: TTL,
            lease_ttl_ns: TTL
        })
    );
    let cfg = Config::new(2_000_000_000, 1_000_000_000).expect("1 s below a 2 s TTL");
    assert_eq!(cfg.publish_timeout_s(), 1);
    assert_eq!(
        Config::default().with_chunk(1_001),
        Err(ConfigError::BadChunk { chunk: 1_001 })
    );
    assert_eq!(
        Config::default().with_attempts(1, 0, 1),
        Err(ConfigError::ZeroAttempts {
            name: "max_allocate_attempts"
        })
    );
}

#[test]
fn the_no_cap_design_drops_max_execution_time() {
    let (mut cat, lease) = catalog_with_lease(1);
    let cfg = Config::default();
    let publish = Publish::new(tables(), cfg.clone(), lease, 1, packs(2), id(50));
    let mut m = Design::NoExecutionCap.wrap(tables(), cfg, publish);
    let run = drive(&mut m, |s| cat.respond(s), |_| 0, 100);
    assert_eq!(
        run.named("publish.insert_commit_row")[0]
            .settings
            .max_execution_time_s,
        None
    );
}

/// Late starts: a commit-row INSERT the client gave up on may start on the
/// server later, so the lease remembers until when it may land (the expiry
/// of the row its fence names) and sends no guarded statement before a
/// renewal stamped after that; once one is, it publishes again.
#[test]
fn an_abandoned_commit_row_puts_the_next_publish_off_until_its_row_has_expired() {
    let (mut cat, lease) = catalog_with_lease(1);
    cat.fail_next.push("publish.insert_commit_row");
    let mut first = Publish::new(tables(), Config::default(), lease, 1, packs(2), id(50));
    let run = drive(&mut first, |s| cat.respond(s), |_| 0, 100);
    assert!(
        matches!(
            run.outcome,
            Err(PublishError::Statement {
                statement: "publish.insert_commit_row",
                ..
            })
        ),
        "{:?}",
        run.outcome
    );
    let abandoned_under = first.lease().clone();
    assert!(abandoned_under.unsettled());
    assert_eq!(
        abandoned_under.unsettled_until_ns, abandoned_under.expires_at_ns,
        "the statement can land no later than the expiry of the row it named"
    );

    // The next attempt renews at once: its claim is stamped before that
    // expiry, so it stops after the renewal, with nothing guarded sent.
    cat.lease.now_ns += 1;
    let mut early = Publish::new(
        tables(),
        Config::default(),
        abandoned_under.clone(),
        2,
        packs(2),
        id(51),
    );
    let run = drive(&mut early, |s| cat.respond(s), |_| 0, 100);
    assert_eq!(
        run.names(),
        ["lease.read_head", "lease.insert_claim", "lease.read_claims"]
    );
    match run.outcome {
        Err(PublishError::Unsettled {
            until_ns, wait_ns, ..
        }) => {
            assert_eq!(until_ns, abandoned_under.expires_at_ns);
            let stamped_at = early.lease().expires_at_ns - TTL;
            assert_eq!(wait_ns, until_ns - stamped_at + 1);
        }
        other => panic!("expected Unsettled, got {other:?}"),
    }
    assert!(
        early.lease().unsettled(),
        "nothing proved the clock has passed it"
    );

    // A renewal stamped after the expiry proves every abandoned statement
    // is dead or landed: the attempt goes on and wins.
    let waited = early.lease().clone();
    cat.lease.now_ns = abandoned_under.expires_at_ns + 1;
    let mut late = Publish::new(tables(), Config::default(), waited, 2, packs(2), id(52));
    let run = drive(&mut late, |s| cat.respond(s), |_| 0, 100);
    assert!(
        matches!(run.outcome, Ok(PublishOutcome::Won { version: 2, .. })),
        "{:?}",
        run.outcome
    );
    assert!(!late.lease().unsettled());
}

/// A failure the server finished with (an exception) leaves nothing that
/// could land later: the lease stays settled.
#[test]
fn a_refused_commit_row_leaves_the_lease_settled() {
    let (mut cat, lease) = catalog_with_lease(1);
    let mut m = Publish::new(tables(), Config::default(), lease, 1, packs(2), id(50));
    let mut answered = false;
    let run = drive(
        &mut m,
        |s| {
            if s.name == "publish.insert_commit_row" && !answered {
                answered = true;
                return Input::Failed(Failure::Server {
                    code: 241,
                    message: "memory limit".into(),
                });
            }
            cat.respond(s)
        },
        |_| 0,
        100,
    );
    assert!(run.outcome.is_err());
    assert!(!m.lease().unsettled());
}

/// A release of an unsettled lease is not sent: its tombstone would let a
/// successor take over at once, before the abandoned statement's row expired.
#[test]
fn an_unsettled_lease_is_left_to_expire_instead_of_released() {
    let (mut cat, lease) = catalog_with_lease(1);
    let mut unsettled = lease.clone();
    unsettled.abandoned_statement();
    let mut release = capcat_proto::Release::new(tables(), Config::default(), unsettled);
    let run = drive(&mut release, |s| cat.respond(s), |_| 0, 100);
    assert!(run.names().is_empty(), "sent {:?}", run.names());
    assert!(
        matches!(run.outcome, Err(capcat_proto::LeaseError::Unsettled { until_ns, .. }) if until_ns == lease.expires_at_ns),
        "{:?}",
        run.outcome
    );
    let mut settled = capcat_proto::Release::new(tables(), Config::default(), lease);
    let run = drive(&mut settled, |s| cat.respond(s), |_| 0, 100);
    assert_eq!(run.names(), ["lease.release"]);
}
