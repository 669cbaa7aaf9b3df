//! A thin driver of capcat-proto's machines over a capcat-clickhouse
//! [`Transport`].
//!
//! Adapter note: capcat-clickhouse's own `Catalog` (schema, lease handle,
//! indexer, reader) was still being written when this service was; its
//! [`Transport`] was committed first. This module is the minimum the
//! service needs on top of it and makes no protocol decision: it loops over
//! the real machines, executes what they emit, and supplies what they may
//! not own (jitter draws and fresh ids). It can be replaced by the crate's
//! `Catalog` without touching the service's logic.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use capcat_clickhouse::Transport;
use capcat_proto::demand::{DemandEvent, DemandRead, ReadDemand, storage};
use capcat_proto::index::sql::read_committed;
use capcat_proto::reader::{GetByIds, Lookup, Page, ReaderError, SearchPage, SearchQuery};
use capcat_proto::schema::{EnsureOutcome, EnsureSchema, SchemaError, drop_schema};
use capcat_proto::{
    Config, Failure, IndexError, IndexPass, IndexReport, Input, Lease, LeaseClaim, LeaseError,
    Machine, Release, Rows, Statement, Step, Tables, Value,
};
use uuid::Uuid;

/// A uniform draw in `0..below` from the operating system's randomness (a v4
/// UUID's random bits): the jitter the lease and allocator machines ask for.
fn draw(below: u64) -> u64 {
    let below = below.max(1);
    u64::try_from(Uuid::new_v4().as_u128() % u128::from(below)).unwrap_or(0)
}

/// Runs `machine` to completion over `transport`. Bounded: every machine
/// terminates within its documented attempt bound whatever it is handed.
pub async fn drive<M: Machine>(transport: &dyn Transport, mut machine: M) -> M::Outcome {
    loop {
        match machine.poll() {
            Step::Execute(stmt) => {
                let input = match transport.execute(&stmt).await {
                    Ok(rows) => Input::Rows(rows),
                    Err(failure) => Input::Failed(failure),
                };
                machine.handle(input);
            }
            Step::Draw { below } => machine.handle(Input::Drawn(draw(below))),
            Step::Done(outcome) => return outcome,
        }
    }
}

/// One catalog: a transport, its tables and the protocol configuration.
#[derive(Clone, Debug)]
pub struct CatalogClient {
    transport: Arc<dyn Transport>,
    tables: Tables,
    protocol: Config,
}

impl CatalogClient {
    /// A catalog reached through `transport`.
    #[must_use]
    pub fn new(transport: Arc<dyn Transport>, tables: Tables, protocol: Config) -> Self {
        Self {
            transport,
            tables,
            protocol,
        }
    }

    /// The tables.
    #[must_use]
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The protocol configuration.
    #[must_use]
    pub fn protocol(&self) -> &Config {
        &self.protocol
    }

    /// The transport.
    #[must_use]
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.transport
    }

    /// Creates the catalog when absent, completes an unfinished install, or
    /// refuses a catalog it does not recognise (never migrates).
    ///
    /// # Errors
    /// The guard's refusal or a failed statement.
    pub async fn ensure_schema(&self) -> Result<EnsureOutcome, SchemaError> {
        drive(&*self.transport, EnsureSchema::new(self.tables.clone())).await
    }

    /// Drops every object of this catalog.
    ///
    /// # Errors
    /// The first statement that failed.
    pub async fn drop_schema(&self) -> Result<usize, Failure> {
        let statements = drop_schema(&self.tables);
        let count = statements.len();
        for stmt in statements {
            self.transport.execute(&stmt).await?;
        }
        Ok(count)
    }

    /// Takes the publisher lease as `holder` (re-acquiring `held` when it is
    /// still the head).
    ///
    /// # Errors
    /// Held by someone else, contested, or a failed statement.
    pub async fn acquire(&self, holder: &str, held: Option<Lease>) -> Result<Lease, LeaseError> {
        let claim = LeaseClaim::acquire(
            self.tables.clone(),
            self.protocol.clone(),
            holder.to_owned(),
            held,
            Uuid::new_v4(),
        );
        drive(&*self.transport, claim).await
    }

    /// Extends `lease`.
    ///
    /// # Errors
    /// No longer the head, or a failed statement.
    pub async fn renew(&self, lease: Lease) -> Result<Lease, LeaseError> {
        drive(
            &*self.transport,
            LeaseClaim::renew(self.tables.clone(), self.protocol.clone(), lease),
        )
        .await
    }

    /// Releases `lease` with one fenced statement.
    ///
    /// # Errors
    /// The statement's effect is unknown: keep the lease (it expires).
    pub async fn release(&self, lease: Lease) -> Result<(), LeaseError> {
        drive(
            &*self.transport,
            Release::new(self.tables.clone(), self.protocol.clone(), lease),
        )
        .await
    }

    /// One index pass under `lease`; returns the lease as renewed by the pass.
    pub async fn index(
        &self,
        lease: Lease,
        descriptors: Vec<capcat_proto::CaptureDescriptor>,
    ) -> (Lease, Result<IndexReport, IndexError>) {
        let mut pass = IndexPass::new(
            self.tables.clone(),
            self.protocol.clone(),
            lease,
            descriptors,
            Uuid::new_v4(),
        );
        // Driven by hand (not `drive`) so the renewed lease can be read
        // back from the pass whatever its outcome.
        loop {
            match pass.poll() {
                Step::Execute(stmt) => {
                    let input = match self.transport.execute(&stmt).await {
                        Ok(rows) => Input::Rows(rows),
                        Err(failure) => Input::Failed(failure),
                    };
                    pass.handle(input);
                }
                Step::Draw { below } => pass.handle(Input::Drawn(draw(below))),
                Step::Done(outcome) => return (pass.lease().clone(), outcome),
            }
        }
    }

    /// Which of `pack_ids` (in store `store_id`) the inventory holds.
    ///
    /// # Errors
    /// A failed or malformed read.
    pub async fn committed(
        &self,
        store_id: &str,
        pack_ids: &[Uuid],
    ) -> Result<BTreeSet<Uuid>, Failure> {
        let mut out = BTreeSet::new();
        for chunk in pack_ids.chunks(self.protocol.chunk()) {
            let packs = chunk.iter().map(|id| (store_id.to_owned(), *id)).collect();
            let rows = self
                .transport
                .execute(&read_committed(&self.tables, packs))
                .await?;
            for row in rows.0 {
                match row.get(1) {
                    Some(Value::Uuid(id)) => {
                        out.insert(*id);
                    }
                    other => {
                        return Err(Failure::Malformed {
                            message: format!("index.read_committed: pack_id column held {other:?}"),
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    /// One page of a search.
    ///
    /// # Errors
    /// A bad query or a failed read.
    pub async fn search(&self, query: SearchQuery) -> Result<Page, ReaderError> {
        let machine = SearchPage::new(self.tables.clone(), query)?;
        drive(&*self.transport, machine).await
    }

    /// Looks captures up by id at `watermark`.
    ///
    /// # Errors
    /// A bad request or a failed read.
    pub async fn get_by_ids(
        &self,
        tenant: &str,
        ids: BTreeSet<Uuid>,
        watermark: u64,
    ) -> Result<Lookup, ReaderError> {
        let machine = GetByIds::new(self.tables.clone(), tenant, ids, watermark)?;
        drive(&*self.transport, machine).await
    }

    /// Appends one demand event.
    ///
    /// # Errors
    /// The statement failed.
    pub async fn append_demand(&self, event: &DemandEvent) -> Result<(), Failure> {
        let stmt: Statement = storage::append(&self.tables, event, Uuid::new_v4());
        self.transport.execute(&stmt).await.map(|_: Rows| ())
    }

    /// Reads and folds the demand events.
    ///
    /// # Errors
    /// The read failed.
    pub async fn read_demand(&self, limit: u64) -> Result<DemandRead, Failure> {
        drive(
            &*self.transport,
            ReadDemand::new(self.tables.clone(), None, limit),
        )
        .await
    }
}

/// Whether an index failure is an outage (the catalog could not be reached,
/// timed out, fenced or out-raced us, or failed in a way that says nothing
/// about the packs) rather than a refusal of these packs' values. An outage
/// counts against no pack.
#[must_use]
pub fn index_error_is_outage(error: &IndexError) -> bool {
    match error {
        IndexError::Statement { failure, .. } | IndexError::Inventory { failure, .. } => {
            failure_is_outage(failure)
        }
        // Lost races, lost leases, allocation and publish failures, and a
        // read-back of the wrong shape say nothing about the packs: retry
        // the same batch later.
        _ => true,
    }
}

/// ClickHouse exception codes that refuse the values a statement carried
/// (a parse error, a type mismatch, a query too large), as opposed to the
/// server being unreachable, missing a table, or out of resources.
/// Anything not listed counts as an outage, so a misconfigured or
/// half-dropped catalog never sets packs aside.
pub const VALUE_REFUSAL_CODES: &[u32] = &[
    6,   // CANNOT_PARSE_TEXT
    26,  // CANNOT_PARSE_QUOTED_STRING
    27,  // CANNOT_PARSE_INPUT_ASSERTION_FAILED
    38,  // CANNOT_PARSE_DATE
    41,  // CANNOT_PARSE_DATETIME
    43,  // ILLEGAL_TYPE_OF_ARGUMENT
    53,  // TYPE_MISMATCH
    62,  // SYNTAX_ERROR (a query over max_query_size)
    69,  // ARGUMENT_OUT_OF_BOUND
    72,  // CANNOT_PARSE_NUMBER
    131, // TOO_LARGE_STRING_SIZE
    167, // TOO_BIG_AST
    168, // TOO_DEEP_AST
    376, // CANNOT_PARSE_UUID
    457, // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
];

/// Whether a statement failure is an outage: everything but a server
/// exception refusing the statement's values.
#[must_use]
pub fn failure_is_outage(failure: &Failure) -> bool {
    !matches!(failure, Failure::Server { code, .. } if VALUE_REFUSAL_CODES.contains(code))
}

/// The statements of every protocol machine for `tables`, for `capcat sql`.
#[must_use]
pub fn describe_statements(tables: &Tables, protocol: &Config) -> BTreeMap<&'static str, String> {
    let mut out = BTreeMap::new();
    for stmt in capcat_proto::schema::create_schema(tables) {
        out.insert(stmt.name, stmt.sql);
    }
    for stmt in drop_schema(tables) {
        out.insert(stmt.name, stmt.sql);
    }
    let lease = Lease {
        lease_id: Uuid::nil(),
        holder: "example".to_owned(),
        term: 1,
        expires_at_ns: 0,
    };
    let mut collect = |first: Step<_>| {
        if let Step::Execute(stmt) = first {
            out.insert(stmt.name, stmt.sql);
        }
    };
    collect(
        LeaseClaim::acquire(
            tables.clone(),
            protocol.clone(),
            "example".into(),
            None,
            Uuid::nil(),
        )
        .poll()
        .map_done(),
    );
    collect(
        Release::new(tables.clone(), protocol.clone(), lease.clone())
            .poll()
            .map_done(),
    );
    let descriptor = capcat_proto::CaptureDescriptor {
        tenant_id: "t".into(),
        ..Default::default()
    };
    collect(
        IndexPass::new(
            tables.clone(),
            protocol.clone(),
            lease,
            vec![descriptor],
            Uuid::nil(),
        )
        .poll()
        .map_done(),
    );
    collect(ReadDemand::new(tables.clone(), None, 1).poll().map_done());
    let append = storage::append(tables, &DemandEvent::scan("shard", 0, 0, None), Uuid::nil());
    out.insert(append.name, append.sql);
    out
}

/// Drops the machine-specific outcome type of a step, keeping a statement.
trait MapDone {
    fn map_done(self) -> Step<()>;
}

impl<T> MapDone for Step<T> {
    fn map_done(self) -> Step<()> {
        match self {
            Step::Execute(stmt) => Step::Execute(stmt),
            Step::Draw { below } => Step::Draw { below },
            Step::Done(_) => Step::Done(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement(failure: Failure) -> IndexError {
        IndexError::Statement {
            statement: "index.insert_descriptors",
            failure,
        }
    }

    #[test]
    fn only_value_refusals_count_against_a_pack() {
        let refused = Failure::Server {
            code: 27,
            message: "Cannot parse input".into(),
        };
        assert!(!index_error_is_outage(&statement(refused)));
        for outage in [
            Failure::Timeout,
            Failure::Transport {
                message: "connection refused".into(),
            },
            Failure::Malformed {
                message: "wrong width".into(),
            },
            // UNKNOWN_TABLE: a dropped catalog is not the pack's fault.
            Failure::Server {
                code: 60,
                message: "Table does not exist".into(),
            },
            // MEMORY_LIMIT_EXCEEDED: the server's state, not the values.
            Failure::Server {
                code: 241,
                message: "Memory limit".into(),
            },
        ] {
            assert!(
                index_error_is_outage(&statement(outage.clone())),
                "{outage:?}"
            );
        }
        let lost = IndexError::LeaseLost {
            version: 3,
            publish_id: Uuid::nil(),
            head: None,
        };
        assert!(index_error_is_outage(&lost));
        let malformed = IndexError::Malformed {
            statement: "index.read_committed",
            detail: String::new(),
        };
        assert!(index_error_is_outage(&malformed));
    }

    #[test]
    fn describe_statements_names_the_schema_lease_index_and_demand_statements() {
        let tables = Tables::new("p").expect("prefix");
        let all = describe_statements(&tables, &Config::default());
        for name in ["lease.read_head", "index.read_committed", "demand.append"] {
            assert!(
                all.contains_key(name),
                "{name} missing from {:?}",
                all.keys().collect::<Vec<_>>()
            );
        }
        assert!(
            all.values().all(|sql| sql.contains("p_")),
            "every statement names the prefix's tables"
        );
    }
}
