//! A ClickHouse-HTTP front over the embedded engine, for tests and local
//! development: the part of ClickHouse's HTTP interface the `clickhouse`
//! crate uses, so that crate runs unchanged against an in-process engine.
//!
//! Served: `GET /ping` and `GET /` (`Ok.\n`); `POST /` with the SQL in the
//! body, in the `query` URL parameter (the body then being the INSERT data,
//! LZ4-framed with `decompress=1`) or in a multipart `query` field;
//! `param_<name>` in the URL or multipart; `default_format`; `database`;
//! every other URL parameter as a setting; `compress=1` responses. Errors are
//! HTTP 500 (400 for a malformed request) with `X-ClickHouse-Exception-Code`
//! and ClickHouse's exception text as the body.
//!
//! [`FrontOptions`] make it a stand-in for a production server: a user and
//! password every request must carry (`X-ClickHouse-User` and
//! `X-ClickHouse-Key`, as the `clickhouse` crate sends them; a refusal is
//! ClickHouse's own `AUTHENTICATION_FAILED`, code 516, HTTP 403), and TLS
//! with a given certificate. It binds 127.0.0.1 unless told otherwise, and
//! refuses any other address without a password.

pub(crate) mod compressed;
pub(crate) mod form;
pub(crate) mod handler;
mod options;
#[cfg(feature = "test-certificates")]
pub(crate) mod test_pki;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::engine::Engine;

pub use options::{FrontCredentials, FrontOptions, FrontTls};

/// Most HTTP connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 64;

/// Why the front could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpFrontError {
    /// Binding the address failed.
    #[error("cannot listen on {ip}:{port}: {source}")]
    Bind {
        /// The address asked for.
        ip: IpAddr,
        /// The port asked for (0: any).
        port: u16,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// An address other than loopback without credentials: anyone who can
    /// reach the port could read and write the catalog.
    #[error(
        "refusing to listen on {ip} without a password: only a loopback address may serve \
         without credentials"
    )]
    OpenBindWithoutPassword {
        /// The address asked for.
        ip: IpAddr,
    },
    /// The TLS certificate or key cannot be used.
    #[error("TLS: {reason}")]
    Tls {
        /// What is wrong with them.
        reason: String,
    },
}

/// A running front. Dropping it stops accepting connections and aborts the
/// ones in flight; [`HttpFront::shutdown`] does the same and waits.
#[derive(Debug)]
pub struct HttpFront {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl HttpFront {
    /// Starts the front on an ephemeral port of 127.0.0.1, on the current
    /// tokio runtime. Returns the address to give a client
    /// (`http://{addr}`) and the handle that keeps it running.
    pub async fn start(engine: Engine) -> Result<(SocketAddr, Self), HttpFrontError> {
        Self::start_on(engine, 0).await
    }

    /// [`HttpFront::start`] on a given port of 127.0.0.1.
    pub async fn start_on(engine: Engine, port: u16) -> Result<(SocketAddr, Self), HttpFrontError> {
        Self::start_with(
            engine,
            FrontOptions {
                port,
                ..FrontOptions::default()
            },
        )
        .await
    }

    /// Starts the front as `options` say (address, credentials, TLS).
    ///
    /// # Errors
    /// The address cannot be bound, is not loopback and has no password,
    /// or the TLS certificate or key is refused.
    pub async fn start_with(
        engine: Engine,
        options: FrontOptions,
    ) -> Result<(SocketAddr, Self), HttpFrontError> {
        let ip = options.bind.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        if !ip.is_loopback() && options.credentials.is_none() {
            return Err(HttpFrontError::OpenBindWithoutPassword { ip });
        }
        let tls = match &options.tls {
            Some(tls) => Some(TlsAcceptor::from(Arc::new(tls.server_config()?))),
            None => None,
        };
        let port = options.port;
        let listener = TcpListener::bind((ip, port))
            .await
            .map_err(|source| HttpFrontError::Bind { ip, port, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| HttpFrontError::Bind { ip, port, source })?;
        let (stop, stopped) = oneshot::channel();
        let served = Served {
            engine,
            credentials: options.credentials.map(Arc::new),
            tls,
        };
        let task = tokio::spawn(serve(listener, served, stopped));
        tracing::info!(%addr, tls = options.tls.is_some(), "ClickHouse-HTTP front listening");
        Ok((
            addr,
            Self {
                addr,
                stop: Some(stop),
                task: Some(task),
            },
        ))
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`, for `clickhouse::Client::with_url`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the front and waits for its accept loop to end.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _already_stopped = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _result = task.await;
        }
    }
}

impl Drop for HttpFront {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// What every connection of one front shares.
#[derive(Clone)]
struct Served {
    engine: Engine,
    credentials: Option<Arc<FrontCredentials>>,
    tls: Option<TlsAcceptor>,
}

async fn serve(listener: TcpListener, served: Served, mut stopped: oneshot::Receiver<()>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let permit = tokio::select! {
            _ = &mut stopped => break,
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_closed) => break,
            },
        };
        let accepted = tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(error) => {
                // Typically EMFILE: log and keep serving the others.
                tracing::warn!(%error, "HTTP front accept failed");
                continue;
            }
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let served = served.clone();
        connections.spawn(async move {
            let Served {
                engine,
                credentials,
                tls,
            } = served;
            let service = service_fn(move |request| {
                let (engine, credentials) = (engine.clone(), credentials.clone());
                async move {
                    Ok::<_, std::convert::Infallible>(
                        handler::handle(engine, credentials.as_deref(), request).await,
                    )
                }
            });
            let result = match tls {
                // The handshake runs in the connection's own task, so a
                // slow or hostile client holds only its own permit.
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(stream) => {
                        http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await
                    }
                    Err(error) => {
                        tracing::debug!(%error, "HTTP front TLS handshake failed");
                        Ok(())
                    }
                },
                None => {
                    http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
            };
            if let Err(error) = result {
                tracing::debug!(%error, "HTTP front connection ended with an error");
            }
            drop(permit);
        });
        // Reap finished connections so the set stays bounded by the permits.
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
}
