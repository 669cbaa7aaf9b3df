//! [`Engine`]: the embedded ClickHouse engine on one data path, with a small
//! pool of connections.
//!
//! Facts about libchdb 26.7.3 this module is built around (each has a test
//! in `tests/engine.rs`):
//! - one connection runs one statement at a time, and several connections to
//!   the same data path run in parallel: so each in-flight statement takes a
//!   connection of its own from a bounded pool;
//! - after a failed statement a connection can hand the failed statement's
//!   partial output to the next one: so a connection is closed after any
//!   error, never returned to the pool;
//! - the engine serves one data path per process, and a second process
//!   cannot open a path the first holds (ClickHouse locks `<path>/status`):
//!   a process-wide registry refuses a second path, and the lock is probed
//!   before connecting so the refusal is a typed error, not a NULL;
//! - closing the last connection shuts the engine down (and the header warns
//!   against doing that repeatedly): an anchor connection, never used for
//!   statements, keeps it up while any [`Engine`] handle lives;
//! - a process that exits with the engine up (a handle in a `static`, leaked,
//!   or alive across `std::process::exit`) runs libchdb's C++ static
//!   destructors while its background threads still use what they destroy,
//!   and dies of SIGSEGV about one exit in two: so an exit hook (`atexit`,
//!   registered after each boot and again after statements, so it runs
//!   before libchdb's destructors) closes every connection and joins
//!   libchdb's threads before those destructors run (`tests/exit.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::error::ChdbError;
use crate::ffi::{self, Outcome, RawConnection};
use crate::request::{Request, quote_identifier, quote_literal};

/// Tuning of an [`Engine`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineOptions {
    /// Most statements in flight at once (one connection each). More
    /// callers wait, up to [`EngineOptions::acquire_timeout`].
    pub max_connections: usize,
    /// How long a statement waits for a free connection before failing with
    /// [`ChdbError::PoolTimeout`].
    pub acquire_timeout: Duration,
    /// Whether the engine may compile expressions, aggregates and sorts to
    /// machine code. Off by default: the engine compiles a shape the third
    /// time it sees it, and the compile (about 20 ms with LLVM on a 2-core
    /// host) lands inside that statement, e.g. an index pass's
    /// `allocate.read_head` took 24 ms instead of 3 ms. Catalog statements
    /// touch a few to a few thousand rows, where compiled code saves less
    /// than the compile costs; docs/embedded-engine.md has the figures.
    pub jit_compile: bool,
}

/// The settings that turn the engine's compilation off, set on every
/// connection when [`EngineOptions::jit_compile`] is false.
const NO_JIT: [(&str, &str); 3] = [
    ("compile_expressions", "0"),
    ("compile_aggregate_expressions", "0"),
    ("compile_sort_description", "0"),
];

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            max_connections: 8,
            acquire_timeout: Duration::from_secs(60),
            jit_compile: false,
        }
    }
}

impl EngineOptions {
    /// Options with `max_connections` set (at least 1).
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// Options with `acquire_timeout` set.
    pub fn with_acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// Options with [`EngineOptions::jit_compile`] set.
    pub fn with_jit_compile(mut self, on: bool) -> Self {
        self.jit_compile = on;
        self
    }
}

/// A snapshot of the pool, for tests and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Open connections waiting for a statement.
    pub idle: usize,
    /// Connections running a statement now.
    pub in_use: usize,
    /// The pool's bound.
    pub max: usize,
    /// Connections closed after an error (or a session-changing statement)
    /// since the engine opened.
    pub discarded: u64,
}

/// The embedded engine on one data path. Cheap to clone; every clone shares
/// the pool. The engine shuts down when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    pool: Pool,
    /// Kept open so the pool emptying never shuts the engine down.
    anchor: Mutex<Option<RawConnection>>,
}

/// The process's open engine, if any: libchdb serves one path per process.
static REGISTRY: Mutex<Option<(PathBuf, Weak<Inner>)>> = Mutex::new(None);
/// Serialises engine boot (first connect) with engine shutdown (last close),
/// so a new path never boots while the previous engine is still closing.
static LIFECYCLE: Mutex<()> = Mutex::new(());
/// Statements run in this process, counted to space the exit hook's
/// re-registrations (see [`arm_exit_hook_after_statement`]).
static STATEMENTS: AtomicU64 = AtomicU64::new(0);
/// Every statement up to this many re-registers the exit hook; after that
/// only statements whose count is a power of two do. Bounds the `atexit`
/// entries at about 4,160 (32 bytes each) however long the process runs.
const DENSE_REGISTRATIONS: u64 = 4_096;
/// Set by the exit hook: libchdb has been shut down for good.
///
/// Also: from the moment it is set nothing in this module logs. The hook
/// runs inside `exit()`, after the main thread's thread-local storage has
/// been destroyed, and `tracing`'s subscriber keeps its per-thread state
/// there: an event from the hook (or from an engine dropped by it) panicked
/// with "cannot access a Thread Local Storage value during or after
/// destruction" on every `RUST_LOG=info` run of the CLI.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Whether this module may still log (the process is not exiting).
fn may_log() -> bool {
    !STOPPED.load(Ordering::Acquire)
}
/// How long the exit hook waits for statements still running on other
/// threads before giving up on stopping the engine. Closing a connection
/// under a running statement is what libchdb does not survive, so the hook
/// waits rather than forcing; the bound keeps a stuck statement from
/// stalling the exit forever.
const EXIT_WAIT: Duration = Duration::from_secs(10);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data (a list of
    // idle connections, a registry slot) that is still consistent, so the
    // poison flag carries no information worth failing for.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Engine {
    /// Opens (or joins) the engine on `data_path`, creating the directory.
    ///
    /// In one process, opening the path that is already open returns a
    /// handle to the same engine (the first opener's options apply);
    /// opening another path fails with [`ChdbError::OtherPathOpen`]. A path
    /// held by another process fails with
    /// [`ChdbError::LockedByAnotherProcess`].
    pub fn open(data_path: impl AsRef<Path>) -> Result<Self, ChdbError> {
        Self::open_with(data_path, EngineOptions::default())
    }

    /// [`Engine::open`] with explicit options.
    pub fn open_with(
        data_path: impl AsRef<Path>,
        options: EngineOptions,
    ) -> Result<Self, ChdbError> {
        let requested = data_path.as_ref();
        std::fs::create_dir_all(requested).map_err(|source| ChdbError::DataPath {
            path: requested.to_path_buf(),
            source,
        })?;
        let path = requested
            .canonicalize()
            .map_err(|source| ChdbError::DataPath {
                path: requested.to_path_buf(),
                source,
            })?;
        let api = ffi::api()?;
        if STOPPED.load(Ordering::Acquire) {
            return Err(ChdbError::Stopped);
        }

        let mut registry = lock(&REGISTRY);
        if let Some((open, weak)) = registry.as_ref()
            && let Some(inner) = weak.upgrade()
        {
            if *open == path {
                return Ok(Self { inner });
            }
            return Err(ChdbError::OtherPathOpen {
                open: open.clone(),
                requested: path,
            });
        }

        let anchor = {
            let _boot = lock(&LIFECYCLE);
            probe_process_lock(&path)?;
            let started = Instant::now();
            let anchor = api
                .connect(&[format!("--path={}", path.display())])?
                .ok_or_else(|| match probe_process_lock(&path) {
                    Err(locked) => locked,
                    Ok(()) => ChdbError::Connect { path: path.clone() },
                })?;
            tracing::info!(
                path = %path.display(),
                boot_ms = started.elapsed().as_millis(),
                "embedded engine started"
            );
            // After the boot, not before: `exit()` runs the most recently
            // registered function first, and booting is when libchdb
            // registers most of its static destructors.
            arm_exit_hook();
            anchor
        };
        let inner = Arc::new(Inner {
            path: path.clone(),
            pool: Pool::new(options),
            anchor: Mutex::new(Some(anchor)),
        });
        *registry = Some((path, Arc::downgrade(&inner)));
        Ok(Self { inner })
    }

    /// The canonical data path.
    pub fn data_path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `sql` with `params` bound to its `{name:Type}` placeholders
    /// (escaped text values) and returns the output in `format`.
    pub fn query<'a>(
        &self,
        sql: &str,
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
        format: &str,
    ) -> Result<Vec<u8>, ChdbError> {
        let request = params
            .into_iter()
            .fold(Request::new(sql).format(format), |r, (n, v)| r.param(n, v));
        self.execute(&request)
    }

    /// Runs one [`Request`] on a connection of its own.
    ///
    /// Blocks the calling thread for the statement's duration: call it from
    /// `tokio::task::spawn_blocking` in async code.
    pub fn execute(&self, request: &Request) -> Result<Vec<u8>, ChdbError> {
        request.validate()?;
        let started = Instant::now();
        let mut lease = self.inner.pool.acquire(&self.inner.path)?;
        let conn = lease.conn_mut();
        let result = conn.prepare(request).and_then(|()| conn.run(request));
        arm_exit_hook_after_statement();
        match &result {
            Ok(output) => {
                if changes_session(&request.sql) {
                    // `SET`/`USE` in the statement itself changed state our
                    // bookkeeping does not know; a fresh connection is cheaper
                    // than guessing.
                    lease.discard();
                }
                tracing::debug!(
                    bytes = output.len(),
                    elapsed_us = started.elapsed().as_micros(),
                    "statement ran"
                );
            }
            Err(error) => {
                lease.discard();
                tracing::debug!(%error, elapsed_us = started.elapsed().as_micros(), "statement failed; connection discarded");
            }
        }
        result
    }

    /// [`Engine::execute`] on tokio's blocking pool, for async callers.
    #[cfg(feature = "tokio")]
    pub async fn execute_async(&self, request: Request) -> Result<Vec<u8>, ChdbError> {
        let engine = self.clone();
        tokio::task::spawn_blocking(move || engine.execute(&request))
            .await
            .map_err(|e| ChdbError::TaskFailed {
                reason: e.to_string(),
            })?
    }

    /// The pool's current state.
    pub fn stats(&self) -> PoolStats {
        self.inner.pool.stats()
    }

    /// The file libchdb was loaded from.
    pub fn library_path(&self) -> PathBuf {
        ffi::api()
            .map(|api| api.path().to_path_buf())
            .unwrap_or_default()
    }

    /// `chdb_version()` of the loaded library.
    pub fn library_version(&self) -> String {
        ffi::api()
            .map(|api| api.version().to_owned())
            .unwrap_or_default()
    }

    /// How long loading the library took (once per process).
    pub fn library_load_time(&self) -> Duration {
        ffi::api().map(|api| api.load_time()).unwrap_or_default()
    }
}

impl Inner {
    /// Closes every connection of this engine for the process's exit, the
    /// anchor last, and refuses statements from now on. Waits up to
    /// [`EXIT_WAIT`] for statements running on other threads; false (and the
    /// engine left up) if they outlast it.
    fn stop_for_exit(&self) -> bool {
        let _shutdown = lock(&LIFECYCLE);
        let mut state = lock(&self.pool.state);
        state.stopped = true;
        let idle = std::mem::take(&mut state.idle);
        let deadline = Instant::now() + EXIT_WAIT;
        while state.in_use > 0 {
            let now = Instant::now();
            if now >= deadline {
                // Statements still running at exit: the engine is left up
                // (closing it under them is the crash the hook avoids). Not
                // logged: see `STOPPED`.
                return false;
            }
            state = self
                .pool
                .freed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(state);
        drop(idle);
        lock(&self.anchor).take();
        true
    }
}

/// Registers [`stop_engine_at_exit`] (again) with `atexit`.
///
/// `exit()` runs registered functions and C++ static destructors from one
/// list, newest first, and libchdb keeps adding destructors after its boot
/// (a function-local static is registered when a statement first reaches
/// it). A destructor registered after the hook runs before it, while the
/// engine is still up, and the shutdown that follows can then crash: one
/// child exit in ten did with a single registration after the boot (none in
/// forty with one after every statement). So the hook is registered again
/// after statements; it acts only the first time it runs.
fn arm_exit_hook() {
    if !ffi::register_exit_hook(stop_engine_at_exit) {
        tracing::warn!("atexit refused the engine's exit hook; the process may crash at exit");
    }
}

/// [`arm_exit_hook`] after every one of the first [`DENSE_REGISTRATIONS`]
/// statements, then after the 8,192nd, 16,384th, ...: a statement that
/// first reaches a code path (and registers its statics) comes early in a
/// process's life, and the number of registrations stays bounded.
fn arm_exit_hook_after_statement() {
    let count = STATEMENTS.fetch_add(1, Ordering::Relaxed) + 1;
    if count <= DENSE_REGISTRATIONS || count.is_power_of_two() {
        arm_exit_hook();
    }
}

/// The exit hook (`atexit`): stops the engine before libchdb's static
/// destructors run.
///
/// Without it, a process that exits with the engine up runs those
/// destructors while libchdb's background threads (`BgSchPool`) still use
/// what they destroy: a SIGSEGV after `main` has returned, in about half the
/// runs of a test binary holding its engine in a `static`. So: close every
/// connection (which stops the engine on its data path), then
/// `chdb_shutdown()`, which joins every thread libchdb started. A process
/// whose last handle was dropped earlier only needs the second step.
extern "C" fn stop_engine_at_exit() {
    // Unwinding out of an `extern "C" fn` aborts the process, which is the
    // crash this hook exists to prevent; nothing here is expected to panic.
    let _ = std::panic::catch_unwind(|| {
        // Registered many times (see `arm_exit_hook`): only the first run,
        // the one registered last, does the work.
        if STOPPED.swap(true, Ordering::AcqRel) {
            return;
        }
        let live = lock(&REGISTRY)
            .as_ref()
            .and_then(|(_, weak)| weak.upgrade());
        let closed = live.as_ref().is_none_or(|inner| inner.stop_for_exit());
        // Dropped before LIFECYCLE is taken: if every other handle went away
        // meanwhile, this is the last one and its drop takes LIFECYCLE.
        drop(live);
        if !closed {
            return;
        }
        let Ok(api) = ffi::api() else {
            return;
        };
        let _shutdown = lock(&LIFECYCLE);
        // `chdb_shutdown` reports false when some thread libchdb started
        // did not stop (on 26.7 it does so on every exit of a process that
        // ran statements). Nothing can act on that here: the process is
        // exiting, and logging is no longer possible (see `STOPPED`). What it
        // could lead to, a static destructor racing a live thread, is what
        // `tests/exit.rs` measures over many child exits.
        let _all_threads_stopped = api.shutdown();
    });
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _shutdown = lock(&LIFECYCLE);
        lock(&self.pool.state).idle.clear();
        // The anchor goes last: closing the last connection stops the engine.
        lock(&self.anchor).take();
        if may_log() {
            tracing::info!(path = %self.path.display(), "embedded engine stopped");
        }
    }
}

/// Fails when another process holds `<path>/status`, the lock a ClickHouse
/// server (and libchdb) takes on its data directory.
fn probe_process_lock(path: &Path) -> Result<(), ChdbError> {
    let status = path.join("status");
    let Ok(file) = std::fs::File::open(&status) else {
        // No status file: nobody has ever booted here, or it was removed.
        return Ok(());
    };
    match file.try_lock() {
        Ok(()) => Ok(()), // Dropping `file` releases the probe's lock.
        Err(std::fs::TryLockError::WouldBlock) => Err(ChdbError::LockedByAnotherProcess {
            path: path.to_path_buf(),
        }),
        // A file system without flock support: let libchdb decide.
        Err(std::fs::TryLockError::Error(_)) => Ok(()),
    }
}

/// Whether a statement changes session state (`SET ...`, `USE ...`).
fn changes_session(sql: &[u8]) -> bool {
    let text = sql.trim_ascii_start();
    let word: Vec<u8> = text
        .iter()
        .take_while(|b| b.is_ascii_alphabetic())
        .map(u8::to_ascii_uppercase)
        .collect();
    word == b"SET" || word == b"USE"
}

/// One `name = 'value'` of a `SET`.
fn assignment(name: &str, value: &str) -> String {
    format!("{name} = {}", quote_literal(value))
}

/// A connection and the session state we put on it.
#[derive(Debug)]
struct Connection {
    raw: RawConnection,
    /// Settings the connection starts with ([`EngineOptions`]), and returns
    /// to when a request that changed one is done.
    baseline: BTreeMap<String, String>,
    /// Settings applied with `SET` for the last request, by name.
    settings: BTreeMap<String, String>,
    /// The current database; `None` is `default`.
    database: Option<String>,
}

impl Connection {
    /// Brings the connection's database and settings to what `request` asks.
    fn prepare(&mut self, request: &Request) -> Result<(), ChdbError> {
        if self.database != request.database {
            let db = request.database.as_deref().unwrap_or("default");
            self.run_plain(&format!("USE {}", quote_identifier(db)))?;
            self.database.clone_from(&request.database);
        }
        if self.settings != request.settings {
            let mut assignments = Vec::new();
            for name in self.settings.keys() {
                if !request.settings.contains_key(name) {
                    match self.baseline.get(name) {
                        Some(value) => assignments.push(assignment(name, value)),
                        None => assignments.push(format!("{name} = DEFAULT")),
                    }
                }
            }
            for (name, value) in &request.settings {
                if self.settings.get(name) != Some(value) {
                    assignments.push(assignment(name, value));
                }
            }
            self.run_plain(&format!("SET {}", assignments.join(", ")))?;
            self.settings.clone_from(&request.settings);
        }
        Ok(())
    }

    fn run_plain(&mut self, sql: &str) -> Result<(), ChdbError> {
        match self.raw.query(sql.as_bytes(), "TabSeparated", &[])? {
            Outcome::Output(_) => Ok(()),
            Outcome::Error { text, .. } => Err(ChdbError::from_exception_text(&text)),
        }
    }

    fn run(&mut self, request: &Request) -> Result<Vec<u8>, ChdbError> {
        let params: Vec<(&str, &[u8])> = request
            .params
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let outcome = match &request.insert_data {
            None => self.raw.query(&request.sql, &request.format, &params)?,
            Some(data) => self
                .raw
                .insert(&request.sql, &data.format, &params, &data.bytes)?,
        };
        match outcome {
            Outcome::Output(output) => Ok(output),
            Outcome::Error { text, partial_len } => {
                if partial_len > 0 {
                    tracing::debug!(partial_len, "failed statement left partial output; dropped");
                }
                Err(ChdbError::from_exception_text(&text))
            }
        }
    }
}

/// A bounded pool: at most `max` connections exist besides the anchor.
#[derive(Debug)]
struct Pool {
    state: Mutex<PoolState>,
    freed: Condvar,
    options: EngineOptions,
}

#[derive(Debug, Default)]
struct PoolState {
    idle: Vec<Connection>,
    in_use: usize,
    discarded: u64,
    /// Set by the exit hook: no connection is handed out or kept any more.
    stopped: bool,
}

impl Pool {
    fn new(mut options: EngineOptions) -> Self {
        // The fields are public, so a zero bound can arrive here; it would make
        // every statement wait out its acquire timeout.
        options.max_connections = options.max_connections.max(1);
        Self {
            state: Mutex::new(PoolState::default()),
            freed: Condvar::new(),
            options,
        }
    }

    fn stats(&self) -> PoolStats {
        let state = lock(&self.state);
        PoolStats {
            idle: state.idle.len(),
            in_use: state.in_use,
            max: self.options.max_connections,
            discarded: state.discarded,
        }
    }

    /// Takes an idle connection, opens a new one under the bound, or waits
    /// for one to be returned, up to the acquire timeout.
    fn acquire(&self, path: &Path) -> Result<Lease<'_>, ChdbError> {
        let started = Instant::now();
        let deadline = started + self.options.acquire_timeout;
        let mut state = lock(&self.state);
        loop {
            if state.stopped {
                return Err(ChdbError::Stopped);
            }
            if let Some(conn) = state.idle.pop() {
                state.in_use += 1;
                return Ok(Lease {
                    pool: self,
                    conn: Some(conn),
                    keep: true,
                });
            }
            if state.in_use < self.options.max_connections {
                state.in_use += 1;
                drop(state);
                return match self.connect(path) {
                    Ok(conn) => Ok(Lease {
                        pool: self,
                        conn: Some(conn),
                        keep: true,
                    }),
                    Err(e) => {
                        lock(&self.state).in_use -= 1;
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ChdbError::PoolTimeout {
                    waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    max: self.options.max_connections,
                });
            }
            state = self
                .freed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn connect(&self, path: &Path) -> Result<Connection, ChdbError> {
        let api = ffi::api()?;
        // The engine is already up on `path` (the anchor holds it), so this
        // joins it; `--path` must still match or libchdb refuses.
        let raw = api
            .connect(&[format!("--path={}", path.display())])?
            .ok_or_else(|| ChdbError::Connect {
                path: path.to_path_buf(),
            })?;
        let baseline: BTreeMap<String, String> = if self.options.jit_compile {
            BTreeMap::new()
        } else {
            NO_JIT
                .iter()
                .map(|&(name, value)| (name.to_owned(), value.to_owned()))
                .collect()
        };
        let mut conn = Connection {
            raw,
            baseline,
            settings: BTreeMap::new(),
            database: None,
        };
        if !conn.baseline.is_empty() {
            let assignments: Vec<String> = conn
                .baseline
                .iter()
                .map(|(name, value)| assignment(name, value))
                .collect();
            conn.run_plain(&format!("SET {}", assignments.join(", ")))?;
        }
        Ok(conn)
    }

    fn release(&self, conn: Option<Connection>, keep: bool) {
        let mut state = lock(&self.state);
        state.in_use -= 1;
        match conn {
            Some(conn) if keep && !state.stopped => state.idle.push(conn),
            Some(conn) => {
                state.discarded += 1;
                // Close outside the lock: closing can take a moment and
                // other statements should not wait on it.
                drop(state);
                drop(conn);
                self.freed.notify_one();
                return;
            }
            None => {}
        }
        drop(state);
        self.freed.notify_one();
    }
}

/// A connection taken from the pool; goes back (or is closed) on drop, so a
/// panic in a caller cannot leak a pool slot.
#[derive(Debug)]
struct Lease<'a> {
    pool: &'a Pool,
    conn: Option<Connection>,
    keep: bool,
}

impl Lease<'_> {
    fn conn_mut(&mut self) -> &mut Connection {
        self.conn
            .as_mut()
            .expect("a lease holds its connection until dropped")
    }

    /// Closes the connection instead of returning it.
    fn discard(&mut self) {
        self.keep = false;
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.pool.release(self.conn.take(), self.keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_cross_threads_and_tasks() {
        // Callers share one Engine between threads and tokio tasks; this stops
        // compiling if a field ever makes it !Send or !Sync.
        fn shareable<T: Send + Sync + Clone + 'static>() {}
        shareable::<Engine>();
    }

    #[test]
    fn session_changing_statements_are_recognised() {
        assert!(changes_session(b"SET x = 1"));
        assert!(changes_session(b"  use db"));
        assert!(!changes_session(b"SELECT 1"));
        assert!(!changes_session(b"SETTINGS"));
        assert!(!changes_session(b"INSERT INTO settings_log VALUES"));
    }
}
