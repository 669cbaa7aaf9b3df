//! The reader's statements: golden SQL and the properties the text must keep.

use std::collections::BTreeSet;

use capcat_proto::descriptor::{CAPTURE_COLUMNS, ColumnRole};
use capcat_proto::fragments::{MembershipBound, membership_predicate};
use capcat_proto::reader::{
    Cursor, FILTER_COLUMNS, MAX_LOOKUP_IDS, MAX_PAGE_SIZE, PageSize, Range, ReaderError,
    SearchFilter, SearchQuery, get_by_ids, pin_snapshot, resolved_columns, result_columns,
    search_page,
};
use capcat_proto::schema::CatalogObject;
use capcat_proto::{Param, Tables};
use expect_test::expect;
use uuid::Uuid;

fn tables() -> Tables {
    Tables::new("cc").expect("valid prefix")
}

fn tenant_query() -> SearchQuery {
    SearchQuery {
        filter: SearchFilter {
            tenant_id: "acme".to_owned(),
            ..SearchFilter::default()
        },
        cursor: None,
        page_size: PageSize::new(100).expect("in range"),
    }
}

fn cursor() -> Cursor {
    Cursor {
        pinned: 7,
        tenant_id: "acme".to_owned(),
        experiment_id: "exp".to_owned(),
        run_id: "run".to_owned(),
        captured_at_ns: 1_000,
        capture_id: Uuid::from_u128(5),
    }
}

fn full_query() -> SearchQuery {
    SearchQuery {
        filter: SearchFilter {
            tenant_id: "acme".to_owned(),
            experiment_id: Some("exp".to_owned()),
            run_id: Some("run".to_owned()),
            captured_at_ns: Range {
                from: Some(10),
                until: Some(20),
            },
            tensor_name: Some("w".to_owned()),
            tensor_name_prefix: Some("encoder.".to_owned()),
            dtype: Some("f32".to_owned()),
            step: Range {
                from: Some(1),
                until: Some(9),
            },
        },
        cursor: Some(cursor()),
        page_size: PageSize::new(100).expect("in range"),
    }
}

#[test]
fn reader_golden_search_page() {
    let statement = search_page(&tables(), &full_query(), 7).expect("valid query");
    expect![[r#"
        SELECT tenant_id, experiment_id, run_id, captured_at_ns, capture_id, tupleElement(resolved, 1) AS store_id, tupleElement(resolved, 2) AS pack_id, tupleElement(resolved, 3) AS index_version, tupleElement(resolved, 4) AS step, tupleElement(resolved, 5) AS tensor_name, tupleElement(resolved, 6) AS dtype, arrayStringConcat(arrayMap(x -> toString(x), tupleElement(resolved, 7)), ',') AS shape, tupleElement(resolved, 8) AS summary_version, tupleElement(resolved, 9) AS element_count, reinterpretAsUInt64(tupleElement(resolved, 10)) AS minimum, reinterpretAsUInt64(tupleElement(resolved, 11)) AS maximum, reinterpretAsUInt64(tupleElement(resolved, 12)) AS mean, reinterpretAsUInt64(tupleElement(resolved, 13)) AS l2_norm, reinterpretAsUInt64(tupleElement(resolved, 14)) AS abs_max, reinterpretAsUInt64(tupleElement(resolved, 15)) AS zero_fraction, tupleElement(resolved, 16) AS payload_offset, tupleElement(resolved, 17) AS payload_length, tupleElement(resolved, 18) AS payload_sha256
        FROM (
            SELECT tenant_id, experiment_id, run_id, captured_at_ns, capture_id, argMax(tuple(store_id, pack_id, index_version, step, tensor_name, dtype, shape, summary_version, element_count, minimum, maximum, mean, l2_norm, abs_max, zero_fraction, payload_offset, payload_length, payload_sha256), tuple(index_version, store_id, pack_id)) AS resolved
            FROM cc_capture_raw
            WHERE tenant_id = {tenant_id:String}
              AND experiment_id = {experiment_id:String}
              AND run_id = {run_id:String}
              AND tensor_name = {tensor_name:String}
              AND dtype = {dtype:String}
              AND startsWith(tensor_name, {tensor_name_prefix:String})
              AND captured_at_ns >= {captured_at_ns_from:UInt64}
              AND captured_at_ns <= {captured_at_ns_until:UInt64}
              AND step >= {step_from:UInt64}
              AND step <= {step_until:UInt64}
              AND index_version IN (SELECT index_version FROM cc_index_watermark WHERE index_version <= {pinned_version:UInt64})
              AND (store_id, pack_id) IN (SELECT store_id, pack_id FROM cc_snapshot_manifest WHERE (index_version, publish_id) IN (SELECT index_version, publish_id FROM cc_index_watermark WHERE index_version <= {pinned_version:UInt64}))
              AND (tenant_id, experiment_id, run_id, captured_at_ns, capture_id) > ({after_tenant_id:String}, {after_experiment_id:String}, {after_run_id:String}, {after_captured_at_ns:UInt64}, {after_capture_id:UUID})
            GROUP BY tenant_id, experiment_id, run_id, captured_at_ns, capture_id
            ORDER BY tenant_id, experiment_id, run_id, captured_at_ns, capture_id
            LIMIT {limit:UInt64}
        )
        ORDER BY tenant_id, experiment_id, run_id, captured_at_ns, capture_id
        SETTINGS optimize_aggregation_in_order = 1"#]].assert_eq(&statement.sql);
    let params: Vec<String> = statement
        .params
        .iter()
        .map(|(k, v)| format!("{k}: {} = {}", v.clickhouse_type(), v.to_text()))
        .collect();
    expect![[r#"
        after_capture_id: UUID = 00000000-0000-0000-0000-000000000005
        after_captured_at_ns: UInt64 = 1000
        after_experiment_id: String = exp
        after_run_id: String = run
        after_tenant_id: String = acme
        captured_at_ns_from: UInt64 = 10
        captured_at_ns_until: UInt64 = 20
        dtype: String = f32
        experiment_id: String = exp
        limit: UInt64 = 101
        pinned_version: UInt64 = 7
        run_id: String = run
        step_from: UInt64 = 1
        step_until: UInt64 = 9
        tenant_id: String = acme
        tensor_name: String = w
        tensor_name_prefix: String = encoder."#]]
    .assert_eq(&params.join("\n"));
}

#[test]
fn reader_golden_get_by_ids() {
    let ids = BTreeSet::from([Uuid::from_u128(1), Uuid::from_u128(2)]);
    let statements = get_by_ids(&tables(), "acme", &ids, 7).expect("valid lookup");
    assert_eq!(statements.len(), 1);
    expect![[r#"
        SELECT tenant_id, experiment_id, run_id, captured_at_ns, capture_id, store_id, pack_id, index_version, step, tensor_name, dtype, arrayStringConcat(arrayMap(x -> toString(x), shape), ',') AS shape, summary_version, element_count, reinterpretAsUInt64(minimum) AS minimum, reinterpretAsUInt64(maximum) AS maximum, reinterpretAsUInt64(mean) AS mean, reinterpretAsUInt64(l2_norm) AS l2_norm, reinterpretAsUInt64(abs_max) AS abs_max, reinterpretAsUInt64(zero_fraction) AS zero_fraction, payload_offset, payload_length, payload_sha256
            FROM cc_capture_by_id
            WHERE tenant_id = {tenant_id:String}
              AND capture_id IN {capture_ids:Array(UUID)}
              AND index_version IN (SELECT index_version FROM cc_index_watermark WHERE index_version <= {pinned_version:UInt64})
              AND (store_id, pack_id) IN (SELECT store_id, pack_id FROM cc_snapshot_manifest WHERE (index_version, publish_id) IN (SELECT index_version, publish_id FROM cc_index_watermark WHERE index_version <= {pinned_version:UInt64}))
            ORDER BY tenant_id, experiment_id, run_id, captured_at_ns, capture_id, index_version DESC, store_id DESC, pack_id DESC
            LIMIT 1 BY tenant_id, experiment_id, run_id, captured_at_ns, capture_id"#]].assert_eq(&statements[0].sql);
}

#[test]
fn reader_golden_pin_snapshot() {
    let statement = pin_snapshot(&tables());
    expect!["SELECT ifNull(max(index_version), 0) AS published_head FROM cc_index_watermark"]
        .assert_eq(&statement.sql);
    assert!(statement.settings.select_sequential_consistency);
}

#[test]
fn reader_the_keyset_cursor_is_strict_and_the_time_range_is_not() {
    let sql = search_page(&tables(), &full_query(), 7)
        .expect("valid query")
        .sql;
    let strict = "(tenant_id, experiment_id, run_id, captured_at_ns, capture_id) > \
                  ({after_tenant_id:String}";
    // The non-strict form re-reads the row the cursor was issued for and
    // duplicates one capture at every page boundary. A blanket ">=" search
    // would also match the captured_at range filter, which is legitimately
    // non-strict, so the forbidden form is spelled out in full.
    let non_strict = "(tenant_id, experiment_id, run_id, captured_at_ns, capture_id) >= \
                      ({after_tenant_id:String}";
    assert!(sql.contains(strict), "{sql}");
    assert!(!sql.contains(non_strict), "{sql}");
    assert!(
        sql.contains("captured_at_ns >= {captured_at_ns_from:UInt64}"),
        "{sql}"
    );
    assert!(
        sql.contains("captured_at_ns <= {captured_at_ns_until:UInt64}"),
        "{sql}"
    );
}

#[test]
fn reader_the_projection_is_one_arg_max_over_a_tuple_with_the_tuple_ordering_key() {
    let resolved: Vec<&str> = resolved_columns().iter().map(|c| c.name).collect();
    let aggregate = format!(
        "argMax(tuple({}), tuple(index_version, store_id, pack_id))",
        resolved.join(", ")
    );
    let page = search_page(&tables(), &tenant_query(), 7).expect("valid query");
    let sql = &page.sql;
    assert_eq!(sql.matches("argMax(").count(), 1, "{sql}");
    assert!(sql.contains(&aggregate), "{sql}");
    // Grouping columns project directly, outside the aggregate.
    assert!(
        sql.contains("GROUP BY tenant_id, experiment_id, run_id, captured_at_ns, capture_id"),
        "{sql}"
    );
    assert!(!sql.contains("argMax(tuple(tenant_id"), "{sql}");
    // Every descriptor column is either grouped or resolved, exactly once.
    let grouped: BTreeSet<&str> = CAPTURE_COLUMNS
        .iter()
        .filter(|c| c.role == ColumnRole::Identity)
        .map(|c| c.name)
        .collect();
    let resolved: BTreeSet<&str> = resolved.into_iter().collect();
    assert!(grouped.is_disjoint(&resolved));
    let all: BTreeSet<&str> = CAPTURE_COLUMNS.iter().map(|c| c.name).collect();
    assert_eq!(&grouped | &resolved, all);
}

#[test]
fn reader_resolved_columns_minus_the_locator_are_exactly_the_immutable_metadata() {
    // The rule the pre-aggregation filters rest on: two rows for one capture
    // may differ only in where its bytes are (and the version that wrote
    // them). A new mutable column fails here, so its author has to decide
    // on purpose whether filters may read it.
    let resolved_minus_locator: BTreeSet<&str> = resolved_columns()
        .iter()
        .filter(|c| c.role != ColumnRole::Locator && c.role != ColumnRole::Version)
        .map(|c| c.name)
        .collect();
    let immutable_non_identity: BTreeSet<&str> = CAPTURE_COLUMNS
        .iter()
        .filter(|c| c.immutable && c.role != ColumnRole::Identity)
        .map(|c| c.name)
        .collect();
    assert_eq!(resolved_minus_locator, immutable_non_identity);
    // The locator the rule names is exactly the descriptor's Locator fields.
    let locator: BTreeSet<&str> = CAPTURE_COLUMNS
        .iter()
        .filter(|c| c.role == ColumnRole::Locator)
        .map(|c| c.name)
        .collect();
    assert_eq!(
        locator,
        BTreeSet::from([
            "store_id",
            "pack_id",
            "payload_offset",
            "payload_length",
            "payload_sha256"
        ])
    );
}

#[test]
fn reader_filters_read_only_immutable_columns() {
    for name in FILTER_COLUMNS {
        let column = CAPTURE_COLUMNS
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name} is not a descriptor column"));
        assert!(
            column.immutable,
            "{name} is filtered before aggregation but is mutable"
        );
    }
    // And the emitted WHERE clause reads no other descriptor column before
    // the GROUP BY, apart from the membership predicate's pack identity.
    let sql = search_page(&tables(), &full_query(), 7)
        .expect("valid query")
        .sql;
    let membership = membership_predicate(&tables(), MembershipBound::Pinned);
    let start = sql.find("WHERE ").expect("a WHERE clause");
    let end = sql.find("GROUP BY").expect("a GROUP BY");
    assert!(sql[start..end].contains(&membership), "{sql}");
    // `index_version <= W` is the one deliberate exception: it must drop
    // rows written above W BEFORE argMax picks among a capture's rows.
    let where_clause = sql[start..end]
        .replace(&membership, "")
        .replace(&capcat_proto::fragments::pinned_rows(&tables()), "");
    for column in CAPTURE_COLUMNS {
        let mentioned = where_clause
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|word| word == column.name);
        if mentioned {
            assert!(
                column.immutable,
                "{} filtered before aggregation",
                column.name
            );
        }
    }
}

/// A lookup keeps, of each capture's rows, the row the page's `argMax`
/// would pick: ordered by the same tuple, highest first, one row per
/// identity, kept whole (no per-column choice, so no mixed row).
#[test]
fn reader_a_lookup_keeps_the_row_the_page_aggregate_picks() {
    let ids = BTreeSet::from([Uuid::from_u128(1)]);
    let lookup = get_by_ids(&tables(), "acme", &ids, 7).expect("valid lookup");
    let sql = &lookup[0].sql;
    let identity = "tenant_id, experiment_id, run_id, captured_at_ns, capture_id";
    assert!(
        sql.contains(&format!(
            "\n    ORDER BY {identity}, index_version DESC, store_id DESC, pack_id DESC\n    \
             LIMIT 1 BY {identity}"
        )),
        "{sql}"
    );
    assert_eq!(
        capcat_proto::descriptor::RESOLUTION_ORDER,
        ["index_version", "store_id", "pack_id"]
    );
    assert!(!sql.contains("argMax("), "{sql}");
    assert!(!sql.contains("GROUP BY"), "{sql}");
    // One query, no outer one: the row is selected (converted) as it is
    // kept, every result column once, named as the rows decode.
    assert!(
        sql.starts_with(&format!(
            "SELECT {}\n    FROM cc_capture_by_id\n    WHERE ",
            capcat_proto::reader::projection::row_select_list()
        )),
        "{sql}"
    );
    assert!(sql.ends_with(&format!("LIMIT 1 BY {identity}")), "{sql}");
    let list = capcat_proto::reader::projection::row_select_list();
    for column in result_columns() {
        let named = list
            .split(", ")
            .filter(|item| *item == column.name || item.ends_with(&format!(" AS {}", column.name)))
            .count();
        assert_eq!(named, 1, "{} in {list}", column.name);
    }
}

#[test]
fn reader_membership_is_the_shared_predicate_pinned_at_w() {
    let t = tables();
    let pinned = membership_predicate(&t, MembershipBound::Pinned);
    let published = membership_predicate(&t, MembershipBound::Published);
    let page = search_page(&t, &tenant_query(), 7).expect("valid query");
    let ids = BTreeSet::from([Uuid::from_u128(1)]);
    let lookup = get_by_ids(&t, "acme", &ids, 7).expect("valid lookup");
    for statement in [&page, &lookup[0]] {
        assert!(statement.sql.contains(&pinned), "{}", statement.sql);
        assert_eq!(
            statement.params.get("pinned_version"),
            Some(&Param::UInt64(7))
        );
    }
    assert!(
        CatalogObject::CaptureView
            .create(&t)
            .sql
            .contains(&published)
    );
    // Composite pack identity, paired publish identity. A server evaluating
    // the predicate is what proves the meaning (the adapter's live test);
    // this is the fast tripwire on the text.
    assert!(
        pinned.starts_with(
            "(store_id, pack_id) IN (SELECT store_id, pack_id FROM cc_snapshot_manifest"
        )
    );
    assert!(pinned.contains("(index_version, publish_id) IN (SELECT index_version, publish_id FROM cc_index_watermark WHERE index_version <= {pinned_version:UInt64})"));
    assert!(!pinned.contains(" pack_id IN"), "{pinned}");
}

#[test]
fn reader_get_by_ids_goes_in_chunks_of_at_most_1000() {
    let ids: BTreeSet<Uuid> = (0..2_500u128).map(Uuid::from_u128).collect();
    let statements = get_by_ids(&tables(), "acme", &ids, 3).expect("valid lookup");
    let sizes: Vec<usize> = statements
        .iter()
        .map(|s| match s.params.get("capture_ids") {
            Some(Param::Uuids(chunk)) => chunk.len(),
            other => panic!("capture_ids is {other:?}"),
        })
        .collect();
    assert_eq!(sizes, [1000, 1000, 500]);
    let too_many: BTreeSet<Uuid> = (0..=MAX_LOOKUP_IDS as u128).map(Uuid::from_u128).collect();
    assert!(matches!(
        get_by_ids(&tables(), "acme", &too_many, 3),
        Err(ReaderError::TooManyIds { .. })
    ));
}

#[test]
fn reader_page_size_is_bounded_and_one_extra_row_is_asked_for() {
    assert!(PageSize::new(0).is_err());
    assert!(PageSize::new(MAX_PAGE_SIZE + 1).is_err());
    let statement = search_page(&tables(), &tenant_query(), 7).expect("valid query");
    assert_eq!(statement.params.get("limit"), Some(&Param::UInt64(101)));
}

#[test]
fn reader_a_tenant_is_required() {
    let mut query = tenant_query();
    query.filter.tenant_id.clear();
    assert_eq!(
        search_page(&tables(), &query, 7),
        Err(ReaderError::MissingTenant)
    );
    assert_eq!(
        get_by_ids(&tables(), "", &BTreeSet::new(), 7),
        Err(ReaderError::MissingTenant)
    );
}

#[test]
fn reader_a_cursor_of_another_tenant_is_refused() {
    let mut query = full_query();
    query.filter.tenant_id = "other".to_owned();
    assert!(matches!(
        search_page(&tables(), &query, 7),
        Err(ReaderError::CursorTenantMismatch { .. })
    ));
}

#[test]
fn reader_an_inverted_range_is_refused() {
    let mut query = tenant_query();
    query.filter.step = Range {
        from: Some(5),
        until: Some(4),
    };
    assert_eq!(
        search_page(&tables(), &query, 7),
        Err(ReaderError::InvertedRange {
            filter: "step",
            from: 5,
            until: 4
        })
    );
}

#[test]
fn reader_values_travel_only_as_parameters() {
    let mut query = full_query();
    query.filter.tenant_id = "x'; DROP TABLE cc_capture_raw; --".to_owned();
    if let Some(c) = query.cursor.as_mut() {
        c.tenant_id = query.filter.tenant_id.clone();
    }
    let statement = search_page(&tables(), &query, 7).expect("valid query");
    assert!(!statement.sql.contains("DROP TABLE"), "{}", statement.sql);
    assert_eq!(
        statement.params.get("tenant_id"),
        Some(&Param::String(query.filter.tenant_id.clone()))
    );
}

#[test]
fn reader_result_columns_follow_the_descriptor_table() {
    let names: Vec<&str> = result_columns().iter().map(|c| c.name).collect();
    let table: Vec<&str> = CAPTURE_COLUMNS.iter().map(|c| c.name).collect();
    assert_eq!(names, table);
}

#[test]
fn reader_a_cursor_token_round_trips_and_bad_tokens_are_typed_errors() {
    let mut c = cursor();
    c.tenant_id = "a:b%c".to_owned();
    let token = c.to_token();
    assert_eq!(Cursor::from_token(&token), Ok(c));
    for bad in [
        "",
        "c1:1",
        "c2:1:2:3:a:b:c",
        "c1:x:2:00000000-0000-0000-0000-000000000005:a:b:c",
        "c1:1:2:00000000-0000-0000-0000-000000000005:%zz:b:c",
    ] {
        assert!(
            matches!(Cursor::from_token(bad), Err(ReaderError::BadCursor { .. })),
            "{bad}"
        );
    }
}

#[test]
fn reader_a_page_limits_inside_the_aggregation_in_key_order() {
    // Without this the GROUP BY aggregates every matching row before the
    // LIMIT applies: ~1 s per page at 50,000 captures instead of ~25 ms.
    let sql = search_page(&tables(), &tenant_query(), 7)
        .expect("valid query")
        .sql;
    let inner_end = sql.rfind("\n)").expect("a subquery");
    assert!(
        sql[..inner_end].ends_with(
            "GROUP BY tenant_id, experiment_id, run_id, captured_at_ns, capture_id\n    \
             ORDER BY tenant_id, experiment_id, run_id, captured_at_ns, capture_id\n    \
             LIMIT {limit:UInt64}"
        ),
        "{sql}"
    );
    assert!(
        sql.ends_with("SETTINGS optimize_aggregation_in_order = 1"),
        "{sql}"
    );
}
