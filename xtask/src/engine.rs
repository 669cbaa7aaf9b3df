//! `fetch-engine`: libchdb from the npm registry into the cache.

use std::path::PathBuf;

use crate::Result;

/// Returns the path of a verified `libchdb.so`, fetching it when absent.
pub(crate) fn ensure_libchdb() -> Result<PathBuf> {
    Err("fetch-engine is not implemented yet".into())
}
