//! The one error type of the pack format.

use uuid::Uuid;

use crate::digest::Sha256Digest;
use crate::dtype::Dtype;

/// Everything that can go wrong writing, reading or hydrating a pack.
///
/// Every malformed input maps to a variant here; the reader never panics on
/// bytes it did not write. Variants carry what an operator needs to find the
/// bad record: its index, capture id, the offsets and digests involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PackError {
    /// The input ended before a part the format requires.
    #[error("truncated pack: {what} needs {needed} bytes but only {available} are present")]
    Truncated {
        /// The part that could not be read.
        what: &'static str,
        /// Bytes the part needs.
        needed: u64,
        /// Bytes available.
        available: u64,
    },
    /// The 8-byte header length points past the end of the input.
    #[error("header length {header_len} points past the end of a {file_len}-byte pack")]
    HeaderLengthPastEnd {
        /// The header length the first 8 bytes declare.
        header_len: u64,
        /// The length of the whole input.
        file_len: u64,
    },
    /// The header is larger than the format allows (on read), or sealing
    /// would write one (too many records or too much metadata for one pack;
    /// seal smaller packs).
    #[error("header of {header_len} bytes exceeds the {limit}-byte limit")]
    HeaderTooLarge {
        /// The header length.
        header_len: u64,
        /// The limit ([`crate::MAX_HEADER_BYTES`]).
        limit: u64,
    },
    /// The header is not UTF-8 JSON, or not a JSON object.
    #[error("header is not a JSON object: {reason}")]
    HeaderNotJson {
        /// What the parser said.
        reason: String,
    },
    /// The header is JSON but its shape is not a safetensors header (an
    /// entry without `dtype`, `shape` or `data_offsets`, a non-string
    /// metadata value, ...).
    #[error("malformed header entry `{key}`: {reason}")]
    MalformedHeader {
        /// The header key of the bad entry.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The header carries no Capcat descriptor (`__metadata__.capcat`): the
    /// file may be a safetensors file, but it is not a pack.
    #[error("not a Capcat pack: the header has no `__metadata__.capcat` descriptor")]
    MissingDescriptor,
    /// The descriptor (or a version-1 pack's envelope) is not the
    /// documented JSON.
    #[error("malformed descriptor: {reason}")]
    MalformedDescriptor {
        /// What is wrong with it.
        reason: String,
    },
    /// The pack declares a format version this build cannot read.
    #[error(
        "unsupported pack format version {found} (this build reads versions {} to {supported})",
        crate::OLDEST_FORMAT_VERSION
    )]
    UnsupportedFormatVersion {
        /// The version the pack declares.
        found: u64,
        /// The newest version this build reads (it reads every version
        /// from [`crate::OLDEST_FORMAT_VERSION`] up to this one).
        supported: u32,
    },
    /// A version-1 pack's descriptor text does not hash to the
    /// `descriptor_sha256` its envelope holds.
    #[error(
        "descriptor checksum mismatch: the version-1 envelope says {expected}, the descriptor hashes to {actual}"
    )]
    DescriptorChecksumMismatch {
        /// The digest in the envelope.
        expected: Sha256Digest,
        /// The digest of the descriptor text.
        actual: Sha256Digest,
    },
    /// The header does not hash to the pack digest it carries
    /// (`__metadata__.capcat_pack_sha256`): a header byte (descriptor,
    /// tensor entry, padding or the digest itself) changed after sealing.
    #[error(
        "header checksum mismatch: the header carries pack digest {stored} but hashes to {actual}"
    )]
    HeaderChecksumMismatch {
        /// The pack digest written in the header.
        stored: Sha256Digest,
        /// The digest of the header bytes.
        actual: Sha256Digest,
    },
    /// A dtype string this format does not know.
    #[error("unknown dtype `{found}`")]
    UnknownDtype {
        /// The string found.
        found: String,
    },
    /// A digest string is not 64 lowercase hex digits.
    #[error("invalid SHA-256 digest `{found}`: expected 64 lowercase hex digits")]
    InvalidDigest {
        /// The string found (at most 80 characters of it).
        found: String,
    },
    /// A tensor's byte range ends before it starts or past the data section.
    #[error(
        "tensor `{key}` has data offsets [{begin}, {end}) outside the {data_len}-byte data section"
    )]
    OffsetOutOfRange {
        /// The header key of the tensor.
        key: String,
        /// Declared start.
        begin: u64,
        /// Declared end.
        end: u64,
        /// Length of the data section.
        data_len: u64,
    },
    /// Two tensors' byte ranges overlap, or leave a gap (safetensors
    /// requires the ranges to tile the data section exactly).
    #[error(
        "tensor `{key}` starts at {begin} but the previous tensor ends at {previous_end}: ranges overlap or leave a gap"
    )]
    OffsetsNotContiguous {
        /// The header key of the tensor.
        key: String,
        /// Its declared start.
        begin: u64,
        /// The end of the tensor before it in offset order.
        previous_end: u64,
    },
    /// The tensors' byte ranges do not cover the data section to its end.
    #[error("the tensors cover {covered} bytes but the data section has {data_len}")]
    DataSectionNotCovered {
        /// Bytes covered by the tensors.
        covered: u64,
        /// Bytes in the data section.
        data_len: u64,
    },
    /// A dtype, a shape and a byte length disagree.
    #[error(
        "{context}: dtype {dtype} and shape {shape:?} need {expected:?} bytes but {actual} are given"
    )]
    ShapeMismatch {
        /// Which tensor or record.
        context: String,
        /// The dtype.
        dtype: Dtype,
        /// The shape.
        shape: Vec<u64>,
        /// The bytes dtype and shape need (`None` when that overflows).
        expected: Option<u64>,
        /// The bytes present.
        actual: u64,
    },
    /// The safetensors entry of a record disagrees with the descriptor.
    #[error(
        "record {index}: the safetensors entry says {field} = {entry} but the descriptor says {descriptor}"
    )]
    EntryDisagrees {
        /// The record index.
        index: usize,
        /// The field that disagrees (`dtype` or `shape`).
        field: &'static str,
        /// The value in the safetensors entry.
        entry: String,
        /// The value in the descriptor.
        descriptor: String,
    },
    /// The descriptor lists a record whose tensor is absent from the header.
    #[error("record {index}: tensor `{key}` is missing from the header")]
    MissingTensor {
        /// The record index.
        index: usize,
        /// The tensor key it should have.
        key: String,
    },
    /// The header holds a tensor the descriptor does not list.
    #[error("tensor `{key}` is not described by the descriptor")]
    UnexpectedTensor {
        /// The tensor key.
        key: String,
    },
    /// A payload does not hash to the digest the descriptor or locator holds.
    #[error(
        "record {index} (capture {capture_id}): payload checksum mismatch: expected {expected}, got {actual}"
    )]
    PayloadChecksumMismatch {
        /// The record index.
        index: usize,
        /// The record's capture id.
        capture_id: Uuid,
        /// The recorded digest.
        expected: Sha256Digest,
        /// The digest of the bytes read.
        actual: Sha256Digest,
    },
    /// The pack's digest is not the one the caller expected: a valid pack,
    /// but not the pack the caller recorded.
    #[error("pack checksum mismatch: expected {expected}, got {actual}")]
    PackChecksumMismatch {
        /// The digest the caller holds (catalog, store metadata).
        expected: Sha256Digest,
        /// The verified digest of the pack read.
        actual: Sha256Digest,
    },
    /// A record's summary, recomputed from its payload bytes, differs from
    /// the summary the caller holds (a manifest's, a catalog row's):
    /// [`crate::PackReader::verify_summary`]. `field` is the first field
    /// that differs, in [`crate::TensorSummary`] order; the values are
    /// spelled as in JSON (`1` for an exact integer, `1.0` for a float,
    /// `null` for an absent statistic).
    #[error(
        "record {index}: summary field `{field}`: expected {expected}, recomputed from the payload {actual}"
    )]
    #[non_exhaustive]
    SummaryMismatch {
        /// The record index.
        index: usize,
        /// The JSON name of the first field that differs.
        field: &'static str,
        /// The caller's value.
        expected: String,
        /// The value recomputed from the payload bytes.
        actual: String,
    },
    /// The whole file's CRC-64/NVME is not the one the caller holds (the
    /// store's `capcat-crc64nvme`, a manifest's `crc64nvme`): the pack
    /// carries no CRC of its own (docs/pack-format.md section 4), so only a
    /// caller holding one can compare it: [`crate::PackReader::verify_crc64nvme`].
    #[error("CRC-64/NVME mismatch: expected {expected:016x}, the file's bytes give {actual:016x}")]
    #[non_exhaustive]
    Crc64NvmeMismatch {
        /// The CRC the caller holds.
        expected: u64,
        /// The CRC of the file's bytes.
        actual: u64,
    },
    /// A `BOOL` payload holds a byte other than 0 or 1.
    #[error("{context}: BOOL element {position} is byte {byte}, not 0 or 1")]
    InvalidBool {
        /// Which tensor or record.
        context: String,
        /// The element position.
        position: usize,
        /// The byte found.
        byte: u8,
    },
    /// Appending would exceed the pack's record limit.
    #[error("pack is full: it already holds {limit} records, the limit")]
    TooManyRecords {
        /// The limit.
        limit: usize,
    },
    /// Appending would exceed the pack's payload byte limit.
    #[error("pack is full: {attempted} payload bytes would exceed the {limit}-byte limit")]
    TooManyBytes {
        /// The limit.
        limit: u64,
        /// Payload bytes the pack would hold after the append.
        attempted: u64,
    },
    /// Limits outside what the format supports.
    #[error("invalid pack limits: {reason}")]
    InvalidLimits {
        /// What is wrong.
        reason: String,
    },
    /// Two records in one pack share a capture identity.
    #[error("tenant `{tenant_id}` capture {capture_id} appears twice in one pack")]
    DuplicateCapture {
        /// The tenant.
        tenant_id: String,
        /// The capture id.
        capture_id: Uuid,
    },
    /// A record index past the end of the pack.
    #[error("record index {index} is out of range: the pack holds {count} records")]
    RecordIndexOutOfRange {
        /// The index asked for.
        index: usize,
        /// Records in the pack.
        count: usize,
    },
    /// Values of one dtype were supplied or asked for where another is
    /// recorded.
    #[error("{context}: dtype mismatch: the record says {recorded}, the values are {given}")]
    DtypeMismatch {
        /// Which record.
        context: String,
        /// The dtype the metadata records.
        recorded: Dtype,
        /// The dtype of the values.
        given: Dtype,
    },
    /// The range read behind a hydration failed.
    #[error("range read of {length} bytes at offset {offset} failed: {source}")]
    RangeRead {
        /// The offset asked for.
        offset: u64,
        /// The length asked for.
        length: u64,
        /// The store's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The range read returned a different number of bytes than asked for.
    #[error("range read at offset {offset} returned {actual} bytes, expected {expected}")]
    RangeReadLength {
        /// The offset asked for.
        offset: u64,
        /// Bytes asked for.
        expected: u64,
        /// Bytes returned.
        actual: u64,
    },
    /// Reading a pack file failed.
    #[error("cannot read pack file {path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}
