//! Golden SQL: every statement the publication machines emit, pinned.
//! Regenerate deliberately with `UPDATE_EXPECT=1 cargo test -p capcat-proto --test golden_sql`.

use capcat_proto::config::Config;
use capcat_proto::descriptor::CaptureDescriptor;
use capcat_proto::fragments::{lease_fence, version_barrier};
use capcat_proto::index::sql::insert_descriptors;
use capcat_proto::{Expect, Statement, Tables, allocate, index, lease, publish};
use expect_test::{Expect as Snapshot, expect};
use uuid::Uuid;

fn tables() -> Tables {
    Tables::new("cc").expect("valid prefix")
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

/// A lease held by `holder` under id `lease`.
fn held(lease: u128, holder: &str) -> lease::Lease {
    lease::Lease {
        lease_id: id(lease),
        holder: holder.to_owned(),
        term: 4,
        expires_at_ns: 1_000,
        unsettled_until_ns: 0,
    }
}

/// A statement as text: name, SQL, parameter names and types, settings, the
/// expected columns, and, for an INSERT with data, its format and rows.
fn render(stmt: &Statement) -> String {
    let params: Vec<String> = stmt
        .params
        .iter()
        .map(|(k, v)| format!("{k}: {}", v.clickhouse_type()))
        .collect();
    let expect = match &stmt.expect {
        Expect::Nothing => "nothing".to_owned(),
        Expect::Rows(cols) => cols
            .iter()
            .map(|c| format!("{} {:?}", c.name, c.ty))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let data = match &stmt.data {
        None => String::new(),
        Some(data) => format!(
            "data: {} rows in {}\n",
            data.rows(),
            capcat_proto::InsertData::FORMAT
        ),
    };
    format!(
        "{}\n{}\nparams: {}\nsettings: sequential={} max_execution_time_s={:?}\nexpect: {}\n{data}",
        stmt.name,
        stmt.sql,
        params.join(", "),
        stmt.settings.select_sequential_consistency,
        stmt.settings.max_execution_time_s,
        expect
    )
}

fn check(stmt: &Statement, snapshot: Snapshot) {
    snapshot.assert_eq(&render(stmt));
}

#[test]
fn the_guard_fragments_are_the_text_docs_protocol_md_shows() {
    expect!["(SELECT count() FROM (SELECT term, lease_id, expires_at_ns FROM cc_publisher_lease ORDER BY term DESC, lease_id DESC, expires_at_ns DESC LIMIT 1) WHERE term = {lease_term:UInt64} AND lease_id = {lease_id:UUID} AND expires_at_ns = {lease_expires_ns:UInt64} AND expires_at_ns > toUnixTimestamp64Nano(now64(9)) + {fence_margin_ns:UInt64}) = 1"].assert_eq(&lease_fence(&tables()));
    expect![
        "ifNull((SELECT max(index_version) FROM cc_index_watermark), 0) < {index_version:UInt64}"
    ]
    .assert_eq(&version_barrier(&tables()));
}

#[test]
fn lease_statements() {
    let t = tables();
    check(
        &lease::sql::read_head(&t),
        expect![[r#"
            lease.read_head
            SELECT term, lease_id, holder, expires_at_ns, toUInt64(expires_at_ns > toUnixTimestamp64Nano(now64(9))) AS live, toUInt64(ifNull((SELECT max(expires_at_ns) FROM cc_publisher_lease WHERE term = (SELECT max(term) FROM cc_publisher_lease)), 0)) AS term_expires_at_ns, toUInt64(term_expires_at_ns > toUnixTimestamp64Nano(now64(9))) AS term_live FROM cc_publisher_lease ORDER BY term DESC, lease_id DESC, expires_at_ns DESC LIMIT 2
            params: 
            settings: sequential=true max_execution_time_s=None
            expect: term UInt64, lease_id Uuid, holder String, expires_at_ns UInt64, live UInt64, term_expires_at_ns UInt64, term_live UInt64
        "#]],
    );
    check(
        &lease::sql::insert_claim(&t, 7, id(1), "host-a", 30_000_000_000),
        expect![[r#"
        lease.insert_claim
        INSERT INTO cc_publisher_lease (term, lease_id, holder, acquired_at_ns, expires_at_ns) SELECT {term:UInt64}, {lease_id:UUID}, {holder:String}, toUnixTimestamp64Nano(now64(9)), toUnixTimestamp64Nano(now64(9)) + {ttl_ns:UInt64}
        params: holder: String, lease_id: UUID, term: UInt64, ttl_ns: UInt64
        settings: sequential=false max_execution_time_s=None
        expect: nothing
    "#]],
    );
    check(
        &lease::sql::read_claims(&t, 7, id(1)),
        expect![[r#"
            lease.read_claims
            SELECT lease_id, expires_at_ns FROM cc_publisher_lease WHERE term >= {term:UInt64} OR (lease_id != {lease_id:UUID} AND expires_at_ns > toUnixTimestamp64Nano(now64(9)) AND lease_id NOT IN (SELECT lease_id FROM cc_publisher_lease WHERE expires_at_ns = 0))
            params: lease_id: UUID, term: UInt64
            settings: sequential=true max_execution_time_s=None
            expect: lease_id Uuid, expires_at_ns UInt64
        "#]],
    );
    check(
        &lease::sql::release(&t, &Config::default(), &held(1, "host-a")),
        expect![[r#"
            lease.release
            INSERT INTO cc_publisher_lease (term, lease_id, holder, acquired_at_ns, expires_at_ns) SELECT ifNull((SELECT max(term) FROM cc_publisher_lease), 0) + 1, {lease_id:UUID}, {holder:String}, toUnixTimestamp64Nano(now64(9)), 0 FROM system.one WHERE (SELECT count() FROM (SELECT term, lease_id, expires_at_ns FROM cc_publisher_lease ORDER BY term DESC, lease_id DESC, expires_at_ns DESC LIMIT 1) WHERE term = {lease_term:UInt64} AND lease_id = {lease_id:UUID} AND expires_at_ns = {lease_expires_ns:UInt64} AND expires_at_ns > toUnixTimestamp64Nano(now64(9)) + {fence_margin_ns:UInt64}) = 1
            params: fence_margin_ns: UInt64, holder: String, lease_expires_ns: UInt64, lease_id: UUID, lease_term: UInt64
            settings: sequential=true max_execution_time_s=Some(10)
            expect: nothing
        "#]],
    );
}

#[test]
fn allocate_statements() {
    let t = tables();
    check(
        &allocate::sql::read_head(&t),
        expect![[r#"
        allocate.read_head
        SELECT greatest(ifNull((SELECT max(index_version) FROM cc_version_claims), 0), ifNull((SELECT max(index_version) FROM cc_index_watermark), 0)) AS head
        params: 
        settings: sequential=true max_execution_time_s=None
        expect: head UInt64
    "#]],
    );
    check(
        &allocate::sql::insert_claim(&t, 3, id(2)),
        expect![[r#"
        allocate.insert_claim
        INSERT INTO cc_version_claims (index_version, claim_id, claimed_at_ns) SELECT {index_version:UInt64}, {claim_id:UUID}, toUnixTimestamp64Nano(now64(9))
        params: claim_id: UUID, index_version: UInt64
        settings: sequential=false max_execution_time_s=None
        expect: nothing
    "#]],
    );
    check(
        &allocate::sql::read_claims(&t, 3),
        expect![[r#"
        allocate.read_claims
        SELECT claim_id FROM cc_version_claims WHERE index_version = {index_version:UInt64}
        params: index_version: UInt64
        settings: sequential=true max_execution_time_s=None
        expect: claim_id Uuid
    "#]],
    );
}

#[test]
fn publish_statements() {
    let t = tables();
    let cfg = Config::default();
    let packs = vec![("s3".to_owned(), id(5))];
    check(
        &publish::sql::insert_manifest(&t, &cfg, 3, id(9), &held(1, "a"), packs),
        expect![[r#"
            publish.insert_manifest
            INSERT INTO cc_snapshot_manifest (index_version, publish_id, store_id, pack_id) SELECT {index_version:UInt64}, {publish_id:UUID}, p.1, p.2 FROM (SELECT arrayJoin({packs:Array(Tuple(String, UUID))}) AS p) WHERE ifNull((SELECT max(index_version) FROM cc_index_watermark), 0) < {index_version:UInt64} AND (SELECT count() FROM (SELECT term, lease_id, expires_at_ns FROM cc_publisher_lease ORDER BY term DESC, lease_id DESC, expires_at_ns DESC LIMIT 1) WHERE term = {lease_term:UInt64} AND lease_id = {lease_id:UUID} AND expires_at_ns = {lease_expires_ns:UInt64} AND expires_at_ns > toUnixTimestamp64Nano(now64(9)) + {fence_margin_ns:UInt64}) = 1
            params: fence_margin_ns: UInt64, index_version: UInt64, lease_expires_ns: UInt64, lease_id: UUID, lease_term: UInt64, packs: Array(Tuple(String, UUID)), publish_id: UUID
            settings: sequential=true max_execution_time_s=Some(10)
            expect: nothing
        "#]],
    );
    check(
        &publish::sql::insert_commit_row(&t, &cfg, 3, id(9), &held(1, "a"), 2),
        expect![[r#"
            publish.insert_commit_row
            INSERT INTO cc_index_watermark (index_version, publish_id, published_at_ns) SELECT {index_version:UInt64}, {publish_id:UUID}, toUnixTimestamp64Nano(now64(9)) FROM system.one WHERE ifNull((SELECT max(index_version) FROM cc_index_watermark), 0) < {index_version:UInt64} AND (SELECT count() FROM (SELECT term, lease_id, expires_at_ns FROM cc_publisher_lease ORDER BY term DESC, lease_id DESC, expires_at_ns DESC LIMIT 1) WHERE term = {lease_term:UInt64} AND lease_id = {lease_id:UUID} AND expires_at_ns = {lease_expires_ns:UInt64} AND expires_at_ns > toUnixTimestamp64Nano(now64(9)) + {fence_margin_ns:UInt64}) = 1 AND (SELECT uniqExact(store_id, pack_id) FROM cc_snapshot_manifest WHERE index_version = {index_version:UInt64} AND publish_id = {publish_id:UUID}) = {manifest_packs:UInt64}
            params: fence_margin_ns: UInt64, index_version: UInt64, lease_expires_ns: UInt64, lease_id: UUID, lease_term: UInt64, manifest_packs: UInt64, publish_id: UUID
            settings: sequential=true max_execution_time_s=Some(10)
            expect: nothing
        "#]],
    );
    check(
        &publish::sql::read_publish_ids(&t, 3),
        expect![[r#"
        publish.read_publish_ids
        SELECT DISTINCT publish_id FROM cc_index_watermark WHERE index_version = {index_version:UInt64}
        params: index_version: UInt64
        settings: sequential=true max_execution_time_s=None
        expect: publish_id Uuid
    "#]],
    );
}

#[test]
fn index_statements() {
    let t = tables();
    let packs = vec![("s3".to_owned(), id(5))];
    check(
        &index::sql::read_committed(&t, packs.clone()),
        expect![[r#"
        index.read_committed
        SELECT DISTINCT store_id, pack_id FROM cc_pack_inventory_raw WHERE (store_id, pack_id) IN (SELECT p.1, p.2 FROM (SELECT arrayJoin({packs:Array(Tuple(String, UUID))}) AS p))
        params: packs: Array(Tuple(String, UUID))
        settings: sequential=true max_execution_time_s=None
        expect: store_id String, pack_id Uuid
    "#]],
    );
    check(
        &index::sql::commit_packs(&t, 3, id(9), packs).expect("version 3"),
        expect![[r#"
        index.insert_inventory
        INSERT INTO cc_pack_inventory_raw (store_id, pack_id, index_version, publish_id, committed_at_ns) SELECT p.1, p.2, {index_version:UInt64}, {publish_id:UUID}, toUnixTimestamp64Nano(now64(9)) FROM (SELECT arrayJoin({packs:Array(Tuple(String, UUID))}) AS p)
        params: index_version: UInt64, packs: Array(Tuple(String, UUID)), publish_id: UUID
        settings: sequential=false max_execution_time_s=None
        expect: nothing
    "#]],
    );
    check(
        &insert_descriptors(&t, vec![CaptureDescriptor::default()]),
        expect![[r#"
            index.insert_descriptors
            INSERT INTO cc_capture_raw (tenant_id, experiment_id, run_id, captured_at_ns, capture_id, store_id, pack_id, index_version, step, tensor_name, dtype, shape, summary_version, element_count, minimum, maximum, mean, l2_norm, abs_max, zero_fraction, payload_offset, payload_length, payload_sha256) FORMAT RowBinary
            params: 
            settings: sequential=false max_execution_time_s=None
            expect: nothing
            data: 1 rows in RowBinary
        "#]],
    );
}

/// The descriptor rows' data, byte for byte, for a native writer to match:
/// two rows in `RowBinary` (hex, one row a line), the second with the
/// characters a text format would have had to escape, which binary sends
/// as they are.
#[test]
fn descriptor_rows_as_row_binary_data() {
    let d = CaptureDescriptor {
        tenant_id: "ten'ant".into(),
        capture_id: id(3),
        shape: vec![2, 3],
        ..CaptureDescriptor::default()
    };
    let e = CaptureDescriptor {
        run_id: "a\tb\\c".into(),
        tensor_name: "x\ty\nz".into(),
        capture_id: id(4),
        ..CaptureDescriptor::default()
    };
    let hex_row = |row: &CaptureDescriptor| {
        let mut bytes = Vec::new();
        row.write_row_binary(&mut bytes);
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let data = capcat_proto::InsertData::Descriptors(vec![d.clone(), e.clone()].into());
    assert_eq!(data.rows(), 2);
    let mut both = Vec::new();
    d.write_row_binary(&mut both);
    e.write_row_binary(&mut both);
    assert_eq!(data.to_bytes(), both);
    expect![[r#"
        0774656e27616e740000000000000000000000000000000000000300000000000000000000000000000000000000000000000000000000000000000000000000000000000002020000000000000003000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000
        0000056109625c63000000000000000000000000000000000400000000000000000000000000000000000000000000000000000000000000000000000000000000057809790a7a00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000
    "#]].assert_eq(&format!("{}\n{}\n", hex_row(&d), hex_row(&e)));
}

#[test]
fn the_fence_and_the_barrier_appear_verbatim_in_both_publish_inserts_and_the_fence_in_the_release()
{
    let t = tables();
    let cfg = Config::default();
    let fence = lease_fence(&t);
    let barrier = version_barrier(&t);
    let guarded = [
        publish::sql::insert_manifest(&t, &cfg, 3, id(9), &held(1, "a"), vec![("s".into(), id(5))]),
        publish::sql::insert_commit_row(&t, &cfg, 3, id(9), &held(1, "a"), 2),
    ];
    for stmt in &guarded {
        assert!(
            stmt.sql.contains(&format!("WHERE {barrier} AND {fence}")),
            "{}",
            stmt.name
        );
        assert_eq!(stmt.sql.matches(&fence).count(), 1, "{}", stmt.name);
    }
    let release = lease::sql::release(&t, &cfg, &held(1, "a"));
    assert!(
        release.sql.ends_with(&format!("WHERE {fence}")),
        "{}",
        release.sql
    );
    assert!(
        release.sql.starts_with("INSERT INTO cc_publisher_lease"),
        "one INSERT ... SELECT"
    );
}

#[test]
fn every_statement_spells_its_values_as_parameters() {
    // No value the caller supplies reaches the SQL text: the holder, ids and
    // store names all travel in params.
    let t = tables();
    let cfg = Config::default();
    let hostile = "x'); DROP TABLE cc_capture_raw; --";
    let stmts = [
        lease::sql::insert_claim(&t, 1, id(1), hostile, 5),
        lease::sql::release(&t, &cfg, &held(1, hostile)),
        publish::sql::insert_manifest(
            &t,
            &cfg,
            3,
            id(9),
            &held(1, "a"),
            vec![(hostile.into(), id(5))],
        ),
        index::sql::read_committed(&t, vec![(hostile.into(), id(5))]),
    ];
    for stmt in &stmts {
        assert!(!stmt.sql.contains("DROP"), "{}: {}", stmt.name, stmt.sql);
    }
}
