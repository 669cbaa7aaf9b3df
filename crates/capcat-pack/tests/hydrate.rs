//! Hydration: one range read per record, verified against its locator.

mod common;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use capcat_pack::{
    Dtype, FileRange, InMemory, PackError, PackLimits, PackWriter, SealedPack, TensorValues,
    decode_payload, hydrate, hydrate_async, verify_hydrated,
};
use uuid::Uuid;

fn sample() -> SealedPack {
    let mut writer = PackWriter::new(Uuid::from_u128(9), PackLimits::default());
    writer
        .append_values(
            common::meta(0, Dtype::BF16, &[3]),
            &TensorValues::BF16(vec![half::bf16::ONE; 3]),
        )
        .expect("valid");
    writer
        .append_values(
            common::meta(1, Dtype::I16, &[2]),
            &TensorValues::I16(vec![-7, 7]),
        )
        .expect("valid");
    writer.seal().expect("seals")
}

/// Polls a future that never waits (the range reads below are ready at
/// once), so the test needs no async runtime.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the test futures are always ready"),
    }
}

#[test]
fn a_closure_serves_one_range_read_per_record() {
    let pack = sample();
    let mut calls = Vec::new();
    let mut read = |offset: u64, length: u64| -> Result<Bytes, std::io::Error> {
        calls.push((offset, length));
        Ok(pack
            .bytes
            .slice(offset as usize..(offset + length) as usize))
    };
    for locator in &pack.info.records {
        let payload = hydrate(&mut read, locator).expect("verifies");
        assert_eq!(payload.len() as u64, locator.length);
    }
    let expected: Vec<(u64, u64)> = pack
        .info
        .records
        .iter()
        .map(|l| (l.offset, l.length))
        .collect();
    assert_eq!(calls, expected);
}

#[test]
fn an_empty_payload_is_verified_without_a_range_read() {
    let mut writer = PackWriter::new(Uuid::nil(), PackLimits::default());
    writer
        .append(common::meta(0, Dtype::F32, &[0, 3]), Bytes::new())
        .expect("valid");
    let pack = writer.seal().expect("seals");
    let locator = pack.info.records[0];
    assert_eq!(locator.length, 0);
    let mut read = |_: u64, _: u64| -> Result<Bytes, std::io::Error> {
        panic!("a zero-byte range must not reach the store")
    };
    assert!(hydrate(&mut read, &locator).expect("verifies").is_empty());
    let payload = ready(hydrate_async(&locator, |_, _| async {
        Err::<Bytes, _>(std::io::Error::other(
            "a zero-byte range must not reach the store",
        ))
    }))
    .expect("verifies");
    assert!(payload.is_empty());
    let mut wrong = locator;
    wrong.sha256 = capcat_pack::Sha256Digest::of(b"x");
    assert!(matches!(
        hydrate(&mut read, &wrong),
        Err(PackError::PayloadChecksumMismatch { .. })
    ));
}

#[test]
fn hydrated_values_decode_exactly() {
    let pack = sample();
    let payload = hydrate(&mut InMemory(pack.bytes.clone()), &pack.info.records[1]).expect("ok");
    assert_eq!(
        decode_payload(Dtype::I16, &[2], &payload).expect("decodes"),
        TensorValues::I16(vec![-7, 7])
    );
    assert!(matches!(
        decode_payload(Dtype::I16, &[3], &payload),
        Err(PackError::ShapeMismatch { .. })
    ));
}

#[test]
fn a_file_serves_range_reads() {
    let pack = sample();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("pack.safetensors");
    std::fs::write(&path, &pack.bytes).expect("write");
    let mut file = FileRange(std::fs::File::open(&path).expect("open"));
    for locator in &pack.info.records {
        hydrate(&mut file, locator).expect("verifies");
    }
}

#[test]
fn wrong_bytes_fail_the_payload_checksum() {
    let pack = sample();
    let locator = pack.info.records[0];
    // Right length, wrong place: the range of the other record's offset.
    let mut read = |_offset: u64, length: u64| -> Result<Bytes, std::io::Error> {
        Ok(Bytes::from(vec![0u8; length as usize]))
    };
    assert!(matches!(
        hydrate(&mut read, &locator),
        Err(PackError::PayloadChecksumMismatch { index: 0, .. })
    ));
}

#[test]
fn a_short_read_is_a_length_error() {
    let pack = sample();
    let locator = pack.info.records[0];
    assert!(matches!(
        verify_hydrated(&locator, Bytes::from_static(b"ab")),
        Err(PackError::RangeReadLength {
            expected: 6,
            actual: 2,
            ..
        })
    ));
    let mut past_end = InMemory(pack.bytes.slice(..10));
    assert!(matches!(
        hydrate(&mut past_end, &locator),
        Err(PackError::RangeRead { .. })
    ));
}

#[test]
fn a_failed_read_is_reported_with_its_range() {
    let locator = sample().info.records[1];
    let mut read = |_: u64, _: u64| -> Result<Bytes, std::io::Error> {
        Err(std::io::Error::other("store unavailable"))
    };
    let error = hydrate(&mut read, &locator).expect_err("fails");
    assert!(
        matches!(&error, PackError::RangeRead { offset, .. } if *offset == locator.offset),
        "{error}"
    );
    assert!(error.to_string().contains("store unavailable"));
}

#[test]
fn async_range_reads_hydrate_and_verify() {
    let pack = sample();
    let locator = pack.info.records[0];
    let bytes = pack.bytes.clone();
    let payload = ready(hydrate_async(&locator, |offset, length| async move {
        Ok::<_, std::io::Error>(bytes.slice(offset as usize..(offset + length) as usize))
    }))
    .expect("verifies");
    assert_eq!(payload.len(), 6);
    let wrong = ready(hydrate_async(&locator, |_, length| async move {
        Ok::<_, std::io::Error>(Bytes::from(vec![1u8; length as usize]))
    }));
    assert!(matches!(
        wrong,
        Err(PackError::PayloadChecksumMismatch { .. })
    ));
}
