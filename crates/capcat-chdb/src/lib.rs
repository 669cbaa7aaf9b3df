//! Embedded ClickHouse engine (libchdb, loaded at run time) and a ClickHouse-HTTP front.
//!
//! The engine is chDB's C library, loaded with `libloading` from
//! `$CAPCAT_LIBCHDB` (or the cache path `cargo xtask fetch-engine` fills, see
//! [`library_path`]), so everything else builds and tests without it.
//!
//! ```no_run
//! use capcat_chdb::{Engine, Request};
//! let engine = Engine::open("/tmp/catalog")?;
//! let out = engine.execute(
//!     &Request::new("SELECT {n:UInt64} + 1")
//!         .param("n", "41")
//!         .max_execution_time_s(Some(5))
//!         .format("TSV"),
//! )?;
//! assert_eq!(out, b"42\n");
//! # Ok::<(), capcat_chdb::ChdbError>(())
//! ```
//!
//! The only crate allowed unsafe code, and only in its FFI module.

mod engine;
mod error;
mod ffi;
#[doc(hidden)]
pub mod fuzzing;
pub mod pin;
mod request;

#[cfg(feature = "http-front")]
mod http;

pub use engine::{Engine, EngineOptions, PoolStats};
pub use error::ChdbError;
pub use ffi::library_path;
pub use request::{DEFAULT_FORMAT, Request};

#[cfg(feature = "test-certificates")]
pub use http::test_pki::TestPki;
#[cfg(feature = "http-front")]
pub use http::{FrontCredentials, FrontOptions, FrontTls, HttpFront, HttpFrontError};
