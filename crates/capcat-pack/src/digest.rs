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

/// The CRC-64/NVME of a run of bytes, with the run's length. Runs taken
/// apart, on different threads or before the bytes in front of them are
/// final, join into the CRC of the bytes end to end ([`CrcRun::then`], the
/// CRC's combination rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CrcRun {
    crc: u64,
    len: u64,
}

impl CrcRun {
    /// The run of `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Self {
        Self {
            crc: crc64nvme(bytes),
            len: bytes.len() as u64,
        }
    }

    /// This run followed by `next`.
    ///
    /// Appending `n` bytes to a message multiplies its register by
    /// `x^(8n)` modulo the polynomial; the CRC of the appended bytes, taken
    /// from the same initial value, adds in. The initial value and the final
    /// XOR are equal (all ones), so they cancel in this sum, as in zlib's
    /// `crc32_combine`: `crc(A || B) = crc(A) * x^(8|B|) + crc(B)`.
    pub(crate) fn then(self, next: Self) -> Self {
        Self {
            crc: multiply_mod(x_to_the_8n(next.len), self.crc) ^ next.crc,
            len: self.len + next.len,
        }
    }

    /// The CRC-64/NVME of the run's bytes.
    pub(crate) fn crc(self) -> u64 {
        self.crc
    }
}

/// CRC-64/NVME's polynomial 0xad93d23594c93659, bit-reflected: the
/// register holds the coefficient of `x^0` in its top bit.
const REFLECTED_POLY: u64 = 0x9a6c_9329_ac4b_c9b5;

/// `x^0`, the polynomial 1, in the reflected register.
const ONE: u64 = 1 << 63;

/// `a * b` modulo the polynomial, both reflected (zlib's `multmodp`, 64
/// bits wide). At most 64 steps.
const fn multiply_mod(a: u64, mut b: u64) -> u64 {
    let mut product = 0;
    let mut bit = ONE;
    while bit != 0 {
        if a & bit != 0 {
            product ^= b;
        }
        bit >>= 1;
        // b times x: one place towards the low end, reduced.
        b = if b & 1 != 0 {
            (b >> 1) ^ REFLECTED_POLY
        } else {
            b >> 1
        };
    }
    product
}

/// `x^(2^k)` modulo the polynomial, for every `k` a length can need: the
/// bits of `8n` for any 64-bit `n` reach `k = 66`.
const X_TO_THE_2_TO_THE: [u64; 67] = {
    let mut table = [0; 67];
    // x^1.
    let mut power = ONE >> 1;
    let mut k = 0;
    while k < 67 {
        table[k] = power;
        power = multiply_mod(power, power);
        k += 1;
    }
    table
};

/// `x^(8n)` modulo the polynomial: what appending `n` bytes multiplies a
/// register by. One multiplication per set bit of `8n`, so at most 64.
fn x_to_the_8n(n: u64) -> u64 {
    let mut power = ONE;
    let mut rest = n;
    // The bits of 8n are those of n, three places up.
    let mut k = 3;
    while rest != 0 {
        if rest & 1 != 0 {
            power = multiply_mod(X_TO_THE_2_TO_THE[k], power);
        }
        rest >>= 1;
        k += 1;
    }
    power
}

/// A CRC-64/NVME computed piece by piece: the pieces in order are one
/// [`CrcRun`] once finished.
pub(crate) struct Crc64Nvme(crc_fast::Digest);

impl Crc64Nvme {
    pub(crate) fn new() -> Self {
        Self(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc64Nvme))
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The run of the pieces given so far.
    pub(crate) fn finish(&self) -> CrcRun {
        CrcRun {
            crc: self.0.finalize(),
            len: self.0.get_amount(),
        }
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
        // A pair of digits that are both not hex is refused like one.
        for pair in ["gg", "zz", "GG", "g0", "0g"] {
            let text = format!("{pair}{}", "0".repeat(62));
            assert!(text.parse::<Sha256Digest>().is_err(), "{text}");
        }
        // Errors and logs print a digest as its hex, as the header spells it.
        assert_eq!(empty.to_string(), empty.to_hex());
        assert_eq!(
            format!("{empty:?}"),
            format!("Sha256Digest({})", empty.to_hex())
        );
    }

    #[test]
    fn crc64nvme_matches_its_check_value() {
        // The catalogued check value of CRC-64/NVME.
        assert_eq!(crc64nvme(b"123456789"), 0xae8b_1486_0a79_9888);
    }

    #[test]
    fn a_crc_taken_in_runs_is_the_crc_of_the_runs_end_to_end() {
        let file: Vec<u8> = (0..5_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for head_len in [0, 1, 9, 100, 4_999, 5_000] {
            let (head, data) = file.split_at(head_len);
            for piece in [1, 3, 64, 1_792, 10_000] {
                let mut crc = Crc64Nvme::new();
                for chunk in data.chunks(piece) {
                    crc.update(chunk);
                }
                let joined = CrcRun::of(head).then(crc.finish());
                assert_eq!(joined, CrcRun::of(&file), "{head_len} {piece}");
            }
        }
        // Runs join in any grouping, empty runs included: the three-way
        // cut a seal on several threads makes.
        for cut in [0, 1, 2_500, 4_999, 5_000] {
            let (left, right) = file.split_at(cut);
            let (middle, last) = right.split_at(right.len() / 2);
            let grouped = CrcRun::of(left)
                .then(CrcRun::of(&[]))
                .then(CrcRun::of(middle).then(CrcRun::of(last)));
            assert_eq!(grouped.crc(), crc64nvme(&file), "{cut}");
            assert_eq!(CrcRun::of(&[]).then(grouped), grouped, "{cut}");
        }
    }

    #[test]
    fn runs_join_as_the_crc_library_combines_them() {
        // The join agrees with crc_fast's own combination (a matrix method,
        // independent of this one) for lengths up to the largest a pack may
        // have and beyond.
        let mut first = 0x0123_4567_89ab_cdef_u64;
        let mut second = 0xfedc_ba98_7654_3210_u64;
        let lengths = [
            0,
            1,
            2,
            7,
            8,
            1_792,
            9_437_184,
            100_000_000,
            1 << 40,
            u64::MAX,
        ];
        for (turn, len) in lengths.into_iter().enumerate() {
            let expected =
                crc_fast::checksum_combine(crc_fast::CrcAlgorithm::Crc64Nvme, first, second, len);
            let joined = CrcRun { crc: first, len: 0 }.then(CrcRun { crc: second, len });
            assert_eq!(joined.crc(), expected, "length {len}");
            first = first.rotate_left(7) ^ turn as u64;
            second = second.wrapping_mul(0x9e37_79b9_7f4a_7c15);
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
