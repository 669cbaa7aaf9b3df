//! From a verified pack to the catalog rows describing it.

use capcat_pack::{PackError, PackReader, SummaryScalar};
use capcat_proto::CaptureDescriptor;
use capcat_proto::descriptor::{F64Bits, Locator, SummaryColumns};

fn scalar(value: Option<SummaryScalar>) -> F64Bits {
    F64Bits::new(value.map_or(f64::NAN, SummaryScalar::as_f64))
}

/// One descriptor per record of `pack`, located in store `store_id`. The
/// `index_version` is left 0: the index pass stamps it.
///
/// # Errors
/// A record whose payload fails its checksum while summarising.
pub fn descriptors_of(
    pack: &PackReader,
    store_id: &str,
) -> Result<Vec<CaptureDescriptor>, PackError> {
    let mut out = Vec::with_capacity(pack.len());
    for (index, entry) in pack.records().iter().enumerate() {
        let locator = pack.locator(index)?;
        let summary = pack.summary(index)?;
        let m = &entry.metadata;
        out.push(CaptureDescriptor {
            tenant_id: m.identity.tenant_id.clone(),
            experiment_id: m.identity.experiment_id.clone(),
            run_id: m.identity.run_id.clone(),
            captured_at_ns: m.identity.captured_at_ns,
            capture_id: m.identity.capture_id,
            locator: Locator {
                store_id: store_id.to_owned(),
                pack_id: pack.pack_id(),
                payload_offset: locator.offset,
                payload_length: locator.length,
                payload_sha256: locator.sha256.to_hex(),
            },
            index_version: 0,
            step: m.step,
            tensor_name: m.tensor_name.clone(),
            dtype: m.dtype.to_string(),
            shape: m.shape.clone(),
            summary: SummaryColumns {
                summary_version: summary.summary_version,
                element_count: summary.element_count,
                minimum: scalar(summary.minimum),
                maximum: scalar(summary.maximum),
                mean: F64Bits::new(summary.mean.unwrap_or(f64::NAN)),
                l2_norm: F64Bits::new(summary.l2_norm),
                abs_max: scalar(summary.abs_max),
                zero_fraction: F64Bits::new(summary.zero_fraction.unwrap_or(f64::NAN)),
            },
        });
    }
    Ok(out)
}

/// The indexer's measure of a batch's size: the bytes its descriptor rows
/// take as the INSERT's `RowBinary` data (exact, not an estimate of text).
#[must_use]
pub fn estimated_bytes(descriptors: &[CaptureDescriptor]) -> u64 {
    descriptors.iter().map(|d| d.row_binary_len() as u64).sum()
}
