//! Feeds arbitrary text to `Cursor::from_token` (a cursor pasted back into
//! `capcat search --cursor`), and arbitrary cursors to `Cursor::to_token`.
//!
//! Properties: `from_token` never panics and refuses with a typed
//! `ReaderError::BadCursor`; a token it accepts prints back to a token that
//! parses to the same cursor; and for any cursor, `from_token(to_token(c))`
//! is `c` (the round trip is the identity).

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use capcat_proto::reader::{Cursor, ReaderError};
use libfuzzer_sys::fuzz_target;
use uuid::Uuid;

#[derive(Arbitrary, Debug)]
struct AnyCursor {
    pinned: u64,
    tenant_id: String,
    experiment_id: String,
    run_id: String,
    captured_at_ns: u64,
    capture_id: u128,
}

fuzz_target!(|data: &[u8]| {
    if let Ok(token) = std::str::from_utf8(data) {
        match Cursor::from_token(token) {
            Ok(cursor) => {
                let again = Cursor::from_token(&cursor.to_token()).expect("a printed token parses");
                assert_eq!(again, cursor);
            }
            Err(ReaderError::BadCursor { .. }) => {}
            Err(other) => panic!("from_token refused with {other:?}, not BadCursor"),
        }
    }
    let mut u = Unstructured::new(data);
    if let Ok(c) = AnyCursor::arbitrary(&mut u) {
        let cursor = Cursor {
            pinned: c.pinned,
            tenant_id: c.tenant_id,
            experiment_id: c.experiment_id,
            run_id: c.run_id,
            captured_at_ns: c.captured_at_ns,
            capture_id: Uuid::from_u128(c.capture_id),
        };
        let token = cursor.to_token();
        assert_eq!(
            Cursor::from_token(&token).expect("a printed token parses"),
            cursor,
            "token {token:?}"
        );
    }
});
