//! The differential test's parts: generated table states, the probe that
//! evaluates many fragment instances in one SELECT, the instances
//! themselves, and the protocol statements run on each state.

#![allow(unreachable_pub)]

pub mod fragments;
pub mod probe;
pub mod state;
pub mod statements;
