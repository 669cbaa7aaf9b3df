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
//! and ClickHouse's exception text as the body. It listens on 127.0.0.1 only.

pub(crate) mod compressed;
pub(crate) mod form;
pub(crate) mod handler;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinHandle;

use crate::engine::Engine;

/// Most HTTP connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 64;

/// Why the front could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpFrontError {
    /// Binding 127.0.0.1 failed.
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        /// The port asked for (0: any).
        port: u16,
        /// The socket error.
        #[source]
        source: std::io::Error,
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
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .await
            .map_err(|source| HttpFrontError::Bind { port, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| HttpFrontError::Bind { port, source })?;
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(serve(listener, engine, stopped));
        tracing::info!(%addr, "ClickHouse-HTTP front listening");
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

async fn serve(listener: TcpListener, engine: Engine, mut stopped: oneshot::Receiver<()>) {
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
        let engine = engine.clone();
        connections.spawn(async move {
            let service = service_fn(move |request| {
                let engine = engine.clone();
                async move { Ok::<_, std::convert::Infallible>(handler::handle(engine, request).await) }
            });
            if let Err(error) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, "HTTP front connection ended with an error");
            }
            drop(permit);
        });
        // Reap finished connections so the set stays bounded by the permits.
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
}
