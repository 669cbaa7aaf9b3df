//! Fuzzes `PackReader::from_bytes` with arbitrary bytes.
//!
//! Properties: the reader never panics (every bad input is a typed
//! `PackError`); whatever it accepts is a valid safetensors file (the
//! `safetensors` crate accepts it too); and it is internally consistent:
//! every record decodes and summarises, and every locator it reports
//! hydrates from the same bytes and verifies.
//!
//! No `#![forbid(unsafe_code)]` here: `fuzz_target!` expands to the
//! `extern "C"` entry point libFuzzer calls.

#![no_main]

use capcat_pack::{InMemory, PackReader, hydrate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(reader) = PackReader::from_bytes(data.to_vec()) else {
        return;
    };
    safetensors::SafeTensors::deserialize(data).expect("an accepted pack is a safetensors file");
    let mut source = InMemory(reader.bytes().clone());
    for locator in reader.locators() {
        let payload = hydrate(&mut source, locator).expect("an accepted pack hydrates");
        assert_eq!(payload, reader.payload(locator.index).expect("in range"));
        reader
            .values(locator.index)
            .expect("an accepted record decodes");
        reader
            .summary(locator.index)
            .expect("an accepted record summarises");
    }
    assert_eq!(reader.info().records.len(), reader.len());
});
