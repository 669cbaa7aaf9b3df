//! The native half of the `capcat` Python package (`capcat._capcat`).
//!
//! The Python half (`python/capcat/`) turns numpy arrays and torch tensors
//! into dtype, shape and bytes, and back; this half runs the storage
//! service and the reads on a tokio runtime of its own.
//!
//! Architecture Invariant: every call that may wait (on the catalog, the
//! store, the spool's disk, a flush) runs with the GIL released
//! ([`runtime::block`]), so one thread's flush never stops another
//! thread's Python; and nothing here blocks in `Drop`, so a service
//! dropped without `close()` never freezes the thread that drops it.
//!
//! - [`service::NativeService`]: capture, flush, snapshot, close.
//! - [`reader::NativeReader`]: search pages, lookups, verified payloads.
//! - [`errors`]: every Rust error raised as a class of `capcat.errors`,
//!   carrying the error's kind and fields.
//! - [`open`]: the catalog, store, spool, prefix and configuration a
//!   Python caller gives, resolved as the `capcat` command resolves them.

#![forbid(unsafe_code)]
// The crate's Rust items are all private: its API is the Python module. The
// code map above links them for those who read these docs with
// `--document-private-items`.
#![allow(
    rustdoc::private_intra_doc_links,
    reason = "the crate has no public Rust items; the map links private ones"
)]

mod errors;
mod open;
mod reader;
mod runtime;
mod service;

use pyo3::prelude::*;

/// `capcat._capcat`.
#[pymodule]
fn _capcat(m: &Bound<'_, PyModule>) -> PyResult<()> {
    runtime::init_logging();
    m.add_class::<service::NativeService>()?;
    m.add_class::<reader::NativeReader>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
