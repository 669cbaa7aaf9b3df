//! Pure, IO-free state machines and canonical SQL of the Capcat catalog protocol.
//!
//! Architecture Invariant: this crate never awaits, never reads a clock and
//! never draws randomness. Server time, jitter draws and ids are arguments.

#![forbid(unsafe_code)]

pub mod demand;
