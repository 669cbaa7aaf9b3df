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
