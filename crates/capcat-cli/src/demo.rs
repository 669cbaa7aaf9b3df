//! `capcat demo`: the whole system on embedded defaults, end to end.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use capcat_pack::{InMemory, RecordLocator, Sha256Digest, hydrate};
use capcat_proto::CaptureDescriptor;
use capcat_proto::reader::{PageSize, SearchFilter, SearchQuery};
use capcat_s3::{AnyStore, PackKey, PackStore};
use capcat_service::{Catalog, ServiceConfig, Spool, ValidConfig};
use uuid::Uuid;

use crate::progress::{bar, spinner};
use crate::settings::{Defaults, Resolved};
use crate::workload;
use crate::{CliError, Common};
use capcat_targets::Access;

/// Options of the demo.
#[derive(Clone, Debug)]
pub(crate) struct DemoOptions {
    /// Where everything lives (a temporary directory when `None`).
    pub dir: Option<PathBuf>,
    /// Records to capture.
    pub records: u64,
    /// Packs to seal them into.
    pub packs: u64,
    /// The run id (the same run on the same directory replays).
    pub run: String,
    /// Seal nothing and start no service: check what the catalog holds of
    /// the run.
    pub verify_only: bool,
}

/// Runs the demo and prints its summary.
///
/// # Errors
/// Any step failing, named.
pub(crate) async fn run(common: &Common, options: DemoOptions) -> Result<(), CliError> {
    // Refused here, naming the flag: further on a zero becomes
    // `max_pack_records = 0`, a key the user never wrote.
    for (flag, value) in [("--records", options.records), ("--packs", options.packs)] {
        if value == 0 {
            return Err(CliError::BadFlag {
                flag,
                value: value.to_string(),
                reason: "must be at least 1".to_owned(),
            });
        }
    }
    let temp;
    let dir: PathBuf = match &options.dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("capcat-demo-")
                .tempdir()
                .map_err(CliError::io("tempdir"))?;
            temp.path().to_owned()
        }
    };
    std::fs::create_dir_all(&dir).map_err(CliError::at("create the demo directory", &dir))?;
    println!("capcat demo in {}", dir.display());
    // The directory's layout and the demo's short timings are the demo's
    // defaults; flags, environment and a --config file override them by
    // the rule every command follows (`settings`).
    let defaults = Defaults {
        catalog: format!("embedded:{}", dir.join("catalog").display()),
        store: format!("local:{}", dir.join("store").display()),
        base: ServiceConfig {
            spool_dir: dir.join("spool"),
            catalog_prefix: "capcat_demo".to_owned(),
            holder: format!("capcat-demo-{}", std::process::id()),
            poll_interval_s: 0.01,
            // Short, so a run after a killed one waits seconds, not half a
            // minute, for the dead process's lease to expire.
            lease_ttl_s: DEMO_LEASE_TTL_S,
            publish_timeout_s: 2.0,
            ..ServiceConfig::default()
        },
    };
    let mut resolved = Resolved::new(common, defaults)?;
    // --records / --packs are flags of the demo: they decide the pack size.
    resolved.raw.max_pack_records =
        usize::try_from(options.records.div_ceil(options.packs.max(1))).unwrap_or(usize::MAX);
    let (config, catalog_target, store_target) = resolved.validate()?;
    // For the closing hint, after the service has taken the configuration.
    let spool_dir = config.raw.spool_dir.clone();
    let prefix_text = config.raw.catalog_prefix.clone();
    // The spool is ours for the whole run, capture included: the capture
    // writes `.open` files, and another process sweeping (a drain, a second
    // demo on this directory) must be refused, naming this pid, not delete
    // them. The service gets a clone; the lock goes with this process. A
    // verification only reads the catalog and the store: it takes none.
    let ownership = if options.verify_only {
        None
    } else {
        Some(capcat_service::owner_lock::take(
            &config.raw.spool_dir,
            &config.raw.holder,
        )?)
    };

    let loading = spinner("loading the catalog engine");
    let engine_started = Instant::now();
    // A verification only reads: a mistyped --dir is an error, not a new
    // empty catalog.
    let access = if options.verify_only {
        Access::ReadOnly
    } else {
        Access::Create
    };
    let catalog = catalog_target.open(access, &config)?;
    loading.finish_with_message(format!(
        "catalog opened in {:.2?}",
        engine_started.elapsed()
    ));

    let store = store_target.open(access, &config)?;
    if options.verify_only {
        return verify_only(&catalog, &store, &config, &options).await;
    }

    // Capture: seal the workload into packs in the spool. A capture process
    // needs no lease to do this (the spool is the hand-off), so it happens
    // before the service starts: a run after a killed one seals at once and
    // only the service waits for the dead process's lease. Every pack is
    // `.ready` before the service's start sweeps stale `.open` files.
    let spool = Spool::open(&config.raw.spool_dir)?;
    // The tensors exist before capture starts, as a model's outputs do:
    // generating them is the model's work, timed apart from Capcat's.
    let generating = Instant::now();
    let per_pack = options.records.div_ceil(options.packs.max(1));
    let run = options.run.clone();
    let records = options.records;
    let workload = tokio::task::spawn_blocking(move || {
        (0..records)
            .step_by(usize::try_from(per_pack.max(1)).unwrap_or(usize::MAX))
            .map(|first| workload::records(&run, first, per_pack.min(records - first)))
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| CliError::Other(e.to_string()))?;
    let generated_in = generating.elapsed();
    let capture_started = Instant::now();
    let sealing = bar(options.records, "sealing");
    let captured =
        crate::capture::seal_into_spool(&spool, &options.run, workload, &sealing).await?;
    sealing.finish();
    let sealed_in = capture_started.elapsed();
    let index = captured.packs;
    println!("sealed {index} packs into the spool in {sealed_in:.2?}");

    let started = Instant::now();
    // A killed run's lease expires within one TTL of its last renewal.
    let lease_wait = config.lease_ttl.saturating_mul(2);
    let service = crate::commands::start_waiting_for_lease(
        config,
        ownership,
        store.clone(),
        catalog.clone(),
        lease_wait,
    )
    .await?;
    let start_time = started.elapsed();
    println!("service started in {start_time:.2?} (schema, lease, reconcile)");

    // Flush: every pack sealed before the call is queryable.
    let flushing = spinner("flush: upload, verify, index");
    let before_flush = service.snapshot().stage_time;
    let flush_started = Instant::now();
    let flushed = service.flush(Duration::from_secs(120)).await;
    let flush_time = flush_started.elapsed();
    let stages = service.snapshot().stage_time.since(before_flush);
    flushing.finish_and_clear();
    let report = flushed?;
    // Capture to queryable counts the sealing and the flush, not the
    // service's one-time start (or a wait for a killed run's lease).
    let to_queryable = sealed_in + flush_time;
    let snapshot = service.snapshot();

    // Search with filters and pagination.
    let search_started = Instant::now();
    let all = search_all(&catalog, &options.run, None).await?;
    let layer3 = search_all(&catalog, &options.run, Some(("model.layers.3.", "BF16"))).await?;
    let search_time = search_started.elapsed();
    if all.len() as u64 != options.records {
        return Err(CliError::Verify(format!(
            "search found {} records, expected {}",
            all.len(),
            options.records
        )));
    }
    let expected_layer3 = (0..options.records)
        .filter(|n| {
            let (m, _) = workload::record(&options.run, *n);
            m.tensor_name.starts_with("model.layers.3.") && m.dtype == capcat_pack::Dtype::BF16
        })
        .count() as u64;
    let lookup_ids: BTreeSet<Uuid> = all.iter().take(10).map(|d| d.capture_id).collect();
    let pinned = catalog
        .search(SearchQuery {
            filter: filter(&options.run),
            cursor: None,
            page_size: PageSize::new(1).map_err(|e| CliError::Other(e.to_string()))?,
        })
        .await?
        .pinned;
    let lookup = catalog
        .get_by_ids(workload::TENANT, lookup_ids.clone(), pinned)
        .await?;
    if lookup.records.len() != lookup_ids.len() {
        return Err(CliError::Verify(format!(
            "get_by_ids found {} of {}",
            lookup.records.len(),
            lookup_ids.len()
        )));
    }

    // Hydrate and verify every record byte for byte.
    let hydrate_started = Instant::now();
    let verified = verify_all(
        &store,
        service.config().prefix.clone(),
        &options.run,
        options.records,
        &all,
    )
    .await?;
    let hydrate_time = hydrate_started.elapsed();

    let close = service.close().await;
    let rate = options.records as f64 / to_queryable.as_secs_f64();
    println!();
    println!(
        "capcat demo: {} records in {} packs ({:.1} MB), Qwen2.5-0.5B-shaped, {}",
        options.records,
        index,
        captured.bytes as f64 / 1e6,
        build_profile()
    );
    println!(
        "  tensors generated          {generated_in:>10.2?}   (the model's outputs; not in capture -> queryable)"
    );
    println!("  sealed into the spool      {sealed_in:>10.2?}");
    println!(
        "    seal (append + digests)  {:>10.2?}   (summed over {} threads; overlaps the writes)",
        captured.seal_busy,
        crate::capture::width()
    );
    println!(
        "    spool write (fsync)      {:>10.2?}",
        captured.write_busy
    );
    println!(
        "  service start              {start_time:>10.2?}   (once per process; not in capture -> queryable)"
    );
    println!(
        "  flush (upload+index)       {flush_time:>10.2?}   ({} packs sealed before the flush; stages overlap)",
        report.packs
    );
    let us = |v: u64| Duration::from_micros(v);
    println!(
        "    read + verify spool      {:>10.2?}",
        us(stages.read_verify_us)
    );
    println!(
        "    upload (PUT, fsync)      {:>10.2?}",
        us(stages.upload_us)
    );
    println!(
        "    HEAD verify              {:>10.2?}",
        us(stages.head_verify_us)
    );
    println!(
        "    describe records         {:>10.2?}",
        us(stages.describe_us)
    );
    println!(
        "    index pass               {:>10.2?}",
        us(stages.index_us)
    );
    println!("  capture -> queryable       {to_queryable:>10.2?}   {rate:.0} records/s");
    println!(
        "  search (all + filtered)    {search_time:>10.2?}   {} records; layer 3 bf16: {} (expected {expected_layer3})",
        all.len(),
        layer3.len()
    );
    println!(
        "  get_by_ids                 {:>10}   {} of {}",
        "",
        lookup.records.len(),
        lookup_ids.len()
    );
    println!(
        "  hydrate + verify           {hydrate_time:>10.2?}   {verified} records byte-identical"
    );
    println!(
        "  service: uploaded {}, indexed {}, replays skipped {}, batch splits {}, rejected {}, cycles {}",
        snapshot.uploaded,
        snapshot.indexed,
        snapshot.replays_skipped,
        snapshot.batch_splits,
        snapshot.rejected_packs.len(),
        snapshot.cycles
    );
    println!(
        "  close: flush {}, lease released: {}",
        if close.flush.is_ok() {
            "ok"
        } else {
            "not drained"
        },
        close.lease_released
    );
    if layer3.len() as u64 != expected_layer3 {
        return Err(CliError::Verify(format!(
            "filtered search found {}, expected {expected_layer3}",
            layer3.len()
        )));
    }
    if options.dir.is_some() {
        println!(
            "run `capcat demo --dir {}` again: the catalog is reused and replayed packs are skipped",
            dir.display()
        );
        println!(
            "other commands on this directory: capcat --catalog {catalog_target} --store {store_target} \
             --spool {} --prefix {} <search --tenant demo | status | drain | ...>",
            spool_dir.display(),
            prefix_text,
        );
    }
    Ok(())
}

/// `capcat demo --verify-only`: every record of the run the catalog holds
/// appears once and is byte-identical to what the demo captures; prints
/// each pack found with its record count (`pack <id> <count> records`), so
/// a caller can compare with the packs it saw sealed.
async fn verify_only(
    catalog: &Catalog,
    store: &AnyStore,
    config: &ValidConfig,
    options: &DemoOptions,
) -> Result<(), CliError> {
    let all = search_all(catalog, &options.run, None).await?;
    if all.is_empty() {
        // Nothing to verify is a failure: a mistyped --run or --dir would
        // otherwise "verify" zero records and exit 0.
        return Err(CliError::Verify(format!(
            "run {:?}: no record of it in catalog {} (check --run and --dir)",
            options.run,
            config.tables.prefix()
        )));
    }
    let mut per_pack: BTreeMap<Uuid, u64> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for d in &all {
        if !seen.insert(d.capture_id) {
            return Err(CliError::Verify(format!(
                "capture {} appears twice in the results",
                d.capture_id
            )));
        }
        *per_pack.entry(d.locator.pack_id).or_default() += 1;
    }
    let verified = verify_all(
        store,
        config.prefix.clone(),
        &options.run,
        options.records,
        &all,
    )
    .await?;
    for (pack_id, count) in &per_pack {
        println!("pack {pack_id} {count} records");
    }
    println!(
        "run {}: {verified} of {} records queryable in {} packs, each once and byte-identical",
        options.run,
        options.records,
        per_pack.len()
    );
    Ok(())
}

/// The demo's lease TTL in seconds.
const DEMO_LEASE_TTL_S: f64 = 6.0;

fn filter(run: &str) -> SearchFilter {
    SearchFilter {
        tenant_id: workload::TENANT.to_owned(),
        experiment_id: Some(workload::EXPERIMENT.to_owned()),
        run_id: Some(run.to_owned()),
        ..SearchFilter::default()
    }
}

/// Every record of the run (optionally with a tensor-name prefix and
/// dtype), page by page at one pinned version.
async fn search_all(
    catalog: &Catalog,
    run: &str,
    narrow: Option<(&str, &str)>,
) -> Result<Vec<CaptureDescriptor>, CliError> {
    let mut filter = filter(run);
    if let Some((prefix, dtype)) = narrow {
        filter.tensor_name_prefix = Some(prefix.to_owned());
        filter.dtype = Some(dtype.to_owned());
    }
    let mut out = Vec::new();
    let mut cursor = None;
    // Bounded by the page count of the largest demo (and a hard cap).
    for _ in 0..100_000 {
        let page = catalog
            .search(SearchQuery {
                filter: filter.clone(),
                cursor,
                page_size: PageSize::new(1000).map_err(|e| CliError::Other(e.to_string()))?,
            })
            .await?;
        out.extend(page.records);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(out),
        }
    }
    Err(CliError::Verify(
        "the search did not end within 100,000 pages".to_owned(),
    ))
}

/// Fetches each pack once and hydrates every record from it through its
/// catalog locator, comparing with the regenerated payload.
async fn verify_all(
    store: &AnyStore,
    prefix: capcat_s3::CatalogPrefix,
    run: &str,
    records: u64,
    found: &[CaptureDescriptor],
) -> Result<usize, CliError> {
    let expected: BTreeMap<Uuid, u64> = (0..records)
        .map(|n| (workload::record(run, n).0.identity.capture_id, n))
        .collect();
    let mut by_pack: BTreeMap<Uuid, Vec<&CaptureDescriptor>> = BTreeMap::new();
    for d in found {
        by_pack.entry(d.locator.pack_id).or_default().push(d);
    }
    let progress = bar(found.len() as u64, "hydrating");
    let mut verified = 0;
    for (pack_id, rows) in by_pack {
        let key = PackKey::new(prefix.clone(), pack_id).object_key();
        let bytes = store
            .get(&key)
            .await
            .map_err(|e| CliError::Other(e.to_string()))?;
        let mut source = InMemory(bytes);
        for (i, d) in rows.iter().enumerate() {
            let digest = hex::decode(&d.locator.payload_sha256)
                .ok()
                .and_then(|v| <[u8; 32]>::try_from(v).ok())
                .ok_or_else(|| {
                    CliError::Verify(format!("capture {}: bad payload_sha256", d.capture_id))
                })?;
            let locator = RecordLocator {
                index: i,
                capture_id: d.capture_id,
                offset: d.locator.payload_offset,
                length: d.locator.payload_length,
                sha256: Sha256Digest(digest),
            };
            let payload =
                hydrate(&mut source, &locator).map_err(|e| CliError::Verify(e.to_string()))?;
            let n = expected.get(&d.capture_id).ok_or_else(|| {
                CliError::Verify(format!(
                    "capture {} is not one the demo wrote",
                    d.capture_id
                ))
            })?;
            if payload != workload::record(run, *n).1 {
                return Err(CliError::Verify(format!(
                    "capture {} differs from what was captured",
                    d.capture_id
                )));
            }
            verified += 1;
            progress.inc(1);
        }
    }
    progress.finish();
    Ok(verified)
}

/// Which build is running, so the timings above are never compared with
/// the release figures of docs/benchmarks.md by mistake: a debug build of
/// the pack code is several times slower.
fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug build (timings are not the release figures of docs/benchmarks.md)"
    } else {
        "release build"
    }
}
