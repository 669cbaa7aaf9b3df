//! The pack descriptor: what `__metadata__["capcat"]` holds.
//!
//! Two layers, both JSON (see docs/pack-format.md):
//! - the envelope, `{"format_version":1,"descriptor_sha256":"<hex>","descriptor":"<text>"}`,
//!   is the value of the `capcat` metadata key;
//! - the descriptor is the JSON *text* held in the envelope's `descriptor`
//!   string, `{"format_version":1,"pack_id":"<uuid>","records":[...]}`.
//!
//! The descriptor travels as a string so that its digest covers exact bytes:
//! a reader in any language hashes the UTF-8 of that string and compares,
//! with no canonical JSON to agree on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::digest::Sha256Digest;
use crate::dtype::Dtype;
use crate::error::PackError;
use crate::record::{CaptureIdentity, RecordEntry, RecordMetadata};

/// The pack format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The one `__metadata__` key of a pack. One key only: the safetensors crate
/// keeps `__metadata__` in a `HashMap`, so with two keys their order (and the
/// pack's bytes) would change from run to run.
pub const METADATA_KEY: &str = "capcat";

/// The safetensors key of record `index`: `record/` and the index in eight
/// zero-padded decimal digits, so that name order is record order.
pub fn tensor_key(index: usize) -> String {
    format!("record/{index:08}")
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    format_version: u64,
    descriptor_sha256: Sha256Digest,
    descriptor: String,
}

/// Only the version, from an envelope of any shape.
#[derive(Deserialize)]
struct VersionOnly {
    format_version: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Descriptor {
    format_version: u64,
    pack_id: Uuid,
    records: Vec<DescriptorRecord>,
}

/// One record as the descriptor spells it. A struct of its own (not
/// `RecordMetadata` flattened) so that field order, and therefore the bytes,
/// are fixed here and unknown fields are refused.
#[derive(Serialize, Deserialize)]
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

/// Builds the value of the `capcat` metadata key.
pub(crate) fn encode(
    pack_id: Uuid,
    records: &[(&RecordMetadata, Sha256Digest)],
) -> Result<String, PackError> {
    let descriptor = Descriptor {
        format_version: u64::from(FORMAT_VERSION),
        pack_id,
        records: records
            .iter()
            .map(|(m, digest)| DescriptorRecord {
                tenant_id: m.identity.tenant_id.clone(),
                experiment_id: m.identity.experiment_id.clone(),
                run_id: m.identity.run_id.clone(),
                captured_at_ns: m.identity.captured_at_ns,
                capture_id: m.identity.capture_id,
                model: m.model.clone(),
                module_path: m.module_path.clone(),
                hook: m.hook.clone(),
                step: m.step,
                tensor_name: m.tensor_name.clone(),
                dtype: m.dtype,
                shape: m.shape.clone(),
                tags: m.tags.clone(),
                payload_sha256: *digest,
            })
            .collect(),
    };
    let text = serde_json::to_string(&descriptor).map_err(malformed)?;
    let envelope = Envelope {
        format_version: u64::from(FORMAT_VERSION),
        descriptor_sha256: Sha256Digest::of(text.as_bytes()),
        descriptor: text,
    };
    serde_json::to_string(&envelope).map_err(malformed)
}

/// Parses and verifies the value of the `capcat` metadata key.
///
/// An envelope that is not version 1 is reported by its version (read from a
/// loose parse that ignores other fields) rather than as malformed.
pub(crate) fn decode(value: &str) -> Result<ParsedDescriptor, PackError> {
    let envelope: Envelope = match serde_json::from_str(value) {
        Ok(envelope) => envelope,
        Err(strict) => {
            // Not a version-1 envelope: a newer writer's envelope may have
            // other fields, so report its version when it has one.
            if let Ok(loose) = serde_json::from_str::<VersionOnly>(value)
                && loose.format_version != u64::from(FORMAT_VERSION)
            {
                return Err(PackError::UnsupportedFormatVersion {
                    found: loose.format_version,
                    supported: FORMAT_VERSION,
                });
            }
            return Err(malformed(strict));
        }
    };
    let version = envelope.format_version;
    if version != u64::from(FORMAT_VERSION) {
        return Err(PackError::UnsupportedFormatVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let actual = Sha256Digest::of(envelope.descriptor.as_bytes());
    if actual != envelope.descriptor_sha256 {
        return Err(PackError::DescriptorChecksumMismatch {
            expected: envelope.descriptor_sha256,
            actual,
        });
    }
    let descriptor: Descriptor = serde_json::from_str(&envelope.descriptor).map_err(malformed)?;
    if descriptor.format_version != version {
        return Err(malformed(format!(
            "the descriptor says format_version {} but the envelope says {version}",
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
    }

    #[test]
    fn unknown_version_is_reported_before_shape() {
        let error = decode(r#"{"format_version":2,"whatever":true}"#).unwrap_err();
        assert!(
            matches!(
                error,
                PackError::UnsupportedFormatVersion {
                    found: 2,
                    supported: 1
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn tampered_descriptor_fails_its_checksum() {
        let encoded = encode(Uuid::nil(), &[]).expect("encodes");
        let tampered = encoded.replace(
            "00000000-0000-0000-0000-000000000000",
            "00000000-0000-0000-0000-000000000001",
        );
        assert_ne!(encoded, tampered);
        assert!(matches!(
            decode(&tampered),
            Err(PackError::DescriptorChecksumMismatch { .. })
        ));
        assert!(decode(&encoded).is_ok());
    }

    #[test]
    fn unknown_fields_and_non_json_are_malformed() {
        assert!(matches!(
            decode("not json"),
            Err(PackError::MalformedDescriptor { .. })
        ));
        let text = r#"{"format_version":1,"pack_id":"00000000-0000-0000-0000-000000000000","records":[],"extra":1}"#;
        let envelope = serde_json::json!({
            "format_version": 1,
            "descriptor_sha256": Sha256Digest::of(text.as_bytes()).to_hex(),
            "descriptor": text,
        });
        assert!(matches!(
            decode(&envelope.to_string()),
            Err(PackError::MalformedDescriptor { .. })
        ));
    }
}
