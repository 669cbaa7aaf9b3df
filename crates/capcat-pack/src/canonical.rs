//! A fast path for reading JSON exactly as the writer lays it out: the
//! descriptor text (`encode::write_descriptor`) and the header around it
//! (`encode::write_skeleton`): fields in their fixed order, compact JSON,
//! strings without escapes (the descriptor inside the header escaped only
//! as the writer escapes it).
//!
//! The descriptor is read where the header holds it, still escaped (every
//! `"` of its JSON spelled `\"`), when no string value in it needs an
//! escape of its own: then each value is spelled alike escaped or not, and
//! nothing is copied out of the header. Otherwise the header's copy is
//! unescaped once and the text parsed as it is.
//!
//! It accepts only that spelling and returns `None` for anything else, a
//! valid but differently spelled text as well as an invalid one; the
//! caller then parses the text with `serde_json`, which decides. On what it
//! accepts it gives exactly the values `serde_json` would, so the fast path
//! changes no outcome, only the time: the unit tests here and in
//! `descriptor` and `header` check both parsers agree.

use uuid::Uuid;

use crate::digest::Sha256Digest;
use crate::dtype::Dtype;

/// One record of canonical descriptor text, borrowed from it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RecordRef<'a> {
    pub(crate) tenant_id: &'a str,
    pub(crate) experiment_id: &'a str,
    pub(crate) run_id: &'a str,
    pub(crate) captured_at_ns: u64,
    pub(crate) capture_id: Uuid,
    pub(crate) model: &'a str,
    pub(crate) module_path: &'a str,
    pub(crate) hook: &'a str,
    pub(crate) step: u64,
    pub(crate) tensor_name: &'a str,
    pub(crate) dtype: Dtype,
    pub(crate) shape: Vec<u64>,
    /// In the order the text lists them.
    pub(crate) tags: Vec<(&'a str, &'a str)>,
    pub(crate) payload_sha256: Sha256Digest,
}

/// Canonical descriptor text: its version, pack id and records.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct DescriptorRef<'a> {
    pub(crate) format_version: u64,
    pub(crate) pack_id: Uuid,
    pub(crate) records: Vec<RecordRef<'a>>,
}

/// Parses `text` if it is spelled exactly as the writer spells it; `None`
/// otherwise.
pub(crate) fn parse(text: &str) -> Option<DescriptorRef<'_>> {
    let mut c = Cursor::new(text);
    let descriptor = c.descriptor()?;
    c.at_end().then_some(descriptor)
}

/// Parses the descriptor where the header holds it, still escaped, starting
/// at byte `start` of the header `text` (just after the `"` that opens the
/// `capcat` value). Returns the descriptor and the index of the `"` that
/// closes the value. `None` unless the escaped text is the writer's
/// spelling with no escape inside a string value: the caller then
/// unescapes the value and parses it as any other text.
///
/// On what it accepts it gives exactly what [`parse`] gives for the
/// unescaped value, borrowing the same strings: a string value with no
/// escape is spelled alike escaped or not.
pub(crate) fn parse_in_header(text: &str, start: usize) -> Option<(DescriptorRef<'_>, usize)> {
    let mut c = Cursor {
        text,
        at: start,
        escaped: true,
    };
    let descriptor = c.descriptor()?;
    (c.rest().first() == Some(&b'"')).then_some((descriptor, c.at))
}

/// A position in JSON text, read forward.
pub(crate) struct Cursor<'a> {
    text: &'a str,
    at: usize,
    /// True when the text is a JSON string's content, read without
    /// unescaping it: every `"` of the JSON it holds is spelled `\"`.
    escaped: bool,
}

/// A literal of descriptor JSON in both spellings: as the descriptor text
/// spells it, and escaped once, as the header's copy of it does.
#[derive(Clone, Copy)]
pub(crate) struct Lit {
    plain: &'static [u8],
    escaped: &'static [u8],
}

/// The length of `text` with every `"` written `\"`.
const fn escaped_len(text: &[u8]) -> usize {
    let mut len = text.len();
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'"' {
            len += 1;
        }
        i += 1;
    }
    len
}

/// `text` with every `"` written `\"`; `N` is [`escaped_len`] of it.
const fn escape_quotes<const N: usize>(text: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let (mut i, mut o) = (0, 0);
    while i < text.len() {
        if text[i] == b'"' {
            out[o] = b'\\';
            o += 1;
        }
        out[o] = text[i];
        o += 1;
        i += 1;
    }
    out
}

/// A [`Lit`] from a literal with no `\\` in it, both spellings built at
/// compile time.
macro_rules! lit {
    ($text:literal) => {{
        const PLAIN: &[u8] = $text;
        const LEN: usize = escaped_len(PLAIN);
        const ESCAPED: [u8; LEN] = escape_quotes::<LEN>(PLAIN);
        Lit {
            plain: PLAIN,
            escaped: &ESCAPED,
        }
    }};
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self {
            text,
            at: 0,
            escaped: false,
        }
    }

    /// Where the cursor is: the index of the next byte to read.
    pub(crate) fn position(&self) -> usize {
        self.at
    }

    /// Moves the cursor to `at`, an index another cursor over the same
    /// text reached.
    pub(crate) fn seek(&mut self, at: usize) {
        self.at = at;
    }

    /// True when the whole text was read.
    pub(crate) fn at_end(&self) -> bool {
        self.at == self.text.len()
    }

    fn rest(&self) -> &'a [u8] {
        &self.text.as_bytes()[self.at..]
    }

    // Inlined, so that a literal's length is a constant where it is
    // compared: the compiler then compares a few words in place of calling
    // `memcmp`, which for the 60,000 literals of a 4,096-record descriptor
    // took a tenth of an open's parse.
    #[inline(always)]
    pub(crate) fn try_lit(&mut self, lit: &[u8]) -> bool {
        let found = self.rest().starts_with(lit);
        if found {
            self.at += lit.len();
        }
        found
    }

    #[inline(always)]
    pub(crate) fn lit(&mut self, lit: &[u8]) -> Option<()> {
        self.try_lit(lit).then_some(())
    }

    /// A literal of descriptor JSON, in the spelling this cursor reads.
    ///
    /// Each spelling is compared in its own branch, so that its length is a
    /// constant there (see [`Cursor::try_lit`]).
    #[inline(always)]
    fn json(&mut self, lit: Lit) -> Option<()> {
        if self.escaped {
            self.lit(lit.escaped)
        } else {
            self.lit(lit.plain)
        }
    }

    /// A string with no escape and no control character (JSON refuses
    /// those unescaped; the fallback reports them). In an escaped cursor
    /// the string is delimited by `\"`, and any other `\\` or a bare `"`
    /// inside it is declined.
    pub(crate) fn string(&mut self) -> Option<&'a str> {
        self.json(lit!(b"\""))?;
        let start = self.at;
        let rest = self.rest();
        let len = special(rest)?;
        // Each closing spelling in its own branch, of constant length (see
        // [`Cursor::try_lit`]).
        let closing = if self.escaped {
            rest[len..].starts_with(b"\\\"").then_some(2)
        } else {
            rest[len..].starts_with(b"\"").then_some(1)
        };
        self.at += len + closing?;
        // `"` and `\\` are ASCII, so both ends are character boundaries.
        self.text.get(start..start + len)
    }

    /// A string whose only escapes are `\"` and `\\` (all the writer puts
    /// in the header's copy of the descriptor), unescaped.
    pub(crate) fn escaped_string(&mut self) -> Option<String> {
        self.lit(b"\"")?;
        let start = self.at;
        let bytes = self.text.as_bytes();
        // The unescaped text is never longer than the rest of the input.
        let mut out = String::with_capacity(bytes.len() - start);
        let mut i = start;
        // Each pass consumes at least one byte or returns.
        loop {
            let run = special(&bytes[i..])?;
            // The run ends before an ASCII byte, so it is whole characters.
            out.push_str(self.text.get(i..i + run)?);
            i += run;
            match (bytes[i], bytes.get(i + 1)) {
                (b'"', _) => {
                    self.at = i + 1;
                    return Some(out);
                }
                (b'\\', Some(&escaped @ (b'"' | b'\\'))) => {
                    out.push(char::from(escaped));
                    i += 2;
                }
                _ => return None,
            }
        }
    }

    /// A JSON integer that fits a u64: digits, no leading zero, no sign,
    /// fraction or exponent (the next literal refuses a `.` or `e`).
    pub(crate) fn number(&mut self) -> Option<u64> {
        let rest = self.rest();
        // One pass reads the digits and their value; a value past u64 is
        // refused, as `str::parse` refuses it.
        let mut value = 0u64;
        let mut len = 0;
        for &byte in rest.iter().take_while(|b| b.is_ascii_digit()) {
            value = value.checked_mul(10)?.checked_add(u64::from(byte - b'0'))?;
            len += 1;
        }
        if len == 0 || (len > 1 && rest[0] == b'0') {
            return None;
        }
        self.at += len;
        Some(value)
    }

    /// A list of JSON integers, `[]` included.
    pub(crate) fn numbers(&mut self) -> Option<Vec<u64>> {
        self.lit(b"[")?;
        self.items(b']', Self::number)
    }

    /// The items of a JSON array or object whose opening bracket was read:
    /// `item` read each, separated by `,`, up to and including `close`.
    fn items<T>(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        let mut items = Vec::new();
        if !self.try_lit(&[close]) {
            // Each pass consumes one item or returns; the text is finite.
            loop {
                items.push(item(self)?);
                if self.try_lit(&[close]) {
                    break;
                }
                self.lit(b",")?;
            }
        }
        Some(items)
    }

    fn uuid(&mut self) -> Option<Uuid> {
        Uuid::try_parse(self.string()?).ok()
    }

    /// A whole descriptor object, from its `{` to its `}`.
    fn descriptor(&mut self) -> Option<DescriptorRef<'a>> {
        self.json(lit!(br#"{"format_version":"#))?;
        let format_version = self.number()?;
        self.json(lit!(br#","pack_id":"#))?;
        let pack_id = self.uuid()?;
        self.json(lit!(br#","records":["#))?;
        let records = self.items(b']', Self::record)?;
        self.lit(b"}")?;
        Some(DescriptorRef {
            format_version,
            pack_id,
            records,
        })
    }

    fn record(&mut self) -> Option<RecordRef<'a>> {
        self.json(lit!(br#"{"tenant_id":"#))?;
        let tenant_id = self.string()?;
        self.json(lit!(br#","experiment_id":"#))?;
        let experiment_id = self.string()?;
        self.json(lit!(br#","run_id":"#))?;
        let run_id = self.string()?;
        self.json(lit!(br#","captured_at_ns":"#))?;
        let captured_at_ns = self.number()?;
        self.json(lit!(br#","capture_id":"#))?;
        let capture_id = self.uuid()?;
        self.json(lit!(br#","model":"#))?;
        let model = self.string()?;
        self.json(lit!(br#","module_path":"#))?;
        let module_path = self.string()?;
        self.json(lit!(br#","hook":"#))?;
        let hook = self.string()?;
        self.json(lit!(br#","step":"#))?;
        let step = self.number()?;
        self.json(lit!(br#","tensor_name":"#))?;
        let tensor_name = self.string()?;
        self.json(lit!(br#","dtype":"#))?;
        let dtype = self.string()?.parse().ok()?;
        self.json(lit!(br#","shape":"#))?;
        let shape = self.numbers()?;
        self.json(lit!(br#","tags":{"#))?;
        let tags = self.items(b'}', |c| {
            let key = c.string()?;
            c.lit(b":")?;
            Some((key, c.string()?))
        })?;
        self.json(lit!(br#","payload_sha256":"#))?;
        let payload_sha256 = self.string()?.parse().ok()?;
        self.lit(b"}")?;
        Some(RecordRef {
            tenant_id,
            experiment_id,
            run_id,
            captured_at_ns,
            capture_id,
            model,
            module_path,
            hook,
            step,
            tensor_name,
            dtype,
            shape,
            tags,
            payload_sha256,
        })
    }
}

/// The index of the first byte of `bytes` that is `"`, `\` or a control
/// character (below 0x20): where a JSON string's plain run ends. Eight bytes
/// are tested at a time; a word that may hold one is searched byte by byte.
fn special(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Nonzero when some byte of `word` is below `n` (n <= 128), with no
    // false negatives.
    let below = |word: u64, n: u64| word.wrapping_sub(ONES * n) & !word & HIGH;
    let mut at = 0;
    while let Some(chunk) = bytes.get(at..at + 8) {
        // `get` returned exactly eight bytes.
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let quote = below(word ^ (ONES * u64::from(b'"')), 1);
        let backslash = below(word ^ (ONES * u64::from(b'\\')), 1);
        if quote | backslash | below(word, 0x20) != 0 {
            break;
        }
        at += 8;
    }
    bytes[at..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|p| at + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = r#"{"tenant_id":"t","experiment_id":"e","run_id":"r","captured_at_ns":1764000000000000000,"capture_id":"0dd5a1e5-0000-4000-8000-000000010000","model":"m","module_path":"p","hook":"h","step":0,"tensor_name":"n","dtype":"BF16","shape":[1,896],"tags":{"a":"1","b":"2"},"payload_sha256":"c7ddc5d44d1b6a0d3a9bc81cfa24dfc2e15325599fa5325b1cbf7580d8d6cb9e"}"#;

    fn descriptor(records: &str) -> String {
        format!(
            r#"{{"format_version":2,"pack_id":"00000000-0000-0000-0000-000000000007","records":[{records}]}}"#
        )
    }

    #[test]
    fn special_bytes_are_found_wherever_they_are() {
        for len in 0..40 {
            let plain = vec![b'a'; len];
            assert_eq!(special(&plain), None);
            for at in 0..len {
                for byte in [b'"', b'\\', 0x00, 0x1f] {
                    let mut bytes = plain.clone();
                    bytes[at] = byte;
                    assert_eq!(special(&bytes), Some(at), "{len} {at} {byte}");
                }
                // Neighbours of the special bytes are not special.
                for byte in [b'!', b'#', b'[', b']', 0x20, 0x7f, 0x80, 0xff] {
                    let mut bytes = plain.clone();
                    bytes[at] = byte;
                    assert_eq!(special(&bytes), None, "{len} {at} {byte}");
                }
            }
        }
    }

    #[test]
    fn numbers_are_json_integers_that_fit_a_u64() {
        let read = |text: &str| Cursor::new(text).number();
        for (text, value) in [
            ("0", 0),
            ("7,", 7),
            ("896]", 896),
            ("18446744073709551615", u64::MAX),
        ] {
            assert_eq!(read(text), Some(value), "{text}");
        }
        for text in [
            "",
            "-1",
            "01",
            "00",
            "18446744073709551616",
            "99999999999999999999",
        ] {
            assert_eq!(read(text), None, "{text}");
        }
    }

    #[test]
    fn escaped_strings_take_only_the_writers_escapes() {
        let read = |text: &str| Cursor::new(text).escaped_string();
        assert_eq!(read(r#""a\"b\\c""#).as_deref(), Some(r#"a"b\c"#));
        assert_eq!(read(r#""""#).as_deref(), Some(""));
        for other in [
            r#""\n""#,
            r#""\u0041""#,
            r#""\/""#,
            "\"a\u{1}\"",
            r#""open"#,
        ] {
            assert_eq!(read(other), None, "{other}");
        }
    }

    #[test]
    fn the_writers_spelling_is_read() {
        let text = descriptor(&format!("{RECORD},{RECORD}"));
        let parsed = parse(&text).expect("canonical");
        assert_eq!(parsed.format_version, 2);
        assert_eq!(parsed.pack_id, Uuid::from_u128(7));
        assert_eq!(parsed.records.len(), 2);
        let record = &parsed.records[0];
        assert_eq!(record.captured_at_ns, 1_764_000_000_000_000_000);
        assert_eq!(record.shape, vec![1, 896]);
        assert_eq!(record.tags, vec![("a", "1"), ("b", "2")]);
        assert!(parse(&descriptor("")).is_some_and(|d| d.records.is_empty()));
        let bare = RECORD
            .replace("[1,896]", "[]")
            .replace(r#"{"a":"1","b":"2"}"#, "{}");
        assert!(parse(&descriptor(&bare)).is_some());
    }

    /// Every other spelling, valid JSON or not, is left to serde_json.
    #[test]
    fn any_other_spelling_falls_back() {
        for (from, to) in [
            (r#""t""#, r#""t\"""#),
            (r#""t""#, "\"t\u{1}\""),
            (r#""step":0"#, r#""step":00"#),
            (r#""step":0"#, r#""step":-0"#),
            (r#""step":0"#, r#""step":0.0"#),
            (r#""step":0"#, r#""step":1e3"#),
            (r#""step":0"#, r#""step":18446744073709551616"#),
            (r#""step":0"#, r#""step": 0"#),
            (r#""BF16""#, r#""bf16""#),
            (
                r#""tenant_id":"t","experiment_id":"e""#,
                r#""experiment_id":"e","tenant_id":"t""#,
            ),
            ("c7dd", "C7DD"),
            ("-000000010000", "-00000001000"),
        ] {
            let record = RECORD.replacen(from, to, 1);
            assert_ne!(record, RECORD, "{from} is in the record");
            assert_eq!(parse(&descriptor(&record)), None, "{to}");
        }
        let text = descriptor(RECORD);
        for edited in [
            format!("{text} "),
            format!(" {text}"),
            text.replacen(":2,", ":2 ,", 1),
        ] {
            assert_eq!(parse(&edited), None, "{edited}");
        }
        for cut in 0..text.len() {
            assert_eq!(parse(&text[..cut]), None, "cut at {cut}");
        }
    }
}
