//! Pack seal / verify / hydrate throughput, beside the figures it is judged
//! against: raw SHA-256 over the same payload bytes (the limit of any
//! verified pack path), CRC-64/NVME over them (the whole-file checksum a
//! pack also carries), and the `safetensors` crate's own serialize /
//! deserialize of the same tensors with no checksums.
//!
//! Shape: 4,096 bf16 records of 896 elements (one 0.5B-model hidden state
//! each), 7.3 MB of payload. Throughput is reported over payload bytes so
//! every line is comparable.
//!
//! `cargo bench -p capcat-benches --bench pack`; figures in docs/benchmarks.md.

#![forbid(unsafe_code)]
#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use capcat_pack::{
    CaptureIdentity, Dtype, InMemory, PackLimits, PackReader, PackWriter, RecordMetadata,
    SealedPack, hydrate, tensor_key,
};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use sha2::{Digest as _, Sha256};
use uuid::Uuid;

const RECORDS: usize = 4_096;
const ELEMENTS: usize = 896;

/// Deterministic bf16 payloads (bit patterns of finite values).
fn payloads() -> Vec<Vec<u8>> {
    (0..RECORDS)
        .map(|r| {
            (0..ELEMENTS)
                .flat_map(|e| {
                    let x = ((r * 31 + e * 7) % 1000) as f32 / 250.0 - 2.0;
                    half::bf16::from_f32(x).to_le_bytes()
                })
                .collect()
        })
        .collect()
}

fn metadata(i: usize) -> RecordMetadata {
    RecordMetadata {
        identity: CaptureIdentity {
            tenant_id: "tenant-bench".to_owned(),
            experiment_id: "experiment-bench".to_owned(),
            run_id: "run-bench".to_owned(),
            captured_at_ns: 1_764_000_000_000_000_000 + i as u64,
            capture_id: Uuid::from_u128(i as u128 + 1),
        },
        model: "Qwen/Qwen2.5-0.5B".to_owned(),
        module_path: format!("model.layers.{}.mlp", i % 24),
        hook: "forward_output".to_owned(),
        step: (i / 24) as u64,
        tensor_name: "hidden_states".to_owned(),
        dtype: Dtype::BF16,
        shape: vec![1, ELEMENTS as u64],
        tags: BTreeMap::new(),
    }
}

/// Appends every record and seals: what a capture engine does with
/// metadata it already holds.
fn seal(metadata: Vec<RecordMetadata>, payloads: &[bytes::Bytes]) -> SealedPack {
    let mut writer = PackWriter::new(Uuid::from_u128(42), PackLimits::default());
    for (metadata, payload) in metadata.into_iter().zip(payloads) {
        writer
            .append(metadata, payload.clone())
            .expect("valid record");
    }
    writer.seal().expect("seals")
}

/// A borrowed tensor for `safetensors::serialize`.
struct View<'a>(&'a [u8]);

impl safetensors::View for View<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        safetensors::Dtype::BF16
    }
    fn shape(&self) -> &[usize] {
        &[1, ELEMENTS]
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.0)
    }
    fn data_len(&self) -> usize {
        self.0.len()
    }
}

fn bench_pack(c: &mut Criterion) {
    let raw = payloads();
    let payload_bytes: u64 = raw.iter().map(|p| p.len() as u64).sum();
    let shared: Vec<bytes::Bytes> = raw.iter().cloned().map(bytes::Bytes::from).collect();
    let contiguous: Vec<u8> = raw.concat();
    let metadata: Vec<RecordMetadata> = (0..RECORDS).map(self::metadata).collect();
    let sealed = seal(metadata.clone(), &shared);

    let mut group = c.benchmark_group("pack_4096x896_bf16");
    group.throughput(Throughput::Bytes(payload_bytes));

    group.bench_function("sha256_payload_bytes", |b| {
        b.iter(|| Sha256::digest(black_box(&contiguous)));
    });
    group.bench_function("crc64nvme_payload_bytes", |b| {
        b.iter(|| capcat_pack::crc64nvme(black_box(&contiguous)));
    });
    group.bench_function("safetensors_serialize_no_checksum", |b| {
        b.iter(|| {
            let views = raw
                .iter()
                .enumerate()
                .map(|(i, p)| (tensor_key(i), View(p)));
            safetensors::serialize(views, None).expect("serializes")
        });
    });
    let plain = {
        let views = raw
            .iter()
            .enumerate()
            .map(|(i, p)| (tensor_key(i), View(p)));
        safetensors::serialize(views, None).expect("serializes")
    };
    group.bench_function("safetensors_deserialize_no_checksum", |b| {
        b.iter(|| {
            let st = safetensors::SafeTensors::deserialize(black_box(&plain)).expect("valid");
            black_box(st.len())
        });
    });
    // The metadata is built before the clock starts, as the payloads are:
    // the engine holds both when it appends. Append's checks, seal, and
    // dropping the writer are timed; dropping the sealed pack is not.
    group.bench_function("capcat_seal", |b| {
        b.iter_batched(
            || metadata.clone(),
            |metadata| seal(metadata, black_box(&shared)),
            BatchSize::PerIteration,
        );
    });
    group.bench_function("capcat_verify", |b| {
        b.iter(|| {
            PackReader::from_bytes_expecting(sealed.bytes.clone(), sealed.info.pack_sha256)
                .expect("verifies")
        });
    });
    group.bench_function("capcat_hydrate_every_record", |b| {
        b.iter(|| {
            let mut source = InMemory(sealed.bytes.clone());
            for locator in &sealed.info.records {
                black_box(hydrate(&mut source, locator).expect("verifies"));
            }
        });
    });
    // What an index pass computes per record besides the locator: the
    // summary statistics of the catalog row, over payloads already verified.
    group.bench_function("capcat_summarise_every_record", |b| {
        let reader = PackReader::from_bytes(sealed.bytes.clone()).expect("verifies");
        b.iter(|| {
            for index in 0..reader.len() {
                black_box(reader.summary(index).expect("in range"));
            }
        });
    });
    group.finish();
}

fn config() -> Criterion {
    // Short runs: the figures are throughput of multi-millisecond
    // iterations, stable well within these windows on this machine.
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_pack
}
criterion_main!(benches);
