//! The task that keeps `<spool_dir>/status.json` current.
//!
//! It runs beside the cycle loop rather than inside it, because one cycle
//! can take as long as its slowest catalog statement or upload (tens of
//! seconds for a large backlog): an operator running `capcat status` then
//! still sees the counters move. It writes once at start, then once per
//! `status_interval_s`; close writes the last one, marked closed.

use std::sync::Arc;

use capcat_s3::PackStore;

use crate::service::Inner;

impl<S: PackStore + Clone + 'static> Inner<S> {
    /// Writes the status file now and then every status interval until the
    /// service stops. Bounded by the stop signal; a failed write is counted
    /// by `write_status` and retried at the next interval.
    pub(crate) async fn status_writer(self: Arc<Self>) {
        let mut stop = self.stop.subscribe();
        loop {
            if *stop.borrow() {
                return;
            }
            self.write_status(false).await;
            tokio::select! {
                () = tokio::time::sleep(self.cfg.status_interval) => {}
                _ = stop.changed() => return,
            }
        }
    }
}
