//! Storage of demand without compare-and-swap: `{p}_demand_events`.
//!
//! Because [`fold`](super::fold::fold) is a join, no publisher ever reads,
//! merges and writes back: every report is appended as one row, and readers
//! fold what they find. Two publishers appending at once both survive, a
//! duplicated append changes nothing, and a lost append is repaired by the
//! next report or scan. A compaction appends the fold of what it read as one
//! more row, and only then deletes exactly the rows it folded, by id; rows
//! of a newer schema are never in that list.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::codec::{self, DecodeError};
use super::event::{DemandEvent, Source};
use super::fold::{Folded, SkipReason, Skipped};
use super::record::{CURRENT_VERSION, UnknownVersion};
use crate::fragments::SERVER_NOW_NS;
use crate::statement::{Column, ColumnType, Expect, Param, Rows, Settings, Statement, Value};
use crate::tables::Tables;

/// The columns of `{p}_demand_events`, in order, with their ClickHouse
/// types, as the schema guard expects to find them in `system.columns`.
pub const COLUMNS: &[(&str, &str)] = &[
    ("event_id", "UUID"),
    ("shard_id", "String"),
    ("source", "String"),
    ("v", "UInt64"),
    ("record", "String"),
    ("appended_at_ns", "UInt64"),
];

/// The table's engine clause, as the schema guard expects it.
pub const ENGINE: &str = "MergeTree ORDER BY (shard_id, appended_at_ns, event_id)";

/// At most this many event ids go into one compaction DELETE.
pub const DELETE_CHUNK: usize = 1000;

/// The statement time cap of every demand statement, in seconds: the
/// publishers' 15 s budget.
pub const MAX_EXECUTION_TIME_S: u32 = 15;

/// `CREATE TABLE IF NOT EXISTS {p}_demand_events (...)`.
///
/// `event_id` names a row for compaction; `v` repeats the record's version
/// so a reader can skip a newer schema without parsing its text;
/// `appended_at_ns` is stamped by the server's clock.
pub fn ddl(tables: &Tables) -> String {
    let mut columns = String::new();
    for (i, (name, ty)) in COLUMNS.iter().enumerate() {
        if i > 0 {
            columns.push_str(",\n");
        }
        columns.push_str("    ");
        columns.push_str(name);
        columns.push(' ');
        columns.push_str(ty);
    }
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (\n{columns}\n) ENGINE = {ENGINE}",
        table = tables.demand_events(),
    )
}

/// [`ddl`] as a statement.
pub fn create_table(tables: &Tables) -> Statement {
    Statement {
        name: "demand.create_table",
        sql: ddl(tables),
        params: BTreeMap::new(),
        settings: Settings::default(),
        expect: Expect::Nothing,
        data: None,
    }
}

fn settings() -> Settings {
    Settings {
        select_sequential_consistency: false,
        max_execution_time_s: Some(MAX_EXECUTION_TIME_S),
    }
}

/// Appends one event as one row. `event_id` is the caller's fresh UUID
/// (this crate draws no randomness); the server stamps `appended_at_ns`.
///
/// The record is written normalized at the current version. An ambiguous
/// failure may be retried with the same or a new id: a duplicate is
/// absorbed by the join.
pub fn append(tables: &Tables, event: &DemandEvent, event_id: Uuid) -> Statement {
    let record = codec::encode(&event.record);
    Statement {
        name: "demand.append",
        sql: format!(
            "INSERT INTO {table} (event_id, shard_id, source, v, record, appended_at_ns) \
             SELECT {{event_id:UUID}}, {{shard_id:String}}, {{source:String}}, {{v:UInt64}}, \
             {{record:String}}, {SERVER_NOW_NS}",
            table = tables.demand_events(),
        ),
        params: BTreeMap::from([
            ("event_id".to_owned(), Param::Uuid(event_id)),
            ("shard_id".to_owned(), Param::String(event.shard_id.clone())),
            (
                "source".to_owned(),
                Param::String(event.source.as_str().to_owned()),
            ),
            ("v".to_owned(), Param::UInt64(u64::from(CURRENT_VERSION))),
            ("record".to_owned(), Param::String(record)),
        ]),
        settings: settings(),
        expect: Expect::Nothing,
        data: None,
    }
}

/// The columns [`read_events`] returns, in order.
pub fn read_columns() -> Vec<Column> {
    vec![
        Column {
            name: "event_id",
            ty: ColumnType::Uuid,
        },
        Column {
            name: "shard_id",
            ty: ColumnType::String,
        },
        Column {
            name: "source",
            ty: ColumnType::String,
        },
        Column {
            name: "v",
            ty: ColumnType::UInt64,
        },
        Column {
            name: "record",
            ty: ColumnType::String,
        },
        Column {
            name: "appended_at_ns",
            ty: ColumnType::UInt64,
        },
    ]
}

/// Reads a catalog's demand events, or one shard's when `shard_id` is
/// given, newest first, at most `limit` rows.
///
/// Ask for one more row than you mean to fold ([`rebuild`] does not care)
/// to learn whether the read was cut short: a fold of a cut read can only
/// understate demand, never overstate it, and a compaction folds the older
/// rows into one new one so the newest rows carry them.
pub fn read_events(tables: &Tables, shard_id: Option<&str>, limit: u64) -> Statement {
    let mut params = BTreeMap::from([("limit".to_owned(), Param::UInt64(limit))]);
    let filter = match shard_id {
        Some(shard) => {
            params.insert("shard_id".to_owned(), Param::String(shard.to_owned()));
            " WHERE shard_id = {shard_id:String}"
        }
        None => "",
    };
    Statement {
        name: if shard_id.is_some() {
            "demand.read_shard_events"
        } else {
            "demand.read_events"
        },
        sql: format!(
            "SELECT event_id, shard_id, source, v, record, appended_at_ns FROM {table}{filter} \
             ORDER BY appended_at_ns DESC, event_id DESC LIMIT {{limit:UInt64}}",
            table = tables.demand_events(),
        ),
        params,
        settings: settings(),
        expect: Expect::Rows(read_columns()),
        data: None,
    }
}

/// One row of `{p}_demand_events`, as read back.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StoredEvent {
    /// The row's id.
    pub event_id: Uuid,
    /// When the server appended it (nanoseconds).
    pub appended_at_ns: u64,
    /// The event, or why it cannot take part in a fold.
    pub event: Result<DemandEvent, Skipped>,
}

/// Decodes the rows of [`read_events`]. A row that cannot be read becomes
/// a [`Skipped`] entry (the row stays in storage); a row of a newer schema
/// is recognised by its `v` column and its text is not parsed.
pub fn decode_rows(rows: &Rows) -> Vec<Result<StoredEvent, Skipped>> {
    rows.0
        .iter()
        .enumerate()
        .map(|(index, row)| decode_row(index, row))
        .collect()
}

fn decode_row(index: usize, row: &[Value]) -> Result<StoredEvent, Skipped> {
    let malformed = |what: &str| Skipped {
        shard_id: String::new(),
        source: None,
        reason: SkipReason::MalformedRow {
            index,
            what: what.to_owned(),
        },
    };
    let [event_id, shard_id, source, v, record, appended_at_ns] = row else {
        return Err(malformed("expected 6 columns"));
    };
    let (
        Value::Uuid(event_id),
        Value::String(shard_id),
        Value::String(source_name),
        Value::UInt64(v),
        Value::String(text),
        Value::UInt64(appended_at_ns),
    ) = (event_id, shard_id, source, v, record, appended_at_ns)
    else {
        return Err(malformed(
            "expected (UUID, String, String, UInt64, String, UInt64)",
        ));
    };
    let source = Source::from_name(source_name);
    let skipped = |reason: SkipReason| Skipped {
        shard_id: shard_id.clone(),
        source,
        reason,
    };
    let event = if *v > u64::from(CURRENT_VERSION) {
        // A newer schema: not parsed, not interpreted, never compacted away.
        Err(skipped(SkipReason::UnknownVersion(UnknownVersion {
            found: *v,
            known: CURRENT_VERSION,
        })))
    } else if let Some(source) = source {
        match codec::decode(text) {
            Ok(record) => Ok(DemandEvent {
                shard_id: shard_id.clone(),
                source,
                record,
            }),
            Err(DecodeError::UnknownVersion { found, known }) => {
                Err(skipped(SkipReason::UnknownVersion(UnknownVersion {
                    found,
                    known,
                })))
            }
            Err(error) => Err(skipped(SkipReason::Undecodable(error))),
        }
    } else {
        Err(skipped(SkipReason::UnknownSource {
            name: source_name.clone(),
        }))
    };
    Ok(StoredEvent {
        event_id: *event_id,
        appended_at_ns: *appended_at_ns,
        event,
    })
}

/// The fold of stored rows: equal to [`fold`](super::fold::fold) of the
/// events they hold, age clock included, with every unreadable row in
/// [`Folded::skipped`].
pub fn rebuild(rows: &Rows) -> Folded {
    let mut folded = Folded::default();
    for row in decode_rows(rows) {
        match row.and_then(|stored| stored.event) {
            Ok(event) => folded.absorb(&event),
            Err(skipped) => folded.skipped.push(skipped),
        }
    }
    folded
}

/// The statements of one compaction, in two phases.
///
/// Run every statement of `appends` first; run `deletes` only once every
/// append has succeeded (an ambiguous failure means: stop, delete
/// nothing). If a delete fails or is never run, the folded rows and the
/// compacted row stand side by side, which the join absorbs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Compaction {
    /// One append per shard: the fold of that shard's readable rows.
    pub appends: Vec<Statement>,
    /// Deletes of exactly the rows folded into `appends`, by id, in chunks
    /// of at most [`DELETE_CHUNK`].
    pub deletes: Vec<Statement>,
}

/// Plans a compaction of `stored` rows: per shard with more than one
/// readable row, append their join as one [`Source::Compaction`] row (ids
/// from `next_id`, the caller's UUIDs), then delete the rows it replaces.
/// Rows of a newer schema, undecodable rows and rows of unknown source are
/// never deleted.
pub fn compaction(
    tables: &Tables,
    stored: &[StoredEvent],
    mut next_id: impl FnMut() -> Uuid,
) -> Compaction {
    let mut by_shard: BTreeMap<&str, (Folded, Vec<Uuid>)> = BTreeMap::new();
    for row in stored {
        if let Ok(event) = &row.event {
            let (folded, ids) = by_shard.entry(event.shard_id.as_str()).or_default();
            folded.absorb(event);
            ids.push(row.event_id);
        }
    }
    let mut plan = Compaction::default();
    let mut doomed = Vec::new();
    for (shard_id, (folded, ids)) in by_shard {
        if ids.len() < 2 {
            continue;
        }
        let Some(record) = folded.shards.get(shard_id) else {
            continue;
        };
        let event = DemandEvent {
            shard_id: shard_id.to_owned(),
            source: Source::Compaction,
            record: record.clone(),
        };
        plan.appends.push(append(tables, &event, next_id()));
        doomed.extend(ids);
    }
    for chunk in doomed.chunks(DELETE_CHUNK) {
        plan.deletes.push(Statement {
            name: "demand.compaction_delete",
            sql: format!(
                "DELETE FROM {table} WHERE event_id IN {{event_ids:Array(UUID)}} \
                 AND v <= {{v:UInt64}}",
                table = tables.demand_events(),
            ),
            params: BTreeMap::from([
                ("event_ids".to_owned(), Param::Uuids(chunk.to_vec())),
                ("v".to_owned(), Param::UInt64(u64::from(CURRENT_VERSION))),
            ]),
            settings: settings(),
            expect: Expect::Nothing,
            data: None,
        });
    }
    plan
}
