//! SHA-256 digests as they appear in packs, locators and manifests.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

use crate::error::PackError;

/// A SHA-256 digest. Displayed, serialized and parsed as 64 lowercase hex
/// digits (upper case is refused so that one digest has one spelling).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest(pub [u8; 32]);

impl Sha256Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Sha256Digest(Sha256::digest(bytes).into())
    }

    /// The 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

/// The CRC-64/NVME of `bytes` (the S3 full-object checksum
/// `x-amz-checksum-crc64nvme`: polynomial 0xad93d23594c93659, reflected,
/// initial value and final XOR all ones).
pub fn crc64nvme(bytes: &[u8]) -> u64 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, bytes)
}

/// A CRC-64/NVME computed piece by piece ([`crc64nvme`] of the pieces in
/// order, once finished).
pub(crate) struct Crc64Nvme(crc_fast::Digest);

impl Crc64Nvme {
    pub(crate) fn new() -> Self {
        Self(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc64Nvme))
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The CRC of `head` followed by the pieces given so far: the head may
    /// be finished after them (the CRC's combination rule).
    pub(crate) fn finish_after(&self, head: &[u8]) -> u64 {
        crc_fast::checksum_combine(
            crc_fast::CrcAlgorithm::Crc64Nvme,
            crc64nvme(head),
            self.0.finalize(),
            self.0.get_amount(),
        )
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256Digest({})", self.to_hex())
    }
}

impl FromStr for Sha256Digest {
    type Err = PackError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || PackError::InvalidDigest {
            found: s.chars().take(80).collect(),
        };
        let digits = s.as_bytes();
        if digits.len() != 64 {
            return Err(invalid());
        }
        let mut out = [0u8; 32];
        // Every digit is looked up, and any that is not lowercase hex marks
        // the whole digest invalid (checked once, after the loop).
        let mut bad = 0u8;
        for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
            let high = LOWER_HEX[usize::from(pair[0])];
            let low = LOWER_HEX[usize::from(pair[1])];
            bad |= (high | low) & NOT_HEX;
            *byte = (high << 4) | (low & 0x0f);
        }
        if bad != 0 {
            return Err(invalid());
        }
        Ok(Sha256Digest(out))
    }
}

/// Marks a byte that is not a lowercase hex digit in [`LOWER_HEX`].
const NOT_HEX: u8 = 0x80;

/// The value of each lowercase hex digit, [`NOT_HEX`] for every other byte
/// (upper case included, so that a digest has one spelling).
const LOWER_HEX: [u8; 256] = {
    let mut table = [NOT_HEX; 256];
    let mut digit = 0;
    while digit < 16 {
        table[b"0123456789abcdef"[digit] as usize] = digit as u8;
        digit += 1;
    }
    table
};

impl Serialize for Sha256Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Parses the string where the deserializer holds it, without
        /// copying it into a `String` first.
        struct HexVisitor;
        impl serde::de::Visitor<'_> for HexVisitor {
            type Value = Sha256Digest;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("64 lowercase hex digits")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Sha256Digest, E> {
                text.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_str(HexVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector_and_hex_round_trip() {
        let empty = Sha256Digest::of(b"");
        assert_eq!(
            empty.to_hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(empty.to_hex().parse::<Sha256Digest>().expect("hex"), empty);
    }

    #[test]
    fn crc64nvme_matches_its_check_value() {
        // The catalogued check value of CRC-64/NVME.
        assert_eq!(crc64nvme(b"123456789"), 0xae8b_1486_0a79_9888);
    }

    #[test]
    fn a_crc_taken_in_pieces_is_the_crc_of_head_and_pieces() {
        let file: Vec<u8> = (0..5_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for head_len in [0, 1, 9, 100, 4_999, 5_000] {
            let (head, data) = file.split_at(head_len);
            for piece in [1, 3, 64, 1_792, 10_000] {
                let mut crc = Crc64Nvme::new();
                for chunk in data.chunks(piece) {
                    crc.update(chunk);
                }
                assert_eq!(
                    crc.finish_after(head),
                    crc64nvme(&file),
                    "{head_len} {piece}"
                );
            }
        }
    }

    #[test]
    fn non_canonical_hex_is_refused() {
        let upper = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855";
        assert!(upper.parse::<Sha256Digest>().is_err());
        assert!("abc".parse::<Sha256Digest>().is_err());
        assert!("zz".repeat(32).parse::<Sha256Digest>().is_err());
    }
}
