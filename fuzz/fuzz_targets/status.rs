//! Feeds arbitrary bytes to the status-file reader
//! (`capcat_service::parse_status`, what `read_status` runs on
//! `<spool>/status.json` for `capcat status`).
//!
//! Properties: the reader never panics and refuses with a typed
//! `StatusError` (`Corrupt`, or `NewerFormat` for a format above
//! `STATUS_FORMAT`); a file it accepts has a known format, and writing it
//! back as the service writes it (`serde_json::to_vec_pretty`) reads back
//! equal: the round trip is the identity.

#![no_main]

use std::path::Path;

use capcat_service::status::STATUS_FORMAT;
use capcat_service::{StatusError, parse_status};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("status.json");
    match parse_status(path, data) {
        Ok(status) => {
            assert!(status.format <= STATUS_FORMAT);
            let written = serde_json::to_vec_pretty(&status).expect("a status file encodes");
            let again = parse_status(path, &written).expect("a written status file reads back");
            assert_eq!(again, status);
        }
        Err(StatusError::Corrupt { .. } | StatusError::NewerFormat { .. }) => {}
        Err(other) => panic!("parse_status refused bytes with {other:?}"),
    }
});
