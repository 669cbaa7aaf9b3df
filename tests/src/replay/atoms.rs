//! Values as the replay compares them: "atoms", the text form of each
//! scalar (a number, a UUID, a string), in order.
//!
//! The model prints its predictions with Rust's `Debug` (`UInt64(1)`,
//! `Uuid(…)`, `String("p0")`, `LeaseRow { term: 1, … }`, `(1, …, ("s",
//! …))`); the engine answers in `TabSeparated`. Both reduce to the same
//! atoms: numbers and UUIDs as text, strings unescaped; names of types and
//! fields are dropped, nesting is flattened (every model row has a fixed
//! shape, so its order is its meaning).

/// The atom of SQL NULL (`\N` in `TabSeparated`, `Null` in the model).
pub const NULL: &str = "\\N";

fn is_uuid_at(chars: &[char], i: usize) -> bool {
    const DASHES: [usize; 4] = [8, 13, 18, 23];
    if i + 36 > chars.len() {
        return false;
    }
    let ok = (0..36).all(|k| {
        let c = chars[i + k];
        if DASHES.contains(&k) {
            c == '-'
        } else {
            c.is_ascii_hexdigit()
        }
    });
    ok && chars.get(i + 36).is_none_or(|c| !c.is_ascii_alphanumeric())
}

/// The atoms of a value or row in the model's `Debug` notation.
pub fn model_atoms(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            let mut s = String::new();
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    i += 1;
                    s.push(match chars[i] {
                        'n' => '\n',
                        't' => '\t',
                        other => other,
                    });
                } else {
                    s.push(chars[i]);
                }
                i += 1;
            }
            out.push(s);
            i += 1;
        } else if c.is_ascii_hexdigit() && is_uuid_at(&chars, i) {
            out.push(chars[i..i + 36].iter().collect());
            i += 36;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if word == "Null" {
                out.push(NULL.to_owned());
            }
        } else {
            i += 1;
        }
    }
    out
}

fn unescape_tsv(field: &str) -> String {
    if field == NULL {
        return NULL.to_owned();
    }
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('0') => out.push('\0'),
                Some('b') => out.push('\u{8}'),
                Some('f') => out.push('\u{c}'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The rows of a `TabSeparated` result, each a list of atoms.
pub fn tsv_rows(output: &[u8]) -> Vec<Vec<String>> {
    String::from_utf8_lossy(output)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split('\t').map(unescape_tsv).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_notation_reduces_to_atoms() {
        assert_eq!(model_atoms("UInt64(20)"), vec!["20"]);
        assert_eq!(model_atoms("String(\"p0\")"), vec!["p0"]);
        assert_eq!(
            model_atoms(
                "LeaseRow { term: 2, lease_id: f0f00000-0000-0000-0000-00010000000a, holder: \"p1\", expires_at_ns: 0 }"
            ),
            vec!["2", "f0f00000-0000-0000-0000-00010000000a", "p1", "0"]
        );
        assert_eq!(
            model_atoms(
                "((\"s\", 00000000-0000-0000-0000-0000facc0000), 1, 00000001-0000-0000-0000-0b0000000002)"
            ),
            vec![
                "s",
                "00000000-0000-0000-0000-0000facc0000",
                "1",
                "00000001-0000-0000-0000-0b0000000002"
            ]
        );
        assert_eq!(model_atoms("Null"), vec![NULL]);
    }

    #[test]
    fn tab_separated_output_reduces_to_atoms() {
        assert_eq!(
            tsv_rows(b"1\ta\\tb\t\\N\n2\tc\t0\n"),
            vec![vec!["1", "a\tb", NULL], vec!["2", "c", "0"]]
        );
    }
}
