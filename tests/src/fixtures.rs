//! Descriptor fixtures: a pack of captures, every field derived from the
//! seeded generator so a run reproduces its rows.

use capcat_proto::CaptureDescriptor;
use capcat_proto::descriptor::{Locator, SummaryColumns};
use uuid::Uuid;

use crate::rng::Rng;

/// The tenant every stress capture belongs to.
pub const TENANT: &str = "stress";

/// `captures` descriptors of one fresh pack in `store`, numbered from `first`.
pub fn pack(rng: &mut Rng, store: &str, captures: usize, first: u64) -> Vec<CaptureDescriptor> {
    let pack_id = rng.uuid();
    (0..captures as u64)
        .map(|i| descriptor(store, pack_id, rng.uuid(), first + i))
        .collect()
}

fn descriptor(store: &str, pack_id: Uuid, capture_id: Uuid, n: u64) -> CaptureDescriptor {
    CaptureDescriptor {
        tenant_id: TENANT.to_owned(),
        experiment_id: format!("exp{}", n % 3),
        run_id: format!("run{}", n % 2),
        captured_at_ns: 1_000_000 + n,
        capture_id,
        locator: Locator {
            store_id: store.to_owned(),
            pack_id,
            payload_offset: n * 64,
            payload_length: 64,
            payload_sha256: format!("{:064x}", u128::from(n) ^ pack_id.as_u128()),
        },
        index_version: 0,
        step: n,
        tensor_name: format!("layers.{}.weight", n % 4),
        dtype: "f32".to_owned(),
        shape: vec![4, 4],
        summary: SummaryColumns {
            summary_version: 2,
            element_count: 16,
            minimum: (-1.0).into(),
            maximum: 1.0.into(),
            mean: 0.0.into(),
            l2_norm: 2.0.into(),
            abs_max: 1.0.into(),
            zero_fraction: 0.0.into(),
        },
    }
}
