//! Where a `get_by_ids` lookup's time goes on the embedded engine: the
//! whole call, the reader's statement alone, and the floors it is made of
//! (planning with the pinned subqueries, finding the ids by primary key,
//! reading every column of the rows found). Beside them, the same lookup
//! resolved as a page resolves (one `argMax` over a tuple, unpacked by an
//! outer query) instead of keeping the winning row with `LIMIT 1 BY`: the
//! two must return the same rows (checked), and the difference is what the
//! lookup's form saves. 50,000 captures in 16 packs, one published
//! snapshot, ids drawn at random over the table: the catalog bench's own
//! workload (`benches/support/workload.rs`). A measurement binary;
//! docs/benchmarks.md quotes it.
//!
//! ```text
//! CAPCAT_LIBCHDB=... cargo run --release -p capcat-clickhouse --example lookup_floor
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capcat_clickhouse::{Catalog, Transport};
use capcat_proto::descriptor::CAPTURE_IDENTITY;
use capcat_proto::reader::projection;
use capcat_proto::statement::Rows;
use capcat_proto::{Column, ColumnType, Expect, Statement};
use uuid::Uuid;

#[path = "../benches/support/workload.rs"]
mod workload;

use workload::{TENANT, batch};

/// Rounds measured per figure, after `WARM` unmeasured ones.
const ROUNDS: usize = 25;
const WARM: usize = 3;
/// Every column the reader returns, besides the five of the sort key
/// that the primary key lookup already holds.
const COLUMNS: &str = "experiment_id, run_id, captured_at_ns, store_id, pack_id, \
    index_version, step, tensor_name, dtype, shape, summary_version, element_count, \
    minimum, maximum, mean, l2_norm, abs_max, zero_fraction, payload_offset, \
    payload_length, payload_sha256";

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The median of `ROUNDS` runs of `run`, after `WARM` unmeasured ones.
async fn median<F, Fut>(mut run: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..WARM {
        run().await;
    }
    let mut samples = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        run().await;
        samples.push(started.elapsed());
    }
    samples.sort();
    samples[ROUNDS / 2]
}

/// `statement` with its text replaced and one `UInt64` column `h` read back.
fn variant(statement: &Statement, sql: String) -> Statement {
    let mut v = statement.clone();
    v.sql = sql;
    v.expect = Expect::Rows(vec![Column {
        name: "h",
        ty: ColumnType::UInt64,
    }]);
    v
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = std::env::temp_dir().join(format!("capcat-lookup-floor-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let catalog = Catalog::embedded(&dir, "floor").expect("open the embedded engine");
    catalog.ensure_schema().await.expect("ensure_schema");
    let transport: Arc<dyn Transport> = Arc::clone(catalog.transport());
    let tables = catalog.tables().clone();
    let mut lease = catalog.acquire_lease("floor").await.expect("lease");
    // The catalog bench's search catalog: 50,000 captures in 16 packs.
    let rows = batch(16, 3125, 0);
    let ids: Vec<Uuid> = rows.iter().map(|d| d.capture_id).collect();
    catalog.index(&mut lease, rows).await.expect("index 50,000");
    let pinned = catalog.pin().await.expect("pin");
    let by_id = tables.capture_by_id();

    println!(
        "| ids | `resolve` (head check + statement + decode) | the reader's statement | \
         its planning and pinned subqueries (`AND 0`) | the ids by primary key, no column read | \
         every column of those rows read | the same under the pinned conditions | \
         the statement resolved with `argMax` instead |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for count in [1usize, 100, 1_000] {
        let chosen: BTreeSet<Uuid> = ids.iter().skip(777).take(count).copied().collect();
        let plan = capcat_proto::reader::get_by_ids(&tables, TENANT, &chosen, pinned)
            .expect("a lookup plan");
        let statement = plan[0].clone();
        // The reader's WHERE clause, cut from its own text so the floors
        // below filter exactly as it does.
        let sql = &statement.sql;
        let (from, to) = (
            sql.find("WHERE").expect("a WHERE"),
            sql.find("\n    ORDER BY")
                .expect("the ORDER BY of LIMIT 1 BY"),
        );
        let pinned_where = sql[from..to].to_owned();
        let ids_where =
            "WHERE tenant_id = {tenant_id:String} AND capture_id IN {capture_ids:Array(UUID)}";
        let planning = {
            let mut v = statement.clone();
            v.sql = sql.replacen(
                "AND capture_id IN {capture_ids:Array(UUID)}",
                "AND capture_id IN {capture_ids:Array(UUID)} AND 0",
                1,
            );
            v
        };
        let found = variant(
            &statement,
            format!("SELECT count() AS h FROM {by_id} {ids_where}"),
        );
        let read = variant(
            &statement,
            format!("SELECT sum(cityHash64({COLUMNS})) AS h FROM {by_id} {ids_where}"),
        );
        // The page's resolution over the lookup's own conditions: the
        // statement a lookup was before it kept whole rows.
        let aggregated = {
            let mut v = statement.clone();
            let identity = CAPTURE_IDENTITY.join(", ");
            v.sql = format!(
                "SELECT {}\nFROM (\n    SELECT {}\n    FROM {by_id}\n    {pinned_where}\n    \
                 GROUP BY {identity}\n)\nORDER BY {identity}",
                projection::outer_select_list(),
                projection::inner_select_list(),
            );
            v
        };
        let sorted = |rows: Rows| {
            let mut rows: Vec<String> = rows.0.iter().map(|row| format!("{row:?}")).collect();
            rows.sort();
            rows
        };
        assert_eq!(
            sorted(transport.execute(&statement).await.expect("the lookup")),
            sorted(
                transport
                    .execute(&aggregated)
                    .await
                    .expect("the aggregated lookup")
            ),
            "keeping the winning row and aggregating resolve alike"
        );
        let read_pinned = variant(
            &statement,
            format!("SELECT sum(cityHash64({COLUMNS})) AS h FROM {by_id} {pinned_where}"),
        );
        let run = |s: Statement| {
            let transport = Arc::clone(&transport);
            move || {
                let (transport, s) = (Arc::clone(&transport), s.clone());
                async move {
                    std::hint::black_box(transport.execute(&s).await.expect("a statement"));
                }
            }
        };
        let whole = median(|| {
            let chosen = chosen.clone();
            let catalog = &catalog;
            async move {
                let found = catalog
                    .resolve(TENANT, chosen, pinned)
                    .await
                    .expect("resolve");
                assert_eq!(found.len(), count, "every id is found");
            }
        })
        .await;
        println!(
            "| {count} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms |",
            ms(whole),
            ms(median(run(statement.clone())).await),
            ms(median(run(planning)).await),
            ms(median(run(found)).await),
            ms(median(run(read)).await),
            ms(median(run(read_pinned)).await),
            ms(median(run(aggregated)).await),
        );
    }
    lease.release().await.expect("release");
    catalog.drop_schema().await.expect("drop");
    let _ = std::fs::remove_dir_all(&dir);
}
