//! Transition tests of the index pass, and the seed's indexer bugs as named
//! tests.

mod common;

use std::collections::BTreeSet;
use std::error::Error as _;

use capcat_proto::config::Config;
use capcat_proto::descriptor::Locator;
use capcat_proto::designs::Design;
use capcat_proto::index::{attempt_ids, sql::commit_packs};
use capcat_proto::{
    CaptureDescriptor, IndexError, IndexPass, IndexReport, InsertData, Lease, LeaseClaim, Param,
    Tables, Value,
};
use capcat_proto::{Input, Machine, Step};
use common::{FakeCatalog, drive, id};

const TTL: u64 = 30_000_000_000;

fn tables() -> Tables {
    Tables::new("t").expect("valid prefix")
}

fn desc(pack: u128, capture: u128) -> CaptureDescriptor {
    CaptureDescriptor {
        tenant_id: "tenant".into(),
        experiment_id: "exp".into(),
        run_id: "run".into(),
        captured_at_ns: 10 + capture as u64,
        capture_id: id(capture),
        locator: Locator {
            store_id: "s3".into(),
            pack_id: id(1_000_000 + pack),
            payload_offset: 64,
            payload_length: 128,
            payload_sha256: "ab".repeat(32),
        },
        index_version: 0,
        tensor_name: "layer.0".into(),
        dtype: "f32".into(),
        shape: vec![4, 8],
        ..CaptureDescriptor::default()
    }
}

fn batch(packs: u128, per_pack: u128) -> Vec<CaptureDescriptor> {
    (0..packs)
        .flat_map(|p| (0..per_pack).map(move |c| desc(p, p * 10_000 + c)))
        .collect()
}

fn catalog_with_lease() -> (FakeCatalog, Lease) {
    let mut cat = FakeCatalog::new(&tables(), 1_000);
    let mut m = LeaseClaim::acquire(tables(), Config::default(), "a".into(), None, id(1));
    let lease = drive(&mut m, |s| cat.respond(s), |_| 0, 100)
        .outcome
        .expect("acquired");
    (cat, lease)
}

const SEED: uuid::Uuid = uuid::Uuid::from_u128(0xfeed_0000_0000_0000_0000_0000_0000_0000);

#[test]
fn an_index_pass_writes_descriptors_then_publishes_then_records_the_inventory() {
    let (mut cat, lease) = catalog_with_lease();
    let mut m = IndexPass::new(tables(), Config::default(), lease, batch(2, 3), SEED);
    let run = drive(&mut m, |s| cat.respond(s), |_| 0, 1_000);
    let (claim_id, publish_id) = attempt_ids(SEED, 0);
    assert_ne!(claim_id, publish_id, "a publish id is never a claim id");
    let IndexReport::Indexed {
        version,
        publish_id: won,
        packs,
        descriptors,
        attempts,
        ..
    } = run.outcome.clone().expect("indexed")
    else {
        panic!("expected Indexed")
    };
    assert_eq!((version, won, descriptors, attempts), (1, publish_id, 6, 1));
    assert_eq!(packs.len(), 2);
    assert_eq!(
        run.names(),
        [
            "index.read_committed",
            "allocate.read_head",
            "allocate.insert_claim",
            "allocate.read_claims",
            "index.insert_descriptors",
            "lease.read_head",
            "lease.insert_claim",
            "lease.read_claims",
            "publish.insert_manifest",
            "publish.insert_commit_row",
            "publish.read_publish_ids",
            "index.insert_inventory",
        ]
    );
    assert!(cat.descriptors.iter().all(|d| d.index_version == 1));
    assert!(cat.inventory.iter().all(|i| i.2 == 1 && i.3 == publish_id));
    assert_eq!(cat.visible_packs(), packs);
    assert!(m.lease().term > 1, "the pass hands back the renewed lease");
}

/// Seed bug: a batch whose packs were all already committed still allocated
/// and published, so overlapping indexer and reconciler runs were not benign.
#[test]
fn no_op_batch_writes_nothing() {
    let (mut cat, lease) = catalog_with_lease();
    let first = drive(
        &mut IndexPass::new(
            tables(),
            Config::default(),
            lease.clone(),
            batch(2, 2),
            SEED,
        ),
        |s| cat.respond(s),
        |_| 0,
        1_000,
    );
    assert!(matches!(first.outcome, Ok(IndexReport::Indexed { .. })));
    let before = (
        cat.claims.len(),
        cat.watermark.len(),
        cat.manifest.len(),
        cat.inventory.len(),
        cat.descriptors.len(),
    );
    let again = drive(
        &mut IndexPass::new(
            tables(),
            Config::default(),
            lease,
            batch(2, 2),
            uuid::Uuid::from_u128(9),
        ),
        |s| cat.respond(s),
        |_| 0,
        1_000,
    );
    assert_eq!(again.names(), ["index.read_committed"], "reads only");
    assert!(
        matches!(again.outcome, Ok(IndexReport::NothingToDo { ref skipped }) if skipped.len() == 2)
    );
    let after = (
        cat.claims.len(),
        cat.watermark.len(),
        cat.manifest.len(),
        cat.inventory.len(),
        cat.descriptors.len(),
    );
    assert_eq!(before, after);
}

/// Two rows with one sorting key in one INSERT would be stored as two until
/// a merge (the INSERT is sent with `optimize_on_insert = 0`), and a reader
/// would resolve to either: the batch is refused before any statement.
#[test]
fn a_batch_describing_a_capture_of_a_pack_twice_is_refused_before_any_statement() {
    let (_, lease) = catalog_with_lease();
    let mut rows = batch(2, 3);
    let mut again = rows[4].clone();
    again.locator.payload_offset += 1_000;
    rows.insert(1, again.clone());
    let run = drive(
        &mut IndexPass::new(tables(), Config::default(), lease.clone(), rows, SEED),
        |_| panic!("no statement for a malformed batch"),
        |_| 0,
        10,
    );
    assert_eq!(
        run.outcome,
        Err(IndexError::DuplicateDescriptor {
            capture_id: again.capture_id,
            store_id: again.locator.store_id.clone(),
            pack_id: again.locator.pack_id,
        })
    );
    // The same capture in another pack (a mirror, a re-capture) is a
    // different row of the tables, and not refused.
    let mut rows = batch(2, 3);
    let mut mirrored = rows[4].clone();
    mirrored.locator.pack_id = id(1_000_009);
    rows.push(mirrored);
    let mut pass = IndexPass::new(tables(), Config::default(), lease, rows, SEED);
    assert!(matches!(
        capcat_proto::Machine::poll(&mut pass),
        capcat_proto::Step::Execute(_)
    ));
}

#[test]
fn an_empty_batch_issues_nothing() {
    let lease = Lease {
        lease_id: id(1),
        holder: "a".into(),
        term: 1,
        expires_at_ns: 1,
        unsettled_until_ns: 0,
    };
    let run = drive(
        &mut IndexPass::new(tables(), Config::default(), lease, Vec::new(), SEED),
        |_| panic!("no statement"),
        |_| 0,
        10,
    );
    assert_eq!(
        run.outcome,
        Ok(IndexReport::NothingToDo {
            skipped: BTreeSet::new()
        })
    );
}

#[test]
fn a_partly_committed_batch_publishes_only_the_new_packs() {
    let (mut cat, lease) = catalog_with_lease();
    drive(
        &mut IndexPass::new(
            tables(),
            Config::default(),
            lease.clone(),
            batch(1, 2),
            SEED,
        ),
        |s| cat.respond(s),
        |_| 0,
        1_000,
    );
    let run = drive(
        &mut IndexPass::new(
            tables(),
            Config::default(),
            lease,
            batch(3, 2),
            uuid::Uuid::from_u128(9),
        ),
        |s| cat.respond(s),
        |_| 0,
        1_000,
    );
    match run.outcome {
        Ok(IndexReport::Indexed {
            packs,
            skipped,
            descriptors,
            ..
        }) => {
            assert_eq!((packs.len(), skipped.len(), descriptors), (2, 1, 4));
            let pack = |p: u128| ("s3".to_owned(), id(1_000_000 + p));
            assert_eq!(
                skipped,
                BTreeSet::from([pack(0)]),
                "the pack committed before"
            );
            assert_eq!(packs, BTreeSet::from([pack(1), pack(2)]));
        }
        other => panic!("{other:?}"),
    }
    // The second pass wrote the rows of the two new packs only, each
    // stamped with the version it allocated (2), not the version the
    // caller's descriptors carried (0).
    let written: Vec<(u64, uuid::Uuid)> = cat.descriptors[2..]
        .iter()
        .map(|d| (d.index_version, d.locator.pack_id))
        .collect();
    assert_eq!(
        written,
        [
            (2, id(1_000_001)),
            (2, id(1_000_001)),
            (2, id(1_000_002)),
            (2, id(1_000_002))
        ]
    );
}

/// Answers `s` from `cat`, except that before the first manifest insert
/// (`raced` still false) another publisher publishes at its version.
fn lose_the_first_publish(
    cat: &mut FakeCatalog,
    raced: &mut bool,
    s: &capcat_proto::Statement,
) -> Input {
    if s.name == "publish.insert_manifest" && !*raced {
        *raced = true;
        let v = common::u64_param(s, "index_version");
        cat.watermark.push((v, id(777)));
    }
    cat.respond(s)
}

/// Seed bug: descriptors kept the version they were first written with, so
/// after a lost race argMax supersession could prefer an earlier publish.
#[test]
fn a_lost_race_reallocates_and_rewrites_descriptors_at_the_new_version() {
    let (mut cat, lease) = catalog_with_lease();
    let mut raced = false;
    let run = drive(
        &mut IndexPass::new(tables(), Config::default(), lease, batch(1, 2), SEED),
        |s| lose_the_first_publish(&mut cat, &mut raced, s),
        |_| 0,
        1_000,
    );
    let Ok(IndexReport::Indexed {
        version,
        attempts,
        publish_id,
        ..
    }) = run.outcome
    else {
        panic!("{:?}", run.outcome)
    };
    assert_eq!((version, attempts), (2, 2));
    assert_eq!(
        publish_id,
        attempt_ids(SEED, 1).1,
        "a fresh publish id per attempt"
    );
    let versions: Vec<u64> = cat.descriptors.iter().map(|d| d.index_version).collect();
    assert_eq!(
        versions,
        [1, 1, 2, 2],
        "rewritten at the re-allocated version"
    );
    assert_eq!(run.named("allocate.insert_claim").len(), 2);
}

fn always_losing(cat: &mut FakeCatalog, s: &capcat_proto::Statement) -> capcat_proto::Input {
    match s.name {
        // Someone is always one version ahead at publish time.
        "publish.insert_manifest" | "publish.insert_commit_row" => {
            let v = common::u64_param(s, "index_version");
            if !cat.watermark.iter().any(|w| w.0 == v) {
                cat.watermark.push((v, id(777)));
            }
            cat.respond(s)
        }
        _ => cat.respond(s),
    }
}

/// Seed bug: retry exhaustion raised a bare RuntimeError outside the error
/// taxonomy and lost the race that caused it.
#[test]
fn exhausted_chains_the_last_race() {
    let (mut cat, lease) = catalog_with_lease();
    let cfg = Config::default().with_attempts(8, 8, 3).expect("valid");
    let run = drive(
        &mut IndexPass::new(tables(), cfg, lease, batch(1, 1), SEED),
        |s| always_losing(&mut cat, s),
        |_| 0,
        1_000,
    );
    let err = run.outcome.clone().expect_err("exhausted");
    let IndexError::Exhausted { attempts, ref last } = err else {
        panic!("{err:?}")
    };
    assert_eq!(attempts, 3);
    assert_eq!(last.version, 3, "the LAST race, not the first");
    assert_eq!(last.publish_id, attempt_ids(SEED, 2).1);
    let source = err.source().expect("chained").to_string();
    assert!(source.contains("lost the race for version 3"), "{source}");
    assert!(cat.inventory.is_empty());
    assert_eq!(run.named("publish.read_publish_ids").len(), 3, "bounded");
}

#[test]
fn conflict_records_the_inventory_before_it_surfaces() {
    let (mut cat, lease) = catalog_with_lease();
    let run = drive(
        &mut IndexPass::new(tables(), Config::default(), lease, batch(2, 1), SEED),
        |s| match s.name {
            "publish.read_publish_ids" => {
                let mine = common::uuid_row(attempt_ids(SEED, 0).1);
                common::rows(vec![mine, common::uuid_row(id(777))])
            }
            _ => cat.respond(s),
        },
        |_| 0,
        1_000,
    );
    assert!(
        matches!(run.outcome, Err(IndexError::Conflict { foreign, ref packs, .. }) if foreign == id(777) && packs.len() == 2),
        "{:?}",
        run.outcome
    );
    assert_eq!(run.names().last(), Some(&"index.insert_inventory"));
    assert_eq!(
        cat.inventory.len(),
        2,
        "visible packs are recorded, never republished"
    );
}

/// Seed mutation: the indexer swallowed a lost lease the way it swallows a
/// lost version race, burning every attempt and burying the holder's name.
#[test]
fn lease_lost_is_never_swallowed() {
    let (mut cat, lease) = catalog_with_lease();
    cat.lease.now_ns += TTL + 1;
    let mut b = LeaseClaim::acquire(tables(), Config::default(), "b".into(), None, id(2));
    drive(&mut b, |s| cat.respond(s), |_| 0, 100)
        .outcome
        .expect("takeover");
    let run = drive(
        &mut IndexPass::new(tables(), Config::default(), lease, batch(1, 1), SEED),
        |s| cat.respond(s),
        |_| 0,
        1_000,
    );
    assert!(
        matches!(run.outcome, Err(IndexError::LeaseLost { head: Some(ref h), .. }) if h.holder == "b"),
        "{:?}",
        run.outcome
    );
    assert_eq!(
        run.named("allocate.insert_claim").len(),
        1,
        "one attempt, no retry"
    );
    assert!(cat.inventory.is_empty() && cat.watermark.is_empty());
}

#[test]
fn a_failed_commit_row_leaves_the_packs_out_of_the_inventory() {
    let (mut cat, lease) = catalog_with_lease();
    cat.fail_next.push("publish.insert_commit_row");
    let run = drive(
        &mut IndexPass::new(tables(), Config::default(), lease, batch(1, 1), SEED),
        |s| cat.respond(s),
        |_| 0,
        1_000,
    );
    assert!(
        matches!(run.outcome, Err(IndexError::Publish(_))),
        "{:?}",
        run.outcome
    );
    assert!(cat.inventory.is_empty());
}

/// `InventoryOnlyAfterPublish`: the rejected order records packs that no
/// snapshot holds when the publish then fails.
#[test]
fn inventory_before_publish_variant_records_invisible_packs() {
    for (design, recorded) in [
        (Design::Shipped, false),
        (Design::InventoryBeforePublish, true),
    ] {
        let (mut cat, lease) = catalog_with_lease();
        cat.fail_next.push("publish.insert_commit_row");
        drive(
            &mut design.wrap(
                tables(),
                Config::default(),
                IndexPass::new(tables(), Config::default(), lease, batch(1, 1), SEED),
            ),
            |s| cat.respond(s),
            |_| 0,
            1_000,
        );
        assert_eq!(!cat.inventory.is_empty(), recorded, "{design}");
        assert!(cat.visible_packs().is_empty());
    }
}

/// Seed bug: manifest members and identity lists went in one statement and
/// overran `max_query_size` on large batches. Parameters go in chunks of
/// 1,000 tuples; descriptor rows are the INSERT's data, not a parameter, and
/// go in one statement up to the rows-per-insert bound.
#[test]
fn chunking_at_1000_for_identities_manifest_inventory_and_one_descriptor_insert() {
    let (mut cat, lease) = catalog_with_lease();
    let mut descriptors = batch(1_500, 1);
    descriptors.extend((0..1_000).map(|c| desc(0, 50_000 + c)));
    let run = drive(
        &mut IndexPass::new(tables(), Config::default(), lease, descriptors, SEED),
        |s| cat.respond(s),
        |_| 0,
        10_000,
    );
    assert!(
        matches!(
            run.outcome,
            Ok(IndexReport::Indexed {
                descriptors: 2_500,
                ..
            })
        ),
        "{:?}",
        run.outcome
    );
    let sizes = |name: &str| -> Vec<usize> {
        run.named(name)
            .iter()
            .map(|s| match (s.params.get("packs"), &s.data) {
                (Some(Param::StorePacks(p)), _) => p.len(),
                (_, Some(InsertData::Descriptors(d))) => d.len(),
                _ => 0,
            })
            .collect()
    };
    assert_eq!(sizes("index.read_committed"), [1_000, 500]);
    assert_eq!(sizes("index.insert_descriptors"), [2_500]);
    assert_eq!(sizes("publish.insert_manifest"), [1_000, 500]);
    assert_eq!(sizes("index.insert_inventory"), [1_000, 500]);
}

/// Descriptor INSERTs are bounded by rows and by the bytes of their data
/// (each chunk is built in memory before it is sent). 1,000 rows and a
/// bound of 300 rows per INSERT give four INSERTs; 160 rows with 512 KiB
/// tensor names (over 80 MiB of data) go in chunks of at most
/// `MAX_INSERT_DATA_BYTES`. Every row once, in order, in both.
#[test]
fn descriptor_inserts_are_bounded_by_data_bytes_as_well_as_rows() {
    use capcat_proto::descriptor::MAX_INSERT_DATA_BYTES;
    let by_rows = batch(10, 100);
    let wide: Vec<CaptureDescriptor> = batch(4, 40)
        .into_iter()
        .map(|d| CaptureDescriptor {
            tensor_name: format!("{}.{}", "w".repeat(512 << 10), d.capture_id),
            ..d
        })
        .collect();
    let total: usize = wide.iter().map(CaptureDescriptor::row_binary_len).sum();
    assert!(total > 2 * MAX_INSERT_DATA_BYTES, "{total}");
    let small_inserts = Config::default()
        .with_insert_rows(300)
        .expect("300 rows is in range");
    for (descriptors, cfg, at_least, max_rows) in [
        (by_rows, small_inserts, 4, 300),
        (wide, Config::default(), 3, usize::MAX),
    ] {
        let (mut cat, lease) = catalog_with_lease();
        let n = descriptors.len();
        let run = drive(
            &mut IndexPass::new(tables(), cfg, lease, descriptors.clone(), SEED),
            |s| cat.respond(s),
            |_| 0,
            10_000,
        );
        assert!(
            matches!(run.outcome, Ok(IndexReport::Indexed { descriptors, .. }) if descriptors == n),
            "{:?}",
            run.outcome
        );
        let inserts = run.named("index.insert_descriptors");
        assert!(
            inserts.len() >= at_least,
            "{} descriptor INSERTs",
            inserts.len()
        );
        let mut sent = Vec::new();
        for stmt in &inserts {
            let Some(InsertData::Descriptors(rows)) = &stmt.data else {
                panic!("no descriptor rows as data: {stmt:?}");
            };
            let bytes: usize = rows.iter().map(CaptureDescriptor::row_binary_len).sum();
            assert!(
                rows.len() <= max_rows && (bytes <= MAX_INSERT_DATA_BYTES || rows.len() == 1),
                "{} rows, {bytes} bytes",
                rows.len()
            );
            sent.extend(rows.iter().map(|d| d.capture_id));
        }
        let want: Vec<_> = descriptors.iter().map(|d| d.capture_id).collect();
        assert_eq!(sent, want);
    }
}

/// Seed mutation: `commit_packs(index_version=0)` was accepted and marked
/// packs committed that no snapshot holds.
#[test]
fn commit_at_version_0_refused() {
    let packs = vec![("s3".to_owned(), id(5))];
    assert_eq!(
        commit_packs(&tables(), 0, id(9), packs.clone()),
        Err(IndexError::CommitAtVersionZero)
    );
    let stmt = commit_packs(&tables(), 4, id(9), packs).expect("version 4 is fine");
    assert_eq!(common::u64_param(&stmt, "index_version"), 4);
}

#[test]
fn the_committed_read_decodes_rows_strictly() {
    let lease = Lease {
        lease_id: id(1),
        holder: "a".into(),
        term: 1,
        expires_at_ns: 1,
        unsettled_until_ns: 0,
    };
    let run = drive(
        &mut IndexPass::new(tables(), Config::default(), lease, batch(1, 1), SEED),
        |_| common::rows(vec![vec![Value::UInt64(1)]]),
        |_| 0,
        10,
    );
    assert!(matches!(
        run.outcome,
        Err(IndexError::Malformed {
            statement: "index.read_committed",
            ..
        })
    ));
}

/// The statement counts docs/benchmarks.md reports: an uncontended publish,
/// and an index pass of 16 packs / 4,096 descriptor rows.
#[test]
fn statement_counts_of_an_uncontended_publish_and_a_16_pack_pass() {
    let (mut cat, lease) = catalog_with_lease();
    let run = drive(
        &mut IndexPass::new(tables(), Config::default(), lease, batch(16, 256), SEED),
        |s| cat.respond(s),
        |_| 0,
        1_000,
    );
    assert!(matches!(
        run.outcome,
        Ok(IndexReport::Indexed {
            descriptors: 4_096,
            ..
        })
    ));
    let publish = run
        .names()
        .iter()
        .filter(|n| n.starts_with("lease.") || n.starts_with("publish."))
        .count();
    println!(
        "uncontended publish: {publish} statements; 16-pack / 4096-row index pass: {} statements",
        run.statements.len()
    );
    assert_eq!(publish, 6);
    // Committed read, allocation (3), ONE descriptor insert (the rows are
    // its data), publish (6), inventory.
    assert_eq!(run.named("index.insert_descriptors").len(), 1);
    assert_eq!(run.statements.len(), 1 + 3 + 1 + 6 + 1);
}

/// Every id a pass derives from its seed is its own: no two attempts share
/// a claim id or a publish id, no claim id is ever a publish id, and none
/// is the seed. A collision would let one attempt's read-back count
/// another attempt's row as its own. Held for a seed with every low bit
/// set, one with none, and the tests' seed.
#[test]
fn the_ids_of_every_attempt_are_distinct_from_each_other_and_from_the_seed() {
    for seed in [SEED, uuid::Uuid::nil(), uuid::Uuid::max()] {
        let mut seen = BTreeSet::from([seed]);
        for attempt in 0..512 {
            let (claim_id, publish_id) = attempt_ids(seed, attempt);
            assert!(seen.insert(claim_id), "{seed}: claim id of {attempt}");
            assert!(seen.insert(publish_id), "{seed}: publish id of {attempt}");
        }
    }
}

/// What a pass says about itself while it runs, statement by statement:
/// the attempt, the packs it has still to record, the publish it runs and
/// the publish whose packs it is recording. Here the first attempt loses
/// its version to another publisher and the second wins.
#[test]
fn a_pass_reports_its_attempt_batch_and_publish_at_every_statement() {
    let (mut cat, lease) = catalog_with_lease();
    let mut m = IndexPass::new(tables(), Config::default(), lease, batch(2, 1), SEED);
    let mut raced = false;
    let mut seen = Vec::new();
    for _ in 0..1_000 {
        match m.poll() {
            Step::Execute(s) => {
                seen.push((
                    s.name,
                    m.attempts(),
                    m.pending().len(),
                    m.publishing().map(capcat_proto::Publish::version),
                    m.recording(),
                ));
                m.handle(lose_the_first_publish(&mut cat, &mut raced, &s));
            }
            Step::Draw { .. } => m.handle(Input::Drawn(0)),
            Step::Done(outcome) => {
                assert!(outcome.is_ok(), "{outcome:?}");
                break;
            }
        }
    }
    let (_, winner) = attempt_ids(SEED, 1);
    assert_eq!(
        seen.first(),
        Some(&("index.read_committed", 1, 0, None, None)),
        "{seen:#?}"
    );
    assert!(
        seen.contains(&("publish.insert_manifest", 1, 2, Some(1), None)),
        "{seen:#?}"
    );
    assert!(
        seen.contains(&("publish.insert_manifest", 2, 2, Some(2), None)),
        "{seen:#?}"
    );
    assert_eq!(
        seen.last(),
        Some(&("index.insert_inventory", 2, 2, None, Some(winner))),
        "{seen:#?}"
    );
}
