//! Feeds arbitrary bytes to `capcat ingest`'s parser of a user's
//! `.safetensors` file (`crates/capcat-cli/src/ingest.rs`, compiled here by
//! path: the CLI is a binary), as if they were a file in the ingest
//! directory.
//!
//! Properties: the parser never panics and returns a typed `IngestError`
//! for what it refuses; it allocates no more than the input holds (each
//! payload is a slice of the file); every tensor it returns is one a pack
//! accepts, so `PackWriter::append` takes each of them and the sealed pack
//! reads back the same dtype, shape and payload bytes: ingest never fails
//! half way through a file it accepted.

#![no_main]

#[path = "../../crates/capcat-cli/src/ingest.rs"]
#[allow(dead_code, unreachable_pub)]
mod ingest;

use std::collections::BTreeMap;

use capcat_pack::{CaptureIdentity, PackLimits, PackReader, PackWriter, RecordMetadata};
use libfuzzer_sys::fuzz_target;
use uuid::Uuid;

fuzz_target!(|data: &[u8]| {
    let Ok(tensors) = ingest::parse_safetensors(data) else {
        return;
    };
    let total: usize = tensors.iter().map(|t| t.payload.len()).sum();
    assert!(total <= data.len(), "payloads are slices of the file");
    let mut writer = PackWriter::new(Uuid::nil(), PackLimits::default());
    for (i, t) in tensors.iter().enumerate() {
        let metadata = RecordMetadata {
            identity: CaptureIdentity {
                tenant_id: "t".to_owned(),
                experiment_id: "e".to_owned(),
                run_id: "r".to_owned(),
                captured_at_ns: 0,
                capture_id: Uuid::from_u128(i as u128),
            },
            model: String::new(),
            module_path: t.name.clone(),
            hook: "ingest".to_owned(),
            step: 0,
            tensor_name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
            tags: BTreeMap::new(),
        };
        if let Err(e) = writer.append(metadata, t.payload.clone()) {
            panic!(
                "tensor {:?} was accepted by ingest but refused by the pack: {e}",
                t.name
            );
        }
    }
    let sealed = writer.seal().expect("accepted tensors seal");
    let reader = PackReader::from_bytes(sealed.bytes).expect("a sealed pack reads back");
    for (i, t) in tensors.iter().enumerate() {
        let entry = reader.record(i).expect("in range");
        assert_eq!(entry.metadata.dtype, t.dtype);
        assert_eq!(entry.metadata.shape, t.shape);
        assert_eq!(reader.payload(i).expect("in range"), t.payload);
    }
});
