//! What every pack target checks of a pack the reader accepted.

#![allow(dead_code, reason = "each target uses a subset")]

use std::convert::Infallible;

use bytes::Bytes;
use capcat_pack::{InMemory, PackError, PackReader, Sha256Digest, hydrate};

/// The pack digest as docs/pack-format.md section 4 defines it, computed
/// here from the bytes alone so the target does not trust the reader's own
/// arithmetic: version 1 hashes the whole file; version 2 hashes the header
/// (bytes `0 .. 8+N`) with its own 64 digest digits read as ASCII `0`, and
/// those digits must be the digest's lowercase hex.
pub fn expected_pack_digest(data: &[u8], reader: &PackReader) -> Sha256Digest {
    match reader.format_version() {
        1 => Sha256Digest::of(data),
        2 => {
            const DIGITS: std::ops::Range<usize> = 47..111;
            let n = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
            let end = 8 + usize::try_from(n).expect("an accepted header fits in memory");
            let mut head = data[..end].to_vec();
            let stored = String::from_utf8(head[DIGITS].to_vec()).expect("ASCII digits");
            head[DIGITS].fill(b'0');
            let digest = Sha256Digest::of(&head);
            assert_eq!(
                stored,
                digest.to_string(),
                "the header's digits are its digest"
            );
            digest
        }
        other => panic!("the reader accepted an unknown format version {other}"),
    }
}

/// The properties of an accepted pack: it is a safetensors file the
/// `safetensors` crate accepts too; it opens under its own digest and under
/// no other; every locator hydrates from the same bytes through an honest
/// range source and verifies; every record decodes and summarises; and a
/// range source that answers with other bytes (a shifted or truncated
/// window, as a lying or broken store would) never makes `hydrate` return
/// them.
pub fn check_accepted_pack(data: &[u8], reader: &PackReader) {
    safetensors::SafeTensors::deserialize(data).expect("an accepted pack is a safetensors file");
    assert_eq!(reader.pack_sha256(), expected_pack_digest(data, reader));
    let again = PackReader::from_bytes_expecting(data.to_vec(), reader.pack_sha256())
        .expect("a pack opens under its own digest");
    assert_eq!(again.info(), reader.info());
    let mut other = reader.pack_sha256();
    other.0[0] ^= 1;
    assert!(matches!(
        PackReader::from_bytes_expecting(data.to_vec(), other),
        Err(PackError::PackChecksumMismatch { .. })
    ));

    let mut source = InMemory(reader.bytes().clone());
    for locator in reader.locators() {
        let payload = hydrate(&mut source, locator).expect("an accepted pack hydrates");
        assert_eq!(payload, reader.payload(locator.index).expect("in range"));
        reader
            .values(locator.index)
            .expect("an accepted record decodes");
        reader
            .summary(locator.index)
            .expect("an accepted record summarises");

        let shift = 1 + usize::from(data[locator.index % data.len()]);
        let mut lying = |offset: u64, length: u64| -> Result<Bytes, Infallible> {
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .saturating_add(shift)
                % (data.len() + 1);
            let end = start
                .saturating_add(usize::try_from(length).unwrap_or(usize::MAX))
                .min(data.len());
            Ok(Bytes::copy_from_slice(&data[start..end]))
        };
        if let Ok(bytes) = hydrate(&mut lying, locator) {
            assert_eq!(
                bytes, payload,
                "hydrate returned bytes other than the payload"
            );
        }
    }
    assert_eq!(reader.info().records.len(), reader.len());
    assert_eq!(reader.records().len(), reader.len());
    assert!(reader.payload(reader.len()).is_err());
}
