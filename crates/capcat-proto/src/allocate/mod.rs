//! The sole-claimant version allocator.
//!
//! A claimant reads the highest version anyone has claimed or published,
//! appends a claim at `head + 1 + jitter`, and reads that version back
//! (sequentially consistent). Alone at the version, it owns it; beside
//! another claimant, both abandon it and retry from a fresh head read with a
//! wider jitter window (`randbelow(8 * attempt + 1)`). A claim row is inert,
//! so an abandoned version costs nothing but the number. Versions are
//! therefore unique per claimant and increase across writers without any
//! writer's clock.

mod error;
mod machine;
pub mod sql;

pub use error::AllocateError;
pub use machine::Allocate;
