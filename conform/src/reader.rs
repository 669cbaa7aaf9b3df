//! The reader machines in the kit: a search page and a lookup by ids. Their
//! starts (a query, or a tenant with ids and a pinned version), their
//! outcomes, and the rows the kit's catalog answers them with.

use std::collections::BTreeSet;

use capcat_proto::reader::{
    Cursor, GetByIds, Lookup, Page, PageSize, Range, ReaderError, SearchFilter, SearchPage,
    SearchQuery, encode_record,
};
use capcat_proto::statement::Param;
use capcat_proto::{CaptureDescriptor, Input, Machine, Rows, Statement, Step, Tables};
use serde_json::{Value as Json, json};
use uuid::Uuid;

use crate::descriptor::descriptor_json;
use crate::error::ConformError;
use crate::start::{Ended, Reference};
use crate::wire::{field, str_field, u64_field, uuid_field, uuid_json};

fn bad(what: String) -> ConformError {
    ConformError::BadMessage { what }
}

fn opt_str(j: &Json, key: &str) -> Result<Option<String>, ConformError> {
    match j.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad(format!("`{key}` is not a string: {other}"))),
    }
}

fn opt_u64(j: &Json, key: &str) -> Result<Option<u64>, ConformError> {
    match j.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(format!("`{key}` is not an unsigned integer: {v}"))),
    }
}

fn range_json(r: &Range) -> Json {
    json!({ "from": r.from, "until": r.until })
}

fn range_from(j: &Json) -> Result<Range, ConformError> {
    Ok(Range {
        from: opt_u64(j, "from")?,
        until: opt_u64(j, "until")?,
    })
}

/// A search query: `{"filter": {...}, "cursor": token or null, "page_size": n}`.
/// The cursor travels as its token (`Cursor::to_token`), the form a
/// caller is handed.
pub fn query_json(q: &SearchQuery) -> Json {
    let f = &q.filter;
    json!({
        "filter": {
            "tenant_id": f.tenant_id,
            "experiment_id": f.experiment_id,
            "run_id": f.run_id,
            "captured_at_ns": range_json(&f.captured_at_ns),
            "tensor_name": f.tensor_name,
            "tensor_name_prefix": f.tensor_name_prefix,
            "dtype": f.dtype,
            "step": range_json(&f.step),
        },
        "cursor": q.cursor.as_ref().map(Cursor::to_token),
        "page_size": q.page_size.get(),
    })
}

/// The query [`query_json`] wrote.
pub fn query_from(j: &Json) -> Result<SearchQuery, ConformError> {
    let f = field(j, "filter")?;
    let cursor = match opt_str(j, "cursor")? {
        None => None,
        Some(token) => Some(Cursor::from_token(&token).map_err(|e| bad(format!("cursor: {e}")))?),
    };
    Ok(SearchQuery {
        filter: SearchFilter {
            tenant_id: str_field(f, "tenant_id")?.to_owned(),
            experiment_id: opt_str(f, "experiment_id")?,
            run_id: opt_str(f, "run_id")?,
            captured_at_ns: range_from(field(f, "captured_at_ns")?)?,
            tensor_name: opt_str(f, "tensor_name")?,
            tensor_name_prefix: opt_str(f, "tensor_name_prefix")?,
            dtype: opt_str(f, "dtype")?,
            step: range_from(field(f, "step")?)?,
        },
        cursor,
        page_size: PageSize::new(u64_field(j, "page_size")?)
            .map_err(|e| bad(format!("page_size: {e}")))?,
    })
}

/// The ids of a lookup, from its `ids` list.
pub fn ids_from(j: &Json) -> Result<BTreeSet<Uuid>, ConformError> {
    field(j, "ids")?
        .as_array()
        .ok_or_else(|| bad("`ids` is not a list".to_owned()))?
        .iter()
        .map(|id| uuid_field(&json!({ "id": id }), "id"))
        .collect()
}

/// A reader error.
pub fn reader_error(e: &ReaderError) -> Json {
    match e {
        ReaderError::MissingTenant => json!({ "kind": "missing_tenant" }),
        ReaderError::InvertedRange {
            filter,
            from,
            until,
        } => json!({ "kind": "inverted_range", "filter": filter, "from": from, "until": until }),
        ReaderError::BadPageSize { requested, max } => {
            json!({ "kind": "bad_page_size", "requested": requested, "max": max })
        }
        ReaderError::CursorTenantMismatch {
            tenant,
            cursor_tenant,
        } => json!({
            "kind": "cursor_tenant_mismatch", "tenant": tenant, "cursor_tenant": cursor_tenant,
        }),
        ReaderError::BadCursor { token, reason } => {
            json!({ "kind": "bad_cursor", "token": token, "detail": reason })
        }
        ReaderError::TooManyIds { requested, max } => {
            json!({ "kind": "too_many_ids", "requested": requested, "max": max })
        }
        ReaderError::SnapshotAhead { pinned, head } => {
            json!({ "kind": "snapshot_ahead", "pinned": pinned, "head": head })
        }
        ReaderError::Unresolved {
            tenant,
            pinned,
            missing,
        } => json!({
            "kind": "unresolved", "tenant": tenant, "pinned": pinned,
            "missing": missing.iter().map(|id| uuid_json(*id)).collect::<Vec<_>>(),
        }),
        ReaderError::Statement { statement, failure } => {
            crate::outcome::statement_failed(statement, failure)
        }
        ReaderError::Malformed { statement, message } => {
            crate::outcome::malformed(statement, message)
        }
        other => json!({ "kind": "unknown", "detail": other.to_string() }),
    }
}

fn page_json(page: &Page) -> Json {
    json!({
        "pinned": page.pinned,
        "records": page.records.iter().map(descriptor_json).collect::<Vec<_>>(),
        "next": page.next.as_ref().map(Cursor::to_token),
    })
}

fn lookup_json(lookup: &Lookup) -> Json {
    json!({
        "tenant_id": lookup.tenant_id,
        "pinned": lookup.pinned,
        "records": lookup.records.values().map(descriptor_json).collect::<Vec<_>>(),
        "missing": lookup.missing.iter().map(|id| uuid_json(*id)).collect::<Vec<_>>(),
    })
}

fn done<T>(outcome: &Result<T, ReaderError>, ok: impl Fn(&T) -> Json) -> Json {
    json!({ "outcome": match outcome {
        Ok(value) => json!({ "ok": ok(value) }),
        Err(e) => json!({ "err": reader_error(e) }),
    }})
}

/// A reader machine, or the error its constructor refused the start with
/// (a query that never reaches the server: the driver answers the start
/// with `done` at once).
#[derive(Debug)]
pub enum ReaderMachine<M> {
    /// The machine.
    Running(M),
    /// The start was refused.
    Refused(ReaderError),
}

impl Reference for ReaderMachine<SearchPage> {
    fn poll(&mut self) -> Step<Json> {
        match self {
            Self::Running(m) => match m.poll() {
                Step::Execute(stmt) => Step::Execute(stmt),
                Step::Draw { below } => Step::Draw { below },
                Step::Done(outcome) => Step::Done(done(&outcome, page_json)),
            },
            Self::Refused(e) => Step::Done(done::<Page>(&Err(e.clone()), page_json)),
        }
    }
    fn handle(&mut self, input: Input) {
        if let Self::Running(m) = self {
            m.handle(input);
        }
    }
    fn ended(&mut self) -> Ended {
        Ended::default()
    }
}

impl Reference for ReaderMachine<GetByIds> {
    fn poll(&mut self) -> Step<Json> {
        match self {
            Self::Running(m) => match m.poll() {
                Step::Execute(stmt) => Step::Execute(stmt),
                Step::Draw { below } => Step::Draw { below },
                Step::Done(outcome) => Step::Done(done(&outcome, lookup_json)),
            },
            Self::Refused(e) => Step::Done(done::<Lookup>(&Err(e.clone()), lookup_json)),
        }
    }
    fn handle(&mut self, input: Input) {
        if let Self::Running(m) = self {
            m.handle(input);
        }
    }
    fn ended(&mut self) -> Ended {
        Ended::default()
    }
}

/// capcat-proto's search page for `query`.
pub fn search(tables: Tables, query: SearchQuery) -> Box<dyn Reference> {
    Box::new(match SearchPage::new(tables, query) {
        Ok(m) => ReaderMachine::Running(m),
        Err(e) => ReaderMachine::Refused(e),
    })
}

/// capcat-proto's lookup of `ids`.
pub fn lookup(
    tables: Tables,
    tenant: &str,
    ids: BTreeSet<Uuid>,
    pinned: u64,
) -> Box<dyn Reference> {
    Box::new(match GetByIds::new(tables, tenant, ids, pinned) {
        Ok(m) => ReaderMachine::Running(m),
        Err(e) => ReaderMachine::Refused(e),
    })
}

/// The rows the kit's catalog answers a reader statement with, from its
/// `captures`: those of the tenant, after the keyset cursor, among the ids
/// asked for, in key order, up to the limit. Which captures a pinned
/// version admits is not evaluated here (the model checks it, and the
/// engine's tests run it): a reader machine only pages and decodes what the
/// server returns. `None` for a statement that is not a reader's.
pub fn answer(captures: &[CaptureDescriptor], stmt: &Statement) -> Option<Rows> {
    let string = |name: &str| match stmt.params.get(name) {
        Some(Param::String(s)) => Some(s.clone()),
        _ => None,
    };
    let number = |name: &str| match stmt.params.get(name) {
        Some(Param::UInt64(n)) => Some(*n),
        _ => None,
    };
    let key = |d: &CaptureDescriptor| {
        (
            d.tenant_id.clone(),
            d.experiment_id.clone(),
            d.run_id.clone(),
            d.captured_at_ns,
            d.capture_id,
        )
    };
    let tenant = string("tenant_id")?;
    let mut rows: Vec<&CaptureDescriptor> =
        captures.iter().filter(|d| d.tenant_id == tenant).collect();
    rows.sort_by_key(|d| key(d));
    match stmt.name {
        "reader.search_page" => {
            if let (Some(t), Some(e), Some(r), Some(at), Some(Param::Uuid(id))) = (
                string("after_tenant_id"),
                string("after_experiment_id"),
                string("after_run_id"),
                number("after_captured_at_ns"),
                stmt.params.get("after_capture_id"),
            ) {
                let after = (t, e, r, at, *id);
                rows.retain(|d| key(d) > after);
            }
            let limit = usize::try_from(number("limit")?).unwrap_or(usize::MAX);
            rows.truncate(limit);
        }
        "reader.get_by_ids" => {
            let Some(Param::Uuids(ids)) = stmt.params.get("capture_ids") else {
                return None;
            };
            rows.retain(|d| ids.contains(&d.capture_id));
        }
        _ => return None,
    }
    Some(Rows(rows.into_iter().map(encode_record).collect()))
}
