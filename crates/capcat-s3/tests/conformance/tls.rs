//! The S3 test server behind a TLS-terminating proxy, with a CA and server
//! certificates generated at test time: the client trusts a private CA named
//! by `ca_file`, refuses a certificate no trusted CA signed or one for
//! another host, and names refused credentials without their secret, each
//! as a typed error at the first request.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use capcat_s3::{
    CatalogPrefix, CredentialsOrigin, ErrorClass, PackKey, PackStore, S3Config, S3Store, StoreError,
};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::server::{ACCESS_KEY, SECRET_KEY, TestServer};
use crate::suite::{pack_id, pack_metadata, pattern};

/// A CA made for one test, with its certificate in a PEM file for
/// `ca_file`.
struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: tempfile::TempDir,
}

impl TestCa {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("capcat test CA {name}"));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("self-signed CA");
        let dir = tempfile::tempdir().expect("temp dir for the CA file");
        std::fs::write(dir.path().join("ca.pem"), issuer.pem()).expect("write the CA file");
        Self { issuer, dir }
    }

    /// The CA's PEM file.
    fn pem_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A server certificate for `names` (DNS names or IP addresses), signed
    /// by this CA, and its key.
    fn server_certificate(
        &self,
        names: &[&str],
    ) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let names: Vec<String> = names.iter().map(|&n| n.to_owned()).collect();
        let mut params = CertificateParams::new(names.clone()).expect("server parameters");
        params
            .distinguished_name
            .push(DnType::CommonName, names[0].clone());
        let key = KeyPair::generate().expect("server key");
        let certificate = params
            .signed_by(&key, &*self.issuer)
            .expect("sign the server certificate");
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (vec![certificate.der().clone()], key)
    }
}

/// A TLS-terminating TCP proxy on 127.0.0.1: each connection's handshake
/// with the given certificate, then bytes copied both ways to `backend`.
/// Stops accepting when dropped.
struct TlsProxy {
    address: SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl TlsProxy {
    async fn start(
        backend: SocketAddr,
        (chain, key): (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>),
    ) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS 1.2 and 1.3 with ring")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("the server certificate and its key");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the TLS proxy");
        let address = listener.local_addr().expect("the proxy's address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that refuses the certificate ends the
                    // handshake: nothing to forward.
                    let Ok(mut tls) = acceptor.accept(client).await else {
                        return;
                    };
                    let Ok(mut server) = TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut server).await;
                });
            }
        });
        Self {
            address,
            accepted,
            task,
        }
    }

    /// TCP connections accepted so far (one per TLS handshake attempted).
    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The server's client configuration, pointed at the proxy as `host`
/// over HTTPS, with `secret` and `ca_file`. Two attempts per operation
/// (the server's test config), so a retried handshake would show.
fn https_config(
    server: &TestServer,
    proxy: &TlsProxy,
    host: &str,
    secret: &str,
    ca_file: Option<PathBuf>,
) -> S3Config {
    let mut config = server.config(secret);
    config.endpoint = format!("https://{host}:{}", proxy.address.port());
    config.allow_http = false;
    config.ca_file = ca_file;
    config
}

/// A test server with its bucket created (over plain HTTP), or `None`
/// when the binary is not configured.
async fn server_with_bucket(test: &str) -> Option<TestServer> {
    let server = TestServer::start(test)?;
    server.store().await;
    Some(server)
}

/// The first request of a fresh store: a HEAD.
async fn first_request(store: &S3Store) -> StoreError {
    let catalog = CatalogPrefix::new("tls").expect("valid");
    let key = PackKey::new(catalog, pack_id(1)).object_key();
    store
        .head(&key)
        .await
        .expect_err("the first request must fail")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_in_ca_file_is_trusted_over_https() {
    let Some(server) = server_with_bucket("tls_private_ca_round_trip").await else {
        return;
    };
    let ca = TestCa::new("round trip");
    let proxy = TlsProxy::start(
        server.address(),
        ca.server_certificate(&["localhost", "127.0.0.1"]),
    )
    .await;
    let catalog = CatalogPrefix::new("tls").expect("valid");
    let body = pattern(100_000, 9);
    let meta = pack_metadata(pack_id(1), &body, 3);
    let key = PackKey::new(catalog.clone(), meta.pack_id).object_key();

    let by_name = S3Store::new(&https_config(
        &server,
        &proxy,
        "localhost",
        SECRET_KEY,
        Some(ca.pem_path()),
    ))
    .expect("valid https config with a CA file");
    by_name
        .put_pack(&catalog, body.clone(), &meta)
        .await
        .expect("put over https://localhost");
    assert_eq!(
        by_name.get(&key).await.expect("get over https://localhost"),
        body
    );

    // The certificate's IP address name is checked too.
    let by_address = S3Store::new(&https_config(
        &server,
        &proxy,
        "127.0.0.1",
        SECRET_KEY,
        Some(ca.pem_path()),
    ))
    .expect("valid https config with a CA file");
    let head = by_address
        .head(&key)
        .await
        .expect("head over https://127.0.0.1");
    assert_eq!(head.pack_metadata(), Ok(meta));
    assert!(proxy.accepted() >= 2, "both stores went through the proxy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_private_ca_the_certificate_is_untrusted() {
    let Some(server) = server_with_bucket("tls_untrusted_certificate").await else {
        return;
    };
    let ca = TestCa::new("untrusted");
    let proxy = TlsProxy::start(
        server.address(),
        ca.server_certificate(&["localhost", "127.0.0.1"]),
    )
    .await;

    // No ca_file: the system roots alone do not know the CA.
    let store = S3Store::new(&https_config(
        &server,
        &proxy,
        "localhost",
        SECRET_KEY,
        None,
    ))
    .expect("valid https config");
    let error = first_request(&store).await;
    let endpoint = format!("https://localhost:{}", proxy.address.port());
    assert!(
        matches!(&error, StoreError::UntrustedCertificate { endpoint: e, .. } if *e == endpoint),
        "{error:?}"
    );
    assert_eq!(error.class(), ErrorClass::Auth, "{error}");
    let message = error.to_string();
    assert!(
        message.contains("not trusted") && message.contains("ca_file"),
        "{message}"
    );
    // Refused once, not retried: the next handshake would refuse it again.
    assert_eq!(proxy.accepted(), 1, "one handshake, no retry: {error}");

    // A ca_file of another CA adds that CA only.
    let other = TestCa::new("other");
    let store = S3Store::new(&https_config(
        &server,
        &proxy,
        "localhost",
        SECRET_KEY,
        Some(other.pem_path()),
    ))
    .expect("valid https config with a CA file");
    let error = first_request(&store).await;
    assert!(
        matches!(error, StoreError::UntrustedCertificate { .. }),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_host_is_a_name_mismatch() {
    let Some(server) = server_with_bucket("tls_name_mismatch").await else {
        return;
    };
    let ca = TestCa::new("name mismatch");
    let proxy = TlsProxy::start(server.address(), ca.server_certificate(&["other.invalid"])).await;

    let store = S3Store::new(&https_config(
        &server,
        &proxy,
        "localhost",
        SECRET_KEY,
        Some(ca.pem_path()),
    ))
    .expect("valid https config with a CA file");
    let error = first_request(&store).await;
    assert!(
        matches!(&error, StoreError::CertificateNameMismatch { host, .. } if host == "localhost"),
        "{error:?}"
    );
    assert_eq!(error.class(), ErrorClass::Auth, "{error}");
    let message = error.to_string();
    assert!(
        message.contains("does not name the host \"localhost\""),
        "{message}"
    );
    assert_eq!(proxy.accepted(), 1, "one handshake, no retry: {error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_over_tls_is_refused_credentials_without_the_secret() {
    let Some(server) = server_with_bucket("tls_wrong_secret").await else {
        return;
    };
    let ca = TestCa::new("wrong secret");
    let proxy = TlsProxy::start(
        server.address(),
        ca.server_certificate(&["localhost", "127.0.0.1"]),
    )
    .await;
    let secret = "wrong-secret-9f3c1a77e2";
    let store = S3Store::new(&https_config(
        &server,
        &proxy,
        "localhost",
        secret,
        Some(ca.pem_path()),
    ))
    .expect("valid https config with a CA file");
    let catalog = CatalogPrefix::new("tls").expect("valid");
    let body = pattern(1_000, 5);
    let error = store
        .put_pack(&catalog, body.clone(), &pack_metadata(pack_id(2), &body, 1))
        .await
        .expect_err("the first request, signed with a wrong secret");

    assert!(
        matches!(
            &error,
            StoreError::CredentialsRefused {
                credentials: CredentialsOrigin::Config { access_key_id },
                ..
            } if access_key_id == ACCESS_KEY
        ),
        "{error:?}"
    );
    assert_eq!(error.class(), ErrorClass::Auth, "{error}");
    let (display, debug) = (error.to_string(), format!("{error:?}"));
    assert!(
        display.contains("refused the credentials")
            && display.contains("static credentials")
            && display.contains(ACCESS_KEY),
        "{display}"
    );
    for text in [&display, &debug] {
        assert!(!text.contains(secret), "the secret leaked: {text}");
    }
}
