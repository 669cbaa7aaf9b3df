//! Capture descriptors as the `index_pass` start carries them: every field
//! of capcat-proto's `CaptureDescriptor`, the summary's floats as their
//! IEEE-754 bit patterns (so a NaN, a -0.0 or a subnormal arrives exactly).

use capcat_proto::CaptureDescriptor;
use capcat_proto::descriptor::{F64Bits, Locator, SummaryColumns};
use serde_json::{Value as Json, json};

use crate::error::ConformError;
use crate::wire::{field, str_field, u64_field, uuid_field, uuid_json};

fn bits(f: F64Bits) -> Json {
    json!(f.get().to_bits())
}

fn float(j: &Json, key: &str) -> Result<F64Bits, ConformError> {
    Ok(F64Bits::new(f64::from_bits(u64_field(j, key)?)))
}

/// A descriptor as the protocol writes it.
pub fn descriptor_json(d: &CaptureDescriptor) -> Json {
    let s = &d.summary;
    json!({
        "tenant_id": d.tenant_id,
        "experiment_id": d.experiment_id,
        "run_id": d.run_id,
        "captured_at_ns": d.captured_at_ns,
        "capture_id": uuid_json(d.capture_id),
        "locator": {
            "store_id": d.locator.store_id,
            "pack_id": uuid_json(d.locator.pack_id),
            "payload_offset": d.locator.payload_offset,
            "payload_length": d.locator.payload_length,
            "payload_sha256": d.locator.payload_sha256,
        },
        "index_version": d.index_version,
        "step": d.step,
        "tensor_name": d.tensor_name,
        "dtype": d.dtype,
        "shape": d.shape,
        "summary": {
            "summary_version": s.summary_version,
            "element_count": s.element_count,
            "minimum": bits(s.minimum),
            "maximum": bits(s.maximum),
            "mean": bits(s.mean),
            "l2_norm": bits(s.l2_norm),
            "abs_max": bits(s.abs_max),
            "zero_fraction": bits(s.zero_fraction),
        },
    })
}

/// The descriptor [`descriptor_json`] wrote.
pub fn descriptor_from(j: &Json) -> Result<CaptureDescriptor, ConformError> {
    let l = field(j, "locator")?;
    let s = field(j, "summary")?;
    let shape = field(j, "shape")?
        .as_array()
        .ok_or_else(|| ConformError::BadMessage {
            what: format!("`shape` is not a list in {j}"),
        })?
        .iter()
        .map(|d| {
            d.as_u64().ok_or_else(|| ConformError::BadMessage {
                what: format!("a dimension is not an unsigned integer: {d}"),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CaptureDescriptor {
        tenant_id: str_field(j, "tenant_id")?.to_owned(),
        experiment_id: str_field(j, "experiment_id")?.to_owned(),
        run_id: str_field(j, "run_id")?.to_owned(),
        captured_at_ns: u64_field(j, "captured_at_ns")?,
        capture_id: uuid_field(j, "capture_id")?,
        locator: Locator {
            store_id: str_field(l, "store_id")?.to_owned(),
            pack_id: uuid_field(l, "pack_id")?,
            payload_offset: u64_field(l, "payload_offset")?,
            payload_length: u64_field(l, "payload_length")?,
            payload_sha256: str_field(l, "payload_sha256")?.to_owned(),
        },
        index_version: u64_field(j, "index_version")?,
        step: u64_field(j, "step")?,
        tensor_name: str_field(j, "tensor_name")?.to_owned(),
        dtype: str_field(j, "dtype")?.to_owned(),
        shape,
        summary: SummaryColumns {
            summary_version: u32::try_from(u64_field(s, "summary_version")?).map_err(|_| {
                ConformError::BadMessage {
                    what: "`summary_version` does not fit 32 bits".to_owned(),
                }
            })?,
            element_count: u64_field(s, "element_count")?,
            minimum: float(s, "minimum")?,
            maximum: float(s, "maximum")?,
            mean: float(s, "mean")?,
            l2_norm: float(s, "l2_norm")?,
            abs_max: float(s, "abs_max")?,
            zero_fraction: float(s, "zero_fraction")?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_round_trips_with_its_floats_exact() {
        let d = CaptureDescriptor {
            tenant_id: "t\u{0}ü".into(),
            shape: vec![u64::MAX, 0, 3],
            summary: SummaryColumns {
                minimum: F64Bits::new(-0.0),
                maximum: F64Bits::new(f64::from_bits(1)),
                mean: F64Bits::new(f64::NAN),
                abs_max: F64Bits::new(f64::INFINITY),
                ..SummaryColumns::default()
            },
            ..CaptureDescriptor::default()
        };
        let back = descriptor_from(&descriptor_json(&d)).expect("decodes");
        assert_eq!(back, d);
        assert_eq!(back.summary.minimum.get().to_bits(), (-0.0f64).to_bits());
    }
}
