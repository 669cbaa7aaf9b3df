//! [`Catalog::committed`]: which packs the inventory (the replay guard)
//! already holds.
//!
//! The storage service's reconciler lists the packs under its prefix in the
//! object store and asks this before fetching any of them: a pack in the
//! inventory was published and needs nothing. The statement is capcat-proto's
//! `index.read_committed` (the same read an index pass starts with); this
//! only runs it chunk by chunk and decodes its rows strictly.

use std::collections::BTreeSet;

use capcat_proto::index::ReadCommitted;
use uuid::Uuid;

use crate::catalog::Catalog;
use crate::error::CatalogError;

impl Catalog {
    /// Which of `pack_ids` (in store `store_id`) the inventory holds, read
    /// in chunks of the protocol's chunk size (so any number of ids stays
    /// within the server's query limits).
    ///
    /// Errors are [`CatalogError::Index`] carrying
    /// [`capcat_proto::IndexError::Statement`] (the read failed: retry it, a
    /// read changes nothing) or [`capcat_proto::IndexError::Malformed`] (a
    /// row not of the declared shape, or of a pack it did not ask about).
    pub async fn committed(
        &self,
        store_id: &str,
        pack_ids: &[Uuid],
    ) -> Result<BTreeSet<Uuid>, CatalogError> {
        let packs = pack_ids
            .iter()
            .map(|id| (store_id.to_owned(), *id))
            .collect();
        let machine = ReadCommitted::new(self.tables().clone(), packs, self.config().chunk());
        let held = self.run("committed", machine).await??;
        // Every pack the read returns is one it asked about, so of this store.
        Ok(held.into_iter().map(|(_, pack_id)| pack_id).collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use capcat_proto::{Config, Failure, IndexError, Param, Rows, Statement, Tables, Value};

    use super::*;

    const STATEMENT: &str = "index.read_committed";
    use crate::transport::{BoxFuture, Transport};

    /// A transport answering `index.read_committed` from a fixed inventory,
    /// recording how many ids each statement carried (a unit-test double of
    /// pure decoding and chunking; the service's live reconcile test runs
    /// the same read on the real engine).
    #[derive(Debug)]
    struct Inventory {
        committed: BTreeSet<Uuid>,
        answer: Option<Rows>,
        chunks: Mutex<Vec<usize>>,
    }

    impl Transport for Inventory {
        fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
            Box::pin(async move {
                assert_eq!(stmt.name, STATEMENT);
                let Some(Param::StorePacks(packs)) = stmt.params.get("packs") else {
                    panic!("read_committed binds its packs: {stmt:?}");
                };
                self.chunks.lock().expect("chunks").push(packs.len());
                if let Some(answer) = &self.answer {
                    return Ok(answer.clone());
                }
                Ok(Rows(
                    packs
                        .iter()
                        .filter(|(_, id)| self.committed.contains(id))
                        .map(|(store, id)| vec![Value::String(store.clone()), Value::Uuid(*id)])
                        .collect(),
                ))
            })
        }

        fn kind(&self) -> &'static str {
            "inventory-double"
        }
    }

    fn catalog(transport: Arc<Inventory>) -> Catalog {
        Catalog::new(
            transport,
            Tables::new("unit").expect("prefix"),
            Config::default(),
        )
    }

    #[tokio::test]
    async fn committed_reads_every_chunk_and_returns_only_committed_packs() {
        let ids: Vec<Uuid> = (0..2500).map(|_| Uuid::new_v4()).collect();
        let committed: BTreeSet<Uuid> = ids.iter().step_by(7).copied().collect();
        let transport = Arc::new(Inventory {
            committed: committed.clone(),
            answer: None,
            chunks: Mutex::new(Vec::new()),
        });
        let found = catalog(Arc::clone(&transport))
            .committed("store", &ids)
            .await
            .expect("committed");
        assert_eq!(found, committed);
        let chunk = Config::default().chunk();
        let chunks = transport.chunks.lock().expect("chunks").clone();
        assert_eq!(chunks.len(), ids.len().div_ceil(chunk), "{chunks:?}");
        assert!(chunks.iter().all(|n| *n <= chunk), "{chunks:?}");
        // No ids: no statement.
        let empty = Arc::new(Inventory {
            committed: BTreeSet::new(),
            answer: None,
            chunks: Mutex::new(Vec::new()),
        });
        assert!(
            catalog(Arc::clone(&empty))
                .committed("store", &[])
                .await
                .expect("empty")
                .is_empty()
        );
        assert!(empty.chunks.lock().expect("chunks").is_empty());
    }

    #[tokio::test]
    async fn a_row_of_another_store_or_shape_is_malformed() {
        for row in [
            vec![Value::String("other".into()), Value::Uuid(Uuid::nil())],
            vec![Value::Uuid(Uuid::nil())],
            vec![Value::String("store".into()), Value::String("x".into())],
        ] {
            let transport = Arc::new(Inventory {
                committed: BTreeSet::new(),
                answer: Some(Rows(vec![row.clone()])),
                chunks: Mutex::new(Vec::new()),
            });
            let got = catalog(transport)
                .committed("store", &[Uuid::new_v4()])
                .await;
            assert!(
                matches!(
                    got,
                    Err(CatalogError::Index(IndexError::Malformed {
                        statement: STATEMENT,
                        ..
                    }))
                ),
                "{row:?}: {got:?}"
            );
        }
    }
}
