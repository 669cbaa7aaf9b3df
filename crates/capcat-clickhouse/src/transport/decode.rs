//! Strict decoding of `TabSeparatedWithNamesAndTypes` into [`Rows`].
//!
//! The header's two lines (names, then types) are checked against the
//! statement's [`Column`]s before a single value is read: a statement whose
//! result drifted from what the protocol expects fails loudly here instead of
//! feeding a machine values of the wrong meaning.

use capcat_proto::{Column, ColumnType, Failure, Rows, Value};
use uuid::Uuid;

/// The output format both transports ask for when a statement returns rows.
pub const RESULT_FORMAT: &str = "TabSeparatedWithNamesAndTypes";

fn malformed(message: impl Into<String>) -> Failure {
    Failure::Malformed {
        message: message.into(),
    }
}

/// Decodes `output` (in [`RESULT_FORMAT`]) as rows of `columns`.
pub fn decode_rows(columns: &[Column], output: &[u8]) -> Result<Rows, Failure> {
    let mut lines = split_lines(output)?;
    let names = lines
        .next()
        .ok_or_else(|| malformed("the result has no header line of column names"))?;
    let types = lines
        .next()
        .ok_or_else(|| malformed("the result has no header line of column types"))?;
    let names = fields(names, columns.len(), "header of names")?;
    let types = fields(types, columns.len(), "header of types")?;
    for ((column, name), ty) in columns.iter().zip(&names).zip(&types) {
        if name.as_deref() != Some(column.name) {
            return Err(malformed(format!(
                "expected column {:?}, the server returned {name:?}",
                column.name
            )));
        }
        if !type_fits(column.ty, ty) {
            return Err(malformed(format!(
                "column {:?} is {ty:?} on the server, which does not decode as {:?}",
                column.name, column.ty
            )));
        }
    }
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate() {
        let texts = fields(line, columns.len(), "row")?;
        let mut row = Vec::with_capacity(columns.len());
        for (column, text) in columns.iter().zip(texts) {
            row.push(
                value(column, text).map_err(|why| {
                    malformed(format!("row {n}, column {:?}: {why}", column.name))
                })?,
            );
        }
        rows.push(row);
    }
    Ok(Rows(rows))
}

/// The lines of the output, each without its `\n`. Every line, the last
/// included, must end with `\n`: a truncated response must not decode as a
/// shorter one.
fn split_lines(output: &[u8]) -> Result<impl Iterator<Item = &[u8]>, Failure> {
    let body = match output.split_last() {
        None => &[][..],
        Some((b'\n', body)) => body,
        Some(_) => {
            return Err(malformed(
                "the result does not end with a newline (truncated?)",
            ));
        }
    };
    let empty = output.is_empty();
    Ok(body.split(|b| *b == b'\n').filter(move |_| !empty))
}

/// Splits one line into exactly `width` unescaped fields (`None` is `\N`).
fn fields(line: &[u8], width: usize, what: &str) -> Result<Vec<Option<String>>, Failure> {
    let raw: Vec<&[u8]> = line.split(|b| *b == b'\t').collect();
    if raw.len() != width {
        return Err(malformed(format!(
            "{what} has {} fields, the statement expects {width}",
            raw.len()
        )));
    }
    raw.into_iter().map(unescape).collect()
}

/// Undoes the TabSeparated escaping of one field; `\N` alone is NULL.
fn unescape(raw: &[u8]) -> Result<Option<String>, Failure> {
    if raw == b"\\N" {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut bytes = raw.iter();
    while let Some(&b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        let escaped = bytes
            .next()
            .ok_or_else(|| malformed("a field ends with a lone backslash"))?;
        out.push(match escaped {
            b'b' => 0x08,
            b'f' => 0x0c,
            b'r' => b'\r',
            b'n' => b'\n',
            b't' => b'\t',
            b'0' => 0,
            b'a' => 0x07,
            b'v' => 0x0b,
            b'\\' => b'\\',
            b'\'' => b'\'',
            b'"' => b'"',
            b'/' => b'/',
            b'N' => return Err(malformed("\\N inside a field")),
            other => {
                return Err(malformed(format!(
                    "unknown escape \\{}",
                    char::from(*other)
                )));
            }
        });
    }
    String::from_utf8(out)
        .map(Some)
        .map_err(|_| malformed("a field is not UTF-8"))
}

/// Whether a server column type decodes as `ty`.
///
/// `Nullable(T)` fits wherever `T` does: ClickHouse types a scalar subquery
/// (`(SELECT count() FROM t) AS n`) as `Nullable`, and the protocol reads
/// such columns. The strictness moves to the value: a NULL in a column the
/// protocol did not declare nullable is refused when it arrives.
fn type_fits(ty: ColumnType, server: &Option<String>) -> bool {
    let Some(server) = server.as_deref() else {
        return false;
    };
    let inner = server
        .strip_prefix("Nullable(")
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or(server);
    let unsigned = matches!(inner, "UInt8" | "UInt16" | "UInt32" | "UInt64");
    match ty {
        ColumnType::UInt64 | ColumnType::NullableUInt64 => unsigned,
        ColumnType::Int64 => matches!(inner, "Int8" | "Int16" | "Int32" | "Int64"),
        ColumnType::String => matches!(inner, "String" | "LowCardinality(String)"),
        ColumnType::Uuid => inner == "UUID",
        _ => false,
    }
}

fn value(column: &Column, text: Option<String>) -> Result<Value, String> {
    let Some(text) = text else {
        return match column.ty {
            ColumnType::NullableUInt64 => Ok(Value::Null),
            _ => Err("NULL in a column that is not nullable".to_owned()),
        };
    };
    match column.ty {
        ColumnType::UInt64 | ColumnType::NullableUInt64 => text
            .parse::<u64>()
            .map(Value::UInt64)
            .map_err(|_| format!("{text:?} is not an unsigned integer")),
        ColumnType::Int64 => text
            .parse::<i64>()
            .map(Value::Int64)
            .map_err(|_| format!("{text:?} is not a signed integer")),
        ColumnType::String => Ok(Value::String(text)),
        ColumnType::Uuid => Uuid::parse_str(&text)
            .map(Value::Uuid)
            .map_err(|_| format!("{text:?} is not a UUID")),
        other => Err(format!("no decoder for {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols() -> Vec<Column> {
        vec![
            Column {
                name: "n",
                ty: ColumnType::UInt64,
            },
            Column {
                name: "s",
                ty: ColumnType::String,
            },
            Column {
                name: "u",
                ty: ColumnType::Uuid,
            },
            Column {
                name: "maybe",
                ty: ColumnType::NullableUInt64,
            },
        ]
    }

    const HEADER: &str = "n\ts\tu\tmaybe\nUInt8\tString\tUUID\tNullable(UInt64)\n";

    #[test]
    fn rows_decode_with_escapes_and_nulls() {
        let out = format!(
            "{HEADER}7\ta\\tb\\nc\\\\d\\'\t00000000-0000-0000-0000-000000000001\t\\N\n\
             8\t\t00000000-0000-0000-0000-000000000002\t9\n"
        );
        let rows = decode_rows(&cols(), out.as_bytes()).expect("decodes");
        assert_eq!(
            rows.0,
            vec![
                vec![
                    Value::UInt64(7),
                    Value::String("a\tb\nc\\d'".into()),
                    Value::Uuid(Uuid::from_u128(1)),
                    Value::Null
                ],
                vec![
                    Value::UInt64(8),
                    Value::String(String::new()),
                    Value::Uuid(Uuid::from_u128(2)),
                    Value::UInt64(9)
                ],
            ]
        );
    }

    #[test]
    fn a_header_only_result_is_no_rows() {
        assert_eq!(
            decode_rows(&cols(), HEADER.as_bytes()).expect("decodes"),
            Rows::empty()
        );
    }

    #[test]
    fn every_mismatch_is_malformed() {
        let bad = [
            // Wrong name.
            "n\tx\tu\tmaybe\nUInt8\tString\tUUID\tUInt64\n".to_owned(),
            // Wrong type.
            "n\ts\tu\tmaybe\nInt8\tString\tUUID\tUInt64\n".to_owned(),
            // Wrong type inside Nullable.
            "n\ts\tu\tmaybe\nNullable(String)\tString\tUUID\tUInt64\n".to_owned(),
            // NULL in a Nullable column the protocol reads as not nullable.
            "n\ts\tu\tmaybe\nNullable(UInt64)\tString\tUUID\tUInt64\n\\N\ta\t00000000-0000-0000-0000-000000000001\t1\n".to_owned(),
            // Too few columns.
            "n\ts\tu\nUInt8\tString\tUUID\n".to_owned(),
            // Not a number.
            format!("{HEADER}x\ta\t00000000-0000-0000-0000-000000000001\t1\n"),
            // Negative into unsigned.
            format!("{HEADER}-1\ta\t00000000-0000-0000-0000-000000000001\t1\n"),
            // Not a UUID.
            format!("{HEADER}1\ta\tnope\t1\n"),
            // NULL where none is allowed.
            format!("{HEADER}\\N\ta\t00000000-0000-0000-0000-000000000001\t1\n"),
            // A row too wide.
            format!("{HEADER}1\ta\t00000000-0000-0000-0000-000000000001\t1\t2\n"),
            // Truncated: no final newline.
            format!("{HEADER}1\ta\t00000000-0000-0000-0000-000000000001\t1"),
            // Unknown escape.
            format!("{HEADER}1\ta\\q\t00000000-0000-0000-0000-000000000001\t1\n"),
            // No header at all.
            String::new(),
        ];
        for out in bad {
            assert!(
                matches!(
                    decode_rows(&cols(), out.as_bytes()),
                    Err(Failure::Malformed { .. })
                ),
                "{out:?} decoded"
            );
        }
    }
}
