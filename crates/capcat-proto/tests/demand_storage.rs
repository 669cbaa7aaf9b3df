//! The canonical SQL of `{p}_demand_events` and the stored text, pinned.

use capcat_proto::demand::codec::MAX_RECORD_TEXT;
use capcat_proto::demand::storage::{self, COLUMNS};
use capcat_proto::demand::{DecodeError, DemandEvent, DemandRecord, Mark, decode, encode};
use capcat_proto::{Expect, Param, Statement, Tables};
use expect_test::expect;
use uuid::Uuid;

fn tables() -> Tables {
    Tables::new("cc").expect("valid prefix")
}

/// Every `{name:Type}` placeholder has a parameter of that type, and every
/// parameter has a placeholder: values never enter the SQL text.
fn assert_placeholders_match(statement: &Statement) {
    for (name, param) in &statement.params {
        let placeholder = format!("{{{name}:{}}}", param.clickhouse_type());
        assert!(
            statement.sql.contains(&placeholder),
            "{}: {placeholder} missing from {}",
            statement.name,
            statement.sql
        );
    }
    let count = statement.sql.matches('{').count();
    let distinct = statement.params.len();
    assert_eq!(count, distinct, "{}: stray placeholder", statement.name);
}

#[test]
fn the_table_ddl() {
    expect![[r#"
        CREATE TABLE IF NOT EXISTS cc_demand_events (
            event_id UUID,
            shard_id String,
            source String,
            v UInt64,
            record String,
            appended_at_ns UInt64
        ) ENGINE = MergeTree ORDER BY (shard_id, appended_at_ns, event_id)"#]]
    .assert_eq(&storage::ddl(&tables()));
    assert_eq!(storage::create_table(&tables()).expect, Expect::Nothing);
    assert_eq!(COLUMNS.len(), storage::read_columns().len());
    for ((name, _), column) in COLUMNS.iter().zip(storage::read_columns()) {
        assert_eq!(*name, column.name);
    }
}

#[test]
fn the_append_statement() {
    let event = DemandEvent::writer_sealed("shard-a", 2, 12, 4_096, 1_700);
    let statement = storage::append(&tables(), &event, Uuid::from_u128(7));
    expect![[r#"INSERT INTO cc_demand_events (event_id, shard_id, source, v, record, appended_at_ns) SELECT {event_id:UUID}, {shard_id:String}, {source:String}, {v:UInt64}, {record:String}, toUnixTimestamp64Nano(now64(9))"#]]
    .assert_eq(&statement.sql);
    assert_placeholders_match(&statement);
    assert_eq!(
        statement.params.get("record"),
        Some(&Param::String(
            "{\"v\":1,\"sealed\":12,\"sealed_epoch\":2,\"merged\":null,\"merged_epoch\":null,\
             \"bytes\":4096,\"sealed_times\":[[12,1700]]}"
                .to_owned()
        ))
    );
    assert_eq!(statement.settings.max_execution_time_s, Some(15));
}

#[test]
fn the_read_statements() {
    let all = storage::read_events(&tables(), None, 10_001);
    expect![[r#"SELECT event_id, shard_id, source, v, record, appended_at_ns FROM cc_demand_events ORDER BY appended_at_ns DESC, event_id DESC LIMIT {limit:UInt64}"#]]
    .assert_eq(&all.sql);
    assert_placeholders_match(&all);
    let one = storage::read_events(&tables(), Some("shard-'a"), 100);
    expect![[r#"SELECT event_id, shard_id, source, v, record, appended_at_ns FROM cc_demand_events WHERE shard_id = {shard_id:String} ORDER BY appended_at_ns DESC, event_id DESC LIMIT {limit:UInt64}"#]]
    .assert_eq(&one.sql);
    assert_placeholders_match(&one);
    assert!(
        !one.sql.contains("shard-'a"),
        "a value entered the SQL text"
    );
    assert_eq!(all.expect, Expect::Rows(storage::read_columns()));
}

#[test]
fn the_compaction_statements() {
    let t = tables();
    let rows: Vec<_> = (0..2_500u128)
        .map(|i| storage::StoredEvent {
            event_id: Uuid::from_u128(i + 1),
            appended_at_ns: u64::try_from(i).expect("small"),
            event: Ok(DemandEvent::writer_sealed(
                "s",
                1,
                u64::try_from(i % 40).expect("small"),
                1,
                1,
            )),
        })
        .collect();
    let plan = storage::compaction(&t, &rows, || Uuid::from_u128(u128::MAX));
    assert_eq!(plan.appends.len(), 1);
    assert_eq!(plan.deletes.len(), 3, "2500 ids in chunks of 1000");
    expect![[r#"DELETE FROM cc_demand_events WHERE event_id IN {event_ids:Array(UUID)} AND v <= {v:UInt64}"#]]
    .assert_eq(&plan.deletes[0].sql);
    for statement in plan.appends.iter().chain(&plan.deletes) {
        assert_placeholders_match(statement);
    }
}

#[test]
fn the_stored_text_round_trips_and_tolerates_whitespace() {
    let record = DemandRecord {
        sealed: Some(Mark::new(12, 2)),
        merged: Some(Mark::new(8, 1)),
        bytes: 4_096,
        sealed_times: [(9, 1_000), (10, 1_100)].into_iter().collect(),
        ..DemandRecord::default()
    };
    let text = encode(&record);
    expect![[r#"{"v":1,"sealed":12,"sealed_epoch":2,"merged":8,"merged_epoch":1,"bytes":4096,"sealed_times":[[9,1000],[10,1100]]}"#]]
    .assert_eq(&text);
    assert_eq!(decode(&text), Ok(record.clone()));
    assert_eq!(record.merged_epoch(), Some(1));
    let spaced = " { \"v\" : 1 , \"sealed\" : 12 , \"sealed_epoch\" : 2 , \"merged\" : 8 , \
                  \"merged_epoch\" : 1 , \"bytes\" : 4096 , \"sealed_times\" : [ [ 9 , 1000 ] , \
                  [ 10 , 1100 ] ] } ";
    assert_eq!(decode(spaced), Ok(record));
}

/// Whether a decode error is the one a case expects.
type IsExpected = fn(&DecodeError) -> bool;

#[test]
fn bad_texts_give_typed_errors() {
    let cases: &[(&str, IsExpected)] = &[
        ("", |e| matches!(e, DecodeError::Syntax { at: 0, .. })),
        ("{\"sealed\":1}", |e| {
            matches!(e, DecodeError::Syntax { at: 1, .. })
        }),
        ("{\"v\":2,\"x\":1}", |e| {
            matches!(e, DecodeError::UnknownVersion { found: 2, known: 1 })
        }),
        ("{\"v\":99999999999999999999}", |e| {
            matches!(e, DecodeError::Syntax { .. })
        }),
        ("{\"v\":01}", |e| matches!(e, DecodeError::Syntax { .. })),
        (
            "{\"v\":1,\"sealed\":3,\"sealed_epoch\":null,\"merged\":null,\"merged_epoch\":null,\"bytes\":0,\"sealed_times\":[]}",
            |e| matches!(e, DecodeError::HalfMark { field: "sealed" }),
        ),
        (
            "{\"v\":1,\"sealed\":null,\"sealed_epoch\":null,\"merged\":null,\"merged_epoch\":null,\"bytes\":0,\"sealed_times\":[[5,1],[5,2]]}",
            |e| matches!(e, DecodeError::UnorderedSealedTimes { generation: 5 }),
        ),
        (
            "{\"v\":1,\"sealed\":null,\"sealed_epoch\":null,\"merged\":null,\"merged_epoch\":null,\"bytes\":0,\"sealed_times\":[]} x",
            |e| matches!(e, DecodeError::Syntax { .. }),
        ),
        (
            "{\"v\":1,\"sealed\":null,\"sealed_epoch\":null,\"merged\":null,\"merged_epoch\":null,\"bytes\":-1,\"sealed_times\":[]}",
            |e| matches!(e, DecodeError::Syntax { .. }),
        ),
    ];
    for (text, is_expected) in cases {
        let error = decode(text).expect_err(text);
        assert!(is_expected(&error), "{text}: {error:?}");
        assert!(!error.to_string().is_empty());
    }
    let long = " ".repeat(MAX_RECORD_TEXT + 1);
    assert!(matches!(decode(&long), Err(DecodeError::TooLong { .. })));
    let many: Vec<String> = (0..65).map(|g| format!("[{g},1]")).collect();
    let text = format!(
        "{{\"v\":1,\"sealed\":null,\"sealed_epoch\":null,\"merged\":null,\"merged_epoch\":null,\
         \"bytes\":0,\"sealed_times\":[{}]}}",
        many.join(",")
    );
    assert!(matches!(
        decode(&text),
        Err(DecodeError::TooManySealedTimes { .. })
    ));
}
