//! The index pass: descriptors -> allocate -> publish -> inventory.
//!
//! Order is the safety argument. Descriptor rows are inert until a publish
//! admits their packs, so they go first and need no guard. The inventory is
//! the replay guard (a pack in it is never indexed again), so it goes LAST:
//! written before a successful publish, a crash would leave a pack skipped
//! forever and invisible; written after, a crash costs redundant work on the
//! next pass (`InventoryOnlyAfterPublish`).
//!
//! On a lost race the pass re-allocates and rewrites the descriptors at the
//! new version, so a descriptor's `index_version` always matches the publish
//! that admitted it and `argMax` supersession follows publish order.
//!
//! ```no_run
//! # use capcat_proto::*;
//! # fn execute(_: &Statement) -> Input { unimplemented!("run it on the catalog") }
//! # fn draw(below: u64) -> u64 { below - 1 }
//! # fn random_uuid() -> uuid::Uuid { unimplemented!("the caller draws a v4 UUID") }
//! # let (tables, cfg) = (Tables::new("t").unwrap(), Config::default());
//! # let lease: Lease = unimplemented!("from LeaseClaim::acquire");
//! # let descriptors: Vec<CaptureDescriptor> = Vec::new();
//! // One random seed per pass; each attempt derives its ids from it.
//! let mut pass = IndexPass::new(tables, cfg, lease, descriptors, random_uuid());
//! let report = loop {
//!     match pass.poll() {
//!         Step::Execute(stmt) => pass.handle(execute(&stmt)),
//!         Step::Draw { below } => pass.handle(Input::Drawn(draw(below))),
//!         Step::Done(outcome) => break outcome,
//!     }
//! };
//! let lease = pass.lease().clone(); // renewed by the pass's publishes
//! ```

mod committed;
mod error;
mod machine;
pub mod sql;

pub use committed::ReadCommitted;
pub use error::IndexError;
pub use machine::{IndexPass, attempt_ids};

use std::collections::BTreeSet;

use uuid::Uuid;

use crate::publish::PackRef;

/// What an index pass did.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IndexReport {
    /// Every pack in the batch was already committed (or the batch was
    /// empty): nothing was written, not even a version claim, so overlapping
    /// indexer and reconciler runs are benign.
    NothingToDo {
        /// The packs skipped as already committed.
        skipped: BTreeSet<PackRef>,
    },
    /// The packs were published and recorded in the inventory.
    Indexed {
        /// The published version.
        version: u64,
        /// The winning attempt's publish id.
        publish_id: Uuid,
        /// The packs published.
        packs: BTreeSet<PackRef>,
        /// The packs skipped as already committed.
        skipped: BTreeSet<PackRef>,
        /// Descriptor rows written at `version`.
        descriptors: usize,
        /// Publish attempts used (1 when uncontested).
        attempts: u32,
    },
}
