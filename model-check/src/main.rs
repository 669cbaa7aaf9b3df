//! `capcat-model-check`: list and run the protocol models.

#![forbid(unsafe_code)]

fn main() {}
