//! Helpers shared by the integration tests.

#![allow(dead_code, unreachable_pub, reason = "each test binary uses a subset")]

use std::collections::BTreeMap;

use capcat_pack::{CaptureIdentity, Dtype, RecordMetadata};
use uuid::Uuid;

/// Metadata for record `index` of a test pack, with a capture id derived
/// from the index so identities never collide by accident.
pub fn meta(index: u64, dtype: Dtype, shape: &[u64]) -> RecordMetadata {
    RecordMetadata {
        identity: CaptureIdentity {
            tenant_id: "tenant-test".to_owned(),
            experiment_id: "exp".to_owned(),
            run_id: "run".to_owned(),
            captured_at_ns: 1_700_000_000_000_000_000 + index,
            capture_id: Uuid::from_u128(
                0xC0FF_EE00_0000_0000_0000_0000_0000_0000 + u128::from(index),
            ),
        },
        model: "test-model".to_owned(),
        module_path: format!("model.layers.{index}.mlp"),
        hook: "forward_output".to_owned(),
        step: index,
        tensor_name: "output".to_owned(),
        dtype,
        shape: shape.to_vec(),
        tags: BTreeMap::from([("k".to_owned(), "v\"quoted\" ü".to_owned())]),
    }
}

/// Tags with nothing to escape, unlike [`meta`]'s (which hold a quote).
pub fn plain_tags() -> BTreeMap<String, String> {
    BTreeMap::from([("key".to_owned(), "value ü".to_owned())])
}
