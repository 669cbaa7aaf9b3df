//! Capcat object-store adapter: S3 via aws-sdk-s3 and a local-directory store.
//!
//! Packs are immutable and named by UUID, so nothing here relies on
//! conditional writes: every arbitration happens in the catalog. What this
//! crate gives the storage service is
//!
//! - [`PackStore`], one async trait over an object store: put (with an
//!   `x-amz-checksum-crc64nvme` the store verifies), head, get whole or by byte
//!   range, paginated list by prefix, delete;
//! - [`S3Store`], any S3-compatible endpoint through aws-sdk-s3, and
//!   [`LocalStore`], a directory with atomic writes (the embedded default);
//!   [`AnyStore`] picks one of them at run time;
//! - [`StoreError`], whose [`ErrorClass`] (not-found, precondition failed,
//!   auth, transient, checksum mismatch, other) is the same for every store;
//! - the key layout `v1/<prefix>/<pack_id>.pack` ([`PackKey`]) and the user
//!   metadata identifying a pack ([`PackMetadata`]);
//! - [`reconcile`]: listing a catalog's packs (foreign objects are counted and
//!   skipped, never failing the listing) and HEADing the uncommitted ones (a
//!   failed HEAD is an error with its key and cause, never a foreign object).
//!
//! `docs/object-store.md` describes the layout and the error classes.

#![forbid(unsafe_code)]

mod any;
mod error;
mod key;
mod local;
pub mod metadata;
pub mod reconcile;
mod s3;
mod store;

pub use any::AnyStore;
pub use error::{CredentialsOrigin, ErrorClass, Operation, StoreError};
pub use key::{CatalogPrefix, KEY_LAYOUT_VERSION, KeyError, ObjectKey, PackKey};
pub use local::LocalStore;
pub use metadata::{MetadataError, PackMetadata, UserMetadata};
pub use s3::{
    ConfigError, MAX_ATTEMPTS_LIMIT, S3Config, S3Credentials, S3Retry, S3Store, S3Timeouts,
};
pub use store::{
    ByteRange, ListPage, ListToken, ListedObject, ObjectChecksum, ObjectHead, PackStore,
    PutReceipt, RangeError, crc64nvme, sha256,
};
