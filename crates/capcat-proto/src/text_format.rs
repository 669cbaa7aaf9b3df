//! ClickHouse's escaped text format, shared by query parameters and the
//! descriptor rows' `TabSeparated` text.

/// A top-level string parameter in ClickHouse's escaped text format.
pub(crate) fn escape_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out
}
