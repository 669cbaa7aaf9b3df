//! The spool: a directory of sealed packs waiting to be uploaded.
//!
//! A sink writes a pack as `<pack_id>.pack.open`, fsyncs it, renames it to
//! `<pack_id>.pack.ready` and fsyncs the directory, so after a crash a
//! `.ready` file is always a whole pack and an `.open` file is always one
//! the sink never finished. The service uploads only `.ready` files. Stale
//! `.open` files are swept only at start and only by a service that owns
//! the spool and holds its owner lock (`.owner.lock`, see
//! [`crate::owner_lock`]), because a sink may be writing one right now
//! otherwise.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use uuid::Uuid;

/// The owner lock's name inside the spool directory (see
/// [`crate::owner_lock`], which takes it).
pub const OWNER_LOCK_FILE_NAME: &str = ".owner.lock";
/// The status file's name inside the spool directory (see
/// [`crate::status`], which writes and reads it).
pub const STATUS_FILE_NAME: &str = "status.json";

/// Who holds a spool's owner lock, as the holder wrote it into
/// [`OWNER_LOCK_FILE_NAME`]. Defined here, with the spool's other names,
/// so that the errors naming a holder ([`crate::StartError::SpoolBusy`])
/// depend on the spool alone and not on [`crate::owner_lock`], which
/// returns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpoolHolder {
    /// The holding process's id.
    pub pid: u32,
    /// Its lease holder name.
    pub holder: String,
}

impl std::fmt::Display for SpoolHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} (holder {:?})", self.pid, self.holder)
    }
}

/// The suffix of a pack being written.
pub const OPEN_SUFFIX: &str = ".pack.open";
/// The suffix of a sealed pack.
pub const READY_SUFFIX: &str = ".pack.ready";

/// A spool operation that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpoolError {
    /// A file operation failed.
    #[error("spool {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> SpoolError + 'a {
    move |source| SpoolError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// One sealed pack in the spool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadyPack {
    /// The pack id its name carries.
    pub pack_id: Uuid,
    /// The file.
    pub path: PathBuf,
    /// When it was sealed (its modification time), for ordering.
    pub sealed_at: SystemTime,
}

/// What one listing found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpoolListing {
    /// The oldest sealed packs, at most the limit asked for.
    pub ready: Vec<ReadyPack>,
    /// How many sealed packs there are in all.
    pub total_ready: usize,
    /// Files whose name is not `<canonical uuid>.pack.ready|open` (left alone).
    pub foreign: usize,
}

/// Whether `name` is one of the files the service itself keeps in the
/// spool (the owner lock, the status file and its temporaries): neither a
/// pack nor foreign.
fn is_service_file(name: &str) -> bool {
    name == OWNER_LOCK_FILE_NAME
        || name == STATUS_FILE_NAME
        || (name.starts_with(&format!(".{STATUS_FILE_NAME}.")) && name.ends_with(".tmp"))
}

/// A spool directory.
#[derive(Clone, Debug)]
pub struct Spool {
    dir: PathBuf,
}

/// Parses `<canonical uuid><suffix>`.
fn pack_id_of(name: &str, suffix: &str) -> Option<Uuid> {
    let id = name.strip_suffix(suffix)?;
    let uuid = Uuid::try_parse(id).ok()?;
    // Only the canonical spelling: one file name per pack id.
    (uuid.hyphenated().to_string() == id).then_some(uuid)
}

impl Spool {
    /// Opens (creating when absent) the spool at `dir`.
    ///
    /// # Errors
    /// The directory cannot be created.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, SpoolError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        Ok(Self { dir })
    }

    /// The directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path a sealed pack has.
    #[must_use]
    pub fn ready_path(&self, pack_id: Uuid) -> PathBuf {
        self.dir
            .join(format!("{}{READY_SUFFIX}", pack_id.hyphenated()))
    }

    fn open_path(&self, pack_id: Uuid) -> PathBuf {
        self.dir
            .join(format!("{}{OPEN_SUFFIX}", pack_id.hyphenated()))
    }

    /// Whether pack `pack_id` is still waiting in the spool.
    #[must_use]
    pub fn is_ready(&self, pack_id: Uuid) -> bool {
        self.ready_path(pack_id).exists()
    }

    fn sync_dir(&self) -> Result<(), SpoolError> {
        fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io("fsync directory", &self.dir))
    }

    /// Writes a sealed pack: `.open`, fsync, rename to `.ready`, fsync the
    /// directory. Returns the `.ready` path.
    ///
    /// # Errors
    /// Any file operation failing; the `.open` file is then removed when possible.
    pub fn write_sealed(&self, pack_id: Uuid, bytes: &[u8]) -> Result<PathBuf, SpoolError> {
        let open = self.open_path(pack_id);
        let ready = self.ready_path(pack_id);
        let written = (|| {
            let mut file = fs::File::create(&open).map_err(io("create", &open))?;
            file.write_all(bytes).map_err(io("write", &open))?;
            file.sync_all().map_err(io("fsync", &open))?;
            fs::rename(&open, &ready).map_err(io("rename", &open))?;
            self.sync_dir()
        })();
        if written.is_err() {
            let _ = fs::remove_file(&open);
        }
        written.map(|()| ready)
    }

    /// Lists the sealed packs, oldest first, returning at most `limit`.
    ///
    /// # Errors
    /// The directory cannot be read.
    pub fn list_ready(&self, limit: usize) -> Result<SpoolListing, SpoolError> {
        let mut listing = SpoolListing::default();
        let mut ready = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io("list", &self.dir))? {
            let entry = entry.map_err(io("list", &self.dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                listing.foreign += 1;
                continue;
            };
            if is_service_file(name) {
                continue;
            }
            if let Some(pack_id) = pack_id_of(name, READY_SUFFIX) {
                let sealed_at = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                ready.push(ReadyPack {
                    pack_id,
                    path: entry.path(),
                    sealed_at,
                });
            } else if pack_id_of(name, OPEN_SUFFIX).is_none() {
                listing.foreign += 1;
            }
        }
        ready.sort_by_key(|p| (p.sealed_at, p.pack_id));
        listing.total_ready = ready.len();
        ready.truncate(limit);
        listing.ready = ready;
        Ok(listing)
    }

    /// Removes a sealed pack once its upload is verified.
    ///
    /// # Errors
    /// The file cannot be removed (a missing file is not an error).
    pub fn remove_ready(&self, pack_id: Uuid) -> Result<(), SpoolError> {
        let path = self.ready_path(pack_id);
        match fs::remove_file(&path) {
            Ok(()) => self.sync_dir(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io("remove", &path)(e)),
        }
    }

    /// Removes every `.open` file: packs a crashed sink never sealed. Call
    /// only at start, before any sink opens the spool.
    ///
    /// # Errors
    /// The directory cannot be read or a file cannot be removed.
    pub fn sweep_stale_open(&self) -> Result<usize, SpoolError> {
        let mut swept = 0;
        for entry in fs::read_dir(&self.dir).map_err(io("list", &self.dir))? {
            let entry = entry.map_err(io("list", &self.dir))?;
            let name = entry.file_name();
            if name
                .to_str()
                .and_then(|n| pack_id_of(n, OPEN_SUFFIX))
                .is_some()
            {
                let path = entry.path();
                fs::remove_file(&path).map_err(io("sweep", &path))?;
                tracing::info!(path = %path.display(), "swept a stale .open file a crashed sink left");
                swept += 1;
            }
        }
        if swept > 0 {
            self.sync_dir()?;
        }
        Ok(swept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_pack_is_ready_and_never_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spool = Spool::open(dir.path()).expect("open");
        let id = Uuid::new_v4();
        let path = spool.write_sealed(id, b"pack").expect("write");
        assert!(path.ends_with(format!("{id}{READY_SUFFIX}")));
        assert!(!dir.path().join(format!("{id}{OPEN_SUFFIX}")).exists());
        let listing = spool.list_ready(10).expect("list");
        assert_eq!(listing.ready.len(), 1);
        assert_eq!(listing.ready[0].pack_id, id);
    }

    #[test]
    fn the_sweep_removes_open_files_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spool = Spool::open(dir.path()).expect("open");
        let ready = Uuid::new_v4();
        spool.write_sealed(ready, b"whole").expect("write");
        let stale = Uuid::new_v4();
        fs::write(dir.path().join(format!("{stale}{OPEN_SUFFIX}")), b"half").expect("stale");
        fs::write(dir.path().join("notes.txt"), b"foreign").expect("foreign");
        assert_eq!(spool.sweep_stale_open().expect("sweep"), 1);
        assert!(spool.is_ready(ready));
        assert!(dir.path().join("notes.txt").exists());
        assert!(!dir.path().join(format!("{stale}{OPEN_SUFFIX}")).exists());
    }

    #[test]
    fn listing_ignores_open_and_foreign_files_and_is_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spool = Spool::open(dir.path()).expect("open");
        for _ in 0..5 {
            spool.write_sealed(Uuid::new_v4(), b"p").expect("write");
        }
        let open = Uuid::new_v4();
        fs::write(dir.path().join(format!("{open}{OPEN_SUFFIX}")), b"half").expect("open");
        fs::write(
            dir.path().join(format!("{}{READY_SUFFIX}", open.simple())),
            b"x",
        )
        .expect("odd");
        fs::write(dir.path().join(OWNER_LOCK_FILE_NAME), b"1 h\n").expect("lock file");
        crate::status::write_status(
            dir.path(),
            &crate::status::StatusFile::new("h", "p", false, crate::Snapshot::default()),
        )
        .expect("status file");
        let listing = spool.list_ready(3).expect("list");
        assert_eq!(listing.ready.len(), 3);
        assert_eq!(listing.total_ready, 5);
        assert_eq!(
            listing.foreign, 1,
            "a non-canonical uuid is foreign; the owner lock and status file are not"
        );
    }

    #[test]
    fn removing_twice_is_not_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spool = Spool::open(dir.path()).expect("open");
        let id = Uuid::new_v4();
        spool.write_sealed(id, b"p").expect("write");
        spool.remove_ready(id).expect("remove");
        spool.remove_ready(id).expect("remove again");
        assert!(!spool.is_ready(id));
    }
}
