//! Cross-crate integration tests of Capcat against real engines.
//!
//! The library half holds the harnesses the tests in `tests/` share:
//! - [`stress`]: N publishers and M readers on one embedded engine, with
//!   lease takeovers, releases, stalls and crashes, and a [`checker`] that
//!   asserts the model's safety properties on the real tables as it goes.
//! - [`replay`]: the model's traces (`tests/corpus/`) replayed step by step
//!   on the embedded engine, every prediction compared.
//! - [`engine`]: the process's embedded engine, or a skip (or a failure
//!   under `CAPCAT_REQUIRE_ENGINES=1`) when `CAPCAT_LIBCHDB` is not set.

#![forbid(unsafe_code)]

pub mod checker;
pub mod engine;
pub mod fixtures;
pub mod ledger;
pub mod observed;
pub mod properties;
pub mod recording;
pub mod replay;
pub mod rng;
pub mod stress;
pub mod traces;
