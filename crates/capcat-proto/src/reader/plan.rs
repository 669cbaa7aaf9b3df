//! The reader's statements.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::config::MAX_CHUNK;
use crate::descriptor::CAPTURE_IDENTITY;
use crate::fragments::{MembershipBound, PINNED_VERSION_PARAM, membership_predicate, pinned_rows};
use crate::reader::error::ReaderError;
use crate::reader::projection::{
    inner_select_list, latest_row_tail, outer_select_list, result_columns, row_select_list,
};
use crate::reader::query::{SearchQuery, filter_conditions};
use crate::statement::{Column, ColumnType, Expect, Param, Rows, Settings, Statement, Value};
use crate::tables::Tables;

/// The most ids one lookup serves (in chunks of [`MAX_CHUNK`]).
pub const MAX_LOOKUP_IDS: usize = 100 * MAX_CHUNK;

/// `reader.pin_snapshot`: the published head, read sequentially consistent.
///
/// `select_sequential_consistency` because the head decides what a reader
/// will see: a lagging replica would pin a smaller snapshot, or reject a
/// selection pinned elsewhere as "no longer resolving". `ifNull(..., 0)`
/// because `max()` over an empty table is NULL under
/// `aggregate_functions_null_for_empty`; versions start at 1, so W = 0
/// admits nothing rather than everything.
pub fn pin_snapshot(tables: &Tables) -> Statement {
    Statement {
        name: "reader.pin_snapshot",
        sql: format!(
            "SELECT ifNull(max(index_version), 0) AS published_head FROM {}",
            tables.index_watermark()
        ),
        params: BTreeMap::new(),
        settings: Settings {
            select_sequential_consistency: true,
            max_execution_time_s: None,
        },
        expect: Expect::Rows(vec![Column {
            name: "published_head",
            ty: ColumnType::UInt64,
        }]),
        data: None,
    }
}

/// Reads the row of [`pin_snapshot`].
pub fn decode_pinned_version(rows: &Rows) -> Result<u64, ReaderError> {
    match rows.0.as_slice() {
        [row] => match row.as_slice() {
            [Value::UInt64(w)] => Ok(*w),
            other => Err(ReaderError::Malformed {
                statement: "reader.pin_snapshot",
                message: format!("expected one unsigned integer, got {other:?}"),
            }),
        },
        other => Err(ReaderError::Malformed {
            statement: "reader.pin_snapshot",
            message: format!("expected one row, got {}", other.len()),
        }),
    }
}

/// The resolving query of a page: filters and membership, GROUP BY
/// identity, one aggregate, unpacked outside.
///
/// A page orders and limits INSIDE the aggregation with
/// `optimize_aggregation_in_order`: the GROUP BY key is the sort key's
/// prefix, so the server aggregates groups in key order and stops after
/// `limit`. Without it every page aggregates every matching row before the
/// LIMIT applies (measured on 50,000 captures: ~1 s against ~25 ms per page;
/// docs/benchmarks.md). The same page kept with `LIMIT 1 BY`, as a lookup
/// is, was no faster (10.3-10.5 ms against 9.7-10.0 ms).
///
/// `from` is `{p}_capture_raw`, whose key serves the keyset order.
fn resolving_sql(from: &str, conditions: &[String]) -> String {
    let identity = CAPTURE_IDENTITY.join(", ");
    format!(
        "SELECT {outer}\nFROM (\n    SELECT {inner}\n    FROM {from}\n    WHERE {conditions}\n    \
         GROUP BY {identity}\n    ORDER BY {identity}\n    LIMIT {{limit:UInt64}}\n)\n\
         ORDER BY {identity}\nSETTINGS optimize_aggregation_in_order = 1",
        outer = outer_select_list(),
        inner = inner_select_list(),
        conditions = conditions.join("\n      AND "),
    )
}

/// The resolving query of a lookup: the same conditions, and of each
/// capture's rows the one the page's `argMax` would pick, kept whole
/// ([`latest_row_tail`]) rather than aggregated into a tuple and unpacked.
/// A lookup names its ids, so it has no order to aggregate in and no LIMIT
/// to stop at; keeping the row builds no tuple of 18 columns per row and
/// needs no outer query (docs/benchmarks.md). `from` is
/// `{p}_capture_by_id`, the same rows keyed by id; the conditions, and so
/// what a reader may see, are the same text as a page's. The clauses are
/// laid out as [`resolving_sql`] lays out its inner query, one conjunct a
/// line, which is where the model checker reads the pinned conditions.
///
/// The converted columns keep their names (`reinterpretAsUInt64(minimum)
/// AS minimum`); no condition or ordering reads a converted column, only
/// identity, version and pack identity, which are selected as they are.
fn latest_row_sql(from: &str, conditions: &[String]) -> String {
    format!(
        "SELECT {columns}\n    FROM {from}\n    WHERE {conditions}\n{tail}",
        columns = row_select_list(),
        conditions = conditions.join("\n      AND "),
        tail = latest_row_tail(),
    )
}

/// The pinned read's two conditions: rows written for a version published
/// at or below W, of packs that are members at W.
fn pinned_conditions(pinned: u64, params: &mut BTreeMap<String, Param>, tables: &Tables) -> String {
    params.insert(PINNED_VERSION_PARAM.to_owned(), Param::UInt64(pinned));
    format!(
        "{}\n      AND {}",
        pinned_rows(tables),
        membership_predicate(tables, MembershipBound::Pinned)
    )
}

/// `reader.search_page`: one page of captures at the pinned version `pinned`.
///
/// Asks for `page_size + 1` rows so the caller knows whether another page
/// exists without issuing it. The keyset comparison is STRICT: `>=` would
/// re-read the row the cursor was issued for and duplicate one capture at
/// every page boundary.
pub fn search_page(
    tables: &Tables,
    query: &SearchQuery,
    pinned: u64,
) -> Result<Statement, ReaderError> {
    let mut params = BTreeMap::new();
    let mut conditions = filter_conditions(&query.filter, &mut params)?;
    conditions.push(pinned_conditions(pinned, &mut params, tables));
    if let Some(cursor) = &query.cursor {
        if cursor.tenant_id != query.filter.tenant_id {
            return Err(ReaderError::CursorTenantMismatch {
                tenant: query.filter.tenant_id.clone(),
                cursor_tenant: cursor.tenant_id.clone(),
            });
        }
        conditions.push(format!(
            "({}) > ({{after_tenant_id:String}}, {{after_experiment_id:String}}, \
             {{after_run_id:String}}, {{after_captured_at_ns:UInt64}}, {{after_capture_id:UUID}})",
            CAPTURE_IDENTITY.join(", ")
        ));
        let after = [
            ("after_tenant_id", Param::String(cursor.tenant_id.clone())),
            (
                "after_experiment_id",
                Param::String(cursor.experiment_id.clone()),
            ),
            ("after_run_id", Param::String(cursor.run_id.clone())),
            ("after_captured_at_ns", Param::UInt64(cursor.captured_at_ns)),
            ("after_capture_id", Param::Uuid(cursor.capture_id)),
        ];
        for (name, value) in after {
            params.insert(name.to_owned(), value);
        }
    }
    params.insert("limit".to_owned(), Param::UInt64(query.page_size.get() + 1));
    Ok(Statement {
        name: "reader.search_page",
        sql: resolving_sql(&tables.capture_raw(), &conditions),
        params,
        settings: Settings::default(),
        expect: Expect::Rows(result_columns()),
        data: None,
    })
}

/// `reader.get_by_ids`: the captures of `tenant` among `ids`, resolved at
/// `pinned`, read from `{p}_capture_by_id` (a primary-key range per id, so
/// the cost follows the ids asked for, not the size of the tenant), as one
/// statement per chunk of at most [`MAX_CHUNK`] ids (a
/// longer list would push the statement past `max_query_size`).
pub fn get_by_ids(
    tables: &Tables,
    tenant: &str,
    ids: &BTreeSet<Uuid>,
    pinned: u64,
) -> Result<Vec<Statement>, ReaderError> {
    if tenant.is_empty() {
        return Err(ReaderError::MissingTenant);
    }
    if ids.len() > MAX_LOOKUP_IDS {
        return Err(ReaderError::TooManyIds {
            requested: ids.len(),
            max: MAX_LOOKUP_IDS,
        });
    }
    let ids: Vec<Uuid> = ids.iter().copied().collect();
    Ok(ids
        .chunks(MAX_CHUNK)
        .map(|chunk| {
            let mut params = BTreeMap::new();
            params.insert("tenant_id".to_owned(), Param::String(tenant.to_owned()));
            params.insert("capture_ids".to_owned(), Param::Uuids(chunk.to_vec()));
            let conditions = vec![
                "tenant_id = {tenant_id:String}".to_owned(),
                "capture_id IN {capture_ids:Array(UUID)}".to_owned(),
                pinned_conditions(pinned, &mut params, tables),
            ];
            Statement {
                name: "reader.get_by_ids",
                sql: latest_row_sql(&tables.capture_by_id(), &conditions),
                params,
                settings: Settings::default(),
                expect: Expect::Rows(result_columns()),
                data: None,
            }
        })
        .collect())
}
