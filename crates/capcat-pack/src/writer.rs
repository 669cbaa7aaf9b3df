//! Building a pack: append records, then seal.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use uuid::Uuid;

use crate::descriptor::{self, FORMAT_VERSION, METADATA_KEY, tensor_key};
use crate::digest::Sha256Digest;
use crate::dtype::Dtype;
use crate::error::PackError;
use crate::header::LENGTH_PREFIX;
use crate::info::{PackInfo, RecordLocator, SealedPack};
use crate::record::RecordMetadata;
use crate::values::{TensorValues, decode_bools};

/// The most records any pack may hold, whatever its limits say: record keys
/// carry eight decimal digits, and the descriptor of a million records
/// already approaches the 100 MB header limit.
pub const MAX_RECORDS_CEILING: usize = 1_000_000;

/// How much one pack may hold. Appends beyond either limit are refused with
/// [`PackError::TooManyRecords`] or [`PackError::TooManyBytes`]; the caller
/// seals and starts a new pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PackLimits {
    /// Most records per pack, 1..=[`MAX_RECORDS_CEILING`].
    pub max_records: usize,
    /// Most payload bytes per pack (sum of payload lengths), at least 1.
    pub max_payload_bytes: u64,
}

impl PackLimits {
    /// Validated limits.
    pub fn new(max_records: usize, max_payload_bytes: u64) -> Result<Self, PackError> {
        if max_records == 0 || max_records > MAX_RECORDS_CEILING {
            return Err(PackError::InvalidLimits {
                reason: format!(
                    "max_records is {max_records}; it must be in 1..={MAX_RECORDS_CEILING}"
                ),
            });
        }
        if max_payload_bytes == 0 {
            return Err(PackError::InvalidLimits {
                reason: "max_payload_bytes must be at least 1".to_owned(),
            });
        }
        Ok(Self {
            max_records,
            max_payload_bytes,
        })
    }
}

impl Default for PackLimits {
    /// 65,536 records and 1 GiB of payload.
    fn default() -> Self {
        Self {
            max_records: 65_536,
            max_payload_bytes: 1 << 30,
        }
    }
}

#[derive(Debug)]
struct PendingRecord {
    metadata: RecordMetadata,
    payload: Bytes,
    sha256: Sha256Digest,
}

/// Accumulates records for one pack. Every append is validated, so a pack
/// that seals holds only well-formed records.
#[derive(Debug)]
pub struct PackWriter {
    pack_id: Uuid,
    limits: PackLimits,
    records: Vec<PendingRecord>,
    payload_bytes: u64,
    identities: BTreeSet<(String, Uuid)>,
}

/// A payload as the `safetensors` serializer sees it: borrowed bytes.
struct PayloadView<'a> {
    dtype: safetensors::Dtype,
    shape: Vec<usize>,
    data: &'a [u8],
}

impl safetensors::View for PayloadView<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

impl PackWriter {
    /// An empty pack named `pack_id`.
    pub fn new(pack_id: Uuid, limits: PackLimits) -> Self {
        Self {
            pack_id,
            limits,
            records: Vec::new(),
            payload_bytes: 0,
            identities: BTreeSet::new(),
        }
    }

    /// The pack's id.
    pub fn pack_id(&self) -> Uuid {
        self.pack_id
    }

    /// The limits this writer enforces.
    pub fn limits(&self) -> PackLimits {
        self.limits
    }

    /// Records appended so far.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when nothing was appended.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Payload bytes appended so far.
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }

    /// Appends one record whose payload is the little-endian bytes of
    /// `metadata.dtype` in `metadata.shape`, and returns its index.
    ///
    /// Refused, leaving the writer unchanged: a length that disagrees with
    /// dtype and shape, a `BOOL` byte other than 0/1, a capture identity
    /// already in the pack, or an append past the limits.
    pub fn append(
        &mut self,
        metadata: RecordMetadata,
        payload: impl Into<Bytes>,
    ) -> Result<usize, PackError> {
        let payload = payload.into();
        let index = self.records.len();
        let context = || format!("record {index} (capture {})", metadata.identity.capture_id);
        let actual = payload.len() as u64;
        let expected = metadata.dtype.byte_length(&metadata.shape);
        if expected != Some(actual) || shape_to_usize(&metadata.shape).is_none() {
            return Err(PackError::ShapeMismatch {
                context: context(),
                dtype: metadata.dtype,
                shape: metadata.shape.clone(),
                expected,
                actual,
            });
        }
        if metadata.dtype == Dtype::BOOL {
            decode_bools(&payload, &context())?;
        }
        if self.records.len() >= self.limits.max_records {
            return Err(PackError::TooManyRecords {
                limit: self.limits.max_records,
            });
        }
        let attempted = self.payload_bytes.saturating_add(actual);
        if attempted > self.limits.max_payload_bytes {
            return Err(PackError::TooManyBytes {
                limit: self.limits.max_payload_bytes,
                attempted,
            });
        }
        let identity = (
            metadata.identity.tenant_id.clone(),
            metadata.identity.capture_id,
        );
        if self.identities.contains(&identity) {
            return Err(PackError::DuplicateCapture {
                tenant_id: identity.0,
                capture_id: identity.1,
            });
        }
        self.identities.insert(identity);
        self.payload_bytes = attempted;
        let sha256 = Sha256Digest::of(&payload);
        self.records.push(PendingRecord {
            metadata,
            payload,
            sha256,
        });
        Ok(index)
    }

    /// Appends typed values; `metadata.dtype` must be their dtype.
    pub fn append_values(
        &mut self,
        metadata: RecordMetadata,
        values: &TensorValues,
    ) -> Result<usize, PackError> {
        if metadata.dtype != values.dtype() {
            return Err(PackError::DtypeMismatch {
                context: format!(
                    "record {} (capture {})",
                    self.records.len(),
                    metadata.identity.capture_id
                ),
                recorded: metadata.dtype,
                given: values.dtype(),
            });
        }
        self.append(metadata, values.to_le_bytes())
    }

    /// Seals the pack: writes the safetensors file with the descriptor in its
    /// header, and computes the whole-pack SHA-256 and every locator.
    pub fn seal(self) -> Result<SealedPack, PackError> {
        let described: Vec<(&RecordMetadata, Sha256Digest)> = self
            .records
            .iter()
            .map(|r| (&r.metadata, r.sha256))
            .collect();
        let envelope = descriptor::encode(self.pack_id, &described)?;
        let metadata = HashMap::from([(METADATA_KEY.to_owned(), envelope)]);
        let views: Vec<(String, PayloadView<'_>)> = self
            .records
            .iter()
            .enumerate()
            .map(|(index, r)| {
                let view = PayloadView {
                    dtype: r.metadata.dtype.to_safetensors(),
                    shape: shape_to_usize(&r.metadata.shape)
                        .expect("append refused shapes that do not fit usize"),
                    data: &r.payload,
                };
                (tensor_key(index), view)
            })
            .collect();
        let buffer =
            safetensors::serialize(views, Some(metadata)).map_err(|e| PackError::Safetensors {
                reason: e.to_string(),
            })?;
        let header_len = buffer
            .get(..8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .expect("safetensors writes an 8-byte length prefix");
        let locators = self.layout(LENGTH_PREFIX + header_len);
        let info = PackInfo {
            pack_id: self.pack_id,
            format_version: FORMAT_VERSION,
            pack_sha256: Sha256Digest::of(&buffer),
            byte_length: buffer.len() as u64,
            records: locators,
        };
        Ok(SealedPack {
            bytes: Bytes::from(buffer),
            info,
        })
    }

    /// The file offset of every payload. safetensors orders the data section
    /// by descending dtype alignment, then by key; record keys sort in record
    /// order. The round-trip tests check these offsets against the reader's.
    fn layout(&self, data_start: u64) -> Vec<RecordLocator> {
        let mut order: Vec<usize> = (0..self.records.len()).collect();
        order.sort_by_key(|&i| (Reverse(self.records[i].metadata.dtype.to_safetensors()), i));
        let mut offsets = vec![0u64; self.records.len()];
        let mut next = data_start;
        for i in order {
            offsets[i] = next;
            next += self.records[i].payload.len() as u64;
        }
        self.records
            .iter()
            .zip(offsets)
            .enumerate()
            .map(|(index, (r, offset))| RecordLocator {
                index,
                capture_id: r.metadata.identity.capture_id,
                offset,
                length: r.payload.len() as u64,
                sha256: r.sha256,
            })
            .collect()
    }
}

fn shape_to_usize(shape: &[u64]) -> Option<Vec<usize>> {
    shape.iter().map(|&d| usize::try_from(d).ok()).collect()
}
