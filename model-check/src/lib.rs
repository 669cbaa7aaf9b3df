//! Stateright models of the Capcat protocol over the real capcat-proto machines.
//!
//! - [`publication`]: the catalog publication protocol (lease, allocator,
//!   publish, index pass, reader, crash, clock) over a simulated ClickHouse
//!   that recognises guards by their canonical SQL text.
//! - [`demand`]: the demand fold (events from writer, executor and scan, in
//!   every order, duplicated).
//! - [`run`]: the checker runs the CLI and the tests share, and the numbered
//!   traces they print.

#![forbid(unsafe_code)]

pub mod demand;
pub mod names;
pub mod publication;
pub mod run;
