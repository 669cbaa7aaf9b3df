//! The `capcat` command-line tool.

#![forbid(unsafe_code)]

mod capture;
mod commands;
mod conform;
mod demo;
mod ingest;
mod pack_verify;
mod progress;
mod settings;
mod sql_walk;
mod verify;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Capcat: tensor captures sealed into packs, stored in an object store and
/// indexed in a ClickHouse catalog.
///
/// Start with `capcat demo`: it runs the whole system on embedded defaults
/// (a local directory store and the embedded ClickHouse engine) and checks
/// every record end to end.
///
/// Every setting follows one rule: the flag, else its environment variable
/// (CAPCAT_CONFIG, CAPCAT_CATALOG, CAPCAT_STORE, CAPCAT_PREFIX,
/// CAPCAT_SPOOL), else the --config file, else the default. `capcat
/// settings` prints each effective value and where it came from.
#[derive(Debug, Parser)]
#[command(name = "capcat", version, about, long_about)]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: Command,
}

/// Where the catalog and the store are.
///
/// Every setting follows one rule: the flag, else its environment variable,
/// else the configuration file, else the default. `capcat settings` prints
/// each effective value and where it came from.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Common {
    /// A service configuration file (TOML; see docs/operations.md); env
    /// CAPCAT_CONFIG. Every key it sets is used unless a flag or an
    /// environment variable sets the same value (catalog_url: --catalog;
    /// store_id, s3_endpoint, allow_insecure_http: --store; catalog_prefix:
    /// --prefix; spool_dir: --spool). An S3 store in the file is
    /// s3_endpoint with `store_id = "s3:<bucket>"`.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// The catalog: `embedded:<path>` (libchdb in this process, data at
    /// `<path>`) or `http(s)://host:port` (a ClickHouse server; plain http://
    /// only on loopback unless allow_insecure_http); env CAPCAT_CATALOG,
    /// else the file's catalog_url, else `embedded:capcat-data/catalog`.
    /// Credentials have no flag (a flag shows in `ps`): env
    /// CAPCAT_CATALOG_USER and CAPCAT_CATALOG_PASSWORD or
    /// CAPCAT_CATALOG_PASSWORD_FILE, else the file's catalog_user and
    /// catalog_password_file (or catalog_password); a private CA:
    /// catalog_ca_file.
    #[arg(long, global = true)]
    catalog: Option<String>,
    /// The pack store: `local:<dir>` or
    /// `s3://bucket?endpoint=http(s)://host:port[&region=...]` (credentials
    /// from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; an http:// endpoint
    /// here allows plain HTTP); env CAPCAT_STORE, else the file's
    /// s3_endpoint and store_id, else `local:capcat-data/store`.
    #[arg(long, global = true)]
    store: Option<String>,
    /// The catalog prefix: table prefix and store directory `v1/<prefix>/`;
    /// env CAPCAT_PREFIX, else the file's catalog_prefix, else `capcat`.
    #[arg(long, global = true)]
    prefix: Option<String>,
    /// The spool directory the service drains; env CAPCAT_SPOOL, else the
    /// file's spool_dir, else `capcat-data/spool`.
    #[arg(long, global = true)]
    spool: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the whole system on embedded defaults: capture a Qwen2.5-0.5B-
    /// shaped workload, flush, search, hydrate and verify every record.
    ///
    /// The demo's defaults are its directory: `--catalog embedded:D/catalog
    /// --store local:D/store --spool D/spool --prefix capcat_demo`, and
    /// short timings (lease_ttl_s 6, publish_timeout_s 2, poll_interval_s
    /// 0.01). The shared flags, their environment variables and a --config
    /// file override them by the same rule as every command.
    Demo {
        /// Directory for the catalog, the store and the spool (a temporary
        /// directory when omitted). Run twice on one directory: the catalog
        /// is reused and replayed packs are skipped.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Records to capture.
        #[arg(long, default_value_t = 12_288)]
        records: u64,
        /// Packs to seal them into.
        #[arg(long, default_value_t = 3)]
        packs: u64,
        /// The run id the records carry. Ids and payloads derive from it:
        /// the same run on the same directory replays (and is skipped), a
        /// new run adds new captures.
        #[arg(long, default_value = "run-0001")]
        run: String,
        /// Seal nothing and start no service: check that every record of
        /// --run the catalog of --dir holds appears once and is
        /// byte-identical to what the demo captures, and print each pack
        /// found with its record count. Use it after `capcat drain` on a
        /// directory whose demo was interrupted.
        #[arg(long)]
        verify_only: bool,
    },
    /// Print every statement each protocol machine runs, in order, for the
    /// --prefix: schema creation, lease acquire/renew/release, an index pass
    /// (descriptors, version allocation, fenced publish, inventory), a
    /// search, a lookup, demand, schema drop. The real machines are driven
    /// over a canned empty catalog with one uncontested publisher; each read
    /// shows the answer it was given, since what follows depends on it.
    /// Needs no engine.
    Sql,
    /// Seal `.safetensors` files of a directory into packs and index them.
    Ingest {
        /// The directory holding `.safetensors` files.
        dir: PathBuf,
        /// The tenant the captures belong to.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// The experiment.
        #[arg(long, default_value = "ingest")]
        experiment: String,
        /// The run.
        #[arg(long, default_value = "ingest")]
        run: String,
    },
    /// Search captures (one page; pass --cursor for the next).
    Search(commands::SearchArgs),
    /// Look captures up by id.
    Get {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// Capture ids.
        #[arg(required = true)]
        ids: Vec<uuid::Uuid>,
    },
    /// Hydrate one capture, verified against its SHA-256, to a file: `.npy`
    /// (NumPy; bf16 widened to f32), `.safetensors` (one tensor, dtype and
    /// shape as captured), anything else the raw little-endian bytes.
    Hydrate {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// The capture id.
        id: uuid::Uuid,
        /// The output file: `.npy`, `.safetensors` or raw bytes.
        #[arg(long)]
        out: PathBuf,
    },
    /// A service's status and the catalog's demand: the status file the
    /// spool's owning service writes into its spool at start, then every
    /// status_interval_s (default 1 s) from a task of its own, and on close
    /// (age, pid and whether it runs, every snapshot counter), the spool, the catalog's published
    /// head and the demand fold per shard. Point --spool (and --catalog,
    /// --prefix) at the service's.
    Status,
    /// Print every effective setting and where it came from (flag,
    /// environment, config file or default). Opens nothing.
    Settings,
    /// Check the store against the catalog: every pack the catalog admits
    /// must be in the store and carry its pack metadata; with --read-data
    /// its bytes are read and verified (pack digest, every record's
    /// digest). Lists missing, corrupt and orphaned (stored, admitted by
    /// no published version) packs; exits non-zero when a pack is missing
    /// or corrupt, or when there was nothing to check. Writes nothing.
    Verify {
        /// Read every admitted pack whole and verify its bytes.
        #[arg(long)]
        read_data: bool,
    },
    /// Check a native implementation of the protocol against capcat-proto,
    /// step by step: runs the conformance kit (`capcat-conform`, built
    /// beside `capcat` or on PATH) with these arguments, e.g. `capcat
    /// conform --driver 'python3 driver.py'`; `capcat conform --help` prints
    /// the kit's own help. See docs/native-writers.md.
    #[command(disable_help_flag = true)]
    Conform {
        /// The kit's arguments, passed on unchanged.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Check pack files on their own, without a catalog or a store.
    Pack {
        #[command(subcommand)]
        action: PackAction,
    },
    /// Check or drop the catalog schema.
    Schema {
        #[command(subcommand)]
        action: SchemaAction,
    },
    /// Index packs in the store that the catalog does not hold (and drain
    /// the spool), then exit.
    Reconcile {
        #[command(flatten)]
        wait: commands::LeaseWait,
        #[command(flatten)]
        stall: commands::StallTimeout,
    },
    /// Finish what a stopped or killed process left, then exit: seal
    /// nothing; sweep the spool's unsealed `.open` files (packs a crashed
    /// writer never finished), upload and index every sealed `.ready` pack,
    /// index packs in the store the catalog lacks (uploaded before a
    /// crash), flush (for as long as packs keep becoming queryable, see
    /// --stall-timeout) and release the lease. When a dead process's lease is
    /// still live, waits for it to expire (up to --lease-wait). Against a
    /// running service on the same spool it fails at once, sweeping
    /// nothing, naming that process's pid (the spool's owner lock is held).
    /// For a
    /// `capcat demo --dir D` directory pass
    /// `--catalog embedded:D/catalog --store local:D/store --spool D/spool --prefix capcat_demo`.
    Drain {
        #[command(flatten)]
        wait: commands::LeaseWait,
        #[command(flatten)]
        stall: commands::StallTimeout,
    },
}

#[derive(Debug, Subcommand)]
enum PackAction {
    /// Check pack files written by any implementation (a native C++ or
    /// Python writer included), without a catalog or a store: the
    /// safetensors framing and header, the format version, the tensor
    /// entries and their tiling, the pack digest, the descriptor, every
    /// record against its entry, every payload's SHA-256 and every BOOL
    /// byte (docs/pack-format.md, "Checking a pack written natively").
    ///
    /// Prints one line per file: `ok` with its format version, record
    /// count, payload bytes and pack id, or `FAIL` with the first
    /// difference: the check, the record and the expected and actual
    /// values. Exits non-zero when any file fails. Writes nothing.
    Verify {
        /// Also compare the pack with this manifest (the format of the
        /// golden vectors' manifest.json, docs/pack-format.md section 7):
        /// pack id, byte length, pack digest, CRC-64/NVME, and every
        /// record's key, capture id, tensor name, dtype, shape, offset,
        /// length, digest and summary, recomputed from the payload. A pack
        /// carries neither summaries nor a CRC, so only a manifest can
        /// check them. Takes exactly one FILE.
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// The pack files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum SchemaAction {
    /// Create the catalog when absent, or check it is one this build can use.
    Check,
    /// Drop every object of the catalog (the packs in the store stay).
    Drop {
        /// Required: dropping is not undoable.
        #[arg(long)]
        yes: bool,
    },
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CliError {
    /// A flag's value is refused.
    #[error(transparent)]
    Target(#[from] capcat_targets::TargetError),
    /// The configuration is refused.
    #[error("configuration: {0}")]
    Config(#[from] capcat_service::ConfigError),
    /// The service did not start.
    #[error("service: {0}")]
    Start(#[from] capcat_service::StartError),
    /// A flush did not drain.
    #[error("flush: {0}")]
    Flush(#[from] capcat_service::FlushError),
    /// A catalog read failed.
    #[error("catalog read: {0}")]
    Reader(#[from] capcat_proto::reader::ReaderError),
    /// A catalog operation failed.
    #[error("catalog: {0}")]
    Catalog(#[from] capcat_clickhouse::CatalogError),
    /// A pack could not be written or read.
    #[error("pack: {0}")]
    Pack(#[from] capcat_pack::PackError),
    /// The spool failed.
    #[error("spool: {0}")]
    Spool(#[from] capcat_service::SpoolError),
    /// A capture's payload could not be read back or did not verify.
    #[error("hydrate: {0}")]
    Hydrate(Box<capcat_service::HydrateError>),
    /// A file operation on a named path failed.
    #[error("{what} {}: {source}", path.display())]
    Path {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// A name given on the command line or read from a file is refused.
    #[error("{what} {value:?}: {reason}")]
    BadName {
        /// Which name (`--tenant`, a tensor name of a file, ...).
        what: String,
        /// The name.
        value: String,
        /// Why.
        reason: &'static str,
    },
    /// A flag's value is refused.
    #[error("{flag} {value}: {reason}")]
    BadFlag {
        /// The flag.
        flag: &'static str,
        /// The value given.
        value: String,
        /// Why, and what is accepted.
        reason: String,
    },
    /// Some of the captures asked for are not in the catalog.
    #[error("{missing} of {asked} capture(s) not found")]
    NotFound {
        /// How many are missing.
        missing: usize,
        /// How many were asked for.
        asked: usize,
    },
    /// A path that must be a regular file is not one (a directory, a FIFO,
    /// a device): reading a FIFO would block until something writes to it.
    #[error("{}: not a regular file", path.display())]
    NotRegularFile {
        /// The path.
        path: PathBuf,
    },
    /// The catalog has no tables under the prefix: a mistyped `--prefix`,
    /// or a catalog never created.
    #[error(
        "catalog has no Capcat tables under prefix {prefix:?} (check --prefix; \
         `capcat schema check` creates them)"
    )]
    NoSchema {
        /// The prefix.
        prefix: String,
    },
    /// A verification of the demo failed.
    #[error("verification failed: {0}")]
    Verify(String),
    /// `capcat verify` found admitted packs missing from the store or not
    /// what the catalog admitted.
    #[error("the store check found {missing} missing and {corrupt} corrupt pack(s)")]
    StoreDamaged {
        /// Admitted packs whose object is not in the store.
        missing: usize,
        /// Admitted packs whose object is unreadable or not that pack.
        corrupt: usize,
    },
    /// `capcat verify` had nothing to check: the catalog admits no pack of
    /// this store.
    #[error(
        "nothing to verify: the catalog admits no pack of store {store_id:?} at version {pinned} (check --prefix and store_id)"
    )]
    NothingVerified {
        /// The version pinned.
        pinned: u64,
        /// The store checked.
        store_id: String,
    },
    /// The conformance kit's binary could not be run.
    #[error(
        "cannot run the conformance kit `{program}` ({source}); build it with \
         `cargo build -p capcat-conform` (it goes beside capcat) or put it on PATH"
    )]
    ConformMissing {
        /// The program tried.
        program: String,
        /// Why it could not start.
        source: std::io::Error,
    },
    /// The conformance kit ran and did not pass (its report is above).
    #[error("the conformance kit did not pass ({status})")]
    ConformFailed {
        /// Its exit status.
        status: String,
    },
    /// `capcat pack verify` found pack files that fail a check (each is
    /// reported on its own line).
    #[error("{failed} of {checked} pack file(s) failed verification")]
    PacksInvalid {
        /// Files that failed.
        failed: usize,
        /// Files checked.
        checked: usize,
    },
    /// An object store operation failed.
    #[error("object store: {0}")]
    Store(#[from] capcat_s3::StoreError),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl CliError {
    fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        move |source| Self::Io { what, source }
    }

    /// An IO error naming the path it happened on.
    fn at(what: &'static str, path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_owned();
        move |source| Self::Path { what, path, source }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: in a pipe or a log file the
        // escape codes are noise.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("capcat: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("capcat: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let common = cli.common;
    match cli.command {
        Command::Demo {
            dir,
            records,
            packs,
            run,
            verify_only,
        } => {
            demo::run(
                &common,
                demo::DemoOptions {
                    dir,
                    records,
                    packs,
                    run,
                    verify_only,
                },
            )
            .await
        }
        Command::Sql => commands::sql(&common),
        Command::Ingest {
            dir,
            tenant,
            experiment,
            run,
        } => commands::ingest(&common, &dir, &tenant, &experiment, &run).await,
        Command::Search(args) => commands::search(&common, args).await,
        Command::Get { tenant, ids } => commands::get(&common, &tenant, ids).await,
        Command::Hydrate { tenant, id, out } => commands::hydrate(&common, &tenant, id, &out).await,
        Command::Status => commands::status(&common).await,
        Command::Settings => commands::settings(&common),
        Command::Schema {
            action: SchemaAction::Check,
        } => commands::schema_check(&common).await,
        Command::Schema {
            action: SchemaAction::Drop { yes },
        } => commands::schema_drop(&common, yes).await,
        Command::Reconcile { wait, stall } => commands::reconcile(&common, wait, stall).await,
        Command::Drain { wait, stall } => commands::drain(&common, wait, stall).await,
        Command::Verify { read_data } => verify::verify(&common, read_data).await,
        Command::Conform { args } => conform::run(&args),
        Command::Pack {
            action: PackAction::Verify { manifest, files },
        } => pack_verify::verify(&files, manifest.as_deref()),
    }
}
