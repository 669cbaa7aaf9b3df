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
    CaptureIdentity, Dtype, FORMAT_VERSION, PackLimits, PackReader, PackWriter, RecordMetadata,
    SUMMARY_VERSION, SealedPack, TensorSummary, TensorValues, tensor_key,
};
use half::{bf16, f16};
use serde_json::{Value, json};
use uuid::Uuid;

const PACK_FILE: &str = "pack.safetensors";
const MANIFEST_FILE: &str = "manifest.json";

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
    let records: Vec<Value> = reader
        .records()
        .iter()
        .zip(&sealed.info.records)
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
        .collect();
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
        "records": records,
    })
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
