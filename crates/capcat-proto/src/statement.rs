//! `Statement`: a SQL statement as data.
//!
//! Values never enter SQL text: the text names ClickHouse query parameters
//! (`{name:Type}`) and the values travel beside it in [`Statement::params`].
//! A statement also carries its settings and the shape of the rows it
//! expects, so an adapter can execute it without knowing what it means.
//! An INSERT of many rows carries them as [`InsertData`]: the request's
//! data, sent after the statement in a binary format, never as text inside
//! the SQL or a parameter.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::text_format::escape_text;

/// One SQL statement, ready for a transport.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Statement {
    /// A stable name for logs, metrics and golden tests, e.g. `publish.insert_commit_row`.
    pub name: &'static str,
    /// The SQL text, with `{name:Type}` placeholders for every value.
    pub sql: String,
    /// The bound values, by placeholder name.
    pub params: BTreeMap<String, Param>,
    /// Per-statement server settings.
    pub settings: Settings,
    /// What the statement returns.
    pub expect: Expect,
    /// The rows an INSERT sends as its data, in [`InsertData::FORMAT`]; the
    /// SQL then ends in `FORMAT RowBinary` and names every column it fills.
    /// `None` for every other statement.
    pub data: Option<InsertData>,
}

/// Rows an INSERT sends after its statement, as the request's data (the
/// HTTP body; libchdb's insert data), in [`InsertData::FORMAT`].
///
/// Why not a parameter: a parameter travels as text, which the server
/// parses as a constant before the INSERT starts (the cost that dominated
/// an index pass), and over HTTP in the request URL, whose size the server
/// caps. Data is streamed into the table's blocks as it arrives. These rows
/// need no guard: descriptor rows are inert until a publish admits their
/// pack, so nothing about them is decided by the statement's text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InsertData {
    /// Capture descriptor rows, every column of
    /// [`crate::descriptor::CAPTURE_COLUMNS`] in order
    /// ([`crate::descriptor::CaptureDescriptor::write_row_binary`]). Shared,
    /// not owned: the index pass hands each INSERT its rows without copying
    /// them.
    Descriptors(Arc<[crate::descriptor::CaptureDescriptor]>),
}

impl InsertData {
    /// The input format the data is written in, as the SQL names it.
    pub const FORMAT: &'static str = "RowBinary";

    /// Server settings every transport sends with an INSERT that carries
    /// data, beside the statement's own [`Settings`].
    ///
    /// `optimize_on_insert = 0`: the engine does not collapse rows of equal
    /// sorting key within the inserted block. The descriptor tables are
    /// `ReplacingMergeTree`s, and with the default the engine sorts and
    /// merges every inserted block looking for such rows; there are none
    /// to find, because an index pass refuses a batch in which two rows
    /// share a sorting key ([`crate::IndexError::DuplicateDescriptor`]).
    /// Skipping that pass makes the INSERT of 12,288 rows 30% faster (33 to
    /// 23 ms embedded; docs/benchmarks.md). Nothing a reader sees depends
    /// on it: readers never rely on a merge having happened.
    pub const SETTINGS: &'static [(&'static str, &'static str)] = &[("optimize_on_insert", "0")];

    /// How many rows the data holds.
    pub fn rows(&self) -> usize {
        match self {
            Self::Descriptors(rows) => rows.len(),
        }
    }

    /// The data's bytes in [`Self::FORMAT`].
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Self::Descriptors(rows) => {
                let len = rows.iter().map(|r| r.row_binary_len()).sum();
                let mut out = Vec::with_capacity(len);
                for row in rows.iter() {
                    row.write_row_binary(&mut out);
                }
                out
            }
        }
    }
}

impl Statement {
    /// How long after SENDING this statement (in nanoseconds) a client must
    /// wait before it acts on a failure that left the statement's fate
    /// unknown ([`Failure::leaves_statement_running`]); `None` when it need
    /// not wait.
    ///
    /// A fenced statement that passed its guard lands or is killed within its
    /// fence margin (the cap plus the engine's slack), and the model checker
    /// hands a client the failure of such a statement only once it can no
    /// longer land. A client that gave up early (its own timeout, a dropped
    /// connection) and at once published again or released its lease would
    /// step outside that model: its first statement could land after the
    /// next, or after a successor took over on the strength of the release.
    /// So the driver waits out the margin before it feeds the failure back.
    /// (A statement the server starts only after the margin has passed, one
    /// queued on the server or held up on the network, is not covered; see
    /// docs/model-checking.md.)
    ///
    /// [`Failure::leaves_statement_running`]: crate::Failure::leaves_statement_running
    pub fn settle_ns(&self) -> Option<u64> {
        self.settings.max_execution_time_s?;
        match self.params.get(crate::fragments::FENCE_MARGIN_PARAM) {
            Some(Param::UInt64(margin)) => Some(*margin),
            _ => None,
        }
    }
}

/// Per-statement ClickHouse settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Settings {
    /// `select_sequential_consistency = 1`: read only after every replica
    /// holds every acknowledged insert.
    pub select_sequential_consistency: bool,
    /// `max_execution_time`, in whole seconds (ClickHouse truncates
    /// fractions, so the protocol only ever speaks in whole seconds).
    pub max_execution_time_s: Option<u32>,
}

/// A bound parameter value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Param {
    /// `UInt64`.
    UInt64(u64),
    /// `Int64`.
    Int64(i64),
    /// `String`.
    String(String),
    /// `UUID`.
    Uuid(Uuid),
    /// `Array(String)`.
    Strings(Vec<String>),
    /// `Array(UUID)`.
    Uuids(Vec<Uuid>),
    /// `Array(Tuple(String, UUID))`: (store_id, pack_id) pairs.
    StorePacks(Vec<(String, Uuid)>),
}

impl Param {
    /// The ClickHouse type named in the placeholder, e.g. `UInt64`.
    pub fn clickhouse_type(&self) -> &'static str {
        match self {
            Self::UInt64(_) => "UInt64",
            Self::Int64(_) => "Int64",
            Self::String(_) => "String",
            Self::Uuid(_) => "UUID",
            Self::Strings(_) => "Array(String)",
            Self::Uuids(_) => "Array(UUID)",
            Self::StorePacks(_) => "Array(Tuple(String, UUID))",
        }
    }

    /// The value in ClickHouse's parameter text form: what goes after
    /// `param_<name>=` on the HTTP interface or `--param_<name>=` on the
    /// command line. Top-level strings are sent raw (escaped for the text
    /// format); strings inside arrays and tuples are quoted literals.
    pub fn to_text(&self) -> String {
        match self {
            Self::UInt64(v) => v.to_string(),
            Self::Int64(v) => v.to_string(),
            Self::String(s) => escape_text(s),
            Self::Uuid(u) => u.hyphenated().to_string(),
            Self::Strings(items) => list(items.iter().map(|s| quote(s))),
            Self::Uuids(items) => list(items.iter().map(|u| format!("'{}'", u.hyphenated()))),
            Self::StorePacks(items) => list(
                items
                    .iter()
                    .map(|(store, pack)| format!("({},'{}')", quote(store), pack.hyphenated())),
            ),
        }
    }
}

fn list(items: impl Iterator<Item = String>) -> String {
    let mut out = String::from("[");
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&item);
    }
    out.push(']');
    out
}

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out.push('\'');
    out
}

/// What a statement returns.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expect {
    /// Nothing: DDL and INSERT.
    Nothing,
    /// Rows with these columns, in this order.
    Rows(Vec<Column>),
}

/// One result column: its name and the type the adapter decodes it as.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Column {
    /// The column's name in the result set.
    pub name: &'static str,
    /// How to decode it.
    pub ty: ColumnType,
}

/// The result column types the protocol reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ColumnType {
    /// `UInt64` (also `UInt8`..`UInt32`).
    UInt64,
    /// `Int64` (also `Int8`..`Int32`).
    Int64,
    /// `String`.
    String,
    /// `UUID`.
    Uuid,
    /// `Nullable(T)` of any of the above: [`Value::Null`] or the value.
    NullableUInt64,
}

/// A decoded result value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An unsigned integer.
    UInt64(u64),
    /// A signed integer.
    Int64(i64),
    /// A string.
    String(String),
    /// A UUID.
    Uuid(Uuid),
}

/// The rows a statement returned, each in [`Expect::Rows`] column order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rows(pub Vec<Vec<Value>>);

impl Rows {
    /// No rows: what DDL and INSERT return.
    pub fn empty() -> Self {
        Self(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use crate::config::Config;
    use crate::tables::Tables;

    #[test]
    fn every_fenced_capped_statement_settles_after_its_margin_and_nothing_else_waits() {
        let t = Tables::new("t").expect("a valid prefix");
        let cfg = Config::default();
        let id = Uuid::from_u128(1);
        let margin = Some(cfg.fence_margin_ns());
        let lease = crate::lease::Lease {
            lease_id: id,
            holder: "h".to_owned(),
            term: 1,
            expires_at_ns: 100,
            unsettled_until_ns: 0,
        };
        let fenced = [
            crate::publish::sql::insert_manifest(&t, &cfg, 1, id, &lease, Vec::new()),
            crate::publish::sql::insert_commit_row(&t, &cfg, 1, id, &lease, 0),
            crate::lease::sql::release(&t, &cfg, &lease),
        ];
        for stmt in fenced {
            assert_eq!(stmt.settle_ns(), margin, "{}", stmt.name);
        }
        let unfenced = [
            crate::lease::sql::insert_claim(&t, 1, id, "h", 1),
            crate::lease::sql::read_head(&t),
            crate::allocate::sql::insert_claim(&t, 1, id),
        ];
        for stmt in unfenced {
            assert_eq!(stmt.settle_ns(), None, "{}", stmt.name);
        }
        assert!(crate::Failure::Timeout.leaves_statement_running());
        assert!(
            !crate::Failure::Server {
                code: 159,
                message: String::new()
            }
            .leaves_statement_running()
        );
    }
}
