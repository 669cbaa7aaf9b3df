//! Structure-aware pack fuzzing: builds a valid pack with `PackWriter` from
//! records the input describes, checks that it round-trips, then mutates it
//! by region and feeds the result to the reader, so the fuzzer works past
//! the first length check.
//!
//! The regions are found the way any safetensors reader finds them (the
//! 8-byte length, the header JSON, the data section), never from the
//! descriptor's layout: a mutation names a leaf of the header JSON by its
//! position in a depth-first walk that also descends into any string
//! holding JSON (the descriptor envelope, the descriptor inside it), and
//! replaces, removes or duplicates it; re-digests a 64-hex-digit string from
//! the longest sibling string of its object (format 1's descriptor digest
//! rule) or from one tensor's payload; changes the length prefix; flips
//! payload bytes; truncates or extends the file. A changed header is written
//! back in format 2's spelling (`__metadata__` first, the pack digest its
//! first key, so the digits stay at offset 47) and resealed, so the reader's
//! checks past the pack digest (entries against the descriptor, tiling,
//! payload digests, duplicate identities) see the change; the `KeepDigest`
//! mutation leaves the stale digest in place instead. A change of the digest
//! scheme makes some mutations useless, not wrong.
//!
//! Properties: `PackWriter` refuses bad records with a typed error and
//! never panics; a sealed pack opens with `from_bytes_expecting` under the
//! digest sealing reported, and reads back exactly what was appended (the
//! same `PackInfo`, metadata, digests and payloads): the round trip is the
//! identity; after any mutation the reader returns a typed error or a pack
//! that passes every check `pack_reader` makes of an accepted pack.

#![no_main]

mod common;

use arbitrary::{Arbitrary, Unstructured};
use capcat_pack::{
    CaptureIdentity, Dtype, PackLimits, PackReader, PackWriter, RecordMetadata, Sha256Digest,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use uuid::Uuid;

/// One record to append: small strings, a dtype, a small shape.
#[derive(Arbitrary, Debug)]
struct Record {
    tenant: u8,
    capture: u8,
    texts: [String; 3],
    step: u64,
    captured_at_ns: u64,
    dtype: u8,
    shape: Vec<u8>,
    tags: Vec<(String, String)>,
    payload_seed: u8,
}

/// A replacement leaf.
#[derive(Arbitrary, Debug, Clone)]
enum Leaf {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    Str(String),
    Numbers(Vec<u64>),
    Object,
}

impl Leaf {
    fn value(&self) -> Value {
        match self {
            Leaf::Null => Value::Null,
            Leaf::Bool(b) => Value::Bool(*b),
            Leaf::U64(v) => Value::from(*v),
            Leaf::I64(v) => Value::from(*v),
            Leaf::F64(v) => serde_json::Number::from_f64(*v).map_or(Value::Null, Value::Number),
            Leaf::Str(s) => Value::String(s.clone()),
            Leaf::Numbers(v) => Value::from(v.clone()),
            Leaf::Object => Value::Object(serde_json::Map::new()),
        }
    }
}

/// One region mutation.
#[derive(Arbitrary, Debug)]
enum Mutation {
    /// Replace the nth leaf of the header JSON.
    Replace { slot: u16, leaf: Leaf },
    /// Nudge the nth number of the header JSON (offsets, shapes, versions).
    Nudge { slot: u16, delta: i8 },
    /// Remove the nth object member.
    Remove { slot: u16 },
    /// Add a member to the nth object.
    Add { slot: u16, key: String, leaf: Leaf },
    /// Copy the nth object member under another key (a second record, a
    /// second tensor).
    Duplicate { slot: u16, suffix: u8 },
    /// Set the nth 64-hex string to the SHA-256 of the longest other string
    /// of its object.
    RehashSibling { slot: u16 },
    /// Set the nth 64-hex string to the SHA-256 of tensor `entry`'s bytes.
    RehashPayload { slot: u16, entry: u8 },
    /// Set the length prefix.
    HeaderLen { delta: i16 },
    /// XOR a byte of the data section.
    Payload { at: u32, xor: u8 },
    /// Keep only the first `keep` bytes.
    Truncate { keep: u32 },
    /// Append bytes.
    Extend { bytes: Vec<u8> },
    /// Leave the pack digest as the other mutations left it: without this,
    /// a changed header is resealed (its format-2 digest recomputed) so the
    /// reader's checks past the digest see the change.
    KeepDigest,
}

const DTYPES: [Dtype; 10] = Dtype::ALL;

fn metadata(r: &Record) -> RecordMetadata {
    let dtype = DTYPES[usize::from(r.dtype) % DTYPES.len()];
    RecordMetadata {
        identity: CaptureIdentity {
            tenant_id: format!("t{}", r.tenant % 3),
            experiment_id: r.texts[0].clone(),
            run_id: r.texts[1].clone(),
            captured_at_ns: r.captured_at_ns,
            capture_id: Uuid::from_u128(u128::from(r.capture % 8)),
        },
        model: "m".to_owned(),
        module_path: r.texts[2].clone(),
        hook: "forward_output".to_owned(),
        step: r.step,
        tensor_name: "out".to_owned(),
        dtype,
        shape: r.shape.iter().take(3).map(|&d| u64::from(d % 5)).collect(),
        tags: r.tags.iter().take(3).cloned().collect(),
    }
}

fn payload(m: &RecordMetadata, seed: u8) -> Vec<u8> {
    let len = m.dtype.byte_length(&m.shape).unwrap_or(0);
    (0..len)
        .map(|i| {
            let byte = (i as u8).wrapping_mul(31).wrapping_add(seed);
            // Mostly valid BOOL bytes; now and then a refused one.
            if m.dtype == Dtype::BOOL && seed != 255 {
                byte & 1
            } else {
                byte
            }
        })
        .collect()
}

fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A string that holds a JSON object or array, parsed.
fn embedded(s: &str) -> Option<Value> {
    if !s.starts_with(['{', '[']) {
        return None;
    }
    serde_json::from_str(s).ok()
}

/// What kind of node a mutation addresses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Leaf,
    Number,
    Member,
    Object,
    Digest,
}

/// What the walk does at the addressed node.
enum Op<'a> {
    Count,
    Replace(&'a Value),
    Nudge(i8),
    Remove,
    Add(&'a str, &'a Value),
    Duplicate(u8),
    RehashSibling,
    RehashTo(Sha256Digest),
}

/// Walks `v` depth-first (descending into strings holding JSON), counting
/// nodes of `kind`, and applies `op` to the `target`th. Returns whether
/// anything under `v` changed; embedded JSON that changed is written back
/// into its string.
fn walk(v: &mut Value, kind: Kind, target: usize, op: &Op<'_>, seen: &mut usize) -> bool {
    match v {
        Value::Object(map) => {
            let mut dirty = false;
            if kind == Kind::Object {
                if *seen == target
                    && let Op::Add(key, leaf) = op
                {
                    map.insert((*key).to_owned(), (*leaf).clone());
                    dirty = true;
                }
                *seen += 1;
            }
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if kind == Kind::Member {
                    if *seen == target {
                        match op {
                            Op::Remove => {
                                map.remove(&key);
                                *seen += 1;
                                return true;
                            }
                            Op::Duplicate(suffix) => {
                                if let Some(value) = map.get(&key).cloned() {
                                    map.insert(format!("{key}{suffix}"), value);
                                }
                                *seen += 1;
                                return true;
                            }
                            _ => {}
                        }
                    }
                    *seen += 1;
                }
                if kind == Kind::Digest
                    && map.get(&key).and_then(Value::as_str).is_some_and(is_digest)
                {
                    if *seen == target {
                        let digest = match op {
                            Op::RehashSibling => map
                                .iter()
                                .filter(|(k, _)| **k != key)
                                .filter_map(|(_, v)| v.as_str())
                                .max_by_key(|s| s.len())
                                .map(|s| Sha256Digest::of(s.as_bytes())),
                            Op::RehashTo(d) => Some(*d),
                            _ => None,
                        };
                        if let Some(d) = digest {
                            map.insert(key.clone(), Value::String(d.to_hex()));
                            dirty = true;
                        }
                    }
                    *seen += 1;
                    continue;
                }
                if let Some(child) = map.get_mut(&key) {
                    dirty |= walk(child, kind, target, op, seen);
                }
            }
            dirty
        }
        Value::Array(items) => {
            let mut dirty = false;
            for item in items {
                dirty |= walk(item, kind, target, op, seen);
            }
            dirty
        }
        Value::String(s) => {
            if let Some(mut inner) = embedded(s) {
                let dirty = walk(&mut inner, kind, target, op, seen);
                if dirty {
                    *s = inner.to_string();
                }
                return dirty;
            }
            leaf(v, kind, target, op, seen)
        }
        _ => leaf(v, kind, target, op, seen),
    }
}

fn leaf(v: &mut Value, kind: Kind, target: usize, op: &Op<'_>, seen: &mut usize) -> bool {
    let counts = match kind {
        Kind::Leaf => true,
        Kind::Number => v.is_number(),
        _ => false,
    };
    if !counts {
        return false;
    }
    let hit = *seen == target;
    *seen += 1;
    if !hit {
        return false;
    }
    match op {
        Op::Replace(leaf) => {
            *v = (*leaf).clone();
            true
        }
        Op::Nudge(delta) => {
            if let Some(n) = v.as_u64() {
                *v = Value::from(n.wrapping_add_signed(i64::from(*delta)));
                true
            } else {
                false
            }
        }
        _ => false,
    }
}

/// Applies `op` to the `slot`th node of `kind` (modulo their number).
fn apply(header: &mut Value, kind: Kind, slot: u16, op: &Op<'_>) -> bool {
    let mut count = 0;
    walk(header, kind, usize::MAX, &Op::Count, &mut count);
    if count == 0 {
        return false;
    }
    let mut seen = 0;
    walk(header, kind, usize::from(slot) % count, op, &mut seen)
}

/// The pack's regions as any safetensors reader finds them.
struct Regions {
    header: Value,
    header_dirty: bool,
    reseal: bool,
    raw_header: Vec<u8>,
    data: Vec<u8>,
    len_delta: i64,
}

impl Regions {
    fn split(pack: &[u8]) -> Option<Self> {
        let len = u64::from_le_bytes(pack.get(..8)?.try_into().ok()?);
        let end = 8usize.checked_add(usize::try_from(len).ok()?)?;
        let raw_header = pack.get(8..end)?.to_vec();
        let header = serde_json::from_slice(&raw_header).ok()?;
        Some(Self {
            header,
            header_dirty: false,
            reseal: true,
            raw_header,
            data: pack[end..].to_vec(),
            len_delta: 0,
        })
    }

    /// The bytes of tensor `entry` (by position in the header), from its
    /// `data_offsets`.
    fn tensor_bytes(&self, entry: u8) -> Option<Vec<u8>> {
        let entries: Vec<&Value> = self
            .header
            .as_object()?
            .iter()
            .filter(|(k, _)| *k != "__metadata__")
            .map(|(_, v)| v)
            .collect();
        let e = entries.get(usize::from(entry) % entries.len().max(1))?;
        let offsets = e.get("data_offsets")?.as_array()?;
        let begin = usize::try_from(offsets.first()?.as_u64()?).ok()?;
        let end = usize::try_from(offsets.get(1)?.as_u64()?).ok()?;
        Some(self.data.get(begin..end)?.to_vec())
    }

    fn join(&self) -> Vec<u8> {
        let header = if self.header_dirty {
            spell(&self.header)
        } else {
            self.raw_header.clone()
        };
        let len = (header.len() as u64).wrapping_add_signed(self.len_delta);
        let mut out = Vec::with_capacity(8 + header.len() + self.data.len());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&header);
        if self.header_dirty && self.reseal {
            reseal(&mut out);
        }
        out.extend_from_slice(&self.data);
        out
    }
}

/// The digest key of a format-2 header, and the bytes before its digits.
const DIGEST_KEY: &str = "capcat_pack_sha256";
const DIGEST_PREFIX: &str = r#"{"__metadata__":{"capcat_pack_sha256":""#;

/// A changed header spelled the way format 2 places its digest:
/// `__metadata__` first with `capcat_pack_sha256` its first key, so the
/// digits stay at offset 47 (serde_json's map would sort the keys and move
/// them, and every mutation would stop at the digest's place), padded with
/// spaces to a multiple of 8 as the writer pads. A header without that key
/// (a mutation removed it) is written as serde_json spells it.
fn spell(header: &Value) -> Vec<u8> {
    let digest_first = header
        .get("__metadata__")
        .and_then(Value::as_object)
        .and_then(|m| m.get(DIGEST_KEY))
        .and_then(Value::as_str);
    let (Some(object), Some(digest)) = (header.as_object(), digest_first) else {
        return header.to_string().into_bytes();
    };
    let mut text = format!(
        r#"{{"__metadata__":{{"{DIGEST_KEY}":{}"#,
        Value::from(digest)
    );
    if let Some(metadata) = object.get("__metadata__").and_then(Value::as_object) {
        for (key, value) in metadata.iter().filter(|(k, _)| *k != DIGEST_KEY) {
            text.push_str(&format!(",{}:{value}", Value::from(key.as_str())));
        }
    }
    text.push('}');
    for (key, value) in object.iter().filter(|(k, _)| *k != "__metadata__") {
        text.push_str(&format!(",{}:{value}", Value::from(key.as_str())));
    }
    text.push('}');
    while (8 + text.len()) % 8 != 0 {
        text.push(' ');
    }
    text.into_bytes()
}

/// Writes the format-2 pack digest of `head` (the length prefix and the
/// header) into its place, as docs/pack-format.md section 4 defines it: the
/// SHA-256 of the header with its 64 digits read as `0`. A header whose
/// digest is not 64 digits at its place is left as it is.
fn reseal(head: &mut [u8]) {
    let slot = 8 + DIGEST_PREFIX.len();
    if head.len() < slot + 65
        || !head[8..].starts_with(DIGEST_PREFIX.as_bytes())
        || head[slot + 64] != b'"'
    {
        return;
    }
    head[slot..slot + 64].fill(b'0');
    let digest = Sha256Digest::of(head);
    head[slot..slot + 64].copy_from_slice(digest.to_hex().as_bytes());
}

fn mutate(pack: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let Some(mut r) = Regions::split(pack) else {
        return pack.to_vec();
    };
    let mut tail: Option<Vec<u8>> = None;
    for m in mutations {
        let dirty = match m {
            Mutation::Replace { slot, leaf } => apply(
                &mut r.header,
                Kind::Leaf,
                *slot,
                &Op::Replace(&leaf.value()),
            ),
            Mutation::Nudge { slot, delta } => {
                apply(&mut r.header, Kind::Number, *slot, &Op::Nudge(*delta))
            }
            Mutation::Remove { slot } => apply(&mut r.header, Kind::Member, *slot, &Op::Remove),
            Mutation::Add { slot, key, leaf } => apply(
                &mut r.header,
                Kind::Object,
                *slot,
                &Op::Add(key, &leaf.value()),
            ),
            Mutation::Duplicate { slot, suffix } => {
                apply(&mut r.header, Kind::Member, *slot, &Op::Duplicate(*suffix))
            }
            Mutation::RehashSibling { slot } => {
                apply(&mut r.header, Kind::Digest, *slot, &Op::RehashSibling)
            }
            Mutation::RehashPayload { slot, entry } => match r.tensor_bytes(*entry) {
                Some(bytes) => apply(
                    &mut r.header,
                    Kind::Digest,
                    *slot,
                    &Op::RehashTo(Sha256Digest::of(&bytes)),
                ),
                None => false,
            },
            Mutation::HeaderLen { delta } => {
                r.len_delta = r.len_delta.wrapping_add(i64::from(*delta));
                false
            }
            Mutation::Payload { at, xor } => {
                if !r.data.is_empty() {
                    let i = usize::try_from(*at).unwrap_or(0) % r.data.len();
                    r.data[i] ^= xor | 1;
                }
                false
            }
            Mutation::Truncate { keep } => {
                let mut bytes = tail.take().unwrap_or_else(|| r.join());
                bytes.truncate(usize::try_from(*keep).unwrap_or(usize::MAX));
                tail = Some(bytes);
                false
            }
            Mutation::Extend { bytes } => {
                let mut out = tail.take().unwrap_or_else(|| r.join());
                out.extend_from_slice(bytes);
                tail = Some(out);
                false
            }
            Mutation::KeepDigest => {
                r.reseal = false;
                false
            }
        };
        r.header_dirty |= dirty;
    }
    tail.unwrap_or_else(|| r.join())
}

fuzz_target!(|input: &[u8]| {
    let mut u = Unstructured::new(input);
    let Ok(records) = u.arbitrary::<Vec<Record>>() else {
        return;
    };
    let Ok(mutations) = u.arbitrary::<Vec<Mutation>>() else {
        return;
    };

    let pack_id = Uuid::from_u128(0x7);
    let mut writer = PackWriter::new(pack_id, PackLimits::new(6, 4096).expect("valid limits"));
    let mut appended = Vec::new();
    for r in records.iter().take(8) {
        let m = metadata(r);
        let bytes = payload(&m, r.payload_seed);
        if writer.append(m.clone(), bytes.clone()).is_ok() {
            appended.push((m, bytes));
        }
    }
    let sealed = writer.seal().expect("a pack of accepted records seals");

    // Round trip: what was appended is what reads back.
    let reader = PackReader::from_bytes_expecting(sealed.bytes.clone(), sealed.info.pack_sha256)
        .expect("a sealed pack opens under the digest sealing reported");
    assert_eq!(reader.info(), sealed.info);
    assert_eq!(reader.pack_id(), pack_id);
    assert_eq!(reader.len(), appended.len());
    for (i, (m, bytes)) in appended.iter().enumerate() {
        let entry = reader.record(i).expect("in range");
        assert_eq!(&entry.metadata, m);
        assert_eq!(entry.payload_sha256, Sha256Digest::of(bytes));
        assert_eq!(
            reader.payload(i).expect("in range").as_ref(),
            bytes.as_slice()
        );
    }
    common::check_accepted_pack(&sealed.bytes, &reader);

    let mutated = mutate(&sealed.bytes, &mutations);
    if let Ok(reader) = PackReader::from_bytes(mutated.clone()) {
        common::check_accepted_pack(&mutated, &reader);
    }
});
