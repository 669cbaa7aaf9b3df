//! The commands other than `demo`.

use std::collections::BTreeSet;
use std::path::Path;
use std::str::FromStr as _;
use std::time::Duration;

use capcat_clickhouse::CatalogError;
use capcat_pack::{CaptureIdentity, Dtype, RecordMetadata};
use capcat_proto::CaptureDescriptor;
use capcat_proto::reader::ReaderError;
use capcat_proto::reader::{Cursor, PageSize, Range, SearchFilter, SearchQuery};
use capcat_proto::{Failure, LeaseError};
use capcat_s3::AnyStore;
use capcat_service::{Catalog, Service, ValidConfig};
use uuid::Uuid;

use crate::settings::{Defaults, Resolved};
use crate::{CliError, Common};
use capcat_targets::{Access, CatalogTarget, StoreTarget};

/// Arguments of `capcat search`.
#[derive(Debug, clap::Args)]
pub(crate) struct SearchArgs {
    /// The tenant (required).
    #[arg(long)]
    tenant: String,
    /// Only this experiment.
    #[arg(long)]
    experiment: Option<String>,
    /// Only this run.
    #[arg(long)]
    run: Option<String>,
    /// Only tensor names starting with this (a module path).
    #[arg(long)]
    tensor_prefix: Option<String>,
    /// Only this dtype, in any case: F64, F32, BF16, F16, I64, I32, I16, I8,
    /// U8 or BOOL.
    #[arg(long)]
    dtype: Option<String>,
    /// Only steps from this one.
    #[arg(long)]
    step_from: Option<u64>,
    /// Only steps up to this one.
    #[arg(long)]
    step_until: Option<u64>,
    /// Rows per page (1 to 5000).
    #[arg(long, default_value_t = 100)]
    page_size: u64,
    /// The cursor a previous page printed.
    #[arg(long)]
    cursor: Option<String>,
}

/// The validated configuration: flag, else environment, else file, else
/// default, for every setting (see `settings`).
pub(crate) fn config(
    common: &Common,
) -> Result<(ValidConfig, CatalogTarget, StoreTarget), CliError> {
    Resolved::new(common, Defaults::cli())?.validate()
}

/// `capcat settings`: every effective setting and where it came from.
pub(crate) fn settings(common: &Common) -> Result<(), CliError> {
    let resolved = Resolved::new(common, Defaults::cli())?;
    print!("{}", resolved.describe()?);
    // Validated after printing, so a refused value is seen with its source.
    resolved.validate()?;
    Ok(())
}

/// For a command that runs the service as the spool's owner: refuses at
/// once, naming the pid, when a live process (a running service or demo)
/// owns the spool, before the catalog is opened (an embedded catalog in
/// use would otherwise be the only complaint) and before anything is swept.
fn refuse_owned_spool(cfg: &ValidConfig) -> Result<(), CliError> {
    if cfg.raw.owns_spool {
        capcat_service::owner_lock::check_free(&cfg.raw.spool_dir)?;
    }
    Ok(())
}

/// Opens the catalog and checks the server accepts it (certificate,
/// credentials), so that a refusal is reported as what to fix before any
/// command runs a statement.
pub(crate) async fn open_catalog(
    cfg: &ValidConfig,
    target: &CatalogTarget,
    access: Access,
) -> Result<Catalog, CliError> {
    let catalog = target.open(access, cfg)?;
    catalog
        .check_access()
        .await
        .map_err(|e| capcat_targets::TargetError::Catalog(e.to_string()))?;
    Ok(catalog)
}

/// `capcat sql`.
pub(crate) fn sql(common: &Common) -> Result<(), CliError> {
    let (cfg, _, _) = config(common)?;
    let (text, counts) = crate::sql_walk::render(&cfg.tables, &cfg.protocol);
    print!("{text}");
    println!("-- statements per machine:");
    for (machine, n) in counts {
        println!("--   {n:>2}  {machine}");
    }
    Ok(())
}

fn print_rows(rows: &[CaptureDescriptor]) {
    for d in rows {
        println!(
            "{}  {}/{}/{}  step {:>6}  {:<48} {:<5} {:?}  pack {}",
            d.capture_id,
            d.tenant_id,
            d.experiment_id,
            d.run_id,
            d.step,
            d.tensor_name,
            d.dtype,
            d.shape,
            d.locator.pack_id
        );
    }
}

/// `capcat search`.
pub(crate) async fn search(common: &Common, args: SearchArgs) -> Result<(), CliError> {
    check_name("--tenant", &args.tenant)?;
    let dtype = args.dtype.as_deref().map(dtype_filter).transpose()?;
    let (cfg, target, _) = config(common)?;
    let catalog = open_catalog(&cfg, &target, Access::ReadOnly).await?;
    let cursor = match &args.cursor {
        Some(token) => Some(Cursor::from_token(token)?),
        None => None,
    };
    let query = SearchQuery {
        filter: SearchFilter {
            tenant_id: args.tenant,
            experiment_id: args.experiment,
            run_id: args.run,
            tensor_name_prefix: args.tensor_prefix,
            dtype,
            step: Range {
                from: args.step_from,
                until: args.step_until,
            },
            ..SearchFilter::default()
        },
        cursor,
        page_size: PageSize::new(args.page_size)?,
    };
    let page = catalog
        .search(query)
        .await
        .map_err(read_error(cfg.tables.prefix()))?;
    print_rows(&page.records);
    eprintln!(
        "{} record(s) at pinned version {}",
        page.records.len(),
        page.pinned
    );
    if let Some(next) = page.next {
        println!("next page: --cursor {}", next.to_token());
    }
    Ok(())
}

/// ClickHouse's UNKNOWN_TABLE: the statement names a table that is not there.
const UNKNOWN_TABLE: u32 = 60;

/// A catalog read's error, with a missing table said as what it means for
/// the user (nothing under this prefix) rather than as the server's
/// exception text.
pub(crate) fn read_error(prefix: &str) -> impl FnOnce(CatalogError) -> CliError + '_ {
    move |error| match error {
        CatalogError::Reader(ReaderError::Statement {
            failure:
                Failure::Server {
                    code: UNKNOWN_TABLE,
                    ..
                },
            ..
        }) => CliError::NoSchema {
            prefix: prefix.to_owned(),
        },
        other => CliError::Catalog(other),
    }
}

/// Refuses a name that cannot be what the user meant
/// ([`capcat_targets::name_refusal`]).
pub(crate) fn check_name(what: &str, value: &str) -> Result<(), CliError> {
    let Some(reason) = capcat_targets::name_refusal(value) else {
        return Ok(());
    };
    Err(CliError::BadName {
        what: what.to_owned(),
        value: value.to_owned(),
        reason,
    })
}

/// The dtype of a `--dtype` filter, whatever its case, as the catalog
/// spells it; anything else is refused with the list of dtypes.
fn dtype_filter(text: &str) -> Result<String, CliError> {
    Dtype::ALL
        .into_iter()
        .find(|d| d.name().eq_ignore_ascii_case(text))
        .map(|d| d.name().to_owned())
        .ok_or_else(|| CliError::BadFlag {
            flag: "--dtype",
            value: format!("{text:?}"),
            reason: format!(
                "expected one of {}",
                Dtype::ALL.map(|d| d.name()).join(", ")
            ),
        })
}

/// `capcat get`.
pub(crate) async fn get(common: &Common, tenant: &str, ids: Vec<Uuid>) -> Result<(), CliError> {
    check_name("--tenant", tenant)?;
    let (cfg, target, _) = config(common)?;
    let catalog = open_catalog(&cfg, &target, Access::ReadOnly).await?;
    let pinned = catalog
        .pin()
        .await
        .map_err(read_error(cfg.tables.prefix()))?;
    let lookup = catalog
        .get_by_ids(tenant, ids.into_iter().collect(), pinned)
        .await?;
    let rows: Vec<_> = lookup.records.values().cloned().collect();
    print_rows(&rows);
    for id in &lookup.missing {
        println!("{id}  not found at pinned version {pinned}");
    }
    // A lookup that misses fails, so a script sees it in the exit code.
    if !lookup.missing.is_empty() {
        return Err(CliError::NotFound {
            missing: lookup.missing.len(),
            asked: lookup.missing.len() + lookup.records.len(),
        });
    }
    Ok(())
}

fn npy_descr(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::F64 => "<f8",
        Dtype::F32 | Dtype::BF16 => "<f4",
        Dtype::F16 => "<f2",
        Dtype::I64 => "<i8",
        Dtype::I32 => "<i4",
        Dtype::I16 => "<i2",
        Dtype::I8 => "|i1",
        Dtype::U8 => "|u1",
        Dtype::BOOL => "|b1",
    }
}

/// A NumPy `.npy` file (version 1.0) of `payload`. NumPy has no bfloat16,
/// so bf16 is widened to f32 (exactly).
fn npy(dtype: Dtype, shape: &[u64], payload: &[u8]) -> Vec<u8> {
    let body: Vec<u8> = if dtype == Dtype::BF16 {
        payload
            .chunks_exact(2)
            .flat_map(|c| {
                half::bf16::from_le_bytes([c[0], c[1]])
                    .to_f32()
                    .to_le_bytes()
            })
            .collect()
    } else {
        payload.to_vec()
    };
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let shape_text = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}",
        npy_descr(dtype)
    );
    // The header is padded so the data starts on a 64-byte boundary.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend(
        u16::try_from(header.len())
            .unwrap_or(u16::MAX)
            .to_le_bytes(),
    );
    out.extend(header.as_bytes());
    out.extend(body);
    out
}

/// A safetensors file holding one tensor: an 8-byte little-endian header
/// length, the JSON header (padded with spaces to a multiple of 8, as the
/// format recommends), then the bytes. The dtype names are the
/// safetensors names, so every dtype round-trips unchanged.
fn safetensors_file(
    name: &str,
    dtype: Dtype,
    shape: &[u64],
    payload: &[u8],
) -> Result<Vec<u8>, CliError> {
    let header = serde_json::json!({
        name: {
            "dtype": dtype.to_string(),
            "shape": shape,
            "data_offsets": [0, payload.len()],
        }
    });
    let mut header = serde_json::to_vec(&header)
        .map_err(|e| CliError::Other(format!("safetensors header: {e}")))?;
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out.extend_from_slice(payload);
    Ok(out)
}

/// `capcat hydrate`.
pub(crate) async fn hydrate(
    common: &Common,
    tenant: &str,
    id: Uuid,
    out: &Path,
) -> Result<(), CliError> {
    check_name("--tenant", tenant)?;
    let (cfg, target, store_target) = config(common)?;
    let catalog = open_catalog(&cfg, &target, Access::ReadOnly).await?;
    let store = store_target.open(Access::ReadOnly, &cfg)?;
    let pinned = catalog
        .pin()
        .await
        .map_err(read_error(cfg.tables.prefix()))?;
    let lookup = catalog
        .get_by_ids(tenant, BTreeSet::from([id]), pinned)
        .await?;
    let d = lookup.records.get(&id).ok_or_else(|| {
        CliError::Other(format!("capture {id} not found at pinned version {pinned}"))
    })?;
    let payload = capcat_service::hydrate(&store, &cfg.prefix, d)
        .await
        .map_err(|e| CliError::Hydrate(Box::new(e)))?;
    let dtype = Dtype::from_str(&d.dtype)?;
    let data = match out.extension().and_then(|e| e.to_str()) {
        Some("npy") => npy(dtype, &d.shape, &payload),
        Some("safetensors") => safetensors_file(&d.tensor_name, dtype, &d.shape, &payload)?,
        _ => payload.to_vec(),
    };
    std::fs::write(out, data).map_err(CliError::at("write the output", out))?;
    println!(
        "{} ({} {:?}, {} bytes verified) -> {}",
        d.tensor_name,
        d.dtype,
        d.shape,
        payload.len(),
        out.display()
    );
    Ok(())
}

/// An age in milliseconds as status prints it; `None` is no pending pack.
fn age_text(ms: Option<u64>) -> String {
    match ms {
        Some(ms) => format!("{ms} ms"),
        None => "none".to_owned(),
    }
}

/// Whether process `pid` exists on this machine (Linux `/proc`; a pid can
/// be reused, so "alive" means "a process with that id runs").
fn pid_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// A JSON value on one line, strings without quotes.
fn json_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "none".to_owned(),
        other => other.to_string(),
    }
}

/// Prints the status file a service writes into its spool (at start, then
/// once per `status_interval_s`, and when it closes).
fn print_status_file(spool_dir: &Path) {
    let status = match capcat_service::read_status(spool_dir) {
        Ok(Some(status)) => status,
        Ok(None) => {
            println!(
                "service: no status file in {} (no service has run on this spool; \
                 a running service writes one at start)",
                spool_dir.display()
            );
            return;
        }
        Err(e) => {
            println!("service: {e}");
            return;
        }
    };
    let age_ms = capcat_clickhouse::unix_now_ms().saturating_sub(status.written_at);
    let alive = pid_alive(status.pid);
    let state = match (status.closed, alive) {
        (true, _) => "closed",
        (false, true) => "running",
        // Written by a process that is gone without closing: killed or
        // crashed. What it left is in the spool and the store; `capcat
        // drain` finishes it.
        (false, false) => "stopped without closing (killed?); `capcat drain` finishes its work",
    };
    println!(
        "service {} (prefix {}): {state}",
        status.holder, status.catalog_prefix
    );
    println!(
        "  snapshot age {:.1} s (written at {} ms since the epoch), pid {} {}",
        age_ms as f64 / 1000.0,
        status.written_at,
        status.pid,
        if alive { "alive" } else { "not running" }
    );
    // Every field of the snapshot, by name, whatever this build knows of
    // it: a field added to the service shows here without a CLI change.
    match serde_json::to_value(&status.snapshot) {
        Ok(serde_json::Value::Object(fields)) => {
            for (name, value) in fields {
                match value {
                    serde_json::Value::Object(inner) => {
                        let parts: Vec<String> = inner
                            .iter()
                            .map(|(k, v)| format!("{k} {}", json_text(v)))
                            .collect();
                        println!("  {name}: {}", parts.join(", "));
                    }
                    serde_json::Value::Array(items) if name == "rejected_packs" => {
                        println!("  {name}: {}", items.len());
                        for item in &items {
                            println!(
                                "    {} {}",
                                json_text(&item["pack_id"]),
                                json_text(&item["reason"])
                            );
                        }
                    }
                    other => println!("  {name}: {}", json_text(&other)),
                }
            }
        }
        Ok(other) => println!("  snapshot: {other}"),
        Err(e) => println!("  snapshot: {e}"),
    }
}

/// `capcat status`.
pub(crate) async fn status(common: &Common) -> Result<(), CliError> {
    let (cfg, target, _) = config(common)?;
    print_status_file(&cfg.raw.spool_dir);
    let (ready, open) = spool_counts(&cfg.raw.spool_dir)?;
    println!(
        "spool {}: {ready} sealed pack(s) waiting, {open} unsealed (.open)",
        cfg.raw.spool_dir.display()
    );
    // An embedded catalog is open in one process at a time: while the
    // service runs, the catalog half of the status is its error.
    let catalog = match open_catalog(&cfg, &target, Access::ReadOnly).await {
        Ok(catalog) => catalog,
        Err(e @ CliError::Target(capcat_targets::TargetError::Missing { .. })) => {
            println!("{e}");
            return Ok(());
        }
        Err(e) => {
            println!(
                "catalog {}: {e} (an embedded catalog cannot be read while its service runs)",
                cfg.tables.prefix()
            );
            return Ok(());
        }
    };
    match catalog.pin().await.map_err(read_error(cfg.tables.prefix())) {
        Ok(w) => println!("catalog {}: published head {w}", cfg.tables.prefix()),
        // Nothing under this prefix: the demand half would only fail too.
        Err(e @ CliError::NoSchema { .. }) => {
            println!("{e}");
            return Ok(());
        }
        Err(e) => println!("catalog {}: {e}", cfg.tables.prefix()),
    }
    // Ages are measured by capcat-clickhouse, on the clock the service
    // stamps seal times with.
    match catalog.demand_report().await {
        Ok(report) => {
            let status = &report.status;
            println!(
                "demand: {} pending pack(s), {} pending byte(s), oldest pending {}{}",
                status.total.pending_packs,
                status.total.pending_bytes,
                age_text(status.total.oldest_pending_ms),
                if report.truncated {
                    " (events truncated)"
                } else {
                    ""
                }
            );
            for (shard, s) in &status.shards {
                println!(
                    "  shard {shard}: {} pending, {} bytes, oldest {}",
                    s.pending_packs,
                    s.pending_bytes,
                    age_text(s.oldest_pending_ms)
                );
            }
        }
        Err(e) => println!("demand: {e}"),
    }
    Ok(())
}

/// `capcat schema check`.
pub(crate) async fn schema_check(common: &Common) -> Result<(), CliError> {
    let (cfg, target, _) = config(common)?;
    let catalog = open_catalog(&cfg, &target, Access::Create).await?;
    let outcome = catalog
        .ensure_schema()
        .await
        .map_err(|e| CliError::Other(e.to_string()))?;
    println!("catalog {}: {outcome}", cfg.tables.prefix());
    Ok(())
}

/// `capcat schema drop`.
pub(crate) async fn schema_drop(common: &Common, yes: bool) -> Result<(), CliError> {
    if !yes {
        return Err(CliError::Other(
            "schema drop removes the catalog; pass --yes to confirm".to_owned(),
        ));
    }
    let (cfg, target, _) = config(common)?;
    let catalog = open_catalog(&cfg, &target, Access::ReadOnly).await?;
    let n = capcat_proto::schema::drop_schema(catalog.tables()).len();
    catalog
        .drop_schema()
        .await
        .map_err(|e| CliError::Other(e.to_string()))?;
    println!(
        "catalog {}: {n} object(s) dropped; the packs in the store remain",
        cfg.tables.prefix()
    );
    Ok(())
}

/// How long a command that runs the service waits for someone else's lease.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct LeaseWait {
    /// Seconds to wait when the publisher lease is held by another holder
    /// (a killed process's lease stays live until its TTL passes). A live
    /// service on the same spool is refused at once, without waiting (its
    /// spool owner lock is held), naming its pid; a live service on another
    /// spool keeps renewing its lease: the command then fails after this
    /// wait, naming the holder.
    #[arg(long, default_value_t = 60.0)]
    lease_wait: f64,
}

impl LeaseWait {
    fn duration(self) -> Result<Duration, CliError> {
        Duration::try_from_secs_f64(self.lease_wait).map_err(|e| {
            CliError::Other(format!(
                "--lease-wait {}: {e} (expected seconds >= 0)",
                self.lease_wait
            ))
        })
    }
}

/// Starts the service, waiting up to `wait` for another holder's lease to
/// run out (see [`capcat_service::start_waiting_for_lease`]), and saying
/// so once.
pub(crate) async fn start_waiting_for_lease(
    cfg: ValidConfig,
    ownership: Option<capcat_service::SpoolOwnership>,
    store: AnyStore,
    catalog: Catalog,
    wait: Duration,
) -> Result<Service<AnyStore>, CliError> {
    let announce = |refusal: &LeaseError| match refusal {
        LeaseError::Held { holder, .. } => println!(
            "the publisher lease is held by {holder} (a stopped or killed \
             process?); waiting up to {wait:.0?} for it to expire"
        ),
        _ => println!(
            "the publisher lease is contested (claims refused by another \
             lease's live row); waiting up to {wait:.0?} for it to expire"
        ),
    };
    Ok(
        capcat_service::start_waiting_for_lease(cfg, ownership, store, catalog, wait, announce)
            .await?,
    )
}

/// How long a command's final flush may go without progress.
#[derive(Clone, Copy, Debug, clap::Args)]
pub(crate) struct StallTimeout {
    /// Seconds the final flush may go without one more pack becoming
    /// queryable before the command gives up (default: the config's
    /// `close_flush_timeout_s`). A backlog of any size drains while it
    /// advances; a re-run continues where a stopped one left off.
    #[arg(long, value_name = "SECONDS")]
    stall_timeout: Option<f64>,
}

impl StallTimeout {
    /// The flag's value, or `default` when it is absent.
    fn duration_or(self, default: Duration) -> Result<Duration, CliError> {
        let Some(seconds) = self.stall_timeout else {
            return Ok(default);
        };
        match Duration::try_from_secs_f64(seconds) {
            Ok(d) if !d.is_zero() => Ok(d),
            _ => Err(CliError::Other(format!(
                "--stall-timeout {seconds}: expected a finite number of seconds > 0"
            ))),
        }
    }
}

async fn run_service(
    cfg: ValidConfig,
    catalog: Catalog,
    store: AnyStore,
    wait: Duration,
    stall: Duration,
    what: &'static str,
) -> Result<(), CliError> {
    let service = start_waiting_for_lease(cfg, None, store, catalog, wait).await?;
    finish_service(service, stall, what, Ok(())).await
}

/// Flushes while packs keep becoming queryable (up to `stall` without
/// one), showing the progress as `what`.
async fn flush_showing_progress(
    service: &Service<AnyStore>,
    stall: Duration,
    what: &'static str,
) -> Result<capcat_service::FlushReport, capcat_service::FlushError> {
    let mut view = crate::progress::FlushProgressView::new(what);
    let flushed = service
        .flush_while_progressing(stall, |p| view.observe(p))
        .await;
    view.finish();
    flushed
}

/// Flushes until every pack sealed before it is queryable, giving up only
/// after `stall` without progress (shown as `what`), closes, prints what
/// the service did, then returns the first failure: the work's, else the
/// flush's.
async fn finish_service(
    service: Service<AnyStore>,
    stall: Duration,
    what: &'static str,
    worked: Result<(), CliError>,
) -> Result<(), CliError> {
    let flushed = flush_showing_progress(&service, stall, what).await;
    let snapshot = service.snapshot();
    let close = service.close().await;
    println!(
        "uploaded {}, indexed {}, replays skipped {}, recovered by reconcile {}, skipped foreign objects {}, \
         HEAD errors {}, rejected {}, lease released {}",
        snapshot.uploaded,
        snapshot.indexed,
        snapshot.replays_skipped,
        snapshot.reconcile_recovered,
        snapshot.reconcile_skipped_objects,
        snapshot.reconcile_head_errors,
        snapshot.rejected_packs.len(),
        close.lease_released
    );
    for r in &snapshot.rejected_packs {
        println!("  set aside {}: {}", r.pack_id, r.reason);
    }
    worked?;
    flushed?;
    Ok(())
}

/// `capcat reconcile`.
pub(crate) async fn reconcile(
    common: &Common,
    wait: LeaseWait,
    stall: StallTimeout,
) -> Result<(), CliError> {
    let (mut cfg, target, store_target) = config(common)?;
    cfg.raw.reconcile_on_start = true;
    let stall = stall.duration_or(cfg.close_flush_timeout)?;
    refuse_owned_spool(&cfg)?;
    let catalog = open_catalog(&cfg, &target, Access::Create).await?;
    let store = store_target.open(Access::Create, &cfg)?;
    run_service(cfg, catalog, store, wait.duration()?, stall, "reconcile").await
}

/// `.ready` and `.open` pack files in a spool directory (absent: none).
fn spool_counts(dir: &Path) -> Result<(usize, usize), CliError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(CliError::at("list the spool", dir)(e)),
    };
    let (mut ready, mut open) = (0, 0);
    for entry in entries {
        let name = entry
            .map_err(CliError::at("list the spool", dir))?
            .file_name();
        let name = name.to_string_lossy();
        if name.ends_with(capcat_service::spool::READY_SUFFIX) {
            ready += 1;
        } else if name.ends_with(capcat_service::spool::OPEN_SUFFIX) {
            open += 1;
        }
    }
    Ok((ready, open))
}

/// `capcat drain`.
pub(crate) async fn drain(
    common: &Common,
    wait: LeaseWait,
    stall: StallTimeout,
) -> Result<(), CliError> {
    let (mut cfg, target, store_target) = config(common)?;
    cfg.raw.reconcile_on_start = true;
    let stall = stall.duration_or(cfg.close_flush_timeout)?;
    let spool_dir = cfg.raw.spool_dir.clone();
    refuse_owned_spool(&cfg)?;
    let (ready, open) = spool_counts(&spool_dir)?;
    println!(
        "spool {}: {ready} sealed pack(s) to upload and index, {open} unsealed .open file(s) to sweep",
        spool_dir.display()
    );
    if !cfg.raw.owns_spool && open > 0 {
        println!("  owns_spool = false: .open files are left for the spool's owner");
    }
    let catalog = open_catalog(&cfg, &target, Access::Create).await?;
    let store = store_target.open(Access::Create, &cfg)?;
    run_service(cfg, catalog, store, wait.duration()?, stall, "drain").await?;
    let (ready_after, open_after) = spool_counts(&spool_dir)?;
    println!(
        "drained: {ready_after} sealed and {open_after} unsealed pack file(s) left in the spool"
    );
    Ok(())
}

/// The `.safetensors` files of `dir`, in name order. Each must be a
/// regular file (a symlink to one is followed): reading a FIFO would block
/// until something writes to it, and a directory cannot be read at all.
fn ingest_files(dir: &Path) -> Result<Vec<std::path::PathBuf>, CliError> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(CliError::at("list the ingest directory", dir))?;
    for entry in entries {
        let path = entry
            .map_err(CliError::at("list the ingest directory", dir))?
            .path();
        if path.extension().is_some_and(|e| e == "safetensors") {
            files.push(path);
        }
    }
    files.sort();
    for file in &files {
        let meta = std::fs::metadata(file).map_err(CliError::at("read", file))?;
        if !meta.is_file() {
            return Err(CliError::NotRegularFile { path: file.clone() });
        }
    }
    Ok(files)
}

/// `capcat ingest`.
pub(crate) async fn ingest(
    common: &Common,
    dir: &Path,
    tenant: &str,
    experiment: &str,
    run: &str,
) -> Result<(), CliError> {
    check_name("--tenant", tenant)?;
    check_name("--experiment", experiment)?;
    check_name("--run", run)?;
    let (cfg, target, store_target) = config(common)?;
    // The input is read whole before the catalog is opened: a wrong
    // directory or a bad file fails without creating or touching anything.
    let files = ingest_files(dir)?;
    let mut records = Vec::new();
    let reading = crate::progress::bar(files.len() as u64, "reading");
    for (step, file) in files.iter().enumerate() {
        reading.inc(1);
        let bytes = std::fs::read(file).map_err(CliError::at("read", file))?;
        let tensors = crate::ingest::parse_safetensors(&bytes)
            .map_err(|e| CliError::Other(format!("{}: {e}", file.display())))?;
        for tensor in tensors {
            check_name(&format!("{}: tensor name", file.display()), &tensor.name)?;
            let captured_at_ns = capcat_clickhouse::unix_now_ns();
            let capture_id = ingest_capture_id(
                [tenant, experiment, run, &tensor.name],
                step as u64,
                tensor.dtype,
                &tensor.shape,
                &tensor.payload,
            );
            let metadata = RecordMetadata {
                identity: CaptureIdentity {
                    tenant_id: tenant.to_owned(),
                    experiment_id: experiment.to_owned(),
                    run_id: run.to_owned(),
                    captured_at_ns,
                    capture_id,
                },
                model: String::new(),
                module_path: tensor.name.clone(),
                hook: "ingest".to_owned(),
                step: step as u64,
                tensor_name: tensor.name,
                dtype: tensor.dtype,
                shape: tensor.shape,
                tags: std::collections::BTreeMap::from([(
                    "source".to_owned(),
                    file.display().to_string(),
                )]),
            };
            records.push((metadata, tensor.payload));
        }
    }
    reading.finish_and_clear();
    println!(
        "ingesting {} tensor(s) from {} file(s)",
        records.len(),
        files.len()
    );
    refuse_owned_spool(&cfg)?;
    let catalog = open_catalog(&cfg, &target, Access::Create).await?;
    let store = store_target.open(Access::Create, &cfg)?;
    let (left_over, _) = spool_counts(&cfg.raw.spool_dir)?;
    // Every flush of an ingest waits while it advances, up to this long
    // without progress.
    let stall = cfg.close_flush_timeout;
    let service =
        start_waiting_for_lease(cfg, None, store, catalog.clone(), Duration::ZERO).await?;
    let worked = ingest_new(&service, &catalog, tenant, records, left_over, stall).await;
    finish_service(service, stall, "ingest", worked).await
}

/// Appends the records the catalog does not hold yet, and seals them.
///
/// Capture ids derive from content ([`ingest_capture_id`]), so a record
/// the catalog already holds is this very tensor ingested before: it is
/// skipped, not written again. Packs an earlier ingest sealed but did not
/// publish (it failed, say, on an unreachable store) are finished first,
/// and what they held is then skipped the same way: a retry after a
/// failure leaves one copy.
async fn ingest_new(
    service: &Service<AnyStore>,
    catalog: &Catalog,
    tenant: &str,
    records: Vec<(RecordMetadata, bytes::Bytes)>,
    left_over: usize,
    stall: Duration,
) -> Result<(), CliError> {
    if left_over > 0 {
        println!("finishing {left_over} pack(s) left by an earlier ingest");
    }
    // Publishes the spool's leftovers (the service took them at start)
    // before the catalog is asked what it holds, for as long as they
    // advance.
    flush_showing_progress(service, stall, "leftovers").await?;
    let pinned = catalog.pin().await?;
    let ids: Vec<Uuid> = records.iter().map(|(m, _)| m.identity.capture_id).collect();
    let mut present = BTreeSet::new();
    // In slices, well below the catalog's read_request_limit.
    for chunk in ids.chunks(1000) {
        let lookup = catalog
            .get_by_ids(tenant, chunk.iter().copied().collect(), pinned)
            .await?;
        present.extend(lookup.records.into_keys());
    }
    if !present.is_empty() {
        println!(
            "{} of {} tensor(s) already in the catalog (same tenant, experiment, run, \
             name, step and bytes): skipped",
            present.len(),
            records.len()
        );
    }
    let sealing = crate::progress::bar(records.len() as u64, "sealing");
    for (metadata, payload) in records {
        sealing.inc(1);
        if present.contains(&metadata.identity.capture_id) {
            continue;
        }
        service
            .append(metadata, payload)
            .map_err(|e| CliError::Other(e.to_string()))?;
    }
    sealing.finish_and_clear();
    service.seal().map_err(|e| CliError::Other(e.to_string()))?;
    Ok(())
}

/// The capture id of an ingested tensor: a UUID (version 8, RFC 9562's
/// custom form) made of the first 16 bytes of a SHA-256 over everything
/// that makes it this capture: tenant, experiment, run, tensor name, step,
/// dtype, shape and the payload's own SHA-256. The same bytes ingested
/// again get the same id, which the catalog already holds; any other
/// change makes a new capture. Each field is length-prefixed, so no two
/// different field lists hash the same bytes.
pub(crate) fn ingest_capture_id(
    identity: [&str; 4],
    step: u64,
    dtype: Dtype,
    shape: &[u64],
    payload: &[u8],
) -> Uuid {
    use sha2::Digest as _;
    let mut hash = sha2::Sha256::new();
    hash.update(b"capcat ingest capture id v1");
    for field in identity.into_iter().chain([dtype.name()]) {
        hash.update((field.len() as u64).to_le_bytes());
        hash.update(field.as_bytes());
    }
    hash.update(step.to_le_bytes());
    hash.update((shape.len() as u64).to_le_bytes());
    for dim in shape {
        hash.update(dim.to_le_bytes());
    }
    hash.update(sha2::Sha256::digest(payload));
    let digest = hash.finalize();
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ingest_ids_are_the_same_for_the_same_content_and_differ_otherwise() {
        let id = |names: [&str; 4], step, payload: &[u8]| {
            ingest_capture_id(names, step, Dtype::F32, &[2], payload)
        };
        let base = id(["t", "e", "r", "x"], 0, b"12345678");
        assert_eq!(base, id(["t", "e", "r", "x"], 0, b"12345678"));
        assert_eq!(base.get_version_num(), 8);
        for other in [
            id(["u", "e", "r", "x"], 0, b"12345678"),
            id(["t", "e", "r", "y"], 0, b"12345678"),
            id(["t", "e", "r", "x"], 1, b"12345678"),
            id(["t", "e", "r", "x"], 0, b"12345679"),
            // Length prefixes: moving a byte between fields changes the id.
            id(["te", "", "r", "x"], 0, b"12345678"),
            ingest_capture_id(["t", "e", "r", "x"], 0, Dtype::I32, &[2], b"12345678"),
            ingest_capture_id(["t", "e", "r", "x"], 0, Dtype::F32, &[1, 2], b"12345678"),
        ] {
            assert_ne!(base, other);
        }
    }
}
