//! [`Request`]: one statement with its bound parameters, settings, default
//! database and output format.

use std::collections::BTreeMap;

use crate::error::ChdbError;

/// ClickHouse's default output format of the HTTP interface, and ours.
pub const DEFAULT_FORMAT: &str = "TabSeparated";

/// One statement to run on the engine.
///
/// Values never enter the SQL text: they are bound to `{name:Type}`
/// placeholders in ClickHouse's escaped text form (what `param_<name>=`
/// carries on the HTTP interface, e.g. `capcat_proto::Param::to_text`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub(crate) sql: Vec<u8>,
    pub(crate) params: BTreeMap<String, Vec<u8>>,
    pub(crate) settings: BTreeMap<String, String>,
    pub(crate) database: Option<String>,
    pub(crate) format: String,
    pub(crate) insert_data: Option<InsertData>,
}

/// Data for an INSERT, in a named input format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InsertData {
    pub(crate) format: String,
    pub(crate) bytes: Vec<u8>,
}

impl Request {
    /// A statement with no parameters, no settings, the `default` database
    /// and [`DEFAULT_FORMAT`] output.
    pub fn new(sql: impl Into<String>) -> Self {
        Self::from_bytes(sql.into().into_bytes())
    }

    /// A statement whose text is bytes (ClickHouse SQL is bytes; a string
    /// literal may hold any).
    pub fn from_bytes(sql: Vec<u8>) -> Self {
        Self {
            sql,
            params: BTreeMap::new(),
            settings: BTreeMap::new(),
            database: None,
            format: DEFAULT_FORMAT.to_owned(),
            insert_data: None,
        }
    }

    /// Binds `{name:Type}` to `value` (escaped text form). The last binding
    /// of a name wins.
    pub fn param(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.insert(name.into(), value.into().into_bytes());
        self
    }

    /// Sets a ClickHouse setting for this statement only.
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.insert(name.into(), value.into());
        self
    }

    /// `max_execution_time`, in whole seconds (ClickHouse truncates
    /// fractions); `None` leaves the engine default (no limit).
    pub fn max_execution_time_s(self, seconds: Option<u32>) -> Self {
        match seconds {
            Some(s) => self.setting("max_execution_time", s.to_string()),
            None => self.without_setting("max_execution_time"),
        }
    }

    /// `select_sequential_consistency`; `false` leaves the engine default.
    pub fn select_sequential_consistency(self, on: bool) -> Self {
        if on {
            self.setting("select_sequential_consistency", "1")
        } else {
            self.without_setting("select_sequential_consistency")
        }
    }

    fn without_setting(mut self, name: &str) -> Self {
        self.settings.remove(name);
        self
    }

    /// The database unqualified names resolve in (`default` when unset).
    pub fn database(mut self, database: impl Into<String>) -> Self {
        self.database = Some(database.into());
        self
    }

    /// The output format when the statement has no `FORMAT` clause.
    pub fn format(mut self, format: impl Into<String>) -> Self {
        self.format = format.into();
        self
    }

    /// Makes this an INSERT of `data` in the input `format` (e.g.
    /// `RowBinary`). The statement names the table and columns but has no
    /// `FORMAT` clause and no inline data: `INSERT INTO t (a, b)`.
    ///
    /// This is the only binary-safe way to insert: libchdb 26.7.3 silently
    /// drops rows of binary data written inline after `FORMAT` in the text.
    pub fn insert_data(mut self, format: impl Into<String>, data: Vec<u8>) -> Self {
        self.insert_data = Some(InsertData {
            format: format.into(),
            bytes: data,
        });
        self
    }

    /// An INSERT written the way the HTTP interface takes one: the
    /// statement ends in `FORMAT <name>` and `data` follows it in that
    /// format (`INSERT INTO t (a, b) FORMAT RowBinary`). The FORMAT clause
    /// is split off the text and the rest becomes [`Self::insert_data`].
    ///
    /// # Errors
    /// [`ChdbError::InvalidInput`] when the text is not an INSERT ending in
    /// a FORMAT clause: the data would otherwise have nowhere to go.
    pub fn insert(sql: &str, data: Vec<u8>) -> Result<Self, ChdbError> {
        let Some((statement, format)) = split_insert_format(sql.as_bytes()) else {
            return Err(ChdbError::InvalidInput {
                what: "INSERT with data (it must end in FORMAT <name>)",
                value: sql.chars().take(200).collect(),
            });
        };
        Ok(Self::from_bytes(statement.to_vec()).insert_data(format, data))
    }

    /// The SQL text (bytes).
    pub fn sql(&self) -> &[u8] {
        &self.sql
    }

    /// Checks every name the engine will see, so a bad one is a typed error
    /// before anything runs rather than a confusing engine message.
    pub(crate) fn validate(&self) -> Result<(), ChdbError> {
        for name in self.params.keys() {
            if !is_identifier(name) {
                return Err(ChdbError::InvalidInput {
                    what: "parameter name",
                    value: name.clone(),
                });
            }
        }
        for name in self.settings.keys() {
            if !is_identifier(name) {
                return Err(ChdbError::InvalidInput {
                    what: "setting name",
                    value: name.clone(),
                });
            }
        }
        if let Some(db) = &self.database
            && (db.is_empty() || db.contains('\0'))
        {
            return Err(ChdbError::InvalidInput {
                what: "database name",
                value: db.clone(),
            });
        }
        let formats =
            std::iter::once(&self.format).chain(self.insert_data.iter().map(|d| &d.format));
        for format in formats {
            if !is_identifier(format) {
                return Err(ChdbError::InvalidInput {
                    what: "format name",
                    value: format.clone(),
                });
            }
        }
        Ok(())
    }
}

/// Splits `INSERT ... FORMAT <name>` into the statement without its FORMAT
/// clause and the format name; `INSERT ... VALUES` gives format `Values`.
/// `None` for anything else.
pub(crate) fn split_insert_format(sql: &[u8]) -> Option<(&[u8], String)> {
    let trimmed = sql.trim_ascii();
    let trimmed = trimmed
        .strip_suffix(b";")
        .unwrap_or(trimmed)
        .trim_ascii_end();
    let first_word_end = trimmed
        .iter()
        .position(|b| !b.is_ascii_alphabetic())
        .unwrap_or(trimmed.len());
    if !trimmed[..first_word_end].eq_ignore_ascii_case(b"INSERT") {
        return None;
    }
    let (before, last) = split_last_word(trimmed)?;
    if last.eq_ignore_ascii_case(b"VALUES") {
        return Some((before, "Values".to_owned()));
    }
    let (statement, keyword) = split_last_word(before)?;
    if !keyword.eq_ignore_ascii_case(b"FORMAT")
        || !last.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
    {
        return None;
    }
    let name = String::from_utf8(last.to_vec()).ok()?;
    Some((statement, name))
}

/// `(text before the last word, trimmed; the last word)`.
fn split_last_word(text: &[u8]) -> Option<(&[u8], &[u8])> {
    let text = text.trim_ascii_end();
    let start = text.iter().rposition(u8::is_ascii_whitespace)? + 1;
    Some((text[..start].trim_ascii_end(), &text[start..]))
}

/// `[A-Za-z_][A-Za-z0-9_]*`: what ClickHouse accepts as a setting,
/// parameter or format name without quoting.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'A'..=b'Z' | b'_'))
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A string literal in ClickHouse SQL, quoted and escaped, so a setting value
/// or database name can never end the literal early.
pub(crate) fn quote_literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\0' => out.push_str("\\0"),
            other => out.push(other),
        }
    }
    out.push('\'');
    out
}

/// A backquoted identifier, escaped the same way.
pub(crate) fn quote_identifier(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('`');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '`' => out.push_str("\\`"),
            other => out.push(other),
        }
    }
    out.push('`');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_format_is_split_off() {
        let (statement, format) =
            split_insert_format(b"INSERT INTO db.t(a,b) FORMAT RowBinary").expect("split");
        assert_eq!(
            (statement, format.as_str()),
            (&b"INSERT INTO db.t(a,b)"[..], "RowBinary")
        );
        let (statement, format) = split_insert_format(b" insert into t values ; ").expect("split");
        assert_eq!(
            (statement, format.as_str()),
            (&b"insert into t"[..], "Values")
        );
        assert_eq!(split_insert_format(b"SELECT 1 FORMAT JSON"), None);
        assert_eq!(split_insert_format(b"INSERT INTO t SELECT 1"), None);
        assert_eq!(split_insert_format(b"INSERT"), None);
        assert_eq!(split_insert_format(b""), None);
    }

    #[test]
    fn an_insert_with_data_must_end_in_a_format_clause() {
        let r = Request::insert("INSERT INTO t (a) FORMAT RowBinary", vec![1]).expect("insert");
        assert_eq!(r.sql(), b"INSERT INTO t (a)");
        assert_eq!(
            r.insert_data,
            Some(InsertData {
                format: "RowBinary".to_owned(),
                bytes: vec![1]
            })
        );
        assert!(matches!(
            Request::insert("SELECT 1", vec![]),
            Err(ChdbError::InvalidInput { .. })
        ));
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("max_execution_time"));
        assert!(is_identifier("_x1"));
        for bad in ["", "1x", "a-b", "a b", "a;DROP", "é"] {
            assert!(!is_identifier(bad), "{bad:?}");
        }
    }

    #[test]
    fn literals_cannot_be_escaped_from() {
        assert_eq!(quote_literal(r"it's \"), r"'it\'s \\'");
        assert_eq!(quote_identifier("we`ird"), r"`we\`ird`");
    }

    #[test]
    fn validate_refuses_bad_names() {
        assert!(Request::new("SELECT 1").param("ok", "1").validate().is_ok());
        assert!(matches!(
            Request::new("SELECT 1").param("no-t", "1").validate(),
            Err(ChdbError::InvalidInput {
                what: "parameter name",
                ..
            })
        ));
        assert!(matches!(
            Request::new("SELECT 1").setting("x;y", "1").validate(),
            Err(ChdbError::InvalidInput {
                what: "setting name",
                ..
            })
        ));
        assert!(matches!(
            Request::new("SELECT 1").format("JSON Each").validate(),
            Err(ChdbError::InvalidInput {
                what: "format name",
                ..
            })
        ));
    }

    #[test]
    fn typed_settings_set_and_clear() {
        let r = Request::new("SELECT 1")
            .max_execution_time_s(Some(5))
            .select_sequential_consistency(true);
        assert_eq!(
            r.settings.get("max_execution_time").map(String::as_str),
            Some("5")
        );
        assert_eq!(
            r.settings
                .get("select_sequential_consistency")
                .map(String::as_str),
            Some("1")
        );
        let r = r
            .max_execution_time_s(None)
            .select_sequential_consistency(false);
        assert!(r.settings.is_empty());
    }
}
