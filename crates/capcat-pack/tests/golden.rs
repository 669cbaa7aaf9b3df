//! Golden vectors: the committed pack in `tests/data/golden/` must be
//! exactly what this build writes for the same records, and its manifest
//! (pack digest, locators, per-record digests and summaries) must equal what
//! this build computes, with type-strict JSON equality (1.0 is not 1).
//!
//! Regenerate (only when the format or summary version changes on purpose):
//! `CAPCAT_BLESS_GOLDEN=1 cargo test -p capcat-pack --test golden`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use capcat_pack::{
    CaptureIdentity, Dtype, FORMAT_VERSION, InMemory, PackError, PackLimits, PackReader,
    PackWriter, RecordLocator, RecordMetadata, SUMMARY_VERSION, SealedPack, Sha256Digest,
    TensorSummary, TensorValues, hydrate, tensor_key,
};
use half::{bf16, f16};
use serde_json::{Value, json};
use uuid::Uuid;

const PACK_FILE: &str = "pack.safetensors";
const MANIFEST_FILE: &str = "manifest.json";
/// The version-1 golden pack and manifest, as version 1 wrote them (never
/// regenerated: no build writes version 1 any more).
const V1_DIR: &str = "v1";

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/golden")
}

/// The golden records: every dtype, the seed's int64 case, i64::MIN, a
/// zero-sized tensor, a scalar, NaN/inf, -0.0 and half-precision subnormals.
fn golden_values() -> Vec<(&'static str, Vec<u64>, TensorValues)> {
    vec![
        (
            "f64",
            vec![2, 3],
            TensorValues::F64(vec![0.0, -0.0, 1.5, -2.25, 1e300, f64::MIN_POSITIVE]),
        ),
        (
            "f32_non_finite",
            vec![5],
            TensorValues::F32(vec![1.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -3.5]),
        ),
        (
            "f16",
            vec![2, 2],
            TensorValues::F16(vec![
                f16::ONE,
                f16::from_bits(0x0001),
                f16::MAX,
                f16::from_f32(-0.5),
            ]),
        ),
        (
            "bf16",
            vec![4],
            TensorValues::BF16(vec![
                bf16::ONE,
                bf16::from_f32(-2.0),
                bf16::from_bits(0x0001),
                bf16::from_f32(3.140625),
            ]),
        ),
        (
            "i64_seed_near_max",
            vec![2],
            TensorValues::I64(vec![i64::MAX - 1, i64::MAX]),
        ),
        ("i64_min", vec![3], TensorValues::I64(vec![i64::MIN, 0, 7])),
        (
            "i32",
            vec![3],
            TensorValues::I32(vec![i32::MIN, 0, i32::MAX]),
        ),
        (
            "i16",
            vec![2, 2],
            TensorValues::I16(vec![-3, 0, 5, i16::MAX]),
        ),
        ("i8", vec![3], TensorValues::I8(vec![i8::MIN, 0, i8::MAX])),
        ("u8", vec![4], TensorValues::U8(vec![0, 1, 128, 255])),
        ("bool", vec![3], TensorValues::Bool(vec![true, false, true])),
        ("f32_zero_sized", vec![0, 4], TensorValues::F32(vec![])),
        ("f64_scalar", vec![], TensorValues::F64(vec![42.0])),
    ]
}

fn golden_pack() -> SealedPack {
    let pack_id = Uuid::from_u128(0x0dd5_a1e5_0000_4000_8000_0000_0000_0001);
    let mut writer = PackWriter::new(pack_id, PackLimits::default());
    for (i, (name, shape, values)) in golden_values().into_iter().enumerate() {
        let i = i as u64;
        let metadata = RecordMetadata {
            identity: CaptureIdentity {
                tenant_id: "tenant-golden".to_owned(),
                experiment_id: "experiment-golden".to_owned(),
                run_id: "run-golden".to_owned(),
                captured_at_ns: 1_764_000_000_000_000_000 + i,
                capture_id: Uuid::from_u128(
                    0x0dd5_a1e5_0000_4000_8000_0000_0001_0000 + u128::from(i),
                ),
            },
            model: "golden/model".to_owned(),
            module_path: format!("model.layers.{i}.mlp"),
            hook: "forward_output".to_owned(),
            step: 100 + i,
            tensor_name: name.to_owned(),
            dtype: values.dtype(),
            shape,
            tags: BTreeMap::from([("purpose".to_owned(), "golden".to_owned())]),
        };
        writer
            .append_values(metadata, &values)
            .expect("golden records are valid");
    }
    writer.seal().expect("the golden pack seals")
}

fn manifest(sealed: &SealedPack, reader: &PackReader) -> Value {
    json!({
        "format_version": FORMAT_VERSION,
        "summary_version": SUMMARY_VERSION,
        "pack": {
            "file": PACK_FILE,
            "pack_id": sealed.info.pack_id,
            "sha256": sealed.info.pack_sha256,
            "crc64nvme": format!("{:016x}", sealed.info.crc64nvme),
            "byte_length": sealed.info.byte_length,
            "record_count": sealed.info.records.len(),
        },
        "records": record_manifest(reader, &sealed.info.records),
    })
}

/// The manifest of a version-1 pack as version 1 wrote it (no CRC: version
/// 1 had none), computed from what this build's reader reports.
fn manifest_v1(reader: &PackReader) -> Value {
    let info = reader.info();
    json!({
        "format_version": info.format_version,
        "summary_version": SUMMARY_VERSION,
        "pack": {
            "file": PACK_FILE,
            "pack_id": info.pack_id,
            "sha256": info.pack_sha256,
            "byte_length": info.byte_length,
            "record_count": info.records.len(),
        },
        "records": record_manifest(reader, &info.records),
    })
}

fn record_manifest(reader: &PackReader, locators: &[RecordLocator]) -> Vec<Value> {
    reader
        .records()
        .iter()
        .zip(locators)
        .map(|(record, locator)| {
            let summary: TensorSummary = reader.summary(record.index).expect("verified record");
            json!({
                "index": record.index,
                "key": tensor_key(record.index),
                "capture_id": record.metadata.identity.capture_id,
                "tensor_name": record.metadata.tensor_name,
                "dtype": record.metadata.dtype,
                "shape": record.metadata.shape,
                "offset": locator.offset,
                "length": locator.length,
                "sha256": locator.sha256,
                "summary": summary,
            })
        })
        .collect()
}

/// Type-strict JSON equality: `1` and `1.0` differ (serde_json keeps
/// integers and floats apart in `Number`), and so do key sets. Returns the
/// path of the first difference.
fn strict_diff(path: &str, golden: &Value, built: &Value) -> Option<String> {
    match (golden, built) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|k| match (a.get(k), b.get(k)) {
                (Some(x), Some(y)) => strict_diff(&format!("{path}.{k}"), x, y),
                _ => Some(format!("{path}.{k}: present on one side only")),
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| strict_diff(&format!("{path}[{i}]"), x, y)),
        (Value::Number(a), Value::Number(b)) => {
            let same_kind = (a.is_f64() == b.is_f64()) && (a.is_i64() == b.is_i64());
            (!same_kind || a != b).then(|| format!("{path}: golden {a} vs built {b}"))
        }
        (a, b) => (a != b).then(|| format!("{path}: golden {a} vs built {b}")),
    }
}

#[test]
fn strict_diff_tells_integers_from_floats() {
    assert!(strict_diff("$", &json!({"a": 1}), &json!({"a": 1.0})).is_some());
    assert!(strict_diff("$", &json!({"a": [1.0]}), &json!({"a": [1.0]})).is_none());
    assert!(strict_diff("$", &json!({"a": 1}), &json!({"a": 1, "b": 2})).is_some());
    assert!(
        strict_diff(
            "$",
            &json!(9_223_372_036_854_775_808u64),
            &json!(9_223_372_036_854_775_807i64)
        )
        .is_some()
    );
}

#[test]
fn golden_pack_and_manifest_are_reproduced_exactly() {
    let sealed = golden_pack();
    let reader = PackReader::from_bytes_expecting(sealed.bytes.clone(), sealed.info.pack_sha256)
        .expect("the golden pack reads back");
    let built_manifest = manifest(&sealed, &reader);
    let dir = golden_dir();
    if std::env::var_os("CAPCAT_BLESS_GOLDEN").is_some() {
        std::fs::create_dir_all(&dir).expect("create the golden directory");
        std::fs::write(dir.join(PACK_FILE), &sealed.bytes).expect("write the golden pack");
        let text = serde_json::to_string_pretty(&built_manifest).expect("manifest serializes");
        std::fs::write(dir.join(MANIFEST_FILE), text + "\n").expect("write the golden manifest");
    }
    let committed = std::fs::read(dir.join(PACK_FILE)).expect("the golden pack is committed");
    assert!(
        committed == sealed.bytes,
        "the pack this build writes differs from tests/data/golden/{PACK_FILE} \
         ({} vs {} bytes); a format change needs a new version, not a re-bless",
        committed.len(),
        sealed.bytes.len()
    );
    let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).expect("the manifest is committed");
    let golden: Value = serde_json::from_str(&text).expect("the manifest is JSON");
    if let Some(difference) = strict_diff("$", &golden, &built_manifest) {
        panic!("golden manifest differs: {difference}");
    }
}

#[test]
fn golden_pack_opens_from_disk_and_decodes_every_dtype() {
    let reader = PackReader::from_file(golden_dir().join(PACK_FILE)).expect("golden pack verifies");
    let dtypes: std::collections::BTreeSet<Dtype> =
        reader.records().iter().map(|r| r.metadata.dtype).collect();
    assert_eq!(dtypes.len(), Dtype::ALL.len(), "every dtype is covered");
    for (i, (_, _, values)) in golden_values().into_iter().enumerate() {
        let decoded = reader.values(i).expect("decodes");
        // Compare bytes, so NaN payloads compare equal to themselves.
        assert_eq!(decoded.to_le_bytes(), values.to_le_bytes(), "record {i}");
    }
}

/// The version-1 golden pack (the golden records as version 1 sealed them)
/// opens in this build, verifies against the whole-file SHA-256 version 1
/// recorded, reports exactly its version-1 manifest, and gives back every
/// payload byte for byte, whole and by hydration.
#[test]
fn the_version_1_golden_pack_reads_byte_for_byte() {
    let dir = golden_dir().join(V1_DIR);
    let bytes = std::fs::read(dir.join(PACK_FILE)).expect("the version-1 pack is committed");
    let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).expect("its manifest");
    let golden: Value = serde_json::from_str(&text).expect("the manifest is JSON");
    let recorded: Sha256Digest = golden["pack"]["sha256"]
        .as_str()
        .expect("a digest")
        .parse()
        .expect("64 hex digits");
    assert_eq!(
        Sha256Digest::of(&bytes),
        recorded,
        "version 1's pack digest"
    );

    let reader = PackReader::from_bytes_expecting(bytes.clone(), recorded)
        .expect("a version-1 pack reads and verifies");
    assert_eq!(reader.format_version(), 1);
    assert_eq!(reader.pack_sha256(), recorded);
    assert_eq!(reader.bytes().as_ref(), bytes.as_slice());
    if let Some(difference) = strict_diff("$", &golden, &manifest_v1(&reader)) {
        panic!("version-1 golden manifest differs: {difference}");
    }
    let from_disk = PackReader::from_file(dir.join(PACK_FILE)).expect("opens from disk");
    assert_eq!(from_disk.info(), reader.info());

    let current = PackReader::from_bytes(golden_pack().bytes).expect("version 2");
    assert_eq!(
        reader.records(),
        current.records(),
        "same metadata and digests"
    );
    let mut source = InMemory(bytes::Bytes::from(bytes.clone()));
    for (i, (_, _, values)) in golden_values().into_iter().enumerate() {
        let payload = reader.payload(i).expect("a record");
        assert_eq!(payload, values.to_le_bytes(), "record {i}");
        assert_eq!(payload, current.payload(i).expect("a record"), "record {i}");
        let hydrated = hydrate(&mut source, &reader.info().records[i]).expect("hydrates");
        assert_eq!(hydrated, payload, "record {i}");
    }

    // Version 1's whole-file digest is what covers its header padding: a
    // changed padding byte reads without an expected digest, and is refused
    // with one.
    let n = usize::try_from(u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")))
        .expect("a small header");
    assert_eq!(
        bytes[8 + n - 1],
        b' ',
        "the version-1 golden header is padded"
    );
    let mut padded = bytes.clone();
    padded[8 + n - 1] = b'\t';
    assert!(PackReader::from_bytes(padded.clone()).is_ok());
    assert!(matches!(
        PackReader::from_bytes_expecting(padded, recorded),
        Err(PackError::PackChecksumMismatch { .. })
    ));
}

/// The fuzz seeds' packs (`fuzz/seeds/make_seeds.py`, an independent
/// Python writer of docs/pack-format.md) open and verify, each in the
/// version its name says: a seed that only near-misses the format would
/// start every fuzzing run below the checks it is meant to reach.
#[test]
fn the_fuzz_seed_packs_open_in_their_version() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/pack_reader");
    let mut opened = 0;
    for entry in std::fs::read_dir(&dir).expect("the seed directory") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|e| e != "pack") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("a seed");
        let reader = capcat_pack::PackReader::from_bytes(bytes)
            .unwrap_or_else(|e| panic!("{} does not open: {e}", path.display()));
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let version = if stem.ends_with("-v1") { 1 } else { 2 };
        assert_eq!(reader.format_version(), version, "{}", path.display());
        opened += 1;
    }
    assert_eq!(opened, 8, "four packs, each in two versions");
}
