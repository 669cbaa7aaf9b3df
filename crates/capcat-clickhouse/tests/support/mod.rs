//! Shared harness of the live suite: which engine a test runs on, a catalog
//! on a prefix of its own, raw SQL for the test's own observations, and
//! descriptor fixtures.
//!
//! Target, by environment:
//! - `CAPCAT_CLICKHOUSE_URL` set: that clickhouse-server, over HTTP.
//! - `CAPCAT_CATALOG_TRANSPORT=http`: the `clickhouse` crate against
//!   capcat-chdb's HTTP front over an embedded engine in this process.
//! - `CAPCAT_CATALOG_TRANSPORT=https`: the same front behind TLS, with a
//!   certificate made for the test by a CA made for it, and a password:
//!   the client trusts the CA through `ca_file` and logs in.
//! - otherwise: the embedded engine directly.
//!
//! The embedded engine needs `CAPCAT_LIBCHDB`; without it a test prints that
//! it skipped and returns, unless `CAPCAT_REQUIRE_ENGINES=1`, which fails it.
//! libchdb serves one data path per process and nextest runs each test in a
//! process of its own, so the engine is opened once per process on a data
//! path named by the process id; tests sharing a process (`cargo test`) share
//! the engine and are kept apart by their prefixes.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use capcat_chdb::{Engine, FrontCredentials, FrontOptions, HttpFront, TestPki};
use capcat_clickhouse::{Catalog, Embedded, Http, HttpOptions, Password, Transport};
use capcat_proto::descriptor::{Locator, SummaryColumns};
use capcat_proto::{
    CaptureDescriptor, Column, ColumnType, Config, Expect, Statement, Tables, Value,
};
use uuid::Uuid;

/// Where the suite runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// libchdb in this process.
    Embedded,
    /// The `clickhouse` crate against capcat-chdb's HTTP front in this process.
    HttpFront,
    /// The same, over TLS with a password.
    HttpsFront,
    /// A clickhouse-server at this URL.
    Server(String),
}

pub fn target() -> Target {
    if let Ok(url) = std::env::var("CAPCAT_CLICKHOUSE_URL")
        && !url.is_empty()
    {
        return Target::Server(url);
    }
    match std::env::var("CAPCAT_CATALOG_TRANSPORT").as_deref() {
        Ok("http") => Target::HttpFront,
        Ok("https") => Target::HttpsFront,
        Ok("embedded") | Err(_) => Target::Embedded,
        Ok(other) => {
            panic!("CAPCAT_CATALOG_TRANSPORT={other:?}: expected http, https or embedded")
        }
    }
}

pub fn engine_or_skip(test: &str) -> Option<Engine> {
    if std::env::var_os("CAPCAT_LIBCHDB").is_none() {
        assert!(
            std::env::var("CAPCAT_REQUIRE_ENGINES").as_deref() != Ok("1"),
            "{test}: CAPCAT_LIBCHDB is not set and CAPCAT_REQUIRE_ENGINES=1"
        );
        println!("{test}: skipped (CAPCAT_LIBCHDB is not set)");
        return None;
    }
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    Some(
        ENGINE
            .get_or_init(|| {
                let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                    .join("capcat-clickhouse-live")
                    .join(std::process::id().to_string());
                // A pid reused from an earlier run: start clean.
                let _ = std::fs::remove_dir_all(&dir);
                Engine::open(&dir).expect("open the embedded engine")
            })
            .clone(),
    )
}

/// One test's catalog and the engine behind it.
#[derive(Debug)]
pub struct Live {
    pub catalog: Catalog,
    pub target: Target,
    engine: Option<Engine>,
    url: Option<String>,
    http_options: HttpOptions,
    _front: Option<Arc<HttpFront>>,
    _ca_dir: Option<Arc<tempfile::TempDir>>,
}

/// The user and password of the TLS front.
pub const TLS_USER: &str = "capcat_writer";
pub const TLS_PASSWORD: &str = "a-test-password-9f3c";

/// A TLS front with a password over `engine`, and the client options that
/// reach it: the CA in a file of its own (kept alive by the returned
/// directory), the user and the password.
pub async fn tls_front(engine: Engine) -> (String, HttpFront, HttpOptions, tempfile::TempDir) {
    let pki = TestPki::new();
    let (addr, front) = HttpFront::start_with(
        engine,
        FrontOptions {
            credentials: Some(FrontCredentials {
                user: TLS_USER.to_owned(),
                password: TLS_PASSWORD.to_owned(),
            }),
            tls: Some(pki.server(&["localhost", "127.0.0.1"])),
            ..FrontOptions::default()
        },
    )
    .await
    .expect("start the TLS front");
    let dir = tempfile::tempdir().expect("a directory for the CA file");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, pki.ca_pem()).expect("write the CA file");
    let options = HttpOptions {
        user: Some(TLS_USER.to_owned()),
        password: Some(Password::new(TLS_PASSWORD)),
        ca_file: Some(ca_file),
        ..HttpOptions::default()
    };
    (
        format!("https://localhost:{}", addr.port()),
        front,
        options,
        dir,
    )
}

/// A prefix of its own for `test`: the test's name (shortened) and random hex.
fn prefix_for(test: &str) -> String {
    let short: String = test.chars().take(24).collect();
    format!("t_{short}_{}", &Uuid::new_v4().simple().to_string()[..10])
}

/// A fast protocol configuration for tests that wait for a lease to expire:
/// TTL 2 s, publish timeout 1 s.
pub fn short_lease_config() -> Config {
    Config::new(2_000_000_000, 1_000_000_000).expect("1 s is whole and below 2 s")
}

impl Live {
    /// The catalog for `test`, or `None` when the engine is not available.
    pub async fn start(test: &str) -> Option<Self> {
        Self::start_with(test, Config::default()).await
    }

    pub async fn start_with(test: &str, config: Config) -> Option<Self> {
        let target = target();
        let prefix = prefix_for(test);
        let tables = Tables::new(&prefix).expect("a valid test prefix");
        let mut http_options = HttpOptions::default();
        let mut ca_dir = None;
        let (engine, url, front, transport): (_, _, _, Arc<dyn Transport>) = match &target {
            Target::Embedded => {
                let engine = engine_or_skip(test)?;
                let transport = Arc::new(Embedded::new(engine.clone()));
                (Some(engine), None, None, transport)
            }
            Target::HttpFront => {
                let engine = engine_or_skip(test)?;
                let (addr, front) = HttpFront::start(engine.clone())
                    .await
                    .expect("start the HTTP front");
                let url = format!("http://{addr}");
                let transport =
                    Arc::new(Http::new(&url, http_options.clone()).expect("a valid URL"));
                (Some(engine), Some(url), Some(Arc::new(front)), transport)
            }
            Target::HttpsFront => {
                let engine = engine_or_skip(test)?;
                let (url, front, options, dir) = tls_front(engine.clone()).await;
                http_options = options;
                ca_dir = Some(Arc::new(dir));
                let transport =
                    Arc::new(Http::new(&url, http_options.clone()).expect("a valid URL"));
                (Some(engine), Some(url), Some(Arc::new(front)), transport)
            }
            Target::Server(url) => {
                let transport =
                    Arc::new(Http::new(url, http_options.clone()).expect("a valid URL"));
                (None, Some(url.clone()), None, transport)
            }
        };
        println!("{test}: target {target:?}, prefix {prefix}");
        Some(Self {
            catalog: Catalog::new(transport, tables, config),
            target,
            engine,
            url,
            http_options,
            _front: front,
            _ca_dir: ca_dir,
        })
    }

    /// The in-process engine, when the target has one.
    pub fn engine(&self) -> Option<&Engine> {
        self.engine.as_ref()
    }

    pub fn tables(&self) -> &Tables {
        self.catalog.tables()
    }

    /// A second catalog on the same prefix over a transport of its own
    /// (its own HTTP client, or its own engine connections): a second
    /// publisher process, as far as the server can tell.
    pub fn second_catalog(&self, config: Config) -> Catalog {
        let transport: Arc<dyn Transport> = match (&self.engine, &self.url) {
            (_, Some(url)) => {
                Arc::new(Http::new(url, self.http_options.clone()).expect("a valid URL"))
            }
            (Some(engine), None) => Arc::new(Embedded::new(engine.clone())),
            (None, None) => unreachable!("a live catalog has an engine or a URL"),
        };
        Catalog::new(transport, self.tables().clone(), config)
    }

    /// Runs the test's own SQL (observations and operator actions the
    /// protocol never takes), expecting no rows.
    pub async fn exec(&self, sql: &str) {
        self.catalog
            .transport()
            .execute(&raw(sql, Expect::Nothing))
            .await
            .unwrap_or_else(|f| panic!("{sql}: {f}"));
    }

    /// Runs the test's own query and returns its rows.
    pub async fn rows(&self, sql: &str, columns: &[(&'static str, ColumnType)]) -> Vec<Vec<Value>> {
        let expect = Expect::Rows(
            columns
                .iter()
                .map(|(name, ty)| Column { name, ty: *ty })
                .collect(),
        );
        self.catalog
            .transport()
            .execute(&raw(sql, expect))
            .await
            .unwrap_or_else(|f| panic!("{sql}: {f}"))
            .0
    }

    /// One unsigned number from `sql` (aliased `n`).
    pub async fn count(&self, sql: &str) -> u64 {
        match self
            .rows(sql, &[("n", ColumnType::UInt64)])
            .await
            .as_slice()
        {
            [row] => match row.as_slice() {
                [Value::UInt64(n)] => *n,
                other => panic!("{sql}: {other:?}"),
            },
            other => panic!("{sql}: {other:?}"),
        }
    }

    /// How many rows `table` holds.
    pub async fn rows_in(&self, table: &str) -> u64 {
        self.count(&format!("SELECT count() AS n FROM {table}"))
            .await
    }

    /// Every row of the watermark and the manifest tables, in a total order, with
    /// every column: what "byte for byte unchanged" is compared on.
    pub async fn publication_tables(&self) -> (Vec<Vec<Value>>, Vec<Vec<Value>>) {
        let t = self.tables();
        let watermark = self
            .rows(
                &format!(
                    "SELECT index_version, publish_id, published_at_ns FROM {} \
                     ORDER BY index_version, publish_id, published_at_ns",
                    t.index_watermark()
                ),
                &[
                    ("index_version", ColumnType::UInt64),
                    ("publish_id", ColumnType::Uuid),
                    ("published_at_ns", ColumnType::UInt64),
                ],
            )
            .await;
        let manifest = self
            .rows(
                &format!(
                    "SELECT index_version, publish_id, store_id, pack_id FROM {} \
                     ORDER BY index_version, publish_id, store_id, pack_id",
                    t.snapshot_manifest()
                ),
                &[
                    ("index_version", ColumnType::UInt64),
                    ("publish_id", ColumnType::Uuid),
                    ("store_id", ColumnType::String),
                    ("pack_id", ColumnType::Uuid),
                ],
            )
            .await;
        (watermark, manifest)
    }

    /// Drops the test's catalog (every live test ends with this, so a real
    /// server is left clean).
    pub async fn finish(self) {
        self.catalog.drop_schema().await.expect("drop_schema");
    }
}

pub fn raw(sql: &str, expect: Expect) -> Statement {
    Statement {
        name: "test.sql",
        sql: sql.to_owned(),
        params: BTreeMap::new(),
        settings: capcat_proto::Settings::default(),
        expect,
        data: None,
    }
}

/// A descriptor of capture `capture` (tenant `tenant`) in pack
/// `(store, pack)`, its locator fields derived from the pack so two packs'
/// rows for one capture differ in every locator field.
pub fn descriptor(
    tenant: &str,
    n: u64,
    capture: Uuid,
    store: &str,
    pack: Uuid,
) -> CaptureDescriptor {
    let salt = pack.as_u128() as u64 ^ store.len() as u64;
    CaptureDescriptor {
        tenant_id: tenant.to_owned(),
        experiment_id: format!("exp{}", n % 3),
        run_id: format!("run{}", n % 2),
        captured_at_ns: 1_000_000 + n,
        capture_id: capture,
        locator: Locator {
            store_id: store.to_owned(),
            pack_id: pack,
            payload_offset: (salt % 10_000) + n * 64,
            payload_length: 64 + (salt % 7),
            payload_sha256: format!("{:064x}", u128::from(n) ^ pack.as_u128()),
        },
        index_version: 0,
        step: n,
        tensor_name: format!("encoder.layers.{}.weight", n % 4),
        dtype: if n.is_multiple_of(2) { "f32" } else { "bf16" }.to_owned(),
        shape: vec![2, n % 5 + 1],
        summary: SummaryColumns {
            summary_version: 2,
            element_count: 2 * (n % 5 + 1),
            minimum: (-(n as f64)).into(),
            maximum: (n as f64 * 1.5).into(),
            mean: 0.25.into(),
            l2_norm: 3.0.into(),
            abs_max: (n as f64 * 1.5).into(),
            zero_fraction: 0.0.into(),
        },
    }
}

/// `count` fresh capture ids.
pub fn capture_ids(count: usize) -> Vec<Uuid> {
    (0..count).map(|_| Uuid::new_v4()).collect()
}

/// A pack holding `ids` (numbered from `first`).
pub fn pack_of(
    tenant: &str,
    ids: &[Uuid],
    first: u64,
    store: &str,
    pack: Uuid,
) -> Vec<CaptureDescriptor> {
    ids.iter()
        .enumerate()
        .map(|(i, id)| descriptor(tenant, first + i as u64, *id, store, pack))
        .collect()
}
