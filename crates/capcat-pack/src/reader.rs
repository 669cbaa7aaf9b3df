//! Opening a pack: every check the format defines, before any record is
//! returned.

use std::collections::BTreeSet;
use std::path::Path;

use bytes::Bytes;
use uuid::Uuid;

use crate::descriptor::{self, FORMAT_VERSION, METADATA_KEY, tensor_key};
use crate::digest::Sha256Digest;
use crate::dtype::Dtype;
use crate::error::PackError;
use crate::header;
use crate::info::{PackInfo, RecordLocator};
use crate::record::RecordEntry;
use crate::summary::TensorSummary;
use crate::values::{TensorValues, decode_bools};

/// A pack whose header, descriptor and every payload checksum were
/// verified when it was opened.
#[derive(Clone, Debug)]
pub struct PackReader {
    bytes: Bytes,
    pack_id: Uuid,
    pack_sha256: Sha256Digest,
    records: Vec<RecordEntry>,
    locators: Vec<RecordLocator>,
}

impl PackReader {
    /// Opens and verifies a pack held in memory.
    ///
    /// Verifies: the length prefix and header, the descriptor's digest and
    /// format version, that the safetensors entries match the descriptor
    /// record for record (dtype, shape) and tile the data section, every
    /// payload's SHA-256, and every `BOOL` byte. The whole-pack SHA-256 is
    /// computed ([`PackReader::pack_sha256`]); use
    /// [`PackReader::from_bytes_expecting`] to compare it with the digest the
    /// catalog or the store recorded at seal time.
    pub fn from_bytes(bytes: impl Into<Bytes>) -> Result<Self, PackError> {
        let bytes = bytes.into();
        let pack_sha256 = Sha256Digest::of(&bytes);
        Self::open(bytes, pack_sha256)
    }

    /// Like [`PackReader::from_bytes`], and first checks that the whole pack
    /// hashes to `expected` (the `pack_sha256` of its [`PackInfo`]).
    pub fn from_bytes_expecting(
        bytes: impl Into<Bytes>,
        expected: Sha256Digest,
    ) -> Result<Self, PackError> {
        let bytes = bytes.into();
        let actual = Sha256Digest::of(&bytes);
        if actual != expected {
            return Err(PackError::PackChecksumMismatch { expected, actual });
        }
        Self::open(bytes, actual)
    }

    /// Reads the file at `path` and opens it with [`PackReader::from_bytes`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, PackError> {
        Self::from_bytes(read_file(path.as_ref())?)
    }

    /// Reads the file at `path` and opens it with
    /// [`PackReader::from_bytes_expecting`].
    pub fn from_file_expecting(
        path: impl AsRef<Path>,
        expected: Sha256Digest,
    ) -> Result<Self, PackError> {
        Self::from_bytes_expecting(read_file(path.as_ref())?, expected)
    }

    fn open(bytes: Bytes, pack_sha256: Sha256Digest) -> Result<Self, PackError> {
        let header = header::parse(&bytes)?;
        let envelope = header
            .metadata
            .get(METADATA_KEY)
            .ok_or(PackError::MissingDescriptor)?;
        // Exactly one key, as the format says: anything else in the header
        // would be bytes no digest of ours covers.
        if let Some(extra) = header.metadata.keys().find(|k| *k != METADATA_KEY) {
            return Err(PackError::MalformedHeader {
                key: "__metadata__".to_owned(),
                reason: format!(
                    "unexpected key `{extra}`: a pack's only metadata key is `{METADATA_KEY}`"
                ),
            });
        }
        let descriptor = descriptor::decode(envelope)?;
        let mut entries = header.entries;
        let mut locators = Vec::with_capacity(descriptor.records.len());
        // The writer refuses a second record for one capture identity; so
        // does the reader, or the catalog would get two rows that collapse.
        let mut identities = BTreeSet::new();
        for record in &descriptor.records {
            let identity = &record.metadata.identity;
            if !identities.insert((identity.tenant_id.as_str(), identity.capture_id)) {
                return Err(PackError::DuplicateCapture {
                    tenant_id: identity.tenant_id.clone(),
                    capture_id: identity.capture_id,
                });
            }
            let key = tensor_key(record.index);
            let entry = entries
                .remove(&key)
                .ok_or_else(|| PackError::MissingTensor {
                    index: record.index,
                    key: key.clone(),
                })?;
            let metadata = &record.metadata;
            if entry.dtype != metadata.dtype {
                return Err(PackError::EntryDisagrees {
                    index: record.index,
                    field: "dtype",
                    entry: entry.dtype.to_string(),
                    descriptor: metadata.dtype.to_string(),
                });
            }
            if entry.shape != metadata.shape {
                return Err(PackError::EntryDisagrees {
                    index: record.index,
                    field: "shape",
                    entry: format!("{:?}", entry.shape),
                    descriptor: format!("{:?}", metadata.shape),
                });
            }
            // The header parser checked begin <= end <= data length, so
            // these sums stay within the file's length.
            let locator = RecordLocator {
                index: record.index,
                capture_id: metadata.identity.capture_id,
                offset: header.data_start + entry.begin,
                length: entry.end - entry.begin,
                sha256: record.payload_sha256,
            };
            let payload = slice(&bytes, &locator);
            verify_payload_digest(&locator, payload)?;
            if metadata.dtype == Dtype::BOOL {
                decode_bools(payload, &format!("record {}", record.index))?;
            }
            locators.push(locator);
        }
        if let Some(key) = entries.into_keys().next() {
            return Err(PackError::UnexpectedTensor { key });
        }
        Ok(Self {
            bytes,
            pack_id: descriptor.pack_id,
            pack_sha256,
            records: descriptor.records,
            locators,
        })
    }

    /// The pack's id.
    pub fn pack_id(&self) -> Uuid {
        self.pack_id
    }

    /// The format version (always [`FORMAT_VERSION`]: others are refused).
    pub fn format_version(&self) -> u32 {
        FORMAT_VERSION
    }

    /// SHA-256 of the whole pack file.
    pub fn pack_sha256(&self) -> Sha256Digest {
        self.pack_sha256
    }

    /// The pack file's bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True for a pack with no records.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Every record's metadata and payload digest, in record order.
    pub fn records(&self) -> &[RecordEntry] {
        &self.records
    }

    /// Every record's locator, in record order.
    pub fn locators(&self) -> &[RecordLocator] {
        &self.locators
    }

    /// The [`PackInfo`] sealing this pack reported.
    pub fn info(&self) -> PackInfo {
        PackInfo {
            pack_id: self.pack_id,
            format_version: FORMAT_VERSION,
            pack_sha256: self.pack_sha256,
            byte_length: self.bytes.len() as u64,
            records: self.locators.clone(),
        }
    }

    /// The verified payload bytes of record `index` (no copy).
    pub fn payload(&self, index: usize) -> Result<Bytes, PackError> {
        let locator = self.locator(index)?;
        let start =
            usize::try_from(locator.offset).expect("offsets were checked against the file length");
        let end = start
            + usize::try_from(locator.length)
                .expect("lengths were checked against the file length");
        Ok(self.bytes.slice(start..end))
    }

    /// Record `index` decoded to typed values.
    pub fn values(&self, index: usize) -> Result<TensorValues, PackError> {
        let dtype = self.record(index)?.metadata.dtype;
        TensorValues::from_le_bytes(dtype, &self.payload(index)?, &format!("record {index}"))
    }

    /// The [`TensorSummary`] of record `index`.
    pub fn summary(&self, index: usize) -> Result<TensorSummary, PackError> {
        Ok(TensorSummary::of_values(&self.values(index)?))
    }

    /// Record `index`'s metadata and digest.
    pub fn record(&self, index: usize) -> Result<&RecordEntry, PackError> {
        self.records
            .get(index)
            .ok_or(PackError::RecordIndexOutOfRange {
                index,
                count: self.records.len(),
            })
    }

    /// Record `index`'s locator.
    pub fn locator(&self, index: usize) -> Result<&RecordLocator, PackError> {
        self.locators
            .get(index)
            .ok_or(PackError::RecordIndexOutOfRange {
                index,
                count: self.locators.len(),
            })
    }
}

/// The payload a locator names. Only called with locators built from a
/// header whose offsets were checked against `bytes`.
fn slice<'a>(bytes: &'a [u8], locator: &RecordLocator) -> &'a [u8] {
    let start =
        usize::try_from(locator.offset).expect("offset was checked against the file length");
    let end = start
        + usize::try_from(locator.length).expect("length was checked against the file length");
    &bytes[start..end]
}

pub(crate) fn verify_payload_digest(
    locator: &RecordLocator,
    payload: &[u8],
) -> Result<(), PackError> {
    let actual = Sha256Digest::of(payload);
    if actual == locator.sha256 {
        Ok(())
    } else {
        Err(PackError::PayloadChecksumMismatch {
            index: locator.index,
            capture_id: locator.capture_id,
            expected: locator.sha256,
            actual,
        })
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, PackError> {
    std::fs::read(path).map_err(|source| PackError::Io {
        path: path.to_path_buf(),
        source,
    })
}
