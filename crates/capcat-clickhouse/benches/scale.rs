//! Cost as the catalog grows: every read and write the service and a reader
//! make, measured on one embedded catalog grown through 10^4, 10^5, 10^6 and
//! 10^7 captures, printed as a Markdown table and drawn as a log-log SVG.
//!
//! The catalog is loaded through the path the service uses (`Catalog::index`,
//! one pass per 16 packs of 4,096 descriptors), with a workload shaped like a
//! capture run: four tenants, 8 ranks x 24 layers x 3 tensors per step, runs
//! of 1,000 steps, bf16, f16 and f32 tensors. Every 64th pack is indexed once
//! more from a second store and every 128th pack again from its own, so that
//! resolution (one row per capture, the latest) has work at every size.
//! Before measuring a size the bench waits for the engine's merges to
//! finish; each read reports the rows the engine planned to read and the
//! rows it did read.
//!
//! Environment: `CAPCAT_LIBCHDB` (skips without it); `CAPCAT_SCALE_SIZES`
//! (comma-separated capture counts, default `10000,100000,1000000,10000000`);
//! `CAPCAT_SCALE_ROUNDS` (rounds per figure, default 7); `CAPCAT_SCALE_SVG`
//! (where the plot goes, default `docs/scaling.svg` in the workspace);
//! `CAPCAT_SCALE_KEEP` (set: keep the catalog's directory and print where).
//!
//! `cargo bench -p capcat-clickhouse --bench scale`.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capcat_chdb::Engine;
use capcat_clickhouse::{Catalog, Embedded, Transport};
use capcat_proto::descriptor::{Locator, SummaryColumns};
use capcat_proto::reader::{Cursor, PageSize, Range, SearchFilter, SearchQuery};
use capcat_proto::{
    CaptureDescriptor, Column, ColumnType, Config, Expect, Statement, Tables, Value,
};
use uuid::Uuid;

const PACK_RECORDS: u64 = 4_096;

const PASS_PACKS: u64 = 16;
/// The longest wait for the engine's merges before measuring a size.
const SETTLE_LIMIT: Duration = Duration::from_secs(600);
const TENANTS: u64 = 4;
/// Records of one step of one run: 8 ranks x 24 layers x 3 tensors.
const PER_STEP: u64 = 8 * 24 * 3;
const STEPS_PER_RUN: u64 = 1_000;
const KINDS: [(&str, &str); 3] = [
    ("mlp.down_proj", "bf16"),
    ("self_attn.o_proj", "f16"),
    ("input_layernorm", "f32"),
];

/// Record `n` of the workload: tenants interleaved, so every size holds all
/// four; within a tenant, steps of 576 records and runs of 1,000 steps.
fn descriptor(n: u64, store: &str, pack: Uuid) -> CaptureDescriptor {
    let tenant = n % TENANTS;
    let m = n / TENANTS;
    let run = m / (PER_STEP * STEPS_PER_RUN);
    let step = (m / PER_STEP) % STEPS_PER_RUN;
    let within = m % PER_STEP;
    let (rank, layer, kind) = (within / 72, (within % 72) / 3, within % 3);
    let (kind, dtype) = KINDS[usize::try_from(kind).expect("below 3")];
    CaptureDescriptor {
        tenant_id: format!("tenant{tenant}"),
        experiment_id: format!("exp{}", run / 2),
        run_id: format!("run{run}"),
        captured_at_ns: 1_700_000_000_000_000_000 + step * 1_000_000_000 + within * 1_000,
        // Derived from n, so a re-index or a mirror names the same capture.
        capture_id: Uuid::from_u64_pair(0x00ca_9ca7_0000_4000 | tenant, 0x8000_0000_0000_0000 | n),
        locator: Locator {
            store_id: store.to_owned(),
            pack_id: pack,
            payload_offset: (n % PACK_RECORDS) * 1_792,
            payload_length: 1_792,
            payload_sha256: format!("{n:064x}"),
        },
        index_version: 0,
        step,
        tensor_name: format!("rank{rank}.model.layers.{layer}.{kind}"),
        dtype: dtype.to_owned(),
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

/// The pack id of pack `p` in store `store` (0: the primary store).
fn pack_id(p: u64, store: u64) -> Uuid {
    Uuid::from_u64_pair(0x00ca_9ca7_0000_4000 | store, 0x8000_0000_0000_0000 | p)
}

/// The descriptors of pack `p` as store `store` holds it.
fn pack(p: u64, store: u64) -> Vec<CaptureDescriptor> {
    let name = if store == 0 { "store-a" } else { "store-b" };
    let id = pack_id(p, store);
    (p * PACK_RECORDS..(p + 1) * PACK_RECORDS)
        .map(|n| descriptor(n, name, id))
        .collect()
}

/// One measured operation at one catalog size.
struct Figure {
    what: &'static str,
    size: u64,
    median: Duration,
    p90: Duration,
    /// The descriptor rows the engine plans to read after its primary-key
    /// analysis (`EXPLAIN ESTIMATE`), for reads.
    rows_planned: Option<u64>,
    /// The rows of every table the engine did read in one more run of the
    /// operation (`system.events` `SelectedRows` before and after), for
    /// reads: a read in key order stops at its `LIMIT`, so this, not the
    /// plan, is its work.
    rows_read: Option<u64>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Bench {
    catalog: Catalog,
    lease: capcat_clickhouse::LeaseHandle,
    /// Packs loaded so far (primary store).
    packs: u64,
    /// A sample of loaded capture ids of tenant 0, for the lookups.
    sample: Vec<Uuid>,
    rounds: usize,
    figures: Vec<Figure>,
    /// Active parts of each descriptor table when a size was measured:
    /// what a read in key order merges, so what a first page's cost follows.
    parts: Vec<(u64, u64, u64)>,
}

impl Bench {
    /// Loads packs until `size` captures are in the catalog.
    async fn grow_to(&mut self, size: u64) {
        let target = size.div_ceil(PACK_RECORDS);
        let started = Instant::now();
        while self.packs < target {
            let end = (self.packs + PASS_PACKS).min(target);
            let mut rows = Vec::new();
            for p in self.packs..end {
                rows.extend(pack(p, 0));
                if p % 64 == 63 {
                    rows.extend(pack(p, 1));
                }
            }
            self.sample.extend(
                rows.iter()
                    .filter(|d| d.tenant_id == "tenant0" && d.locator.store_id == "store-a")
                    .step_by(97)
                    .map(|d| d.capture_id),
            );
            // A load of minutes outlives any lease: renew before each pass.
            self.lease.renew().await.expect("renew");
            self.catalog
                .index(&mut self.lease, rows)
                .await
                .expect("an index pass");
            // Every 128th pack once more from its own store, later.
            let again: Vec<CaptureDescriptor> = (self.packs..end)
                .filter(|p| p % 128 == 127)
                .flat_map(|p| pack(p, 0))
                .collect();
            if !again.is_empty() {
                self.catalog
                    .index(&mut self.lease, again)
                    .await
                    .expect("a re-index pass");
            }
            self.packs = end;
            if self.packs.is_multiple_of(160) || self.packs == target {
                eprintln!(
                    "scale: {} of {} packs loaded ({:.0} s)",
                    self.packs,
                    target,
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }

    /// The descriptor rows (`capture_raw` or `capture_by_id`) the engine
    /// plans to read for `stmt`, after
    /// its primary-key analysis (`EXPLAIN ESTIMATE`): the measure of whether
    /// a read's work grows with the catalog. (libchdb keeps no query log, so
    /// a statement's peak memory cannot be read back.)
    async fn rows_estimate(&self, stmt: &Statement) -> Option<u64> {
        let u64_column = |name| Column {
            name,
            ty: ColumnType::UInt64,
        };
        let string_column = |name| Column {
            name,
            ty: ColumnType::String,
        };
        let explain = Statement {
            name: "bench.explain_estimate",
            sql: format!(
                "EXPLAIN ESTIMATE {}",
                stmt.sql.trim_end().trim_end_matches(';')
            ),
            params: stmt.params.clone(),
            settings: stmt.settings,
            expect: Expect::Rows(vec![
                string_column("database"),
                string_column("table"),
                u64_column("parts"),
                u64_column("rows"),
                u64_column("marks"),
            ]),
            data: None,
        };
        let rows = match self.catalog.transport().execute(&explain).await {
            Ok(rows) => rows,
            Err(e) => {
                eprintln!("scale: EXPLAIN ESTIMATE failed: {e}");
                return None;
            }
        };
        // A page reads the descriptor table, a lookup its copy keyed by id.
        let descriptor_tables = [
            self.catalog.tables().capture_raw(),
            self.catalog.tables().capture_by_id(),
        ];
        Some(
            rows.0
                .iter()
                .filter_map(|row| match row.as_slice() {
                    [_, Value::String(table), _, Value::UInt64(n), _]
                        if descriptor_tables
                            .iter()
                            .any(|t| t.ends_with(table.as_str())) =>
                    {
                        Some(*n)
                    }
                    _ => None,
                })
                .sum(),
        )
    }

    /// The engine's count of rows read by SELECTs since it started
    /// (`system.events` `SelectedRows`; merges are not counted). The bench
    /// runs one statement at a time, so a difference is one operation's.
    async fn selected_rows(&self) -> u64 {
        self.count(
            "SELECT toUInt64(sum(value)) AS n FROM system.events WHERE event = 'SelectedRows'",
        )
        .await
    }

    /// Runs `sql`, a read of one `UInt64` column `n` in one row.
    async fn count(&self, sql: &str) -> u64 {
        let stmt = raw(
            sql,
            Expect::Rows(vec![Column {
                name: "n",
                ty: ColumnType::UInt64,
            }]),
        );
        let rows = self
            .catalog
            .transport()
            .execute(&stmt)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        match rows.0.first().map(Vec::as_slice) {
            Some([Value::UInt64(n)]) => *n,
            other => panic!("{sql} answered {other:?}"),
        }
    }

    /// Waits until the engine runs no merge of this catalog's tables, two
    /// polls in a row a second apart, for at most [`SETTLE_LIMIT`]. A load
    /// leaves merges running for a minute or more; measured under them, a
    /// read shares the two cores with the merges and reads more parts than
    /// the catalog will have once they finish, which is the state a catalog
    /// spends its life in. The figures are of that settled catalog.
    async fn settle(&self) {
        let started = Instant::now();
        let mut quiet_polls = 0;
        loop {
            if started.elapsed() > SETTLE_LIMIT {
                eprintln!("scale: merges still running after {SETTLE_LIMIT:?}; measuring anyway");
                return;
            }
            let running = self
                .count(
                    "SELECT toUInt64(count()) AS n FROM system.merges \
                     WHERE database = currentDatabase()",
                )
                .await;
            quiet_polls = if running == 0 { quiet_polls + 1 } else { 0 };
            if quiet_polls == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        eprintln!(
            "scale: merges settled after {:.0} s; measuring",
            started.elapsed().as_secs_f64()
        );
    }

    /// The active parts of `capture_raw` and `capture_by_id`.
    async fn active_parts(&self) -> (u64, u64) {
        let tables = self.catalog.tables();
        let sql = format!(
            "SELECT countIf(table = '{}') AS raw, countIf(table = '{}') AS by_id FROM system.parts \
             WHERE database = currentDatabase() AND active",
            tables.capture_raw(),
            tables.capture_by_id()
        );
        let stmt = raw(
            &sql,
            Expect::Rows(vec![
                Column {
                    name: "raw",
                    ty: ColumnType::UInt64,
                },
                Column {
                    name: "by_id",
                    ty: ColumnType::UInt64,
                },
            ]),
        );
        let rows = self
            .catalog
            .transport()
            .execute(&stmt)
            .await
            .expect("system.parts");
        match rows.0.first().map(Vec::as_slice) {
            Some([Value::UInt64(raw), Value::UInt64(by_id)]) => (*raw, *by_id),
            other => panic!("system.parts answered {other:?}"),
        }
    }

    /// Times `rounds` runs of `op` and records the figure.
    async fn measure<F, Fut>(
        &mut self,
        what: &'static str,
        size: u64,
        plan: Option<Statement>,
        mut op: F,
    ) where
        F: FnMut(u64) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        // One unmeasured run warms the caches, as a reader's second page is.
        op(0).await;
        let mut samples = Vec::with_capacity(self.rounds);
        for round in 1..=self.rounds {
            let started = Instant::now();
            op(round as u64).await;
            samples.push(started.elapsed());
        }
        samples.sort();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        let (rows_planned, rows_read) = match &plan {
            Some(stmt) => {
                let planned = self.rows_estimate(stmt).await;
                // Reading the counter reads rows of `system.events` too:
                // two reads back to back measure that, to take it off.
                let first = self.selected_rows().await;
                let before = self.selected_rows().await;
                op(0).await;
                let after = self.selected_rows().await;
                let own = before.saturating_sub(first);
                (
                    planned,
                    Some(after.saturating_sub(before).saturating_sub(own)),
                )
            }
            None => (None, None),
        };
        eprintln!("scale: {size:>9} {what}: {:.2} ms", ms(at(0.5)));
        self.figures.push(Figure {
            what,
            size,
            median: at(0.5),
            p90: at(0.9),
            rows_planned,
            rows_read,
        });
    }

    /// The cursor after the `offset`-th row of tenant 0 in key order (raw
    /// rows; mirrors count twice, so the page is near, not at, the offset).
    async fn cursor_at(&self, pinned: u64, offset: u64) -> Option<Cursor> {
        let sql = format!(
            "SELECT experiment_id, run_id, captured_at_ns, capture_id FROM {} \
             WHERE tenant_id = 'tenant0' \
             ORDER BY tenant_id, experiment_id, run_id, captured_at_ns, capture_id \
             LIMIT 1 OFFSET {offset}",
            self.catalog.tables().capture_raw()
        );
        let stmt = raw(
            &sql,
            Expect::Rows(vec![
                Column {
                    name: "experiment_id",
                    ty: ColumnType::String,
                },
                Column {
                    name: "run_id",
                    ty: ColumnType::String,
                },
                Column {
                    name: "captured_at_ns",
                    ty: ColumnType::UInt64,
                },
                Column {
                    name: "capture_id",
                    ty: ColumnType::Uuid,
                },
            ]),
        );
        let rows = self
            .catalog
            .transport()
            .execute(&stmt)
            .await
            .expect("cursor row");
        let row = rows.0.first()?;
        match row.as_slice() {
            [
                Value::String(experiment_id),
                Value::String(run_id),
                Value::UInt64(captured_at_ns),
                Value::Uuid(capture_id),
            ] => Some(Cursor {
                pinned,
                tenant_id: "tenant0".to_owned(),
                experiment_id: experiment_id.clone(),
                run_id: run_id.clone(),
                captured_at_ns: *captured_at_ns,
                capture_id: *capture_id,
            }),
            _ => None,
        }
    }

    async fn measure_size(&mut self, size: u64) {
        let catalog = self.catalog.clone();
        let pinned = catalog.pin().await.expect("pin");
        let tables = catalog.tables().clone();
        let query = |filter: SearchFilter, cursor: Option<Cursor>| SearchQuery {
            filter,
            cursor,
            page_size: PageSize::new(100).expect("100 is a page size"),
        };
        let tenant = || SearchFilter {
            tenant_id: "tenant0".to_owned(),
            ..SearchFilter::default()
        };
        let searches: [(&'static str, SearchFilter); 4] = [
            ("search, tenant: first page", tenant()),
            (
                "search, tenant + run: first page",
                SearchFilter {
                    run_id: Some("run0".to_owned()),
                    ..tenant()
                },
            ),
            (
                "search, tensor-name prefix: first page",
                SearchFilter {
                    tensor_name_prefix: Some("rank3.model.layers.7.".to_owned()),
                    ..tenant()
                },
            ),
            (
                "search, step range: first page",
                SearchFilter {
                    step: Range {
                        from: Some(2),
                        until: Some(3),
                    },
                    ..tenant()
                },
            ),
        ];
        for (what, filter) in searches {
            let q = query(filter, None);
            let plan = capcat_proto::reader::search_page(&tables, &q, pinned).ok();
            self.measure(what, size, plan, |_| {
                let (catalog, q) = (catalog.clone(), q.clone());
                async move {
                    let page = catalog.search(q).await.expect("search");
                    assert!(!page.records.is_empty(), "an empty page");
                }
            })
            .await;
        }
        if let Some(cursor) = self.cursor_at(pinned, 99_900).await {
            let q = query(tenant(), Some(cursor));
            let plan = capcat_proto::reader::search_page(&tables, &q, pinned).ok();
            self.measure("search, tenant: page 1,000", size, plan, |_| {
                let (catalog, q) = (catalog.clone(), q.clone());
                async move {
                    let page = catalog.search(q).await.expect("search");
                    assert!(!page.records.is_empty(), "an empty deep page");
                }
            })
            .await;
        }
        for (what, count) in [
            ("get_by_ids, 100 ids", 100usize),
            ("get_by_ids, 1,000 ids", 1_000),
        ] {
            let sample = self.sample.clone();
            let first: BTreeSet<Uuid> = sample
                .iter()
                .step_by((sample.len() / count).max(1))
                .take(count)
                .copied()
                .collect();
            let plan = capcat_proto::reader::get_by_ids(&tables, "tenant0", &first, pinned)
                .ok()
                .and_then(|mut statements| statements.pop());
            self.measure(what, size, plan, |round| {
                let catalog = catalog.clone();
                let step = sample.len() / count;
                let ids: BTreeSet<Uuid> = sample
                    .iter()
                    .skip(usize::try_from(round).expect("small") % step.max(1))
                    .step_by(step.max(1))
                    .take(count)
                    .copied()
                    .collect();
                async move {
                    let found = catalog
                        .resolve("tenant0", ids, pinned)
                        .await
                        .expect("resolve");
                    assert!(!found.is_empty());
                }
            })
            .await;
        }
        self.measure("pin", size, None, |_| {
            let catalog = catalog.clone();
            async move {
                catalog.pin().await.expect("pin");
            }
        })
        .await;
        self.measure("demand report", size, None, |_| {
            let catalog = catalog.clone();
            async move {
                catalog.demand_report().await.expect("demand");
            }
        })
        .await;
        let ids: Vec<Uuid> = (0..self.packs).map(|p| pack_id(p, 0)).collect();
        self.measure("reconcile: committed of every pack", size, None, |_| {
            let (catalog, ids) = (catalog.clone(), ids.clone());
            async move {
                let committed = catalog.committed("store-a", &ids).await.expect("committed");
                assert_eq!(committed.len(), ids.len());
            }
        })
        .await;
        // A no-op pass: 16 packs the catalog already holds.
        let held: Vec<CaptureDescriptor> = (0..PASS_PACKS.min(self.packs))
            .flat_map(|p| pack(p, 0))
            .collect();
        let mut samples = Vec::new();
        for _ in 0..self.rounds.min(3) {
            self.lease.renew().await.expect("renew");
            let started = Instant::now();
            self.catalog
                .index(&mut self.lease, held.clone())
                .await
                .expect("a no-op pass");
            samples.push(started.elapsed());
        }
        push_samples(
            &mut self.figures,
            "index pass, 16 packs already indexed",
            size,
            samples,
        );
        // One index pass of 16 new packs: they stay (65,536 more captures),
        // so one pass per size keeps the next size's catalog near its name.
        let mut samples = Vec::new();
        for _ in 0..1 {
            let rows: Vec<CaptureDescriptor> = (self.packs..self.packs + PASS_PACKS)
                .flat_map(|p| pack(p, 0))
                .collect();
            self.lease.renew().await.expect("renew");
            let started = Instant::now();
            self.catalog
                .index(&mut self.lease, rows)
                .await
                .expect("an index pass");
            samples.push(started.elapsed());
            self.packs += PASS_PACKS;
        }
        push_samples(
            &mut self.figures,
            "index pass, 16 new packs (65,536 rows)",
            size,
            samples,
        );
    }

    /// The figures as a Markdown table: one row per operation, one column
    /// per size (median, rows planned and read, p90).
    fn table(&self, sizes: &[u64]) -> String {
        let mut out = String::from("| Operation |");
        for size in sizes {
            let _ = write!(out, " {} |", size_label(*size));
        }
        out.push_str("\n|---|");
        for _ in sizes {
            out.push_str("---|");
        }
        out.push('\n');
        for what in self.operations() {
            let _ = write!(out, "| {what} |");
            for size in sizes {
                match self.figure(what, *size) {
                    Some(f) => {
                        let _ = write!(out, " {:.1} ms", ms(f.median));
                        if let Some(n) = f.rows_planned {
                            let _ = write!(out, ", {n} rows planned");
                        }
                        if let Some(n) = f.rows_read {
                            let _ = write!(out, ", {n} read");
                        }
                        let _ = write!(out, " (p90 {:.1}) |", ms(f.p90));
                    }
                    None => out.push_str(" - |"),
                }
            }
            out.push('\n');
        }
        out
    }

    fn operations(&self) -> Vec<&'static str> {
        let mut seen = Vec::new();
        for f in &self.figures {
            if !seen.contains(&f.what) {
                seen.push(f.what);
            }
        }
        seen
    }

    fn figure(&self, what: &str, size: u64) -> Option<&Figure> {
        self.figures
            .iter()
            .find(|f| f.what == what && f.size == size)
    }
}

fn size_label(size: u64) -> String {
    let exponent = (size as f64).log10();
    if (exponent - exponent.round()).abs() < 1e-9 {
        format!("10^{}", exponent.round())
    } else {
        size.to_string()
    }
}

fn push_samples(
    figures: &mut Vec<Figure>,
    what: &'static str,
    size: u64,
    mut samples: Vec<Duration>,
) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    eprintln!("scale: {size:>9} {what}: {:.2} ms", ms(at(0.5)));
    figures.push(Figure {
        what,
        size,
        median: at(0.5),
        p90: at(0.9),
        rows_planned: None,
        rows_read: None,
    });
}

fn raw(sql: &str, expect: Expect) -> Statement {
    Statement {
        name: "bench.raw",
        sql: sql.to_owned(),
        params: std::collections::BTreeMap::new(),
        settings: capcat_proto::statement::Settings::default(),
        expect,
        data: None,
    }
}

/// The plot: latency against catalog size, log-log, one line per
/// operation. Written by hand (a few dozen lines) rather than with a
/// plotting crate, to keep the build small.
fn svg(bench: &Bench, sizes: &[u64]) -> String {
    const W: f64 = 900.0;
    const H: f64 = 560.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 330.0;
    const TOP: f64 = 30.0;
    const BOTTOM: f64 = 50.0;
    let values: Vec<f64> = bench
        .figures
        .iter()
        .map(|f| ms(f.median).max(0.01))
        .collect();
    let lo = values
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .log10()
        .floor();
    let hi = values
        .iter()
        .copied()
        .fold(0.0, f64::max)
        .log10()
        .ceil()
        .max(lo + 1.0);
    let (x_lo, x_hi) = (
        (sizes[0] as f64).log10(),
        (sizes[sizes.len() - 1] as f64)
            .log10()
            .max((sizes[0] as f64).log10() + 1.0),
    );
    let x = |size: u64| LEFT + ((size as f64).log10() - x_lo) / (x_hi - x_lo) * (W - LEFT - RIGHT);
    let y = |v: f64| TOP + (hi - v.max(0.01).log10()) / (hi - lo) * (H - TOP - BOTTOM);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    let _ = writeln!(
        out,
        "<text x=\"{LEFT}\" y=\"18\" font-size=\"14\">Capcat catalog: median latency against \
         catalog size (embedded engine, log-log)</text>"
    );
    for decade in (lo as i64)..=(hi as i64) {
        let v = 10f64.powi(i32::try_from(decade).expect("a small exponent"));
        let yy = y(v);
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{} ms</text>",
            W - RIGHT,
            LEFT - 6.0,
            yy + 4.0,
            if v < 1.0 {
                format!("{v}")
            } else {
                format!("{v:.0}")
            }
        );
    }
    for size in sizes {
        let xx = x(*size);
        let _ = writeln!(
            out,
            "<line x1=\"{xx:.1}\" y1=\"{TOP}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} captures</text>",
            H - BOTTOM,
            H - BOTTOM + 18.0,
            size_label(*size)
        );
    }
    const COLOURS: [&str; 8] = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    ];
    for (i, what) in bench.operations().into_iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let dash = if i >= COLOURS.len() {
            " stroke-dasharray=\"6 3\""
        } else {
            ""
        };
        let points: Vec<String> = sizes
            .iter()
            .filter_map(|s| {
                bench
                    .figure(what, *s)
                    .map(|f| format!("{:.1},{:.1}", x(*s), y(ms(f.median))))
            })
            .collect();
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
            points.join(" ")
        );
        let ly = TOP + 10.0 + i as f64 * 18.0;
        let lx = W - RIGHT + 15.0;
        let _ = writeln!(
            out,
            "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{:.1}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{what}</text>",
            lx + 24.0,
            lx + 30.0,
            ly + 4.0
        );
    }
    out.push_str("</svg>\n");
    out
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} does not parse")),
        Err(_) => default,
    }
}

fn main() {
    if std::env::var_os("CAPCAT_LIBCHDB").is_none() {
        println!("scale bench: skipped (CAPCAT_LIBCHDB is not set)");
        return;
    }
    let sizes: Vec<u64> = std::env::var("CAPCAT_SCALE_SIZES")
        .unwrap_or_else(|_| "10000,100000,1000000,10000000".to_owned())
        .split(',')
        .map(|s| s.trim().parse().expect("a capture count"))
        .collect();
    assert!(
        !sizes.is_empty() && sizes.windows(2).all(|w| w[0] < w[1]),
        "CAPCAT_SCALE_SIZES must grow"
    );
    let rounds = env_or("CAPCAT_SCALE_ROUNDS", 7usize).max(1);
    let svg_path = std::env::var_os("CAPCAT_SCALE_SVG")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/scaling.svg")
        });
    let dir = tempfile::Builder::new()
        .prefix("capcat-scale-bench")
        .tempdir()
        .expect("temp dir");
    let engine = Engine::open(dir.path()).expect("engine");
    // Kept for a look with other tools afterwards; removed otherwise.
    let _dir = if std::env::var_os("CAPCAT_SCALE_KEEP").is_some() {
        eprintln!("scale: the catalog stays in {}", dir.path().display());
        let _ = dir.keep();
        None
    } else {
        Some(dir)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let transport: Arc<dyn Transport> = Arc::new(Embedded::new(engine.clone()));
        let prefix = format!("scale_{}", &Uuid::new_v4().simple().to_string()[..8]);
        let catalog = Catalog::new(transport, Tables::new(&prefix).expect("prefix"), Config::default());
        catalog.ensure_schema().await.expect("ensure_schema");
        let lease = catalog.acquire_lease("scale").await.expect("lease");
        let mut bench = Bench {
            catalog,
            lease,
            packs: 0,
            sample: Vec::new(),
            rounds,
            figures: Vec::new(),
            parts: Vec::new(),
        };
        let started = Instant::now();
        for &size in &sizes {
            bench.grow_to(size).await;
            eprintln!(
                "scale: {} captures loaded ({:.0} s)",
                bench.packs * PACK_RECORDS,
                started.elapsed().as_secs_f64()
            );
            bench.settle().await;
            let parts = bench.active_parts().await;
            eprintln!("scale: {size:>9} active parts (capture_raw, capture_by_id): {parts:?}");
            bench.parts.push((size, parts.0, parts.1));
            bench.measure_size(size).await;
        }
        let table = bench.table(&sizes);
        println!("\nmedian (and p90) per operation; sizes are captures before the index passes added theirs\n\n{table}");
        for (size, raw, by_id) in &bench.parts {
            println!("active parts at {}: capture_raw {raw}, capture_by_id {by_id}", size_label(*size));
        }
        std::fs::write(&svg_path, svg(&bench, &sizes)).expect("write the plot");
        eprintln!("scale: plot written to {}", svg_path.display());
        bench.lease.release().await.expect("release");
    });
}
