//! Capcat storage service: spool -> store -> catalog in one process.
//!
//! - [`ServiceConfig`]: TOML, validated at construction ([`ConfigError`]
//!   names the field).
//! - [`Spool`]: `<pack_id>.pack.open` renamed to `.ready` when sealed.
//! - [`Service`]: the sink ([`Service::append`], [`Service::seal`]), the
//!   cycle (owed index first, upload only when nothing is owed, HEAD-verified
//!   uploads, batch halving, set-aside), the lease keep-alive (every TTL/3,
//!   on its own task), the reconciler, [`Service::flush`],
//!   [`Service::close`] and [`Service::snapshot`].
//! - [`owner_lock`]: the exclusive lock `<spool_dir>/.owner.lock` a
//!   spool's owner holds for its whole life (sweeping and the status file
//!   are the owner's alone; a second owner gets [`StartError::SpoolBusy`]).
//! - [`status`]: the snapshot the spool's owner writes to
//!   `<spool_dir>/status.json` at start, every `status_interval_s` and on
//!   close, and [`read_status`] for `capcat status`.
//! - The catalog is capcat-clickhouse's [`Catalog`] (its one drive loop,
//!   its [`capcat_clickhouse::LeaseHandle`]); demand events go through its
//!   [`DemandPublisher`] (bounded slots, dropped and counted when full,
//!   drained on close).
//!
//! - [`hydrate()`]: one capture's payload read back and verified.
//! - [`start_waiting_for_lease`]: a start that waits out a killed
//!   process's publisher lease.
//!
//! `docs/operations.md` describes running it.

#![forbid(unsafe_code)]

pub mod backoff;
pub mod catalog;
pub mod config;
mod cycle;
mod demand_events;
pub mod descriptors;
mod error;
pub mod hydrate;
mod lease_slot;
mod lease_wait;
pub mod owner_lock;
mod reconcile;
mod service;
mod signals;
pub mod snapshot;
pub mod spool;
pub mod status;
mod status_writer;
mod upload;

pub use backoff::Backoff;
pub use capcat_clickhouse::demand::DemandPublisher;
pub use catalog::Catalog;
pub use config::{ConfigError, ServiceConfig, ValidConfig};
pub use error::{CycleError, FlushError, SinkError, StartError};
pub use hydrate::{HydrateError, hydrate};
pub use lease_wait::start_waiting_for_lease;
pub use owner_lock::{SpoolHolder, SpoolOwnership};
pub use reconcile::ReconcileReport;
pub use service::{CloseReport, FlushProgress, FlushReport, Service};
pub use snapshot::{DemandCounters, ErrorKind, ErrorRecord, RejectedPack, Snapshot, StageTimes};
pub use spool::{Spool, SpoolError};
pub use status::{StatusError, StatusFile, parse_status, read_status};
