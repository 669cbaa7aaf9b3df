//! One trace's catalog on the embedded engine: a fresh database per trace
//! holding capcat-proto's schema under the model's prefix, so the trace's
//! SQL runs unchanged (its unqualified table names resolve in the trace's
//! database; nothing is rewritten).

use std::collections::BTreeSet;

use capcat_chdb::{Engine, Request};
use capcat_clickhouse::transport::{decode_rows, request_for};
use capcat_proto::schema::create_schema;
use capcat_proto::{Expect, Rows, Statement, Tables};
use uuid::Uuid;

use super::atoms::tsv_rows;
use super::trace::TraceStatement;

/// A model table: its name in the model's notation (`tables_gained`), the
/// real columns that make up the model's row, in the model's order, and
/// which of them is a time value.
#[derive(Clone, Copy, Debug)]
pub struct TableSpec {
    /// The model's name, which is the real table name without the prefix.
    pub model: &'static str,
    /// The real columns, in the order of the model's row.
    pub columns: &'static [&'static str],
    /// The position of a time column (server nanoseconds).
    pub time: Option<usize>,
    /// ReplacingMergeTree: rows of one key may be merged away, keeping the
    /// highest version; `(key positions, version position)`.
    pub replacing: Option<(&'static [usize], usize)>,
}

/// The tables the publication model holds.
pub const TABLES: [TableSpec; 6] = [
    TableSpec {
        model: "publisher_lease",
        // The model's `LeaseRow` field order (its derived order is
        // LEASE_ORDER, so the expiry comes before the holder).
        columns: &["term", "lease_id", "expires_at_ns", "holder"],
        time: Some(2),
        replacing: None,
    },
    TableSpec {
        model: "version_claims",
        columns: &["index_version", "claim_id"],
        time: None,
        replacing: None,
    },
    TableSpec {
        model: "index_watermark",
        columns: &["index_version", "publish_id"],
        time: None,
        replacing: None,
    },
    TableSpec {
        model: "snapshot_manifest",
        columns: &["index_version", "publish_id", "store_id", "pack_id"],
        time: None,
        replacing: None,
    },
    TableSpec {
        model: "pack_inventory_raw",
        columns: &["store_id", "pack_id", "index_version", "publish_id"],
        time: None,
        replacing: Some((&[0, 1], 2)),
    },
    TableSpec {
        model: "capture_raw",
        columns: &["store_id", "pack_id", "index_version"],
        time: None,
        replacing: Some((&[0, 1], 2)),
    },
];

/// The spec of model table `model`.
pub fn spec(model: &str) -> Option<&'static TableSpec> {
    TABLES.iter().find(|t| t.model == model)
}

/// A trace's database on the engine.
#[derive(Debug)]
pub struct TraceDb {
    engine: Engine,
    database: String,
    tables: Tables,
}

impl TraceDb {
    /// Creates a fresh database and capcat-proto's schema in it, named by
    /// `tables`' prefix (the model's).
    pub fn create(engine: &Engine, tables: Tables) -> Result<Self, String> {
        let database = format!("replay_{}", &Uuid::new_v4().simple().to_string()[..16]);
        engine
            .execute(&Request::new(format!("CREATE DATABASE {database}")))
            .map_err(|e| e.to_string())?;
        let db = Self {
            engine: engine.clone(),
            database,
            tables,
        };
        for stmt in create_schema(&db.tables) {
            db.run_proto(&stmt)
                .map_err(|e| format!("{}: {e}", stmt.name))?;
        }
        Ok(db)
    }

    /// The catalog names (the model's prefix).
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The real name of model table `model`.
    pub fn real_name(&self, model: &str) -> String {
        format!("{}_{model}", self.tables.prefix())
    }

    /// The model table a real table name stands for.
    pub fn model_name<'a>(&self, real: &'a str) -> Option<&'a str> {
        real.strip_prefix(self.tables.prefix())?.strip_prefix('_')
    }

    fn request(&self, sql: &str) -> Request {
        Request::new(sql).database(&self.database)
    }

    /// Runs a trace statement (with `sql` as its text) and returns its
    /// rows as atoms (empty for an INSERT).
    pub fn run_trace(&self, stmt: &TraceStatement, sql: &str) -> Result<Vec<Vec<String>>, String> {
        let base = match &stmt.data {
            None => self.request(sql),
            Some(data) => Request::insert(sql, data.clone())
                .map_err(|e| e.to_string())?
                .database(&self.database),
        };
        let request = stmt
            .params
            .iter()
            .fold(base, |r, (name, (_, value))| r.param(name, value))
            .select_sequential_consistency(stmt.sequential)
            .max_execution_time_s(stmt.max_execution_time_s)
            .format("TabSeparated");
        let out = self.engine.execute(&request).map_err(|e| e.to_string())?;
        Ok(if stmt.columns.is_some() {
            tsv_rows(&out)
        } else {
            Vec::new()
        })
    }

    /// Runs a capcat-proto statement the harness built (schema, reader,
    /// harness-written descriptors) and decodes its rows.
    pub fn run_proto(&self, stmt: &Statement) -> Result<Rows, String> {
        let request = request_for(stmt)
            .map_err(|e| e.to_string())?
            .database(&self.database);
        let out = self.engine.execute(&request).map_err(|e| e.to_string())?;
        match &stmt.expect {
            Expect::Nothing => Ok(Rows::empty()),
            Expect::Rows(columns) => decode_rows(columns, &out).map_err(|e| e.to_string()),
        }
    }

    /// Runs SQL the harness wrote (reads of the real tables, out-of-protocol
    /// rows) and returns its rows as atoms.
    pub fn run_sql(&self, sql: &str) -> Result<Vec<Vec<String>>, String> {
        let out = self
            .engine
            .execute(&self.request(sql).format("TabSeparated"))
            .map_err(|e| e.to_string())?;
        Ok(tsv_rows(&out))
    }

    /// Every row of a model table, as real atoms (time values raw).
    pub fn read_table(&self, spec: &TableSpec) -> Result<BTreeSet<Vec<String>>, String> {
        let sql = format!(
            "SELECT {} FROM {}",
            spec.columns.join(", "),
            self.real_name(spec.model)
        );
        Ok(self.run_sql(&sql)?.into_iter().collect())
    }

    /// Drops the trace's database.
    pub fn drop_database(&self) {
        if let Err(e) = self.engine.execute(&Request::new(format!(
            "DROP DATABASE IF EXISTS {} SYNC",
            self.database
        ))) {
            tracing::warn!(database = %self.database, error = %e, "could not drop a replay database");
        }
    }
}
