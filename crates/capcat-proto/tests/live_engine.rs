//! Live tests: the real publication machines, driven against the real
//! ClickHouse engine (libchdb through capcat-chdb). No fake evaluates SQL, so
//! what only a server can decide (the fence over an empty lease table, the
//! barrier, the fence against a successor) is decided here by a server.
//!
//! Needs `CAPCAT_LIBCHDB` (or the engine in the cache dir); skips with a
//! message otherwise, unless `CAPCAT_REQUIRE_ENGINES=1`.

use capcat_chdb::{Engine, Request};
use capcat_proto::config::Config;
use capcat_proto::descriptor::CaptureDescriptor;
use capcat_proto::fragments::meaning::{LeaseRow, lease_head};
use capcat_proto::{
    IndexPass, IndexReport, Input, Lease, LeaseClaim, Machine, Publish, PublishError, Step, Tables,
    lease, publish,
};
use uuid::Uuid;

mod live_support;

use live_support::{count, drive, execute, setup};

/// The one engine of this test process (see `live_support::engine`).
fn engine(test: &str) -> Option<&'static Engine> {
    live_support::engine(test, "capcat-proto-live")
}

fn acquire(engine: &Engine, tables: &Tables, holder: &str, id: u128) -> Lease {
    let mut m = LeaseClaim::acquire(
        tables.clone(),
        Config::default(),
        holder.into(),
        None,
        Uuid::from_u128(id),
    );
    drive(engine, &mut m).expect("acquired")
}

/// Appends `row` to the lease log directly, not through a machine, to set
/// up the log a test needs.
fn insert_lease_row(engine: &Engine, tables: &Tables, row: &LeaseRow) {
    let insert = format!(
        "INSERT INTO {lease} (term, lease_id, holder, acquired_at_ns, expires_at_ns) \
         VALUES ({term}, '{id}', '{holder}', 1, {exp})",
        lease = tables.publisher_lease(),
        term = row.term,
        id = row.lease_id,
        holder = row.holder,
        exp = row.expires_at_ns,
    );
    engine
        .execute(&Request::new(&insert))
        .expect("the row lands");
}

/// Seed bug, server half: the tuple-comparing fence raised `Code: 125` on an
/// empty lease table. The counting fence refuses quietly and writes nothing.
#[test]
fn empty_lease_table_fence_refuses_without_a_server_error() {
    let Some(engine) = engine("empty_fence") else {
        return;
    };
    let t = Tables::new("live_empty").expect("prefix");
    setup(engine, &t);
    let stmt = publish::sql::insert_commit_row(
        &t,
        &Config::default(),
        1,
        Uuid::from_u128(5),
        &Lease {
            lease_id: Uuid::from_u128(1),
            holder: "nobody".to_owned(),
            term: 1,
            expires_at_ns: u64::MAX >> 2,
            unsettled_until_ns: 0,
        },
        1,
    );
    let input = execute(engine, &stmt);
    assert!(
        matches!(input, Input::Rows(_)),
        "the fenced INSERT ran: {input:?}"
    );
    assert_eq!(
        count(engine, "SELECT count() FROM live_empty_index_watermark"),
        0
    );
}

#[test]
fn an_index_pass_publishes_on_the_real_engine_and_a_rerun_writes_nothing() {
    let Some(engine) = engine("index_pass") else {
        return;
    };
    let t = Tables::new("live_index").expect("prefix");
    setup(engine, &t);
    let lease = acquire(engine, &t, "indexer", 1);
    let descriptors: Vec<CaptureDescriptor> = (0..4u128)
        .map(|i| {
            let mut d = CaptureDescriptor {
                tenant_id: "tenant".into(),
                capture_id: Uuid::from_u128(100 + i),
                shape: vec![2, 2],
                ..CaptureDescriptor::default()
            };
            d.locator.store_id = "store".into();
            d.locator.pack_id = Uuid::from_u128(1_000 + i % 2);
            d
        })
        .collect();
    let mut pass = IndexPass::new(
        t.clone(),
        Config::default(),
        lease.clone(),
        descriptors.clone(),
        Uuid::from_u128(0xabc),
    );
    let report = drive(engine, &mut pass).expect("indexed");
    let IndexReport::Indexed { version, packs, .. } = report else {
        panic!("{report:?}")
    };
    assert_eq!((version, packs.len()), (1, 2));
    let paired = count(
        engine,
        "SELECT count() FROM live_index_snapshot_manifest m INNER JOIN live_index_index_watermark w \
         ON m.index_version = w.index_version AND m.publish_id = w.publish_id",
    );
    assert_eq!(paired, 2, "both packs admitted by a paired commit row");
    assert_eq!(
        count(
            engine,
            "SELECT count() FROM live_index_capture_raw WHERE index_version = 1"
        ),
        4
    );
    let mut again = IndexPass::new(
        t.clone(),
        Config::default(),
        pass.lease().clone(),
        descriptors,
        Uuid::from_u128(0xdef),
    );
    assert!(matches!(
        drive(engine, &mut again),
        Ok(IndexReport::NothingToDo { .. })
    ));
    assert_eq!(
        count(engine, "SELECT count() FROM live_index_version_claims"),
        1,
        "no claim on a no-op pass"
    );
}

/// `FencedOutWritesNothing` on a server: a successor's lease lands between
/// the publisher's renewal and its guarded INSERTs.
#[test]
fn a_successor_between_renewal_and_the_inserts_fences_the_publisher_out() {
    let Some(engine) = engine("takeover") else {
        return;
    };
    let t = Tables::new("live_takeover").expect("prefix");
    setup(engine, &t);
    let lease = acquire(engine, &t, "stalled", 1);
    let packs = [("store".to_owned(), Uuid::from_u128(7))]
        .into_iter()
        .collect();
    let mut m = Publish::new(
        t.clone(),
        Config::default(),
        lease.clone(),
        1,
        packs,
        Uuid::from_u128(50),
    );
    loop {
        match m.poll() {
            Step::Execute(stmt) if stmt.name.starts_with("lease.") => {
                let input = execute(engine, &stmt);
                m.handle(input);
            }
            Step::Draw { .. } => m.handle(Input::Drawn(0)),
            Step::Execute(_) => break,
            Step::Done(o) => panic!("renewal failed: {o:?}"),
        }
    }
    // A successor's live claim above the renewed term.
    let successor = lease::sql::insert_claim(
        &t,
        m.lease().term + 5,
        Uuid::from_u128(2),
        "successor",
        30_000_000_000,
    );
    assert!(matches!(execute(engine, &successor), Input::Rows(_)));
    let outcome = drive(engine, &mut m);
    assert!(
        matches!(outcome, Err(PublishError::LeaseLost { head: Some(ref h), .. }) if h.holder == "successor"),
        "{outcome:?}"
    );
    assert_eq!(
        count(
            engine,
            "SELECT count() FROM live_takeover_snapshot_manifest"
        ),
        0,
        "no inert row either"
    );
    assert_eq!(
        count(engine, "SELECT count() FROM live_takeover_index_watermark"),
        0
    );
}

/// The late release tombstone, decided by a server: a dead tombstone heads
/// the term a live holder claimed (a release computes its term when it is
/// evaluated, so it can land at a term already taken). `lease.read_head`'s
/// `term_live` is computed by the engine over every row at the head term, so
/// the acquire is refused until the holder's row expires.
#[test]
fn a_dead_tombstone_over_a_live_claim_leaves_the_term_held_on_the_real_engine() {
    let Some(engine) = engine("late_tombstone") else {
        return;
    };
    let t = Tables::new("live_tomb").expect("prefix");
    setup(engine, &t);
    let holder = acquire(engine, &t, "new", 2);
    // Low 64 bits all ones: the tombstone sorts above the holder's row in
    // ClickHouse's UUID collation, so it is the head row.
    let tombstone = Uuid::from_u128(u128::from(u64::MAX));
    insert_lease_row(
        engine,
        &t,
        &LeaseRow {
            term: holder.term,
            lease_id: tombstone,
            holder: "stale".to_owned(),
            expires_at_ns: 0,
        },
    );
    let mut m = LeaseClaim::acquire(
        t.clone(),
        Config::default(),
        "c".into(),
        None,
        Uuid::from_u128(3),
    );
    let outcome = drive(engine, &mut m);
    assert_eq!(
        outcome,
        Err(capcat_proto::LeaseError::Held {
            holder: "stale".into(),
            lease_id: tombstone,
            term: holder.term,
            expires_at_ns: holder.expires_at_ns,
        }),
        "the head row is dead but the term has a live row"
    );
}

/// The fakes and the model take the lease head from `meaning::lease_head`,
/// which orders UUIDs as ClickHouse does (low 64 bits first, then high).
/// Held against the engine's own `ORDER BY` of `lease.read_head`, for ids
/// whose byte order disagrees with the engine's, ids whose low halves tie
/// (the high halves decide), and one id twice (the expiry decides).
#[test]
fn the_lease_head_the_fakes_compute_is_the_one_the_engine_reads() {
    let Some(engine) = engine("lease_order") else {
        return;
    };
    let id = |high: u64, low: u64| Uuid::from_u128(u128::from(high) << 64 | u128::from(low));
    let row = |lease_id: Uuid, expires_at_ns: u64| LeaseRow {
        term: 7,
        lease_id,
        expires_at_ns,
        holder: lease_id.to_string(),
    };
    let cases = [
        [row(id(u64::MAX, 1), 9), row(id(1, u64::MAX), 9)],
        [row(id(1, 5), 9), row(id(2, 5), 9)],
        [row(id(2, 5), 9), row(id(1, 5), 9)],
        [row(id(3, 3), 8), row(id(3, 3), 9)],
    ];
    for (n, rows) in cases.iter().enumerate() {
        let t = Tables::new(&format!("live_order{n}")).expect("prefix");
        setup(engine, &t);
        for r in rows {
            insert_lease_row(engine, &t, r);
        }
        let expected = lease_head(rows).expect("rows");
        let Input::Rows(read) = execute(engine, &lease::sql::read_head(&t)) else {
            panic!("case {n}: the head read failed")
        };
        let head = read.0.first().expect("a head row");
        assert_eq!(
            (&head[1], &head[3]),
            (
                &capcat_proto::Value::Uuid(expected.lease_id),
                &capcat_proto::Value::UInt64(expected.expires_at_ns)
            ),
            "case {n}: {rows:?}"
        );
    }
}
