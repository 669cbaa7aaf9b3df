//! The catalog over TLS with a password, on the real engine behind
//! capcat-chdb's HTTP front serving a certificate made for the test: the
//! happy path, and every refusal a production user can run into, each a
//! typed [`AccessError`] that names what to fix (see docs/security.md).
//!
//! The whole live suite also runs over this front (`cargo xtask test`,
//! `CAPCAT_CATALOG_TRANSPORT=https`); these tests are the refusals.

mod support;

use std::path::Path;

use capcat_chdb::{FrontOptions, HttpFront, TestPki};
use capcat_clickhouse::{AccessError, Catalog, CatalogError, HttpOptions, Password};
use capcat_proto::schema::EnsureOutcome;
use support::{TLS_PASSWORD, TLS_USER, engine_or_skip, tls_front};

fn prefix(test: &str) -> String {
    format!(
        "t_{test}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

async fn ensure(
    url: &str,
    options: HttpOptions,
    test: &str,
) -> Result<EnsureOutcome, CatalogError> {
    let catalog = Catalog::http(url, &prefix(test), options)?;
    catalog.ensure_schema().await
}

fn write_ca(dir: &Path, pki: &TestPki) -> std::path::PathBuf {
    let path = dir.join("other-ca.pem");
    std::fs::write(&path, pki.ca_pem()).expect("write a CA file");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_over_tls_with_a_password_creates_its_schema() {
    let Some(engine) = engine_or_skip("tls_happy") else {
        return;
    };
    let (url, _front, options, _dir) = tls_front(engine).await;
    assert!(url.starts_with("https://localhost:"), "{url}");
    assert_eq!(
        ensure(&url, options, "tls_happy")
            .await
            .expect("ensure over TLS"),
        EnsureOutcome::Created
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_refused_by_name_and_never_printed() {
    let Some(engine) = engine_or_skip("tls_password") else {
        return;
    };
    let (url, _front, options, _dir) = tls_front(engine).await;
    let wrong = "not-the-password-71d2";
    for (user, password) in [
        (TLS_USER, Some(wrong)),
        (TLS_USER, None),
        ("intruder", Some(TLS_PASSWORD)),
    ] {
        let attempt = HttpOptions {
            user: Some(user.to_owned()),
            password: password.map(Password::new),
            ..options.clone()
        };
        let error = ensure(&url, attempt, "tls_password")
            .await
            .expect_err("a wrong login must be refused");
        match &error {
            CatalogError::Access(AccessError::AuthenticationFailed { user: named, .. }) => {
                assert_eq!(named, user);
            }
            other => panic!("{user}/{password:?}: {other:?}"),
        }
        let shown = format!("{error} {error:?}");
        for secret in [wrong, TLS_PASSWORD] {
            assert!(!shown.contains(secret), "the password leaked: {shown}");
        }
        assert!(shown.contains("CAPCAT_CATALOG_PASSWORD"), "{shown}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_signed_by_an_unknown_ca_is_refused() {
    let Some(engine) = engine_or_skip("tls_unknown_ca") else {
        return;
    };
    let (url, _front, options, dir) = tls_front(engine).await;
    // No CA file: only the system's roots, which never signed the test CA.
    // And a CA file of another CA: trusted, but not the one that signed.
    let other = write_ca(dir.path(), &TestPki::new());
    for ca_file in [None, Some(other)] {
        let attempt = HttpOptions {
            ca_file: ca_file.clone(),
            ..options.clone()
        };
        match ensure(&url, attempt, "tls_unknown_ca").await {
            Err(CatalogError::Access(AccessError::UntrustedCertificate { detail, .. })) => {
                let error = AccessError::UntrustedCertificate {
                    url: url.clone(),
                    detail,
                };
                assert!(error.to_string().contains("catalog_ca_file"), "{error}");
            }
            other => panic!("{ca_file:?}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_host_is_refused() {
    let Some(engine) = engine_or_skip("tls_hostname") else {
        return;
    };
    let pki = TestPki::new();
    let (addr, _front) = HttpFront::start_with(
        engine,
        FrontOptions {
            tls: Some(pki.server(&["catalog.example.com"])),
            ..FrontOptions::default()
        },
    )
    .await
    .expect("start the TLS front");
    let dir = tempfile::tempdir().expect("a directory");
    let options = HttpOptions {
        ca_file: Some(write_ca(dir.path(), &pki)),
        ..HttpOptions::default()
    };
    for url in [
        format!("https://localhost:{}", addr.port()),
        format!("https://127.0.0.1:{}", addr.port()),
    ] {
        match ensure(&url, options.clone(), "tls_hostname").await {
            Err(CatalogError::Access(AccessError::CertificateNameMismatch { .. })) => {}
            other => panic!("{url}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgrade_to_plain_http_is_refused_both_ways() {
    let Some(engine) = engine_or_skip("tls_downgrade") else {
        return;
    };
    // An https:// URL whose server answers in plain HTTP.
    let (plain, _plain_front) = HttpFront::start(engine.clone())
        .await
        .expect("start the plain front");
    let url = format!("https://localhost:{}", plain.port());
    match ensure(&url, HttpOptions::default(), "tls_downgrade").await {
        Err(CatalogError::Access(AccessError::NotTls { .. })) => {}
        other => panic!("{url}: {other:?}"),
    }
    // A plain http:// URL to the TLS front: the front only speaks TLS, so
    // nothing reaches the engine in clear.
    let (tls_url, _tls_front, options, _dir) = tls_front(engine).await;
    let plain_url = tls_url.replacen("https://", "http://", 1);
    match ensure(&plain_url, options, "tls_downgrade").await {
        Err(CatalogError::Access(AccessError::Failed { .. })) => {}
        other => panic!("{plain_url}: {other:?}"),
    }
    // And a plain URL to a remote host is refused before any connection.
    match Catalog::http(
        "http://catalog.example.com:8123",
        "capcat",
        HttpOptions::default(),
    ) {
        Err(CatalogError::Http(capcat_clickhouse::HttpError::InsecureHttp { .. })) => {}
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_refuses_an_open_address_without_a_password() {
    let Some(engine) = engine_or_skip("front_bind") else {
        return;
    };
    let open = FrontOptions {
        bind: Some(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
        ..FrontOptions::default()
    };
    match HttpFront::start_with(engine, open).await {
        Err(capcat_chdb::HttpFrontError::OpenBindWithoutPassword { .. }) => {}
        other => panic!("{other:?}"),
    }
}
