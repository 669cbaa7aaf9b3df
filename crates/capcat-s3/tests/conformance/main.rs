//! The object-store conformance suite.
//!
//! Each case in `suite` runs against LocalStore, against the S3 test server
//! (`CAPCAT_S3_SERVER_BIN`, started per test on 127.0.0.1 with its own data
//! directory and bucket) and, when `CAPCAT_S3_URL` is set, against that
//! endpoint (`CAPCAT_S3_BUCKET`, default `capcat-test`; `CAPCAT_S3_REGION`,
//! default `us-east-1`; credentials from `AWS_ACCESS_KEY_ID` and
//! `AWS_SECRET_ACCESS_KEY`; each test under its own key prefix). The cases
//! that need to break a server (a killed PUT, wrong secrets, timeouts,
//! 5xx) live in `faults`; the S3 test server behind a TLS proxy (a private
//! CA, a certificate for another host, a wrong secret) in `tls`.

mod faults;
mod server;
mod suite;
mod tls;

use suite::Fixture;

/// Runs each named case of `suite` against every store.
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let dir = tempfile::tempdir().expect("temp dir");
                    let store = capcat_s3::LocalStore::open(dir.path()).expect("open the local store");
                    crate::suite::$case(&crate::Fixture { store, ns: "t".to_owned() }).await;
                }
            )*
        }
        mod s3_test_server {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(server) = crate::server::TestServer::start(stringify!($case)) else { return };
                    let store = server.store().await;
                    crate::suite::$case(&crate::Fixture { store, ns: "t".to_owned() }).await;
                }
            )*
        }
        mod external_endpoint {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(fixture) = crate::external_fixture(stringify!($case)).await else { return };
                    crate::suite::$case(&fixture).await;
                }
            )*
        }
    };
}

conformance!(
    metadata_round_trips,
    range_reads,
    missing_keys_and_deletes,
    overwrite_replaces_the_whole_object,
    pagination_covers_every_key_once,
    wrong_checksum_is_refused,
    listing_skips_and_counts_foreign_keys,
    a_version_1_pack_without_a_crc_is_still_a_pack,
);

/// The external endpoint of `CAPCAT_S3_URL`, with a namespace of its own
/// (the bucket is shared, so every key of the test starts with it). `None`
/// after a skip line when the variable is unset: the external endpoint is
/// optional even with `CAPCAT_REQUIRE_ENGINES=1`.
async fn external_fixture(test: &str) -> Option<Fixture<capcat_s3::S3Store>> {
    let Ok(endpoint) = std::env::var("CAPCAT_S3_URL") else {
        println!("{test}: skipped against an external endpoint: CAPCAT_S3_URL is not set");
        return None;
    };
    let bucket = std::env::var("CAPCAT_S3_BUCKET").unwrap_or_else(|_| "capcat-test".to_owned());
    let region = std::env::var("CAPCAT_S3_REGION").unwrap_or_else(|_| "us-east-1".to_owned());
    let mut config = capcat_s3::S3Config::new(
        &endpoint,
        region,
        bucket,
        capcat_s3::S3Credentials::Environment,
    );
    config.allow_http = endpoint.starts_with("http://");
    let store = capcat_s3::S3Store::new(&config).expect("valid CAPCAT_S3_URL configuration");
    store
        .create_bucket()
        .await
        .expect("create or reuse the bucket");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    let ns = format!("capcat-test-{test}-{}-{nanos}", std::process::id());
    Some(Fixture { store, ns })
}

/// Flips the last byte of a file.
fn flip_last_byte(path: &std::path::Path) {
    let mut bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let last = bytes.last_mut().expect("a non-empty object");
    *last ^= 0xff;
    std::fs::write(path, bytes).expect("write the corrupted object");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_corrupted_bytes_fail_the_get() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = capcat_s3::LocalStore::open(dir.path()).expect("open");
    let root = dir.path().to_path_buf();
    let fixture = Fixture {
        store,
        ns: "t".to_owned(),
    };
    suite::corrupted_bytes_fail_the_get(&fixture, |key| flip_last_byte(&root.join(key.as_str())))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_test_server_corrupted_bytes_fail_the_get() {
    let Some(server) = server::TestServer::start("corrupted_bytes_fail_the_get") else {
        return;
    };
    let store = server.store().await;
    let fixture = Fixture {
        store,
        ns: "t".to_owned(),
    };
    suite::corrupted_bytes_fail_the_get(&fixture, |key| {
        flip_last_byte(&server.object_path(key.as_str()))
    })
    .await;
}
