//! A transport wrapper that makes the real engine refuse one named pack.
//!
//! A well-formed pack gives the engine nothing to refuse, so a test of the
//! set-aside path needs a pack the engine will not take. This wrapper sits
//! in front of the real HTTP transport (through the proxy, to the real
//! engine). A statement that writes descriptors of the named pack and of
//! no other is sent with a SETTINGS clause that caps a `RowBinary` string at
//! one byte (`format_binary_max_string_size = 1`), so the real engine
//! refuses its rows with its own TOO_LARGE_STRING_SIZE, as it refuses
//! values it cannot take. Everything else passes through
//! unchanged. With [`RefusePack::refusing_any_batch`] a statement carrying
//! the pack among others is refused the same way (the engine then refuses
//! the whole batch, as it would a batch holding one bad row), so the
//! service must halve to find the culprit. The wrapper decides nothing for
//! the service: it counts what it sent and, optionally, cuts the catalog
//! right after the N-th refusal.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use capcat_clickhouse::{BoxFuture, Transport};
use capcat_proto::{Failure, InsertData, Rows, Statement};
use tokio::sync::watch;
use uuid::Uuid;

use crate::harness::Mode;

const DECLARED: &str = ") FORMAT RowBinary";
const REFUSED: &str = ") SETTINGS format_binary_max_string_size = 1 FORMAT RowBinary";

#[derive(Debug)]
pub struct RefusePack {
    inner: Arc<dyn Transport>,
    pack: Uuid,
    /// Statements carrying the pack alone that the engine refused.
    pub refused_alone: AtomicU32,
    /// Statements carrying the pack among others (sent unchanged unless
    /// `any_batch`: then refused, and the halves are what count).
    pub carried_in_batches: AtomicU32,
    /// Whether a batch carrying the pack among others is refused too.
    any_batch: bool,
    /// Switch the catalog proxy to `Cut` right after this many refusals.
    cut_after: Option<(u32, watch::Sender<Mode>)>,
}

impl RefusePack {
    pub fn new(
        inner: Arc<dyn Transport>,
        pack: Uuid,
        cut_after: Option<(u32, watch::Sender<Mode>)>,
    ) -> Self {
        Self {
            inner,
            pack,
            refused_alone: AtomicU32::new(0),
            carried_in_batches: AtomicU32::new(0),
            any_batch: false,
            cut_after,
        }
    }

    /// Refuses every batch carrying the pack, not only the pack alone.
    pub fn refusing_any_batch(mut self) -> Self {
        self.any_batch = true;
        self
    }

    /// `stmt` with a string-size cap every descriptor row exceeds, so the
    /// real engine refuses its data.
    fn refused(stmt: &Statement) -> Statement {
        assert!(
            stmt.sql.ends_with(DECLARED),
            "the descriptor INSERT's FORMAT clause changed: {}",
            stmt.sql
        );
        let mut refused = stmt.clone();
        refused.sql = stmt.sql.replacen(DECLARED, REFUSED, 1);
        refused
    }

    /// Whether `stmt` writes descriptors of the pack: `Some(true)` when of
    /// it alone.
    fn carries(&self, stmt: &Statement) -> Option<bool> {
        if stmt.name != "index.insert_descriptors" {
            return None;
        }
        let Some(InsertData::Descriptors(rows)) = &stmt.data else {
            return None;
        };
        let ours = rows
            .iter()
            .filter(|d| d.locator.pack_id == self.pack)
            .count();
        (ours > 0).then_some(ours == rows.len())
    }
}

impl Transport for RefusePack {
    fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
        Box::pin(async move {
            match self.carries(stmt) {
                Some(true) => {
                    let result = self.inner.execute(&Self::refused(stmt)).await;
                    let n = self.refused_alone.fetch_add(1, Ordering::SeqCst) + 1;
                    if let Some((after, switch)) = &self.cut_after
                        && n == *after
                    {
                        switch.send_replace(Mode::Cut);
                    }
                    result
                }
                Some(false) => {
                    self.carried_in_batches.fetch_add(1, Ordering::SeqCst);
                    if self.any_batch {
                        self.inner.execute(&Self::refused(stmt)).await
                    } else {
                        self.inner.execute(stmt).await
                    }
                }
                None => self.inner.execute(stmt).await,
            }
        })
    }

    fn kind(&self) -> &'static str {
        "refuse-pack"
    }
}
