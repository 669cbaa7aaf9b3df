//! A synthetic capture workload shaped like Qwen2.5-0.5B: 24 decoder layers,
//! four hooks per layer, hidden size 896; bf16 activations with f32 norms and
//! i64 position ids. Deterministic: the same arguments give the same packs
//! byte for byte (same pack ids, same capture ids), which is what lets a
//! second `capcat demo` on the same directory show the replay guard.

use std::collections::BTreeMap;

use bytes::Bytes;
use capcat_pack::{
    CaptureIdentity, Dtype, PackError, PackLimits, PackWriter, RecordMetadata, SealedPack,
};
use half::bf16;
use uuid::Uuid;

/// Decoder layers of Qwen2.5-0.5B.
pub(crate) const LAYERS: u64 = 24;
/// Hidden size of Qwen2.5-0.5B.
pub(crate) const HIDDEN: u64 = 896;
/// Tokens captured per record.
pub(crate) const TOKENS: u64 = 2;
/// The tenant every demo record belongs to.
pub(crate) const TENANT: &str = "demo";
/// The experiment every demo record belongs to.
pub(crate) const EXPERIMENT: &str = "qwen2.5-0.5b";

/// One hook: its module suffix, dtype and shape.
struct Hook {
    module: &'static str,
    dtype: Dtype,
    shape: &'static [u64],
}

const HOOKS: [Hook; 4] = [
    Hook {
        module: "self_attn.o_proj",
        dtype: Dtype::BF16,
        shape: &[TOKENS, HIDDEN],
    },
    Hook {
        module: "mlp.down_proj",
        dtype: Dtype::BF16,
        shape: &[TOKENS, HIDDEN],
    },
    Hook {
        module: "post_attention_layernorm",
        dtype: Dtype::F32,
        shape: &[TOKENS, HIDDEN],
    },
    Hook {
        module: "self_attn.position_ids",
        dtype: Dtype::I64,
        shape: &[TOKENS],
    },
];

/// Records per step (all layers, all hooks).
#[must_use]
pub(crate) fn records_per_step() -> u64 {
    LAYERS * HOOKS.len() as u64
}

/// 128 bits of the SHA-256 of the run id: distinct runs get distinct
/// capture ids, pack ids and payloads (two runs on one directory are two
/// sets of captures, never one capture claimed twice).
fn run_namespace(run: &str) -> u128 {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(run.as_bytes());
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    u128::from_le_bytes(bytes)
}

/// A deterministic id from a namespace and a number.
fn derived_id(namespace: u128, n: u64) -> Uuid {
    // The v4 bits are set so the id is a canonical random-looking UUID.
    let raw = namespace ^ (u128::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835));
    uuid::Builder::from_random_bytes(raw.to_le_bytes()).into_uuid()
}

/// A small deterministic generator (splitmix64).
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f32 {
        // 24 random bits as a float in [-1, 1).
        let bits = u32::try_from(self.next() >> 40).unwrap_or(0);
        (bits as f32 / (1 << 23) as f32) - 1.0
    }
}

/// The record number `n` of run `run`: its metadata and payload.
#[must_use]
pub(crate) fn record(run: &str, n: u64) -> (RecordMetadata, Bytes) {
    let per_step = records_per_step();
    let step = n / per_step;
    let within = n % per_step;
    let layer = within / HOOKS.len() as u64;
    let hook = &HOOKS[usize::try_from(within % HOOKS.len() as u64).unwrap_or(0)];
    // Truncation is intended: any 64 bits of the run's namespace seed it.
    let seed = run_namespace(run) as u64;
    let mut mix = Mix(n.wrapping_mul(31).wrapping_add(seed));
    let elements: u64 = hook.shape.iter().product();
    // Sized once and extended by whole elements: collecting a `flat_map`
    // grows the buffer byte by byte, which made generating the workload
    // cost more than sealing it.
    let mut payload: Vec<u8> =
        Vec::with_capacity(usize::try_from(elements).unwrap_or(0) * hook.dtype.size());
    for i in 0..elements {
        match hook.dtype {
            Dtype::BF16 => {
                payload.extend_from_slice(&bf16::from_f32(mix.unit() * 4.0).to_le_bytes())
            }
            Dtype::F32 => payload.extend_from_slice(&(1.0 + mix.unit() * 0.1).to_le_bytes()),
            _ => payload
                .extend_from_slice(&(i64::try_from(step * TOKENS + i).unwrap_or(0)).to_le_bytes()),
        }
    }
    let module_path = format!("model.layers.{layer}.{}", hook.module);
    let metadata = RecordMetadata {
        identity: CaptureIdentity {
            tenant_id: TENANT.to_owned(),
            experiment_id: EXPERIMENT.to_owned(),
            run_id: run.to_owned(),
            captured_at_ns: 1_700_000_000_000_000_000 + n * 1_000,
            capture_id: derived_id(
                0x0C0F_FEE0_0000_0000_0000_0000_0000_0001 ^ run_namespace(run),
                n,
            ),
        },
        model: "Qwen/Qwen2.5-0.5B".to_owned(),
        module_path: module_path.clone(),
        hook: "forward".to_owned(),
        step,
        tensor_name: module_path,
        dtype: hook.dtype,
        shape: hook.shape.to_vec(),
        tags: BTreeMap::new(),
    };
    (metadata, Bytes::from(payload))
}

/// The id of pack `index` of run `run`.
#[must_use]
pub(crate) fn pack_id(run: &str, index: u64) -> Uuid {
    derived_id(
        0x9ACC_0000_0000_0000_0000_0000_0000_0002 ^ run_namespace(run),
        index,
    )
}

/// Records `first..first + count` of `run`: what a model hands the capture
/// engine, before any of Capcat's work.
#[must_use]
pub(crate) fn records(run: &str, first: u64, count: u64) -> Vec<(RecordMetadata, Bytes)> {
    (first..first + count).map(|n| record(run, n)).collect()
}

/// Seals `records` of `run` into pack `index`: the capture engine's work.
///
/// # Errors
/// A record the pack writer refuses (a bug in this generator).
pub(crate) fn seal_records(
    run: &str,
    index: u64,
    records: Vec<(RecordMetadata, Bytes)>,
) -> Result<SealedPack, PackError> {
    let limits = PackLimits::new(records.len().max(1), u64::MAX / 2)?;
    let mut writer = PackWriter::new(pack_id(run, index), limits);
    for (metadata, payload) in records {
        writer.append(metadata, payload)?;
    }
    writer.seal()
}

/// Seals records `first..first + count` of `run` into pack `index`.
///
/// # Errors
/// A record the pack writer refuses (a bug in this generator).
#[cfg(test)]
pub(crate) fn seal_pack(
    run: &str,
    index: u64,
    first: u64,
    count: u64,
) -> Result<SealedPack, PackError> {
    seal_records(run, index, records(run, first, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_is_deterministic_and_shaped_like_qwen() {
        assert_eq!(records_per_step(), 96);
        let (a, pa) = record("r", 5);
        let (b, pb) = record("r", 5);
        assert_eq!(a, b);
        assert_eq!(pa, pb);
        assert_eq!(a.tensor_name, "model.layers.1.mlp.down_proj");
        assert_eq!(a.dtype, Dtype::BF16);
        assert_eq!(pa.len() as u64, TOKENS * HIDDEN * 2);
        let (c, _) = record("r", 7);
        assert_eq!(c.dtype, Dtype::I64);
        assert_ne!(a.identity.capture_id, c.identity.capture_id);
        // Runs of the same length (the old namespace) still differ.
        let (other, other_payload) = record("s", 5);
        assert_ne!(a.identity.capture_id, other.identity.capture_id);
        assert_ne!(pa, other_payload);
        assert_ne!(pack_id("r", 0), pack_id("s", 0));
        let p1 = seal_pack("r", 0, 0, 8).expect("seal");
        let p2 = seal_pack("r", 0, 0, 8).expect("seal");
        assert_eq!(p1.bytes, p2.bytes);
        // The bytes themselves are pinned: a demo directory written by an
        // earlier build replays as the same packs, not as new captures.
        assert_eq!(
            p1.info.pack_sha256.to_hex(),
            "d59d7da297cc7efdd61c88333cfd4b3f33a1640700e4989226ac3872337d2076",
            "the workload's bytes changed"
        );
    }
}
