//! A trace document as the replay reads it: the JSON that
//! `crate::traces` exports (`tests/corpus/`), parsed into steps that name
//! their statement text exactly as capcat-proto emitted it.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value as Json;

use super::report::ReplayError;

/// One statement of a step, exactly as the trace stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceStatement {
    /// capcat-proto's statement name (`publish.insert_manifest`).
    pub name: String,
    /// The SQL text (`sql[sql_ref]`), never edited by the replay.
    pub sql: String,
    /// Parameters: name -> (ClickHouse type, value in its text form).
    pub params: BTreeMap<String, (String, String)>,
    /// `select_sequential_consistency`.
    pub sequential: bool,
    /// `max_execution_time` in whole seconds.
    pub max_execution_time_s: Option<u32>,
    /// The columns a read returns; `None` for a statement that returns
    /// nothing (an INSERT).
    pub columns: Option<Vec<String>>,
    /// An INSERT's data (`data.hex`, decoded), sent after its text.
    pub data: Option<Vec<u8>>,
    /// The statement's JSON, to tell two statements in flight apart.
    pub key: String,
}

impl TraceStatement {
    /// The table an `INSERT INTO <table> ...` statement writes, if it is one.
    pub fn insert_target(&self) -> Option<&str> {
        let rest = self.sql.strip_prefix("INSERT INTO ")?;
        rest.split([' ', '(']).next().filter(|t| !t.is_empty())
    }

    /// The value of parameter `name` (its text form).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(|(_, v)| v.as_str())
    }
}

/// One step of a trace.
#[derive(Clone, Debug)]
pub struct TraceStep {
    /// 1-based position in the trace.
    pub index: usize,
    /// The model's action, as it printed it.
    pub action: String,
    /// The action's shared name (its first word: `EvaluateGuard`).
    pub verb: String,
    /// Who acts: `p0`, `engine for p1`, `reader`, `clock`, `foreign writer`.
    pub actor: String,
    /// The statement, when the step names one.
    pub statement: Option<TraceStatement>,
    /// The model's prediction (`rows`, `ran`, `sent`, `evaluated`,
    /// `reader`, `now`), or null.
    pub predicted: Json,
    /// Rows each model table gained in this step, in the model's notation.
    pub gained: BTreeMap<String, Vec<String>>,
    /// Statements the model ran within this step besides its own (the
    /// index pass's `index.read_committed` and `index.insert_descriptors`),
    /// each with its prediction (`rows` or `ran`); empty in traces exported
    /// before the exporter wrote them.
    pub folded: Vec<(TraceStatement, Json)>,
}

impl TraceStep {
    /// The publisher a client or engine step belongs to (`p0` for both
    /// `p0` and `engine for p0`).
    pub fn publisher(&self) -> Option<&str> {
        let p = self
            .actor
            .strip_prefix("engine for ")
            .unwrap_or(&self.actor);
        p.starts_with('p').then_some(p)
    }
}

/// One replayable trace: a counterexample, or one walk of a walks file.
#[derive(Clone, Debug)]
pub struct Trace {
    /// `BarrierOnly`, `walks-shipped#3`, ...
    pub name: String,
    /// The design the model ran (`Shipped`, `BarrierOnly`, ...).
    pub design: String,
    /// The property a counterexample violates (`None` for a walk).
    pub violates: Option<String>,
    /// The model configuration, as exported.
    pub config: String,
    /// Lease TTL in model ticks (from the configuration).
    pub ttl_ticks: u64,
    /// Foreign rows the model may write (from the configuration).
    pub foreign_writes: u64,
    /// The steps.
    pub steps: Vec<TraceStep>,
    /// The model's tables before the first step, if exported.
    pub initial_tables: Option<Tables>,
    /// The model's tables after the last step, if exported.
    pub final_tables: Option<Tables>,
}

/// A model's tables in its notation: table -> rows.
pub type Tables = BTreeMap<String, Vec<String>>;

fn tables_of(j: &Json) -> Option<Tables> {
    let obj = j.as_object()?;
    Some(
        obj.iter()
            .map(|(t, rows)| {
                let rows = rows
                    .as_array()
                    .map(|r| {
                        r.iter()
                            .filter_map(Json::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                (t.clone(), rows)
            })
            .collect(),
    )
}

fn config_field(config: &str, field: &str) -> Option<u64> {
    let at = config.find(&format!("{field}: "))? + field.len() + 2;
    let digits: String = config[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn malformed(file: &str, what: impl Into<String>) -> ReplayError {
    ReplayError::Malformed {
        file: file.to_owned(),
        what: what.into(),
    }
}

/// Bytes from lowercase or uppercase hex, two digits a byte.
fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

fn statement(file: &str, sql: &[Json], stmt: &Json) -> Result<Option<TraceStatement>, ReplayError> {
    let Some(obj) = stmt.as_object() else {
        return Ok(None);
    };
    let sql_ref = obj
        .get("sql_ref")
        .and_then(Json::as_u64)
        .ok_or_else(|| malformed(file, "a statement without sql_ref"))?;
    let text = usize::try_from(sql_ref)
        .ok()
        .and_then(|i| sql.get(i))
        .and_then(Json::as_str)
        .ok_or_else(|| malformed(file, format!("sql_ref {sql_ref} names no SQL text")))?;
    let mut params = BTreeMap::new();
    if let Some(ps) = obj.get("params").and_then(Json::as_object) {
        for (name, p) in ps {
            let ty = p["type"].as_str().unwrap_or_default().to_owned();
            let value = p["value"]
                .as_str()
                .ok_or_else(|| malformed(file, format!("parameter {name} has no text value")))?
                .to_owned();
            params.insert(name.clone(), (ty, value));
        }
    }
    let data = match obj.get("data") {
        None => None,
        Some(d) => {
            let hex = d["hex"]
                .as_str()
                .ok_or_else(|| malformed(file, "data without hex"))?;
            Some(decode_hex(hex).ok_or_else(|| malformed(file, "data hex is not hex"))?)
        }
    };
    let settings = &obj["settings"];
    let columns = obj["expect"].as_array().map(|cs| {
        cs.iter()
            .filter_map(Json::as_str)
            .map(str::to_owned)
            .collect()
    });
    Ok(Some(TraceStatement {
        name: obj["name"].as_str().unwrap_or_default().to_owned(),
        sql: text.to_owned(),
        params,
        sequential: settings["select_sequential_consistency"]
            .as_bool()
            .unwrap_or(false),
        max_execution_time_s: settings["max_execution_time_s"]
            .as_u64()
            .and_then(|s| u32::try_from(s).ok()),
        columns,
        data,
        key: stmt.to_string(),
    }))
}

fn steps(file: &str, sql: &[Json], steps: &Json) -> Result<Vec<TraceStep>, ReplayError> {
    let list = steps
        .as_array()
        .ok_or_else(|| malformed(file, "no steps array"))?;
    list.iter()
        .enumerate()
        .map(|(i, s)| {
            let action = s["action"]
                .as_str()
                .ok_or_else(|| malformed(file, format!("step {} has no action", i + 1)))?
                .to_owned();
            let gained = tables_of(&s["tables_gained"]).unwrap_or_default();
            let folded = s["folded"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| {
                    let stmt = statement(file, sql, f)?.ok_or_else(|| {
                        malformed(file, format!("step {}: a folded statement", i + 1))
                    })?;
                    Ok((stmt, f["predicted"].clone()))
                })
                .collect::<Result<Vec<_>, ReplayError>>()?;
            Ok(TraceStep {
                index: i + 1,
                verb: action
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
                action,
                actor: s["actor"].as_str().unwrap_or_default().to_owned(),
                statement: statement(file, sql, &s["statement"])?,
                predicted: s["predicted"].clone(),
                gained,
                folded,
            })
        })
        .collect()
}

/// Every trace in one exported document: a counterexample is one trace, a
/// walks document one trace per walk. `file` names it in errors.
pub fn traces_of(file: &str, doc: &Json) -> Result<Vec<Trace>, ReplayError> {
    let sql = doc["sql"]
        .as_array()
        .ok_or_else(|| malformed(file, "no sql table"))?;
    let config = doc["config"].as_str().unwrap_or_default().to_owned();
    let design = doc["design"].as_str().unwrap_or_default().to_owned();
    let ttl_ticks = config_field(&config, "ttl_ticks")
        .ok_or_else(|| malformed(file, "the configuration names no ttl_ticks"))?;
    let foreign_writes = config_field(&config, "foreign_writes").unwrap_or(0);
    let make = |name: String, violates: Option<String>, steps: Vec<TraceStep>, at: &Json| Trace {
        name,
        design: design.clone(),
        violates,
        config: config.clone(),
        ttl_ticks,
        foreign_writes,
        steps,
        initial_tables: tables_of(&at["initial_tables"]),
        final_tables: tables_of(&at["final_tables"]),
    };
    match doc["kind"].as_str() {
        Some("counterexample") => Ok(vec![make(
            design.clone(),
            doc["violates"].as_str().map(str::to_owned),
            steps(file, sql, &doc["steps"])?,
            doc,
        )]),
        Some("schedule") => Ok(vec![make(
            format!("{design} ({file})"),
            None,
            steps(file, sql, &doc["steps"])?,
            doc,
        )]),
        Some("random_walks") => doc["walks"]
            .as_array()
            .ok_or_else(|| malformed(file, "no walks array"))?
            .iter()
            .map(|w| {
                let n = w["walk"].as_u64().unwrap_or_default();
                Ok(make(
                    format!("{file}#{n}"),
                    None,
                    steps(file, sql, &w["steps"])?,
                    w,
                ))
            })
            .collect(),
        other => Err(malformed(file, format!("unknown kind {other:?}"))),
    }
}

/// Every trace of the JSON file at `path`.
pub fn read_traces(path: &Path) -> Result<Vec<Trace>, ReplayError> {
    let file = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(path).map_err(|e| ReplayError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let doc: Json = serde_json::from_str(&text).map_err(|e| malformed(&file, e.to_string()))?;
    traces_of(&file, &doc)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_counterexample_document_becomes_one_trace_with_its_sql() {
        let doc = json!({
            "kind": "counterexample",
            "design": "BarrierOnly",
            "violates": "FencedOutWritesNothing",
            "config": "ModelConfig { ttl_ticks: 2, foreign_writes: 0 }",
            "sql": ["INSERT INTO m_index_watermark (index_version) SELECT {v:UInt64}"],
            "steps": [{
                "action": "IssueCommitRow p0 (publish.insert_commit_row)",
                "actor": "p0",
                "predicted": { "sent": "in flight" },
                "statement": {
                    "name": "publish.insert_commit_row",
                    "sql_ref": 0,
                    "params": { "v": { "type": "UInt64", "value": "1" } },
                    "settings": { "select_sequential_consistency": true, "max_execution_time_s": 1 },
                    "expect": "nothing"
                },
                "tables_gained": {}
            }]
        });
        let traces = traces_of("x", &doc).expect("a valid document");
        assert_eq!(traces.len(), 1);
        let t = &traces[0];
        assert_eq!(
            (t.ttl_ticks, t.violates.as_deref()),
            (2, Some("FencedOutWritesNothing"))
        );
        let stmt = t.steps[0].statement.as_ref().expect("a statement");
        assert_eq!(stmt.insert_target(), Some("m_index_watermark"));
        assert_eq!(stmt.param("v"), Some("1"));
        assert_eq!(
            (stmt.columns.clone(), stmt.max_execution_time_s),
            (None, Some(1))
        );
        assert_eq!(t.steps[0].publisher(), Some("p0"));
        let bad = json!({ "kind": "counterexample", "sql": [], "config": "", "steps": [] });
        assert!(matches!(
            traces_of("x", &bad),
            Err(ReplayError::Malformed { .. })
        ));
    }
}
