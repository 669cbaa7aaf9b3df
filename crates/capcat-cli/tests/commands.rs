//! The user commands, run as a user runs them: the `capcat` binary against
//! the embedded engine (`CAPCAT_LIBCHDB`) and, for the S3 store, the S3 test
//! server (`CAPCAT_S3_SERVER_BIN`). Each test skips with a printed line when
//! its engine is absent, unless `CAPCAT_REQUIRE_ENGINES=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Whether the engine in `var` is there; else prints the skip (or fails
/// when engines are required).
fn engine(test: &str, var: &str) -> bool {
    if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
        return true;
    }
    assert!(
        std::env::var("CAPCAT_REQUIRE_ENGINES").as_deref() != Ok("1"),
        "{test}: {var} is not set and CAPCAT_REQUIRE_ENGINES=1"
    );
    println!("{test}: skipped: {var} is not set");
    false
}

/// `capcat` with the flags that point it at `dir`'s catalog, spool and
/// `store`, then `args`; fails the test unless it succeeds.
struct Capcat {
    dir: PathBuf,
    store: String,
    prefix: String,
    env: Vec<(String, String)>,
}

impl Capcat {
    fn local(dir: &Path, prefix: &str) -> Self {
        Self {
            dir: dir.to_owned(),
            store: format!("local:{}", dir.join("store").display()),
            prefix: prefix.to_owned(),
            env: Vec::new(),
        }
    }

    fn output(&self, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_capcat"));
        command
            .arg("--catalog")
            .arg(format!("embedded:{}", self.dir.join("catalog").display()))
            .args(["--store", &self.store, "--prefix", &self.prefix])
            .arg("--spool")
            .arg(self.dir.join("spool"))
            .args(args);
        for (k, v) in &self.env {
            command.env(k, v);
        }
        command.output().unwrap()
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.output(args);
        let text = output_text(&out);
        assert!(out.status.success(), "capcat {args:?} failed:\n{text}");
        text
    }
}

/// What a finished `capcat` printed: its standard output, then its
/// standard error.
fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// One tensor of a safetensors file: name, dtype, shape, bytes.
type Tensor = (&'static str, &'static str, Vec<u64>, Vec<u8>);

/// A safetensors file written byte by byte: 8-byte little-endian header
/// length, the JSON header, the data (tensors back to back, in order).
fn safetensors_bytes(tensors: &[Tensor]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            (*name).to_owned(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let header = serde_json::to_vec(&header).unwrap();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out.extend(data);
    out
}

/// Two files of small tensors of several dtypes; returns every tensor by name.
fn write_inputs(dir: &Path) -> BTreeMap<&'static str, Tensor> {
    std::fs::create_dir_all(dir).unwrap();
    let f32s: Vec<u8> = [1.5_f32, -2.0, 0.25, 3.0, 4.5, -0.125]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let i64s: Vec<u8> = [7_i64, -8, 9, 1 << 40]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let bf16s: Vec<u8> = [0x3f80_u16, 0xc000, 0x4040, 0x0000, 0x7f80]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let first: Vec<Tensor> = vec![
        ("layer0.attn.out", "F32", vec![2, 3], f32s),
        ("layer0.position_ids", "I64", vec![4], i64s),
    ];
    let second: Vec<Tensor> = vec![
        ("layer1.mlp.down", "BF16", vec![5], bf16s),
        ("layer1.mask", "U8", vec![3], vec![0, 1, 255]),
    ];
    std::fs::write(dir.join("a.safetensors"), safetensors_bytes(&first)).unwrap();
    std::fs::write(dir.join("b.safetensors"), safetensors_bytes(&second)).unwrap();
    std::fs::write(dir.join("notes.txt"), b"not a tensor file").unwrap();
    first.into_iter().chain(second).map(|t| (t.0, t)).collect()
}

/// `capcat search` rows: (capture id, tensor name, pack id).
fn search_rows(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let id = uuid::Uuid::parse_str(words.first()?).ok()?;
            let step = words.iter().position(|w| *w == "step")?;
            let pack = words.iter().position(|w| *w == "pack")?;
            Some((
                id.to_string(),
                (*words.get(step + 2)?).to_owned(),
                (*words.get(pack + 1)?).to_owned(),
            ))
        })
        .collect()
}

/// Ingests `inputs`, then finds every tensor with search and get, and
/// hydrates each back (raw and safetensors), comparing bytes.
fn ingest_and_read_back(capcat: &Capcat, work: &Path) -> usize {
    let inputs = write_inputs(&work.join("in"));
    let said = capcat.run(&[
        "ingest",
        work.join("in").to_str().unwrap(),
        "--tenant",
        "acme",
        "--run",
        "r1",
    ]);
    assert!(
        said.contains("ingesting 4 tensor(s) from 2 file(s)"),
        "{said}"
    );
    let found = search_rows(&capcat.run(&["search", "--tenant", "acme", "--run", "r1"]));
    let names: Vec<&str> = found.iter().map(|r| r.1.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        inputs.keys().copied().collect::<Vec<_>>(),
        "search found {found:?}"
    );
    // A filtered search narrows to one file's tensors.
    let layer1 =
        search_rows(&capcat.run(&["search", "--tenant", "acme", "--tensor-prefix", "layer1."]));
    assert_eq!(layer1.len(), 2, "{layer1:?}");
    let ids: Vec<&str> = found.iter().map(|r| r.0.as_str()).collect();
    let mut get_args = vec!["get", "--tenant", "acme"];
    get_args.extend(&ids);
    let got = capcat.run(&get_args);
    assert_eq!(search_rows(&got).len(), 4, "{got}");
    assert!(!got.contains("not found"), "{got}");

    let out = work.join("out");
    std::fs::create_dir_all(&out).unwrap();
    for (id, name, _) in &found {
        let (_, dtype, shape, bytes) = &inputs[name.as_str()];
        let raw = out.join(format!("{name}.bin"));
        capcat.run(&[
            "hydrate",
            "--tenant",
            "acme",
            id,
            "--out",
            raw.to_str().unwrap(),
        ]);
        assert_eq!(&std::fs::read(&raw).unwrap(), bytes, "{name}: raw bytes");
        let st = out.join(format!("{name}.safetensors"));
        capcat.run(&[
            "hydrate",
            "--tenant",
            "acme",
            id,
            "--out",
            st.to_str().unwrap(),
        ]);
        let file = std::fs::read(&st).unwrap();
        let parsed = safetensors::SafeTensors::deserialize(&file).unwrap();
        let view = parsed.tensor(name).unwrap();
        assert_eq!(format!("{:?}", view.dtype()), *dtype, "{name}: dtype");
        let got_shape: Vec<u64> = view.shape().iter().map(|d| *d as u64).collect();
        assert_eq!(&got_shape, shape, "{name}: shape");
        assert_eq!(view.data(), bytes.as_slice(), "{name}: safetensors bytes");
    }
    found.len()
}

#[test]
fn ingest_seals_safetensors_files_and_reads_every_tensor_back_byte_identical() {
    let test = "ingest";
    if !engine(test, "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let capcat = Capcat::local(work.path(), "cli_ingest");
    let n = ingest_and_read_back(&capcat, work.path());
    println!("{test}: {n} tensors ingested, found, hydrated raw and as safetensors");
}

#[test]
fn status_prints_the_service_snapshot_and_demand() {
    let test = "status";
    if !engine(test, "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let demo = Command::new(env!("CARGO_BIN_EXE_capcat"))
        .args([
            "demo",
            "--records",
            "960",
            "--packs",
            "3",
            "--run",
            "status",
        ])
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        demo.status.success(),
        "{}",
        String::from_utf8_lossy(&demo.stderr)
    );
    let capcat = Capcat::local(dir, "capcat_demo");
    let said = capcat.run(&["status"]);
    println!("{said}");
    for expected in [
        "(prefix capcat_demo): closed",
        "snapshot age ",
        "not running",
        "  uploaded: 3\n",
        "  indexed: 3\n",
        "  pending_index: 0\n",
        "  rejected_packs: 0\n",
        "  drained: true\n",
        "  last_error: none\n",
        "  lease_held: false\n",
        "  cycles: ",
        "  demand: ",
        "published ",
        "0 sealed pack(s) waiting",
        "published head 1",
        "demand: 0 pending pack(s)",
    ] {
        assert!(said.contains(expected), "missing {expected:?} in:\n{said}");
    }

    // The same file as a running service of this very process wrote it:
    // the pid is alive and the service is not closed.
    let path = dir.join("spool/status.json");
    let mut status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    status["pid"] = std::process::id().into();
    status["closed"] = false.into();
    std::fs::write(&path, serde_json::to_vec(&status).unwrap()).unwrap();
    let said = capcat.run(&["status"]);
    assert!(said.contains("): running"), "{said}");
    assert!(
        said.contains(&format!("pid {} alive", std::process::id())),
        "{said}"
    );

    // A pid that is gone and never closed: a killed service.
    status["pid"] = u32::MAX.into();
    std::fs::write(&path, serde_json::to_vec(&status).unwrap()).unwrap();
    let said = capcat.run(&["status"]);
    assert!(said.contains("stopped without closing"), "{said}");

    // A torn file is reported, not fatal.
    std::fs::write(&path, b"{\"format\": 1, \"pid\"").unwrap();
    let said = capcat.run(&["status"]);
    assert!(said.contains("is corrupt"), "{said}");
    assert!(said.contains("published head 1"), "{said}");

    // No file (no service has run here): said so, the rest shown.
    std::fs::remove_file(&path).unwrap();
    let said = capcat.run(&["status"]);
    assert!(said.contains("no status file"), "{said}");
    assert!(said.contains("demand: 0 pending pack(s)"), "{said}");
}

/// The S3 test server on 127.0.0.1 with a bucket; killed when dropped.
struct S3Server {
    child: std::process::Child,
    _root: tempfile::TempDir,
    endpoint: String,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const ACCESS: &str = "capcat-cli-access";
const SECRET: &str = "capcat-cli-secret";

fn s3_server(bucket: &str) -> S3Server {
    let binary = std::env::var_os("CAPCAT_S3_SERVER_BIN").unwrap();
    let root = tempfile::tempdir().unwrap();
    // The server keeps a bucket as a directory under its root: making the
    // directory is creating the bucket (the CLI expects an existing one).
    std::fs::create_dir(root.path().join(bucket)).unwrap();
    let mut child = Command::new(binary)
        .arg("--root")
        .arg(root.path())
        .args([
            "--port",
            "0",
            "--access-key",
            ACCESS,
            "--secret-key",
            SECRET,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: std::net::SocketAddr = line.trim().parse().unwrap();
    S3Server {
        child,
        _root: root,
        endpoint: format!("http://{addr}"),
    }
}

/// A `capcat` on `work`'s catalog and spool whose store is `bucket` of
/// `server`, with the server's credentials.
fn capcat_on_s3(work: &Path, prefix: &str, server: &S3Server, bucket: &str) -> Capcat {
    let mut capcat = Capcat::local(work, prefix);
    capcat.store = format!("s3://{bucket}?endpoint={}", server.endpoint);
    capcat.env = vec![
        ("AWS_ACCESS_KEY_ID".to_owned(), ACCESS.to_owned()),
        ("AWS_SECRET_ACCESS_KEY".to_owned(), SECRET.to_owned()),
    ];
    capcat
}

#[test]
fn the_s3_store_ingests_searches_and_hydrates_through_the_s3_server() {
    let test = "s3_store";
    if !engine(test, "CAPCAT_LIBCHDB") || !engine(test, "CAPCAT_S3_SERVER_BIN") {
        return;
    }
    let bucket = "capcat-cli-s3";
    let server = s3_server(bucket);
    let work = tempfile::tempdir().unwrap();
    let capcat = capcat_on_s3(work.path(), "cli_s3", &server, bucket);
    let n = ingest_and_read_back(&capcat, work.path());
    // The packs are in the bucket, not on local disk.
    let objects: Vec<_> = walk(&server._root.path().join(bucket));
    assert!(
        objects
            .iter()
            .any(|p| p.to_string_lossy().contains("v1/cli_s3/")
                && p.extension().is_some_and(|e| e == "pack")),
        "no pack object in the bucket: {objects:?}"
    );
    assert!(!work.path().join("store").exists());
    // Reconcile through S3 (list, HEAD) finds nothing new to index.
    let said = capcat.run(&["reconcile"]);
    assert!(said.contains("recovered by reconcile 0"), "{said}");
    assert!(said.contains("HEAD errors 0"), "{said}");
    println!(
        "{test}: {n} tensors through s3://{bucket} at {}",
        server.endpoint
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn sql_prints_every_statement_of_every_machine_without_an_engine() {
    let out = Command::new(env!("CARGO_BIN_EXE_capcat"))
        .args(["--prefix", "cli_sql", "sql"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    // Later statements of a machine, not only its first, for this prefix.
    for expected in [
        "-- 3. lease.read_claims",
        "-- 12. index.insert_inventory",
        "INSERT INTO cli_sql_index_watermark",
        "CREATE TABLE IF NOT EXISTS cli_sql_capture_raw",
        "read; answered with",
        "-- statements per machine:",
    ] {
        assert!(said.contains(expected), "missing {expected:?}:\n{said}");
    }
}

/// `capcat drain` on the directory of a demo still running: refused at
/// once, naming the demo's pid, before it sweeps anything (the spool's
/// owner lock is held), instead of deleting the demo's `.open` packs.
#[test]
fn drain_against_a_running_demo_fails_at_once_naming_its_pid() {
    let test = "drain_live";
    if !engine(test, "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    // Large enough to be still running when the drain comes.
    let mut demo = Command::new(env!("CARGO_BIN_EXE_capcat"))
        .args([
            "demo",
            "--records",
            "400000",
            "--packs",
            "800",
            "--run",
            test,
        ])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lock = dir.join("spool/.owner.lock");
    let owned = format!("{} ", demo.id());
    let started = std::time::Instant::now();
    // Bounded: 30 s of 20 ms polls.
    while !std::fs::read_to_string(&lock).is_ok_and(|t| t.starts_with(&owned)) {
        assert!(
            demo.try_wait().unwrap().is_none(),
            "the demo ended before it owned its spool"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the demo never took its spool's owner lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // An unsealed pack, as the demo's sink leaves while writing one.
    let open = dir.join(format!("spool/{}.pack.open", uuid::Uuid::new_v4()));
    std::fs::write(&open, b"being written").unwrap();
    let capcat = Capcat::local(dir, "capcat_demo");
    let asked = std::time::Instant::now();
    let out = capcat.output(&["drain", "--lease-wait", "60"]);
    let waited = asked.elapsed();
    let still_running = demo.try_wait().unwrap().is_none();
    let _ = demo.kill();
    let _ = demo.wait();
    let said = output_text(&out);
    assert!(
        still_running,
        "the demo finished first: the test proves nothing"
    );
    assert!(
        !out.status.success(),
        "drain succeeded on a live spool:\n{said}"
    );
    assert!(
        said.contains(&format!("owned by a running process: pid {}", demo.id())),
        "{said}"
    );
    assert!(
        waited < std::time::Duration::from_secs(10),
        "{waited:?}: {said}"
    );
    assert!(open.exists(), "drain swept a live spool's .open file");
}

/// Issue 16, "a clean exit": with `RUST_LOG=info` every run used to panic at
/// exit (the engine's exit hook logged through `tracing` after the
/// thread-local storage it needs was destroyed), every run printed `WARN
/// chdb_shutdown did not stop every engine thread`, and the log carried ANSI
/// colour codes into a pipe. A successful run, logged at info or at the
/// default level, now leaves none of them.
#[test]
fn a_successful_run_exits_cleanly_at_every_log_level_without_colour_codes() {
    if !engine("clean_exit", "CAPCAT_LIBCHDB") {
        return;
    }
    for (level, runs) in [(Some("info"), 5), (Some("debug"), 1), (None, 2)] {
        for run in 0..runs {
            let dir = tempfile::tempdir().unwrap();
            let mut command = Command::new(env!("CARGO_BIN_EXE_capcat"));
            command
                .args(["demo", "--records", "24"])
                .current_dir(dir.path())
                .env_remove("RUST_LOG");
            if let Some(level) = level {
                command.env("RUST_LOG", level);
            }
            let out = command.output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let what = format!("RUST_LOG={level:?}, run {run}");
            assert!(out.status.success(), "{what}: {}\n{stderr}", out.status);
            assert!(!stderr.contains("panicked"), "{what}: a panic\n{stderr}");
            assert!(
                !stderr.contains('\u{1b}'),
                "{what}: colour codes in a pipe\n{stderr}"
            );
            assert!(
                !stderr
                    .lines()
                    .any(|l| l.contains(" WARN ") || l.contains(" ERROR ")),
                "{what}: a warning on a successful run\n{stderr}"
            );
        }
    }
}

/// The environment variables of the shared flags: removed from every child
/// a settings test starts, so the machine's environment cannot decide it.
const SETTINGS_ENV: [&str; 5] = [
    "CAPCAT_CONFIG",
    "CAPCAT_CATALOG",
    "CAPCAT_STORE",
    "CAPCAT_PREFIX",
    "CAPCAT_SPOOL",
];

/// `capcat` with exactly `args` and `env` (no shared flags added).
fn capcat_bare(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_capcat"));
    command.args(args);
    for var in SETTINGS_ENV {
        command.env_remove(var);
    }
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    let text = output_text(&out);
    (out.status.success(), text)
}

/// A configuration file setting every key to a value other than its
/// default, one `key = value` a line (values written as JSON writes them,
/// so `capcat settings` prints each line back unchanged).
fn every_key_toml(dir: &Path) -> String {
    format!(
        "spool_dir = \"{}\"\n\
         catalog_prefix = \"from_file\"\n\
         store_id = \"s3:file-bucket\"\n\
         holder = \"file-holder\"\n\
         owns_spool = false\n\
         poll_interval_s = 0.02\n\
         max_backoff_s = 7.0\n\
         lease_ttl_s = 20.0\n\
         publish_timeout_s = 5.0\n\
         close_flush_timeout_s = 11.0\n\
         catalog_connect_timeout_s = 3.0\n\
         catalog_request_timeout_s = 33.0\n\
         demand_publish_timeout_s = 9.0\n\
         demand_max_in_flight = 2\n\
         reconcile_on_start = false\n\
         reconcile_interval_s = 120.0\n\
         status_interval_s = 2.0\n\
         max_index_attempts = 3\n\
         index_batch_budget_bytes = 1048576\n\
         max_packs_per_cycle = 8\n\
         max_pack_records = 100\n\
         max_pack_payload_bytes = 65536\n\
         catalog_url = \"http://127.0.0.1:9\"\n\
         catalog_user = \"file-user\"\n\
         catalog_password_file = \"/run/secrets/catalog\"\n\
         catalog_ca_file = \"/etc/capcat/catalog-ca.pem\"\n\
         s3_endpoint = \"http://127.0.0.1:9\"\n\
         s3_ca_file = \"/etc/capcat/s3-ca.pem\"\n\
         allow_insecure_http = true\n\
         read_byte_limit = 4096\n\
         read_request_limit = 10\n",
        dir.join("file-spool").display()
    )
}

/// Issue 16, settings silently ignored: every key a `--config` file sets is
/// the effective value unless a flag or its environment variable sets it;
/// a flag beats the environment, the environment beats the file. Needs no
/// engine: `capcat settings` opens nothing.
#[test]
fn every_key_of_a_config_file_is_effective_unless_a_flag_or_the_environment_sets_it() {
    let work = tempfile::tempdir().unwrap();
    let toml = every_key_toml(work.path());
    let file = work.path().join("capcat.toml");
    std::fs::write(&file, &toml).unwrap();
    let file = file.to_str().unwrap();

    let (ok, said) = capcat_bare(&["--config", file, "settings"], &[]);
    assert!(ok, "{said}");
    for line in toml.lines() {
        let expected = format!("{line}  (config file)");
        assert!(
            said.lines().any(|l| l == expected),
            "missing {expected:?} in:\n{said}"
        );
    }
    // Every key the service has is in the file: a key added later fails
    // here until the file above sets it. (`catalog_password` is the one
    // exception: it excludes `catalog_password_file`, prints only as
    // `<redacted>`, and has a test of its own, tests/secrets.rs.)
    let keys = said.lines().filter(|l| l.contains(" = ")).count();
    assert_eq!(keys, toml.lines().count() + 3, "{said}");
    assert!(
        said.contains("catalog = http://127.0.0.1:9  (config file)"),
        "{said}"
    );
    assert!(
        said.contains(
            "store = s3://file-bucket?endpoint=http://127.0.0.1:9&region=us-east-1  (config file)"
        ),
        "{said}"
    );

    // Flags beat the file, key by key; keys without a flag stay the file's.
    let spool = work.path().join("flag-spool");
    let (ok, said) = capcat_bare(
        &[
            "--config",
            file,
            "--catalog",
            "embedded:flag-catalog",
            "--store",
            "local:flag-store",
            "--prefix",
            "from_flag",
            "--spool",
            spool.to_str().unwrap(),
            "settings",
        ],
        &[("CAPCAT_PREFIX", "from_env")],
    );
    assert!(ok, "{said}");
    for expected in [
        "catalog = embedded:flag-catalog  (flag --catalog)".to_owned(),
        "store = local:flag-store  (flag --store)".to_owned(),
        "catalog_url = null  (flag --catalog)".to_owned(),
        "s3_endpoint = null  (flag --store)".to_owned(),
        "store_id = \"local\"  (flag --store)".to_owned(),
        "allow_insecure_http = false  (flag --store)".to_owned(),
        "catalog_prefix = \"from_flag\"  (flag --prefix)".to_owned(),
        format!("spool_dir = \"{}\"  (flag --spool)", spool.display()),
        "lease_ttl_s = 20.0  (config file)".to_owned(),
        "holder = \"file-holder\"  (config file)".to_owned(),
    ] {
        assert!(
            said.lines().any(|l| l == expected),
            "missing {expected:?} in:\n{said}"
        );
    }

    // The environment beats the file (and names itself), the file named by
    // CAPCAT_CONFIG included.
    let (ok, said) = capcat_bare(
        &["settings"],
        &[
            ("CAPCAT_CONFIG", file),
            ("CAPCAT_PREFIX", "from_env"),
            ("CAPCAT_CATALOG", "embedded:env-catalog"),
        ],
    );
    assert!(ok, "{said}");
    for expected in [
        format!("config = {file}  (environment CAPCAT_CONFIG)"),
        "catalog_prefix = \"from_env\"  (environment CAPCAT_PREFIX)".to_owned(),
        "catalog = embedded:env-catalog  (environment CAPCAT_CATALOG)".to_owned(),
        "max_pack_records = 100  (config file)".to_owned(),
    ] {
        assert!(
            said.lines().any(|l| l == expected),
            "missing {expected:?} in:\n{said}"
        );
    }

    // Nothing given: the defaults, said so.
    let (ok, said) = capcat_bare(&["settings"], &[]);
    assert!(ok, "{said}");
    for expected in [
        "catalog = embedded:capcat-data/catalog  (default)",
        "store = local:capcat-data/store  (default)",
        "spool_dir = \"capcat-data/spool\"  (default)",
        "catalog_prefix = \"capcat\"  (default)",
    ] {
        assert!(
            said.lines().any(|l| l == expected),
            "missing {expected:?} in:\n{said}"
        );
    }
}

/// A non-finite interval in a file is printed as the file spells it and
/// then refused: `settings` used to print `status_interval_s = null
/// (config file)`, as if the key were unset, above the error saying it is
/// NaN, because the values were written as JSON, which has no NaN.
#[test]
fn settings_prints_a_refused_nan_or_infinity_as_the_file_spells_it() {
    let work = tempfile::tempdir().unwrap();
    for (line, refused) in [
        ("status_interval_s = nan", "status_interval_s = NaN"),
        ("lease_ttl_s = inf", "lease_ttl_s = inf"),
        ("poll_interval_s = -inf", "poll_interval_s = -inf"),
    ] {
        let file = work.path().join("capcat.toml");
        std::fs::write(&file, format!("{line}\n")).unwrap();
        let (ok, said) = capcat_bare(&["--config", file.to_str().unwrap(), "settings"], &[]);
        assert!(!ok, "{said}");
        let expected = format!("{line}  (config file)");
        assert!(
            said.lines().any(|l| l == expected),
            "missing {expected:?} in:\n{said}"
        );
        assert!(said.contains(refused), "{said}");
    }
}

/// A catalog URL the transport would refuse is refused by `settings`
/// too, before anything opens: plain HTTP off this machine without
/// `allow_insecure_http` used to print as a valid setting and fail only
/// when a command connected.
#[test]
fn settings_refuses_a_plain_http_catalog_off_this_machine() {
    let (ok, said) = capcat_bare(&["--catalog", "http://10.0.0.7:8123", "settings"], &[]);
    assert!(!ok, "{said}");
    assert!(
        said.contains("catalog_url: catalog URL \"http://10.0.0.7:8123\" is plain HTTP"),
        "{said}"
    );
    let (ok, said) = capcat_bare(&["--catalog", "http://127.0.0.1:8123", "settings"], &[]);
    assert!(ok, "{said}");
}

/// Issue 16, settings silently ignored, as a user meets it: a file's
/// `catalog_url` is the catalog a command opens (it used to open the
/// embedded default instead), and a file's plain-HTTP `s3_endpoint` without
/// `allow_insecure_http` is refused (it used to be replaced by the local
/// default store).
#[test]
fn a_config_files_catalog_url_and_s3_endpoint_are_the_ones_used() {
    if !engine("config_used", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let file = dir.join("http-catalog.toml");
    // Port 9 (discard): nothing listens there, so the connection is refused.
    std::fs::write(
        &file,
        format!(
            "catalog_url = \"http://127.0.0.1:9\"\nspool_dir = \"{}\"\n",
            dir.join("spool").display()
        ),
    )
    .unwrap();
    let (ok, said) = capcat_bare(
        &[
            "--config",
            file.to_str().unwrap(),
            "search",
            "--tenant",
            "t",
        ],
        &[],
    );
    assert!(
        !ok,
        "search succeeded without its configured catalog:\n{said}"
    );
    assert!(said.contains("transport failure"), "{said}");
    assert!(
        !dir.join("capcat-data").exists(),
        "an embedded catalog was created"
    );

    let file = dir.join("http-store.toml");
    std::fs::write(
        &file,
        format!(
            "s3_endpoint = \"http://127.0.0.1:9\"\nstore_id = \"s3:b\"\n\
             spool_dir = \"{}\"\n",
            dir.join("spool").display()
        ),
    )
    .unwrap();
    let inputs = dir.join("in");
    write_inputs(&inputs);
    let catalog = format!("embedded:{}", dir.join("catalog").display());
    let (ok, said) = capcat_bare(
        &[
            "--config",
            file.to_str().unwrap(),
            "--catalog",
            &catalog,
            "ingest",
            inputs.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        !ok,
        "ingest succeeded without its configured store:\n{said}"
    );
    assert!(said.contains("plain HTTP"), "{said}");
}

/// Issue 16: `capcat demo` offers the shared flags, so it honours them: a
/// demo given `--prefix` writes its catalog under that prefix (it used to
/// use `capcat_demo` whatever the flag said).
#[test]
fn the_demo_honours_the_shared_flags() {
    if !engine("demo_flags", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("demo");
    let (ok, said) = capcat_bare(
        &[
            "--prefix",
            "demo_flag",
            "demo",
            "--records",
            "24",
            "--run",
            "flags",
            "--dir",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    assert!(ok, "{said}");
    assert!(said.contains("--prefix demo_flag"), "{said}");
    // Its timings say which build made them (the tests run a debug one).
    assert!(said.contains("debug build (timings are not"), "{said}");
    let capcat = Capcat::local(&dir, "demo_flag");
    let found = search_rows(&capcat.run(&["search", "--tenant", "demo", "--run", "flags"]));
    assert_eq!(found.len(), 24, "{found:?}");
}

/// `capcat` with `capcat`'s shared flags and `args`, killed (and the test
/// failed) if it runs longer than `limit`: a hang is a failure, not a stuck
/// test run. Returns (success, stdout + stderr).
fn run_bounded(capcat: &Capcat, args: &[&str], limit: std::time::Duration) -> (bool, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_capcat"));
    command
        .arg("--catalog")
        .arg(format!("embedded:{}", capcat.dir.join("catalog").display()))
        .args(["--store", &capcat.store, "--prefix", &capcat.prefix])
        .arg("--spool")
        .arg(capcat.dir.join("spool"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let started = std::time::Instant::now();
    // Bounded by `limit`: 20 ms polls.
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("capcat {args:?} still running after {limit:?}: it hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = output_text(&out);
    (out.status.success(), text)
}

/// Issue 16, input validation at the edge, for ingest: an empty tenant and
/// names with control characters are refused with a clear error; IO errors
/// name the path; a directory or a FIFO named `*.safetensors` is refused
/// (a FIFO used to hang the ingest forever) and nothing is created.
#[test]
fn ingest_refuses_bad_names_and_non_regular_files_naming_them() {
    if !engine("ingest_edge", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let capcat = Capcat::local(work.path(), "cli_edge");
    let inputs = work.path().join("in");
    write_inputs(&inputs);
    let limit = std::time::Duration::from_secs(60);
    let dir = inputs.to_str().unwrap();
    for (args, expected) in [
        (
            vec!["ingest", dir, "--tenant", ""],
            "--tenant \"\": must not be empty",
        ),
        (
            vec!["ingest", dir, "--tenant", "ac\nme"],
            "--tenant \"ac\\nme\": must not contain control characters",
        ),
        (
            vec!["ingest", dir, "--run", "r\u{1b}[31m"],
            "--run \"r\\u{1b}[31m\": must not contain control characters",
        ),
    ] {
        let (ok, said) = run_bounded(&capcat, &args, limit);
        assert!(!ok, "{args:?} succeeded:\n{said}");
        assert!(
            said.contains(expected),
            "{args:?}: no {expected:?} in:\n{said}"
        );
    }

    let missing = work.path().join("no-such-dir");
    let (ok, said) = run_bounded(&capcat, &["ingest", missing.to_str().unwrap()], limit);
    assert!(!ok, "{said}");
    assert!(
        said.contains(&format!("list the ingest directory {}", missing.display())),
        "{said}"
    );

    let with_dir = work.path().join("with-dir");
    write_inputs(&with_dir);
    let odd = with_dir.join("x.safetensors");
    std::fs::create_dir(&odd).unwrap();
    let (ok, said) = run_bounded(&capcat, &["ingest", with_dir.to_str().unwrap()], limit);
    assert!(!ok, "{said}");
    assert!(
        said.contains(&format!("{}: not a regular file", odd.display())),
        "{said}"
    );

    let with_fifo = work.path().join("with-fifo");
    write_inputs(&with_fifo);
    let fifo = with_fifo.join("y.safetensors");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo failed");
    let (ok, said) = run_bounded(
        &capcat,
        &["ingest", with_fifo.to_str().unwrap()],
        std::time::Duration::from_secs(20),
    );
    assert!(!ok, "{said}");
    assert!(
        said.contains(&format!("{}: not a regular file", fifo.display())),
        "{said}"
    );
    // Every refusal came before the catalog or the store was opened.
    assert!(
        !work.path().join("catalog").exists(),
        "a catalog was created"
    );
    assert!(!work.path().join("store").exists(), "a store was created");
}

/// Issue 16, input validation at the edge, for the read commands:
/// `--dtype` matches in any case and anything else is refused with the
/// list; `get` of an unknown id exits non-zero; a mistyped `embedded:`
/// path is an error, and no catalog directory is created for it.
#[test]
fn read_commands_check_their_input_and_never_create_a_catalog() {
    if !engine("read_edge", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let capcat = Capcat::local(work.path(), "cli_read_edge");
    let inputs = work.path().join("in");
    write_inputs(&inputs);
    capcat.run(&["ingest", inputs.to_str().unwrap(), "--tenant", "acme"]);
    let limit = std::time::Duration::from_secs(60);

    for dtype in ["F32", "f32"] {
        let found = search_rows(&capcat.run(&["search", "--tenant", "acme", "--dtype", dtype]));
        assert_eq!(found.len(), 1, "--dtype {dtype}: {found:?}");
        assert_eq!(found[0].1, "layer0.attn.out", "--dtype {dtype}");
    }
    let (ok, said) = run_bounded(
        &capcat,
        &["search", "--tenant", "acme", "--dtype", "f33"],
        limit,
    );
    assert!(!ok, "{said}");
    assert!(
        said.contains("--dtype \"f33\": expected one of F64, F32, F16, BF16"),
        "{said}"
    );

    let known = search_rows(&capcat.run(&["search", "--tenant", "acme"]));
    let unknown = uuid::Uuid::new_v4().to_string();
    let (ok, said) = run_bounded(
        &capcat,
        &["get", "--tenant", "acme", &known[0].0, &unknown],
        limit,
    );
    assert!(!ok, "get of an unknown id succeeded:\n{said}");
    assert!(said.contains(&format!("{unknown}  not found")), "{said}");
    assert!(said.contains("1 of 2 capture(s) not found"), "{said}");

    // The flags of `capcat` point at a directory that does not exist, as a
    // mistyped `--catalog embedded:...` does.
    let mistyped = Capcat::local(&work.path().join("mistyped"), "cli_read_edge");
    let typo = mistyped.dir.join("catalog");
    for args in [
        vec!["search", "--tenant", "acme"],
        vec!["get", "--tenant", "acme", &unknown],
        vec!["status"],
    ] {
        let (ok, said) = run_bounded(&mistyped, &args, limit);
        // status reports the catalog half and exits 0; the others fail.
        assert_eq!(ok, args.contains(&"status"), "{args:?}:\n{said}");
        assert!(
            said.contains(&format!("catalog {}: no such directory", typo.display())),
            "{args:?}:\n{said}"
        );
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
}

/// Issue 16, input validation at the edge, for the demo: `--records 0`
/// names `--records` (not `max_pack_records`), and a verification that
/// finds nothing of the run exits non-zero.
#[test]
fn the_demo_names_its_flags_and_a_verification_of_nothing_fails() {
    if !engine("demo_edge", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("demo");
    let dir_text = dir.to_str().unwrap();
    let (ok, said) = capcat_bare(&["demo", "--records", "0", "--dir", dir_text], &[]);
    assert!(!ok, "{said}");
    assert!(said.contains("--records 0: must be at least 1"), "{said}");
    let (ok, said) = capcat_bare(&["demo", "--packs", "0", "--dir", dir_text], &[]);
    assert!(!ok, "{said}");
    assert!(said.contains("--packs 0: must be at least 1"), "{said}");

    let (ok, said) = capcat_bare(
        &[
            "demo",
            "--records",
            "24",
            "--run",
            "real",
            "--dir",
            dir_text,
        ],
        &[],
    );
    assert!(ok, "{said}");
    let (ok, said) = capcat_bare(
        &["demo", "--verify-only", "--run", "real", "--dir", dir_text],
        &[],
    );
    assert!(ok, "{said}");
    let (ok, said) = capcat_bare(
        &[
            "demo",
            "--verify-only",
            "--run",
            "nonexistent",
            "--dir",
            dir_text,
        ],
        &[],
    );
    assert!(!ok, "a verification of nothing succeeded:\n{said}");
    assert!(said.contains("no record of it"), "{said}");
}

/// Issue 16, "a clean exit", as reported: `RUST_LOG=info capcat status` on
/// an embedded catalog, 20 times. Each run exits 0 with no panic, no
/// warning and no escape code in its stderr (a pipe, not a terminal).
#[test]
fn status_at_info_exits_cleanly_twenty_times() {
    if !engine("status_exit", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let capcat = Capcat::local(work.path(), "cli_status_exit");
    // A catalog with its schema, so status runs statements that succeed.
    capcat.run(&["schema", "check"]);
    for run in 0..20 {
        let mut command = Command::new(env!("CARGO_BIN_EXE_capcat"));
        command
            .arg("--catalog")
            .arg(format!(
                "embedded:{}",
                work.path().join("catalog").display()
            ))
            .args(["--store", &capcat.store, "--prefix", &capcat.prefix])
            .arg("--spool")
            .arg(work.path().join("spool"))
            .arg("status")
            .env("RUST_LOG", "info");
        let out = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "run {run}: {}\n{stdout}\n{stderr}",
            out.status
        );
        assert!(stdout.contains("published head 0"), "run {run}: {stdout}");
        assert!(!stderr.contains("panicked"), "run {run}: a panic\n{stderr}");
        assert!(
            !out.stderr.contains(&0x1b),
            "run {run}: an escape code in a pipe\n{stderr}"
        );
        assert!(
            !stderr
                .lines()
                .any(|l| l.contains(" WARN ") || l.contains(" ERROR ")),
            "run {run}: a warning on a successful run\n{stderr}"
        );
    }
}

/// Issue 16, idempotent ingest: the same bytes ingested twice are one copy
/// (the second run skips every tensor and uploads nothing); another run of
/// the same bytes is other captures.
#[test]
fn ingesting_the_same_bytes_twice_gives_one_copy() {
    if !engine("ingest_twice", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let capcat = Capcat::local(work.path(), "cli_twice");
    let inputs = work.path().join("in");
    write_inputs(&inputs);
    let dir = inputs.to_str().unwrap();
    let first = capcat.run(&["ingest", dir, "--tenant", "acme", "--run", "r1"]);
    assert!(first.contains("uploaded 1,"), "{first}");
    let again = capcat.run(&["ingest", dir, "--tenant", "acme", "--run", "r1"]);
    let found = search_rows(&capcat.run(&["search", "--tenant", "acme", "--run", "r1"]));
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(
        again.contains("4 of 4 tensor(s) already in the catalog"),
        "{again}"
    );
    assert!(again.contains("uploaded 0,"), "{again}");
    capcat.run(&["ingest", dir, "--tenant", "acme", "--run", "r2"]);
    let found = search_rows(&capcat.run(&["search", "--tenant", "acme"]));
    assert_eq!(found.len(), 8, "{found:?}");
}

/// Issue 16, idempotent ingest: an ingest that failed on an unreachable
/// store leaves its sealed pack in the spool; the next ingest of the same
/// files finishes it, says so, and does not publish the tensors twice.
#[test]
fn an_ingest_retried_after_a_failed_upload_gives_one_copy() {
    if !engine("ingest_retry", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let capcat = Capcat::local(work.path(), "cli_retry");
    let inputs = work.path().join("in");
    write_inputs(&inputs);
    let dir = inputs.to_str().unwrap();
    // A store nothing listens on (port 9, discard), and a short flush
    // timeout so the failure comes in seconds.
    let config = work.path().join("short.toml");
    std::fs::write(&config, "close_flush_timeout_s = 2.0\n").unwrap();
    let mut unreachable = Capcat::local(work.path(), "cli_retry");
    unreachable.store = "s3://bucket?endpoint=http://127.0.0.1:9".to_owned();
    unreachable.env = vec![
        ("AWS_ACCESS_KEY_ID".to_owned(), "x".to_owned()),
        ("AWS_SECRET_ACCESS_KEY".to_owned(), "y".to_owned()),
    ];
    let config_arg = config.to_str().unwrap();
    let out = unreachable.output(&[
        "--config", config_arg, "ingest", dir, "--tenant", "acme", "--run", "r3",
    ]);
    assert!(
        !out.status.success(),
        "ingest to an unreachable store succeeded"
    );
    // The store's error in words: the cause, and no Rust Debug dump of
    // the SDK's error (`DispatchFailure(DispatchFailure { source: .. })`).
    let failed = String::from_utf8_lossy(&out.stderr);
    assert!(failed.contains("Connection refused"), "{failed}");
    assert!(
        !failed.contains("DispatchFailure") && !failed.contains(" { "),
        "Debug output in the error:\n{failed}"
    );
    let ready = std::fs::read_dir(work.path().join("spool"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".ready")
        })
        .count();
    assert_eq!(ready, 1, "the failed ingest left no sealed pack");
    let retry = capcat.run(&["ingest", dir, "--tenant", "acme", "--run", "r3"]);
    let found = search_rows(&capcat.run(&["search", "--tenant", "acme", "--run", "r3"]));
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(
        retry.contains("finishing 1 pack(s) left by an earlier ingest"),
        "{retry}"
    );
    assert!(
        retry.contains("4 of 4 tensor(s) already in the catalog"),
        "{retry}"
    );
}

/// Issue 16: an idle `drain` or `reconcile` (nothing in the spool, nothing
/// in the store) returns as soon as it is done. Close used to wait a whole
/// lease renewal period (lease_ttl_s / 3, 10 s by default) for the lease
/// keeper, which had missed the stop signal.
#[test]
fn an_idle_drain_or_reconcile_returns_at_once() {
    if !engine("idle_drain", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let capcat = Capcat::local(work.path(), "cli_idle");
    capcat.run(&["schema", "check"]);
    for command in ["drain", "reconcile", "drain"] {
        let started = std::time::Instant::now();
        let said = capcat.run(&[command]);
        let took = started.elapsed();
        // Well below the 10 s period, well above an idle run's ~0.5 s.
        assert!(
            took < std::time::Duration::from_secs(5),
            "idle {command} took {took:?}:\n{said}"
        );
    }
}

/// Issue 16: messages are words, not Rust `Debug` output: `schema check`
/// said `Current { recreated_views: {} }`, and status said `oldest pending
/// None ms`.
#[test]
fn schema_check_and_status_print_no_debug_output() {
    if !engine("no_debug", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let capcat = Capcat::local(work.path(), "cli_words");
    let said = capcat.run(&["schema", "check"]);
    assert!(said.contains("catalog cli_words: created"), "{said}");
    let said = capcat.run(&["schema", "check"]);
    assert!(said.contains("catalog cli_words: current\n"), "{said}");
    let status = capcat.run(&["status"]);
    assert!(
        status.contains("demand: 0 pending pack(s), 0 pending byte(s), oldest pending none"),
        "{status}"
    );
    for text in [&said, &status] {
        for debug in ["Some(", "None", " { ", "}\n"] {
            assert!(!text.contains(debug), "{debug:?} in:\n{text}");
        }
    }
    // The info log of a service start and a reconcile pass, likewise
    // (`outcome=Current { recreated_views: {} }`, `report=ReconcileReport
    // { listed: 0, .. }` before).
    let mut logged = Capcat::local(work.path(), "cli_words");
    logged.env = vec![("RUST_LOG".to_owned(), "info".to_owned())];
    let out = logged.output(&["reconcile"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("outcome=current"), "{log}");
    assert!(log.contains("reconcile pass done listed=0"), "{log}");
    assert!(!log.contains(" { "), "Debug output in the log:\n{log}");
}

/// A shared flag's environment variable that is not UTF-8 is refused,
/// naming it, rather than skipped (which would silently fall back to the
/// file or the default).
#[test]
fn a_non_utf8_setting_variable_is_refused_not_ignored() {
    use std::os::unix::ffi::OsStrExt as _;
    let mut command = Command::new(env!("CARGO_BIN_EXE_capcat"));
    command.arg("settings");
    for var in SETTINGS_ENV {
        command.env_remove(var);
    }
    command.env("CAPCAT_PREFIX", std::ffi::OsStr::from_bytes(b"caps\xffcat"));
    let out = command.output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted:\n{said}");
    assert!(
        said.contains("environment variable CAPCAT_PREFIX is not valid UTF-8"),
        "{said}"
    );
}

/// A read under a prefix the catalog has no tables for (a mistyped
/// `--prefix`) says so, instead of the server's UNKNOWN_TABLE exception
/// text; status reports it and exits 0.
#[test]
fn a_read_under_a_prefix_without_tables_names_the_prefix() {
    if !engine("no_schema", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    Capcat::local(work.path(), "cli_real").run(&["schema", "check"]);
    let typo = Capcat::local(work.path(), "cli_rael");
    let limit = std::time::Duration::from_secs(60);
    let hint = "catalog has no Capcat tables under prefix \"cli_rael\" (check --prefix";
    for args in [
        vec!["search", "--tenant", "acme"],
        vec![
            "get",
            "--tenant",
            "acme",
            "00000000-0000-0000-0000-000000000001",
        ],
        vec!["status"],
    ] {
        let (ok, said) = run_bounded(&typo, &args, limit);
        assert_eq!(ok, args == ["status"], "{args:?}:\n{said}");
        assert!(said.contains(hint), "{args:?}:\n{said}");
        assert!(!said.contains("DB::Exception"), "{args:?}:\n{said}");
    }
}

/// Issue 16 (item 6): `drain` runs to the end while it advances. After 200
/// killed demo runs, the recovery drain indexed 448 of 924 sealed packs and
/// stopped at its fixed flush deadline (`close_flush_timeout_s`, 30 s),
/// exiting non-zero. Here a backlog of [`BACKLOG`] one-record packs takes
/// longer than a 1 s `close_flush_timeout_s` to drain; the drain gives up
/// only on a stall, so it finishes them all.
#[test]
fn a_drain_longer_than_the_flush_timeout_runs_to_the_end_while_it_advances() {
    const BACKLOG: usize = 40;
    if !engine("long_drain", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let inputs = work.path().join("in");
    std::fs::create_dir_all(&inputs).unwrap();
    for i in 0..BACKLOG {
        let bytes: Vec<u8> = (i as u32).to_le_bytes().to_vec();
        let file = safetensors_bytes(&[("t", "U8", vec![4], bytes)]);
        std::fs::write(inputs.join(format!("{i:04}.safetensors")), file).unwrap();
    }
    // One record per pack and one pack per cycle: a backlog of many small
    // steps, each well inside the 1 s stall time.
    let config = work.path().join("backlog.toml");
    std::fs::write(
        &config,
        "close_flush_timeout_s = 1.0\nmax_pack_records = 1\nmax_packs_per_cycle = 1\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    // The backlog: an ingest against a store nothing listens on seals every
    // pack into the spool and fails.
    let mut unreachable = Capcat::local(work.path(), "cli_long_drain");
    unreachable.store = "s3://bucket?endpoint=http://127.0.0.1:9".to_owned();
    unreachable.env = vec![
        ("AWS_ACCESS_KEY_ID".to_owned(), "x".to_owned()),
        ("AWS_SECRET_ACCESS_KEY".to_owned(), "y".to_owned()),
    ];
    let out = unreachable.output(&["--config", config, "ingest", inputs.to_str().unwrap()]);
    assert!(
        !out.status.success(),
        "ingest to an unreachable store succeeded"
    );
    let capcat = Capcat::local(work.path(), "cli_long_drain");
    let started = std::time::Instant::now();
    let said = capcat.run(&["--config", config, "drain"]);
    let took = started.elapsed();
    assert!(
        said.contains(&format!(
            "spool {}: {BACKLOG} sealed pack(s)",
            work.path().join("spool").display()
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!("uploaded {BACKLOG}, indexed {BACKLOG},")),
        "{said}"
    );
    assert!(said.contains("drained: 0 sealed and 0 unsealed"), "{said}");
    eprintln!("the drain of {BACKLOG} packs took {took:?}");
    // The premise: the drain outlasted the old fixed deadline. A machine
    // that drains them within 1 s would make this test show nothing (this
    // one took 18 s for 100 in a debug build).
    assert!(
        took > std::time::Duration::from_secs(1),
        "the backlog drained in {took:?}: raise BACKLOG"
    );
}

/// The pack objects under `root` (a local store's directory, or the S3
/// test server's bucket directory), in name order.
fn pack_objects(root: &Path) -> Vec<PathBuf> {
    let mut packs: Vec<PathBuf> = walk(root)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .collect();
    packs.sort();
    packs
}

/// The pack id a pack object's file is named by.
fn pack_id_of(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

/// Issue 16 (item 5): after a pack object was deleted or had bytes changed,
/// `reconcile` and `drain` exited 0 and `search` kept listing the dead
/// captures; nothing checked the store. `capcat verify` checks every pack
/// the catalog admits: a deleted object is found by its HEAD, a truncated
/// and a bit-flipped one by `--read-data`, each named, and the exit status
/// says so. `objects` is where the store keeps its pack objects as files.
fn verify_finds_a_deleted_a_truncated_and_a_bit_flipped_pack(
    capcat: &Capcat,
    work: &Path,
    objects: &Path,
) {
    let inputs = work.join("in");
    write_inputs(&inputs);
    // One record per pack: the four tensors are four packs.
    let config = work.join("one-per-pack.toml");
    std::fs::write(&config, "max_pack_records = 1\n").unwrap();
    let config = config.to_str().unwrap();
    capcat.run(&["--config", config, "ingest", inputs.to_str().unwrap()]);
    for args in [&["verify"][..], &["verify", "--read-data"][..]] {
        let said = capcat.run(args);
        assert!(said.contains("checked 4 pack(s)"), "{said}");
        assert!(said.contains("0 missing, 0 corrupt; 0 orphaned"), "{said}");
    }
    let packs = pack_objects(objects);
    assert_eq!(packs.len(), 4, "{packs:?}");
    let (deleted, truncated, flipped) = (&packs[0], &packs[1], &packs[2]);
    std::fs::remove_file(deleted).unwrap();
    let bytes = std::fs::read(truncated).unwrap();
    std::fs::write(truncated, &bytes[..bytes.len() / 2]).unwrap();
    let mut bytes = std::fs::read(flipped).unwrap();
    // A byte of the last record's payload, well inside the body.
    let at = bytes.len() - 3;
    bytes[at] ^= 0x01;
    std::fs::write(flipped, &bytes).unwrap();

    // Existence and metadata: the deleted pack.
    let out = capcat.output(&["verify"]);
    let said = output_text(&out);
    assert!(
        !out.status.success(),
        "verify passed a deleted pack:\n{said}"
    );
    assert!(
        said.contains(&format!("missing {}", pack_id_of(deleted))),
        "{said}"
    );
    // Every byte: all three, each named.
    let out = capcat.output(&["verify", "--read-data"]);
    let said = output_text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains(&format!("missing {}", pack_id_of(deleted))),
        "{said}"
    );
    assert!(
        said.contains(&format!("corrupt {}", pack_id_of(truncated))),
        "{said}"
    );
    assert!(
        said.contains(&format!("corrupt {}", pack_id_of(flipped))),
        "{said}"
    );
    assert!(
        said.contains("the store check found 1 missing and 2 corrupt pack(s)"),
        "{said}"
    );
    assert!(
        !said.contains(&format!("corrupt {}", pack_id_of(&packs[3]))),
        "{said}"
    );
}

#[test]
fn verify_finds_damaged_packs_on_the_local_store() {
    if !engine("verify_local", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let capcat = Capcat::local(work.path(), "cli_verify");
    verify_finds_a_deleted_a_truncated_and_a_bit_flipped_pack(
        &capcat,
        work.path(),
        &work.path().join("store"),
    );
}

#[test]
fn verify_finds_damaged_packs_on_the_s3_test_server() {
    let test = "verify_s3";
    if !engine(test, "CAPCAT_LIBCHDB") || !engine(test, "CAPCAT_S3_SERVER_BIN") {
        return;
    }
    let bucket = "capcat-cli-verify";
    let server = s3_server(bucket);
    let work = tempfile::tempdir().unwrap();
    let capcat = capcat_on_s3(work.path(), "cli_verify_s3", &server, bucket);
    verify_finds_a_deleted_a_truncated_and_a_bit_flipped_pack(
        &capcat,
        work.path(),
        &server._root.path().join(bucket),
    );
}

/// A check of nothing is not a pass: `verify` on a catalog that admits no
/// pack exits non-zero, saying what to check.
#[test]
fn verify_of_an_empty_catalog_fails_saying_nothing_was_checked() {
    if !engine("verify_empty", "CAPCAT_LIBCHDB") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let capcat = Capcat::local(work.path(), "cli_verify_empty");
    capcat.run(&["schema", "check"]);
    std::fs::create_dir(work.path().join("store")).unwrap();
    let out = capcat.output(&["verify"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("nothing to verify"), "{said}");
}
