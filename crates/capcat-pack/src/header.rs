//! Parsing and validating the safetensors header of a pack.
//!
//! This parser, not the `safetensors` crate, is what stands between the
//! reader and hostile bytes: every length and offset is checked with checked
//! arithmetic and every failure is a typed [`PackError`]. It accepts a
//! subset of what the crate accepts (ten dtypes, no unknown fields, no
//! duplicate keys); the round-trip property tests and the fuzz target check
//! that whatever it accepts, the crate accepts too.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};

use crate::canonical::{self, DescriptorRef};
use crate::descriptor::FORMAT_VERSION;
use crate::digest::Sha256Digest;
use crate::dtype::Dtype;
use crate::error::PackError;

/// The largest header the format allows: the safetensors crate's limit.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// The 8-byte little-endian header length that starts every pack.
pub(crate) const LENGTH_PREFIX: u64 = 8;

/// The exact bytes every pack header begins with; the pack digest's 64 hex
/// digits follow them, so the digest sits at a fixed file offset.
pub(crate) const HEADER_PREFIX: &[u8] = br#"{"__metadata__":{"capcat_pack_sha256":""#;

/// File offset of the first of the pack digest's 64 hex digits.
pub(crate) const DIGEST_SLOT: usize = 8 + HEADER_PREFIX.len();

/// The pack digest: SHA-256 of the file bytes `[0, 8 + N)` (length prefix,
/// header JSON and padding) with the 64 digest digits at [`DIGEST_SLOT`]
/// read as ASCII `'0'`. `head` is exactly those bytes; the slot's own
/// content is never hashed, so the writer may hash before or after filling
/// it.
pub(crate) fn header_digest(head: &[u8]) -> Sha256Digest {
    HeaderHasher::new(head).finish(head)
}

/// The pack digest ([`header_digest`]) taken while the header is still
/// being filled in: every byte up to a point is hashed once it is final.
pub(crate) struct HeaderHasher {
    sha: sha2::Sha256,
    /// The header bytes before this offset are hashed.
    hashed: usize,
}

impl HeaderHasher {
    /// Hashes the bytes before the pack digest's slot and the slot as
    /// `'0'`s. `head` holds at least the slot.
    pub(crate) fn new(head: &[u8]) -> Self {
        use sha2::Digest as _;
        let mut sha = sha2::Sha256::new();
        sha.update(&head[..DIGEST_SLOT]);
        sha.update([b'0'; 64]);
        Self {
            sha,
            hashed: DIGEST_SLOT + 64,
        }
    }

    /// Hashes `head` up to `end`, whose bytes before it are final.
    ///
    /// # Panics
    /// When `end` is before a point already hashed: a byte written there
    /// now would be missing from the digest.
    pub(crate) fn hash_to(&mut self, head: &[u8], end: usize) {
        use sha2::Digest as _;
        assert!(
            end >= self.hashed,
            "the header is hashed up to {}; {end} is behind",
            self.hashed
        );
        if end > self.hashed {
            self.sha.update(&head[self.hashed..end]);
            self.hashed = end;
        }
    }

    /// Hashes the rest of `head`, the whole header, and gives the digest.
    pub(crate) fn finish(mut self, head: &[u8]) -> Sha256Digest {
        use sha2::Digest as _;
        self.hash_to(head, head.len());
        Sha256Digest(self.sha.finalize().into())
    }
}

/// The pack digest a header carries and the one its bytes hash to.
pub(crate) struct HeaderDigests {
    /// The digest written in the header.
    pub(crate) stored: Sha256Digest,
    /// The digest of the header bytes, computed as the format defines.
    pub(crate) actual: Sha256Digest,
}

/// Reads the pack digest from its fixed place and hashes the header.
/// `head` is the file bytes `[0, 8 + N)`; they are hashed whether or not
/// the header parses (an open hashes them while it parses them).
pub(crate) fn digests(head: &[u8]) -> Result<HeaderDigests, PackError> {
    let misplaced = || {
        malformed(
            "__metadata__",
            format!(
                "a pack header must begin with `{}` followed by the 64-digit pack digest",
                String::from_utf8_lossy(HEADER_PREFIX)
            ),
        )
    };
    let slot = head
        .get(DIGEST_SLOT..DIGEST_SLOT + 65)
        .filter(|_| head.get(8..DIGEST_SLOT) == Some(HEADER_PREFIX))
        .ok_or_else(misplaced)?;
    if slot[64] != b'"' {
        return Err(misplaced());
    }
    let text = std::str::from_utf8(&slot[..64]).map_err(|_| misplaced())?;
    Ok(HeaderDigests {
        stored: text.parse()?,
        actual: header_digest(head),
    })
}

/// Where the header of `file` ends (`8 + N`), when its length prefix is
/// within the limit and the file; `None` otherwise ([`read`] then says
/// what is wrong).
pub(crate) fn head_end(file: &[u8]) -> Option<usize> {
    let (_, data_start) = header_bounds(file).ok()?;
    usize::try_from(data_start).ok()
}

/// The header length `N` the first 8 bytes of `file` declare and where the
/// data section starts (`8 + N`), checked against the limit and the file.
fn header_bounds(file: &[u8]) -> Result<(u64, u64), PackError> {
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
    Ok((header_len, data_start))
}

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
    /// The entries named exactly `record/NNNNNNNN`, by record index,
    /// sorted by index (each index at most once).
    pub(crate) records: Vec<(usize, Entry)>,
    /// Entries with any other name (never part of a valid pack), sorted by
    /// name.
    pub(crate) others: Vec<(String, Entry)>,
}

/// A tensor's name: a record key is kept as its index, so parsing a header
/// of many records allocates no key strings.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TensorName {
    Record(usize),
    Other(String),
}

impl TensorName {
    /// `record/` and exactly eight decimal digits is a record key (the
    /// only spelling [`crate::tensor_key`] writes); anything else is not.
    fn parse(key: &str) -> Self {
        match key.strip_prefix("record/") {
            Some(digits) if digits.len() == 8 && digits.bytes().all(|b| b.is_ascii_digit()) => {
                // Eight decimal digits always fit a usize.
                Self::Record(digits.parse().expect("eight decimal digits"))
            }
            _ => Self::Other(key.to_owned()),
        }
    }

    fn to_key(&self) -> String {
        match self {
            Self::Record(index) => crate::tensor_key(*index),
            Self::Other(key) => key.clone(),
        }
    }
}

fn malformed(key: &str, reason: impl Into<String>) -> PackError {
    PackError::MalformedHeader {
        key: key.to_owned(),
        reason: reason.into(),
    }
}

/// The `capcat` value of `file`'s header, unescaped, wherever the parser
/// left it.
#[cfg(test)]
pub(crate) fn descriptor_value(file: &[u8]) -> Result<String, PackError> {
    let mut unchecked = read(file)?;
    match unchecked.descriptor.take() {
        Some(found) => unescape_value(file, found.range)
            .ok_or_else(|| malformed("capcat", "not the writer's escapes")),
        None => unchecked
            .metadata
            .remove(crate::METADATA_KEY)
            .ok_or(PackError::MissingDescriptor),
    }
}

/// The `capcat` value whose escaped text is `range` of `bytes`, unescaped:
/// `None` unless the quotes around the range close exactly that value.
#[cfg(test)]
fn unescape_value(bytes: &[u8], range: Range<usize>) -> Option<String> {
    let quoted = bytes.get(range.start.checked_sub(1)?..=range.end)?;
    let mut c = canonical::Cursor::new(std::str::from_utf8(quoted).ok()?);
    let value = c.escaped_string()?;
    c.at_end().then_some(value)
}

/// A header whose JSON parsed but whose entries are not checked yet: the
/// reader takes the format version out of `metadata` before it checks
/// anything else (docs/pack-format.md 2.1), so a pack of a later version is
/// refused as such even if that version has a dtype or layout this one does
/// not know.
pub(crate) struct Unchecked<'a> {
    /// Where the data section starts in the file: 8 + header length.
    data_start: u64,
    /// The data section's length.
    data_len: u64,
    /// `__metadata__`, when present. The descriptor is not in it when it
    /// was parsed where the header holds it ([`Unchecked::descriptor`]).
    pub(crate) metadata: BTreeMap<String, String>,
    /// The version-2 descriptor, when the header and the descriptor are
    /// both spelled as the writer spells them: parsed in place, never
    /// unescaped into a copy.
    pub(crate) descriptor: Option<InHeader<'a>>,
    entries: Vec<(TensorName, RawEntry)>,
}

/// A version-2 descriptor parsed where the header holds it.
#[derive(Debug)]
pub(crate) struct InHeader<'a> {
    /// The file bytes of the escaped descriptor: the `capcat` value between
    /// its quotes.
    pub(crate) range: Range<usize>,
    /// The descriptor, its strings borrowed from the file.
    pub(crate) parsed: DescriptorRef<'a>,
}

/// Parses the length prefix and header JSON of `file`.
pub(crate) fn read(file: &[u8]) -> Result<Unchecked<'_>, PackError> {
    let file_len = file.len() as u64;
    let (header_len, data_start) = header_bounds(file)?;
    let header_bytes =
        &file[8..usize::try_from(data_start).map_err(|_| PackError::HeaderTooLarge {
            header_len,
            limit: MAX_HEADER_BYTES,
        })?];
    let (RawHeader { metadata, entries }, descriptor) = parse_json(header_bytes)?;
    let prefix = LENGTH_PREFIX as usize;
    Ok(Unchecked {
        data_start,
        data_len: file_len - data_start,
        metadata,
        descriptor: descriptor.map(|found| InHeader {
            range: found.range.start + prefix..found.range.end + prefix,
            parsed: found.parsed,
        }),
        entries,
    })
}

impl Unchecked<'_> {
    /// Checks every entry's dtype, that no name appears twice, and that the
    /// entries tile the data section exactly.
    pub(crate) fn check(self) -> Result<Header, PackError> {
        let Self {
            data_start,
            data_len,
            metadata,
            entries,
            ..
        } = self;
        let mut records = Vec::with_capacity(entries.len());
        let mut others = Vec::new();
        for (name, raw) in entries {
            let entry = Entry {
                dtype: raw.dtype.parse::<Dtype>()?,
                shape: raw.shape,
                begin: raw.data_offsets.0,
                end: raw.data_offsets.1,
            };
            match name {
                TensorName::Record(index) => records.push((index, entry)),
                TensorName::Other(key) => others.push((key, entry)),
            }
        }
        records.sort_by_key(|(index, _)| *index);
        if let Some(pair) = records.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(malformed(
                &crate::tensor_key(pair[0].0),
                "appears twice in the header",
            ));
        }
        others.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(pair) = others.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(malformed(&pair[0].0, "appears twice in the header"));
        }
        check_tiling(&records, &others, data_len)?;
        Ok(Header {
            data_start,
            metadata,
            records,
            others,
        })
    }
}

/// A tensor entry as the JSON spells it; unknown fields are refused.
#[derive(Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: (u64, u64),
}

/// The header JSON, typed as it is parsed (no intermediate `Value` tree:
/// the header of a 4,096-record pack is megabytes of JSON).
#[derive(Debug, PartialEq, Eq)]
struct RawHeader {
    metadata: BTreeMap<String, String>,
    entries: Vec<(TensorName, RawEntry)>,
}

/// A header key: `__metadata__` or a tensor's name.
enum HeaderKey {
    Metadata,
    Tensor(TensorName),
}

impl<'de> Deserialize<'de> for HeaderKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = HeaderKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a header key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<HeaderKey, E> {
                Ok(if key == "__metadata__" {
                    HeaderKey::Metadata
                } else {
                    HeaderKey::Tensor(TensorName::parse(key))
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Parses the header object, remembering which key a type error belongs
/// to so that the error can name it.
struct HeaderSeed<'a> {
    failed_key: &'a mut Option<TensorName>,
}

impl<'de> DeserializeSeed<'de> for HeaderSeed<'_> {
    type Value = RawHeader;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<RawHeader, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for HeaderSeed<'_> {
    type Value = RawHeader;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a safetensors header object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawHeader, A::Error> {
        let mut metadata = None;
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<HeaderKey>()? {
            match key {
                HeaderKey::Metadata => {
                    if metadata.is_some() {
                        return Err(serde::de::Error::custom("`__metadata__` appears twice"));
                    }
                    *self.failed_key = Some(TensorName::Other("__metadata__".to_owned()));
                    metadata = Some(map.next_value::<UniqueStrings>()?.0);
                }
                HeaderKey::Tensor(name) => {
                    *self.failed_key = Some(name);
                    let entry = map.next_value::<RawEntry>()?;
                    // The name was stored just above.
                    let name = self.failed_key.take().expect("the key being parsed");
                    entries.push((name, entry));
                }
            }
            *self.failed_key = None;
        }
        Ok(RawHeader {
            metadata: metadata.unwrap_or_default(),
            entries,
        })
    }
}

/// `__metadata__`'s string-to-string map, refusing a repeated key. A JSON
/// parser keeps one of two equal keys silently (serde_json's map the last),
/// so a header with two `capcat_pack_sha256` or two `capcat` keys would mean
/// one thing to this reader and maybe another to a reader that keeps the
/// first: the format allows each key once (docs/pack-format.md 1.1).
struct UniqueStrings(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for UniqueStrings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Strings;
        impl<'de> Visitor<'de> for Strings {
            type Value = UniqueStrings;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of strings, each key once")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueStrings, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((key, value)) = map.next_entry::<String, String>()? {
                    if out.contains_key(&key) {
                        return Err(serde::de::Error::custom(format!(
                            "`__metadata__` has the key {key:?} twice"
                        )));
                    }
                    out.insert(key, value);
                }
                Ok(UniqueStrings(out))
            }
        }
        deserializer.deserialize_map(Strings)
    }
}

/// The header as the writer spells it (`encode::write_skeleton`), read
/// without `serde_json`: the two metadata keys in their order, each tensor
/// entry's three fields in theirs, compact JSON, then only the padding
/// spaces. `None` for any other spelling; [`parse_json`] decides those.
///
/// A version-2 descriptor spelled as the writer spells it is parsed where
/// it stands, still escaped, and returned beside the header (its range in
/// `bytes`), not in `metadata`; any other descriptor is unescaped into
/// `metadata` for the reader to parse as text.
fn parse_canonical(bytes: &[u8]) -> Option<(RawHeader, Option<InHeader<'_>>)> {
    let text = std::str::from_utf8(bytes).ok()?.trim_end_matches(' ');
    let mut c = canonical::Cursor::new(text);
    c.lit(br#"{"__metadata__":{"capcat_pack_sha256":"#)?;
    let digest = c.string()?.to_owned();
    c.lit(br#","capcat":"#)?;
    let opening = c.position();
    let in_place = c
        .try_lit(b"\"")
        .then(|| canonical::parse_in_header(text, opening + 1))
        .flatten()
        .filter(|(parsed, _)| parsed.format_version == u64::from(FORMAT_VERSION));
    let (descriptor, value) = match in_place {
        Some((parsed, closing)) => {
            c.seek(closing + 1);
            let range = opening + 1..closing;
            (Some(InHeader { range, parsed }), None)
        }
        None => {
            c.seek(opening);
            (None, Some(c.escaped_string()?))
        }
    };
    c.lit(b"}")?;
    let mut entries = Vec::new();
    // Each pass consumes one entry or returns; the text is finite.
    while !c.try_lit(b"}") {
        c.lit(b",")?;
        let key = c.string()?;
        // A second `__metadata__` is serde_json's to refuse.
        if key == "__metadata__" {
            return None;
        }
        let name = TensorName::parse(key);
        c.lit(br#":{"dtype":"#)?;
        let dtype = c.string()?.to_owned();
        c.lit(br#","shape":"#)?;
        let shape = c.numbers()?;
        c.lit(br#","data_offsets":["#)?;
        let begin = c.number()?;
        c.lit(b",")?;
        let end = c.number()?;
        c.lit(b"]}")?;
        entries.push((
            name,
            RawEntry {
                dtype,
                shape,
                data_offsets: (begin, end),
            },
        ));
    }
    let mut metadata = BTreeMap::from([(crate::DIGEST_KEY.to_owned(), digest)]);
    if let Some(value) = value {
        metadata.insert(crate::METADATA_KEY.to_owned(), value);
    }
    c.at_end()
        .then_some((RawHeader { metadata, entries }, descriptor))
}

/// Syntax errors (and a header that is not an object) are
/// [`PackError::HeaderNotJson`]; a well-formed entry of the wrong shape is
/// [`PackError::MalformedHeader`] naming its key.
fn parse_json(bytes: &[u8]) -> Result<(RawHeader, Option<InHeader<'_>>), PackError> {
    if let Some(header) = parse_canonical(bytes) {
        return Ok(header);
    }
    Ok((parse_json_by_serde(bytes)?, None))
}

/// [`parse_json`] by `serde_json`, for any spelling of the header.
fn parse_json_by_serde(bytes: &[u8]) -> Result<RawHeader, PackError> {
    let mut failed_key = None;
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let parsed = HeaderSeed {
        failed_key: &mut failed_key,
    }
    .deserialize(&mut deserializer)
    .and_then(|header| deserializer.end().map(|()| header));
    parsed.map_err(|e| match (e.classify(), failed_key) {
        (serde_json::error::Category::Data, Some(key)) => malformed(&key.to_key(), e.to_string()),
        _ => PackError::HeaderNotJson {
            reason: e.to_string(),
        },
    })
}

/// The entries, in offset order, must start at 0, follow each other with no
/// gap or overlap, end at the end of the file, and each span exactly the
/// bytes its dtype and shape need.
fn check_tiling(
    records: &[(usize, Entry)],
    others: &[(String, Entry)],
    data_len: u64,
) -> Result<(), PackError> {
    let mut ordered: Vec<(&Entry, TensorRef<'_>)> = records
        .iter()
        .map(|(index, e)| (e, TensorRef::Record(*index)))
        .chain(others.iter().map(|(key, e)| (e, TensorRef::Other(key))))
        .collect();
    ordered.sort_by(|(a, ka), (b, kb)| (a.begin, a.end, ka).cmp(&(b.begin, b.end, kb)));
    let mut previous_end = 0u64;
    for (entry, name) in ordered {
        let key = || name.to_key();
        if entry.end < entry.begin || entry.end > data_len {
            return Err(PackError::OffsetOutOfRange {
                key: key(),
                begin: entry.begin,
                end: entry.end,
                data_len,
            });
        }
        if entry.begin != previous_end {
            return Err(PackError::OffsetsNotContiguous {
                key: key(),
                begin: entry.begin,
                previous_end,
            });
        }
        let actual = entry.end - entry.begin;
        let expected = entry.dtype.byte_length(&entry.shape);
        if expected != Some(actual) {
            return Err(PackError::ShapeMismatch {
                context: format!("tensor `{}`", key()),
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

/// A borrowed [`TensorName`], for ordering entries without copying names.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum TensorRef<'a> {
    Record(usize),
    Other(&'a str),
}

impl TensorRef<'_> {
    fn to_key(self) -> String {
        match self {
            Self::Record(index) => crate::tensor_key(index),
            Self::Other(key) => key.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CaptureIdentity, PackLimits, PackWriter, RecordMetadata};

    fn header_of(tenant: &str, tags: &[(&str, &str)]) -> Vec<u8> {
        let mut writer = PackWriter::new(uuid::Uuid::from_u128(5), PackLimits::default());
        for (i, dtype) in [Dtype::F32, Dtype::BOOL].into_iter().enumerate() {
            let metadata = RecordMetadata {
                identity: CaptureIdentity {
                    tenant_id: tenant.to_owned(),
                    experiment_id: "experiment-e".to_owned(),
                    run_id: "run-r".to_owned(),
                    captured_at_ns: 1,
                    capture_id: uuid::Uuid::from_u128(i as u128),
                },
                model: "model/m".to_owned(),
                module_path: "model.layers.0".to_owned(),
                hook: "forward_output".to_owned(),
                step: 0,
                tensor_name: "hidden ü".to_owned(),
                dtype,
                shape: vec![2],
                tags: tags
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            };
            let len = dtype.size() * 2;
            writer.append(metadata, vec![0; len]).expect("valid");
        }
        let sealed = writer.seal().expect("seals");
        let n = usize::try_from(u64::from_le_bytes(sealed.bytes[..8].try_into().expect("8")))
            .expect("small");
        sealed.bytes[8..8 + n].to_vec()
    }

    /// What [`parse_canonical`] read, as serde_json reads it: a descriptor
    /// parsed in place is unescaped into `metadata`, after checking that
    /// the unescaped text parses to the same descriptor.
    fn as_serde_reads(
        bytes: &[u8],
        (mut header, found): (RawHeader, Option<InHeader<'_>>),
    ) -> RawHeader {
        if let Some(found) = found {
            let value = unescaped(bytes, found.range.clone());
            assert_eq!(canonical::parse(&value), Some(found.parsed), "{value}");
            header
                .metadata
                .insert(crate::METADATA_KEY.to_owned(), value);
        }
        header
    }

    /// The `capcat` value at `range` of header `bytes`, unescaped.
    fn unescaped(bytes: &[u8], range: Range<usize>) -> String {
        unescape_value(bytes, range).expect("the writer's escapes, closed at the range's end")
    }

    /// A version-2 descriptor is parsed in place, and only one spelled as
    /// the writer spells it.
    #[test]
    fn the_writers_descriptor_is_parsed_where_it_stands() {
        let plain = header_of("t", &[("k", "v")]);
        let (header, found) = parse_canonical(&plain).expect("the writer's spelling");
        assert!(found.is_some());
        assert!(!header.metadata.contains_key(crate::METADATA_KEY));
        // A quote in a value is escaped twice in the header: the in-place
        // parse declines it, and the value is unescaped as before.
        let quoted = header_of("t\"", &[]);
        let (header, found) = parse_canonical(&quoted).expect("the writer's spelling");
        assert!(found.is_none());
        assert!(header.metadata[crate::METADATA_KEY].contains(r#""tenant_id":"t\"""#));
        // So is a descriptor of another version.
        let text = String::from_utf8(plain.clone()).expect("UTF-8");
        let later = text.replacen(r#"{\"format_version\":2,"#, r#"{\"format_version\":3,"#, 1);
        assert_ne!(later, text);
        let (header, found) = parse_canonical(later.as_bytes()).expect("canonical");
        assert!(found.is_none());
        assert!(header.metadata[crate::METADATA_KEY].starts_with(r#"{"format_version":3,"#));
    }

    /// The writer's headers take the fast path, escapes in the metadata or
    /// not, and read as serde_json reads them.
    #[test]
    fn the_writers_headers_read_alike_both_ways() {
        for (tenant, tags) in [
            ("t", vec![]),
            ("tenant-t", vec![("key", "value ü")]),
            ("q\"u\\ote \u{1} ü", vec![("k", "v\"")]),
        ] {
            let bytes = header_of(tenant, &tags);
            let fast = parse_canonical(&bytes).expect("the writer's spelling");
            let fast = as_serde_reads(&bytes, fast);
            assert_eq!(
                Ok(fast),
                parse_json_by_serde(&bytes).map_err(|e| e.to_string())
            );
        }
    }

    /// Whatever one changed byte makes of a header, the fast path either
    /// declines it or reads it exactly as serde_json does: a header whose
    /// descriptor is unescaped (a quote in a value), and one whose
    /// descriptor is parsed in place.
    #[test]
    fn a_changed_byte_is_declined_or_read_alike() {
        for original in [
            header_of("t\"", &[("k", "v")]),
            header_of("tenant-t", &[("key", "value")]),
        ] {
            a_changed_byte_is_declined_or_read_alike_in(&original);
        }
    }

    fn a_changed_byte_is_declined_or_read_alike_in(original: &[u8]) {
        let mut taken = 0;
        for at in 0..original.len() {
            for byte in [
                b' ', b'"', b'\\', b'0', b'9', b'a', b'}', b']', b',', b':', 0x01, 0xc3,
            ] {
                let mut bytes = original.to_vec();
                bytes[at] = byte;
                if let Some(fast) = parse_canonical(&bytes) {
                    let fast = as_serde_reads(&bytes, fast);
                    taken += 1;
                    let serde = parse_json_by_serde(&bytes).map_err(|e| e.to_string());
                    assert_eq!(Ok(fast), serde, "byte {at} = {byte:#04x}");
                }
            }
        }
        assert!(
            taken > 100,
            "most digit and letter changes stay canonical: {taken}"
        );
    }
}
