//! Figures of demand on the embedded engine: what a publish costs the hot
//! path, what an append and a read cost the catalog, and what compaction
//! buys. A bench binary (no assertions); docs/benchmarks.md quotes it.
//!
//! ```text
//! CAPCAT_LIBCHDB=... cargo run --release -p capcat-clickhouse --example demand_figures
//! ```

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capcat_clickhouse::demand::{DemandPublisher, PublisherOptions, compact, read_demand};
use capcat_clickhouse::{Catalog, Http, HttpOptions, Transport, unix_now_ms};
use capcat_proto::Tables;
use capcat_proto::demand::{DEFAULT_READ_LIMIT, DemandEvent, storage};
use uuid::Uuid;

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = std::env::temp_dir().join(format!("capcat-demand-figures-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let catalog = Catalog::embedded(&dir, "figures").expect("open the embedded engine");
    catalog.ensure_schema().await.expect("ensure_schema");
    let transport = Arc::clone(catalog.transport());
    let tables = catalog.tables().clone();

    // The hot path: the cost of handing a report to the publisher when every
    // slot is busy (the stalled case: a real socket that never answers).
    let stalled = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", stalled.local_addr().expect("addr"));
    let stalled_transport: Arc<dyn Transport> =
        Arc::new(Http::new(&url, HttpOptions::default()).expect("url"));
    let publisher = DemandPublisher::new(
        stalled_transport,
        Tables::new("stalled").expect("prefix"),
        PublisherOptions::default(),
    )
    .expect("publisher");
    for g in 0..4 {
        publisher.executor_merged("s", 1, g);
    }
    let n = 100_000u64;
    let started = Instant::now();
    for g in 0..n {
        publisher.writer_sealed("s", 1, g, 1, 1);
    }
    let dropped = started.elapsed();
    println!(
        "publish when full (drop and count): {:.3} us per call over {n} calls; dropped_full {}",
        micros(dropped) / n as f64,
        publisher.counters().dropped_full
    );

    // One append, and one admitted publish, on the embedded engine.
    let mut appends = Vec::new();
    for g in 0..200u64 {
        let event = DemandEvent::writer_sealed("one", 1, g, g, g);
        let stmt = storage::append(&tables, &event, Uuid::new_v4());
        let t = Instant::now();
        transport.execute(&stmt).await.expect("append");
        appends.push(t.elapsed());
    }
    println!(
        "append (one row, embedded): median {:.0} us over 200",
        micros(median(appends))
    );
    let live = DemandPublisher::new(
        Arc::clone(&transport),
        tables.clone(),
        PublisherOptions::default(),
    )
    .expect("publisher");
    let mut admitted = Vec::new();
    for g in 0..200u64 {
        let t = Instant::now();
        live.executor_merged("one", 1, g);
        admitted.push(t.elapsed());
        live.drain(Duration::from_secs(15)).await;
    }
    println!(
        "publish when a slot is free (spawn only): median {:.1} us over 200",
        micros(median(admitted))
    );

    // Reads over a growing table, then after compaction.
    for (shards, per_shard) in [(10u64, 100u64), (100, 100)] {
        let prefix = format!("figures_{shards}x{per_shard}");
        let catalog = Catalog::new(
            Arc::clone(&transport),
            Tables::new(&prefix).expect("prefix"),
            capcat_proto::Config::default(),
        );
        catalog.ensure_schema().await.expect("ensure_schema");
        let tables = catalog.tables().clone();
        for s in 0..shards {
            for g in 1..=per_shard {
                let event = DemandEvent::writer_sealed(format!("shard-{s}"), 1, g, g * 4096, g);
                let stmt = storage::append(&tables, &event, Uuid::new_v4());
                transport.execute(&stmt).await.expect("append");
            }
        }
        let rows = shards * per_shard;
        let t = Instant::now();
        let report = read_demand(transport.as_ref(), &tables, unix_now_ms())
            .await
            .expect("read");
        let read = t.elapsed();
        let t = Instant::now();
        let compacted = compact(transport.as_ref(), &tables, DEFAULT_READ_LIMIT)
            .await
            .expect("compact");
        let compaction = t.elapsed();
        let t = Instant::now();
        let after = read_demand(transport.as_ref(), &tables, unix_now_ms())
            .await
            .expect("read");
        let read_after = t.elapsed();
        assert_eq!(
            after.status.total.pending_packs, report.status.total.pending_packs,
            "compaction changed the figures"
        );
        println!(
            "{rows} rows over {shards} shards: read_demand {:.1} ms; compact {:.1} ms \
             ({} shards, {} rows deleted); read_demand after {:.1} ms",
            micros(read) / 1e3,
            micros(compaction) / 1e3,
            compacted.shards_compacted,
            compacted.rows_deleted,
            micros(read_after) / 1e3,
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
