//! Building a pack: append records, then seal.

use bytes::Bytes;
use uuid::Uuid;

use crate::dtype::Dtype;
use crate::error::PackError;
use crate::info::SealedPack;
use crate::parallel;
use crate::record::{IdentitySet, RecordMetadata};
use crate::seal::{self, PendingRecord};
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
    /// The payload bytes are hashed with SHA-256 once and with the (much
    /// cheaper) CRC once; the header is hashed for the pack digest. A pack
    /// of 2 MiB of payload or more is hashed on up to four threads, the
    /// caller's included (one per MiB of payload), while the caller's
    /// thread writes the file; the threads end before `seal` returns, and
    /// the file is the same byte for byte whatever their number.
    pub fn seal(self) -> Result<SealedPack, PackError> {
        let threads = parallel::threads_for(self.payload_bytes);
        self.seal_on(threads)
    }

    /// [`PackWriter::seal`], copying and hashing the payloads in `threads`
    /// runs.
    pub(crate) fn seal_on(self, threads: usize) -> Result<SealedPack, PackError> {
        let payload_total =
            usize::try_from(self.payload_bytes).map_err(|_| PackError::TooManyBytes {
                limit: self.limits.max_payload_bytes,
                attempted: self.payload_bytes,
            })?;
        seal::seal(self.pack_id, self.records, payload_total, threads)
    }
}

/// safetensors readers hold dimensions as `usize`; a pack whose shape does
/// not fit is refused on append.
fn shape_fits_usize(shape: &[u64]) -> bool {
    shape.iter().all(|&d| usize::try_from(d).is_ok())
}
