//! Parsing and validating the safetensors header of a pack.
//!
//! This parser, not the `safetensors` crate, is what stands between the
//! reader and hostile bytes: every length and offset is checked with checked
//! arithmetic and every failure is a typed [`PackError`]. (The crate's own
//! reader is consulted afterwards, on input that already passed, as a
//! cross-check that what we accept is a valid safetensors file.)

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::dtype::Dtype;
use crate::error::PackError;

/// The largest header the format allows: the safetensors crate's limit.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// The 8-byte little-endian header length that starts every pack.
pub(crate) const LENGTH_PREFIX: u64 = 8;

/// One tensor entry of the header, offsets relative to the data section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) dtype: Dtype,
    pub(crate) shape: Vec<u64>,
    pub(crate) begin: u64,
    pub(crate) end: u64,
}

/// A header that passed every structural check.
#[derive(Debug)]
pub(crate) struct Header {
    /// Where the data section starts in the file: 8 + header length.
    pub(crate) data_start: u64,
    /// `__metadata__`, when present.
    pub(crate) metadata: BTreeMap<String, String>,
    /// Tensor entries by key.
    pub(crate) entries: BTreeMap<String, Entry>,
}

fn malformed(key: &str, reason: impl Into<String>) -> PackError {
    PackError::MalformedHeader {
        key: key.to_owned(),
        reason: reason.into(),
    }
}

/// Parses the length prefix and header JSON of `file` and checks that the
/// tensor entries tile the data section exactly.
pub(crate) fn parse(file: &[u8]) -> Result<Header, PackError> {
    let file_len = file.len() as u64;
    let prefix: [u8; 8] = file
        .get(..8)
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(PackError::Truncated {
            what: "the 8-byte header length",
            needed: LENGTH_PREFIX,
            available: file_len,
        })?;
    let header_len = u64::from_le_bytes(prefix);
    if header_len > MAX_HEADER_BYTES {
        return Err(PackError::HeaderTooLarge {
            header_len,
            limit: MAX_HEADER_BYTES,
        });
    }
    // header_len <= 1e8, so the sum cannot overflow.
    let data_start = LENGTH_PREFIX + header_len;
    if data_start > file_len {
        return Err(PackError::HeaderLengthPastEnd {
            header_len,
            file_len,
        });
    }
    let header_bytes =
        &file[8..usize::try_from(data_start).map_err(|_| PackError::HeaderTooLarge {
            header_len,
            limit: MAX_HEADER_BYTES,
        })?];
    let object: Map<String, Value> =
        serde_json::from_slice(header_bytes).map_err(|e| PackError::HeaderNotJson {
            reason: e.to_string(),
        })?;
    let data_len = file_len - data_start;
    let mut metadata = BTreeMap::new();
    let mut entries = BTreeMap::new();
    for (key, value) in object {
        if key == "__metadata__" {
            metadata = parse_metadata(value)?;
        } else {
            let entry = parse_entry(&key, value)?;
            entries.insert(key, entry);
        }
    }
    check_tiling(&entries, data_len)?;
    Ok(Header {
        data_start,
        metadata,
        entries,
    })
}

fn parse_metadata(value: Value) -> Result<BTreeMap<String, String>, PackError> {
    let Value::Object(map) = value else {
        return Err(malformed("__metadata__", "is not a JSON object"));
    };
    map.into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k, s)),
            _ => Err(malformed(
                "__metadata__",
                format!("value of `{k}` is not a string"),
            )),
        })
        .collect()
}

fn parse_entry(key: &str, value: Value) -> Result<Entry, PackError> {
    let Value::Object(mut map) = value else {
        return Err(malformed(key, "is not a JSON object"));
    };
    let dtype = match map.remove("dtype") {
        Some(Value::String(s)) => s.parse::<Dtype>()?,
        _ => return Err(malformed(key, "has no string `dtype`")),
    };
    let shape = match map.remove("shape") {
        Some(Value::Array(dims)) => dims
            .iter()
            .map(Value::as_u64)
            .collect::<Option<Vec<u64>>>()
            .ok_or_else(|| malformed(key, "`shape` holds a non-integer"))?,
        _ => return Err(malformed(key, "has no array `shape`")),
    };
    let (begin, end) = match map.remove("data_offsets") {
        Some(Value::Array(offsets)) => match offsets.as_slice() {
            [b, e] => b
                .as_u64()
                .zip(e.as_u64())
                .ok_or_else(|| malformed(key, "`data_offsets` holds a non-integer"))?,
            _ => return Err(malformed(key, "`data_offsets` is not a pair")),
        },
        _ => return Err(malformed(key, "has no array `data_offsets`")),
    };
    if let Some(extra) = map.keys().next() {
        return Err(malformed(key, format!("has an unknown field `{extra}`")));
    }
    Ok(Entry {
        dtype,
        shape,
        begin,
        end,
    })
}

/// The entries, in offset order, must start at 0, follow each other with no
/// gap or overlap, end at the end of the file, and each span exactly the
/// bytes its dtype and shape need.
fn check_tiling(entries: &BTreeMap<String, Entry>, data_len: u64) -> Result<(), PackError> {
    let mut ordered: Vec<(&String, &Entry)> = entries.iter().collect();
    ordered.sort_by_key(|(key, e)| (e.begin, e.end, *key));
    let mut previous_end = 0u64;
    for (key, entry) in ordered {
        if entry.end < entry.begin || entry.end > data_len {
            return Err(PackError::OffsetOutOfRange {
                key: key.clone(),
                begin: entry.begin,
                end: entry.end,
                data_len,
            });
        }
        if entry.begin != previous_end {
            return Err(PackError::OffsetsNotContiguous {
                key: key.clone(),
                begin: entry.begin,
                previous_end,
            });
        }
        let actual = entry.end - entry.begin;
        let expected = entry.dtype.byte_length(&entry.shape);
        if expected != Some(actual) {
            return Err(PackError::ShapeMismatch {
                context: format!("tensor `{key}`"),
                dtype: entry.dtype,
                shape: entry.shape.clone(),
                expected,
                actual,
            });
        }
        previous_end = entry.end;
    }
    if previous_end != data_len {
        return Err(PackError::DataSectionNotCovered {
            covered: previous_end,
            data_len,
        });
    }
    Ok(())
}
