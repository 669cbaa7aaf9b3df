//! Where a `get_by_ids` lookup's time goes on the embedded engine: the
//! whole call, the reader's statement alone, and the floors it is made of
//! (planning with the pinned subqueries, finding the ids by primary key,
//! reading every column of the rows found). 50,000 captures in 16 packs,
//! one published snapshot, ids drawn at random over the table, as in the
//! catalog bench. A measurement binary (no assertions); docs/benchmarks.md
//! quotes it.
//!
//! ```text
//! CAPCAT_LIBCHDB=... cargo run --release -p capcat-clickhouse --example lookup_floor
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capcat_clickhouse::{Catalog, Transport};
use capcat_proto::descriptor::{Locator, SummaryColumns};
use capcat_proto::{CaptureDescriptor, Column, ColumnType, Expect, Statement};
use uuid::Uuid;

const TENANT: &str = "floor";
/// Rounds measured per figure, after `WARM` unmeasured ones.
const ROUNDS: usize = 25;
const WARM: usize = 3;
/// Every column the reader returns, besides the five of the sort key
/// that the primary key lookup already holds.
const COLUMNS: &str = "experiment_id, run_id, captured_at_ns, store_id, pack_id, \
    index_version, step, tensor_name, dtype, shape, summary_version, element_count, \
    minimum, maximum, mean, l2_norm, abs_max, zero_fraction, payload_offset, \
    payload_length, payload_sha256";

fn descriptor(n: u64, pack: Uuid) -> CaptureDescriptor {
    CaptureDescriptor {
        tenant_id: TENANT.to_owned(),
        experiment_id: format!("exp{}", n % 4),
        run_id: format!("run{}", n % 8),
        captured_at_ns: 1_700_000_000_000_000_000 + n * 1_000,
        capture_id: Uuid::new_v4(),
        locator: Locator {
            store_id: "store-a".to_owned(),
            pack_id: pack,
            payload_offset: n * 1792,
            payload_length: 1792,
            payload_sha256: format!("{n:064x}"),
        },
        index_version: 0,
        step: n / 16,
        tensor_name: format!("model.layers.{}.mlp.down_proj", n % 24),
        dtype: "bf16".to_owned(),
        shape: vec![1, 896],
        summary: SummaryColumns {
            summary_version: 2,
            element_count: 896,
            minimum: (-1.5).into(),
            maximum: 1.5.into(),
            mean: 0.01.into(),
            l2_norm: 12.0.into(),
            abs_max: 1.5.into(),
            zero_fraction: 0.0.into(),
        },
    }
}

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
    let mut rows = Vec::with_capacity(50_000);
    for p in 0..16u64 {
        let pack = Uuid::new_v4();
        rows.extend((0..3125).map(|i| descriptor(p * 3125 + i, pack)));
    }
    let ids: Vec<Uuid> = rows.iter().map(|d| d.capture_id).collect();
    catalog.index(&mut lease, rows).await.expect("index 50,000");
    let pinned = catalog.pin().await.expect("pin");
    let by_id = tables.capture_by_id();

    println!(
        "| ids | `resolve` (head check + statement + decode) | the reader's statement | \
         its planning and pinned subqueries (`AND 0`) | the ids by primary key, no column read | \
         every column of those rows read | the same under the pinned conditions |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
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
            sql.find("GROUP BY").expect("a GROUP BY"),
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
            "| {count} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms |",
            ms(whole),
            ms(median(run(statement.clone())).await),
            ms(median(run(planning)).await),
            ms(median(run(found)).await),
            ms(median(run(read)).await),
            ms(median(run(read_pinned)).await),
        );
    }
    lease.release().await.expect("release");
    catalog.drop_schema().await.expect("drop");
    let _ = std::fs::remove_dir_all(&dir);
}
