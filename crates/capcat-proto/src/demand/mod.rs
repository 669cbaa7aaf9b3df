//! The demand fold: the indexing backlog as a join-semilattice.
//!
//! Each spool shard has a [`DemandRecord`]: how far its writer has sealed
//! packs ([`Mark`]s of generation and epoch), how far the indexer has merged
//! them, the bytes waiting and the seal time of each unmerged generation.
//! Three sources report ([`Source`]): the writer, the executor (indexer) and
//! the scan (reconciler). Records combine with [`DemandRecord::join`], a
//! per-dimension least upper bound, so [`fold()`] gives one answer for any
//! order or duplication of the same events, and storage needs no
//! compare-and-swap: events are appended ([`storage::append`]) and folded
//! when read ([`storage::rebuild`]). [`status()`] summarises a fold for an
//! operator, and [`ReadDemand`] is the read-and-fold as a machine. See
//! `docs/demand.md`.
//!
//! Everything here is pure: times arrive as arguments, ids as arguments.

pub mod codec;
pub mod event;
pub mod fold;
pub mod mark;
pub mod read;
pub mod record;
pub mod status;
pub mod storage;

pub use codec::{DecodeError, decode, encode};
pub use event::{DemandEvent, Source};
pub use fold::{Folded, SkipReason, Skipped, fold};
pub use mark::Mark;
pub use read::{DEFAULT_READ_LIMIT, DemandRead, ReadDemand};
pub use record::{CURRENT_VERSION, DemandRecord, SEALED_TIMES_CAP, UnknownVersion};
pub use status::{DemandStatus, ShardStatus, status};
