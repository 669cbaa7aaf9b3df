//! Reading one capture's payload back: its descriptor's locator, one range
//! read of the pack object, and the length and SHA-256 checked before the
//! bytes are handed out. The `capcat hydrate` command and the Python
//! package's `Reader.hydrate` both read through here, so a payload never
//! reaches a user unverified.

use bytes::Bytes;
use capcat_pack::{PackError, RecordLocator, Sha256Digest, verify_hydrated};
use capcat_proto::CaptureDescriptor;
use capcat_s3::{ByteRange, CatalogPrefix, PackKey, PackStore, StoreError};
use uuid::Uuid;

/// Why a capture's payload could not be read back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HydrateError {
    /// The catalog's `payload_sha256` is not 64 hex digits: the row was not
    /// written by a Capcat indexer, and nothing read could be checked.
    #[error("capture {capture_id}: the catalog's payload_sha256 {value:?} is not a SHA-256")]
    BadDigest {
        /// The capture.
        capture_id: Uuid,
        /// The value found.
        value: String,
    },
    /// The catalog's locator names a range past the end of `u64`.
    #[error("capture {capture_id}: the locator's range {offset}+{length} overflows")]
    BadRange {
        /// The capture.
        capture_id: Uuid,
        /// The payload's offset.
        offset: u64,
        /// The payload's length.
        length: u64,
    },
    /// The store did not return the range.
    #[error("capture {capture_id}: reading pack {pack_id}: {source}")]
    Store {
        /// The capture.
        capture_id: Uuid,
        /// The pack it lives in.
        pack_id: Uuid,
        /// The store's error.
        source: StoreError,
    },
    /// The bytes read are not the capture's (wrong length or digest).
    #[error("capture {capture_id}: {source}")]
    Verify {
        /// The capture.
        capture_id: Uuid,
        /// What did not match.
        source: PackError,
    },
}

/// The payload of `descriptor`, read from the pack object under `prefix`
/// in `store` and verified against the descriptor's length and SHA-256.
///
/// # Errors
/// A malformed locator, a failed read, or bytes that do not verify.
pub async fn hydrate<S: PackStore>(
    store: &S,
    prefix: &CatalogPrefix,
    descriptor: &CaptureDescriptor,
) -> Result<Bytes, HydrateError> {
    let capture_id = descriptor.capture_id;
    let found = &descriptor.locator;
    let digest = hex::decode(&found.payload_sha256)
        .ok()
        .and_then(|v| <[u8; 32]>::try_from(v).ok())
        .ok_or_else(|| HydrateError::BadDigest {
            capture_id,
            value: found.payload_sha256.clone(),
        })?;
    let locator = RecordLocator {
        index: 0,
        capture_id,
        offset: found.payload_offset,
        length: found.payload_length,
        sha256: Sha256Digest(digest),
    };
    let bytes = if locator.length == 0 {
        // An empty tensor has no range to read; the digest check below
        // still holds it to the SHA-256 of nothing.
        Bytes::new()
    } else {
        let bad_range = || HydrateError::BadRange {
            capture_id,
            offset: locator.offset,
            length: locator.length,
        };
        let end = locator
            .offset
            .checked_add(locator.length)
            .ok_or_else(bad_range)?;
        let range = ByteRange::new(locator.offset, end).map_err(|_| bad_range())?;
        let key = PackKey::new(prefix.clone(), found.pack_id).object_key();
        store
            .get_range(&key, range)
            .await
            .map_err(|source| HydrateError::Store {
                capture_id,
                pack_id: found.pack_id,
                source,
            })?
    };
    verify_hydrated(&locator, bytes).map_err(|source| HydrateError::Verify { capture_id, source })
}
