//! [`LocalStore`]: a directory as an object store, the embedded default.
//!
//! Each object is one file at `<root>/<key>` (see [`envelope`] for its
//! format). A write goes to a temporary file in the destination directory,
//! is fsynced, renamed over the key and the directory is fsynced, so after a
//! crash the key holds the old object or the new one, never a torn file.

mod envelope;
mod fs_ops;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{ErrorClass, Operation, StoreError};
use crate::key::ObjectKey;
use crate::metadata::UserMetadata;
use crate::store::{ByteRange, ListPage, ListToken, ObjectHead, PackStore, PutReceipt};

/// A directory holding objects, with atomic writes.
///
/// Clones share the same directory. Every file operation runs on tokio's
/// blocking pool, so a slow disk never stalls the async workers.
#[derive(Clone, Debug)]
pub struct LocalStore {
    root: Arc<PathBuf>,
}

impl LocalStore {
    /// Opens (creating when absent) the store at `root`.
    ///
    /// # Errors
    /// [`StoreError::Other`] when the directory cannot be created.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| {
            StoreError::new(
                ErrorClass::Other,
                Operation::Put,
                root.display().to_string(),
                format!("cannot create the store directory: {e}"),
            )
        })?;
        Ok(Self {
            root: Arc::new(root),
        })
    }

    /// The store's directory.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs `work` on the blocking pool, mapping a panicked or cancelled task
    /// to an error of class Other.
    async fn blocking<T, F>(&self, op: Operation, key: &str, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Path) -> Result<T, StoreError> + Send + 'static,
    {
        let root = Arc::clone(&self.root);
        match tokio::task::spawn_blocking(move || work(&root)).await {
            Ok(result) => result,
            Err(join) => Err(StoreError::new(
                ErrorClass::Other,
                op,
                key,
                format!("file task failed: {join}"),
            )),
        }
    }
}

impl PackStore for LocalStore {
    async fn put(
        &self,
        key: &ObjectKey,
        body: Bytes,
        crc64nvme: u64,
        metadata: &UserMetadata,
    ) -> Result<PutReceipt, StoreError> {
        let owned_key = key.clone();
        let metadata = metadata.clone();
        self.blocking(Operation::Put, key.as_str(), move |root| {
            fs_ops::put(root, &owned_key, &body, crc64nvme, &metadata)
        })
        .await?;
        tracing::debug!(key = %key, "local store: put");
        Ok(PutReceipt { etag: None })
    }

    async fn head(&self, key: &ObjectKey) -> Result<ObjectHead, StoreError> {
        let owned_key = key.clone();
        self.blocking(Operation::Head, key.as_str(), move |root| {
            fs_ops::head(root, &owned_key)
        })
        .await
    }

    async fn get(&self, key: &ObjectKey) -> Result<Bytes, StoreError> {
        let owned_key = key.clone();
        self.blocking(Operation::Get, key.as_str(), move |root| {
            fs_ops::get(root, &owned_key)
        })
        .await
    }

    async fn get_range(&self, key: &ObjectKey, range: ByteRange) -> Result<Bytes, StoreError> {
        let owned_key = key.clone();
        self.blocking(Operation::GetRange, key.as_str(), move |root| {
            fs_ops::get_range(root, &owned_key, range)
        })
        .await
    }

    async fn list_page(
        &self,
        prefix: &str,
        token: Option<&ListToken>,
        max_keys: u16,
    ) -> Result<ListPage, StoreError> {
        let owned_prefix = prefix.to_owned();
        let after = token.map(|t| t.0.clone());
        self.blocking(Operation::List, prefix, move |root| {
            fs_ops::list_page(root, &owned_prefix, after.as_deref(), max_keys)
        })
        .await
    }

    async fn delete(&self, key: &ObjectKey) -> Result<(), StoreError> {
        let owned_key = key.clone();
        self.blocking(Operation::Delete, key.as_str(), move |root| {
            fs_ops::delete(root, &owned_key)
        })
        .await
    }
}
