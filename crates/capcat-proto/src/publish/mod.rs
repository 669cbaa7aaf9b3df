//! Publish(V, packs): make a set of packs visible as snapshot version V.
//!
//! 1. Renew the lease ([`crate::lease::LeaseClaim::renew`]): at the moment the
//!    fenced statements run, the lease has almost a full TTL left, and each
//!    statement is capped at the publish timeout, which the config keeps
//!    below the TTL.
//! 2. Insert the manifest rows (`arrayJoin` over the packs, in chunks) and then
//!    the commit row, each as ONE `INSERT ... SELECT` whose WHERE clause is
//!    `VERSION_BARRIER AND LEASE_FENCE`: the check and the visibility write are
//!    the same server-side statement, so a fenced-out publisher writes nothing.
//! 3. Read back the publish ids standing at V and classify.
//!
//! `publish_id` is per ATTEMPT: a second attempt at one version is a different
//! write, and reusing an id would read the first attempt's row back as its own.
//!
//! ```no_run
//! # use capcat_proto::*;
//! # fn execute(_: &Statement) -> Input { unimplemented!("run it on the catalog") }
//! # fn draw(below: u64) -> u64 { below - 1 }
//! # fn random_uuid() -> uuid::Uuid { unimplemented!("the caller draws a v4 UUID") }
//! # let (tables, cfg) = (Tables::new("t").unwrap(), Config::default());
//! # let lease: Lease = unimplemented!("from LeaseClaim::acquire");
//! # let packs = std::collections::BTreeSet::new();
//! // V comes from the allocator; the publish id is fresh per attempt.
//! let mut publish = Publish::new(tables, cfg, lease, 7, packs, random_uuid());
//! let outcome = loop {
//!     match publish.poll() {
//!         Step::Execute(stmt) => publish.handle(execute(&stmt)),
//!         Step::Draw { below } => publish.handle(Input::Drawn(draw(below))),
//!         Step::Done(outcome) => break outcome,
//!     }
//! };
//! // Keep the renewed lease whatever the outcome.
//! let lease = publish.lease().clone();
//! match outcome {
//!     Ok(PublishOutcome::Won { version, .. }) => println!("v{version} is visible"),
//!     other => println!("not published: {other:?}"),
//! }
//! ```

mod error;
mod machine;
pub mod sql;

pub use error::PublishError;
pub use machine::Publish;

use std::collections::BTreeSet;

use uuid::Uuid;

/// A pack's identity: `(store_id, pack_id)`.
pub type PackRef = (String, Uuid);

/// What stands at V after a publish attempt whose guarded statements ran
/// under the lease. An attempt the lease stopped (taken over, or unsettled
/// after an abandoned statement) is a [`PublishError`], as it is an error of
/// the index pass and of the catalog adapter: one meaning at every layer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PublishOutcome {
    /// The read-back found this attempt's publish_id alone at V: the
    /// commit row stands and its manifest rows pair with it.
    Won {
        /// The published version.
        version: u64,
        /// This attempt's id.
        publish_id: Uuid,
    },
    /// This attempt's row is absent at V: the barrier refused (a higher
    /// version was already published) or its lease was own-but-expired.
    /// Nothing it wrote is visible; a higher version may succeed. Retryable.
    LostRace(LostRace),
    /// This attempt's row stands at V BESIDE a foreign one: V's contents are
    /// the union of two publishes. Not retryable and not a kind of race: the
    /// packs ARE visible, so they must be recorded, and an operator must look.
    Conflict {
        /// The version.
        version: u64,
        /// This attempt's id.
        publish_id: Uuid,
        /// The (smallest) foreign publish id found at V.
        foreign: Uuid,
        /// Every foreign publish id found at V.
        all_foreign: BTreeSet<Uuid>,
    },
}

/// A lost version race: this attempt's publish_id is absent at V.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
#[error(
    "publish {publish_id} lost the race for version {version}: the barrier or an own-but-expired \
     lease refused it and nothing it wrote is visible (found at that version: {found:?})"
)]
pub struct LostRace {
    /// The version that was lost.
    pub version: u64,
    /// This attempt's id.
    pub publish_id: Uuid,
    /// The publish ids found at V (possibly none).
    pub found: BTreeSet<Uuid>,
}
