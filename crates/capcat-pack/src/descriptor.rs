//! The pack descriptor: what `__metadata__["capcat"]` holds.
//!
//! In version 2 the descriptor is the JSON *text* held in the `capcat`
//! string, `{"format_version":2,"pack_id":"<uuid>","records":[...]}` (see
//! docs/pack-format.md). It carries no digest of its own: the pack digest in
//! `__metadata__["capcat_pack_sha256"]` covers every header byte, the
//! descriptor included (see `header::header_digest`).
//!
//! In version 1 (read, never written) the `capcat` string holds an
//! envelope, `{"format_version":1,"descriptor_sha256":"<hex>","descriptor":"<text>"}`,
//! whose `descriptor` string is the descriptor text and whose digest is the
//! SHA-256 of that text. Both versions share the record fields.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use uuid::Uuid;

use crate::canonical::{self, DescriptorRef};
use crate::digest::Sha256Digest;
use crate::dtype::Dtype;
use crate::error::PackError;
use crate::record::{CaptureIdentity, RecordEntry, RecordMetadata};

/// The pack format version this build writes, and the newest it reads.
pub const FORMAT_VERSION: u32 = 2;

/// The oldest pack format version this build reads: version 1 (pack digest
/// over the whole file, kept outside the pack; descriptor in a digest
/// envelope). Every version from this one to [`FORMAT_VERSION`] is read
/// and fully verified; writers write only [`FORMAT_VERSION`].
pub const OLDEST_FORMAT_VERSION: u32 = 1;

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

/// The version-1 envelope around the descriptor text.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeV1 {
    format_version: u64,
    descriptor_sha256: Sha256Digest,
    descriptor: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Descriptor {
    #[expect(
        dead_code,
        reason = "parsed so that the whole text is checked; facts() reads it"
    )]
    format_version: u64,
    #[expect(
        dead_code,
        reason = "parsed so that the whole text is checked; facts() reads it"
    )]
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

/// The descriptor as the unit tests read it.
#[cfg(test)]
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

/// The version the `capcat` value declares, read before anything else so
/// that a pack of another version is reported as such rather than as
/// malformed. A version-2 descriptor starts with exactly
/// `{"format_version":2,` (the writer puts the field first); any other text
/// (a version-1 envelope among them) falls back to a loose parse that
/// ignores every other field. Returns a version this build reads, from
/// [`OLDEST_FORMAT_VERSION`] to [`FORMAT_VERSION`].
pub(crate) fn check_version(text: &str) -> Result<u32, PackError> {
    if text.starts_with(VERSION_PREFIX) {
        return Ok(FORMAT_VERSION);
    }
    let loose = serde_json::from_str::<VersionOnly>(text).map_err(malformed)?;
    u32::try_from(loose.format_version)
        .ok()
        .filter(|v| (OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(v))
        .ok_or(PackError::UnsupportedFormatVersion {
            found: loose.format_version,
            supported: FORMAT_VERSION,
        })
}

/// How a version-2 descriptor text begins (a test ties it to
/// [`FORMAT_VERSION`]).
const VERSION_PREFIX: &str = r#"{"format_version":2,"#;

/// Parses the `capcat` value (the unescaped value of the key) of a pack of
/// any version this build reads into owned records: the version-2
/// descriptor text, or the version-1 envelope, whose descriptor digest it
/// checks.
#[cfg(test)]
pub(crate) fn decode(value: &str) -> Result<ParsedDescriptor, PackError> {
    let version = check_version(value)?;
    let text = descriptor_text(value.to_owned(), version)?;
    let facts = facts(&text, version)?;
    Ok(ParsedDescriptor {
        pack_id: facts.pack_id,
        records: records(&text)?,
    })
}

/// The descriptor text a `capcat` value of `version` holds: for version 2
/// the value itself; for version 1 its envelope's `descriptor` string,
/// after checking that it hashes to the envelope's `descriptor_sha256`.
pub(crate) fn descriptor_text(value: String, version: u32) -> Result<String, PackError> {
    if version == FORMAT_VERSION {
        return Ok(value);
    }
    let envelope: EnvelopeV1 = serde_json::from_str(&value).map_err(malformed)?;
    if envelope.format_version != 1 {
        return Err(malformed(format!(
            "a version-1 envelope says format_version {}",
            envelope.format_version
        )));
    }
    let actual = Sha256Digest::of(envelope.descriptor.as_bytes());
    if actual != envelope.descriptor_sha256 {
        return Err(PackError::DescriptorChecksumMismatch {
            expected: envelope.descriptor_sha256,
            actual,
        });
    }
    Ok(envelope.descriptor)
}

/// What opening a pack checks of each record, borrowed from the
/// descriptor text where it can be.
#[derive(Debug)]
pub(crate) struct RecordFacts<'a> {
    pub(crate) tenant_id: Cow<'a, str>,
    pub(crate) capture_id: Uuid,
    pub(crate) dtype: Dtype,
    pub(crate) shape: Vec<u64>,
    pub(crate) payload_sha256: Sha256Digest,
}

/// The descriptor as opening a pack checks it.
#[derive(Debug)]
pub(crate) struct DescriptorFacts<'a> {
    pub(crate) pack_id: Uuid,
    pub(crate) records: Vec<RecordFacts<'a>>,
}

/// One record as [`facts`] parses it: every field of [`DescriptorRecord`]
/// with the same type, except that the free-text fields are checked to be
/// strings and not kept. Whatever this accepts, [`records`] decodes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[expect(
    dead_code,
    reason = "the fields opening does not keep are parsed only to check their type"
)]
struct RecordView<'a> {
    #[serde(borrow)]
    tenant_id: Cow<'a, str>,
    experiment_id: AnyString,
    run_id: AnyString,
    captured_at_ns: u64,
    capture_id: Uuid,
    model: AnyString,
    module_path: AnyString,
    hook: AnyString,
    step: u64,
    tensor_name: AnyString,
    dtype: Dtype,
    shape: Vec<u64>,
    tags: AnyStringMap,
    payload_sha256: Sha256Digest,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescriptorView<'a> {
    format_version: u64,
    pack_id: Uuid,
    #[serde(borrow)]
    records: Vec<RecordView<'a>>,
}

/// A JSON string, checked and dropped (no copy is kept).
struct AnyString;

impl<'de> Deserialize<'de> for AnyString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl Visitor<'_> for StrVisitor {
            type Value = AnyString;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<AnyString, E> {
                Ok(AnyString)
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

/// A JSON object of string values (the `tags`), checked and dropped. Like
/// the `BTreeMap` [`records`] decodes it into, it accepts any key order and
/// repeated keys.
struct AnyStringMap;

impl<'de> Deserialize<'de> for AnyStringMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = AnyStringMap;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AnyStringMap, A::Error> {
                // The parser ends the loop at the end of the object, and
                // the object is finite.
                while map.next_entry::<AnyString, AnyString>()?.is_some() {}
                Ok(AnyStringMap)
            }
        }
        deserializer.deserialize_map(MapVisitor)
    }
}

/// Parses descriptor text of `version` and type-checks every field, keeping
/// only what opening a pack checks; the owned records are decoded from the
/// same text by [`records`] when they are first asked for.
pub(crate) fn facts(text: &str, version: u32) -> Result<DescriptorFacts<'_>, PackError> {
    if let Some(canonical) = canonical::parse(text) {
        check_declared(canonical.format_version, version)?;
        return Ok(canonical_facts(canonical));
    }
    facts_by_serde(text, version)
}

/// [`facts`] of a descriptor the fast path parsed (as text or where the
/// header holds it).
pub(crate) fn canonical_facts(canonical: DescriptorRef<'_>) -> DescriptorFacts<'_> {
    DescriptorFacts {
        pack_id: canonical.pack_id,
        records: canonical
            .records
            .into_iter()
            .map(|r| RecordFacts {
                tenant_id: Cow::Borrowed(r.tenant_id),
                capture_id: r.capture_id,
                dtype: r.dtype,
                shape: r.shape,
                payload_sha256: r.payload_sha256,
            })
            .collect(),
    }
}

/// [`facts`] by `serde_json`, for any spelling of the descriptor.
fn facts_by_serde(text: &str, version: u32) -> Result<DescriptorFacts<'_>, PackError> {
    let view: DescriptorView<'_> = serde_json::from_str(text).map_err(malformed)?;
    check_declared(view.format_version, version)?;
    Ok(DescriptorFacts {
        pack_id: view.pack_id,
        records: view
            .records
            .into_iter()
            .map(|r| RecordFacts {
                tenant_id: r.tenant_id,
                capture_id: r.capture_id,
                dtype: r.dtype,
                shape: r.shape,
                payload_sha256: r.payload_sha256,
            })
            .collect(),
    })
}

/// The descriptor's own `format_version` must be the one declared first.
fn check_declared(found: u64, version: u32) -> Result<(), PackError> {
    if found != u64::from(version) {
        let declared_by = if version == FORMAT_VERSION {
            "its first field"
        } else {
            "the envelope"
        };
        return Err(malformed(format!(
            "the descriptor says format_version {} but {declared_by} says {version}",
            found
        )));
    }
    Ok(())
}

/// Decodes descriptor text into owned records. On text [`facts`] accepted
/// it cannot fail: both parse the same fields with the same types.
pub(crate) fn records(text: &str) -> Result<Vec<RecordEntry>, PackError> {
    if let Some(canonical) = canonical::parse(text) {
        return Ok(canonical_records(canonical));
    }
    records_by_serde(text)
}

/// [`records`] of a descriptor the fast path parsed (as text or where the
/// header holds it).
pub(crate) fn canonical_records(canonical: DescriptorRef<'_>) -> Vec<RecordEntry> {
    canonical
        .records
        .into_iter()
        .enumerate()
        .map(|(index, r)| RecordEntry {
            index,
            metadata: RecordMetadata {
                identity: CaptureIdentity {
                    tenant_id: r.tenant_id.to_owned(),
                    experiment_id: r.experiment_id.to_owned(),
                    run_id: r.run_id.to_owned(),
                    captured_at_ns: r.captured_at_ns,
                    capture_id: r.capture_id,
                },
                model: r.model.to_owned(),
                module_path: r.module_path.to_owned(),
                hook: r.hook.to_owned(),
                step: r.step,
                tensor_name: r.tensor_name.to_owned(),
                dtype: r.dtype,
                shape: r.shape,
                // Inserted in text order, so a repeated key keeps its
                // last value, as serde_json's map does.
                tags: r
                    .tags
                    .into_iter()
                    .fold(BTreeMap::new(), |mut tags, (k, v)| {
                        tags.insert(k.to_owned(), v.to_owned());
                        tags
                    }),
            },
            payload_sha256: r.payload_sha256,
        })
        .collect()
}

/// [`records`] by `serde_json`, for any spelling of the descriptor.
fn records_by_serde(text: &str) -> Result<Vec<RecordEntry>, PackError> {
    let descriptor: Descriptor = serde_json::from_str(text).map_err(malformed)?;
    Ok(descriptor
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
        .collect())
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
            (r#"{"format_version":0,"whatever":true}"#, 0),
            (r#"{"format_version":4294967297}"#, 4_294_967_297),
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

    /// A version-1 envelope as version 1 wrote it (`serde_json` of the
    /// envelope struct, fields in declaration order).
    fn envelope_v1(descriptor: &str) -> String {
        serde_json::json!({
            "format_version": 1,
            "descriptor_sha256": Sha256Digest::of(descriptor.as_bytes()).to_hex(),
            "descriptor": descriptor,
        })
        .to_string()
    }

    #[test]
    fn a_version_1_envelope_is_read_and_its_digest_checked() {
        let descriptor =
            r#"{"format_version":1,"pack_id":"00000000-0000-0000-0000-000000000007","records":[]}"#;
        let envelope = envelope_v1(descriptor);
        assert_eq!(check_version(&envelope).expect("a known version"), 1);
        let parsed = decode(&envelope).expect("a valid version-1 envelope");
        assert_eq!(parsed.pack_id, Uuid::from_u128(7));
        let tampered = envelope.replace("0007", "0008");
        assert!(
            matches!(
                decode(&tampered),
                Err(PackError::DescriptorChecksumMismatch { .. })
            ),
            "{tampered}"
        );
        // The envelope and its descriptor must agree on the version, and
        // the envelope has exactly its three fields.
        let v2_inside = envelope_v1(&descriptor.replace(":1,", ":2,"));
        assert!(matches!(
            decode(&v2_inside),
            Err(PackError::MalformedDescriptor { .. })
        ));
        let extra = envelope.replacen('{', r#"{"extra":1,"#, 1);
        assert!(matches!(
            decode(&extra),
            Err(PackError::MalformedDescriptor { .. })
        ));
    }

    /// The fast path and serde_json read the writer's descriptors alike,
    /// with metadata that needs escaping (serde_json reads those) or not.
    #[test]
    fn the_canonical_fast_path_agrees_with_serde_json() {
        use crate::{PackLimits, PackWriter, RecordMetadata};
        let mut plain = 0;
        for (tenant, tags, shape) in [
            ("t", vec![], vec![]),
            ("t", vec![("a", "1"), ("b", "")], vec![2, 3, 0]),
            ("q\"uote", vec![("k", "v")], vec![4]),
            ("ü ☃", vec![("c\u{1}", "\\")], vec![1, 1, 1, 1, 1]),
        ] {
            let mut writer = PackWriter::new(Uuid::from_u128(9), PackLimits::default());
            for i in 0..3_u64 {
                let dtype = [Dtype::F32, Dtype::I64, Dtype::BOOL][i as usize];
                let metadata = RecordMetadata {
                    identity: CaptureIdentity {
                        tenant_id: tenant.to_owned(),
                        experiment_id: "e".to_owned(),
                        run_id: "r".to_owned(),
                        captured_at_ns: u64::MAX - i,
                        capture_id: Uuid::from_u128(u128::from(i)),
                    },
                    model: "m".to_owned(),
                    module_path: format!("layers.{i}"),
                    hook: "h".to_owned(),
                    step: i,
                    tensor_name: "n".to_owned(),
                    dtype,
                    shape: shape.clone(),
                    tags: tags
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                };
                let len = dtype.byte_length(&shape).expect("small") as usize;
                writer.append(metadata, vec![0; len]).expect("valid");
            }
            let sealed = writer.seal().expect("seals");
            let text = &crate::header::descriptor_value(&sealed.bytes).expect("valid");
            plain += usize::from(canonical::parse(text).is_some());
            let fast = records(text).expect("valid");
            assert_eq!(fast, records_by_serde(text).expect("valid"), "{text}");
            let facts = |f: DescriptorFacts<'_>| {
                let records: Vec<_> = f
                    .records
                    .into_iter()
                    .map(|r| {
                        (
                            r.tenant_id.into_owned(),
                            r.capture_id,
                            r.dtype,
                            r.shape,
                            r.payload_sha256,
                        )
                    })
                    .collect();
                (f.pack_id, records)
            };
            assert_eq!(
                facts(super::facts(text, 2).expect("valid")),
                facts(facts_by_serde(text, 2).expect("valid")),
                "{text}"
            );
        }
        assert_eq!(
            plain, 2,
            "the two descriptors without escapes take the fast path"
        );
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
