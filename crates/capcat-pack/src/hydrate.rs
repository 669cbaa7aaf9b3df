//! Hydration: fetching one record's payload with a single range read and
//! verifying it against its locator.
//!
//! The range read is the caller's: a closure, a file, bytes in memory, or
//! (in capcat-s3) an S3 ranged GET. Nothing here depends on how bytes
//! travel, so the store adapters stay free of format decisions.

use std::future::Future;
use std::io::{Read, Seek, SeekFrom};

use bytes::Bytes;

use crate::dtype::Dtype;
use crate::error::PackError;
use crate::info::RecordLocator;
use crate::reader::verify_payload_digest;
use crate::values::TensorValues;

/// The boxed error a range read may fail with.
pub type RangeReadError = Box<dyn std::error::Error + Send + Sync>;

/// Something that can return `length` bytes starting at `offset` of a pack.
pub trait RangeRead {
    /// Reads exactly the bytes `[offset, offset + length)`. Returning fewer
    /// or more is reported by [`hydrate`] as [`PackError::RangeReadLength`].
    fn read_range(&mut self, offset: u64, length: u64) -> Result<Bytes, RangeReadError>;
}

/// Any `FnMut(offset, length) -> Result<Bytes, E>` is a range read.
impl<F, E> RangeRead for F
where
    F: FnMut(u64, u64) -> Result<Bytes, E>,
    E: Into<RangeReadError>,
{
    fn read_range(&mut self, offset: u64, length: u64) -> Result<Bytes, RangeReadError> {
        self(offset, length).map_err(Into::into)
    }
}

/// A whole pack held in memory, read by range.
#[derive(Clone, Debug)]
pub struct InMemory(pub Bytes);

impl RangeRead for InMemory {
    fn read_range(&mut self, offset: u64, length: u64) -> Result<Bytes, RangeReadError> {
        let start = usize::try_from(offset)?;
        let end = offset
            .checked_add(length)
            .and_then(|end| usize::try_from(end).ok())
            .filter(|&end| end <= self.0.len())
            .ok_or_else(|| {
                format!(
                    "range {offset}+{length} is past the end of {} bytes",
                    self.0.len()
                )
            })?;
        if start > end {
            return Err("range starts past its end".into());
        }
        Ok(self.0.slice(start..end))
    }
}

/// A pack file read by seek and read.
#[derive(Debug)]
pub struct FileRange(pub std::fs::File);

impl RangeRead for FileRange {
    fn read_range(&mut self, offset: u64, length: u64) -> Result<Bytes, RangeReadError> {
        self.0.seek(SeekFrom::Start(offset))?;
        let mut buffer = vec![0u8; usize::try_from(length)?];
        self.0.read_exact(&mut buffer)?;
        Ok(Bytes::from(buffer))
    }
}

/// Fetches the payload `locator` names with one range read and verifies its
/// length and SHA-256.
///
/// An empty payload (a zero-sized tensor) is not read at all: an HTTP range
/// cannot express zero bytes, so no store is asked to. Its digest is still
/// checked (it must be the digest of no bytes).
pub fn hydrate<R: RangeRead + ?Sized>(
    source: &mut R,
    locator: &RecordLocator,
) -> Result<Bytes, PackError> {
    if locator.length == 0 {
        return verify_hydrated(locator, Bytes::new());
    }
    let bytes = source
        .read_range(locator.offset, locator.length)
        .map_err(|source| PackError::RangeRead {
            offset: locator.offset,
            length: locator.length,
            source,
        })?;
    verify_hydrated(locator, bytes)
}

/// [`hydrate`] for an asynchronous range read (an S3 ranged GET): `read`
/// is called once with `(offset, length)`, or not at all for an empty
/// payload. No runtime is assumed.
pub async fn hydrate_async<F, Fut, E>(locator: &RecordLocator, read: F) -> Result<Bytes, PackError>
where
    F: FnOnce(u64, u64) -> Fut,
    Fut: Future<Output = Result<Bytes, E>>,
    E: Into<RangeReadError>,
{
    if locator.length == 0 {
        return verify_hydrated(locator, Bytes::new());
    }
    let bytes = read(locator.offset, locator.length)
        .await
        .map_err(|e| PackError::RangeRead {
            offset: locator.offset,
            length: locator.length,
            source: e.into(),
        })?;
    verify_hydrated(locator, bytes)
}

/// Verifies bytes fetched for `locator` by any means: their length, then
/// their SHA-256. Returns them unchanged when both match.
pub fn verify_hydrated(locator: &RecordLocator, bytes: Bytes) -> Result<Bytes, PackError> {
    if bytes.len() as u64 != locator.length {
        return Err(PackError::RangeReadLength {
            offset: locator.offset,
            expected: locator.length,
            actual: bytes.len() as u64,
        });
    }
    verify_payload_digest(locator, &bytes)?;
    Ok(bytes)
}

/// Decodes a hydrated payload to typed values, checking it against the
/// dtype and shape its catalog row records.
pub fn decode_payload(
    dtype: Dtype,
    shape: &[u64],
    payload: &[u8],
) -> Result<TensorValues, PackError> {
    let expected = dtype.byte_length(shape);
    if expected != Some(payload.len() as u64) {
        return Err(PackError::ShapeMismatch {
            context: "hydrated payload".to_owned(),
            dtype,
            shape: shape.to_vec(),
            expected,
            actual: payload.len() as u64,
        });
    }
    TensorValues::from_le_bytes(dtype, payload, "hydrated payload")
}
