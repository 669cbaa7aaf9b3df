//! The catalog publication model (`spec/Publication.tla`): publishers
//! running capcat-proto's lease, allocator, publish and index-pass machines,
//! a reader pinning W, publisher crashes, and a server clock, over a
//! simulated ClickHouse.

pub mod action;
pub mod config;
pub mod design;
pub mod engine;
pub mod model;
pub mod properties;
pub mod state;
pub mod strict;

pub use action::Action;
pub use config::ModelConfig;
pub use design::Design;
pub use model::{BuildError, PublicationModel};
pub use state::State;

/// The lease the unit tests' statements are fenced under.
#[cfg(test)]
pub(crate) fn test_lease() -> capcat_proto::Lease {
    capcat_proto::Lease {
        lease_id: uuid::Uuid::from_u128(2),
        holder: "p".to_owned(),
        term: 1,
        expires_at_ns: 2_000_000_000,
        unsettled_until_ns: 0,
    }
}
