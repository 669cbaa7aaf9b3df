//! Every bad input the format names gets a typed error, never a panic.

mod common;

use bytes::Bytes;
use capcat_pack::{
    DIGEST_KEY, Dtype, MAX_HEADER_BYTES, METADATA_KEY, PackError, PackLimits, PackReader,
    PackWriter, SealedPack, Sha256Digest, SummaryScalar, TensorSummary, TensorValues,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::Value;
use uuid::Uuid;

/// A small valid pack: f32 [2,2], bool [3], i64 [2].
fn sample() -> SealedPack {
    let mut writer = PackWriter::new(Uuid::from_u128(7), PackLimits::default());
    writer
        .append_values(
            common::meta(0, Dtype::F32, &[2, 2]),
            &TensorValues::F32(vec![1.0, 2.0, 3.0, 4.0]),
        )
        .expect("valid");
    writer
        .append_values(
            common::meta(1, Dtype::BOOL, &[3]),
            &TensorValues::Bool(vec![true, false, true]),
        )
        .expect("valid");
    writer
        .append_values(
            common::meta(2, Dtype::I64, &[2]),
            &TensorValues::I64(vec![-1, i64::MAX]),
        )
        .expect("valid");
    writer.seal().expect("seals")
}

fn header_len(bytes: &[u8]) -> usize {
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize
}

/// Rewrites a pack's header JSON with `edit`, keeps its data section and
/// reseals the pack digest, so that only the edit is wrong. A header whose
/// `__metadata__` still has both keys is written with the digest first, at
/// its fixed offset, as the format requires.
fn with_header(bytes: &[u8], edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Vec<u8> {
    let n = header_len(bytes);
    let mut header: serde_json::Map<String, Value> =
        serde_json::from_slice(&bytes[8..8 + n]).expect("valid header");
    edit(&mut header);
    let metadata = header.remove("__metadata__");
    let mut text = Vec::new();
    match metadata {
        Some(Value::Object(mut metadata)) if metadata.contains_key(DIGEST_KEY) => {
            metadata.remove(DIGEST_KEY);
            text.extend(
                format!(r#"{{"__metadata__":{{"{DIGEST_KEY}":"{}""#, "0".repeat(64)).bytes(),
            );
            for (key, value) in &metadata {
                text.extend(format!(",{}:{}", Value::from(key.as_str()), value).bytes());
            }
            text.push(b'}');
            for (key, value) in &header {
                text.extend(format!(",{}:{}", Value::from(key.as_str()), value).bytes());
            }
            text.push(b'}');
        }
        other => {
            if let Some(metadata) = other {
                header.insert("__metadata__".to_owned(), metadata);
            }
            text = serde_json::to_vec(&header).expect("serializes");
        }
    }
    with_header_text(bytes, &text)
}

/// The header JSON of the pack `bytes`, without its padding.
fn header_text(bytes: &[u8]) -> &str {
    std::str::from_utf8(&bytes[8..8 + header_len(bytes)])
        .expect("utf-8")
        .trim_end()
}

/// A pack of the header JSON `text` and the data section of the pack
/// `bytes`: the length prefix, the header resealed (when its digest slot is
/// where the format puts it; see [`reseal`]), then the data.
fn with_header_text(bytes: &[u8], text: &[u8]) -> Vec<u8> {
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend(text);
    reseal(&mut out);
    out.extend(&bytes[8 + header_len(bytes)..]);
    out
}

/// Writes the pack digest of `head` (the length prefix and the header) into
/// its slot, computed as docs/pack-format.md defines it: SHA-256 of the
/// header with the slot's 64 digits read as `'0'`.
fn reseal(head: &mut [u8]) {
    let prefix = format!(r#"{{"__metadata__":{{"{DIGEST_KEY}":""#);
    if !head[8..].starts_with(prefix.as_bytes()) {
        return;
    }
    let slot = 8 + prefix.len();
    head[slot..slot + 64].fill(b'0');
    let digest = Sha256Digest::of(head);
    head[slot..slot + 64].copy_from_slice(digest.to_hex().as_bytes());
}

/// Rewrites the descriptor with `edit` and reseals the header.
fn with_descriptor(bytes: &[u8], edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    with_header(bytes, |header| {
        let text = header["__metadata__"][METADATA_KEY]
            .as_str()
            .expect("string")
            .to_owned();
        let mut descriptor: Value = serde_json::from_str(&text).expect("json");
        edit(&mut descriptor);
        header["__metadata__"][METADATA_KEY] = Value::String(descriptor.to_string());
    })
}

fn open(bytes: Vec<u8>) -> PackError {
    PackReader::from_bytes(bytes).expect_err("must be refused")
}

#[test]
fn the_helpers_leave_a_valid_pack_valid() {
    // Guards the tests below: each fails for its own reason, not because the
    // rewriting helpers break the pack.
    let pack = sample();
    PackReader::from_bytes(with_header(&pack.bytes, |_| {})).expect("header round trip");
    PackReader::from_bytes(with_descriptor(&pack.bytes, |_| {})).expect("descriptor round trip");
}

#[test]
fn every_truncation_is_refused() {
    let pack = sample();
    for len in 0..pack.bytes.len() {
        let error = open(pack.bytes[..len].to_vec());
        assert!(
            matches!(
                error,
                PackError::Truncated { .. }
                    | PackError::HeaderLengthPastEnd { .. }
                    | PackError::OffsetOutOfRange { .. }
                    | PackError::DataSectionNotCovered { .. }
            ),
            "prefix of {len} bytes: {error}"
        );
    }
    assert!(matches!(
        open(vec![1, 2, 3]),
        PackError::Truncated {
            needed: 8,
            available: 3,
            ..
        }
    ));
}

#[test]
fn header_length_past_the_end_is_refused() {
    let mut bytes = sample().bytes.to_vec();
    let past = bytes.len() as u64;
    bytes[..8].copy_from_slice(&past.to_le_bytes());
    assert!(matches!(open(bytes), PackError::HeaderLengthPastEnd { .. }));
}

#[test]
fn a_huge_header_length_is_refused_without_allocating() {
    let mut bytes = sample().bytes.to_vec();
    bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(open(bytes), PackError::HeaderTooLarge { .. }));
    // The limit itself is a length a header may have; one byte more is not.
    for (len, too_large) in [(MAX_HEADER_BYTES, false), (MAX_HEADER_BYTES + 1, true)] {
        let mut bytes = sample().bytes.to_vec();
        bytes[..8].copy_from_slice(&len.to_le_bytes());
        let error = open(bytes);
        assert_eq!(
            matches!(error, PackError::HeaderTooLarge { .. }),
            too_large,
            "{len}: {error}"
        );
    }
}

#[test]
fn a_header_that_is_not_json_is_refused() {
    let mut bytes = sample().bytes.to_vec();
    bytes[8] = b'[';
    assert!(matches!(
        open(bytes.clone()),
        PackError::HeaderNotJson { .. }
    ));
    bytes[8] = 0xff;
    assert!(matches!(open(bytes), PackError::HeaderNotJson { .. }));
}

/// A header of the wrong JSON shape is refused with an error that says
/// what was expected, and a bad record entry's error names its key as the
/// header spells it.
#[test]
fn a_header_of_the_wrong_shape_says_what_was_expected_and_where() {
    let pack = sample();
    let error = open(with_header_text(&pack.bytes, b"[]")).to_string();
    assert!(
        error.contains("expected a safetensors header object"),
        "{error}"
    );
    let error = open(with_header(&pack.bytes, |h| {
        h["__metadata__"] = serde_json::json!(["capcat"]);
    }))
    .to_string();
    assert!(
        error.contains("expected an object of strings, each key once"),
        "{error}"
    );
    let error = open(with_header(&pack.bytes, |h| {
        h["record/00000001"]["dtype"] = 5.into();
    }));
    assert!(
        matches!(error, PackError::MalformedHeader { ref key, .. } if key == "record/00000001"),
        "{error}"
    );
}

/// Tensors a pack's writer never writes are refused by name, however many
/// there are, even when they tile the data section.
#[test]
fn tensors_that_are_not_records_are_refused_by_name() {
    let pack = sample();
    let data_len = (pack.bytes.len() - 8 - header_len(&pack.bytes)) as u64;
    let bytes = with_header(&pack.bytes, |h| {
        for key in ["extra/b", "extra/a"] {
            h.insert(
                key.to_owned(),
                serde_json::json!({"dtype": "U8", "shape": [0], "data_offsets": [data_len, data_len]}),
            );
        }
    });
    let error = open(bytes);
    assert!(
        matches!(error, PackError::UnexpectedTensor { ref key } if key == "extra/a"),
        "{error}"
    );
}

#[test]
fn overlapping_offsets_are_refused() {
    let pack = sample();
    // Data section: I64 [0,16), F32 [16,32), BOOL [32,35). Move the BOOL
    // tensor onto the last 3 bytes of the F32 one and drop its own bytes, so
    // the overlap is the only thing wrong (the ranges still end at the end).
    let mut bytes = with_header(&pack.bytes, |h| {
        let entry = h.get_mut("record/00000001").expect("present");
        assert_eq!(entry["data_offsets"], serde_json::json!([32, 35]));
        entry["data_offsets"] = serde_json::json!([29, 32]);
    });
    bytes.truncate(bytes.len() - 3);
    let error = open(bytes);
    assert!(
        matches!(
            error,
            PackError::OffsetsNotContiguous {
                begin: 29,
                previous_end: 32,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn out_of_range_offsets_are_refused() {
    let pack = sample();
    // Past the data section, and ending before it begins.
    for offsets in [
        serde_json::json!([40, 1_000_000]),
        serde_json::json!([5, 2]),
    ] {
        let bytes = with_header(&pack.bytes, |h| {
            h.get_mut("record/00000001").expect("present")["data_offsets"] = offsets.clone();
        });
        let error = open(bytes);
        assert!(
            matches!(error, PackError::OffsetOutOfRange { ref key, .. } if key == "record/00000001"),
            "{offsets}: {error}"
        );
    }
}

#[test]
fn a_payload_checksum_mismatch_is_refused() {
    let pack = sample();
    let locator = pack.info.records[2];
    let mut bytes = pack.bytes.to_vec();
    bytes[locator.offset as usize + 3] ^= 0x01;
    assert!(matches!(
        open(bytes),
        PackError::PayloadChecksumMismatch { index: 2, capture_id, .. } if capture_id == locator.capture_id
    ));
}

#[test]
fn a_pack_checksum_mismatch_is_refused() {
    let pack = sample();
    let wrong = Sha256Digest::of(b"another pack");
    assert!(matches!(
        PackReader::from_bytes_expecting(pack.bytes.clone(), wrong),
        Err(PackError::PackChecksumMismatch { .. })
    ));
    PackReader::from_bytes_expecting(pack.bytes, pack.info.pack_sha256).expect("right digest");
}

#[test]
fn a_pack_file_is_checked_against_its_expected_digest() {
    let pack = sample();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("pack.safetensors");
    std::fs::write(&path, &pack.bytes).expect("write");
    let reader = PackReader::from_file_expecting(&path, pack.info.pack_sha256).expect("verifies");
    assert_eq!(reader.info(), pack.info);
    assert!(matches!(
        PackReader::from_file_expecting(&path, Sha256Digest::of(b"other")),
        Err(PackError::PackChecksumMismatch { .. })
    ));
}

#[test]
fn a_tampered_header_fails_the_pack_digest() {
    // The same edits, resealed, are valid packs: only the digest tells.
    let pack = sample();
    let n = header_len(&pack.bytes);
    let text = std::str::from_utf8(&pack.bytes[8..8 + n]).expect("utf-8");
    // In the descriptor (a different step), in the digest itself, and in
    // the padding (a tab is JSON whitespace too).
    let step = text.find(r#"\"step\":1,"#).expect("record 1's step") + 9;
    let digit = if pack.bytes[48] == b'0' { b'1' } else { b'0' };
    let mut edits = vec![(8 + step, b'7'), (48, digit)];
    if text.ends_with(' ') {
        edits.push((8 + n - 1, b'\t'));
    }
    for (at, byte) in edits {
        let mut bytes = pack.bytes.to_vec();
        assert_ne!(bytes[at], byte);
        bytes[at] = byte;
        let error = open(bytes.clone());
        assert!(
            matches!(error, PackError::HeaderChecksumMismatch { .. }),
            "byte {at}: {error}"
        );
        reseal(&mut bytes[..8 + n]);
        PackReader::from_bytes(bytes).expect("the same edit, resealed, is a valid pack");
    }
}

#[test]
fn a_pack_digest_not_at_its_place_is_refused() {
    let pack = sample();
    let n = header_len(&pack.bytes);
    let header: serde_json::Map<String, Value> =
        serde_json::from_slice(&pack.bytes[8..8 + n]).expect("valid header");
    // Both keys, valid JSON, but serde_json writes the keys sorted, so the
    // digest follows the descriptor instead of sitting at its offset (and
    // `reseal` leaves it as it is).
    let sorted = serde_json::to_vec(&header).expect("serializes");
    let error = open(with_header_text(&pack.bytes, &sorted));
    assert!(
        matches!(error, PackError::MalformedHeader { ref key, .. } if key == "__metadata__"),
        "{error}"
    );
    // No digest at all.
    let bytes = with_header(&pack.bytes, |h| {
        let Value::Object(m) = &mut h["__metadata__"] else {
            panic!("object")
        };
        m.remove(DIGEST_KEY);
    });
    let error = open(bytes);
    assert!(
        matches!(error, PackError::MalformedHeader { ref key, .. } if key == "__metadata__"),
        "{error}"
    );
}

#[test]
fn every_flipped_byte_is_caught_without_an_expected_digest() {
    // The pack digest covers every header byte (prefix, digest, descriptor,
    // tensor entries, padding) and the payload digests cover the data
    // section, so no single changed byte opens, whatever its region.
    let pack = sample();
    for at in 0..pack.bytes.len() {
        for mask in (0..8).map(|bit| 1u8 << bit) {
            let mut bytes = pack.bytes.to_vec();
            bytes[at] ^= mask;
            assert!(
                PackReader::from_bytes(bytes).is_err(),
                "byte {at} ^ {mask:#04x} was accepted"
            );
        }
    }
}

/// `sample()` rewritten as version 1 lays out its header: the `capcat`
/// value an envelope around the descriptor (with `edit` applied to the
/// descriptor text), no pack digest key.
fn as_version_1(edit: impl FnOnce(String) -> String) -> Vec<u8> {
    in_version_1_envelope(
        |descriptor| descriptor.replacen(r#"{"format_version":2,"#, r#"{"format_version":1,"#, 1),
        edit,
    )
}

/// `sample()` with its descriptor, as `declare` rewrites it, in a version-1
/// envelope whose digest covers that text; `edit` then changes the text
/// after the digest was taken. No pack digest key.
fn in_version_1_envelope(
    declare: impl FnOnce(&str) -> String,
    edit: impl FnOnce(String) -> String,
) -> Vec<u8> {
    with_header(&sample().bytes, |h| {
        let Value::Object(m) = &mut h["__metadata__"] else {
            panic!("object")
        };
        m.remove(DIGEST_KEY);
        let descriptor = declare(m[METADATA_KEY].as_str().expect("string"));
        let envelope = serde_json::json!({
            "format_version": 1,
            "descriptor_sha256": Sha256Digest::of(descriptor.as_bytes()).to_hex(),
            "descriptor": edit(descriptor),
        });
        m.insert(METADATA_KEY.to_owned(), Value::String(envelope.to_string()));
    })
}

#[test]
fn a_version_1_header_is_read_by_the_version_1_rules() {
    let reader = PackReader::from_bytes(as_version_1(|d| d)).expect("version 1 reads");
    assert_eq!(reader.format_version(), 1);
    assert_eq!(reader.info().format_version, 1);
    assert_eq!(
        reader.records(),
        PackReader::from_bytes(sample().bytes)
            .expect("valid")
            .records()
    );
    // Its descriptor digest is checked...
    let error = open(as_version_1(|d| d.replacen("run", "RUN", 1)));
    assert!(
        matches!(error, PackError::DescriptorChecksumMismatch { .. }),
        "{error}"
    );
    // ...and it has exactly one metadata key.
    let bytes = with_header(&as_version_1(|d| d), |h| {
        h["__metadata__"][DIGEST_KEY] = "0".repeat(64).into();
    });
    let error = open(bytes);
    assert!(
        matches!(error, PackError::MalformedHeader { ref key, .. } if key == "__metadata__"),
        "{error}"
    );
    // Its payloads are verified as in version 2.
    let mut bytes = as_version_1(|d| d);
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    assert!(matches!(
        open(bytes),
        PackError::PayloadChecksumMismatch { .. }
    ));
}

/// A version-1 envelope whose descriptor says it is of version 2: the
/// descriptor is refused, and the error names the envelope as what
/// declared the version.
#[test]
fn a_descriptor_that_contradicts_its_envelope_is_refused_naming_the_envelope() {
    let as_written = |descriptor: &str| {
        assert!(descriptor.starts_with(r#"{"format_version":2,"#));
        descriptor.to_owned()
    };
    let error = open(in_version_1_envelope(as_written, |d| d)).to_string();
    assert!(
        error.contains("the descriptor says format_version 2 but the envelope says 1"),
        "{error}"
    );
}

/// A free-text field or the tags of another JSON type are refused with an
/// error that says what was expected (the descriptor here is re-spelled,
/// so it is read by `serde_json`, not the writer's fast path).
#[test]
fn a_descriptor_field_of_the_wrong_type_is_refused_saying_what_was_expected() {
    let cases: [(&str, Value, &str); 4] = [
        ("model", 5.into(), "expected a string"),
        ("tags", serde_json::json!({"k": 5}), "expected a string"),
        (
            "tags",
            serde_json::json!(["k"]),
            "expected an object of strings",
        ),
        (
            "payload_sha256",
            5.into(),
            "expected 64 lowercase hex digits",
        ),
    ];
    for (field, value, expected) in cases {
        let bytes = with_descriptor(&sample().bytes, |d| {
            d["records"][0][field] = value.clone();
        });
        let error = open(bytes).to_string();
        assert!(error.contains(expected), "{field} = {value}: {error}");
    }
}

#[test]
fn an_unknown_format_version_is_refused() {
    for version in [0, 3] {
        let bytes = with_descriptor(&sample().bytes, |d| d["format_version"] = version.into());
        let error = open(bytes);
        assert!(
            matches!(
                error,
                PackError::UnsupportedFormatVersion { found, supported: 2 } if found == version
            ),
            "{error}"
        );
    }
}

#[test]
fn a_later_version_is_refused_as_such_whatever_its_entries_hold() {
    // A format-3 pack whose entries use a dtype this build does not know
    // (and that overlap): the version is what the reader must report, not
    // the dtype or the layout, which are that version's to define.
    let bytes = with_header(&sample().bytes, |h| {
        let mut descriptor: Value =
            serde_json::from_str(h["__metadata__"][METADATA_KEY].as_str().expect("string"))
                .expect("json");
        descriptor["format_version"] = 3.into();
        h["__metadata__"][METADATA_KEY] = Value::String(descriptor.to_string());
        let entry = h.get_mut("record/00000000").expect("present");
        entry["dtype"] = "U16".into();
        entry["data_offsets"] = serde_json::json!([0, 1]);
    });
    let error = open(bytes);
    assert!(
        matches!(error, PackError::UnsupportedFormatVersion { .. }),
        "{error}"
    );
}

#[test]
fn a_shape_that_disagrees_with_the_byte_length_is_refused() {
    let bytes = with_header(&sample().bytes, |h| {
        h.get_mut("record/00000000").expect("present")["shape"] = serde_json::json!([2, 3]);
    });
    assert!(matches!(open(bytes), PackError::ShapeMismatch { .. }));
}

#[test]
fn an_entry_that_disagrees_with_the_descriptor_is_refused() {
    // Same byte length, different dtype: only the descriptor can tell.
    let bytes = with_header(&sample().bytes, |h| {
        h.get_mut("record/00000000").expect("present")["dtype"] = "I32".into();
    });
    assert!(matches!(
        open(bytes),
        PackError::EntryDisagrees { field: "dtype", .. }
    ));
    let bytes = with_header(&sample().bytes, |h| {
        h.get_mut("record/00000000").expect("present")["shape"] = serde_json::json!([4]);
    });
    assert!(matches!(
        open(bytes),
        PackError::EntryDisagrees { field: "shape", .. }
    ));
}

#[test]
fn a_duplicate_header_key_is_refused() {
    let pack = sample();
    let text = header_text(&pack.bytes);
    // Repeat the first tensor entry verbatim: JSON parsers keep one of the
    // two silently, so the reader must refuse rather than pick one.
    // Resealed, so only the repeated key is wrong.
    let first = text.find("\"record/").expect("an entry");
    let entry_end = first + text[first..].find('}').expect("entry end") + 1;
    let doubled = format!("{},{}", &text[..entry_end], &text[first..]);
    let error = open(with_header_text(&pack.bytes, doubled.as_bytes()));
    assert!(
        matches!(error, PackError::MalformedHeader { .. }),
        "{error}"
    );
}

#[test]
fn a_duplicate_metadata_key_is_refused() {
    let pack = sample();
    let text = header_text(&pack.bytes);
    // A bogus descriptor under a first `capcat` key, the real one after it:
    // a parser that keeps the last value reads the pack, one that keeps the
    // first does not. Resealed, so only the repeated key is wrong.
    let marker = r#","capcat":"#;
    let at = text.find(marker).expect("the descriptor key");
    let doubled = format!("{}{marker}\"{{}}\"{}", &text[..at], &text[at..]);
    let error = open(with_header_text(&pack.bytes, doubled.as_bytes()));
    assert!(
        matches!(&error, PackError::MalformedHeader { .. }) && error.to_string().contains("twice"),
        "{error}"
    );
}

#[test]
fn an_unknown_dtype_is_refused() {
    let bytes = with_header(&sample().bytes, |h| {
        h.get_mut("record/00000000").expect("present")["dtype"] = "U16".into();
    });
    assert!(matches!(open(bytes), PackError::UnknownDtype { .. }));
}

#[test]
fn a_plain_safetensors_file_is_not_a_pack() {
    let bytes = with_header(&sample().bytes, |h| {
        h.remove("__metadata__");
    });
    assert!(matches!(open(bytes), PackError::MissingDescriptor));
}

#[test]
fn extra_metadata_keys_are_refused() {
    let bytes = with_header(&sample().bytes, |h| {
        h["__metadata__"]["format"] = "pt".into();
    });
    assert!(matches!(open(bytes), PackError::MalformedHeader { key, .. } if key == "__metadata__"));
}

#[test]
fn missing_and_unexpected_tensors_are_refused() {
    let bytes = with_header(&sample().bytes, |h| {
        let entry = h.remove("record/00000001").expect("present");
        h.insert("stray".to_owned(), entry);
    });
    assert!(matches!(
        open(bytes),
        PackError::MissingTensor { index: 1, .. }
    ));
    let bytes = with_descriptor(&sample().bytes, |d| {
        d["records"].as_array_mut().expect("array").pop();
    });
    assert!(matches!(open(bytes), PackError::UnexpectedTensor { .. }));
}

#[test]
fn a_duplicate_capture_identity_is_refused_on_read() {
    let bytes = with_descriptor(&sample().bytes, |d| {
        d["records"][2]["capture_id"] = d["records"][0]["capture_id"].clone();
    });
    assert!(matches!(open(bytes), PackError::DuplicateCapture { .. }));
}

#[test]
fn a_bool_byte_other_than_zero_or_one_is_refused_on_read() {
    let pack = sample();
    let locator = pack.info.records[1];
    let mut bytes = pack.bytes.to_vec();
    bytes[locator.offset as usize] = 2;
    let new_digest = Sha256Digest::of(
        &bytes[locator.offset as usize..(locator.offset + locator.length) as usize],
    );
    let bytes = with_descriptor(&bytes, |d| {
        d["records"][1]["payload_sha256"] = Value::String(new_digest.to_hex());
    });
    assert!(matches!(
        open(bytes),
        PackError::InvalidBool {
            position: 0,
            byte: 2,
            ..
        }
    ));
}

#[test]
fn malformed_entries_and_descriptors_are_refused() {
    let pack = sample();
    let bytes = with_header(&pack.bytes, |h| {
        h.get_mut("record/00000000").expect("present")["extra"] = 1.into();
    });
    assert!(matches!(open(bytes), PackError::MalformedHeader { .. }));
    let bytes = with_header(&pack.bytes, |h| {
        h["__metadata__"]["capcat"] = "{".into();
    });
    assert!(matches!(open(bytes), PackError::MalformedDescriptor { .. }));
    let bytes = with_header(&pack.bytes, |h| {
        h["__metadata__"]["capcat"] = 5.into();
    });
    assert!(matches!(open(bytes), PackError::MalformedHeader { .. }));
    let bytes = with_descriptor(&pack.bytes, |d| d["records"][0]["step"] = (-1).into());
    assert!(matches!(open(bytes), PackError::MalformedDescriptor { .. }));
}

#[test]
fn writer_refuses_bad_records_and_leaves_the_pack_unchanged() {
    let limits = PackLimits::new(2, 16).expect("valid limits");
    let mut writer = PackWriter::new(Uuid::nil(), limits);
    let m = |i| common::meta(i, Dtype::F32, &[2]);
    assert!(matches!(
        writer.append(m(0), vec![0u8; 7]),
        Err(PackError::ShapeMismatch {
            expected: Some(8),
            actual: 7,
            ..
        })
    ));
    assert!(matches!(
        writer.append(common::meta(0, Dtype::BOOL, &[1]), vec![7u8]),
        Err(PackError::InvalidBool { byte: 7, .. })
    ));
    assert!(matches!(
        writer.append_values(m(0), &TensorValues::I32(vec![1, 2])),
        Err(PackError::DtypeMismatch { .. })
    ));
    assert!(matches!(
        writer.append(common::meta(0, Dtype::U8, &[u64::MAX, 2]), Bytes::new()),
        Err(PackError::ShapeMismatch { expected: None, .. })
    ));
    assert!(writer.is_empty(), "refused appends leave nothing behind");
    writer.append(m(0), vec![0u8; 8]).expect("fits");
    assert!(matches!(
        writer.append(m(0), vec![0u8; 8]),
        Err(PackError::DuplicateCapture { .. })
    ));
    assert!(matches!(
        writer.append(common::meta(1, Dtype::F64, &[2]), vec![0u8; 16]),
        Err(PackError::TooManyBytes {
            limit: 16,
            attempted: 24
        })
    ));
    writer.append(m(1), vec![0u8; 8]).expect("fits exactly");
    assert!(matches!(
        writer.append(common::meta(2, Dtype::U8, &[0]), Bytes::new()),
        Err(PackError::TooManyRecords { limit: 2 })
    ));
    assert_eq!((writer.len(), writer.payload_bytes()), (2, 16));
    PackReader::from_bytes(writer.seal().expect("seals").bytes).expect("reads");
    assert!(matches!(
        PackLimits::new(0, 1),
        Err(PackError::InvalidLimits { .. })
    ));
    assert!(matches!(
        PackLimits::new(1, 0),
        Err(PackError::InvalidLimits { .. })
    ));
    assert!(matches!(
        PackLimits::new(capcat_pack::MAX_RECORDS_CEILING + 1, 1),
        Err(PackError::InvalidLimits { .. })
    ));
}

#[test]
fn out_of_range_record_indexes_are_typed_errors() {
    let reader = PackReader::from_bytes(sample().bytes).expect("valid");
    assert!(matches!(
        reader.payload(3),
        Err(PackError::RecordIndexOutOfRange { index: 3, count: 3 })
    ));
    assert!(matches!(
        reader.values(9),
        Err(PackError::RecordIndexOutOfRange { .. })
    ));
}

#[test]
fn a_summary_or_crc_other_than_the_callers_is_refused_naming_the_first_difference() {
    let pack = sample();
    let reader = PackReader::from_bytes(pack.bytes.clone()).expect("valid");
    // Record 2 is I64 [-1, i64::MAX]: exact integer order statistics.
    let recomputed = reader.summary(2).expect("a record");
    assert_eq!(
        reader
            .verify_summary(2, &recomputed)
            .expect("its own summary"),
        recomputed
    );
    let refused = |expected: &TensorSummary| match reader.verify_summary(2, expected) {
        Err(PackError::SummaryMismatch {
            index: 2,
            field,
            expected,
            actual,
            ..
        }) => (field, expected, actual),
        other => panic!("expected a summary mismatch, got {other:?}"),
    };
    // The same value as a float is not the exact integer.
    let mut expected = recomputed.clone();
    expected.maximum = Some(SummaryScalar::Float(9.223_372_036_854_776e18));
    assert_eq!(
        refused(&expected),
        (
            "maximum",
            "9.223372036854776e18".to_owned(),
            "9223372036854775807".to_owned()
        )
    );
    // The first field that differs is named, in declaration order.
    let mut expected = recomputed.clone();
    expected.l2_norm = f64::from_bits(recomputed.l2_norm.to_bits() + 1);
    expected.nan_count = 1;
    assert_eq!(refused(&expected).0, "l2_norm");
    let mut expected = recomputed.clone();
    expected.zero_fraction = None;
    assert_eq!(
        refused(&expected),
        ("zero_fraction", "null".to_owned(), "0.0".to_owned())
    );

    // A float order statistic is compared bit for bit: -0.0 is not 0.0.
    let mut writer = PackWriter::new(Uuid::from_u128(8), PackLimits::default());
    writer
        .append_values(
            common::meta(0, Dtype::F32, &[2]),
            &TensorValues::F32(vec![-0.0, 0.0]),
        )
        .expect("valid");
    let zeros = PackReader::from_bytes(writer.seal().expect("seals").bytes).expect("valid");
    let mut expected = zeros.summary(0).expect("a record");
    assert_eq!(expected.minimum, Some(SummaryScalar::Float(-0.0)));
    expected.minimum = Some(SummaryScalar::Float(0.0));
    assert!(matches!(
        zeros.verify_summary(0, &expected),
        Err(PackError::SummaryMismatch {
            field: "minimum",
            ..
        })
    ));

    reader
        .verify_crc64nvme(pack.info.crc64nvme)
        .expect("the sealed CRC");
    let error = reader
        .verify_crc64nvme(pack.info.crc64nvme ^ 1)
        .expect_err("another CRC");
    assert!(
        matches!(error, PackError::Crc64NvmeMismatch { expected, actual, .. }
            if expected == pack.info.crc64nvme ^ 1 && actual == pack.info.crc64nvme),
        "{error}"
    );
}

#[test]
fn a_missing_file_is_an_io_error() {
    let error = PackReader::from_file("/nonexistent/capcat/pack").expect_err("no file");
    assert!(matches!(error, PackError::Io { .. }), "{error}");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    /// Arbitrary bytes never panic the reader.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if PackReader::from_bytes(bytes.clone()).is_ok() {
            prop_assert!(safetensors::SafeTensors::deserialize(&bytes).is_ok());
        }
    }
}
