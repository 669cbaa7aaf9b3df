//! The reader plan: pin the published head, resolve captures at it.
//!
//! A read pins W, the highest published version, read sequentially
//! consistent. Membership admits a descriptor row only when its pack is in
//! a manifest row paired on `(index_version, publish_id)` with a
//! commit row at or below W ([`crate::fragments::membership_predicate`], the same
//! predicate the public `{p}_capture` view uses), so a pinned snapshot can
//! never grow. Of each capture's rows one whole row wins, the highest by
//! `(index_version, store_id, pack_id)`: a page groups on capture identity
//! and resolves with ONE `argMax(tuple(<every resolved column>),
//! tuple(index_version, store_id, pack_id))`, a lookup keeps that row with
//! `LIMIT 1 BY` (see [`projection`]). Filters run before resolution, only on
//! immutable columns. Pages advance with a STRICT keyset comparison.
//!
//! The immutability rule this rests on: `(tenant_id, capture_id)` identifies
//! a capture, and every descriptor column but the locator (and the version
//! that wrote the row) is immutable for that identity.

mod admitted;
mod error;
mod machines;
mod pin;
mod plan;
pub mod projection;
mod query;

pub use admitted::{ADMITTED_PAGE, Admitted, AdmittedPacks, MAX_ADMITTED_PAGES, admitted_packs};
pub use error::ReaderError;
pub use machines::{GetByIds, Lookup, Page, SearchPage};
pub use pin::PinSnapshot;
pub use plan::{MAX_LOOKUP_IDS, decode_pinned_version, get_by_ids, pin_snapshot, search_page};
pub use projection::{decode_records, encode_record, resolved_columns, result_columns};
pub use query::{
    Cursor, FILTER_COLUMNS, MAX_PAGE_SIZE, PageSize, Range, SearchFilter, SearchQuery,
};
