//! Pure, IO-free state machines and canonical SQL of the Capcat catalog protocol.
//!
//! Every protocol operation is a [`Machine`]: the caller polls it for the next
//! [`Step`], executes the [`Statement`] it asks for (or draws the jitter it
//! asks for) and hands the result back with [`Machine::handle`], until the
//! machine is [`Step::Done`] with a typed outcome. The machines are plain data
//! (`Clone + Eq + Hash + Debug`, BTree collections only), which is what lets
//! the stateright models keep the real machines inside their states.
//!
//! Architecture Invariant: this crate never awaits, never reads a clock and
//! never draws randomness. Server time arrives in result rows (the server
//! stamps it), jitter arrives through [`Input::Drawn`], and ids (publish ids,
//! lease ids) are constructor arguments.

#![forbid(unsafe_code)]

pub mod allocate;
pub mod config;
mod decode;
pub mod demand;
pub mod descriptor;
#[cfg(any(test, feature = "designs"))]
pub mod designs;
pub mod fragments;
mod in_order;
pub mod index;
pub mod lease;
pub mod machine;
pub mod publish;
pub mod reader;
pub mod schema;
mod sole_claim;
pub mod statement;
pub mod tables;
mod text_format;

pub use allocate::{Allocate, AllocateError};
pub use config::{Config, ConfigError};
pub use descriptor::{CAPTURE_COLUMNS, CaptureColumn, CaptureDescriptor};
pub use in_order::{InOrder, StatementFailed};
pub use index::{IndexError, IndexPass, IndexReport};
pub use lease::{Lease, LeaseClaim, LeaseError, LeaseHead, Release};
pub use machine::{Failure, Input, Machine, Step};
pub use publish::{LostRace, PackRef, Publish, PublishError, PublishOutcome};
pub use statement::{
    Column, ColumnType, Expect, InsertData, Param, Rows, Settings, Statement, Value,
};
pub use tables::{InvalidPrefix, Tables};
