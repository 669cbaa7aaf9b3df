//! Capcat catalog adapter: runs capcat-proto statements over ClickHouse.
//!
//! - [`Transport`] carries one protocol [`capcat_proto::Statement`] to an
//!   engine and decodes its rows strictly: [`Embedded`] (libchdb in this
//!   process) and [`Http`] (a ClickHouse server, through the `clickhouse`
//!   crate).
//! - The drivers loop over capcat-proto's machines and nothing else: this
//!   crate writes no SQL of its own. It supplies what the machines may not
//!   own: jitter draws ([`Jitter`]), fresh ids (UUID v4) and the transport.
//! - [`Catalog`] ties a transport, the table names and the protocol
//!   configuration together; the service and the CLI use it. Besides the
//!   protocol operations it reads which packs the inventory holds
//!   ([`Catalog::committed`], for the service's reconciler) and the demand
//!   events ([`Catalog::demand_report`], [`Catalog::read_folded_demand`]).
//! - [`clock`]: the one reading of the wall clock as Unix milliseconds
//!   ([`unix_now_ms`]) or nanoseconds, for everything above capcat-proto.

#![forbid(unsafe_code)]

pub mod clock;
pub mod demand;
pub mod transport;

/// The pinned libchdb the embedded transport loads (capcat-chdb's `pin`:
/// version, tarball, SHA-256), for fetchers above this crate (the CLI).
pub use capcat_chdb::pin as libchdb_pin;
pub use transport::{
    AccessError, BoxFuture, Counting, Embedded, Http, HttpError, HttpOptions, Password, REDACTED,
    StatementCount, Transport,
};

mod catalog;
mod claim_id;
mod drive;
mod error;
mod inventory;
mod jitter;
mod lease;

pub use catalog::{Catalog, Published};
pub use clock::{unix_now_ms, unix_now_ns};
pub use drive::{MAX_STEPS, drive, run_in_order};
pub use error::{CatalogError, VALUE_REFUSAL_CODES, failure_is_outage};
pub use jitter::Jitter;
pub use lease::LeaseHandle;
