//! Capcat pack format: checksummed, safetensors-compatible capture packs.
//!
//! A pack is a valid safetensors file. Its header's `__metadata__` holds two
//! keys: `capcat_pack_sha256`, the pack digest (SHA-256 of the header with
//! its own digits zeroed, which commits to every byte of the pack through
//! the payload digests), and `capcat`, the pack descriptor (format version,
//! pack id, every record's metadata and payload SHA-256). Each record's
//! payload is one safetensors tensor named `record/NNNNNNNN`. The exact
//! bytes are in `docs/pack-format.md`.
//!
//! - [`PackWriter`]: append records ([`RecordMetadata`] + payload), then
//!   [`PackWriter::seal`] into a [`SealedPack`]: the bytes and a
//!   [`PackInfo`] with the pack digest, the whole-file CRC-64/NVME (the
//!   object store's upload checksum) and one [`RecordLocator`] per record.
//! - [`PackReader`]: open from bytes or a file, verifying the header, the
//!   descriptor and every checksum; decode records to [`TensorValues`].
//!   It reads the current format and every older one from
//!   [`OLDEST_FORMAT_VERSION`]; [`PackWriter`] writes only [`FORMAT_VERSION`].
//! - [`hydrate()`]: one range read for one record, verified against its
//!   locator; [`RangeRead`] lets a store serve the range.
//! - [`TensorSummary`] (version 2): exact order statistics for integers.
//! - [`PackError`]: every bad input, typed; the reader never panics.
//!
//! ```
//! use std::collections::BTreeMap;
//!
//! use capcat_pack::{
//!     CaptureIdentity, Dtype, InMemory, PackLimits, PackReader, PackWriter, RecordMetadata,
//!     SummaryScalar, TensorValues, hydrate,
//! };
//! use uuid::Uuid;
//!
//! let metadata = RecordMetadata {
//!     identity: CaptureIdentity {
//!         tenant_id: "t".into(),
//!         experiment_id: "e".into(),
//!         run_id: "r".into(),
//!         captured_at_ns: 1,
//!         capture_id: Uuid::from_u128(1),
//!     },
//!     model: "m".into(),
//!     module_path: "model.layers.0".into(),
//!     hook: "forward_output".into(),
//!     step: 0,
//!     tensor_name: "out".into(),
//!     dtype: Dtype::I64,
//!     shape: vec![2],
//!     tags: BTreeMap::new(),
//! };
//! let mut writer = PackWriter::new(Uuid::from_u128(7), PackLimits::default());
//! writer.append_values(metadata, &TensorValues::I64(vec![i64::MAX - 1, i64::MAX]))?;
//! let sealed = writer.seal()?;
//!
//! // The catalog keeps `sealed.info`; the store keeps `sealed.bytes`.
//! let reader = PackReader::from_bytes_expecting(sealed.bytes.clone(), sealed.info.pack_sha256)?;
//! let summary = reader.summary(0)?;
//! assert_eq!(summary.maximum, Some(SummaryScalar::Int(i128::from(i64::MAX))));
//!
//! // One range read for one record, verified against its locator.
//! let payload = hydrate(&mut InMemory(sealed.bytes), &sealed.info.records[0])?;
//! assert_eq!(payload.len(), 16);
//! # Ok::<(), capcat_pack::PackError>(())
//! ```

#![forbid(unsafe_code)]

mod ahead;
mod canonical;
mod descriptor;
mod digest;
mod dtype;
mod encode;
mod error;
mod header;
mod hydrate;
mod info;
mod parallel;
mod reader;
mod record;
mod seal;
mod summary;
#[cfg(test)]
mod test_packs;
mod values;
mod writer;

pub use descriptor::{DIGEST_KEY, FORMAT_VERSION, METADATA_KEY, OLDEST_FORMAT_VERSION, tensor_key};
pub use digest::{Sha256Digest, crc64nvme};
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
