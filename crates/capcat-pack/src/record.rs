//! The metadata of one capture record, as the descriptor stores it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::digest::Sha256Digest;
use crate::dtype::Dtype;

/// Who captured a record and when: the catalog's identity columns.
///
/// `(tenant_id, capture_id)` identifies a capture; a pack refuses two
/// records with the same pair.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CaptureIdentity {
    /// The tenant that owns the capture.
    pub tenant_id: String,
    /// The experiment within the tenant.
    pub experiment_id: String,
    /// The run within the experiment.
    pub run_id: String,
    /// When the capture was taken, in nanoseconds since the Unix epoch.
    pub captured_at_ns: u64,
    /// The capture's id, unique within its tenant.
    pub capture_id: Uuid,
}

/// Everything immutable about one capture record: its identity, what was
/// captured, and the dtype and shape of its payload.
///
/// The payload's SHA-256 is not part of this struct: the writer computes it
/// and the reader returns it beside the metadata ([`RecordEntry`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RecordMetadata {
    /// The capture identity.
    #[serde(flatten)]
    pub identity: CaptureIdentity,
    /// The model the tensor came from, e.g. `Qwen/Qwen2.5-0.5B`.
    pub model: String,
    /// The module path within the model, e.g. `model.layers.3.mlp`.
    pub module_path: String,
    /// The hook that captured it, e.g. `forward_output`.
    pub hook: String,
    /// The training or generation step.
    pub step: u64,
    /// The tensor's name at the hook.
    pub tensor_name: String,
    /// The element type of the payload.
    pub dtype: Dtype,
    /// The shape, outermost dimension first (row-major). `[]` is a scalar
    /// (one element); any zero dimension makes an empty tensor.
    pub shape: Vec<u64>,
    /// Free-form tags. A `BTreeMap` so the descriptor's bytes do not depend
    /// on insertion order.
    pub tags: BTreeMap<String, String>,
}

/// One record as the reader found it: its metadata and the digest of its
/// payload bytes that the descriptor recorded (and the reader verified).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RecordEntry {
    /// The record's position in the pack (0-based, descriptor order).
    pub index: usize,
    /// The record's metadata.
    pub metadata: RecordMetadata,
    /// The SHA-256 of the payload bytes.
    pub payload_sha256: Sha256Digest,
}

/// The `(tenant_id, capture_id)` pairs of a pack's records, checked for
/// duplicates without copying a tenant id per record: keyed by capture id,
/// holding the index of the first record with it. A capture id that several
/// tenants use (legal, and rare) is kept as owned pairs beside it.
#[derive(Debug, Default)]
pub(crate) struct IdentitySet {
    first: std::collections::HashMap<Uuid, usize>,
    shared: std::collections::BTreeSet<(String, Uuid)>,
}

impl IdentitySet {
    /// Adds the identity of record `index`; false (and no change) when the
    /// pair is already present. `tenant_of` returns the tenant of an
    /// earlier record.
    pub(crate) fn insert<'a>(
        &mut self,
        tenant_id: &str,
        capture_id: Uuid,
        index: usize,
        tenant_of: impl FnOnce(usize) -> &'a str,
    ) -> bool {
        match self.first.entry(capture_id) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(index);
                true
            }
            std::collections::hash_map::Entry::Occupied(first) => {
                if tenant_of(*first.get()) == tenant_id {
                    return false;
                }
                if self.shared.contains(&(tenant_id.to_owned(), capture_id)) {
                    return false;
                }
                self.shared.insert((tenant_id.to_owned(), capture_id))
            }
        }
    }
}
