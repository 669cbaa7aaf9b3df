//! Capcat benchmarks.

#![forbid(unsafe_code)]
