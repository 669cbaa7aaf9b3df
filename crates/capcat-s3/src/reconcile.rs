//! Reconcile support: what a catalog's key space holds, and what the
//! uncommitted packs in it say about themselves.
//!
//! The reconciler lists `v1/<prefix>/`, asks the catalog which of the listed
//! pack ids it already committed, and HEADs the rest to recover their
//! metadata. Two rules from the system this replaces:
//!
//! - Every listed key's pack id is validated as a canonical UUID *before* it
//!   goes near the catalog. A foreign object (a stray file, a non-canonical
//!   UUID, a nested key) is counted and skipped; it never fails the listing,
//!   because one such object would otherwise fail the whole committed-ids
//!   query (pack_id is a UUID column) and with it every reconcile pass.
//! - A HEAD that fails (5xx, 403, timeout) is an error recorded with its key
//!   and cause, never counted as a foreign object: a pack the pass could not
//!   read must not look like one it rightly ignored. The object is left for
//!   the next pass.

use uuid::Uuid;

use crate::error::{ErrorClass, StoreError};
use crate::key::{CatalogPrefix, PackKey};
use crate::metadata::{MetadataError, PackMetadata};
use crate::store::{ListToken, PackStore};

/// At most this many foreign objects are kept as examples; the rest are
/// only counted, so a bucket full of strays cannot exhaust memory.
pub const MAX_FOREIGN_EXAMPLES: usize = 32;

/// How a listing pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListLimits {
    /// Keys per page (1 to 1000).
    pub page_size: u16,
    /// The most pages one listing reads before failing, so a listing whose
    /// continuation never ends (a misbehaving store) cannot loop forever.
    pub max_pages: u32,
}

impl Default for ListLimits {
    fn default() -> Self {
        Self {
            page_size: 1000,
            max_pages: 100_000,
        }
    }
}

/// Why an object is not one of this catalog's packs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForeignReason {
    /// The key is not `v1/<prefix>/<canonical uuid>.pack`.
    NotAPackKey,
    /// HEAD succeeded but the object carries no (or malformed) pack metadata.
    NoPackMetadata(MetadataError),
    /// The metadata names another pack id than the key.
    PackIdMismatch {
        /// The pack id the metadata names.
        metadata_pack_id: Uuid,
    },
}

/// One foreign object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignObject {
    /// Its key.
    pub key: String,
    /// Why it is foreign.
    pub reason: ForeignReason,
}

/// Foreign objects: all counted, the first [`MAX_FOREIGN_EXAMPLES`] kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForeignTally {
    /// How many there were.
    pub count: u64,
    /// The first few, for a log line.
    pub examples: Vec<ForeignObject>,
}

impl ForeignTally {
    fn record(&mut self, key: String, reason: ForeignReason) {
        tracing::debug!(key, ?reason, "skipping a foreign object");
        self.count += 1;
        if self.examples.len() < MAX_FOREIGN_EXAMPLES {
            self.examples.push(ForeignObject { key, reason });
        }
    }
}

/// A listed key that names a pack of this catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedPack {
    /// Its key (and pack id).
    pub key: PackKey,
    /// Its size as listed.
    pub size: u64,
}

/// The packs under a catalog's prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackListing {
    /// Keys that name a pack, in key order.
    pub packs: Vec<ListedPack>,
    /// Keys that do not.
    pub foreign: ForeignTally,
    /// How many pages the listing took.
    pub pages: u32,
}

/// Lists every key under `v1/<prefix>/`, sorting them into packs and foreign
/// objects.
///
/// # Errors
/// A failed page (the listing as a whole cannot be trusted then), or more
/// than `limits.max_pages` pages. Foreign keys are never errors.
pub async fn list_catalog_packs<S: PackStore>(
    store: &S,
    prefix: &CatalogPrefix,
    limits: ListLimits,
) -> Result<PackListing, StoreError> {
    let list_prefix = prefix.list_prefix();
    let mut listing = PackListing::default();
    let mut token: Option<ListToken> = None;
    loop {
        if listing.pages >= limits.max_pages {
            return Err(StoreError::new(
                ErrorClass::Other,
                crate::Operation::List,
                list_prefix,
                format!("the listing did not end within {} pages", limits.max_pages),
            ));
        }
        let page = store
            .list_page(&list_prefix, token.as_ref(), limits.page_size)
            .await?;
        listing.pages += 1;
        for object in page.objects {
            match PackKey::parse(prefix, &object.key) {
                Some(key) => listing.packs.push(ListedPack {
                    key,
                    size: object.size,
                }),
                None => listing
                    .foreign
                    .record(object.key, ForeignReason::NotAPackKey),
            }
        }
        match page.next {
            Some(next) => token = Some(next),
            None => return Ok(listing),
        }
    }
}

/// A pack whose HEAD succeeded and whose metadata names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedPack {
    /// Its key.
    pub key: PackKey,
    /// Its size as HEAD reports it.
    pub size: u64,
    /// Its metadata.
    pub metadata: PackMetadata,
}

/// A HEAD that failed: the pack is neither verified nor foreign, and is left
/// for the next pass.
#[derive(Debug)]
pub struct HeadFailure {
    /// The key HEAD was asked about.
    pub key: PackKey,
    /// Why it failed (its class says whether a retry may help).
    pub error: StoreError,
}

/// What HEADing a set of packs found.
#[derive(Debug, Default)]
pub struct HeadSweep {
    /// Packs with valid metadata naming them.
    pub verified: Vec<VerifiedPack>,
    /// Objects whose metadata is absent, malformed, or names another pack.
    pub foreign: ForeignTally,
    /// HEADs that failed (5xx, 403, timeout, ...), with key and cause.
    pub errors: Vec<HeadFailure>,
    /// Packs deleted between the listing and the HEAD.
    pub gone: Vec<PackKey>,
}

/// HEADs each of `packs` (the uncommitted ones), one at a time, and sorts
/// the answers. Never fails as a whole: each failure is recorded with its key.
pub async fn head_packs<S: PackStore>(store: &S, packs: &[ListedPack]) -> HeadSweep {
    let mut sweep = HeadSweep::default();
    for pack in packs {
        let key = pack.key.clone();
        match store.head(&key.object_key()).await {
            Ok(head) => match head.pack_metadata() {
                Ok(metadata) if metadata.pack_id == key.pack_id() => {
                    sweep.verified.push(VerifiedPack {
                        key,
                        size: head.size,
                        metadata,
                    });
                }
                Ok(metadata) => sweep.foreign.record(
                    key.to_string(),
                    ForeignReason::PackIdMismatch {
                        metadata_pack_id: metadata.pack_id,
                    },
                ),
                Err(error) => sweep
                    .foreign
                    .record(key.to_string(), ForeignReason::NoPackMetadata(error)),
            },
            Err(error) if error.class() == ErrorClass::NotFound => {
                tracing::debug!(key = %key, "pack deleted between listing and HEAD");
                sweep.gone.push(key);
            }
            Err(error) => {
                tracing::warn!(key = %key, %error, "HEAD of an uncommitted pack failed; left for the next pass");
                sweep.errors.push(HeadFailure { key, error });
            }
        }
    }
    sweep
}
