//! Feeds arbitrary bytes to the pack reader: `PackReader::from_bytes`, then
//! `PackReader::from_bytes_expecting` and `hydrate` over two range sources,
//! an honest one (`InMemory`) and one that answers each range with bytes
//! the input chooses (a store that lies or truncates).
//!
//! Properties: the reader never panics (every bad input is a typed
//! `PackError`); whatever it accepts is a valid safetensors file (the
//! `safetensors` crate accepts it too) and is internally consistent: every
//! record decodes and summarises, and every locator it reports hydrates
//! from the same bytes and verifies; `from_bytes_expecting` agrees with
//! `from_bytes` under the pack's own digest and refuses any other; a range
//! source that answers with other bytes never makes `hydrate` return them.
//!
//! No `#![forbid(unsafe_code)]` here: `fuzz_target!` expands to the
//! `extern "C"` entry point libFuzzer calls.

#![no_main]

use capcat_pack::PackReader;
use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    if let Ok(reader) = PackReader::from_bytes(data.to_vec()) {
        common::check_accepted_pack(data, &reader);
    }
});
