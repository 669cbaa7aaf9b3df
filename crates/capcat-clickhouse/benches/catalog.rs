//! Catalog latency and statement counts through the real adapter
//! (`Catalog` over `Counting<Embedded>` or `Counting<Http>` to capcat-chdb's
//! HTTP front): uncontended publish, renew, an index pass of 16 packs / 4,096
//! rows, a search page of 100 at 50,000 captures, get_by_ids.
//!
//! A bench binary, not criterion: every figure is a median (and p90) over a
//! fixed number of rounds of one operation against one engine, printed as a
//! Markdown table for docs/benchmarks.md.
//!
//! `CAPCAT_LIBCHDB` names the engine (skips without it);
//! `CAPCAT_BENCH_TRANSPORT=http` runs through the HTTP front.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capcat_chdb::{Engine, HttpFront};
use capcat_clickhouse::{Catalog, Counting, Embedded, Http, HttpOptions, Transport};
use capcat_proto::reader::{PageSize, SearchFilter, SearchQuery};
use capcat_proto::{CaptureDescriptor, Config, Tables};
use uuid::Uuid;

#[path = "support/workload.rs"]
mod workload;

use workload::{TENANT, batch};

struct Figure {
    what: &'static str,
    statements: f64,
    samples: Vec<Duration>,
    /// Mean time per round in each statement name.
    breakdown: Vec<(&'static str, f64, Duration)>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Figure {
    fn row(&mut self) -> String {
        self.samples.sort();
        let at = |q: f64| self.samples[((self.samples.len() - 1) as f64 * q).round() as usize];
        format!(
            "| {} | {:.1} | {:.2} ms | {:.2} ms | {} |",
            self.what,
            self.statements,
            ms(at(0.5)),
            ms(at(0.9)),
            self.samples.len()
        )
    }
}

/// Times rounds of one operation and counts the statements they ran.
struct Recorder<'a> {
    what: &'static str,
    counter: &'a Counting<Arc<dyn Transport>>,
    samples: Vec<Duration>,
    started: Instant,
}

impl<'a> Recorder<'a> {
    fn new(what: &'static str, counter: &'a Counting<Arc<dyn Transport>>) -> Self {
        counter.take();
        Self {
            what,
            counter,
            samples: Vec::new(),
            started: Instant::now(),
        }
    }

    fn start(&mut self) {
        self.started = Instant::now();
    }

    fn stop(&mut self) {
        self.samples.push(self.started.elapsed());
    }

    fn finish(self) -> Figure {
        let counts = self.counter.take();
        let rounds = self.samples.len() as f64;
        let statements = counts.total() as f64 / rounds;
        let breakdown = counts
            .by_name
            .iter()
            .map(|(name, n)| {
                let spent = counts
                    .elapsed_by_name
                    .get(name)
                    .copied()
                    .unwrap_or_default();
                (*name, *n as f64 / rounds, spent.div_f64(rounds))
            })
            .collect();
        Figure {
            what: self.what,
            statements,
            samples: self.samples,
            breakdown,
        }
    }
}

async fn run(engine: Engine, http: bool) {
    let _front;
    let inner: Arc<dyn Transport> = if http {
        let (addr, front) = HttpFront::start(engine.clone()).await.expect("HTTP front");
        _front = front;
        Arc::new(Http::new(&format!("http://{addr}"), HttpOptions::default()).expect("url"))
    } else {
        Arc::new(Embedded::new(engine.clone()))
    };
    let counter = Counting::new(inner);
    let prefix = format!("bench_{}", &Uuid::new_v4().simple().to_string()[..8]);
    let catalog = Catalog::new(
        Arc::new(counter.clone()),
        Tables::new(&prefix).expect("prefix"),
        Config::default(),
    );
    catalog.ensure_schema().await.expect("ensure_schema");
    let mut lease = catalog.acquire_lease("bench").await.expect("lease");
    let mut figures = Vec::new();

    let mut r = Recorder::new("renew", &counter);
    for _ in 0..50 {
        r.start();
        lease.renew().await.expect("renew");
        r.stop();
    }
    figures.push(r.finish());

    // Uncontended publish of one pack at a freshly allocated version (the
    // allocation is outside the timed region and the count).
    let mut versions = Vec::new();
    for _ in 0..50 {
        versions.push(catalog.allocate_version().await.expect("allocate"));
    }
    let mut r = Recorder::new("uncontended publish (1 pack)", &counter);
    for version in versions {
        let packs: BTreeSet<_> = [("store-a".to_owned(), Uuid::new_v4())].into();
        r.start();
        catalog
            .publish_snapshot(&mut lease, version, packs)
            .await
            .expect("publish");
        r.stop();
    }
    figures.push(r.finish());

    let passes: Vec<Vec<CaptureDescriptor>> = (0..10)
        .map(|i| batch(16, 256, 10_000_000 + i * 4096))
        .collect();
    let mut r = Recorder::new("index pass, 16 packs / 4,096 rows", &counter);
    for rows in passes {
        r.start();
        catalog.index(&mut lease, rows).await.expect("index");
        r.stop();
    }
    figures.push(r.finish());

    // The search and lookup catalog: 50,000 captures in 16 packs, under a
    // prefix of its own so the figures above do not share its tables.
    let search = Catalog::new(
        Arc::new(counter.clone()),
        Tables::new(&format!("{prefix}_s")).expect("prefix"),
        Config::default(),
    );
    search.ensure_schema().await.expect("ensure_schema");
    let mut slease = search.acquire_lease("bench").await.expect("lease");
    let rows: Vec<CaptureDescriptor> = batch(16, 3125, 0);
    let ids: Vec<Uuid> = rows.iter().map(|d| d.capture_id).collect();
    let loaded = Instant::now();
    search.index(&mut slease, rows).await.expect("index 50k");
    eprintln!(
        "indexed 50,000 captures in {:.1} s",
        loaded.elapsed().as_secs_f64()
    );
    let query = SearchQuery {
        filter: SearchFilter {
            tenant_id: TENANT.to_owned(),
            ..SearchFilter::default()
        },
        cursor: None,
        page_size: PageSize::new(100).expect("100"),
    };
    let mut r = Recorder::new("search page of 100 at 50,000 (first page)", &counter);
    for _ in 0..20 {
        r.start();
        let page = search.search(query.clone()).await.expect("search");
        r.stop();
        assert_eq!(page.records.len(), 100);
    }
    figures.push(r.finish());
    // Page 26: the cursor after row 2,500.
    let mut deep = query.clone();
    for _ in 0..25 {
        let page = search.search(deep.clone()).await.expect("walk");
        deep.cursor = page.next;
    }
    let mut r = Recorder::new("search page of 100 at 50,000 (page 26)", &counter);
    for _ in 0..20 {
        r.start();
        let page = search.search(deep.clone()).await.expect("search");
        r.stop();
        assert_eq!(page.records.len(), 100);
    }
    figures.push(r.finish());
    let w = search.pin().await.expect("pin");
    for (what, count) in [
        ("get_by_ids, 100 ids at 50,000", 100usize),
        ("get_by_ids, 1,000 ids at 50,000", 1000),
    ] {
        let mut r = Recorder::new(what, &counter);
        for round in 0..20 {
            let offset = (round * 1_777) % (ids.len() - count);
            let chosen: BTreeSet<Uuid> = ids.iter().skip(offset).take(count).copied().collect();
            r.start();
            let found = search.resolve(TENANT, chosen, w).await.expect("resolve");
            r.stop();
            assert_eq!(found.len(), count);
        }
        figures.push(r.finish());
    }

    println!(
        "\ntransport: {}\n\n| What | Statements | Median | p90 | Rounds |\n|---|---|---|---|---|",
        if http {
            "HTTP front (clickhouse crate)"
        } else {
            "embedded"
        }
    );
    for f in &mut figures {
        println!("{}", f.row());
    }
    println!("\nMean per round, by statement:\n");
    for f in &figures {
        let parts: Vec<String> = f
            .breakdown
            .iter()
            .map(|(name, n, spent)| format!("{name} x{n:.1} {:.2} ms", ms(*spent)))
            .collect();
        println!("- {}: {}", f.what, parts.join(", "));
    }
    lease.release().await.expect("release");
    slease.release().await.expect("release");
    catalog.drop_schema().await.expect("drop");
    search.drop_schema().await.expect("drop");
}

fn main() {
    if std::env::var_os("CAPCAT_LIBCHDB").is_none() {
        println!("catalog bench: skipped (CAPCAT_LIBCHDB is not set)");
        return;
    }
    // `cargo bench` passes `--bench`; nothing else is accepted.
    let http = std::env::var("CAPCAT_BENCH_TRANSPORT").as_deref() == Ok("http");
    let dir = tempfile::Builder::new()
        .prefix("capcat-catalog-bench")
        .tempdir()
        .expect("temp dir");
    let engine = Engine::open(dir.path()).expect("engine");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(engine, http));
}
