//! Measures the embedded engine: library load, engine boot, statement
//! latency, parallelism across connections, and the HTTP front's overhead.
//! The figures in docs/embedded-engine.md come from:
//!
//! ```text
//! CAPCAT_LIBCHDB=$(cargo xtask fetch-engine) cargo run -p capcat-chdb --example measure
//! ```
//!
//! A measurement binary, not a test: it asserts nothing about time.
//!
//! The engine's data path is a temporary directory under
//! `CAPCAT_MEASURE_DIR` when it is set (e.g. `/dev/shm`, to take the disk's
//! part out of every statement that writes a part), and under the system's
//! temporary directory otherwise.

use std::time::{Duration, Instant};

use capcat_chdb::{Engine, EngineOptions, HttpFront, Request};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let max_index = sorted.len().saturating_sub(1);
    // Rounded to the nearest rank; exact for the sample sizes used here.
    let index = ((max_index as f64) * p).round() as usize;
    sorted[index.min(max_index)]
}

fn latency(label: &str, iterations: usize, mut run: impl FnMut()) {
    for _ in 0..iterations / 10 {
        run();
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let started = Instant::now();
        run();
        samples.push(started.elapsed());
    }
    samples.sort();
    println!(
        "{label:<48} p50 {:>9.3?}  p90 {:>9.3?}  p99 {:>9.3?}  (n={iterations})",
        percentile(&samples, 0.5),
        percentile(&samples, 0.9),
        percentile(&samples, 0.99),
    );
}

fn parallel(engine: &Engine, label: &str, threads: usize, sql: &str) {
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                engine
                    .execute(&Request::new(sql))
                    .expect("parallel statement")
            });
        }
    });
    println!(
        "{label:<48} {threads} statements: wall {:>9.3?}",
        started.elapsed()
    );
}

fn main() {
    let dir = match std::env::var_os("CAPCAT_MEASURE_DIR") {
        Some(base) => tempfile::tempdir_in(base),
        None => tempfile::tempdir(),
    }
    .expect("a temporary data path");
    println!("data path {}", dir.path().display());
    let started = Instant::now();
    let engine = Engine::open_with(dir.path(), EngineOptions::default().with_max_connections(4))
        .expect("open the engine");
    let open_total = started.elapsed();
    println!(
        "libchdb {} from {}",
        engine.library_version(),
        engine.library_path().display()
    );
    println!(
        "{:<48} {:>9.3?}",
        "library load (dlopen + symbols)",
        engine.library_load_time()
    );
    println!(
        "{:<48} {:>9.3?}",
        "Engine::open total (load + boot)", open_total
    );
    let started = Instant::now();
    engine
        .execute(&Request::new("SELECT 1"))
        .expect("first statement");
    println!(
        "{:<48} {:>9.3?}",
        "first statement (opens a pool connection)",
        started.elapsed()
    );

    latency("SELECT 1", 2000, || {
        engine.execute(&Request::new("SELECT 1")).expect("select");
    });
    latency("SELECT {x:UInt64} + 1 (one parameter)", 2000, || {
        engine
            .execute(&Request::new("SELECT {x:UInt64} + 1").param("x", "41"))
            .expect("select");
    });
    latency("SELECT 1 with two settings (SET each time)", 1000, {
        let mut flip = false;
        let engine = &engine;
        move || {
            flip = !flip;
            let request = Request::new("SELECT 1")
                .max_execution_time_s(Some(if flip { 5 } else { 6 }))
                .select_sequential_consistency(true);
            engine.execute(&request).expect("select");
        }
    });
    engine
        .execute(&Request::new(
            "CREATE TABLE m (id UInt64, name String) ENGINE = MergeTree ORDER BY id",
        ))
        .expect("create");
    let mut id = 0_u64;
    latency("INSERT one row (VALUES with parameters)", 500, || {
        id += 1;
        engine
            .execute(
                &Request::new("INSERT INTO m VALUES ({i:UInt64}, {n:String})")
                    .param("i", id.to_string())
                    .param("n", "x"),
            )
            .expect("insert");
    });
    // What the protocol's guards cost: each scalar subquery is planned and
    // run on its own before the statement that holds it, and an
    // `INSERT ... SELECT` writes a part (about ten files) whatever its rows.
    latency("SELECT with one scalar subquery", 500, || {
        engine
            .execute(&Request::new("SELECT (SELECT count() FROM m)"))
            .expect("select");
    });
    latency("SELECT with three scalar subqueries", 500, || {
        engine
            .execute(&Request::new(
                "SELECT (SELECT count() FROM m), (SELECT max(id) FROM m), (SELECT min(id) FROM m)",
            ))
            .expect("select");
    });
    latency("INSERT ... SELECT one row, no guard", 500, || {
        id += 1;
        engine
            .execute(
                &Request::new("INSERT INTO m SELECT {i:UInt64}, 'x' FROM system.one")
                    .param("i", id.to_string()),
            )
            .expect("insert");
    });
    latency(
        "INSERT ... SELECT one row, two subquery guards",
        500,
        || {
            id += 1;
            engine
                .execute(
                    &Request::new(
                        "INSERT INTO m SELECT {i:UInt64}, 'x' FROM system.one \
                     WHERE (SELECT count() FROM m) > 0 AND (SELECT max(id) FROM m) < {i:UInt64}",
                    )
                    .param("i", id.to_string()),
                )
                .expect("insert");
        },
    );
    latency("INSERT ... SELECT whose guard fails (no part)", 500, || {
        engine
            .execute(&Request::new(
                "INSERT INTO m SELECT 0, 'x' FROM system.one WHERE (SELECT count() FROM m) = 0",
            ))
            .expect("insert");
    });
    let mut rows = Vec::new();
    for i in 0..4096_u64 {
        rows.extend_from_slice(&i.to_le_bytes());
        rows.push(8);
        rows.extend_from_slice(b"abcdefgh");
    }
    latency("INSERT 4,096 rows (RowBinary stream)", 100, || {
        engine
            .execute(&Request::new("INSERT INTO m").insert_data("RowBinary", rows.clone()))
            .expect("insert rows");
    });
    latency("failed statement (connection discarded)", 200, || {
        let _expected_error = engine.execute(&Request::new("SELECT * FROM no_such_table"));
    });

    parallel(
        &engine,
        "SELECT sleep(0.5), pool of 4",
        1,
        "SELECT sleep(0.5)",
    );
    parallel(
        &engine,
        "SELECT sleep(0.5), pool of 4",
        4,
        "SELECT sleep(0.5)",
    );
    parallel(
        &engine,
        "SELECT sleep(0.5), pool of 4",
        8,
        "SELECT sleep(0.5)",
    );
    let cpu = "SELECT sum(cityHash64(number)) FROM numbers(100000000) SETTINGS max_threads = 1";
    parallel(&engine, "CPU-bound, max_threads=1", 1, cpu);
    parallel(&engine, "CPU-bound, max_threads=1", 2, cpu);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let (_addr, front) = HttpFront::start(engine.clone())
            .await
            .expect("start the front");
        let client = clickhouse::Client::default().with_url(front.url());
        for _ in 0..100 {
            client
                .query("SELECT 1")
                .fetch_one::<u8>()
                .await
                .expect("warm-up");
        }
        let mut samples = Vec::new();
        for _ in 0..1000 {
            let started = Instant::now();
            client
                .query("SELECT 1")
                .fetch_one::<u8>()
                .await
                .expect("select");
            samples.push(started.elapsed());
        }
        samples.sort();
        println!(
            "{:<48} p50 {:>9.3?}  p90 {:>9.3?}  p99 {:>9.3?}  (n=1000)",
            "HTTP front, clickhouse crate: SELECT 1",
            percentile(&samples, 0.5),
            percentile(&samples, 0.9),
            percentile(&samples, 0.99),
        );
        front.shutdown().await;
    });
    println!("pool after the run: {:?}", engine.stats());
}
