//! Shared pieces of the live tests: the embedded engine behind its HTTP
//! front, a TCP proxy the test switches, a scenario (engine, temp dir,
//! configuration, catalog, store) and its service, packs, and read-back.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use capcat_chdb::Engine;
use capcat_chdb::HttpFront;
use capcat_clickhouse::{Catalog, Http, HttpOptions, Transport};
use capcat_pack::{CaptureIdentity, Dtype, PackLimits, PackWriter, RecordMetadata, SealedPack};
use capcat_proto::CaptureDescriptor;
use capcat_proto::reader::{PageSize, SearchFilter, SearchQuery};
use capcat_s3::{LocalStore, PackKey, PackStore};
use capcat_service::{Service, ServiceConfig, Spool, ValidConfig};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use uuid::Uuid;

/// The engine of this test process (libchdb serves one data path per
/// process; every test uses its own table prefix inside it).
pub fn engine(test: &str) -> Option<Engine> {
    static ENGINE: OnceLock<(Engine, tempfile::TempDir)> = OnceLock::new();
    if std::env::var_os("CAPCAT_LIBCHDB").is_none() {
        if std::env::var("CAPCAT_REQUIRE_ENGINES").as_deref() == Ok("1") {
            panic!("{test}: CAPCAT_LIBCHDB is not set and CAPCAT_REQUIRE_ENGINES=1");
        }
        println!("{test}: skipped: CAPCAT_LIBCHDB is not set (run `cargo xtask fetch-engine`)");
        return None;
    }
    let (engine, _) = ENGINE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("engine dir");
        let engine = Engine::open(dir.path().join("chdb")).expect("open the embedded engine");
        (engine, dir)
    });
    Some(engine.clone())
}

/// What the proxy does with connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward both ways.
    Forward,
    /// Close every connection at once (connection reset / refused).
    Cut,
    /// Accept and hold every connection, answering nothing.
    Stall,
}

/// A TCP proxy in front of a server: a real connection switch.
pub struct Proxy {
    pub addr: SocketAddr,
    mode: watch::Sender<Mode>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let (mode, _) = watch::channel(Mode::Forward);
        let modes = mode.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                let mut rx = modes.subscribe();
                let now = *rx.borrow_and_update();
                tokio::spawn(async move {
                    match now {
                        Mode::Cut => {
                            let _ = client.shutdown().await;
                        }
                        Mode::Stall => {
                            // Held until the mode changes, answering nothing.
                            let _ = rx.changed().await;
                        }
                        Mode::Forward => {
                            let Ok(mut server) = TcpStream::connect(upstream).await else {
                                return;
                            };
                            tokio::select! {
                                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                                // A switch away from forwarding cuts live connections too.
                                _ = async { while rx.changed().await.is_ok() { if *rx.borrow() != Mode::Forward { break } } } => {}
                            }
                        }
                    }
                });
            }
        });
        Self { addr, mode }
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// A handle that switches this proxy from elsewhere (a transport
    /// wrapper that must cut the catalog at an exact step).
    pub fn switch(&self) -> watch::Sender<Mode> {
        self.mode.clone()
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// The catalog of one test: the engine's HTTP front behind a proxy.
pub struct TestCatalog {
    pub proxy: Proxy,
    pub _front: HttpFront,
    /// Through the proxy: what the service uses.
    pub client: Catalog,
    /// Straight to the front: what a rival or the test's checks use.
    pub direct: Catalog,
}

pub async fn catalog(engine: &Engine, cfg: &ValidConfig) -> TestCatalog {
    catalog_wrapped(engine, cfg, |through_proxy, _| through_proxy).await
}

/// Like [`catalog`], with the service's transport (through the proxy)
/// wrapped by `wrap`, which is also handed the proxy.
pub async fn catalog_wrapped(
    engine: &Engine,
    cfg: &ValidConfig,
    wrap: impl FnOnce(Arc<dyn Transport>, &Proxy) -> Arc<dyn Transport>,
) -> TestCatalog {
    let (front_addr, front) = HttpFront::start(engine.clone())
        .await
        .expect("start the HTTP front");
    let proxy = Proxy::start(front_addr).await;
    let options = HttpOptions {
        connect_timeout: cfg.catalog_connect_timeout,
        request_timeout: cfg.catalog_request_timeout,
        ..HttpOptions::default()
    };
    let http: Arc<dyn Transport> =
        Arc::new(Http::new(&proxy.url(), options.clone()).expect("http transport"));
    let direct: Arc<dyn Transport> =
        Arc::new(Http::new(&format!("http://{front_addr}"), options).expect("http transport"));
    TestCatalog {
        client: Catalog::new(wrap(http, &proxy), cfg.tables.clone(), cfg.protocol.clone()),
        direct: Catalog::new(direct, cfg.tables.clone(), cfg.protocol.clone()),
        proxy,
        _front: front,
    }
}

/// One test's world: its temp dir, configuration, catalog and store.
pub struct Scenario<S> {
    pub root: tempfile::TempDir,
    pub cfg: ValidConfig,
    pub catalog: TestCatalog,
    pub store: S,
}

impl<S: PackStore + Clone + std::fmt::Debug + 'static> Scenario<S> {
    /// Starts the service of this scenario on its catalog (through the proxy).
    pub async fn start(&self) -> Service<S> {
        Service::start(
            self.cfg.clone(),
            self.store.clone(),
            self.catalog.client.clone(),
        )
        .await
        .expect("start the service")
    }

    /// The spool, for staging packs before the service starts.
    pub fn spool(&self) -> Spool {
        Spool::open(&self.cfg.raw.spool_dir).expect("open the spool")
    }

    /// Asserts what a set-aside pack is: none of its records (of `run`)
    /// queryable, its object still in the store.
    pub async fn assert_set_aside(&self, run: &str, pack_id: Uuid) {
        let rows = search_run(&self.catalog.direct, run).await;
        assert!(rows.is_empty(), "a set-aside pack is queryable: {rows:?}");
        let key = PackKey::new(self.cfg.prefix.clone(), pack_id).object_key();
        self.store
            .head(&key)
            .await
            .expect("a set-aside pack stays in the store");
    }

    /// Every record of `run` through the catalog, read back from the store
    /// and compared with `expected`; returns how many matched.
    pub async fn read_back_run(&self, run: &str, expected: &BTreeMap<Uuid, Bytes>) -> usize {
        let rows = search_run(&self.catalog.direct, run).await;
        read_back(&self.store, &self.cfg, &rows, expected).await
    }
}

/// A scenario on the local store: the engine (or `None`: skipped), the
/// test's configuration edited by `edit`, its catalog behind a proxy.
pub async fn scenario(
    test: &str,
    edit: impl FnOnce(&mut ServiceConfig),
) -> Option<Scenario<LocalStore>> {
    scenario_wrapped(test, edit, |t, _| t).await
}

/// Like [`scenario`], with the service's catalog transport wrapped.
pub async fn scenario_wrapped(
    test: &str,
    edit: impl FnOnce(&mut ServiceConfig),
    wrap: impl FnOnce(Arc<dyn Transport>, &Proxy) -> Arc<dyn Transport>,
) -> Option<Scenario<LocalStore>> {
    let engine = engine(test)?;
    let root = tempfile::tempdir().expect("temp dir");
    let mut raw = config(test, root.path());
    edit(&mut raw);
    let cfg = raw.validate().expect("a valid test configuration");
    let catalog = catalog_wrapped(&engine, &cfg, wrap).await;
    let store = local_store(root.path());
    Some(Scenario {
        root,
        cfg,
        catalog,
        store,
    })
}

/// A scenario on the S3 test server (behind its own proxy), and the server.
pub async fn s3_scenario(
    test: &str,
    edit: impl FnOnce(&mut ServiceConfig),
) -> Option<(Scenario<capcat_s3::S3Store>, S3Server)> {
    let engine = engine(test)?;
    let server = s3_server(test).await?;
    let root = tempfile::tempdir().expect("temp dir");
    let mut raw = config(test, root.path());
    edit(&mut raw);
    let cfg = raw.validate().expect("a valid test configuration");
    let catalog = catalog(&engine, &cfg).await;
    let store = server.store.clone();
    Some((
        Scenario {
            root,
            cfg,
            catalog,
            store,
        },
        server,
    ))
}

/// Uploads a pack of `records` records of `run` straight to the store, with
/// its pack metadata, and never indexes it: what a process that died after
/// the upload leaves behind for the reconciler.
pub async fn upload_orphan<S: PackStore>(
    store: &S,
    cfg: &ValidConfig,
    run: &str,
    records: usize,
) -> (SealedPack, BTreeMap<Uuid, Bytes>) {
    let (orphan, payloads) = pack(run, records, 8);
    let metadata = capcat_s3::PackMetadata {
        format_version: orphan.info.format_version,
        pack_id: orphan.info.pack_id,
        sha256: orphan.info.pack_sha256.0,
        crc64nvme: Some(orphan.info.crc64nvme),
        record_count: records as u64,
    };
    store
        .put_pack(&cfg.prefix, orphan.bytes.clone(), &metadata)
        .await
        .expect("upload the orphan pack");
    (orphan, payloads)
}

/// The same records as `sealed`, laid out as format version 1 wrote them:
/// the `capcat` metadata value a version-1 envelope (the descriptor text
/// with its version set to 1, and its SHA-256), no pack digest key, the
/// header padded with spaces to a multiple of 8, the data section as it is
/// (its offsets are relative to it, so they do not move).
pub fn as_version_1(sealed: &SealedPack) -> Bytes {
    use serde_json::Value;
    let bytes = &sealed.bytes;
    let n = usize::try_from(u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")))
        .expect("a small header");
    let mut header: serde_json::Map<String, Value> =
        serde_json::from_slice(&bytes[8..8 + n]).expect("a valid header");
    let descriptor = header["__metadata__"][capcat_pack::METADATA_KEY]
        .as_str()
        .expect("the descriptor text")
        .replacen(r#"{"format_version":2,"#, r#"{"format_version":1,"#, 1);
    let envelope = format!(
        r#"{{"format_version":1,"descriptor_sha256":"{}","descriptor":{}}}"#,
        capcat_pack::Sha256Digest::of(descriptor.as_bytes()),
        Value::String(descriptor)
    );
    header.insert(
        "__metadata__".to_owned(),
        serde_json::json!({ capcat_pack::METADATA_KEY: envelope }),
    );
    let mut text = serde_json::to_vec(&header).expect("serializes");
    text.resize((8 + text.len()).next_multiple_of(8) - 8, b' ');
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend(text);
    out.extend(&bytes[8 + n..]);
    Bytes::from(out)
}

/// Stores the format-version-1 form of a pack of `records` records of
/// `run` as the store held packs before it declared CRC-64/NVME: metadata
/// with format version 1, the whole object's SHA-256 and no CRC. It is
/// never indexed, as a pack a process left behind before an upgrade.
pub async fn upload_version_1_orphan<S: PackStore>(
    store: &S,
    cfg: &ValidConfig,
    run: &str,
    records: usize,
) -> (Uuid, BTreeMap<Uuid, Bytes>) {
    let (sealed, payloads) = pack(run, records, 8);
    let old = as_version_1(&sealed);
    let metadata = capcat_s3::PackMetadata {
        format_version: 1,
        pack_id: sealed.info.pack_id,
        sha256: capcat_s3::sha256(&old),
        crc64nvme: None,
        record_count: records as u64,
    };
    store
        .put_pack(&cfg.prefix, old, &metadata)
        .await
        .expect("upload the version-1 pack");
    (sealed.info.pack_id, payloads)
}

/// Puts three objects under the catalog's prefix that are not its packs:
/// a key that is no pack name, a pack name with a non-canonical (simple)
/// uuid, and a canonical pack key with no pack metadata. The reconciler
/// must count each as skipped, never as an error.
pub async fn put_foreign_objects<S: PackStore>(store: &S, cfg: &ValidConfig) -> u64 {
    let list_prefix = cfg.prefix.list_prefix();
    let foreign = [
        (format!("{list_prefix}notes.txt"), "hello"),
        (
            format!("{list_prefix}{}.pack", Uuid::new_v4().simple()),
            "x",
        ),
        (
            format!("{list_prefix}{}.pack", Uuid::new_v4()),
            "no metadata",
        ),
    ];
    for (key, body) in &foreign {
        let key = capcat_s3::ObjectKey::new(key.clone()).expect("a valid key");
        let body = Bytes::from(*body);
        let crc = capcat_s3::crc64nvme(&body);
        store
            .put(&key, body, crc, &capcat_s3::UserMetadata::default())
            .await
            .expect("put a foreign object");
    }
    foreign.len() as u64
}

/// Seals a pack of `records` records of `run` into `spool`: what a sink
/// does. Returns the pack and its payloads by capture id.
pub fn stage(spool: &Spool, run: &str, records: usize) -> (SealedPack, BTreeMap<Uuid, Bytes>) {
    let (sealed, payloads) = pack(run, records, 8);
    spool
        .write_sealed(sealed.info.pack_id, &sealed.bytes)
        .expect("write a sealed pack into the spool");
    (sealed, payloads)
}

/// A configuration for a test: its own prefix and spool, short timers.
pub fn config(test: &str, root: &std::path::Path) -> ServiceConfig {
    let suffix = &Uuid::new_v4().simple().to_string()[..8];
    ServiceConfig {
        spool_dir: root.join("spool"),
        catalog_prefix: format!("t_{test}_{suffix}"),
        store_id: "local".to_owned(),
        holder: format!("{test}-holder"),
        poll_interval_s: 0.02,
        max_backoff_s: 0.5,
        lease_ttl_s: 6.0,
        publish_timeout_s: 2.0,
        catalog_connect_timeout_s: 1.0,
        catalog_request_timeout_s: 1.5,
        close_flush_timeout_s: 5.0,
        demand_publish_timeout_s: 2.0,
        ..ServiceConfig::default()
    }
}

pub fn local_store(root: &std::path::Path) -> LocalStore {
    LocalStore::open(root.join("store")).expect("local store")
}

/// The tenant of every test record.
pub const TENANT: &str = "tenant";

/// A pack of `records` f32 records of `elements` each, run `run`.
pub fn pack(run: &str, records: usize, elements: u64) -> (SealedPack, BTreeMap<Uuid, Bytes>) {
    pack_of(Uuid::new_v4(), run, records, elements)
}

/// A pack with a chosen id (a test wrapper names it before it exists).
pub fn pack_with_id(
    pack_id: Uuid,
    run: &str,
    records: usize,
) -> (SealedPack, BTreeMap<Uuid, Bytes>) {
    pack_of(pack_id, run, records, 8)
}

fn pack_of(
    pack_id: Uuid,
    run: &str,
    records: usize,
    elements: u64,
) -> (SealedPack, BTreeMap<Uuid, Bytes>) {
    let limits = PackLimits::new(records.max(1), u64::MAX / 2).expect("limits");
    let mut writer = PackWriter::new(pack_id, limits);
    let mut payloads = BTreeMap::new();
    for i in 0..records {
        let capture_id = Uuid::new_v4();
        let payload: Vec<u8> = (0..elements)
            .flat_map(|e| ((i as f32) + (e as f32) * 0.5).to_le_bytes())
            .collect();
        let metadata = RecordMetadata {
            identity: CaptureIdentity {
                tenant_id: TENANT.to_owned(),
                experiment_id: "exp".to_owned(),
                run_id: run.to_owned(),
                captured_at_ns: 1_000 + i as u64,
                capture_id,
            },
            model: "m".to_owned(),
            module_path: format!("layers.{i}"),
            hook: "forward".to_owned(),
            step: i as u64,
            tensor_name: format!("layers.{i}.out"),
            dtype: Dtype::F32,
            shape: vec![elements],
            tags: BTreeMap::new(),
        };
        let payload = Bytes::from(payload);
        writer.append(metadata, payload.clone()).expect("append");
        payloads.insert(capture_id, payload);
    }
    (writer.seal().expect("seal"), payloads)
}

/// Every record of `run`, read through the catalog.
pub async fn search_run(catalog: &Catalog, run: &str) -> Vec<CaptureDescriptor> {
    let mut out = Vec::new();
    let mut cursor = None;
    for _ in 0..1000 {
        let page = catalog
            .search(SearchQuery {
                filter: SearchFilter {
                    tenant_id: TENANT.to_owned(),
                    run_id: Some(run.to_owned()),
                    ..SearchFilter::default()
                },
                cursor,
                page_size: PageSize::new(1000).expect("page size"),
            })
            .await
            .expect("search");
        out.extend(page.records);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return out,
        }
    }
    panic!("search did not end");
}

/// Reads every record back from the store and compares it with what was
/// captured; returns how many matched. Panics on any difference or duplicate.
pub async fn read_back<S: PackStore>(
    store: &S,
    cfg: &ValidConfig,
    rows: &[CaptureDescriptor],
    expected: &BTreeMap<Uuid, Bytes>,
) -> usize {
    let ids: BTreeSet<Uuid> = rows.iter().map(|d| d.capture_id).collect();
    assert_eq!(
        ids.len(),
        rows.len(),
        "a capture appears twice in the results"
    );
    for d in rows {
        let key = PackKey::new(cfg.prefix.clone(), d.locator.pack_id).object_key();
        let range = capcat_s3::ByteRange::new(
            d.locator.payload_offset,
            d.locator.payload_offset + d.locator.payload_length,
        )
        .expect("range");
        let bytes = store.get_range(&key, range).await.expect("ranged read");
        assert_eq!(
            Some(&bytes),
            expected.get(&d.capture_id),
            "capture {} differs",
            d.capture_id
        );
    }
    rows.len()
}

/// Waits (bounded) until `check` holds.
pub async fn eventually(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let until = tokio::time::Instant::now() + timeout;
    while !check() {
        assert!(
            tokio::time::Instant::now() < until,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The S3 test server (`CAPCAT_S3_SERVER_BIN`) behind a proxy, with a store
/// pointing at the proxy. Killed when dropped.
pub struct S3Server {
    child: std::process::Child,
    /// The server's storage root (s3s-fs keeps objects and their sidecar
    /// metadata files here).
    pub data: tempfile::TempDir,
    pub bucket: String,
    pub proxy: Proxy,
    pub store: capcat_s3::S3Store,
}

impl S3Server {
    /// The server's own sidecar file for `key` (s3s-fs 0.14:
    /// `.bucket-<b64>.object-<b64>.internal.json` under its root, base64
    /// URL-safe without padding): it holds the object's ETag and checksums
    /// and HEAD reads it, LIST does not.
    pub fn internal_info_path(&self, key: &str) -> std::path::PathBuf {
        self.data.path().join(format!(
            ".bucket-{}.object-{}.internal.json",
            base64_url_no_pad(self.bucket.as_bytes()),
            base64_url_no_pad(key.as_bytes())
        ))
    }
}

/// Base64, URL-safe alphabet, no padding (what s3s-fs names sidecar files with).
fn base64_url_no_pad(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
        }
    }
    out
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn s3_server(test: &str) -> Option<S3Server> {
    use std::io::BufRead as _;
    let Some(binary) = std::env::var_os("CAPCAT_S3_SERVER_BIN").filter(|b| !b.is_empty()) else {
        if std::env::var("CAPCAT_REQUIRE_ENGINES").as_deref() == Ok("1") {
            panic!("{test}: CAPCAT_S3_SERVER_BIN is not set and CAPCAT_REQUIRE_ENGINES=1");
        }
        println!(
            "{test}: skipped: CAPCAT_S3_SERVER_BIN is not set (run `cargo xtask build-s3-server`)"
        );
        return None;
    };
    let data = tempfile::tempdir().expect("server data");
    let (access, secret) = ("capcat-test-access", "capcat-test-secret");
    let mut child = std::process::Command::new(binary)
        .arg("--root")
        .arg(data.path())
        .args([
            "--port",
            "0",
            "--access-key",
            access,
            "--secret-key",
            secret,
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start the S3 test server");
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("address line");
    let addr: SocketAddr = line.trim().parse().expect("address");
    let proxy = Proxy::start(addr).await;
    let bucket = format!("capcat-{}", test.replace('_', "-"));
    let mut config = capcat_s3::S3Config::new(
        proxy.url(),
        "us-east-1",
        bucket.clone(),
        capcat_s3::S3Credentials::new_static(access, secret),
    );
    config.allow_http = true;
    config.timeouts = capcat_s3::S3Timeouts {
        connect: Duration::from_secs(1),
        read: Duration::from_secs(2),
        attempt: Duration::from_secs(5),
        operation: Duration::from_secs(10),
    };
    config.retry = capcat_s3::S3Retry {
        max_attempts: 1,
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
    };
    let store = capcat_s3::S3Store::new(&config).expect("s3 config");
    store.create_bucket().await.expect("create bucket");
    Some(S3Server {
        child,
        data,
        bucket,
        proxy,
        store,
    })
}

#[test]
fn base64_matches_known_vectors() {
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg"),
        ("fo", "Zm8"),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg"),
        ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
        ("\u{fb}\u{ff}", "w7vDvw"),
    ] {
        assert_eq!(base64_url_no_pad(plain.as_bytes()), encoded, "{plain:?}");
    }
}
