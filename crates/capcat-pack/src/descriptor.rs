//! The pack descriptor: what `__metadata__["capcat"]` holds.
//!
//! The descriptor is the JSON *text* held in the `capcat` string,
//! `{"format_version":2,"pack_id":"<uuid>","records":[...]}` (see
//! docs/pack-format.md). It carries no digest of its own: the pack digest in
//! `__metadata__["capcat_pack_sha256"]` covers every header byte, the
//! descriptor included (see `header::header_digest`).

use std::collections::BTreeMap;

use serde::Deserialize;
use uuid::Uuid;

use crate::digest::Sha256Digest;
use crate::dtype::Dtype;
use crate::error::PackError;
use crate::record::{CaptureIdentity, RecordEntry, RecordMetadata};

/// The pack format version this build writes and reads. Version 1 packs
/// (whole-file pack digest, descriptor in a digest envelope) are refused
/// with [`PackError::UnsupportedFormatVersion`].
pub const FORMAT_VERSION: u32 = 2;

/// The `__metadata__` key holding the descriptor text.
pub const METADATA_KEY: &str = "capcat";

/// The `__metadata__` key holding the pack digest, the first key of the
/// header (docs/pack-format.md, section 4).
pub const DIGEST_KEY: &str = "capcat_pack_sha256";

/// The safetensors key of record `index`: `record/` and the index in eight
/// zero-padded decimal digits, so that name order is record order.
pub fn tensor_key(index: usize) -> String {
    format!("record/{index:08}")
}

/// Writes [`tensor_key`] into `out` without allocating. `index` is below
/// [`crate::MAX_RECORDS_CEILING`], so eight digits always suffice.
pub(crate) fn tensor_key_into(index: usize, out: &mut [u8; 15]) {
    out[..7].copy_from_slice(b"record/");
    let mut rest = index;
    for digit in out[7..].iter_mut().rev() {
        // `rest % 10` is below 10, so the cast keeps every bit.
        *digit = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    debug_assert_eq!(rest, 0, "record index {index} needs more than 8 digits");
}

/// Only the version, from a descriptor of any shape.
#[derive(Deserialize)]
struct VersionOnly {
    format_version: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Descriptor {
    format_version: u64,
    pack_id: Uuid,
    records: Vec<DescriptorRecord>,
}

/// One record as the descriptor spells it. A struct of its own (not
/// `RecordMetadata` flattened) so that field order, and therefore the bytes,
/// are fixed here and unknown fields are refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescriptorRecord {
    tenant_id: String,
    experiment_id: String,
    run_id: String,
    captured_at_ns: u64,
    capture_id: Uuid,
    model: String,
    module_path: String,
    hook: String,
    step: u64,
    tensor_name: String,
    dtype: Dtype,
    shape: Vec<u64>,
    tags: BTreeMap<String, String>,
    payload_sha256: Sha256Digest,
}

/// The descriptor as the reader returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParsedDescriptor {
    pub(crate) pack_id: Uuid,
    pub(crate) records: Vec<RecordEntry>,
}

fn malformed(reason: impl std::fmt::Display) -> PackError {
    PackError::MalformedDescriptor {
        reason: reason.to_string(),
    }
}

/// The version a descriptor text declares, read before anything else so
/// that a pack of another version is reported as such rather than as
/// malformed. A version-2 descriptor starts with exactly
/// `{"format_version":2,` (the writer puts the field first); any other text
/// falls back to a loose parse that ignores every other field.
pub(crate) fn check_version(text: &str) -> Result<(), PackError> {
    if text.starts_with(VERSION_PREFIX) {
        return Ok(());
    }
    match serde_json::from_str::<VersionOnly>(text) {
        Ok(loose) if loose.format_version != u64::from(FORMAT_VERSION) => {
            Err(PackError::UnsupportedFormatVersion {
                found: loose.format_version,
                supported: FORMAT_VERSION,
            })
        }
        Ok(_) => Ok(()),
        Err(error) => Err(malformed(error)),
    }
}

/// How a version-2 descriptor text begins (a test ties it to
/// [`FORMAT_VERSION`]).
const VERSION_PREFIX: &str = r#"{"format_version":2,"#;

/// Parses the descriptor text (the unescaped value of the `capcat` key).
pub(crate) fn decode(text: &str) -> Result<ParsedDescriptor, PackError> {
    check_version(text)?;
    let version = u64::from(FORMAT_VERSION);
    let descriptor: Descriptor = serde_json::from_str(text).map_err(malformed)?;
    if descriptor.format_version != version {
        return Err(malformed(format!(
            "the descriptor says format_version {} but its first field says {version}",
            descriptor.format_version
        )));
    }
    let records = descriptor
        .records
        .into_iter()
        .enumerate()
        .map(|(index, r)| RecordEntry {
            index,
            metadata: RecordMetadata {
                identity: CaptureIdentity {
                    tenant_id: r.tenant_id,
                    experiment_id: r.experiment_id,
                    run_id: r.run_id,
                    captured_at_ns: r.captured_at_ns,
                    capture_id: r.capture_id,
                },
                model: r.model,
                module_path: r.module_path,
                hook: r.hook,
                step: r.step,
                tensor_name: r.tensor_name,
                dtype: r.dtype,
                shape: r.shape,
                tags: r.tags,
            },
            payload_sha256: r.payload_sha256,
        })
        .collect();
    Ok(ParsedDescriptor {
        pack_id: descriptor.pack_id,
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_keys_sort_in_record_order() {
        assert_eq!(tensor_key(7), "record/00000007");
        assert!(tensor_key(9) < tensor_key(10));
        for index in [0, 7, 10, 12_345_678, 99_999_999] {
            let mut key = [0u8; 15];
            tensor_key_into(index, &mut key);
            assert_eq!(key.as_slice(), tensor_key(index).as_bytes());
        }
    }

    #[test]
    fn the_version_prefix_is_this_version() {
        assert_eq!(
            VERSION_PREFIX,
            format!("{{\"format_version\":{FORMAT_VERSION},")
        );
    }

    #[test]
    fn unknown_version_is_reported_before_shape() {
        for (text, found) in [
            (r#"{"format_version":3,"whatever":true}"#, 3),
            // A version-1 pack's `capcat` value is its envelope.
            (
                r#"{"format_version":1,"descriptor_sha256":"00","descriptor":"{}"}"#,
                1,
            ),
        ] {
            let error = decode(text).unwrap_err();
            assert!(
                matches!(
                    error,
                    PackError::UnsupportedFormatVersion { found: f, supported: 2 } if f == found
                ),
                "{error}"
            );
        }
    }

    #[test]
    fn unknown_fields_and_non_json_are_malformed() {
        assert!(matches!(
            decode("not json"),
            Err(PackError::MalformedDescriptor { .. })
        ));
        let text = r#"{"format_version":2,"pack_id":"00000000-0000-0000-0000-000000000000","records":[],"extra":1}"#;
        assert!(matches!(
            decode(text),
            Err(PackError::MalformedDescriptor { .. })
        ));
        let text =
            r#"{"format_version":2,"pack_id":"00000000-0000-0000-0000-000000000000","records":[]}"#;
        assert!(decode(text).is_ok());
    }
}
