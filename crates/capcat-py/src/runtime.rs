//! The one tokio runtime of the package, and waiting on it without the GIL.

use std::sync::OnceLock;

use pyo3::prelude::*;

use crate::errors::Raised;

/// The runtime every service and reader of this process runs on. It lives
/// as long as the process: a runtime dropped while Python still holds a
/// service would abort that service's tasks under it.
fn runtime() -> Result<&'static tokio::runtime::Runtime, Raised> {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(runtime) = RUNTIME.get() {
        return Ok(runtime);
    }
    // Two workers: the service's cycle and keep-alive tasks, and a caller's
    // read, never wait on each other; more would only compete with the
    // Python threads that produce the captures.
    let built = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("capcat-runtime")
        .enable_all()
        .build()
        .map_err(|e| Raised::new("CapcatError", "Runtime", format!("tokio runtime: {e}")))?;
    // A racing thread may have set it first; either runtime serves, and
    // the loser's is dropped here before it ran anything.
    Ok(RUNTIME.get_or_init(|| built))
}

/// Runs `future` to completion on the runtime with the GIL released, so
/// every other Python thread runs meanwhile.
///
/// # Errors
/// The runtime could not be built, or `future`'s own error.
pub(crate) fn block<T, F>(py: Python<'_>, future: F) -> Result<T, Raised>
where
    F: Future<Output = Result<T, Raised>> + Send,
    T: Send,
{
    let runtime = runtime()?;
    py.detach(|| runtime.block_on(future))
}

/// Logs go through `tracing` to stderr, filtered by `CAPCAT_LOG` (the
/// `RUST_LOG` syntax; `warn` when unset). Set once per process; a host
/// that installed its own subscriber first keeps it.
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CAPCAT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _already_set = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
