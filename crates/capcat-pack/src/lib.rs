//! Capcat pack format: checksummed, safetensors-compatible capture packs.

#![forbid(unsafe_code)]
