//! The [`PackStore`] trait and the values it exchanges.

use std::future::Future;

use bytes::Bytes;
use sha2::{Digest as _, Sha256};

use crate::error::StoreError;
use crate::key::{CatalogPrefix, ObjectKey, PackKey};
use crate::metadata::{MetadataError, PackMetadata, UserMetadata};

/// A half-open byte range `start..end` of an object, never empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ByteRange {
    start: u64,
    end: u64,
}

/// A refused byte range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RangeError {
    /// `start` is not below `end`: the range would be empty or reversed.
    #[error("byte range {start}..{end} is empty or reversed")]
    Empty {
        /// The first byte.
        start: u64,
        /// One past the last byte.
        end: u64,
    },
}

impl ByteRange {
    /// The bytes `start..end`.
    ///
    /// # Errors
    /// [`RangeError::Empty`] when `start >= end`.
    pub fn new(start: u64, end: u64) -> Result<Self, RangeError> {
        if start >= end {
            return Err(RangeError::Empty { start, end });
        }
        Ok(Self { start, end })
    }

    /// The first byte.
    #[must_use]
    pub fn start(&self) -> u64 {
        self.start
    }

    /// One past the last byte.
    #[must_use]
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The number of bytes asked for (at least 1).
    #[must_use]
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Always false: a range is never empty. Present for clippy's
    /// `len_without_is_empty`.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The HTTP `Range` header value (`bytes=first-last`, inclusive).
    pub(crate) fn http_header(&self) -> String {
        format!("bytes={}-{}", self.start, self.end - 1)
    }
}

/// What a successful PUT reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PutReceipt {
    /// The ETag the store gave the object, when it gives one.
    pub etag: Option<String>,
}

/// An object's size and metadata, as HEAD reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectHead {
    /// The object's size in bytes.
    pub size: u64,
    /// The user metadata stored with it (empty for objects written without).
    pub metadata: UserMetadata,
    /// The whole-object checksum the store verified the object against,
    /// when it reports one.
    pub checksum: Option<ObjectChecksum>,
}

/// A whole-object checksum a store holds for an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ObjectChecksum {
    /// CRC-64/NVME (`x-amz-checksum-crc64nvme`), what every PUT declares.
    Crc64Nvme(u64),
    /// SHA-256 (`x-amz-checksum-sha256`), what PUTs declared before the pack
    /// format's version 2; such objects are still verified by it on read.
    Sha256([u8; 32]),
}

impl ObjectChecksum {
    /// Checks `bytes` against this checksum; on a mismatch, returns a
    /// sentence naming both values.
    pub(crate) fn verify(&self, bytes: &[u8]) -> Result<(), String> {
        match self {
            Self::Crc64Nvme(expected) => {
                let actual = crc64nvme(bytes);
                (actual == *expected).then_some(()).ok_or_else(|| {
                    format!("crc64nvme {expected:016x} but the bytes give {actual:016x}")
                })
            }
            Self::Sha256(expected) => {
                let actual = sha256(bytes);
                (actual == *expected).then_some(()).ok_or_else(|| {
                    format!(
                        "sha256 {} but the bytes hash to {}",
                        hex::encode(expected),
                        hex::encode(actual)
                    )
                })
            }
        }
    }
}

impl ObjectHead {
    /// Reads the pack fields of the metadata.
    ///
    /// # Errors
    /// [`MetadataError`]: the object carries no (or malformed) pack metadata.
    pub fn pack_metadata(&self) -> Result<PackMetadata, MetadataError> {
        PackMetadata::from_user_metadata(&self.metadata)
    }
}

/// The opaque position of a listing: pass it back to get the next page.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ListToken(pub(crate) String);

/// One listed object.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListedObject {
    /// The key exactly as the store lists it (possibly one this crate would
    /// refuse as an [`ObjectKey`]: foreign objects can be named anything).
    pub key: String,
    /// The object's size in bytes.
    pub size: u64,
}

/// One page of a listing, in key order.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListPage {
    /// The objects of this page.
    pub objects: Vec<ListedObject>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<ListToken>,
}

/// An object store holding immutable packs.
///
/// Every method is one request (S3) or one file operation (local), with the
/// store's own timeouts and retries; errors carry an
/// [`ErrorClass`](crate::ErrorClass) that is the same for every store.
/// Writes are whole-object and atomic: a reader sees the old object or the
/// new one, never a mix. Nothing here is conditional: packs are named by
/// UUID and never rewritten with other content.
pub trait PackStore: Send + Sync {
    /// Stores `body` under `key` with `metadata`, declaring its CRC-64/NVME
    /// (the S3 full-object checksum `x-amz-checksum-crc64nvme`). The store
    /// verifies the body against `crc64nvme` and refuses it with
    /// [`StoreError::ChecksumMismatch`] when they differ. A refused PUT never
    /// leaves an object that reads back as a valid pack (s3s-fs 0.14.1 may
    /// leave the refused bytes under the key without their metadata, which
    /// the reconciler counts as a foreign object).
    fn put(
        &self,
        key: &ObjectKey,
        body: Bytes,
        crc64nvme: u64,
        metadata: &UserMetadata,
    ) -> impl Future<Output = Result<PutReceipt, StoreError>> + Send;

    /// Reads the size and the metadata of `key`.
    fn head(&self, key: &ObjectKey) -> impl Future<Output = Result<ObjectHead, StoreError>> + Send;

    /// Reads the whole object, verified against the checksum the store holds
    /// for it when it holds one.
    fn get(&self, key: &ObjectKey) -> impl Future<Output = Result<Bytes, StoreError>> + Send;

    /// Reads `range` of the object. A range running past the end is cut at
    /// the end; one starting at or past the end is an error of class
    /// [`Other`](crate::ErrorClass::Other).
    fn get_range(
        &self,
        key: &ObjectKey,
        range: ByteRange,
    ) -> impl Future<Output = Result<Bytes, StoreError>> + Send;

    /// Lists at most `max_keys` (1 to 1000) keys starting with `prefix`, in
    /// key order, from `token` (the `next` of the previous page) or from the
    /// start.
    fn list_page(
        &self,
        prefix: &str,
        token: Option<&ListToken>,
        max_keys: u16,
    ) -> impl Future<Output = Result<ListPage, StoreError>> + Send;

    /// Deletes `key`. Deleting a missing key succeeds, as in S3.
    fn delete(&self, key: &ObjectKey) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Uploads a pack under `v1/<prefix>/<pack_id>.pack` with its metadata,
    /// declaring `metadata.crc64nvme` as the checksum, so bytes that changed
    /// since the pack was sealed are refused by the store. Metadata without
    /// a CRC (a version-1 pack's, as stored before) declares the CRC of
    /// `pack` itself and stores none, so the object keeps being checked
    /// against its SHA-256 metadata.
    fn put_pack(
        &self,
        prefix: &CatalogPrefix,
        pack: Bytes,
        metadata: &PackMetadata,
    ) -> impl Future<Output = Result<PutReceipt, StoreError>> + Send {
        let key = PackKey::new(prefix.clone(), metadata.pack_id).object_key();
        let user_metadata = metadata.to_user_metadata();
        let crc = metadata.crc64nvme.unwrap_or_else(|| crc64nvme(&pack));
        async move { self.put(&key, pack, crc, &user_metadata).await }
    }
}

/// The SHA-256 of `bytes`.
#[must_use]
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The CRC-64/NVME of `bytes`: polynomial 0xad93d23594c93659, reflected,
/// initial value and final XOR all ones (the algorithm of
/// `x-amz-checksum-crc64nvme`).
#[must_use]
pub fn crc64nvme(bytes: &[u8]) -> u64 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, bytes)
}

/// Clamps a page size to what S3 accepts (1 to 1000).
pub(crate) fn clamp_page_size(max_keys: u16) -> u16 {
    max_keys.clamp(1, 1000)
}
