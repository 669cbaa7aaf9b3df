//! Demand on a live catalog: the publishers, the read behind
//! `capcat status`, and the compaction driver.
//!
//! The pure part (records, the join, the statements) is
//! `capcat_proto::demand`; this module runs it over a [`Transport`]:
//!
//! - [`DemandPublisher`]: writer, executor and scan reports, appended off
//!   the hot path, detached and bounded (a per-append timeout, a fixed
//!   number of slots, drop and count when full), with
//!   [`PublisherCounters`].
//! - [`read_demand`]: per-shard and total pending packs, bytes and oldest
//!   age of a catalog.
//! - [`compact()`]: folds each shard's rows into one.
//!
//! See `docs/demand.md`.
//!
//! [`Transport`]: crate::transport::Transport

mod compact;
mod counters;
mod on_catalog;
mod publisher;
mod read;
mod scan;

pub use compact::{CompactionError, CompactionReport, compact};
pub use counters::PublisherCounters;
pub use publisher::{
    Admission, DemandPublisher, MAX_PUBLISH_SLOTS, PUBLISH_SLOTS, PUBLISH_TIMEOUT, PublisherError,
    PublisherOptions,
};
pub use read::{DemandReadError, DemandReport, read_demand, read_folded};
pub use scan::{SCAN_MAX_OBSERVATIONS, ScanObservation};
