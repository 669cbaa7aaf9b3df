//! Property tests: whatever is appended reads back identically (metadata,
//! bytes, typed values, locators), sealing is deterministic, and every
//! locator hydrates. All ten dtypes; scalars, empty and zero-sized tensors.

mod common;

use capcat_pack::{
    Dtype, InMemory, PackLimits, PackReader, PackWriter, TensorValues, hydrate, tensor_key,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use uuid::Uuid;

/// A payload of `dtype` for `shape`: random bytes, except that `BOOL` bytes
/// are 0 or 1 (the only valid encodings). Random float bytes include NaNs
/// with payloads, subnormals and negative zero, which must survive exactly.
fn payload(dtype: Dtype, shape: Vec<u64>) -> impl Strategy<Value = (Dtype, Vec<u64>, Vec<u8>)> {
    let len = usize::try_from(dtype.byte_length(&shape).expect("small shapes")).expect("small");
    let bytes = if dtype == Dtype::BOOL {
        proptest::collection::vec(0u8..=1, len).boxed()
    } else {
        proptest::collection::vec(any::<u8>(), len).boxed()
    };
    bytes.prop_map(move |b| (dtype, shape.clone(), b))
}

fn record() -> impl Strategy<Value = (Dtype, Vec<u64>, Vec<u8>)> {
    (
        proptest::sample::select(Dtype::ALL.to_vec()),
        proptest::collection::vec(0u64..=4, 0..=3),
    )
        .prop_flat_map(|(dtype, shape)| payload(dtype, shape))
}

proptest! {
    // Failures persist next to this file (tests/round_trip.proptest-regressions),
    // which is committed so that every past failure is replayed first.
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn whatever_is_appended_reads_back_identically(
        records in proptest::collection::vec(record(), 0..=8),
        pack_id in any::<u128>(),
        quoted in any::<bool>(),
    ) {
        // A quote in a tag makes the reader unescape the descriptor; with
        // none it parses the descriptor where the header holds it.
        let meta = |i: usize, dtype: Dtype, shape: &[u64]| {
            let mut metadata = common::meta(i as u64, dtype, shape);
            if !quoted {
                metadata.tags = common::plain_tags();
            }
            metadata
        };
        let build = || {
            let mut writer = PackWriter::new(Uuid::from_u128(pack_id), PackLimits::default());
            for (i, (dtype, shape, bytes)) in records.iter().enumerate() {
                let metadata = meta(i, *dtype, shape);
                writer.append(metadata, bytes.clone()).expect("valid record");
            }
            writer.seal().expect("seals")
        };
        let sealed = build();
        // Sealing the same records again gives the same bytes.
        prop_assert_eq!(&build().bytes, &sealed.bytes);

        let reader = PackReader::from_bytes_expecting(sealed.bytes.clone(), sealed.info.pack_sha256)
            .expect("a sealed pack verifies");
        prop_assert_eq!(reader.pack_id(), Uuid::from_u128(pack_id));
        prop_assert_eq!(reader.len(), records.len());
        prop_assert_eq!(reader.is_empty(), records.is_empty());
        prop_assert_eq!(&reader.info(), &sealed.info);
        prop_assert_eq!(reader.locators(), &sealed.info.records[..]);

        // The safetensors crate sees the same tensors under the same keys.
        let st = safetensors::SafeTensors::deserialize(&sealed.bytes).expect("valid safetensors");
        let mut memory = InMemory(sealed.bytes.clone());
        for (i, (dtype, shape, bytes)) in records.iter().enumerate() {
            let entry = reader.record(i).expect("in range");
            prop_assert_eq!(&entry.metadata, &meta(i, *dtype, shape));
            prop_assert_eq!(&reader.payload(i).expect("in range")[..], &bytes[..]);
            let values = reader.values(i).expect("decodes");
            prop_assert_eq!(values.dtype(), *dtype);
            prop_assert_eq!(values.to_le_bytes(), bytes.clone());
            // Typed values compare by bytes: NaN is not equal to itself.
            let again = TensorValues::from_le_bytes(*dtype, &values.to_le_bytes(), "again")
                .expect("decodes");
            prop_assert_eq!(again.to_le_bytes(), bytes.clone());
            let locator = &sealed.info.records[i];
            prop_assert_eq!(&hydrate(&mut memory, locator).expect("hydrates")[..], &bytes[..]);
            let view = st.tensor(&tensor_key(i)).expect("present");
            prop_assert_eq!(view.data(), &bytes[..]);
            let shape_usize: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
            prop_assert_eq!(view.shape(), &shape_usize[..]);
        }
    }
}

#[test]
fn an_empty_pack_round_trips() {
    let sealed = PackWriter::new(Uuid::nil(), PackLimits::default())
        .seal()
        .expect("an empty pack seals");
    let reader = PackReader::from_bytes(sealed.bytes.clone()).expect("and reads");
    assert!(reader.is_empty());
    assert_eq!(reader.info(), sealed.info);
}

#[test]
fn zero_sized_tensors_of_every_dtype_round_trip() {
    let mut writer = PackWriter::new(Uuid::nil(), PackLimits::default());
    for (i, dtype) in Dtype::ALL.into_iter().enumerate() {
        let shape: &[u64] = if i % 2 == 0 { &[0] } else { &[3, 0, 2] };
        writer
            .append(common::meta(i as u64, dtype, shape), Vec::new())
            .expect("empty payload");
    }
    let sealed = writer.seal().expect("seals");
    let reader = PackReader::from_bytes(sealed.bytes).expect("reads");
    for i in 0..Dtype::ALL.len() {
        assert!(reader.values(i).expect("decodes").is_empty());
        assert_eq!(reader.locator(i).expect("in range").length, 0);
    }
}

/// A pack of more than 1 MiB of mixed dtypes, so that the data order
/// differs from the record order: it verifies (every payload digest, the
/// pack digest), carries the CRC-64/NVME of its whole file, and gives back
/// every payload.
#[test]
fn a_large_mixed_pack_verifies_and_carries_its_crc() {
    let (sealed, payloads) = large_pack();
    assert_eq!(sealed.info.crc64nvme, capcat_pack::crc64nvme(&sealed.bytes));
    let reader = PackReader::from_bytes_expecting(sealed.bytes.clone(), sealed.info.pack_sha256)
        .expect("verifies");
    assert_eq!(reader.info(), sealed.info);
    for (i, bytes) in payloads.iter().enumerate() {
        assert_eq!(
            reader.payload(i).expect("a record"),
            bytes.as_slice(),
            "record {i}"
        );
    }
}

/// In a large pack a changed byte is caught wherever it is (descriptor,
/// padding, first and last payload), and a pack cut short is refused.
#[test]
fn a_large_pack_refuses_a_changed_byte_in_every_region() {
    use capcat_pack::PackError;
    let (sealed, _) = large_pack();
    let open = |bytes: Vec<u8>| PackReader::from_bytes(bytes).expect_err("must be refused");
    let n = usize::try_from(u64::from_le_bytes(sealed.bytes[..8].try_into().expect("8")))
        .expect("small");
    let len = sealed.bytes.len();
    let flipped = |at: usize| {
        let mut bytes = sealed.bytes.to_vec();
        // Space and tab are both JSON whitespace (the padding); any other
        // byte changes by one bit.
        bytes[at] = if bytes[at] == b' ' {
            b'\t'
        } else {
            bytes[at] ^ 0x01
        };
        bytes
    };
    // A descriptor byte, a padding byte: the pack digest.
    assert_eq!(sealed.bytes[8 + n - 1], b' ', "the header is padded");
    for at in [8 + n / 2, 8 + n - 1] {
        let error = open(flipped(at));
        assert!(
            matches!(error, PackError::HeaderChecksumMismatch { .. }),
            "{at}: {error}"
        );
    }
    // The first payload and the last.
    for at in [8 + n, len - 1] {
        let error = open(flipped(at));
        assert!(
            matches!(error, PackError::PayloadChecksumMismatch { .. }),
            "{at}: {error}"
        );
    }
    let error = open(sealed.bytes[..len - 1].to_vec());
    assert!(
        matches!(error, PackError::OffsetOutOfRange { .. }),
        "{error}"
    );
    let error = open(sealed.bytes[..n].to_vec());
    assert!(
        matches!(error, PackError::HeaderLengthPastEnd { .. }),
        "{error}"
    );
}

/// 1,200 records of four kinds, 1.37 MB of payload.
fn large_pack() -> (capcat_pack::SealedPack, Vec<Vec<u8>>) {
    let kinds = [
        (Dtype::BF16, vec![1, 896]),
        (Dtype::I64, vec![48]),
        (Dtype::BOOL, vec![7]),
        (Dtype::F32, vec![2, 300]),
    ];
    let mut writer = PackWriter::new(Uuid::from_u128(3), PackLimits::default());
    let mut payloads = Vec::new();
    for i in 0..1_200_u64 {
        let (dtype, shape) = &kinds[(i % 4) as usize];
        let len = usize::try_from(dtype.byte_length(shape).expect("small")).expect("small");
        let bytes: Vec<u8> = (0..len)
            .map(|b| {
                let byte = (i as usize).wrapping_mul(131).wrapping_add(b * 7) as u8;
                if *dtype == Dtype::BOOL {
                    byte & 1
                } else {
                    byte
                }
            })
            .collect();
        writer
            .append(common::meta(i, *dtype, shape), bytes.clone())
            .expect("valid record");
        payloads.push(bytes);
    }
    assert!(writer.payload_bytes() > 1 << 20, "a large pack");
    (writer.seal().expect("seals"), payloads)
}
