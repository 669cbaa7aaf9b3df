//! Feeds arbitrary text to the demand record codec
//! (`capcat_proto::demand::decode`, what a reader of `{p}_demand_events`
//! runs on a row's `record` column), and arbitrary records to `encode`.
//!
//! Properties: `decode` and `declared_version` never panic and refuse with
//! a typed `DecodeError`; a decoded record is normalized and re-encodes to a
//! text that decodes to the same record; for any record of a known version,
//! `decode(encode(r))` is `r.normalized()` (the round trip is the identity
//! on normalized records); the decoder's work is bounded by
//! `MAX_RECORD_TEXT`.

#![no_main]

use std::collections::BTreeMap;

use arbitrary::{Arbitrary, Unstructured};
use capcat_proto::demand::{
    CURRENT_VERSION, DemandRecord, Mark, SEALED_TIMES_CAP, codec, decode, encode,
};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct AnyRecord {
    v: bool,
    sealed: Option<(u64, u64)>,
    merged: Option<(u64, u64)>,
    bytes: u64,
    sealed_times: Vec<(u64, u64)>,
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let declared = codec::declared_version(text);
        match decode(text) {
            Ok(record) => {
                assert!(declared.is_ok());
                assert_eq!(record, record.clone().normalized());
                assert!(record.sealed_times.len() <= SEALED_TIMES_CAP);
                assert_eq!(decode(&encode(&record)), Ok(record));
            }
            Err(_) => assert!(text.len() <= codec::MAX_RECORD_TEXT || declared.is_err()),
        }
    }
    let mut u = Unstructured::new(data);
    if let Ok(r) = AnyRecord::arbitrary(&mut u) {
        let record = DemandRecord {
            v: if r.v { CURRENT_VERSION } else { 0 },
            sealed: r.sealed.map(|(value, epoch)| Mark::new(value, epoch)),
            merged: r.merged.map(|(value, epoch)| Mark::new(value, epoch)),
            bytes: r.bytes,
            sealed_times: r.sealed_times.into_iter().collect::<BTreeMap<_, _>>(),
        };
        let text = encode(&record);
        assert!(
            text.len() <= codec::MAX_RECORD_TEXT,
            "an encoded record fits the decoder"
        );
        assert_eq!(decode(&text), Ok(record.normalized()), "text {text:?}");
    }
});
