//! Cross-crate integration tests of Capcat against real engines.

#![forbid(unsafe_code)]
