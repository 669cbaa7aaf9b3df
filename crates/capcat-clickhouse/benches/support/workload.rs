//! The catalog bench's workload: descriptors shaped like one hidden state
//! of a 0.5B model each, in packs of one store. Shared by
//! `benches/catalog.rs` and `examples/lookup_floor.rs`, so the example's
//! floors are measured on exactly the rows the bench's figures are.

use capcat_proto::CaptureDescriptor;
use capcat_proto::descriptor::{Locator, SummaryColumns};
use uuid::Uuid;

/// The tenant every descriptor belongs to.
pub(crate) const TENANT: &str = "bench";

/// Descriptor number `n` of `pack` in `store` (capture ids are random).
fn descriptor(n: u64, store: &str, pack: Uuid) -> CaptureDescriptor {
    CaptureDescriptor {
        tenant_id: TENANT.to_owned(),
        experiment_id: format!("exp{}", n % 4),
        run_id: format!("run{}", n % 8),
        captured_at_ns: 1_700_000_000_000_000_000 + n * 1_000,
        capture_id: Uuid::new_v4(),
        locator: Locator {
            store_id: store.to_owned(),
            pack_id: pack,
            payload_offset: n * 1792,
            payload_length: 1792,
            payload_sha256: format!("{:064x}", n),
        },
        index_version: 0,
        step: n / 16,
        tensor_name: format!("model.layers.{}.mlp.down_proj", n % 24),
        dtype: "bf16".to_owned(),
        shape: vec![1, 896],
        summary: SummaryColumns {
            summary_version: 2,
            element_count: 896,
            minimum: (-1.5).into(),
            maximum: 1.5.into(),
            mean: 0.01.into(),
            l2_norm: 12.0.into(),
            abs_max: 1.5.into(),
            zero_fraction: 0.0.into(),
        },
    }
}

/// `packs` packs of `per_pack` descriptors each.
pub(crate) fn batch(packs: usize, per_pack: usize, first: u64) -> Vec<CaptureDescriptor> {
    let mut out = Vec::with_capacity(packs * per_pack);
    for p in 0..packs {
        let pack = Uuid::new_v4();
        for i in 0..per_pack {
            out.push(descriptor(
                first + (p * per_pack + i) as u64,
                "store-a",
                pack,
            ));
        }
    }
    out
}
