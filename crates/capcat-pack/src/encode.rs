//! Writing a pack's header: the length prefix, the header JSON with the
//! descriptor embedded as a JSON string, and the padding.
//!
//! The header is written by hand in one pass rather than built as a JSON
//! value and serialized twice: the descriptor is emitted directly in its
//! escaped-once form (the form it has inside the header's `capcat` string),
//! so no text is escaped a second time and nothing is allocated per record.
//! The reader parses it with `serde_json` like any other JSON, so the only
//! contract here is valid JSON with the layout docs/pack-format.md fixes.

use crate::descriptor::{FORMAT_VERSION, tensor_key_into};
use crate::digest::Sha256Digest;
use crate::error::PackError;
use crate::header::{DIGEST_SLOT, HEADER_PREFIX, HeaderHasher, LENGTH_PREFIX, MAX_HEADER_BYTES};
use crate::record::RecordMetadata;

/// One record as the header writer needs it.
pub(crate) struct EncodedRecord<'a> {
    pub(crate) metadata: &'a RecordMetadata,
    /// Start of the payload, relative to the data section.
    pub(crate) begin: u64,
    /// End of the payload, relative to the data section.
    pub(crate) end: u64,
}

/// A header written with every digest slot holding 64 `'0'`s: every digest
/// is 64 hex digits, so the header's length and layout do not depend on the
/// digests and the payloads can be copied and hashed after it is written.
pub(crate) struct Skeleton {
    /// The header length `N` (without the 8-byte prefix).
    pub(crate) header_len: u64,
    /// Offset in the file of each record's `payload_sha256` digits, by
    /// record index.
    pub(crate) payload_slots: Vec<usize>,
}

/// Writes the length prefix and the padded header of a pack into `out`
/// (which must be empty), with every digest slot left as `'0'`s.
/// `data_order` lists record indexes in data-section order; the tensor
/// entries follow it.
pub(crate) fn write_skeleton(
    out: &mut Vec<u8>,
    pack_id: uuid::Uuid,
    records: &[EncodedRecord<'_>],
    data_order: &[usize],
) -> Result<Skeleton, PackError> {
    debug_assert!(out.is_empty(), "the header starts the file");
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(HEADER_PREFIX);
    out.extend_from_slice(&[b'0'; 64]);
    out.extend_from_slice(br#"","capcat":""#);
    let payload_slots = write_descriptor(out, pack_id, records);
    out.extend_from_slice(br#""}"#);
    let mut key = [0u8; 15];
    for &index in data_order {
        let record = &records[index];
        out.extend_from_slice(br#",""#);
        tensor_key_into(index, &mut key);
        out.extend_from_slice(&key);
        out.extend_from_slice(br#"":{"dtype":""#);
        out.extend_from_slice(record.metadata.dtype.name().as_bytes());
        out.extend_from_slice(br#"","shape":"#);
        write_shape(out, &record.metadata.shape);
        out.extend_from_slice(br#","data_offsets":["#);
        write_u64(out, record.begin);
        out.push(b',');
        write_u64(out, record.end);
        out.extend_from_slice(b"]}");
    }
    out.push(b'}');
    // Pad with spaces so that the data section starts 8-aligned.
    let padded = out.len().next_multiple_of(8);
    out.resize(padded, b' ');
    let header_len = (out.len() as u64) - LENGTH_PREFIX;
    if header_len > MAX_HEADER_BYTES {
        return Err(PackError::HeaderTooLarge {
            header_len,
            limit: MAX_HEADER_BYTES,
        });
    }
    out[..8].copy_from_slice(&header_len.to_le_bytes());
    Ok(Skeleton {
        header_len,
        payload_slots,
    })
}

/// Writes `digest` into the 64-digit slot at `slot` of `head`.
pub(crate) fn fill_slot(head: &mut [u8], slot: usize, digest: &Sha256Digest) {
    hex_into(digest, &mut head[slot..slot + 64]);
}

/// Finishes the pack digest of a header whose payload slots are filled,
/// writes it into its slot and returns it. `head` is the file bytes
/// `[0, 8 + N)`; `hasher` has hashed them up to some point.
pub(crate) fn seal_header(head: &mut [u8], hasher: HeaderHasher) -> Sha256Digest {
    let digest = hasher.finish(head);
    fill_slot(head, DIGEST_SLOT, &digest);
    digest
}

/// The descriptor JSON, escaped once: every `"` of the descriptor text is
/// written `\"` and every string value is escaped twice. Returns the file
/// offset of each record's `payload_sha256` digits.
fn write_descriptor(
    out: &mut Vec<u8>,
    pack_id: uuid::Uuid,
    records: &[EncodedRecord<'_>],
) -> Vec<usize> {
    let mut slots = Vec::with_capacity(records.len());
    out.extend_from_slice(br#"{\"format_version\":"#);
    write_u64(out, u64::from(FORMAT_VERSION));
    out.extend_from_slice(br#",\"pack_id\":\""#);
    let mut uuid = [0u8; 36];
    out.extend_from_slice(pack_id.hyphenated().encode_lower(&mut uuid).as_bytes());
    out.extend_from_slice(br#"\",\"records\":["#);
    let mut scratch = Vec::new();
    for (i, record) in records.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let m = record.metadata;
        let id = &m.identity;
        out.extend_from_slice(br#"{\"tenant_id\":\""#);
        embedded_str(out, &mut scratch, &id.tenant_id);
        out.extend_from_slice(br#"\",\"experiment_id\":\""#);
        embedded_str(out, &mut scratch, &id.experiment_id);
        out.extend_from_slice(br#"\",\"run_id\":\""#);
        embedded_str(out, &mut scratch, &id.run_id);
        out.extend_from_slice(br#"\",\"captured_at_ns\":"#);
        write_u64(out, id.captured_at_ns);
        out.extend_from_slice(br#",\"capture_id\":\""#);
        out.extend_from_slice(
            id.capture_id
                .hyphenated()
                .encode_lower(&mut uuid)
                .as_bytes(),
        );
        out.extend_from_slice(br#"\",\"model\":\""#);
        embedded_str(out, &mut scratch, &m.model);
        out.extend_from_slice(br#"\",\"module_path\":\""#);
        embedded_str(out, &mut scratch, &m.module_path);
        out.extend_from_slice(br#"\",\"hook\":\""#);
        embedded_str(out, &mut scratch, &m.hook);
        out.extend_from_slice(br#"\",\"step\":"#);
        write_u64(out, m.step);
        out.extend_from_slice(br#",\"tensor_name\":\""#);
        embedded_str(out, &mut scratch, &m.tensor_name);
        out.extend_from_slice(br#"\",\"dtype\":\""#);
        out.extend_from_slice(m.dtype.name().as_bytes());
        out.extend_from_slice(br#"\",\"shape\":"#);
        write_shape(out, &m.shape);
        out.extend_from_slice(br#",\"tags\":{"#);
        for (t, (key, value)) in m.tags.iter().enumerate() {
            if t > 0 {
                out.push(b',');
            }
            out.extend_from_slice(br#"\""#);
            embedded_str(out, &mut scratch, key);
            out.extend_from_slice(br#"\":\""#);
            embedded_str(out, &mut scratch, value);
            out.extend_from_slice(br#"\""#);
        }
        out.extend_from_slice(br#"},\"payload_sha256\":\""#);
        slots.push(out.len());
        out.extend_from_slice(&[b'0'; 64]);
        out.extend_from_slice(br#"\"}"#);
    }
    out.extend_from_slice(b"]}");
    slots
}

/// Writes `text` as the contents of a JSON string that is itself inside a
/// JSON string: escaped, then escaped again. Text with nothing to escape
/// (the common case) is copied as it is.
fn embedded_str(out: &mut Vec<u8>, scratch: &mut Vec<u8>, text: &str) {
    if !text.bytes().any(needs_escape) {
        out.extend_from_slice(text.as_bytes());
        return;
    }
    scratch.clear();
    escape_into(scratch, text.as_bytes());
    escape_into(out, scratch);
}

const fn needs_escape(byte: u8) -> bool {
    byte == b'"' || byte == b'\\' || byte < 0x20
}

/// JSON string escaping as `serde_json` writes it: `\"`, `\\`, the five
/// short control escapes, `\u00XX` for other control characters, and every
/// other byte (including UTF-8 sequences) unchanged.
fn escape_into(out: &mut Vec<u8>, text: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &byte in text {
        match byte {
            b'"' => out.extend_from_slice(br#"\""#),
            b'\\' => out.extend_from_slice(br"\\"),
            0x08 => out.extend_from_slice(br"\b"),
            0x0c => out.extend_from_slice(br"\f"),
            b'\n' => out.extend_from_slice(br"\n"),
            b'\r' => out.extend_from_slice(br"\r"),
            b'\t' => out.extend_from_slice(br"\t"),
            0x00..=0x1f => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]),
            _ => out.push(byte),
        }
    }
}

fn write_shape(out: &mut Vec<u8>, shape: &[u64]) {
    out.push(b'[');
    for (i, &dim) in shape.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_u64(out, dim);
    }
    out.push(b']');
}

/// Decimal digits of `value`, as JSON writes an unsigned integer.
fn write_u64(out: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        // `value % 10` is below 10, so the cast keeps every bit.
        digits[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[start..]);
}

/// Writes the 64 lowercase hex digits of `digest` into `slot`.
fn hex_into(digest: &Sha256Digest, slot: &mut [u8]) {
    // The slot is always exactly 64 bytes, the length this call needs.
    hex::encode_to_slice(digest.0, slot).expect("a digest slot holds 64 hex digits");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::Dtype;

    /// docs/pack-format.md names the digest's file offset.
    #[test]
    fn the_pack_digest_sits_at_offset_47() {
        assert_eq!(HEADER_PREFIX.len(), 39);
        assert_eq!(DIGEST_SLOT, 47);
    }

    /// The header writer copies dtype names without escaping them.
    #[test]
    fn dtype_names_need_no_escaping() {
        for dtype in Dtype::ALL {
            assert!(!dtype.name().bytes().any(needs_escape));
        }
    }

    #[test]
    fn escaping_matches_serde_json_at_both_levels() {
        // Every control character, each of the five short escapes among
        // them, and the space after them.
        let controls: String = (0u8..=0x20).map(char::from).collect();
        for text in [
            "plain",
            "q\"uote",
            "back\\slash",
            "ctl\u{1}\n\t",
            "ü ☃ \u{7f}",
            &controls,
        ] {
            let once = serde_json::to_string(text).expect("serializes");
            let twice = serde_json::to_string(&once).expect("serializes");
            let mut out = Vec::new();
            let mut scratch = Vec::new();
            embedded_str(&mut out, &mut scratch, text);
            // `twice` is `"` + escaped(`"` + escaped(text) + `"`) + `"`; strip
            // the outer quotes and the escaped inner ones.
            let inner = &twice[3..twice.len() - 3];
            assert_eq!(std::str::from_utf8(&out).expect("utf-8"), inner, "{text:?}");
        }
    }

    #[test]
    fn integers_are_written_as_json_integers() {
        for value in [0, 7, 10, 1_792, u64::MAX] {
            let mut out = Vec::new();
            write_u64(&mut out, value);
            assert_eq!(out, value.to_string().as_bytes());
        }
    }
}
