//! Building a pack: append records, then seal.

use std::cmp::Reverse;

use bytes::Bytes;
use uuid::Uuid;

use crate::descriptor::FORMAT_VERSION;
use crate::digest::{Crc64Nvme, Sha256Digest};
use crate::dtype::Dtype;
use crate::encode::{self, EncodedRecord};
use crate::error::PackError;
use crate::header::LENGTH_PREFIX;
use crate::info::{PackInfo, RecordLocator, SealedPack};
use crate::record::{IdentitySet, RecordMetadata};
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
}

/// Accumulates records for one pack. Every append is validated, so a pack
/// that seals holds only well-formed records.
#[derive(Debug)]
pub struct PackWriter {
    pack_id: Uuid,
    limits: PackLimits,
    records: Vec<PendingRecord>,
    payload_bytes: u64,
    identities: IdentitySet,
}

impl PackWriter {
    /// An empty pack named `pack_id`.
    pub fn new(pack_id: Uuid, limits: PackLimits) -> Self {
        Self {
            pack_id,
            limits,
            records: Vec::new(),
            payload_bytes: 0,
            identities: IdentitySet::default(),
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
        if expected != Some(actual) || !shape_fits_usize(&metadata.shape) {
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
        let records = &self.records;
        let identity = &metadata.identity;
        if !self
            .identities
            .insert(&identity.tenant_id, identity.capture_id, index, |i| {
                &records[i].metadata.identity.tenant_id
            })
        {
            return Err(PackError::DuplicateCapture {
                tenant_id: identity.tenant_id.clone(),
                capture_id: identity.capture_id,
            });
        }
        self.payload_bytes = attempted;
        self.records.push(PendingRecord { metadata, payload });
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

    /// Seals the pack: writes the safetensors file with the descriptor and
    /// the pack digest in its header, and computes every payload's SHA-256,
    /// the whole-file CRC-64/NVME and every locator.
    ///
    /// Each payload is hashed right after it is copied into the file, while
    /// its bytes are in cache, so the copy and the SHA-256 read the source
    /// once. The payload bytes are hashed with SHA-256 once; the header is
    /// hashed for the pack digest, and the whole file once more with the
    /// (much cheaper) CRC.
    pub fn seal(self) -> Result<SealedPack, PackError> {
        // safetensors orders the data section by descending dtype
        // alignment, then by key; record keys sort in record order. The
        // round-trip tests check that the safetensors crate reads these
        // offsets back.
        let mut order: Vec<usize> = (0..self.records.len()).collect();
        order.sort_by_key(|&i| (Reverse(self.records[i].metadata.dtype.to_safetensors()), i));
        let mut begins = vec![0u64; self.records.len()];
        let mut next = 0u64;
        for &i in &order {
            begins[i] = next;
            next += self.records[i].payload.len() as u64;
        }
        let encoded: Vec<EncodedRecord<'_>> = self
            .records
            .iter()
            .zip(&begins)
            .map(|(r, &begin)| EncodedRecord {
                metadata: &r.metadata,
                begin,
                end: begin + r.payload.len() as u64,
            })
            .collect();
        // One allocation for the whole file when the estimate holds (it is
        // generous for metadata that needs no escaping); the header writer
        // grows the buffer when it does not.
        let header_estimate = 256
            + self
                .records
                .iter()
                .map(|r| 640 + 2 * metadata_text_len(&r.metadata))
                .sum::<usize>();
        let payload_total =
            usize::try_from(self.payload_bytes).map_err(|_| PackError::TooManyBytes {
                limit: self.limits.max_payload_bytes,
                attempted: self.payload_bytes,
            })?;
        let mut bytes = Vec::with_capacity(header_estimate + payload_total);
        let skeleton = encode::write_skeleton(&mut bytes, self.pack_id, &encoded, &order)?;
        let data_start = bytes.len();
        let mut digests = vec![Sha256Digest([0; 32]); self.records.len()];
        // The data section's CRC is taken payload by payload while each is
        // in cache, and joined to the header's once the header is final.
        let mut data_crc = Crc64Nvme::new();
        for &i in &order {
            let start = bytes.len();
            bytes.extend_from_slice(&self.records[i].payload);
            digests[i] = Sha256Digest::of(&bytes[start..]);
            data_crc.update(&bytes[start..]);
        }
        let head = &mut bytes[..data_start];
        for (slot, digest) in skeleton.payload_slots.iter().zip(&digests) {
            encode::fill_slot(head, *slot, digest);
        }
        let pack_sha256 = encode::seal_header(head);
        let crc64nvme = data_crc.finish_after(head);
        let data_start = LENGTH_PREFIX + skeleton.header_len;
        let records = self
            .records
            .iter()
            .zip(begins.iter().zip(digests))
            .enumerate()
            .map(|(index, (r, (&begin, sha256)))| RecordLocator {
                index,
                capture_id: r.metadata.identity.capture_id,
                offset: data_start + begin,
                length: r.payload.len() as u64,
                sha256,
            })
            .collect();
        let info = PackInfo {
            pack_id: self.pack_id,
            format_version: FORMAT_VERSION,
            pack_sha256,
            crc64nvme,
            byte_length: bytes.len() as u64,
            records,
        };
        Ok(SealedPack {
            bytes: Bytes::from(bytes),
            info,
        })
    }
}

/// Bytes of free text in `metadata`, for sizing the header buffer.
fn metadata_text_len(metadata: &RecordMetadata) -> usize {
    let id = &metadata.identity;
    id.tenant_id.len()
        + id.experiment_id.len()
        + id.run_id.len()
        + metadata.model.len()
        + metadata.module_path.len()
        + metadata.hook.len()
        + metadata.tensor_name.len()
        + metadata
            .tags
            .iter()
            .map(|(k, v)| k.len() + v.len() + 8)
            .sum::<usize>()
        + 24 * metadata.shape.len()
}

/// safetensors readers hold dimensions as `usize`; a pack whose shape does
/// not fit is refused on append.
fn shape_fits_usize(shape: &[u64]) -> bool {
    shape.iter().all(|&d| usize::try_from(d).is_ok())
}
