//! What the checker reads from the real tables: plain SELECTs over the
//! names in [`Tables`], and the pinned membership built from capcat-proto's
//! own membership fragment, run through the same transport the actors use.

use std::collections::{BTreeMap, BTreeSet};

use capcat_clickhouse::Transport;
use capcat_proto::fragments::{MembershipBound, PINNED_VERSION_PARAM, published_pairs};
use capcat_proto::{
    Column, ColumnType, Expect, Failure, PackRef, Param, Settings, Statement, Tables, Value,
};
use uuid::Uuid;

use capcat_proto::fragments::meaning;
/// A lease log row: capcat-proto's, so the head is picked by the fence's
/// own meaning ([`meaning::lease_order_key`]).
pub use capcat_proto::fragments::meaning::LeaseRow;

/// The publication tables as one read saw them.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// `(store_id, pack_id, index_version, publish_id)` of the inventory,
    /// read FIRST, so every row it names was written before the tables
    /// read after it.
    pub inventory: BTreeSet<(String, Uuid, u64, Uuid)>,
    /// `(index_version, publish_id)` of the watermark table.
    pub watermark: BTreeSet<(u64, Uuid)>,
    /// `(index_version, publish_id, store_id, pack_id)` of the manifest.
    pub manifest: BTreeSet<(u64, Uuid, String, Uuid)>,
    /// The lease log in `LEASE_ORDER` reversed ([`meaning::lease_order_key`]
    /// ascending): the last row is the head.
    pub lease: Vec<LeaseRow>,
}

fn statement(sql: String, columns: &[(&'static str, ColumnType)]) -> Statement {
    Statement {
        name: "check.select",
        sql,
        params: BTreeMap::new(),
        settings: Settings {
            select_sequential_consistency: true,
            max_execution_time_s: None,
        },
        expect: Expect::Rows(
            columns
                .iter()
                .map(|(name, ty)| Column { name, ty: *ty })
                .collect(),
        ),
        data: None,
    }
}

fn malformed(what: &str, row: &[Value]) -> Failure {
    Failure::Malformed {
        message: format!("{what}: unexpected row {row:?}"),
    }
}

async fn rows(transport: &dyn Transport, stmt: &Statement) -> Result<Vec<Vec<Value>>, Failure> {
    Ok(transport.execute(stmt).await?.0)
}

/// Reads the four tables (inventory first).
pub async fn observe(transport: &dyn Transport, tables: &Tables) -> Result<Observed, Failure> {
    use ColumnType::{String as S, UInt64 as U, Uuid as Id};
    let mut out = Observed::default();
    let inventory = statement(
        format!(
            "SELECT store_id, pack_id, index_version, publish_id FROM {}",
            tables.pack_inventory_raw()
        ),
        &[
            ("store_id", S),
            ("pack_id", Id),
            ("index_version", U),
            ("publish_id", Id),
        ],
    );
    for row in rows(transport, &inventory).await? {
        match row.as_slice() {
            [
                Value::String(s),
                Value::Uuid(p),
                Value::UInt64(v),
                Value::Uuid(id),
            ] => {
                out.inventory.insert((s.clone(), *p, *v, *id));
            }
            other => return Err(malformed("inventory", other)),
        }
    }
    let watermark = statement(
        format!(
            "SELECT index_version, publish_id FROM {}",
            tables.index_watermark()
        ),
        &[("index_version", U), ("publish_id", Id)],
    );
    for row in rows(transport, &watermark).await? {
        match row.as_slice() {
            [Value::UInt64(v), Value::Uuid(id)] => {
                out.watermark.insert((*v, *id));
            }
            other => return Err(malformed("watermark", other)),
        }
    }
    let manifest = statement(
        format!(
            "SELECT index_version, publish_id, store_id, pack_id FROM {}",
            tables.snapshot_manifest()
        ),
        &[
            ("index_version", U),
            ("publish_id", Id),
            ("store_id", S),
            ("pack_id", Id),
        ],
    );
    for row in rows(transport, &manifest).await? {
        match row.as_slice() {
            [
                Value::UInt64(v),
                Value::Uuid(id),
                Value::String(s),
                Value::Uuid(p),
            ] => {
                out.manifest.insert((*v, *id, s.clone(), *p));
            }
            other => return Err(malformed("manifest", other)),
        }
    }
    let lease = statement(
        format!(
            "SELECT term, lease_id, holder, expires_at_ns FROM {}",
            tables.publisher_lease()
        ),
        &[
            ("term", U),
            ("lease_id", Id),
            ("holder", S),
            ("expires_at_ns", U),
        ],
    );
    for row in rows(transport, &lease).await? {
        match row.as_slice() {
            [
                Value::UInt64(term),
                Value::Uuid(lease_id),
                Value::String(holder),
                Value::UInt64(expires_at_ns),
            ] => {
                out.lease.push(LeaseRow {
                    term: *term,
                    lease_id: *lease_id,
                    expires_at_ns: *expires_at_ns,
                    holder: holder.clone(),
                });
            }
            other => return Err(malformed("lease", other)),
        }
    }
    // In the SERVER's order: `LEASE_ORDER` compares UUIDs as ClickHouse
    // does (not byte-wise as Rust does), and within a contested term that
    // order picks the head.
    out.lease.sort_by_key(meaning::lease_order_key);
    Ok(out)
}

/// The packs admitted at or below `pinned`: manifest rows paired with a
/// commit row of the same publish, through capcat-proto's own
/// membership fragment (the predicate the reader and the public view use).
pub async fn members_at(
    transport: &dyn Transport,
    tables: &Tables,
    pinned: u64,
) -> Result<BTreeSet<PackRef>, Failure> {
    let mut stmt = statement(
        format!(
            "SELECT DISTINCT store_id, pack_id FROM {} WHERE {}",
            tables.snapshot_manifest(),
            published_pairs(tables, MembershipBound::Pinned)
        ),
        &[
            ("store_id", ColumnType::String),
            ("pack_id", ColumnType::Uuid),
        ],
    );
    stmt.params
        .insert(PINNED_VERSION_PARAM.to_owned(), Param::UInt64(pinned));
    let mut out = BTreeSet::new();
    for row in rows(transport, &stmt).await? {
        match row.as_slice() {
            [Value::String(s), Value::Uuid(p)] => {
                out.insert((s.clone(), *p));
            }
            other => return Err(malformed("members", other)),
        }
    }
    Ok(out)
}
