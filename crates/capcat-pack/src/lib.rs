//! Capcat pack format: checksummed, safetensors-compatible capture packs.
//!
//! A pack is a valid safetensors file. Its header's `__metadata__` holds one
//! key, `capcat`, whose value is the pack descriptor (format version,
//! pack id, every record's metadata and payload SHA-256) wrapped in an
//! envelope carrying the descriptor's own SHA-256. Each record's payload is
//! one safetensors tensor named `record/NNNNNNNN`. The exact bytes are in
//! `docs/pack-format.md`.
//!
//! - [`PackWriter`]: append records ([`RecordMetadata`] + payload), then
//!   [`PackWriter::seal`] into a [`SealedPack`]: the bytes and a
//!   [`PackInfo`] with the whole-pack SHA-256 and one [`RecordLocator`] per
//!   record.
//! - [`PackReader`]: open from bytes or a file, verifying the header, the
//!   descriptor and every checksum; decode records to [`TensorValues`].
//! - [`hydrate`]: one range read for one record, verified against its
//!   locator; [`RangeRead`] lets a store serve the range.
//! - [`TensorSummary`] (version 2): exact order statistics for integers.
//! - [`PackError`]: every bad input, typed; the reader never panics.

#![forbid(unsafe_code)]

mod descriptor;
mod digest;
mod dtype;
mod error;
mod header;
mod hydrate;
mod info;
mod reader;
mod record;
mod summary;
mod values;
mod writer;

pub use descriptor::{FORMAT_VERSION, METADATA_KEY, tensor_key};
pub use digest::Sha256Digest;
pub use dtype::{Dtype, element_count};
pub use error::PackError;
pub use header::MAX_HEADER_BYTES;
pub use hydrate::{
    FileRange, InMemory, RangeRead, RangeReadError, decode_payload, hydrate, hydrate_async,
    verify_hydrated,
};
pub use info::{PackInfo, RecordLocator, SealedPack};
pub use reader::PackReader;
pub use record::{CaptureIdentity, RecordEntry, RecordMetadata};
pub use summary::{SUMMARY_VERSION, SummaryScalar, TensorSummary};
pub use values::TensorValues;
pub use writer::{MAX_RECORDS_CEILING, PackLimits, PackWriter};
