//! Embedded ClickHouse engine (libchdb, loaded at run time) and a ClickHouse-HTTP front.
//!
//! The only crate allowed unsafe code, and only in its FFI module.
