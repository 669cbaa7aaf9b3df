//! The conformance kit: any implementation of the Capcat protocol, in any
//! language, driven step by step against capcat-proto.
//!
//! The implementation under test runs as a child process (a *driver*) and
//! speaks the JSON-lines protocol of docs/native-writers.md. For every case
//! the kit starts the same machine in the driver and in capcat-proto, hands
//! both the same answers (the model checker's simulated engine, with
//! answers varied on purpose) and compares every step: statement text byte
//! for byte, parameters, settings, expected columns, data and outcome. The
//! first difference ends the run with the trace so far and a command that
//! replays exactly that case.
//!
//! - [`wire`]: the protocol's JSON, both directions.
//! - [`start`]: what a driver is asked to start, and capcat-proto's machine
//!   for it ([`start::Reference`], the machines wrapped in `reference.rs`).
//! - [`corpus`]: the model's trace corpus, replayed through a driver.
//! - [`descriptor`]: capture descriptors in an `index_pass` start.
//! - [`reader`]: the reader machines' starts, outcomes and answers.
//! - [`schema`]: the schema machine's start, outcome and catalogs.
//! - [`outcome`]: outcomes as JSON, and the normalisation before comparing.
//! - [`driver`]: the child process.
//! - [`kit`]: sessions in lockstep, and the comparison.
//! - [`world`]: the simulated catalog that answers.
//! - [`explore`]: the bounded exhaustive exploration (its starts in
//!   `explore/starts.rs`, the answers it varies in `explore/answers.rs`).
//! - [`walk`]: seeded random walks of two racing publishers.
//! - [`run`]: every case against a driver, and the report.

#![forbid(unsafe_code)]

pub mod corpus;
pub mod descriptor;
pub mod driver;
mod error;
pub mod explore;
pub mod kit;
pub mod outcome;
pub mod reader;
mod reference;
pub mod run;
pub mod schema;
pub mod start;
pub mod walk;
pub mod wire;
pub mod world;

pub use error::ConformError;
