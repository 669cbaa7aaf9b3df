//! The S3 test server (`CAPCAT_S3_SERVER_BIN`), one per test, on 127.0.0.1
//! with its own data directory and bucket.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capcat_s3::{S3Config, S3Credentials, S3Retry, S3Store, S3Timeouts};

pub(crate) const ACCESS_KEY: &str = "capcat-test-access";
pub(crate) const SECRET_KEY: &str = "capcat-test-secret";

/// The path of the server binary, or `None` after printing a skip line.
/// With `CAPCAT_REQUIRE_ENGINES=1` a missing binary fails the test instead.
pub(crate) fn server_binary(test: &str) -> Option<PathBuf> {
    match std::env::var_os("CAPCAT_S3_SERVER_BIN") {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => {
            if std::env::var("CAPCAT_REQUIRE_ENGINES").as_deref() == Ok("1") {
                panic!("{test}: CAPCAT_S3_SERVER_BIN is not set and CAPCAT_REQUIRE_ENGINES=1");
            }
            println!(
                "{test}: skipped: CAPCAT_S3_SERVER_BIN is not set (run `cargo xtask build-s3-server`)"
            );
            None
        }
    }
}

/// A running test server. Killed when dropped.
pub(crate) struct TestServer {
    binary: PathBuf,
    data: tempfile::TempDir,
    child: Option<Child>,
    address: SocketAddr,
    pub(crate) bucket: String,
}

impl TestServer {
    /// Starts a server for `test`, or returns `None` when the binary is not
    /// configured (see [`server_binary`]).
    pub(crate) fn start(test: &str) -> Option<Self> {
        let binary = server_binary(test)?;
        let data = tempfile::tempdir().expect("temp dir for the server's data");
        let (child, address) = spawn(&binary, data.path(), 0);
        let mut bucket: String = format!("capcat-{test}")
            .replace('_', "-")
            .chars()
            .take(63)
            .collect();
        while bucket.ends_with('-') {
            bucket.pop();
        }
        Some(Self {
            binary,
            data,
            child: Some(child),
            address,
            bucket,
        })
    }

    /// The server's data directory (objects live at `<dir>/<bucket>/<key>`).
    pub(crate) fn data_dir(&self) -> &Path {
        self.data.path()
    }

    /// The path of the file holding `key`.
    pub(crate) fn object_path(&self, key: &str) -> PathBuf {
        self.data_dir().join(&self.bucket).join(key)
    }

    /// The address the server listens on (plain HTTP, 127.0.0.1).
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    /// The endpoint URL.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// A client configuration with short timeouts and one retry, so fault
    /// tests finish quickly.
    pub(crate) fn config(&self, secret: &str) -> S3Config {
        let mut config = S3Config::new(
            self.endpoint(),
            "us-east-1",
            self.bucket.clone(),
            S3Credentials::new_static(ACCESS_KEY, secret),
        );
        config.allow_http = true;
        config.timeouts = S3Timeouts {
            connect: Duration::from_secs(2),
            read: Duration::from_secs(10),
            attempt: Duration::from_secs(60),
            operation: Duration::from_secs(120),
        };
        config.retry = S3Retry {
            max_attempts: 2,
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(100),
        };
        config
    }

    /// A store on this server's bucket, created.
    pub(crate) async fn store(&self) -> S3Store {
        let store = S3Store::new(&self.config(SECRET_KEY)).expect("valid test config");
        store.create_bucket().await.expect("create the test bucket");
        store
    }

    /// SIGKILLs the server: no graceful shutdown, as in a crash.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same data directory and port.
    pub(crate) fn restart(&mut self) {
        self.kill();
        let (child, address) = spawn(&self.binary, self.data.path(), self.address.port());
        assert_eq!(
            address, self.address,
            "the restarted server must listen where the client points"
        );
        self.child = Some(child);
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Spawns the binary and reads the bound address from its first stdout line.
fn spawn(binary: &Path, root: &Path, port: u16) -> (Child, SocketAddr) {
    let mut child = Command::new(binary)
        .arg("--root")
        .arg(root)
        .arg("--port")
        .arg(port.to_string())
        .arg("--access-key")
        .arg(ACCESS_KEY)
        .arg("--secret-key")
        .arg(SECRET_KEY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // Inherited, so the test harness captures it and a full pipe can
        // never block the server.
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut line = String::new();
    // The server prints its address before it accepts anything; a server
    // that dies first closes stdout, and read_line returns 0.
    let read = BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the server's first line");
    if read == 0 {
        let status = child.wait();
        panic!(
            "the S3 test server exited before printing its address ({status:?}); see its stderr above"
        );
    }
    let address = line
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("bad address line {line:?}: {e}"));
    (child, address)
}
