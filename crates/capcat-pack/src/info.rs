//! What sealing a pack reports: its identity, digest and one locator per
//! record.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::digest::Sha256Digest;

/// Where one record's payload lives in its pack, and what it must hash to.
///
/// This is what the catalog stores (`payload_offset`, `payload_length`,
/// `payload_sha256`) and what [`crate::hydrate()`] needs to fetch one payload
/// with a single range read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RecordLocator {
    /// The record's position in the pack (descriptor order, 0-based).
    pub index: usize,
    /// The record's capture id, to pair a hydrated payload with its row.
    pub capture_id: Uuid,
    /// Offset of the first payload byte from the start of the pack file.
    pub offset: u64,
    /// Payload length in bytes (0 for an empty tensor).
    pub length: u64,
    /// SHA-256 of the payload bytes.
    pub sha256: Sha256Digest,
}

/// A sealed pack's identity and layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PackInfo {
    /// The pack's id (also its object name in the store).
    pub pack_id: Uuid,
    /// The format version the pack was written in.
    pub format_version: u32,
    /// The pack digest: SHA-256 of the header with its own 64 digits read as
    /// `'0'` (docs/pack-format.md, section 4). It commits to every byte of
    /// the file, the payloads through their digests in the descriptor, and
    /// the pack carries it at a fixed offset. For a version-1 pack (read,
    /// never written) it is the SHA-256 of the whole file, as version 1
    /// defined it.
    pub pack_sha256: Sha256Digest,
    /// CRC-64/NVME of the whole pack file: the full-object checksum the
    /// object store verifies on upload.
    pub crc64nvme: u64,
    /// Length of the whole pack file in bytes.
    pub byte_length: u64,
    /// One locator per record, in record order.
    pub records: Vec<RecordLocator>,
}

/// A sealed pack: its bytes and what describes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedPack {
    /// The pack file.
    pub bytes: bytes::Bytes,
    /// Its identity, digest and locators.
    pub info: PackInfo,
}
