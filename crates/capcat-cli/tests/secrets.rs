//! A run with a known catalog password, and every place it could leak: the
//! log lines at trace level, every command's output and error messages,
//! `capcat settings`, `capcat status` and the status file. The password
//! must appear in none of them, whether it came from the environment, a
//! password file or the configuration file.
//!
//! The catalog is capcat-chdb's HTTP front over the embedded engine, in this
//! test process, behind TLS with a certificate made for the test and the
//! password required; `capcat` reaches it as `https://localhost:PORT`,
//! trusting the test CA through `catalog_ca_file`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use capcat_chdb::{Engine, FrontCredentials, FrontOptions, HttpFront, TestPki};

const USER: &str = "capcat_writer";
/// The password under test: long and distinctive, so a partial echo of it
/// (a prefix) is caught too, see [`assert_no_secret`].
const PASSWORD: &str = "Pw-7c1e9a44-leak-canary";
const WRONG: &str = "Wrong-2b8d50f1-canary";

/// Every text a run showed, with what it was.
struct Seen(Vec<(String, String)>);

impl Seen {
    fn add(&mut self, what: impl Into<String>, text: String) {
        self.0.push((what.into(), text));
    }
}

/// Fails naming the place if any text holds a secret or its first half.
fn assert_no_secret(seen: &Seen) {
    for (what, text) in &seen.0 {
        for secret in [PASSWORD, WRONG] {
            let half = &secret[..secret.len() / 2];
            assert!(
                !text.contains(half),
                "{what} shows (part of) a password:\n{text}"
            );
        }
    }
}

fn tensor_file(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let header = br#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend([1.0_f32, -2.5].iter().flat_map(|v| v.to_le_bytes()));
    std::fs::write(dir.join("w.safetensors"), bytes).unwrap();
}

struct Run {
    config: PathBuf,
    spool: PathBuf,
    store: PathBuf,
    url: String,
}

impl Run {
    /// `capcat args` at trace level with `env`; returns (success, output).
    fn capcat(&self, args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_capcat"));
        command
            .args(["--config"])
            .arg(&self.config)
            .args(["--catalog", &self.url, "--prefix", "secrets"])
            .arg("--spool")
            .arg(&self.spool)
            .arg("--store")
            .arg(format!("local:{}", self.store.display()))
            .args(args)
            .env("RUST_LOG", "trace")
            .env_remove("CAPCAT_CATALOG_PASSWORD")
            .env_remove("CAPCAT_CATALOG_PASSWORD_FILE")
            .env_remove("CAPCAT_CATALOG_USER");
        for (k, v) in env {
            command.env(k, v);
        }
        let out = command.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }
}

#[test]
fn a_known_password_shows_in_no_log_line_output_error_or_status_file() {
    let test = "secrets";
    if std::env::var_os("CAPCAT_LIBCHDB").is_none_or(|v| v.is_empty()) {
        assert!(
            std::env::var("CAPCAT_REQUIRE_ENGINES").as_deref() != Ok("1"),
            "{test}: CAPCAT_LIBCHDB is not set and CAPCAT_REQUIRE_ENGINES=1"
        );
        println!("{test}: skipped: CAPCAT_LIBCHDB is not set");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let engine = Engine::open(dir.join("engine")).unwrap();
    let pki = TestPki::new();
    let (addr, front) = runtime
        .block_on(HttpFront::start_with(
            engine,
            FrontOptions {
                credentials: Some(FrontCredentials {
                    user: USER.to_owned(),
                    password: PASSWORD.to_owned(),
                }),
                tls: Some(pki.server(&["localhost"])),
                ..FrontOptions::default()
            },
        ))
        .unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, pki.ca_pem()).unwrap();
    let password_file = dir.join("password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let config = dir.join("capcat.toml");
    std::fs::write(
        &config,
        format!(
            "catalog_user = \"{USER}\"\ncatalog_ca_file = {:?}\nstatus_interval_s = 0.05\n",
            ca.display().to_string()
        ),
    )
    .unwrap();
    let run = Run {
        config: config.clone(),
        spool: dir.join("spool"),
        store: dir.join("store"),
        url: format!("https://localhost:{}", addr.port()),
    };
    tensor_file(&dir.join("in"));
    let input = dir.join("in");
    let input = input.to_str().unwrap();
    let mut seen = Seen(Vec::new());

    // The password from the environment: ingest, search, settings, status.
    let env = [("CAPCAT_CATALOG_PASSWORD", PASSWORD)];
    for args in [
        vec!["ingest", input, "--tenant", "acme", "--run", "r1"],
        vec!["search", "--tenant", "acme"],
        vec!["settings"],
        vec!["status"],
        vec!["schema", "check"],
    ] {
        let (ok, text) = run.capcat(&args, &env);
        assert!(ok, "capcat {args:?} failed:\n{text}");
        seen.add(
            format!("capcat {args:?} (password from the environment)"),
            text,
        );
    }
    let (_, settings) = run.capcat(&["settings"], &env);
    assert!(
        settings.contains("catalog_password = \"<redacted>\""),
        "{settings}"
    );
    let (_, searched) = run.capcat(&["search", "--tenant", "acme"], &env);
    assert!(
        searched.contains("acme/"),
        "the ingest was not found:\n{searched}"
    );
    seen.add(
        "the status file",
        std::fs::read_to_string(run.spool.join("status.json")).unwrap(),
    );

    // From a password file, and from the configuration file itself.
    let file_env = [(
        "CAPCAT_CATALOG_PASSWORD_FILE",
        password_file.to_str().unwrap(),
    )];
    let (ok, text) = run.capcat(&["search", "--tenant", "acme"], &file_env);
    assert!(ok, "a password file was not used:\n{text}");
    seen.add("capcat search (password file)", text);
    let in_file = Run {
        config: dir.join("with-password.toml"),
        spool: run.spool.clone(),
        store: run.store.clone(),
        url: run.url.clone(),
    };
    std::fs::write(
        &in_file.config,
        format!(
            "{}catalog_password = \"{PASSWORD}\"\n",
            std::fs::read_to_string(&config).unwrap()
        ),
    )
    .unwrap();
    for args in [vec!["search", "--tenant", "acme"], vec!["settings"]] {
        let (ok, text) = in_file.capcat(&args, &[]);
        assert!(ok, "capcat {args:?} with the password in the file:\n{text}");
        seen.add(
            format!("capcat {args:?} (password in the config file)"),
            text,
        );
    }

    // Refusals: a wrong password, and none (the first configuration file
    // names none). Each names what to fix; `status` still reports.
    for env in [vec![("CAPCAT_CATALOG_PASSWORD", WRONG)], vec![]] {
        for args in [vec!["search", "--tenant", "acme"], vec!["status"]] {
            let (ok, text) = run.capcat(&args, &env);
            if args[0] == "search" {
                assert!(!ok, "capcat {args:?} {env:?} passed:\n{text}");
                assert!(
                    text.contains("wrong user or password")
                        && text.contains("CAPCAT_CATALOG_PASSWORD"),
                    "the refusal does not say what to fix:\n{text}"
                );
            }
            seen.add(format!("capcat {args:?} {env:?} (refused)"), text);
        }
    }
    seen.add(
        "the status file after the refusals",
        std::fs::read_to_string(run.spool.join("status.json")).unwrap(),
    );
    assert_no_secret(&seen);
    println!(
        "{test}: {} outputs checked, no password in any",
        seen.0.len()
    );
    runtime.block_on(front.shutdown());
}
