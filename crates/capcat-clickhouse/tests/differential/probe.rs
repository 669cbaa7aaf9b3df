//! One SELECT that evaluates many fragment instances at once.
//!
//! A fragment is a SQL expression with `{name:Type}` placeholders. To
//! evaluate it under many parameter sets in one statement, every instance
//! gets its placeholders renamed (`{lease_id:UUID}` becomes
//! `{lease_id_7:UUID}` in instance 7) and its values bound under the new
//! names, so the engine still binds every value as a typed parameter, exactly
//! as it does for the protocol's own statements.
//!
//! The server's clock is bound too: [`bind_clock`] replaces the one spelling
//! of it, [`fragments::SERVER_NOW_NS`], by a parameter, so that an expiry one
//! nanosecond past "now" is a value the test chooses. Any other clock
//! function left in the text fails the test: an edit that reads the clock
//! some other way would otherwise escape the substitution.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use capcat_proto::fragments::SERVER_NOW_NS;
use capcat_proto::{Column, ColumnType, Expect, Param, Settings, Statement, Value};

/// The placeholder the clock is bound to.
pub const CLOCK_PARAM: &str = "server_now_ns";

/// `sql` with the server clock replaced by `{server_now_ns:Int64}`.
///
/// Panics when `must_read_clock` and the text does not read the clock
/// through [`SERVER_NOW_NS`], or when any other clock function remains.
pub fn bind_clock(sql: &str, must_read_clock: bool) -> String {
    assert!(
        !must_read_clock || sql.contains(SERVER_NOW_NS),
        "expected the server clock spelled {SERVER_NOW_NS} in: {sql}"
    );
    let bound = sql.replace(SERVER_NOW_NS, &format!("{{{CLOCK_PARAM}:Int64}}"));
    for clock in [
        "now64(",
        "now(",
        "now()",
        "today(",
        "fromUnixTimestamp64",
        "nowInBlock",
    ] {
        assert!(
            !bound.contains(clock),
            "a clock read other than {SERVER_NOW_NS} ({clock}) escapes the bound clock: {sql}"
        );
    }
    bound
}

/// `text` with every placeholder name suffixed by `_{k}`.
pub fn rename_placeholders(text: &str, k: usize) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let colon = rest
            .find(':')
            .unwrap_or_else(|| panic!("a brace that opens no placeholder in {text}"));
        let name = &rest[..colon];
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "placeholder name {name:?} in {text}"
        );
        out.push_str(name);
        out.push_str(&format!("_{k}"));
        rest = &rest[colon..];
    }
    out.push_str(rest);
    out
}

/// A column name that lives as long as the process (`Column::name` is
/// `&'static str`); each distinct name is leaked once.
fn column_name(i: usize) -> &'static str {
    static NAMES: OnceLock<Mutex<Vec<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .expect("no test panics while holding the name cache");
    while names.len() <= i {
        let n = names.len();
        names.push(Box::leak(format!("c{n}").into_boxed_str()));
    }
    names[i]
}

/// One instance: a label for the report, and what the meaning predicts.
#[derive(Clone, Debug)]
struct Instance {
    label: String,
    expected: u64,
}

/// A SELECT of many `UInt64` columns, one per instance.
#[derive(Debug, Default)]
pub struct Probe {
    columns: Vec<String>,
    params: BTreeMap<String, Param>,
    instances: Vec<Instance>,
}

impl Probe {
    /// Adds an instance: `expr` (a SQL expression of type UInt64 whose
    /// placeholders are bound from `params`) and the value the meaning
    /// predicts for it.
    ///
    /// Every guard is a conjunct of a WHERE clause, where NULL rejects the
    /// row as false does (a scalar subquery over an empty table is NULL on
    /// this engine), so NULL is read as 0.
    pub fn add(&mut self, label: String, expr: &str, params: &[(&str, Param)], expected: u64) {
        let k = self.instances.len();
        self.columns.push(format!(
            "ifNull(toUInt64({}), 0) AS {}",
            rename_placeholders(expr, k),
            column_name(k)
        ));
        for (name, value) in params {
            self.params.insert(format!("{name}_{k}"), value.clone());
        }
        self.instances.push(Instance { label, expected });
    }

    /// How many instances the probe holds.
    pub fn len(&self) -> usize {
        self.instances.len()
    }

    /// The statement that evaluates every instance.
    pub fn statement(&self) -> Statement {
        Statement {
            name: "test.fragments",
            sql: format!("SELECT {}", self.columns.join(",\n  ")),
            params: self.params.clone(),
            settings: Settings::default(),
            expect: Expect::Rows(
                (0..self.instances.len())
                    .map(|i| Column {
                        name: column_name(i),
                        ty: ColumnType::UInt64,
                    })
                    .collect(),
            ),
            data: None,
        }
    }

    /// The disagreements between the engine's row and the predictions.
    pub fn disagreements(&self, row: &[Value]) -> Vec<String> {
        assert_eq!(row.len(), self.instances.len(), "one value per instance");
        self.instances
            .iter()
            .zip(row)
            .filter_map(|(i, v)| match v {
                Value::UInt64(got) if *got == i.expected => None,
                other => Some(format!(
                    "{}: engine {other:?}, meaning {}",
                    i.label, i.expected
                )),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_renamed_and_nothing_else() {
        assert_eq!(
            rename_placeholders("a = {x:UInt64} AND b IN (SELECT {y_z:UUID})", 3),
            "a = {x_3:UInt64} AND b IN (SELECT {y_z_3:UUID})"
        );
    }

    #[test]
    #[should_panic(expected = "escapes the bound clock")]
    fn a_second_clock_spelling_is_refused() {
        bind_clock(
            &format!("{SERVER_NOW_NS} > toUnixTimestamp64Nano(now64(3))"),
            true,
        );
    }
}
