//! The schema's DDL: golden text, and the properties the text must keep.

use std::collections::BTreeSet;

use capcat_proto::descriptor::{
    CAPTURE_BY_ID_COMPRESS_BLOCK, CAPTURE_BY_ID_GRANULE, CAPTURE_BY_ID_PRIMARY_KEY,
    CAPTURE_BY_ID_SORT_KEY, CAPTURE_IDENTITY, CAPTURE_SORT_KEY,
};
use capcat_proto::fragments::{MembershipBound, membership_predicate, published_pairs};
use capcat_proto::schema::{
    CatalogObject, ObjectKind, count_membership, create_schema, drop_schema, read_columns,
    read_stamp, read_tables, stamp_statement,
};
use capcat_proto::{Param, Statement, Tables};
use expect_test::expect;

fn tables() -> Tables {
    Tables::new("cc").expect("valid prefix")
}

fn render(statements: &[Statement]) -> String {
    statements
        .iter()
        .map(|s| format!("-- {}\n{};\n", s.name, s.sql))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn schema_golden_ddl() {
    let mut all = create_schema(&tables());
    all.push(stamp_statement(&tables()));
    expect![[r#"
        -- schema.create_schema_version
        CREATE TABLE IF NOT EXISTS cc_schema_version
        (
            version UInt64,
            stamped_at_ns UInt64 DEFAULT toUInt64(toUnixTimestamp64Nano(now64(9)))
        )
        ENGINE = MergeTree
        ORDER BY tuple();

        -- schema.create_capture_raw
        CREATE TABLE IF NOT EXISTS cc_capture_raw
        (
            tenant_id String,
            experiment_id String,
            run_id String,
            captured_at_ns UInt64,
            capture_id UUID,
            store_id String,
            pack_id UUID,
            index_version UInt64,
            step UInt64,
            tensor_name String,
            dtype String,
            shape Array(UInt64),
            summary_version UInt32,
            element_count UInt64,
            minimum Float64,
            maximum Float64,
            mean Float64,
            l2_norm Float64,
            abs_max Float64,
            zero_fraction Float64,
            payload_offset UInt64,
            payload_length UInt64,
            payload_sha256 String
        )
        ENGINE = ReplacingMergeTree(index_version)
        ORDER BY (tenant_id, experiment_id, run_id, captured_at_ns, capture_id, store_id, pack_id);

        -- schema.create_capture_by_id
        CREATE TABLE IF NOT EXISTS cc_capture_by_id
        (
            tenant_id String,
            experiment_id String,
            run_id String,
            captured_at_ns UInt64,
            capture_id UUID,
            store_id String,
            pack_id UUID,
            index_version UInt64,
            step UInt64,
            tensor_name String,
            dtype String,
            shape Array(UInt64),
            summary_version UInt32,
            element_count UInt64,
            minimum Float64,
            maximum Float64,
            mean Float64,
            l2_norm Float64,
            abs_max Float64,
            zero_fraction Float64,
            payload_offset UInt64,
            payload_length UInt64,
            payload_sha256 String
        )
        ENGINE = ReplacingMergeTree(index_version)
        ORDER BY (tenant_id, capture_id, experiment_id, run_id, captured_at_ns, store_id, pack_id)
        PRIMARY KEY (tenant_id, capture_id)
        SETTINGS index_granularity = 64, min_compress_block_size = 1024, max_compress_block_size = 8192;

        -- schema.create_capture_by_id_feed
        CREATE MATERIALIZED VIEW IF NOT EXISTS cc_capture_by_id_feed TO cc_capture_by_id
        AS SELECT tenant_id, experiment_id, run_id, captured_at_ns, capture_id, store_id, pack_id, index_version, step, tensor_name, dtype, shape, summary_version, element_count, minimum, maximum, mean, l2_norm, abs_max, zero_fraction, payload_offset, payload_length, payload_sha256
        FROM cc_capture_raw;

        -- schema.create_pack_inventory_raw
        CREATE TABLE IF NOT EXISTS cc_pack_inventory_raw
        (
            store_id String,
            pack_id UUID,
            index_version UInt64,
            publish_id UUID,
            committed_at_ns UInt64 DEFAULT toUInt64(toUnixTimestamp64Nano(now64(9)))
        )
        ENGINE = ReplacingMergeTree(index_version)
        ORDER BY (store_id, pack_id);

        -- schema.create_index_watermark
        CREATE TABLE IF NOT EXISTS cc_index_watermark
        (
            index_version UInt64,
            publish_id UUID,
            published_at_ns UInt64 DEFAULT toUInt64(toUnixTimestamp64Nano(now64(9)))
        )
        ENGINE = MergeTree
        ORDER BY (index_version, publish_id);

        -- schema.create_snapshot_manifest
        CREATE TABLE IF NOT EXISTS cc_snapshot_manifest
        (
            index_version UInt64,
            publish_id UUID,
            store_id String,
            pack_id UUID
        )
        ENGINE = MergeTree
        ORDER BY (index_version, publish_id, store_id, pack_id);

        -- schema.create_version_claims
        CREATE TABLE IF NOT EXISTS cc_version_claims
        (
            index_version UInt64,
            claim_id UUID,
            claimed_at_ns UInt64 DEFAULT toUInt64(toUnixTimestamp64Nano(now64(9)))
        )
        ENGINE = MergeTree
        ORDER BY (index_version, claim_id);

        -- schema.create_publisher_lease
        CREATE TABLE IF NOT EXISTS cc_publisher_lease
        (
            term UInt64,
            lease_id UUID,
            holder String,
            acquired_at_ns UInt64,
            expires_at_ns UInt64
        )
        ENGINE = MergeTree
        ORDER BY (term, lease_id);

        -- schema.create_demand_events
        CREATE TABLE IF NOT EXISTS cc_demand_events (
            event_id UUID,
            shard_id String,
            source String,
            v UInt64,
            record String,
            appended_at_ns UInt64
        ) ENGINE = MergeTree ORDER BY (shard_id, appended_at_ns, event_id);

        -- schema.create_capture_view
        CREATE OR REPLACE VIEW cc_capture AS
        SELECT tenant_id, experiment_id, run_id, captured_at_ns, capture_id, store_id, pack_id, index_version, step, tensor_name, dtype, shape, summary_version, element_count, minimum, maximum, mean, l2_norm, abs_max, zero_fraction, payload_offset, payload_length, payload_sha256
        FROM cc_capture_raw FINAL
        WHERE (store_id, pack_id) IN (SELECT store_id, pack_id FROM cc_snapshot_manifest WHERE (index_version, publish_id) IN (SELECT index_version, publish_id FROM cc_index_watermark));

        -- schema.create_pack_inventory_view
        CREATE OR REPLACE VIEW cc_pack_inventory AS
        SELECT store_id, pack_id, index_version, publish_id, committed_at_ns
        FROM cc_pack_inventory_raw FINAL;

        -- schema.stamp
        INSERT INTO cc_schema_version (version) SELECT {version:UInt64} FROM system.one WHERE (SELECT count() FROM cc_schema_version) = 0;
    "#]].assert_eq(&render(&all));
}

#[test]
fn schema_golden_drop() {
    expect![[r#"
        -- schema.drop_pack_inventory_view
        DROP VIEW IF EXISTS cc_pack_inventory;

        -- schema.drop_capture_view
        DROP VIEW IF EXISTS cc_capture;

        -- schema.drop_demand_events
        DROP TABLE IF EXISTS cc_demand_events;

        -- schema.drop_publisher_lease
        DROP TABLE IF EXISTS cc_publisher_lease;

        -- schema.drop_version_claims
        DROP TABLE IF EXISTS cc_version_claims;

        -- schema.drop_snapshot_manifest
        DROP TABLE IF EXISTS cc_snapshot_manifest;

        -- schema.drop_index_watermark
        DROP TABLE IF EXISTS cc_index_watermark;

        -- schema.drop_pack_inventory_raw
        DROP TABLE IF EXISTS cc_pack_inventory_raw;

        -- schema.drop_capture_by_id_feed
        DROP VIEW IF EXISTS cc_capture_by_id_feed;

        -- schema.drop_capture_by_id
        DROP TABLE IF EXISTS cc_capture_by_id;

        -- schema.drop_capture_raw
        DROP TABLE IF EXISTS cc_capture_raw;

        -- schema.drop_schema_version
        DROP TABLE IF EXISTS cc_schema_version;
    "#]]
    .assert_eq(&render(&drop_schema(&tables())));
}

#[test]
fn schema_golden_probes() {
    let t = tables();
    expect![[r#"
        -- schema.read_tables
        SELECT name, engine, sorting_key, total_rows FROM system.tables WHERE database = currentDatabase() AND name IN {names:Array(String)} ORDER BY name;

        -- schema.read_columns
        SELECT table, name FROM system.columns WHERE database = currentDatabase() AND table IN {names:Array(String)} ORDER BY table, name;

        -- schema.read_stamp
        SELECT DISTINCT version FROM cc_schema_version ORDER BY version;

        -- schema.count_membership
        SELECT (SELECT count() FROM cc_pack_inventory_raw) AS inventory_rows, (SELECT count() FROM cc_snapshot_manifest WHERE (index_version, publish_id) IN (SELECT index_version, publish_id FROM cc_index_watermark)) AS effective_membership_rows;
    "#]].assert_eq(&render(&[
        read_tables(&t),
        read_columns(&t),
        read_stamp(&t),
        count_membership(&t),
    ]));
}

/// The object a DDL statement names: the token after `EXISTS` or `VIEW`.
fn object_named(sql: &str) -> String {
    let words: Vec<&str> = sql.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == "EXISTS")
        .or_else(|| words.iter().position(|w| *w == "VIEW"))
        .expect("every DDL names its object after EXISTS or VIEW");
    words[at + 1].to_owned()
}

#[test]
fn schema_drop_schema_and_the_ddl_cover_the_same_objects() {
    let t = tables();
    let created: BTreeSet<String> = create_schema(&t)
        .iter()
        .map(|s| object_named(&s.sql))
        .collect();
    let dropped: BTreeSet<String> = drop_schema(&t)
        .iter()
        .map(|s| object_named(&s.sql))
        .collect();
    let listed: BTreeSet<String> = CatalogObject::ALL.iter().map(|o| o.name(&t)).collect();
    assert_eq!(created, listed);
    assert_eq!(dropped, listed);
    // The names the lead's Tables hands out are all in the list, so no
    // object can be created by a statement elsewhere and missed here.
    for name in [
        t.capture_raw(),
        t.capture_by_id(),
        t.capture_by_id_feed(),
        t.pack_inventory_raw(),
        t.index_watermark(),
        t.snapshot_manifest(),
        t.version_claims(),
        t.publisher_lease(),
        t.schema_version(),
        t.demand_events(),
        t.capture_view(),
        t.pack_inventory_view(),
    ] {
        assert!(
            listed.contains(&name),
            "{name} is not in CatalogObject::ALL"
        );
    }
}

#[test]
fn schema_drops_views_before_the_tables_they_read() {
    let t = tables();
    let drops = drop_schema(&t);
    let views = drops
        .iter()
        .take_while(|s| s.sql.starts_with("DROP VIEW"))
        .count();
    assert_eq!(views, 2, "{drops:#?}");
    assert!(drops.iter().all(|s| s.sql.contains(" IF EXISTS ")));
}

#[test]
fn schema_the_views_are_created_after_every_table_they_read() {
    let t = tables();
    let names: Vec<String> = create_schema(&t)
        .iter()
        .map(|s| object_named(&s.sql))
        .collect();
    let at = |name: String| names.iter().position(|n| *n == name).expect("created");
    for table in [t.capture_raw(), t.snapshot_manifest(), t.index_watermark()] {
        assert!(at(table.clone()) < at(t.capture_view()), "{table}");
    }
    assert!(at(t.pack_inventory_raw()) < at(t.pack_inventory_view()));
    for object in CatalogObject::ALL {
        if object.kind() == ObjectKind::Table {
            assert!(at(object.name(&t)) < at(t.capture_view()));
        }
    }
}

#[test]
fn schema_the_descriptor_table_orders_by_capture_identity_then_pack_identity() {
    let sql = CatalogObject::CaptureRaw.create(&tables()).sql;
    assert!(
        sql.contains(
            "ORDER BY (tenant_id, experiment_id, run_id, captured_at_ns, capture_id, store_id, pack_id)"
        ),
        "{sql}"
    );
    assert!(sql.contains("ENGINE = ReplacingMergeTree"), "{sql}");
    assert_eq!(
        &CAPTURE_SORT_KEY[..CAPTURE_IDENTITY.len()],
        CAPTURE_IDENTITY
    );
}

#[test]
fn schema_the_public_view_is_final_and_bounded_by_membership_pairing() {
    let t = tables();
    let sql = CatalogObject::CaptureView.create(&t).sql;
    assert!(
        sql.starts_with("CREATE OR REPLACE VIEW cc_capture AS"),
        "{sql}"
    );
    assert!(sql.contains("FROM cc_capture_raw FINAL"), "{sql}");
    assert!(
        sql.contains(&membership_predicate(&t, MembershipBound::Published)),
        "{sql}"
    );
    // The view tracks published state; it pins nothing and groups nothing.
    assert!(!sql.contains("max("), "{sql}");
    assert!(!sql.contains("GROUP BY"), "{sql}");
    assert!(!sql.contains("argMax"), "{sql}");
}

#[test]
fn schema_the_membership_count_pairs_manifest_with_commit_rows() {
    let t = tables();
    let sql = count_membership(&t).sql;
    assert!(
        sql.contains(&published_pairs(&t, MembershipBound::Published)),
        "{sql}"
    );
    assert!(count_membership(&t).settings.select_sequential_consistency);
}

#[test]
fn schema_the_stamp_is_conditional_on_the_server() {
    let stamp = stamp_statement(&tables());
    assert!(
        stamp
            .sql
            .ends_with("WHERE (SELECT count() FROM cc_schema_version) = 0"),
        "{}",
        stamp.sql
    );
    assert_eq!(
        stamp.params.get("version"),
        Some(&Param::UInt64(capcat_proto::schema::SCHEMA_VERSION))
    );
}

#[test]
fn schema_server_timestamps_default_to_the_server_clock() {
    let sql = CatalogObject::IndexWatermark.create(&tables()).sql;
    assert!(
        sql.contains("published_at_ns UInt64 DEFAULT toUInt64(toUnixTimestamp64Nano(now64(9)))"),
        "{sql}"
    );
}

#[test]
fn schema_only_names_are_spliced_into_ddl() {
    // Every DDL statement carries no parameters: its only variable text is
    // the object names, which come from the validated prefix.
    for statement in create_schema(&tables())
        .iter()
        .chain(&drop_schema(&tables()))
    {
        assert!(statement.params.is_empty(), "{}", statement.name);
    }
}

/// The text between a CREATE TABLE's parentheses: its column list.
fn column_block(sql: &str) -> &str {
    let start = sql.find("\n(\n").expect("a column list") + 3;
    let end = sql.find("\n)\n").expect("a column list's end");
    &sql[start..end]
}

#[test]
fn schema_the_lookup_table_is_the_descriptor_table_keyed_by_id() {
    let t = tables();
    let raw = CatalogObject::CaptureRaw.create(&t).sql;
    let by_id = CatalogObject::CaptureById.create(&t).sql;
    // The same columns, types and engine: a lookup resolves the rows a page
    // resolves, and a merge collapses the same rows in both.
    assert_eq!(column_block(&raw), column_block(&by_id));
    assert!(
        by_id.contains("ENGINE = ReplacingMergeTree(index_version)"),
        "{by_id}"
    );
    // Its key is the descriptor key permuted, with the id second so a
    // lookup is a primary-key range per id.
    assert_eq!(&CAPTURE_BY_ID_SORT_KEY[..2], ["tenant_id", "capture_id"]);
    let mut permuted = CAPTURE_BY_ID_SORT_KEY.to_vec();
    let mut original = CAPTURE_SORT_KEY.to_vec();
    permuted.sort_unstable();
    original.sort_unstable();
    assert_eq!(permuted, original);
    assert!(
        by_id.contains(&format!("ORDER BY ({})", CAPTURE_BY_ID_SORT_KEY.join(", "))),
        "{by_id}"
    );
    // Only the id's prefix is searched, so only it is the primary key; the
    // granules and compressed blocks are small, so a lookup reads little
    // beside each id.
    assert_eq!(CAPTURE_BY_ID_PRIMARY_KEY, &CAPTURE_BY_ID_SORT_KEY[..2]);
    let (min_block, max_block) = CAPTURE_BY_ID_COMPRESS_BLOCK;
    assert!(
        by_id.ends_with(&format!(
            "\nPRIMARY KEY (tenant_id, capture_id)\n\
             SETTINGS index_granularity = {CAPTURE_BY_ID_GRANULE}, \
             min_compress_block_size = {min_block}, max_compress_block_size = {max_block}"
        )),
        "{by_id}"
    );
    assert!(
        CAPTURE_BY_ID_GRANULE <= 256 && max_block <= 64 * 1024,
        "{by_id}"
    );
}

#[test]
fn schema_the_feed_copies_every_descriptor_column_unfiltered() {
    let t = tables();
    let feed = CatalogObject::CaptureByIdFeed.create(&t).sql;
    let columns: Vec<&str> = capcat_proto::CAPTURE_COLUMNS
        .iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(
        feed,
        format!(
            "CREATE MATERIALIZED VIEW IF NOT EXISTS cc_capture_by_id_feed TO cc_capture_by_id\n\
             AS SELECT {}\nFROM cc_capture_raw",
            columns.join(", ")
        )
    );
    assert_eq!(CatalogObject::CaptureByIdFeed.kind(), ObjectKind::Feed);
    assert!(ObjectKind::Feed.required_once_stamped());
    assert!(ObjectKind::Feed.matches_engine("MaterializedView"));
    assert!(!ObjectKind::Table.matches_engine("MaterializedView"));
    assert!(!ObjectKind::View.matches_engine("MaterializedView"));
}

#[test]
fn schema_the_feed_exists_before_any_row_can_be_written_and_is_dropped_first() {
    let t = tables();
    let created: Vec<String> = create_schema(&t)
        .iter()
        .map(|s| object_named(&s.sql))
        .collect();
    let at = |name: String| created.iter().position(|n| *n == name).expect("created");
    let feed = at(t.capture_by_id_feed());
    assert!(at(t.capture_raw()) < feed && at(t.capture_by_id()) < feed);
    let dropped: Vec<String> = drop_schema(&t)
        .iter()
        .map(|s| object_named(&s.sql))
        .collect();
    let at = |name: String| dropped.iter().position(|n| *n == name).expect("dropped");
    let feed = at(t.capture_by_id_feed());
    assert!(feed < at(t.capture_raw()) && feed < at(t.capture_by_id()));
}

/// The stamp table is created before every other object, so a catalog
/// holding objects of ours without it was not made by this build's install,
/// and an install killed at any later point leaves an empty stamp table the
/// guard finishes from. The stamp row that lets writers in is the install's
/// last statement; the stamp table is the teardown's last drop.
#[test]
fn schema_the_stamp_table_comes_first_and_the_stamp_row_last() {
    let t = tables();
    let created = create_schema(&t);
    assert_eq!(
        created.first().map(|s| object_named(&s.sql)),
        Some(t.schema_version())
    );
    assert_eq!(
        created
            .iter()
            .filter(|s| object_named(&s.sql) == t.schema_version())
            .count(),
        1
    );
    let dropped = drop_schema(&t);
    assert_eq!(
        dropped.last().map(|s| object_named(&s.sql)),
        Some(t.schema_version())
    );
    let mut machine = capcat_proto::schema::EnsureSchema::new(t.clone());
    let mut issued = Vec::new();
    for _ in 0..=CatalogObject::ALL.len() + 4 {
        match capcat_proto::Machine::poll(&mut machine) {
            capcat_proto::Step::Execute(statement) => {
                issued.push(statement.name);
                capcat_proto::Machine::handle(
                    &mut machine,
                    capcat_proto::Input::Rows(capcat_proto::Rows::empty()),
                );
            }
            _ => break,
        }
    }
    // A fresh catalog: two probes, every object, then the stamp row.
    assert_eq!(issued.len(), 2 + CatalogObject::ALL.len() + 1, "{issued:?}");
    assert_eq!(issued[2], "schema.create_schema_version");
    assert_eq!(issued.last(), Some(&"schema.stamp"));
}
