//! The status file: a running service's snapshot on disk, for `capcat status`.
//!
//! The service writes `<spool_dir>/status.json` at start, then once per
//! `status_interval_s` (default 1 s: each write fsyncs) from a task of its
//! own, so a long cycle does not freeze it, and once more on close. Only
//! the spool's owner (the service holding `<spool_dir>/.owner.lock`,
//! `owns_spool = true`) writes it: a service with `owns_spool = false`
//! shares the directory and writes nothing, so two processes never
//! overwrite each other's status, and a drain refused on a live service's
//! spool never touches it. Another process (the CLI) reads it with [`read_status`] without
//! talking to the service. The write is atomic: a temporary file beside it is
//! written, fsynced, renamed over `status.json`, and the directory fsynced,
//! so a reader sees either the previous whole file or the new whole file,
//! never a torn one, and a crash leaves the last complete snapshot.
//!
//! The spool listing ignores both names (they are not `<uuid>.pack.*`), so
//! the status file never looks like a pack.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::snapshot::Snapshot;
pub use crate::spool::STATUS_FILE_NAME;

/// The status file's format version. A reader refuses a newer one with
/// [`StatusError::NewerFormat`] rather than misreading it.
pub const STATUS_FORMAT: u32 = 1;

/// A running (or closed) service's status, as written to `status.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StatusFile {
    /// [`STATUS_FORMAT`] at the time of writing.
    pub format: u32,
    /// The writing process's id.
    pub pid: u32,
    /// When the file was written, Unix milliseconds. A file much older than
    /// the service's poll interval (and backoff cap) belongs to a service
    /// that stopped without closing.
    pub written_at: u64,
    /// The lease holder name of the service that wrote it.
    pub holder: String,
    /// The catalog prefix the service publishes under.
    pub catalog_prefix: String,
    /// Whether the service had closed when it wrote this (the last write).
    pub closed: bool,
    /// The service's snapshot: every counter and state field.
    pub snapshot: Snapshot,
}

impl StatusFile {
    /// A status written now by this process.
    #[must_use]
    pub fn new(holder: &str, catalog_prefix: &str, closed: bool, snapshot: Snapshot) -> Self {
        Self {
            format: STATUS_FORMAT,
            pid: std::process::id(),
            written_at: capcat_clickhouse::unix_now_ms(),
            holder: holder.to_owned(),
            catalog_prefix: catalog_prefix.to_owned(),
            closed,
            snapshot,
        }
    }
}

/// Why the status file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatusError {
    /// A file operation failed (other than the file being absent on read).
    #[error("status file {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file exists but is not a status file this version can read
    /// (truncated by hand, edited, or not JSON). The service rewrites it on
    /// its next status write; nothing else depends on it.
    #[error("status file {path} is corrupt: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        detail: String,
    },
    /// The file was written by a newer service whose format this reader
    /// does not know.
    #[error("status file {path} has format {found}; this build reads format {supported}")]
    NewerFormat {
        /// The file.
        path: PathBuf,
        /// The format it declares.
        found: u32,
        /// The format this build reads.
        supported: u32,
    },
}

/// The status file's path for `spool_dir`.
#[must_use]
pub fn status_path(spool_dir: &Path) -> PathBuf {
    spool_dir.join(STATUS_FILE_NAME)
}

/// Reads `<spool_dir>/status.json`: `Ok(None)` when no service has written
/// one there.
///
/// # Errors
/// [`StatusError::Io`] when the file cannot be read,
/// [`StatusError::Corrupt`] when it does not parse, and
/// [`StatusError::NewerFormat`] when a newer service wrote it.
pub fn read_status(spool_dir: impl AsRef<Path>) -> Result<Option<StatusFile>, StatusError> {
    let path = status_path(spool_dir.as_ref());
    let text = match fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StatusError::Io {
                op: "read",
                path,
                source,
            });
        }
    };
    parse_status(&path, &text).map(Some)
}

/// Parses the bytes of a status file; `path` only names the file in
/// errors. This is what [`read_status`] runs on what it read, public so the
/// fuzz target `status` can feed it bytes without a file.
///
/// # Errors
/// [`StatusError::Corrupt`] when the bytes do not parse, and
/// [`StatusError::NewerFormat`] when a newer service wrote them.
pub fn parse_status(path: &Path, bytes: &[u8]) -> Result<StatusFile, StatusError> {
    // The format is checked first, so a newer file is reported as newer
    // rather than as corrupt because of a field this build does not know.
    #[derive(Deserialize)]
    struct Format {
        format: u32,
    }
    let format: Format = serde_json::from_slice(bytes).map_err(|e| StatusError::Corrupt {
        path: path.to_owned(),
        detail: e.to_string(),
    })?;
    if format.format > STATUS_FORMAT {
        return Err(StatusError::NewerFormat {
            path: path.to_owned(),
            found: format.format,
            supported: STATUS_FORMAT,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| StatusError::Corrupt {
        path: path.to_owned(),
        detail: e.to_string(),
    })
}

/// Writes `status` to `<spool_dir>/status.json` atomically: a temporary file
/// (named after this process, so two writers never share one), fsync,
/// rename, fsync of the directory.
///
/// # Errors
/// [`StatusError::Io`] naming the step that failed; the previous status
/// file, if any, is then unchanged.
pub fn write_status(spool_dir: impl AsRef<Path>, status: &StatusFile) -> Result<(), StatusError> {
    let dir = spool_dir.as_ref();
    let path = status_path(dir);
    let temp = dir.join(format!(".{STATUS_FILE_NAME}.{}.tmp", std::process::id()));
    let io = |op: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| StatusError::Io { op, path, source }
    };
    let body = serde_json::to_vec_pretty(status).map_err(|e| StatusError::Io {
        op: "encode",
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    let written = (|| {
        let mut file = fs::File::create(&temp).map_err(io("create", &temp))?;
        file.write_all(&body).map_err(io("write", &temp))?;
        file.sync_all().map_err(io("fsync", &temp))?;
        fs::rename(&temp, &path).map_err(io("rename", &temp))?;
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("fsync directory", dir))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{ErrorKind, ErrorRecord, RejectedPack};

    fn sample() -> StatusFile {
        let mut snapshot = Snapshot {
            uploaded: 3,
            indexed: 2,
            pending_index: 1,
            cycles: 9,
            last_error: Some(
                ErrorRecord::new(ErrorKind::IndexRefused, false, "refused")
                    .about(uuid::Uuid::new_v4()),
            ),
            ..Snapshot::default()
        };
        snapshot.rejected_packs.push(RejectedPack {
            pack_id: uuid::Uuid::new_v4(),
            reason: "refused 5 times".to_owned(),
        });
        snapshot.demand.published = 4;
        StatusFile::new("holder", "prefix", false, snapshot)
    }

    #[test]
    fn a_written_status_reads_back_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(read_status(dir.path()).expect("absent").is_none());
        let status = sample();
        write_status(dir.path(), &status).expect("write");
        assert_eq!(read_status(dir.path()).expect("read"), Some(status.clone()));
        assert_eq!(status.pid, std::process::id());
        assert!(status.written_at > 0);
        // Rewriting replaces the file and leaves no temporary behind.
        let mut next = status;
        next.closed = true;
        write_status(dir.path(), &next).expect("rewrite");
        assert_eq!(read_status(dir.path()).expect("read"), Some(next));
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, [STATUS_FILE_NAME]);
    }

    #[test]
    fn a_corrupt_or_newer_file_is_a_typed_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = status_path(dir.path());
        let whole = serde_json::to_string(&sample()).expect("encode");
        fs::write(&path, &whole[..whole.len() / 2]).expect("torn");
        assert!(
            matches!(read_status(dir.path()), Err(StatusError::Corrupt { .. })),
            "{:?}",
            read_status(dir.path())
        );
        fs::write(&path, b"{\"format\": 1, \"pid\": \"x\"}").expect("wrong type");
        assert!(matches!(
            read_status(dir.path()),
            Err(StatusError::Corrupt { .. })
        ));
        fs::write(&path, b"{\"format\": 99, \"something\": \"new\"}").expect("newer");
        assert!(matches!(
            read_status(dir.path()),
            Err(StatusError::NewerFormat {
                found: 99,
                supported: STATUS_FORMAT,
                ..
            })
        ));
    }

    #[test]
    fn an_error_keeps_its_kind_and_pack_and_older_records_still_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = sample();
        write_status(dir.path(), &status).expect("write");
        let text = fs::read_to_string(status_path(dir.path())).expect("read");
        let value: serde_json::Value = serde_json::from_str(&text).expect("json");
        let last = &value["snapshot"]["last_error"];
        assert_eq!(last["kind"], "index_refused", "{text}");
        assert_eq!(last["transient"], false, "{text}");
        assert!(last["pack_id"].is_string(), "{text}");

        // A record of a build that named the flag `retried`.
        let mut renamed = value.clone();
        let record = renamed["snapshot"]["last_error"]
            .as_object_mut()
            .expect("a record");
        let flag = record.remove("transient").expect("the flag");
        record.insert("retried".to_owned(), flag);
        fs::write(status_path(dir.path()), renamed.to_string()).expect("renamed");
        let read = read_status(dir.path()).expect("read").expect("present");
        let record = read.snapshot.last_error.expect("kept");
        assert_eq!(record.kind, ErrorKind::IndexRefused);
        assert!(!record.transient, "{record:?}");

        let mut older = value.clone();
        older["snapshot"]["last_error"] = serde_json::Value::from("catalog outage");
        fs::write(status_path(dir.path()), older.to_string()).expect("older");
        let read = read_status(dir.path()).expect("read").expect("present");
        let record = read.snapshot.last_error.expect("kept");
        assert_eq!(record.kind, ErrorKind::Other);
        assert_eq!(record.message, "catalog outage");
    }

    #[test]
    fn the_status_file_is_not_a_spool_pack() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spool = crate::Spool::open(dir.path()).expect("spool");
        write_status(dir.path(), &sample()).expect("write");
        let listing = spool.list_ready(10).expect("list");
        assert_eq!(listing.total_ready, 0);
        assert_eq!(spool.sweep_stale_open().expect("sweep"), 0);
        assert!(status_path(dir.path()).exists());
    }
}
