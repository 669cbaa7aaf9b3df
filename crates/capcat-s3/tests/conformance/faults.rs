//! Faults only a server can produce: wrong secrets, a crash mid-PUT,
//! timeouts, refused connections and 5xx answers. Each checks the error
//! class, and the reconcile cases check that a failed HEAD is an error with
//! its key, never a foreign object.

use std::time::Duration;

use bytes::Bytes;
use capcat_s3::reconcile::{self, ListLimits, ListedPack};
use capcat_s3::{
    CatalogPrefix, ErrorClass, PackKey, PackStore, S3Config, S3Credentials, S3Retry, S3Store,
    S3Timeouts, UserMetadata, crc64nvme,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use crate::server::{SECRET_KEY, TestServer};
use crate::suite::{pack_id, pack_metadata, pattern};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_secret_is_refused_as_auth() {
    let Some(server) = TestServer::start("wrong_secret_is_refused_as_auth") else {
        return;
    };
    let good = server.store().await;
    let bad = S3Store::new(&server.config("not-the-secret")).expect("valid config");
    let catalog = CatalogPrefix::new("auth").expect("valid");
    let body = pattern(1_000, 1);
    let meta = pack_metadata(pack_id(1), &body, 1);
    let key = PackKey::new(catalog.clone(), meta.pack_id).object_key();

    let error = bad
        .put_pack(&catalog, body.clone(), &meta)
        .await
        .expect_err("put with a wrong secret");
    assert_eq!(error.class(), ErrorClass::Auth, "{error}");
    good.put_pack(&catalog, body, &meta)
        .await
        .expect("put with the right secret");
    let error = bad.head(&key).await.expect_err("head with a wrong secret");
    assert_eq!(error.class(), ErrorClass::Auth, "{error}");
    let error = bad.get(&key).await.expect_err("get with a wrong secret");
    assert_eq!(error.class(), ErrorClass::Auth, "{error}");
    let error = bad
        .list_page("v1/", None, 10)
        .await
        .expect_err("list with a wrong secret");
    assert_eq!(error.class(), ErrorClass::Auth, "{error}");
    let error = bad
        .delete(&key)
        .await
        .expect_err("delete with a wrong secret");
    assert_eq!(error.class(), ErrorClass::Auth, "{error}");
    good.head(&key).await.expect("the object is still there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_killed_during_put_keeps_the_old_object() {
    let Some(mut server) = TestServer::start("server_killed_during_put") else {
        return;
    };
    let store = server.store().await;
    let catalog = CatalogPrefix::new("crash").expect("valid");
    let old = pattern(50_000, 2);
    let old_meta = pack_metadata(pack_id(1), &old, 10);
    store
        .put_pack(&catalog, old.clone(), &old_meta)
        .await
        .expect("put the old object");

    // Overwrite it with 64 MiB (same key; in production a retry of the same
    // pack) and kill the server while the body is still arriving: s3s-fs
    // writes to `.tmp.*.internal.part` in its root and renames at the end.
    let new = pattern(64 << 20, 3);
    let new_meta = capcat_s3::PackMetadata {
        pack_id: old_meta.pack_id,
        ..pack_metadata(old_meta.pack_id, &new, 20)
    };
    let upload = {
        let store = store.clone();
        let catalog = catalog.clone();
        tokio::spawn(async move { store.put_pack(&catalog, new, &new_meta).await })
    };
    let partial = wait_for_partial_upload(server.data_dir()).await;
    server.kill();
    let written = std::fs::metadata(&partial).map(|m| m.len()).unwrap_or(0);
    assert!(
        written < 64 << 20,
        "the kill must land mid-body ({written} bytes written)"
    );

    let error = upload
        .await
        .expect("upload task")
        .expect_err("the PUT cannot succeed");
    assert_eq!(error.class(), ErrorClass::Transient, "{error}");

    server.restart();
    let key = PackKey::new(catalog, old_meta.pack_id).object_key();
    let head = store.head(&key).await.expect("head after restart");
    assert_eq!(
        head.pack_metadata(),
        Ok(old_meta),
        "the old object's metadata is intact"
    );
    assert_eq!(
        store.get(&key).await.expect("get after restart"),
        old,
        "the old object's bytes are intact"
    );
}

/// Waits (bounded) until the server has an upload in progress and returns
/// its temporary file.
async fn wait_for_partial_upload(root: &std::path::Path) -> std::path::PathBuf {
    for _ in 0..20_000 {
        if let Ok(entries) = std::fs::read_dir(root) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(".tmp.") && entry.metadata().is_ok_and(|m| m.len() > 0) {
                    return entry.path();
                }
            }
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    panic!("no upload in progress appeared under {}", root.display());
}

/// A client of `endpoint` with short timeouts and no retry.
fn impatient_store(endpoint: String) -> S3Store {
    let mut config = S3Config::new(
        endpoint,
        "us-east-1",
        "capcat-faults",
        S3Credentials::new_static("ak", "sk"),
    );
    config.allow_http = true;
    config.timeouts = S3Timeouts {
        connect: Duration::from_millis(500),
        read: Duration::from_millis(300),
        attempt: Duration::from_secs(1),
        operation: Duration::from_secs(2),
    };
    config.retry = S3Retry {
        max_attempts: 1,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(10),
    };
    S3Store::new(&config).expect("valid config")
}

fn listed(catalog: &CatalogPrefix, n: u128) -> ListedPack {
    ListedPack {
        key: PackKey::new(catalog.clone(), pack_id(n)),
        size: 1,
    }
}

/// Asserts that HEADing one pack through `store` is recorded as an error of
/// `class` naming the key, and not as a foreign object.
async fn assert_head_error(store: &S3Store, class: ErrorClass) {
    let catalog = CatalogPrefix::new("faults").expect("valid");
    let pack = listed(&catalog, 7);
    let sweep = reconcile::head_packs(store, std::slice::from_ref(&pack)).await;
    assert_eq!(
        sweep.foreign.count, 0,
        "a failed HEAD is never a foreign object: {sweep:?}"
    );
    assert!(
        sweep.verified.is_empty() && sweep.gone.is_empty(),
        "{sweep:?}"
    );
    assert_eq!(sweep.errors.len(), 1, "{sweep:?}");
    assert_eq!(sweep.errors[0].key, pack.key);
    assert_eq!(
        sweep.errors[0].error.class(),
        class,
        "{}",
        sweep.errors[0].error
    );
    assert_eq!(sweep.errors[0].error.key(), pack.key.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_head_refused_by_auth_is_an_error_not_a_foreign_object() {
    let Some(server) = TestServer::start("reconcile_head_refused_by_auth") else {
        return;
    };
    let good = server.store().await;
    let catalog = CatalogPrefix::new("faults").expect("valid");
    let body = pattern(10, 4);
    good.put_pack(&catalog, body.clone(), &pack_metadata(pack_id(7), &body, 1))
        .await
        .expect("put");
    let listing = reconcile::list_catalog_packs(&good, &catalog, ListLimits::default())
        .await
        .expect("list");
    assert_eq!(
        listing.packs,
        vec![listed(&catalog, 7)]
            .into_iter()
            .map(|p| ListedPack { size: 10, ..p })
            .collect::<Vec<_>>()
    );
    // The listing worked; the HEAD is answered 403.
    let bad = S3Store::new(&server.config("not-the-secret")).expect("valid config");
    assert_head_error(&bad, ErrorClass::Auth).await;
    // With the right secret the same pack verifies.
    let sweep = reconcile::head_packs(&good, &listing.packs).await;
    assert_eq!(sweep.verified.len(), 1);
    let _ = SECRET_KEY;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_head_timeout_is_a_transient_error() {
    // A server that accepts connections and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        for _ in 0..16 {
            match listener.accept().await {
                Ok((socket, _)) => held.push(socket),
                Err(_) => break,
            }
        }
        held
    });
    let started = std::time::Instant::now();
    assert_head_error(&impatient_store(endpoint), ErrorClass::Transient).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the timeouts bound the HEAD"
    );
    holder.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_head_5xx_is_a_transient_error() {
    // A server that answers every request with 503.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    let responder = tokio::spawn(async move {
        for _ in 0..16 {
            let Ok((mut socket, _)) = listener.accept().await else {
                break;
            };
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0_u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 65_536 {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let _ = socket
                    .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    assert_head_error(&impatient_store(endpoint), ErrorClass::Transient).await;
    responder.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connection_is_transient() {
    // A port nobody listens on: bind one, note it, close it.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let store = impatient_store(format!("http://127.0.0.1:{port}"));
    let key = capcat_s3::ObjectKey::new("v1/x/y.pack").expect("valid");
    let error = store
        .put(
            &key,
            Bytes::from_static(b"x"),
            crc64nvme(b"x"),
            &UserMetadata::default(),
        )
        .await
        .expect_err("refused");
    assert_eq!(error.class(), ErrorClass::Transient, "{error}");
    assert_head_error(&store, ErrorClass::Transient).await;
}
