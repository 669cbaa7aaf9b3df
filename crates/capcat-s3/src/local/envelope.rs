//! The on-disk form of a local object: a small header (magic, length, the
//! body's checksum and the user metadata) followed by the body, in one file
//! so that one rename publishes both at once.
//!
//! ```text
//! CAPCAT-OBJECT-1\n            16 bytes of magic
//! <u32 little-endian>          length of the header text
//! crc64nvme <16 hex digits>\n  the body's CRC-64/NVME
//! meta <name> <value>\n        one line per metadata entry, in name order
//! <body>
//! ```
//!
//! Objects written before the store declared CRC-64/NVME carry a
//! `sha256 <64 hex digits>` line instead; they are read and verified by it.
//!
//! A file without the magic (put there by something else) reads as a raw
//! object with no metadata, as a foreign object would in S3.

use std::collections::BTreeMap;

use crate::metadata::UserMetadata;
use crate::store::ObjectChecksum;

/// The first bytes of every object this store writes.
pub(crate) const MAGIC: &[u8; 16] = b"CAPCAT-OBJECT-1\n";

/// The longest header this store writes is far below this; a longer length
/// field means a corrupt file, not a huge allocation.
const MAX_HEADER_BYTES: u32 = 64 * 1024;

/// Bytes before the header text: the magic and the length field.
pub(crate) const PREAMBLE_BYTES: usize = MAGIC.len() + 4;

/// What the header of a local object says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// The body's checksum; `None` for a raw (foreign) file.
    pub(crate) checksum: Option<ObjectChecksum>,
    /// The user metadata (empty for a raw file).
    pub(crate) metadata: UserMetadata,
    /// Where the body starts in the file.
    pub(crate) body_offset: u64,
}

/// Encodes the preamble and header of an object.
pub(crate) fn encode(crc64nvme: u64, metadata: &UserMetadata) -> Vec<u8> {
    let mut text = format!("crc64nvme {crc64nvme:016x}\n");
    for (name, value) in metadata.entries() {
        text.push_str("meta ");
        text.push_str(name);
        text.push(' ');
        text.push_str(value);
        text.push('\n');
    }
    let mut out = Vec::with_capacity(PREAMBLE_BYTES + text.len());
    out.extend_from_slice(MAGIC);
    // Metadata is capped at 2 KiB, so the header always fits in a u32.
    let len = u32::try_from(text.len()).expect("a header of at most a few KiB fits in u32");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out
}

/// How to read a file's header, given its first bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Preamble {
    /// Not written by this store: a raw object whose body is the whole file.
    Raw,
    /// Written by this store: the header text is this many bytes long and
    /// follows the preamble.
    Header { text_len: u32 },
}

/// Reads the preamble from the first [`PREAMBLE_BYTES`] of a file (or fewer,
/// for a short file).
pub(crate) fn read_preamble(first: &[u8]) -> Result<Preamble, String> {
    if first.len() < PREAMBLE_BYTES || &first[..MAGIC.len()] != MAGIC {
        return Ok(Preamble::Raw);
    }
    let mut len = [0_u8; 4];
    len.copy_from_slice(&first[MAGIC.len()..PREAMBLE_BYTES]);
    let text_len = u32::from_le_bytes(len);
    if text_len > MAX_HEADER_BYTES {
        return Err(format!(
            "corrupt local object: header length {text_len} exceeds {MAX_HEADER_BYTES}"
        ));
    }
    Ok(Preamble::Header { text_len })
}

/// Parses the header text that followed a [`Preamble::Header`].
pub(crate) fn parse_header(text: &[u8]) -> Result<Header, String> {
    let corrupt = |why: &str| format!("corrupt local object header: {why}");
    let text = std::str::from_utf8(text).map_err(|_| corrupt("not UTF-8"))?;
    let mut checksum = None;
    let mut entries = BTreeMap::new();
    for line in text.split_terminator('\n') {
        if let Some(crc) = line.strip_prefix("crc64nvme ") {
            let mut bytes = [0_u8; 8];
            hex::decode_to_slice(crc, &mut bytes).map_err(|_| corrupt("bad crc64nvme line"))?;
            checksum = Some(ObjectChecksum::Crc64Nvme(u64::from_be_bytes(bytes)));
        } else if let Some(digest) = line.strip_prefix("sha256 ") {
            let mut bytes = [0_u8; 32];
            hex::decode_to_slice(digest, &mut bytes).map_err(|_| corrupt("bad sha256 line"))?;
            checksum = Some(ObjectChecksum::Sha256(bytes));
        } else if let Some(entry) = line.strip_prefix("meta ") {
            let (name, value) = entry
                .split_once(' ')
                .ok_or_else(|| corrupt("bad meta line"))?;
            entries.insert(name.to_owned(), value.to_owned());
        } else {
            return Err(corrupt(&format!("unknown line {line:?}")));
        }
    }
    let checksum = checksum.ok_or_else(|| corrupt("no checksum line"))?;
    let metadata = UserMetadata::new(entries).map_err(|e| corrupt(&e.to_string()))?;
    let body_offset = (PREAMBLE_BYTES + text.len()) as u64;
    Ok(Header {
        checksum: Some(checksum),
        metadata,
        body_offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let metadata = UserMetadata::new(BTreeMap::from([
            ("a".to_owned(), "one two".to_owned()),
            ("b-2".to_owned(), String::new()),
        ]))
        .expect("valid metadata");
        let encoded = encode(0x0123_4567_89ab_cdef, &metadata);
        let Ok(Preamble::Header { text_len }) = read_preamble(&encoded) else {
            panic!("not a header preamble");
        };
        assert_eq!(PREAMBLE_BYTES + text_len as usize, encoded.len());
        let header = parse_header(&encoded[PREAMBLE_BYTES..]).expect("parses");
        assert_eq!(
            header.checksum,
            Some(ObjectChecksum::Crc64Nvme(0x0123_4567_89ab_cdef))
        );
        // The line objects written before CRC-64/NVME carry.
        let legacy = parse_header(format!("sha256 {}\n", "07".repeat(32)).as_bytes())
            .expect("a legacy header parses");
        assert_eq!(legacy.checksum, Some(ObjectChecksum::Sha256([7; 32])));
        assert_eq!(header.metadata, metadata);
        assert_eq!(header.body_offset, encoded.len() as u64);
    }

    #[test]
    fn files_without_the_magic_are_raw() {
        assert_eq!(read_preamble(b"hello"), Ok(Preamble::Raw));
        assert_eq!(
            read_preamble(b"CAPCAT-OBJECT-2\n\0\0\0\0"),
            Ok(Preamble::Raw)
        );
    }

    #[test]
    fn corrupt_headers_are_errors_not_panics() {
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_preamble(&huge).is_err());
        assert!(parse_header(b"sha256 zz\n").is_err());
        assert!(parse_header(b"crc64nvme 0123\n").is_err());
        assert!(parse_header(b"meta nospace\nsha256 00\n").is_err());
        assert!(parse_header(b"").is_err());
        assert!(parse_header(b"\xff").is_err());
    }
}
