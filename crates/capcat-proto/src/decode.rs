//! Reading typed values out of result rows, with a typed error instead of a
//! panic when the server (or a fake) answers with something else.

use uuid::Uuid;

use crate::statement::Value;

/// Why a result row could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BadRow(pub(crate) String);

pub(crate) fn u64_at(row: &[Value], i: usize, what: &str) -> Result<u64, BadRow> {
    match row.get(i) {
        Some(Value::UInt64(v)) => Ok(*v),
        Some(Value::Int64(v)) => {
            u64::try_from(*v).map_err(|_| BadRow(format!("{what}: negative value {v}")))
        }
        other => Err(BadRow(format!(
            "{what}: expected an unsigned integer, got {other:?}"
        ))),
    }
}

pub(crate) fn uuid_at(row: &[Value], i: usize, what: &str) -> Result<Uuid, BadRow> {
    match row.get(i) {
        Some(Value::Uuid(v)) => Ok(*v),
        other => Err(BadRow(format!("{what}: expected a UUID, got {other:?}"))),
    }
}

pub(crate) fn string_at(row: &[Value], i: usize, what: &str) -> Result<String, BadRow> {
    match row.get(i) {
        Some(Value::String(v)) => Ok(v.clone()),
        other => Err(BadRow(format!("{what}: expected a string, got {other:?}"))),
    }
}

pub(crate) fn bool_at(row: &[Value], i: usize, what: &str) -> Result<bool, BadRow> {
    match u64_at(row, i, what)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(BadRow(format!("{what}: expected 0 or 1, got {v}"))),
    }
}
