//! The user metadata stored with every object, and the four fields that
//! identify a pack.
//!
//! S3 carries user metadata as `x-amz-meta-<name>` headers, which are
//! case-insensitive and must be US-ASCII, so names are restricted to
//! lowercase `[a-z0-9-]` and values to printable ASCII: a map accepted here
//! reads back unchanged from every store.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::key::parse_canonical_uuid;

/// The metadata name of the pack format version.
pub const FORMAT_VERSION: &str = "capcat-format-version";
/// The metadata name of the pack id.
pub const PACK_ID: &str = "capcat-pack-id";
/// The metadata name of the pack digest (lowercase hex): the pack format's
/// own SHA-256 identity of the pack. For format version 2 it is not a hash
/// of the object's bytes; for format version 1 it is, and an object
/// without [`CRC64NVME`] (written before this store declared one) is
/// checked against it.
pub const SHA256: &str = "capcat-sha256";
/// The metadata name of the object's CRC-64/NVME (16 lowercase hex digits).
/// Absent from objects stored before the store declared CRC-64/NVME, which
/// hold format-version-1 packs.
pub const CRC64NVME: &str = "capcat-crc64nvme";
/// The metadata name of the pack's record count.
pub const RECORD_COUNT: &str = "capcat-record-count";

/// The most user metadata S3 accepts in total (names and values), in bytes.
const MAX_METADATA_BYTES: usize = 2048;

/// Refused or unreadable metadata.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// A name is empty or has a character outside `[a-z0-9-]`.
    #[error("metadata name {name:?} must be non-empty lowercase [a-z0-9-]")]
    BadName {
        /// The name.
        name: String,
    },
    /// A value has a character outside printable ASCII.
    #[error("metadata value of {name:?} must be printable ASCII: {value:?}")]
    BadValue {
        /// The name.
        name: String,
        /// The value.
        value: String,
    },
    /// Names and values together exceed what S3 accepts.
    #[error("metadata of {bytes} bytes exceeds the {MAX_METADATA_BYTES}-byte limit")]
    TooLarge {
        /// Their total size.
        bytes: usize,
    },
    /// A field identifying a pack is absent.
    #[error("metadata has no {name:?}: not a Capcat pack")]
    Missing {
        /// The missing name.
        name: &'static str,
    },
    /// A field identifying a pack is present but not in its canonical form.
    #[error("metadata {name:?} = {value:?} is not a canonical {expected}")]
    Malformed {
        /// The name.
        name: &'static str,
        /// The value found.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
}

/// A validated user-metadata map (names lowercase `[a-z0-9-]`, values
/// printable ASCII, at most 2 KiB in total).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserMetadata(BTreeMap<String, String>);

impl UserMetadata {
    /// Validates `entries`.
    ///
    /// # Errors
    /// A [`MetadataError`] naming the first bad entry.
    pub fn new(entries: BTreeMap<String, String>) -> Result<Self, MetadataError> {
        let mut bytes = 0_usize;
        for (name, value) in &entries {
            let name_ok = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !name_ok {
                return Err(MetadataError::BadName { name: name.clone() });
            }
            if !value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
                return Err(MetadataError::BadValue {
                    name: name.clone(),
                    value: value.clone(),
                });
            }
            bytes += name.len() + value.len();
        }
        if bytes > MAX_METADATA_BYTES {
            return Err(MetadataError::TooLarge { bytes });
        }
        Ok(Self(entries))
    }

    /// The entries.
    #[must_use]
    pub fn entries(&self) -> &BTreeMap<String, String> {
        &self.0
    }

    /// The value of `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

/// What identifies a stored pack: its format version, id, pack digest,
/// whole-object CRC-64/NVME and record count. The CRC is also sent as the
/// PUT's `x-amz-checksum-crc64nvme`, so the store itself refuses bytes that
/// do not match it, and a whole GET is checked against it.
///
/// Objects stored before the store declared CRC-64/NVME carry no CRC: they
/// hold format-version-1 packs, whose pack digest (`sha256`) is the SHA-256
/// of the whole object, and a whole GET checks them against that.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PackMetadata {
    /// The pack format version.
    pub format_version: u32,
    /// The pack id (also the key's last segment).
    pub pack_id: Uuid,
    /// The pack digest (capcat-pack's `PackInfo::pack_sha256`), which the
    /// reader checks the pack against.
    pub sha256: [u8; 32],
    /// The CRC-64/NVME of the whole object (capcat-pack's
    /// `PackInfo::crc64nvme`); `None` only for a format-version-1 pack
    /// stored before the store declared it (its `sha256` then covers the
    /// whole object).
    pub crc64nvme: Option<u64>,
    /// How many records the pack holds.
    pub record_count: u64,
}

impl PackMetadata {
    /// The user metadata stored with the pack.
    #[must_use]
    pub fn to_user_metadata(&self) -> UserMetadata {
        let mut entries = BTreeMap::new();
        entries.insert(FORMAT_VERSION.to_owned(), self.format_version.to_string());
        entries.insert(PACK_ID.to_owned(), self.pack_id.hyphenated().to_string());
        entries.insert(SHA256.to_owned(), hex::encode(self.sha256));
        if let Some(crc) = self.crc64nvme {
            entries.insert(CRC64NVME.to_owned(), format!("{crc:016x}"));
        }
        entries.insert(RECORD_COUNT.to_owned(), self.record_count.to_string());
        // Four or five fixed lowercase names and decimal, hex and UUID values: well
        // inside every rule UserMetadata checks, so no validation is needed.
        UserMetadata(entries)
    }

    /// Reads the fields back, each in the canonical form
    /// [`Self::to_user_metadata`] writes. Other entries are ignored. The
    /// CRC may be absent only when the format version is 1 (a pack stored
    /// before the store declared CRC-64/NVME).
    ///
    /// # Errors
    /// [`MetadataError::Missing`] or [`MetadataError::Malformed`]: the object
    /// is not a Capcat pack (or was written by something else).
    pub fn from_user_metadata(metadata: &UserMetadata) -> Result<Self, MetadataError> {
        let field = |name: &'static str| metadata.get(name).ok_or(MetadataError::Missing { name });
        let malformed =
            |name: &'static str, value: &str, expected: &'static str| MetadataError::Malformed {
                name,
                value: value.to_owned(),
                expected,
            };

        let text = field(FORMAT_VERSION)?;
        let format_version = parse_canonical_decimal::<u32>(text)
            .ok_or_else(|| malformed(FORMAT_VERSION, text, "decimal u32"))?;
        let text = field(PACK_ID)?;
        let pack_id = parse_canonical_uuid(text)
            .ok_or_else(|| malformed(PACK_ID, text, "lowercase hyphenated UUID"))?;
        let text = field(SHA256)?;
        let sha256 = parse_sha256_hex(text)
            .ok_or_else(|| malformed(SHA256, text, "lowercase 64-digit hex"))?;
        let crc64nvme = match metadata.get(CRC64NVME) {
            Some(text) => Some(
                parse_crc64_hex(text)
                    .ok_or_else(|| malformed(CRC64NVME, text, "lowercase 16-digit hex"))?,
            ),
            // Only version 1 packs were stored before the CRC was.
            None if format_version == 1 => None,
            None => return Err(MetadataError::Missing { name: CRC64NVME }),
        };
        let text = field(RECORD_COUNT)?;
        let record_count = parse_canonical_decimal::<u64>(text)
            .ok_or_else(|| malformed(RECORD_COUNT, text, "decimal u64"))?;
        Ok(Self {
            format_version,
            pack_id,
            sha256,
            crc64nvme,
            record_count,
        })
    }
}

/// Parses a decimal written the way `to_string` writes it (no sign, no
/// leading zeros), so every value has one spelling.
fn parse_canonical_decimal<T: std::str::FromStr + ToString>(text: &str) -> Option<T> {
    let value = text.parse::<T>().ok()?;
    (value.to_string() == text).then_some(value)
}

/// Parses 16 lowercase hex digits.
fn parse_crc64_hex(text: &str) -> Option<u64> {
    let canonical = text.len() == 16
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    canonical.then(|| u64::from_str_radix(text, 16).ok())?
}

/// Parses 64 lowercase hex digits.
fn parse_sha256_hex(text: &str) -> Option<[u8; 32]> {
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut digest = [0_u8; 32];
    hex::decode_to_slice(text, &mut digest).ok()?;
    Some(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PackMetadata {
        PackMetadata {
            format_version: 2,
            pack_id: Uuid::from_u128(7),
            sha256: [0xab; 32],
            crc64nvme: Some(0x00ab_cdef_0123_4567),
            record_count: 4096,
        }
    }

    #[test]
    fn pack_metadata_round_trips() {
        let meta = sample();
        let user = meta.to_user_metadata();
        assert_eq!(UserMetadata::new(user.entries().clone()), Ok(user.clone()));
        assert_eq!(PackMetadata::from_user_metadata(&user), Ok(meta));
    }

    /// Objects stored before the store declared CRC-64/NVME carry version-1
    /// packs and no CRC: still packs. A newer version without the CRC is
    /// not one this store wrote.
    #[test]
    fn only_a_version_1_pack_may_lack_the_crc() {
        let older = PackMetadata {
            format_version: 1,
            crc64nvme: None,
            ..sample()
        };
        let user = older.to_user_metadata();
        assert_eq!(user.get(CRC64NVME), None);
        assert_eq!(PackMetadata::from_user_metadata(&user), Ok(older));
        let mut entries = sample().to_user_metadata().entries().clone();
        entries.remove(CRC64NVME);
        assert_eq!(
            PackMetadata::from_user_metadata(&UserMetadata(entries)),
            Err(MetadataError::Missing { name: CRC64NVME })
        );
    }

    #[test]
    fn non_canonical_fields_are_refused() {
        for (name, value) in [
            (FORMAT_VERSION, "01"),
            (FORMAT_VERSION, "+1"),
            (PACK_ID, "00000000-0000-0000-0000-00000000000A"),
            (PACK_ID, "00000000000000000000000000000007"),
            (SHA256, &"AB".repeat(32)),
            (SHA256, &"ab".repeat(31)),
            (CRC64NVME, "00ABCDEF01234567"),
            (CRC64NVME, "abcdef01234567"),
            (CRC64NVME, "+bcdef0123456789"),
            (RECORD_COUNT, "-1"),
            (RECORD_COUNT, "4096 "),
        ] {
            let mut entries = sample().to_user_metadata().entries().clone();
            entries.insert(name.to_owned(), value.to_owned());
            let user = UserMetadata(entries);
            assert!(
                matches!(
                    PackMetadata::from_user_metadata(&user),
                    Err(MetadataError::Malformed { .. })
                ),
                "{name}={value}"
            );
        }
        let mut entries = sample().to_user_metadata().entries().clone();
        entries.remove(RECORD_COUNT);
        assert_eq!(
            PackMetadata::from_user_metadata(&UserMetadata(entries)),
            Err(MetadataError::Missing { name: RECORD_COUNT })
        );
    }

    #[test]
    fn user_metadata_refuses_what_s3_would_mangle() {
        let one = |name: &str, value: &str| {
            UserMetadata::new(BTreeMap::from([(name.to_owned(), value.to_owned())]))
        };
        assert!(matches!(
            one("Upper", "x"),
            Err(MetadataError::BadName { .. })
        ));
        assert!(matches!(one("", "x"), Err(MetadataError::BadName { .. })));
        assert!(matches!(
            one("a_b", "x"),
            Err(MetadataError::BadName { .. })
        ));
        assert!(matches!(one("a", "é"), Err(MetadataError::BadValue { .. })));
        assert!(matches!(
            one("a", "x\ny"),
            Err(MetadataError::BadValue { .. })
        ));
        assert!(matches!(
            one("a", &"x".repeat(2048)),
            Err(MetadataError::TooLarge { bytes: 2049 })
        ));
        assert!(one("a-1", "printable text: ok").is_ok());
    }
}
