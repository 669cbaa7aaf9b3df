//! What every pack target checks of a pack the reader accepted.

#![allow(dead_code, reason = "each target uses a subset")]

use std::convert::Infallible;

use bytes::Bytes;
use capcat_pack::{InMemory, PackError, PackReader, Sha256Digest, hydrate};

/// The properties of an accepted pack: it is a safetensors file the
/// `safetensors` crate accepts too; it opens under its own digest and under
/// no other; every locator hydrates from the same bytes through an honest
/// range source and verifies; every record decodes and summarises; and a
/// range source that answers with other bytes (a shifted or truncated
/// window, as a lying or broken store would) never makes `hydrate` return
/// them.
pub fn check_accepted_pack(data: &[u8], reader: &PackReader) {
    safetensors::SafeTensors::deserialize(data).expect("an accepted pack is a safetensors file");
    assert_eq!(reader.pack_sha256(), Sha256Digest::of(data));
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
