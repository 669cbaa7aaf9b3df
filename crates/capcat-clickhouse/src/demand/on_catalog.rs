//! The demand read as a [`Catalog`] method, for callers that hold a
//! catalog rather than a transport and its tables (the CLI).

use capcat_proto::demand::DemandRead;

use super::read::{DemandReadError, read_folded};
use crate::catalog::Catalog;

impl Catalog {
    /// Reads and folds this catalog's demand events (every shard, at most
    /// `limit` rows, the newest): [`read_folded`] over the catalog's
    /// transport and tables. One statement, no retry (a read changes
    /// nothing, so the caller may simply read again).
    pub async fn read_demand(&self, limit: u64) -> Result<DemandRead, DemandReadError> {
        read_folded(self.transport().as_ref(), self.tables(), None, limit).await
    }
}
