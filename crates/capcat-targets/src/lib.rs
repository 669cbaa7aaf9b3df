//! Where the catalog and the packs live.
//!
//! A catalog is `embedded:<path>` (libchdb in this process, fetched into the
//! cache when absent) or `http(s)://host:port` (a ClickHouse server); a
//! store is `local:<dir>` or `s3://bucket?endpoint=URL[&region=R]`. The
//! `capcat` command and the Python package both take these forms and open
//! them here, so the two never disagree on what a location means, which
//! credentials it reads or when it may create a directory.
//!
//! - [`CatalogTarget`] and [`StoreTarget`]: parse, print back, open.
//! - [`Access`]: whether opening may create what it names.
//! - [`ensure_libchdb`]: the engine's path, fetched with the pinned SHA-256
//!   when absent.
//! - [`name_refusal`]: the rule for the names a user gives (tenant, run, ...).

#![forbid(unsafe_code)]

mod engine;
mod name;
mod target;

pub use engine::{FetchError, ensure_libchdb};
pub use name::name_refusal;
pub use target::{Access, CatalogTarget, DEFAULT_REGION, StoreTarget, TargetError};
