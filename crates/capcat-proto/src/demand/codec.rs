//! The stored text of a [`DemandRecord`]: a small, fixed JSON shape.
//!
//! ```text
//! {"v":1,"sealed":12,"sealed_epoch":2,"merged":8,"merged_epoch":1,"bytes":4096,"sealed_times":[[9,1000],[10,1100]]}
//! ```
//!
//! `"v"` is always the first key, so a reader recognises a record of any
//! version before it parses anything else, and refuses a newer one
//! ([`DecodeError::UnknownVersion`]) without guessing at its fields. Absent
//! marks are `null` in both the value and the epoch. The decoder accepts
//! exactly this key order, with optional ASCII whitespace between tokens;
//! anything else is a typed error that says where and what was expected.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::mark::Mark;
use super::record::{CURRENT_VERSION, DemandRecord, SEALED_TIMES_CAP};

/// The longest record text accepted. A full record (64 seal times of
/// 20-digit numbers) is under 3 KiB; anything longer is not ours.
pub const MAX_RECORD_TEXT: usize = 8 * 1024;

/// Why a stored record text could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The record is of a newer version; its other fields were not read.
    #[error("demand record version {found} is newer than the known version {known}")]
    UnknownVersion {
        /// The version the text carries.
        found: u64,
        /// The newest version this code reads.
        known: u32,
    },
    /// The text is longer than [`MAX_RECORD_TEXT`].
    #[error("demand record text is {len} bytes, more than the {max} accepted")]
    TooLong {
        /// The text's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The text does not have the record's shape.
    #[error("demand record text: expected {expected} at byte {at}")]
    Syntax {
        /// The byte offset where the text stopped matching.
        at: usize,
        /// What the decoder expected there.
        expected: &'static str,
    },
    /// A mark had a value without an epoch, or an epoch without a value.
    #[error("demand record text: {field} and its epoch must both be null or both be numbers")]
    HalfMark {
        /// `sealed` or `merged`.
        field: &'static str,
    },
    /// The seal times were not in strictly increasing generation order.
    #[error("demand record text: seal times out of order at generation {generation}")]
    UnorderedSealedTimes {
        /// The first generation that was not above its predecessor.
        generation: u64,
    },
    /// More seal times than [`SEALED_TIMES_CAP`].
    #[error("demand record text: {count} seal times, more than the {cap} a record keeps")]
    TooManySealedTimes {
        /// How many the text carries.
        count: usize,
        /// The cap.
        cap: usize,
    },
}

/// The record's stored text. The record is written in its normalized form
/// (version 1, seal times pruned), so decoding gives back an equal record.
pub fn encode(record: &DemandRecord) -> String {
    let record = record.clone().normalized();
    let mut out = String::with_capacity(128 + 24 * record.sealed_times.len());
    // Writing to a String cannot fail; the results are ignored on purpose.
    let _ = write!(out, "{{\"v\":{}", record.v);
    write_mark(&mut out, "sealed", record.sealed);
    write_mark(&mut out, "merged", record.merged);
    let _ = write!(out, ",\"bytes\":{},\"sealed_times\":[", record.bytes);
    for (i, (generation, at)) in record.sealed_times.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "[{generation},{at}]");
    }
    out.push_str("]}");
    out
}

fn write_mark(out: &mut String, name: &str, mark: Option<Mark>) {
    match mark {
        Some(m) => {
            let _ = write!(out, ",\"{name}\":{},\"{name}_epoch\":{}", m.value, m.epoch);
        }
        None => {
            let _ = write!(out, ",\"{name}\":null,\"{name}_epoch\":null");
        }
    }
}

/// The version a stored text declares, read from its first key, without
/// parsing the rest. `0` reads as [`CURRENT_VERSION`].
pub fn declared_version(text: &str) -> Result<u64, DecodeError> {
    let mut cursor = Cursor::new(text)?;
    cursor.token(b"{", "'{'")?;
    cursor.token(b"\"v\"", "the key \"v\" first")?;
    cursor.token(b":", "':'")?;
    let v = cursor.number()?;
    Ok(if v == 0 {
        u64::from(CURRENT_VERSION)
    } else {
        v
    })
}

/// Reads a stored text back into a normalized record.
pub fn decode(text: &str) -> Result<DemandRecord, DecodeError> {
    let v = declared_version(text)?;
    if v > u64::from(CURRENT_VERSION) {
        return Err(DecodeError::UnknownVersion {
            found: v,
            known: CURRENT_VERSION,
        });
    }
    let mut cursor = Cursor::new(text)?;
    cursor.token(b"{", "'{'")?;
    cursor.token(b"\"v\"", "the key \"v\" first")?;
    cursor.token(b":", "':'")?;
    cursor.number()?;
    let sealed = cursor.mark("sealed")?;
    let merged = cursor.mark("merged")?;
    cursor.key(b"bytes", "the key \"bytes\"")?;
    let bytes = cursor.number()?;
    cursor.key(b"sealed_times", "the key \"sealed_times\"")?;
    let sealed_times = cursor.sealed_times()?;
    cursor.token(b"}", "'}'")?;
    cursor.end()?;
    Ok(DemandRecord {
        v: CURRENT_VERSION,
        sealed,
        merged,
        bytes,
        sealed_times,
    }
    .normalized())
}

/// A position in the text being decoded.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Result<Self, DecodeError> {
        if text.len() > MAX_RECORD_TEXT {
            return Err(DecodeError::TooLong {
                len: text.len(),
                max: MAX_RECORD_TEXT,
            });
        }
        Ok(Self {
            bytes: text.as_bytes(),
            at: 0,
        })
    }

    fn skip_whitespace(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    fn error(&self, expected: &'static str) -> DecodeError {
        DecodeError::Syntax {
            at: self.at,
            expected,
        }
    }

    fn token(&mut self, token: &[u8], expected: &'static str) -> Result<(), DecodeError> {
        self.skip_whitespace();
        if self.bytes[self.at..].starts_with(token) {
            self.at += token.len();
            Ok(())
        } else {
            Err(self.error(expected))
        }
    }

    /// `,"name":`
    fn key(&mut self, name: &[u8], expected: &'static str) -> Result<(), DecodeError> {
        self.token(b",", "','")?;
        self.skip_whitespace();
        let rest = &self.bytes[self.at..];
        let quoted = rest.first() == Some(&b'"')
            && rest.get(1..=name.len()) == Some(name)
            && rest.get(name.len() + 1) == Some(&b'"');
        if !quoted {
            return Err(self.error(expected));
        }
        self.at += name.len() + 2;
        self.token(b":", "':'")
    }

    /// An unsigned integer without sign, fraction, exponent or leading zeros.
    fn number(&mut self) -> Result<u64, DecodeError> {
        self.skip_whitespace();
        let start = self.at;
        let mut value: u64 = 0;
        while let Some(&b) = self.bytes.get(self.at) {
            if !b.is_ascii_digit() {
                break;
            }
            if self.at > start && self.bytes[start] == b'0' {
                return Err(self.error("a number without leading zeros"));
            }
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(b - b'0')))
                .ok_or_else(|| self.error("a number that fits in 64 bits"))?;
            self.at += 1;
        }
        if self.at == start {
            return Err(self.error("an unsigned integer"));
        }
        Ok(value)
    }

    fn null_or_number(&mut self) -> Result<Option<u64>, DecodeError> {
        self.skip_whitespace();
        if self.bytes[self.at..].starts_with(b"null") {
            self.at += 4;
            Ok(None)
        } else {
            self.number().map(Some)
        }
    }

    /// `,"name":V,"name_epoch":E` with both null or both numbers.
    fn mark(&mut self, field: &'static str) -> Result<Option<Mark>, DecodeError> {
        let (key, epoch_key, expected, epoch_expected): (&[u8], &[u8], _, _) = match field {
            "sealed" => (
                b"sealed",
                b"sealed_epoch",
                "the key \"sealed\"",
                "the key \"sealed_epoch\"",
            ),
            _ => (
                b"merged",
                b"merged_epoch",
                "the key \"merged\"",
                "the key \"merged_epoch\"",
            ),
        };
        self.key(key, expected)?;
        let value = self.null_or_number()?;
        self.key(epoch_key, epoch_expected)?;
        let epoch = self.null_or_number()?;
        match (value, epoch) {
            (Some(value), Some(epoch)) => Ok(Some(Mark { value, epoch })),
            (None, None) => Ok(None),
            _ => Err(DecodeError::HalfMark { field }),
        }
    }

    /// `[[g,t],...]`, generations strictly increasing, at most the cap.
    fn sealed_times(&mut self) -> Result<BTreeMap<u64, u64>, DecodeError> {
        let mut times = BTreeMap::new();
        self.token(b"[", "'['")?;
        self.skip_whitespace();
        if self.bytes.get(self.at) == Some(&b']') {
            self.at += 1;
            return Ok(times);
        }
        loop {
            if times.len() == SEALED_TIMES_CAP {
                return Err(DecodeError::TooManySealedTimes {
                    count: SEALED_TIMES_CAP + 1,
                    cap: SEALED_TIMES_CAP,
                });
            }
            self.token(b"[", "'[' opening a [generation,time] pair")?;
            let generation = self.number()?;
            self.token(b",", "','")?;
            let at = self.number()?;
            self.token(b"]", "']' closing a [generation,time] pair")?;
            if times
                .last_key_value()
                .is_some_and(|(&g, _)| g >= generation)
            {
                return Err(DecodeError::UnorderedSealedTimes { generation });
            }
            times.insert(generation, at);
            self.skip_whitespace();
            match self.bytes.get(self.at) {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(times);
                }
                _ => return Err(self.error("',' or ']' in the seal times")),
            }
        }
    }

    fn end(&mut self) -> Result<(), DecodeError> {
        self.skip_whitespace();
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(self.error("the end of the record"))
        }
    }
}
