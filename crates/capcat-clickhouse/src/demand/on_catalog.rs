//! The demand read as a [`Catalog`] method, for callers that hold a
//! catalog rather than a transport and its tables (the CLI).

use capcat_proto::demand::DemandRead;

use super::read::{DemandReadError, DemandReport, read_demand, read_folded};
use crate::catalog::Catalog;
use crate::clock::unix_now_ms;

impl Catalog {
    /// Reads and folds this catalog's demand events (every shard, at most
    /// `limit` rows, the newest): [`read_folded`] over the catalog's
    /// transport and tables. One statement, no retry (a read changes
    /// nothing, so the caller may simply read again).
    pub async fn read_folded_demand(&self, limit: u64) -> Result<DemandRead, DemandReadError> {
        read_folded(self.transport().as_ref(), self.tables(), None, limit).await
    }

    /// This catalog's backlog now, per shard and in total: [`read_demand`]
    /// over the catalog's transport and tables, with ages measured at
    /// [`unix_now_ms`] (the clock the service stamps seal times with). What
    /// `capcat status` prints. One statement, no retry.
    pub async fn demand_report(&self) -> Result<DemandReport, DemandReadError> {
        read_demand(self.transport().as_ref(), self.tables(), unix_now_ms()).await
    }
}
