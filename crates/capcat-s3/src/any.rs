//! [`AnyStore`]: the store chosen at run time from configuration.

use bytes::Bytes;

use crate::error::StoreError;
use crate::key::ObjectKey;
use crate::local::LocalStore;
use crate::metadata::UserMetadata;
use crate::s3::S3Store;
use crate::store::{ByteRange, ListPage, ListToken, ObjectHead, PackStore, PutReceipt};

/// One of the stores, for callers that pick it from configuration.
/// [`PackStore`] uses `impl Future` returns, so it is not object safe; this
/// enum stands in for `dyn PackStore`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AnyStore {
    /// A local directory (the embedded default).
    Local(LocalStore),
    /// An S3-compatible store.
    S3(S3Store),
}

impl From<LocalStore> for AnyStore {
    fn from(store: LocalStore) -> Self {
        Self::Local(store)
    }
}

impl From<S3Store> for AnyStore {
    fn from(store: S3Store) -> Self {
        Self::S3(store)
    }
}

impl PackStore for AnyStore {
    async fn put(
        &self,
        key: &ObjectKey,
        body: Bytes,
        crc64nvme: u64,
        metadata: &UserMetadata,
    ) -> Result<PutReceipt, StoreError> {
        match self {
            Self::Local(store) => store.put(key, body, crc64nvme, metadata).await,
            Self::S3(store) => store.put(key, body, crc64nvme, metadata).await,
        }
    }

    async fn head(&self, key: &ObjectKey) -> Result<ObjectHead, StoreError> {
        match self {
            Self::Local(store) => store.head(key).await,
            Self::S3(store) => store.head(key).await,
        }
    }

    async fn get(&self, key: &ObjectKey) -> Result<Bytes, StoreError> {
        match self {
            Self::Local(store) => store.get(key).await,
            Self::S3(store) => store.get(key).await,
        }
    }

    async fn get_range(&self, key: &ObjectKey, range: ByteRange) -> Result<Bytes, StoreError> {
        match self {
            Self::Local(store) => store.get_range(key, range).await,
            Self::S3(store) => store.get_range(key, range).await,
        }
    }

    async fn list_page(
        &self,
        prefix: &str,
        token: Option<&ListToken>,
        max_keys: u16,
    ) -> Result<ListPage, StoreError> {
        match self {
            Self::Local(store) => store.list_page(prefix, token, max_keys).await,
            Self::S3(store) => store.list_page(prefix, token, max_keys).await,
        }
    }

    async fn delete(&self, key: &ObjectKey) -> Result<(), StoreError> {
        match self {
            Self::Local(store) => store.delete(key).await,
            Self::S3(store) => store.delete(key).await,
        }
    }
}
