//! The driver protocol's JSON (docs/native-writers.md, "The driver
//! protocol"): what the kit and a driver send each other, in both
//! directions, so the kit and the reference driver share one codec.
//!
//! Integers are JSON numbers over all 64 bits; UUIDs are hyphenated
//! strings; result values are tagged (`{"u64": n}`), so a row of the wrong
//! shape can still be written down and sent.

use std::collections::BTreeMap;

use capcat_proto::statement::{ColumnType, Expect, Settings, Value};
use capcat_proto::{Config, Failure, Input, Lease, LeaseHead, Statement, Step};
use serde_json::{Map, Value as Json, json};
use uuid::Uuid;

use crate::error::ConformError;

/// The protocol version this kit speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// Shorthand for a malformed message.
fn bad(what: impl Into<String>) -> ConformError {
    ConformError::BadMessage { what: what.into() }
}

/// The field `key` of object `j`.
pub fn field<'a>(j: &'a Json, key: &str) -> Result<&'a Json, ConformError> {
    j.get(key)
        .ok_or_else(|| bad(format!("missing field `{key}` in {j}")))
}

/// The unsigned integer at `key`.
pub fn u64_field(j: &Json, key: &str) -> Result<u64, ConformError> {
    field(j, key)?
        .as_u64()
        .ok_or_else(|| bad(format!("`{key}` is not an unsigned integer in {j}")))
}

/// The string at `key`.
pub fn str_field<'a>(j: &'a Json, key: &str) -> Result<&'a str, ConformError> {
    field(j, key)?
        .as_str()
        .ok_or_else(|| bad(format!("`{key}` is not a string in {j}")))
}

/// The UUID at `key`.
pub fn uuid_field(j: &Json, key: &str) -> Result<Uuid, ConformError> {
    let text = str_field(j, key)?;
    Uuid::parse_str(text).map_err(|e| bad(format!("`{key}` is not a UUID ({e}): {text}")))
}

fn u32_field(j: &Json, key: &str) -> Result<u32, ConformError> {
    u32::try_from(u64_field(j, key)?).map_err(|_| bad(format!("`{key}` does not fit 32 bits")))
}

fn usize_field(j: &Json, key: &str) -> Result<usize, ConformError> {
    usize::try_from(u64_field(j, key)?).map_err(|_| bad(format!("`{key}` does not fit a usize")))
}

/// A UUID as the protocol writes it.
pub fn uuid_json(id: Uuid) -> Json {
    Json::String(id.hyphenated().to_string())
}

/// A lease: `{"lease_id", "holder", "term", "expires_at_ns", "unsettled_until_ns"}`.
pub fn lease_json(lease: &Lease) -> Json {
    json!({
        "lease_id": uuid_json(lease.lease_id),
        "holder": lease.holder,
        "term": lease.term,
        "expires_at_ns": lease.expires_at_ns,
        "unsettled_until_ns": lease.unsettled_until_ns,
    })
}

/// The lease [`lease_json`] wrote.
pub fn lease_from(j: &Json) -> Result<Lease, ConformError> {
    Ok(Lease {
        lease_id: uuid_field(j, "lease_id")?,
        holder: str_field(j, "holder")?.to_owned(),
        term: u64_field(j, "term")?,
        expires_at_ns: u64_field(j, "expires_at_ns")?,
        unsettled_until_ns: u64_field(j, "unsettled_until_ns")?,
    })
}

/// A lease head as the lease errors carry it (`null` for an empty table).
pub fn head_json(head: &Option<LeaseHead>) -> Json {
    match head {
        None => Json::Null,
        Some(h) => json!({
            "term": h.term,
            "lease_id": uuid_json(h.lease_id),
            "holder": h.holder,
            "expires_at_ns": h.expires_at_ns,
            "live": h.live,
            "contested": h.contested,
            "term_expires_at_ns": h.term_expires_at_ns,
            "term_live": h.term_live,
        }),
    }
}

/// The protocol configuration, every field given.
pub fn config_json(cfg: &Config) -> Json {
    json!({
        "lease_ttl_ns": cfg.lease_ttl_ns(),
        "publish_timeout_s": cfg.publish_timeout_s(),
        "fence_slack_ns": cfg.fence_slack_ns(),
        "fence_margin_ns": cfg.fence_margin_ns(),
        "max_claim_attempts": cfg.max_claim_attempts(),
        "max_allocate_attempts": cfg.max_allocate_attempts(),
        "max_publish_attempts": cfg.max_publish_attempts(),
        "chunk": cfg.chunk(),
        "insert_rows": cfg.insert_rows(),
    })
}

/// The configuration [`config_json`] wrote, validated as capcat-proto
/// validates it.
pub fn config_from(j: &Json) -> Result<Config, ConformError> {
    let invalid = |e: capcat_proto::ConfigError| bad(format!("invalid config: {e}"));
    let timeout_ns = u64::from(u32_field(j, "publish_timeout_s")?) * 1_000_000_000;
    Config::new(u64_field(j, "lease_ttl_ns")?, timeout_ns)
        .map_err(invalid)?
        .with_fence_slack_ns(u64_field(j, "fence_slack_ns")?)
        .map_err(invalid)?
        .with_attempts(
            u32_field(j, "max_claim_attempts")?,
            u32_field(j, "max_allocate_attempts")?,
            u32_field(j, "max_publish_attempts")?,
        )
        .map_err(invalid)?
        .with_chunk(usize_field(j, "chunk")?)
        .map_err(invalid)?
        .with_insert_rows(usize_field(j, "insert_rows")?)
        .map_err(invalid)
}

/// A result value, tagged with its type.
pub fn value_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::UInt64(n) => json!({ "u64": n }),
        Value::Int64(n) => json!({ "i64": n }),
        Value::String(s) => json!({ "str": s }),
        Value::Uuid(id) => json!({ "uuid": uuid_json(*id) }),
        // `Value` is non-exhaustive; a value the protocol cannot name yet is
        // sent as a string, which every column but a String refuses.
        other => json!({ "str": format!("{other:?}") }),
    }
}

/// The value [`value_json`] wrote.
pub fn value_from(j: &Json) -> Result<Value, ConformError> {
    if j.is_null() {
        return Ok(Value::Null);
    }
    if let Some(n) = j.get("u64") {
        return n.as_u64().map(Value::UInt64).ok_or_else(|| bad("bad u64"));
    }
    if let Some(n) = j.get("i64") {
        return n.as_i64().map(Value::Int64).ok_or_else(|| bad("bad i64"));
    }
    if let Some(s) = j.get("str") {
        return s
            .as_str()
            .map(|s| Value::String(s.to_owned()))
            .ok_or_else(|| bad("bad str"));
    }
    if j.get("uuid").is_some() {
        return uuid_field(j, "uuid").map(Value::Uuid);
    }
    Err(bad(format!("not a tagged value: {j}")))
}

/// A failure: `{"kind": "server" | "timeout" | "transport" | "malformed", ...}`.
pub fn failure_json(f: &Failure) -> Json {
    match f {
        Failure::Server { code, message } => {
            json!({ "kind": "server", "code": code, "message": message })
        }
        Failure::Timeout => json!({ "kind": "timeout" }),
        Failure::Transport { message } => json!({ "kind": "transport", "message": message }),
        Failure::Malformed { message } => json!({ "kind": "malformed", "message": message }),
        other => json!({ "kind": "malformed", "message": other.to_string() }),
    }
}

/// The failure [`failure_json`] wrote.
pub fn failure_from(j: &Json) -> Result<Failure, ConformError> {
    let message = || str_field(j, "message").map(str::to_owned);
    Ok(match str_field(j, "kind")? {
        "server" => Failure::Server {
            code: u32_field(j, "code")?,
            message: message()?,
        },
        "timeout" => Failure::Timeout,
        "transport" => Failure::Transport {
            message: message()?,
        },
        "malformed" => Failure::Malformed {
            message: message()?,
        },
        other => return Err(bad(format!("unknown failure kind `{other}`"))),
    })
}

/// An input for session `session`: `rows`, `failed` or `drawn`.
pub fn input_json(session: u64, input: &Input) -> Json {
    let mut m = Map::new();
    m.insert("session".to_owned(), json!(session));
    match input {
        Input::Rows(rows) => {
            let rows: Vec<Json> = rows
                .0
                .iter()
                .map(|row| Json::Array(row.iter().map(value_json).collect()))
                .collect();
            m.insert("rows".to_owned(), Json::Array(rows));
        }
        Input::Failed(f) => {
            m.insert("failed".to_owned(), failure_json(f));
        }
        Input::Drawn(n) => {
            m.insert("drawn".to_owned(), json!(n));
        }
    }
    Json::Object(m)
}

/// The input [`input_json`] wrote, with its session.
pub fn input_from(j: &Json) -> Result<(u64, Input), ConformError> {
    let session = u64_field(j, "session")?;
    if let Some(rows) = j.get("rows") {
        let rows = rows.as_array().ok_or_else(|| bad("`rows` is not a list"))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let row = row.as_array().ok_or_else(|| bad("a row is not a list"))?;
            out.push(row.iter().map(value_from).collect::<Result<Vec<_>, _>>()?);
        }
        return Ok((session, Input::Rows(capcat_proto::Rows(out))));
    }
    if let Some(f) = j.get("failed") {
        return Ok((session, Input::Failed(failure_from(f)?)));
    }
    if j.get("drawn").is_some() {
        return Ok((session, Input::Drawn(u64_field(j, "drawn")?)));
    }
    Err(bad(format!("not an input: {j}")))
}

fn column_type(ty: ColumnType) -> &'static str {
    match ty {
        ColumnType::UInt64 => "UInt64",
        ColumnType::Int64 => "Int64",
        ColumnType::String => "String",
        ColumnType::Uuid => "UUID",
        ColumnType::NullableUInt64 => "Nullable(UInt64)",
        _ => "unknown",
    }
}

fn settings_json(s: &Settings) -> Json {
    json!({
        "select_sequential_consistency": s.select_sequential_consistency,
        "max_execution_time_s": s.max_execution_time_s,
    })
}

/// A statement as a driver's `execute` step carries it.
pub fn statement_json(stmt: &Statement) -> Json {
    let params: BTreeMap<&str, Json> = stmt
        .params
        .iter()
        .map(|(k, v)| {
            (
                k.as_str(),
                json!({ "type": v.clickhouse_type(), "value": v.to_text() }),
            )
        })
        .collect();
    let expect = match &stmt.expect {
        Expect::Nothing => Json::Null,
        Expect::Rows(cols) => Json::Array(
            cols.iter()
                .map(|c| json!({ "name": c.name, "type": column_type(c.ty) }))
                .collect(),
        ),
    };
    let data = match &stmt.data {
        None => Json::Null,
        Some(d) => json!({
            "format": capcat_proto::InsertData::FORMAT,
            "rows": d.rows(),
            "hex": hex::encode(d.to_bytes()),
        }),
    };
    json!({
        "name": stmt.name,
        "sql": stmt.sql,
        "params": params,
        "settings": settings_json(&stmt.settings),
        "expect": expect,
        "data": data,
    })
}

/// A step of session `session`; a `Done` step carries its done object
/// (`{"outcome": ..}` and, for a publish, `"lease"`).
pub fn step_json(session: u64, step: &Step<Json>) -> Json {
    let mut m = Map::new();
    m.insert("session".to_owned(), json!(session));
    let (key, body) = match step {
        Step::Execute(stmt) => ("execute", statement_json(stmt)),
        Step::Draw { below } => ("draw", json!({ "below": below })),
        Step::Done(done) => ("done", done.clone()),
    };
    m.insert(key.to_owned(), body);
    Json::Object(m)
}

/// What kind of step a driver's line is: `execute`, `draw` or `done`.
pub fn step_kind(j: &Json) -> Option<&'static str> {
    ["execute", "draw", "done"]
        .into_iter()
        .find(|k| j.get(*k).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use capcat_proto::Rows;

    #[test]
    fn inputs_round_trip_through_their_json() {
        let id = Uuid::from_u128(0xfeed);
        let inputs = [
            Input::Rows(Rows(vec![
                vec![Value::UInt64(u64::MAX), Value::Uuid(id)],
                vec![
                    Value::Null,
                    Value::Int64(-3),
                    Value::String("a\"b\n".into()),
                ],
            ])),
            Input::Rows(Rows::empty()),
            Input::Failed(Failure::Timeout),
            Input::Failed(Failure::Server {
                code: 241,
                message: "m".into(),
            }),
            Input::Failed(Failure::Transport {
                message: "t".into(),
            }),
            Input::Failed(Failure::Malformed {
                message: "x".into(),
            }),
            Input::Drawn(7),
        ];
        for input in inputs {
            let text = input_json(9, &input).to_string();
            let back = input_from(&serde_json::from_str(&text).expect("json")).expect("decodes");
            assert_eq!(back, (9, input));
        }
    }

    #[test]
    fn a_config_round_trips_and_an_invalid_one_is_refused() {
        let cfg = Config::new(30_000_000_000, 10_000_000_000)
            .and_then(|c| c.with_attempts(2, 3, 4))
            .and_then(|c| c.with_chunk(5))
            .and_then(|c| c.with_insert_rows(6))
            .expect("valid");
        assert_eq!(config_from(&config_json(&cfg)).expect("decodes"), cfg);
        let mut broken = config_json(&cfg);
        broken["chunk"] = json!(0);
        assert!(config_from(&broken).is_err());
    }

    #[test]
    fn a_lease_round_trips() {
        let lease = Lease {
            lease_id: Uuid::from_u128(3),
            holder: "h".into(),
            term: u64::MAX,
            expires_at_ns: 5,
            unsettled_until_ns: 6,
        };
        assert_eq!(lease_from(&lease_json(&lease)).expect("decodes"), lease);
    }
}
