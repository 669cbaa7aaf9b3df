//! The libchdb C API, loaded at run time. The only unsafe code of the project.
//!
//! The library is about 570 MB on disk and is loaded once per process (a
//! [`OnceLock`]) and never unloaded: libchdb starts threads and installs
//! global state that must outlive every connection, and unloading a C++
//! runtime with live threads is undefined behaviour.
//!
//! The functions used and their contracts, from chdb's `chdb.h` (26.7.3):
//! - `chdb_connect(argc, argv) -> chdb_connection*` (NULL on failure; the
//!   reason goes to stderr). The first connection boots the engine on its
//!   `--path`; later ones to the same path share it. `argv` is read during
//!   the call only.
//! - `chdb_close_conn(chdb_connection*)`: closing the last connection shuts
//!   the engine down.
//! - `chdb_query_with_params_n(conn, query, len, format, len, names,
//!   name_lens, values, value_lens, count) -> chdb_result*`: binary-safe; the
//!   values are ClickHouse escaped text, bound to `{name:Type}` placeholders.
//! - `chdb_result_buffer/length/error`, `chdb_destroy_query_result`.
//! - `chdb_set_signal_handlers_enabled(0)`: keeps the host's signal handling.
//! - `chdb_shutdown() -> chdb_state` (0 = success): joins every thread libchdb
//!   started, so the host's own teardown (C++ static destructors at `exit`)
//!   does not race them. Does nothing and returns 1 while a connection is
//!   open; afterwards `chdb_connect` fails for the rest of the process.
//!   Resolved optionally: engines before 26.7.2 lack it.
//!
//! And one libc function: `atexit`, to stop the engine before libchdb's own
//! exit-time destructors run (see [`register_exit_hook`]).

#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::OnceLock;

use libloading::Library;

use crate::error::ChdbError;

/// `chdb_connection`: an opaque handle (`struct chdb_connection_ *`).
type ConnectionHandle = *mut c_void;
/// `chdb_result *`: opaque.
type ResultHandle = *mut c_void;

type ConnectFn = unsafe extern "C" fn(c_int, *mut *mut c_char) -> *mut ConnectionHandle;
type CloseFn = unsafe extern "C" fn(*mut ConnectionHandle);
type QueryWithParamsNFn = unsafe extern "C" fn(
    ConnectionHandle,
    *const c_char,
    usize,
    *const c_char,
    usize,
    *const *const c_char,
    *const usize,
    *const *const c_char,
    *const usize,
    usize,
) -> ResultHandle;
type ResultBufferFn = unsafe extern "C" fn(ResultHandle) -> *mut c_char;
type ResultLengthFn = unsafe extern "C" fn(ResultHandle) -> usize;
type ResultErrorFn = unsafe extern "C" fn(ResultHandle) -> *const c_char;
type DestroyResultFn = unsafe extern "C" fn(ResultHandle);
/// `chdb_insert_stream`: opaque.
type InsertStreamHandle = *mut c_void;
type StreamInsertWithParamsNFn = unsafe extern "C" fn(
    ConnectionHandle,
    *const c_char,
    usize,
    *const c_char,
    usize,
    *const *const c_char,
    *const usize,
    *const *const c_char,
    *const usize,
    usize,
) -> InsertStreamHandle;
type StreamAppendFn = unsafe extern "C" fn(InsertStreamHandle, *const c_void, usize) -> c_int;
type StreamDoneFn = unsafe extern "C" fn(InsertStreamHandle) -> ResultHandle;
type StreamInsertErrorFn = unsafe extern "C" fn(InsertStreamHandle) -> *const c_char;
type DestroyInsertStreamFn = unsafe extern "C" fn(InsertStreamHandle);
type VersionFn = unsafe extern "C" fn() -> *const c_char;
type SetSignalHandlersFn = unsafe extern "C" fn(c_int);
/// `chdb_state chdb_shutdown(void)`; `chdb_state` is a C enum (`int`).
type ShutdownFn = unsafe extern "C" fn() -> c_int;

unsafe extern "C" {
    /// libc's `atexit(3)`: `function` runs inside `exit()`, in the reverse
    /// order of registration, interleaved with the C++ static destructors of
    /// every loaded library (those are registered on the same list).
    fn atexit(function: extern "C" fn()) -> c_int;
}

/// The resolved entry points. The `Library` is kept so the pointers stay valid.
#[derive(Debug)]
pub(crate) struct Api {
    path: PathBuf,
    connect: ConnectFn,
    close: CloseFn,
    query_with_params_n: QueryWithParamsNFn,
    result_buffer: ResultBufferFn,
    result_length: ResultLengthFn,
    result_error: ResultErrorFn,
    destroy_result: DestroyResultFn,
    stream_insert_with_params_n: StreamInsertWithParamsNFn,
    stream_append: StreamAppendFn,
    stream_done: StreamDoneFn,
    stream_insert_error: StreamInsertErrorFn,
    destroy_insert_stream: DestroyInsertStreamFn,
    /// `None` on an engine older than the call (an operator's local build).
    shutdown: Option<ShutdownFn>,
    version: String,
    load_time: std::time::Duration,
    _library: Library,
}

static API: OnceLock<Result<Api, (PathBuf, String)>> = OnceLock::new();

/// Where the library is looked for: `$CAPCAT_LIBCHDB`, else
/// `<cache>/libchdb/<version>/libchdb.so` with `<version>` the pinned
/// [`crate::pin::VERSION`] and `<cache>` being `$CAPCAT_CACHE_DIR` or
/// `~/.cache/capcat` (where `cargo xtask fetch-engine` puts it).
pub fn library_path() -> Result<PathBuf, ChdbError> {
    if let Some(path) = std::env::var_os("CAPCAT_LIBCHDB") {
        return Ok(PathBuf::from(path));
    }
    let cache = match std::env::var_os("CAPCAT_CACHE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").ok_or(ChdbError::NoLibraryPath)?;
            PathBuf::from(home).join(".cache").join("capcat")
        }
    };
    Ok(cache
        .join("libchdb")
        .join(crate::pin::VERSION)
        .join("libchdb.so"))
}

/// The loaded API, loading the library on first use.
///
/// A failed load is remembered too: retrying a 570 MB load that failed for a
/// missing symbol would fail the same way, slowly.
pub(crate) fn api() -> Result<&'static Api, ChdbError> {
    let loaded = API.get_or_init(|| {
        let path = library_path().map_err(|e| (PathBuf::new(), e.to_string()))?;
        load(&path).map_err(|reason| (path, reason))
    });
    loaded.as_ref().map_err(|(path, reason)| ChdbError::Load {
        path: path.clone(),
        reason: reason.clone(),
    })
}

fn load(path: &Path) -> Result<Api, String> {
    let started = std::time::Instant::now();
    // SAFETY: loading runs the library's initialisers. libchdb is a C++
    // library whose static constructors only set up its own globals; it is
    // loaded once per process (this OnceLock) and never unloaded.
    let library = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
    // SAFETY: each symbol is looked up with the exact signature `chdb.h`
    // declares for it (see the type aliases above), so calling through the
    // copied function pointer is sound for as long as `library` lives, and
    // `Api` owns `library`.
    let api = unsafe {
        let connect = *library
            .get::<ConnectFn>(b"chdb_connect\0")
            .map_err(|e| e.to_string())?;
        let close = *library
            .get::<CloseFn>(b"chdb_close_conn\0")
            .map_err(|e| e.to_string())?;
        let query_with_params_n = *library
            .get::<QueryWithParamsNFn>(b"chdb_query_with_params_n\0")
            .map_err(|e| e.to_string())?;
        let result_buffer = *library
            .get::<ResultBufferFn>(b"chdb_result_buffer\0")
            .map_err(|e| e.to_string())?;
        let result_length = *library
            .get::<ResultLengthFn>(b"chdb_result_length\0")
            .map_err(|e| e.to_string())?;
        let result_error = *library
            .get::<ResultErrorFn>(b"chdb_result_error\0")
            .map_err(|e| e.to_string())?;
        let destroy_result = *library
            .get::<DestroyResultFn>(b"chdb_destroy_query_result\0")
            .map_err(|e| e.to_string())?;
        let stream_insert_with_params_n = *library
            .get::<StreamInsertWithParamsNFn>(b"chdb_stream_insert_with_params_n\0")
            .map_err(|e| e.to_string())?;
        let stream_append = *library
            .get::<StreamAppendFn>(b"chdb_stream_append\0")
            .map_err(|e| e.to_string())?;
        let stream_done = *library
            .get::<StreamDoneFn>(b"chdb_stream_done\0")
            .map_err(|e| e.to_string())?;
        let stream_insert_error = *library
            .get::<StreamInsertErrorFn>(b"chdb_stream_insert_error\0")
            .map_err(|e| e.to_string())?;
        let destroy_insert_stream = *library
            .get::<DestroyInsertStreamFn>(b"chdb_destroy_insert_stream\0")
            .map_err(|e| e.to_string())?;
        let version_fn = *library
            .get::<VersionFn>(b"chdb_version\0")
            .map_err(|e| e.to_string())?;
        // Optional: `CAPCAT_LIBCHDB` may name an older local build. Without it
        // the exit hook still closes every connection, which is what stops
        // the engine's own threads; only the global pools stay up.
        let shutdown = library
            .get::<ShutdownFn>(b"chdb_shutdown\0")
            .ok()
            .map(|symbol| *symbol);
        let set_signal_handlers = *library
            .get::<SetSignalHandlersFn>(b"chdb_set_signal_handlers_enabled\0")
            .map_err(|e| e.to_string())?;
        // The host (tokio, the test harness) owns signal handling; libchdb
        // must not replace SIGINT/SIGTERM/SIGSEGV dispositions. The header
        // requires this before the first connect, which is guaranteed
        // because no connection exists before `api()` returns.
        set_signal_handlers(0);
        let version_ptr = version_fn();
        let version = if version_ptr.is_null() {
            String::from("unknown")
        } else {
            CStr::from_ptr(version_ptr).to_string_lossy().into_owned()
        };
        Api {
            path: path.to_path_buf(),
            connect,
            close,
            query_with_params_n,
            result_buffer,
            result_length,
            result_error,
            destroy_result,
            stream_insert_with_params_n,
            stream_append,
            stream_done,
            stream_insert_error,
            destroy_insert_stream,
            shutdown,
            version,
            load_time: started.elapsed(),
            _library: library,
        }
    };
    tracing::info!(path = %path.display(), version = %api.version, load_ms = api.load_time.as_millis(), "loaded libchdb");
    Ok(api)
}

impl Api {
    /// The file the library was loaded from.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `chdb_version()`.
    pub(crate) fn version(&self) -> &str {
        &self.version
    }

    /// How long `dlopen` and symbol resolution took.
    pub(crate) fn load_time(&self) -> std::time::Duration {
        self.load_time
    }

    /// `chdb_shutdown()`: joins every libchdb thread. `Some(true)` once none
    /// is left, `Some(false)` if a connection is still open (then nothing was
    /// done) or a thread could not be stopped, `None` if the library lacks
    /// the call.
    ///
    /// Afterwards libchdb refuses every `chdb_connect` in this process: only
    /// the exit hook calls it.
    pub(crate) fn shutdown(&self) -> Option<bool> {
        let shutdown = self.shutdown?;
        // SAFETY: `chdb_shutdown` takes no arguments; `chdb.h` declares it
        // safe to call from any thread, concurrently with itself and with
        // `chdb_connect`, and harmless when the engine is already stopped.
        // While a connection is open it does nothing and reports an error.
        Some(unsafe { shutdown() } == 0)
    }

    /// Opens a connection with the given command-line style arguments
    /// (without the program name). `None` when libchdb refuses.
    pub(crate) fn connect(
        &'static self,
        args: &[String],
    ) -> Result<Option<RawConnection>, ChdbError> {
        let mut owned = Vec::with_capacity(args.len() + 1);
        owned.push(CString::from(c"capcat"));
        for arg in args {
            owned.push(
                CString::new(arg.as_bytes()).map_err(|_| ChdbError::InvalidInput {
                    what: "engine argument",
                    value: arg.clone(),
                })?,
            );
        }
        let mut argv: Vec<*mut c_char> = owned.iter().map(|s| s.as_ptr().cast_mut()).collect();
        let argc = c_int::try_from(argv.len()).map_err(|_| ChdbError::InvalidInput {
            what: "engine argument count",
            value: argv.len().to_string(),
        })?;
        // SAFETY: `argv` holds `argc` pointers to NUL-terminated strings
        // owned by `owned`, both alive for the whole call; libchdb reads
        // them during the call only (it copies what it keeps).
        let handle = unsafe { (self.connect)(argc, argv.as_mut_ptr()) };
        Ok(NonNull::new(handle).map(|handle| RawConnection { api: self, handle }))
    }
}

/// Registers `hook` to run inside `exit()`; false if libc refused (out of
/// memory).
///
/// `exit()` runs `atexit` functions and C++ static destructors from one
/// list, last registered first. libchdb registers its destructors while it
/// loads and while its engine boots, so a hook registered after the first
/// boot runs before all of those: that is the window in which the engine's
/// threads can still be stopped safely.
pub(crate) fn register_exit_hook(hook: extern "C" fn()) -> bool {
    // SAFETY: `atexit` only stores the pointer; `hook` is a plain
    // `extern "C" fn()` with no arguments, as `atexit` requires, and it lives
    // for the whole process (a function item).
    unsafe { atexit(hook) == 0 }
}

/// One libchdb connection. Not `Sync`: libchdb runs one statement at a time
/// per connection, and `&mut self` on [`RawConnection::query`] makes the
/// compiler enforce it.
#[derive(Debug)]
pub(crate) struct RawConnection {
    api: &'static Api,
    handle: NonNull<ConnectionHandle>,
}

// SAFETY: a libchdb connection is not tied to the thread that opened it
// (`chdb.h`: queries are "thread-safe ... handled in a separate thread"), so
// moving it to another thread is sound; `RawConnection` is not `Sync`, so it
// is never used from two threads at once.
unsafe impl Send for RawConnection {}

/// What a statement returned: its output bytes, or the engine's error text.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The output in the requested format.
    Output(Vec<u8>),
    /// The exception text (`Code: NNN. DB::Exception: ...`), and whatever
    /// partial output came with it (never to be trusted or returned).
    Error {
        /// The exception text.
        text: String,
        /// Bytes of partial output the engine left in the result.
        partial_len: usize,
    },
}

/// The four parallel arrays libchdb's `*_with_params_n` functions take:
/// pointers into `params` and their lengths, one entry per parameter. The
/// pointers borrow `params`, which must outlive the call they are passed to.
struct ParamArrays {
    names: Vec<*const c_char>,
    name_lens: Vec<usize>,
    values: Vec<*const c_char>,
    value_lens: Vec<usize>,
}

impl ParamArrays {
    fn new(params: &[(&str, &[u8])]) -> Self {
        Self {
            names: params.iter().map(|(n, _)| n.as_ptr().cast()).collect(),
            name_lens: params.iter().map(|(n, _)| n.len()).collect(),
            values: params.iter().map(|(_, v)| v.as_ptr().cast()).collect(),
            value_lens: params.iter().map(|(_, v)| v.len()).collect(),
        }
    }
}

impl RawConnection {
    /// Runs one statement with bound parameters (escaped-text values).
    pub(crate) fn query(
        &mut self,
        sql: &[u8],
        format: &str,
        params: &[(&str, &[u8])],
    ) -> Result<Outcome, ChdbError> {
        let arrays = ParamArrays::new(params);
        let api = self.api;
        // SAFETY: `self.handle` came from `chdb_connect` and is not closed
        // (closing consumes `self`); it points to a live `chdb_connection`.
        // Every buffer is passed with its exact length and lives until the
        // call returns; the four parameter arrays all have `params.len()`
        // entries. `&mut self` guarantees no concurrent use of the connection.
        let result = unsafe {
            (api.query_with_params_n)(
                *self.handle.as_ptr(),
                sql.as_ptr().cast(),
                sql.len(),
                format.as_ptr().cast(),
                format.len(),
                arrays.names.as_ptr(),
                arrays.name_lens.as_ptr(),
                arrays.values.as_ptr(),
                arrays.value_lens.as_ptr(),
                params.len(),
            )
        };
        api.take_result(result)
    }

    /// Runs `INSERT ... ` (no FORMAT clause, no inline data) with `data`
    /// in `format` streamed in chunks: libchdb's only binary-safe way to
    /// insert data, since inline data after `FORMAT` in the statement text
    /// loses rows of binary formats.
    pub(crate) fn insert(
        &mut self,
        sql: &[u8],
        format: &str,
        params: &[(&str, &[u8])],
        data: &[u8],
    ) -> Result<Outcome, ChdbError> {
        let arrays = ParamArrays::new(params);
        let api = self.api;
        // SAFETY: as in `query`: a live connection used by one thread, and
        // every buffer passed with its exact length, alive for the call.
        let stream = unsafe {
            (api.stream_insert_with_params_n)(
                *self.handle.as_ptr(),
                sql.as_ptr().cast(),
                sql.len(),
                format.as_ptr().cast(),
                format.len(),
                arrays.names.as_ptr(),
                arrays.name_lens.as_ptr(),
                arrays.values.as_ptr(),
                arrays.value_lens.as_ptr(),
                params.len(),
            )
        };
        if stream.is_null() {
            return Err(ChdbError::NullResult);
        }
        // SAFETY: `stream` is a live insert-stream handle until the destroy
        // call at the end, which runs exactly once on every path. Each chunk
        // passed to append is a live slice with its exact length (libchdb
        // copies it). The error pointer, when not null, is a NUL-terminated
        // string owned by the stream, copied before the stream is destroyed.
        unsafe {
            let outcome = (|| {
                if let Some(text) = stream_error(api, stream) {
                    return Ok(Outcome::Error {
                        text,
                        partial_len: 0,
                    });
                }
                for chunk in data.chunks(INSERT_CHUNK) {
                    if (api.stream_append)(stream, chunk.as_ptr().cast(), chunk.len()) != 0 {
                        let text = stream_error(api, stream)
                            .unwrap_or_else(|| "the insert stream refused data".to_owned());
                        return Ok(Outcome::Error {
                            text,
                            partial_len: 0,
                        });
                    }
                }
                let result = (api.stream_done)(stream);
                if result.is_null() {
                    return Err(ChdbError::NullResult);
                }
                api.take_result(result)
            })();
            (api.destroy_insert_stream)(stream);
            outcome
        }
    }
}

/// Bytes handed to `chdb_stream_append` at a time: large enough to keep the
/// call overhead negligible, small enough to bound the engine's buffering.
const INSERT_CHUNK: usize = 1 << 20;

/// The stream's error text, if it has one.
///
/// # Safety
/// `stream` must be a live insert-stream handle.
unsafe fn stream_error(api: &Api, stream: InsertStreamHandle) -> Option<String> {
    // SAFETY: the caller guarantees `stream` is live; a non-null pointer is a
    // NUL-terminated string owned by the stream, copied out here.
    unsafe {
        let error = (api.stream_insert_error)(stream);
        (!error.is_null()).then(|| CStr::from_ptr(error).to_string_lossy().into_owned())
    }
}

impl Api {
    /// Copies a result's output or error out and destroys it.
    fn take_result(&self, result: ResultHandle) -> Result<Outcome, ChdbError> {
        if result.is_null() {
            return Err(ChdbError::NullResult);
        }
        // SAFETY: `result` is a live result handle (not null, just returned
        // by libchdb) until the destroy call below. The error pointer, when
        // not null, is a NUL-terminated string owned by the result; the
        // buffer pointer is valid for `length` bytes. Both are copied out
        // before the result is destroyed, exactly once.
        unsafe {
            let error = (self.result_error)(result);
            let length = (self.result_length)(result);
            let outcome = if error.is_null() {
                let buffer = (self.result_buffer)(result);
                let output = if buffer.is_null() || length == 0 {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(buffer.cast::<u8>(), length).to_vec()
                };
                Outcome::Output(output)
            } else {
                Outcome::Error {
                    text: CStr::from_ptr(error).to_string_lossy().into_owned(),
                    partial_len: length,
                }
            };
            (self.destroy_result)(result);
            Ok(outcome)
        }
    }
}

impl Drop for RawConnection {
    fn drop(&mut self) {
        // SAFETY: the handle came from `chdb_connect` and is closed exactly
        // once, here; nothing uses it afterwards (this is the owner's drop).
        unsafe { (self.api.close)(self.handle.as_ptr()) };
    }
}
