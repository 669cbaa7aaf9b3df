//! The blocking file operations behind [`super::LocalStore`].

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use super::envelope::{self, Header, Preamble};
use crate::error::{ErrorClass, Operation, StoreError};
use crate::key::{ObjectKey, RESERVED_SEGMENT_PREFIX};
use crate::metadata::UserMetadata;
use crate::store::{
    ByteRange, ListPage, ListToken, ListedObject, ObjectHead, clamp_page_size, crc64nvme,
};

/// The most directory entries one listing walks. A store this large should
/// be on S3; past it the listing fails rather than running unbounded.
const MAX_WALK_ENTRIES: usize = 4 << 20;

/// Distinguishes the temporary files of concurrent writers in one process
/// (the pid distinguishes processes).
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Maps an I/O error to a store error: a missing file (or a key that runs
/// through a file, or names a directory) is NotFound, as S3 would say.
fn io_error(op: Operation, key: &str, context: &str, error: &io::Error) -> StoreError {
    let class = match error.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory | io::ErrorKind::IsADirectory => {
            ErrorClass::NotFound
        }
        _ => ErrorClass::Other,
    };
    StoreError::new(class, op, key, format!("{context}: {error}"))
}

fn object_path(root: &Path, key: &ObjectKey) -> PathBuf {
    // ObjectKey has no empty, `.` or `..` segment, so this stays under root.
    key.as_str()
        .split('/')
        .fold(root.to_path_buf(), |path, segment| path.join(segment))
}

/// Fsyncs a directory so that a rename or a creation in it is durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates the directories from `root` down to `dir`, fsyncing the parent of
/// each one created so that the new entry survives a crash.
fn create_dirs(root: &Path, dir: &Path) -> io::Result<()> {
    let Ok(relative) = dir.strip_prefix(root) else {
        return Err(io::Error::other("object directory outside the store root"));
    };
    let mut current = root.to_path_buf();
    for component in relative.components() {
        let parent = current.clone();
        current.push(component);
        match fs::create_dir(&current) {
            Ok(()) => sync_dir(&parent)?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && current.is_dir() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(super) fn put(
    root: &Path,
    key: &ObjectKey,
    body: &Bytes,
    declared: u64,
    metadata: &UserMetadata,
) -> Result<(), StoreError> {
    let op = Operation::Put;
    let actual = crc64nvme(body);
    if actual != declared {
        return Err(StoreError::new(
            ErrorClass::ChecksumMismatch,
            op,
            key.as_str(),
            format!("declared crc64nvme {declared:016x} but the body gives {actual:016x}"),
        ));
    }
    let path = object_path(root, key);
    let dir = path
        .parent()
        .expect("an object path is below the root, so it has a parent");
    create_dirs(root, dir)
        .map_err(|e| io_error(op, key.as_str(), "cannot create the object's directory", &e))?;

    let temp = dir.join(format!(
        "{RESERVED_SEGMENT_PREFIX}tmp.{}.{}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = write_synced(&temp, &envelope::encode(declared, metadata), body)
        .and_then(|()| fs::rename(&temp, &path))
        .and_then(|()| sync_dir(dir));
    if let Err(e) = written {
        // The temporary file is ours and unpublished: removing it loses nothing.
        let _ = fs::remove_file(&temp);
        return Err(io_error(op, key.as_str(), "atomic write failed", &e));
    }
    Ok(())
}

fn write_synced(path: &Path, header: &[u8], body: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(header)?;
    file.write_all(body)?;
    file.sync_all()
}

/// Opens an object and reads its header, leaving the file positioned at the
/// body. Returns the file, its header and the body's size.
fn open_object(
    root: &Path,
    key: &ObjectKey,
    op: Operation,
) -> Result<(File, Header, u64), StoreError> {
    let path = object_path(root, key);
    let k = key.as_str();
    let mut file = File::open(&path).map_err(|e| io_error(op, k, "cannot open", &e))?;
    let file_len = file
        .metadata()
        .map_err(|e| io_error(op, k, "cannot stat", &e))?
        .len();
    if !file
        .metadata()
        .map_err(|e| io_error(op, k, "cannot stat", &e))?
        .is_file()
    {
        return Err(StoreError::new(
            ErrorClass::NotFound,
            op,
            k,
            "the key names a directory",
        ));
    }
    let mut first = Vec::with_capacity(envelope::PREAMBLE_BYTES);
    (&mut file)
        .take(envelope::PREAMBLE_BYTES as u64)
        .read_to_end(&mut first)
        .map_err(|e| io_error(op, k, "cannot read", &e))?;
    let corrupt = |detail: String| StoreError::new(ErrorClass::Other, op, k, detail);
    let header = match envelope::read_preamble(&first).map_err(corrupt)? {
        Preamble::Raw => {
            file.seek(SeekFrom::Start(0))
                .map_err(|e| io_error(op, k, "cannot seek", &e))?;
            Header {
                checksum: None,
                metadata: UserMetadata::default(),
                body_offset: 0,
            }
        }
        Preamble::Header { text_len } => {
            let mut text = vec![0_u8; text_len as usize];
            file.read_exact(&mut text)
                .map_err(|e| io_error(op, k, "truncated header", &e))?;
            envelope::parse_header(&text).map_err(corrupt)?
        }
    };
    let size = file_len.checked_sub(header.body_offset).ok_or_else(|| {
        StoreError::new(
            ErrorClass::Other,
            op,
            k,
            "corrupt local object: shorter than its header",
        )
    })?;
    Ok((file, header, size))
}

pub(super) fn head(root: &Path, key: &ObjectKey) -> Result<ObjectHead, StoreError> {
    let (_, header, size) = open_object(root, key, Operation::Head)?;
    Ok(ObjectHead {
        size,
        metadata: header.metadata,
        checksum: header.checksum,
    })
}

pub(super) fn get(root: &Path, key: &ObjectKey) -> Result<Bytes, StoreError> {
    let op = Operation::Get;
    let (mut file, header, size) = open_object(root, key, op)?;
    let capacity = usize::try_from(size).map_err(|_| {
        StoreError::new(
            ErrorClass::Other,
            op,
            key.as_str(),
            "object too large for memory",
        )
    })?;
    let mut body = Vec::with_capacity(capacity);
    file.read_to_end(&mut body)
        .map_err(|e| io_error(op, key.as_str(), "cannot read", &e))?;
    if let Some(checksum) = header.checksum {
        checksum.verify(&body).map_err(|detail| {
            StoreError::new(
                ErrorClass::ChecksumMismatch,
                op,
                key.as_str(),
                format!("stored {detail}"),
            )
        })?;
    }
    Ok(Bytes::from(body))
}

pub(super) fn get_range(
    root: &Path,
    key: &ObjectKey,
    range: ByteRange,
) -> Result<Bytes, StoreError> {
    let op = Operation::GetRange;
    let k = key.as_str();
    let (mut file, header, size) = open_object(root, key, op)?;
    if range.start() >= size {
        return Err(StoreError::new(
            ErrorClass::Other,
            op,
            k,
            format!(
                "range not satisfiable: starts at {} of a {size}-byte object",
                range.start()
            ),
        ));
    }
    let len = range.end().min(size) - range.start();
    file.seek(SeekFrom::Start(header.body_offset + range.start()))
        .map_err(|e| io_error(op, k, "cannot seek", &e))?;
    let capacity = usize::try_from(len)
        .map_err(|_| StoreError::new(ErrorClass::Other, op, k, "range too large for memory"))?;
    let mut out = vec![0_u8; capacity];
    file.read_exact(&mut out)
        .map_err(|e| io_error(op, k, "cannot read", &e))?;
    Ok(Bytes::from(out))
}

pub(super) fn delete(root: &Path, key: &ObjectKey) -> Result<(), StoreError> {
    let op = Operation::Delete;
    let path = object_path(root, key);
    match fs::remove_file(&path) {
        Ok(()) => {}
        // Deleting a missing key succeeds, as in S3.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(());
        }
        Err(e) => return Err(io_error(op, key.as_str(), "cannot remove", &e)),
    }
    let dir = path
        .parent()
        .expect("an object path is below the root, so it has a parent");
    sync_dir(dir).map_err(|e| io_error(op, key.as_str(), "cannot sync the directory", &e))
}

pub(super) fn list_page(
    root: &Path,
    prefix: &str,
    after: Option<&str>,
    max_keys: u16,
) -> Result<ListPage, StoreError> {
    let op = Operation::List;
    // Walk only the deepest directory every matching key must be under.
    let start_dir = match prefix.rfind('/') {
        Some(slash) => prefix[..slash]
            .split('/')
            .fold(root.to_path_buf(), |path, segment| path.join(segment)),
        None => root.to_path_buf(),
    };
    let mut found = Vec::new();
    walk(root, &start_dir, prefix, &mut found).map_err(|e| match e {
        WalkError::Io(e) => io_error(op, prefix, "cannot list", &e),
        WalkError::TooMany => StoreError::new(
            ErrorClass::Other,
            op,
            prefix,
            format!("more than {MAX_WALK_ENTRIES} directory entries under the prefix"),
        ),
    })?;
    found.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    let max_keys = usize::from(clamp_page_size(max_keys));
    let start = after.map_or(0, |after| {
        found.partition_point(|o| o.key.as_str() <= after)
    });
    let rest = &found[start..];
    let objects: Vec<ListedObject> = rest.iter().take(max_keys).cloned().collect();
    let next = (rest.len() > max_keys)
        .then(|| objects.last().map(|o| ListToken(o.key.clone())))
        .flatten();
    Ok(ListPage { objects, next })
}

enum WalkError {
    Io(io::Error),
    TooMany,
}

/// Collects the files under `dir` whose key starts with `prefix`, skipping
/// temporary files and not following symbolic links. Iterative, so a deep
/// tree cannot overflow the stack, and bounded by [`MAX_WALK_ENTRIES`].
fn walk(
    root: &Path,
    dir: &Path,
    prefix: &str,
    found: &mut Vec<ListedObject>,
) -> Result<(), WalkError> {
    let mut pending = vec![dir.to_path_buf()];
    let mut seen = 0_usize;
    while let Some(dir) = pending.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            // The prefix's directory not existing means an empty listing.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                continue;
            }
            Err(e) => return Err(WalkError::Io(e)),
        };
        for entry in entries {
            seen += 1;
            if seen > MAX_WALK_ENTRIES {
                return Err(WalkError::TooMany);
            }
            let entry = entry.map_err(WalkError::Io)?;
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(RESERVED_SEGMENT_PREFIX)
            {
                continue;
            }
            let file_type = entry.file_type().map_err(WalkError::Io)?;
            let path = entry.path();
            if file_type.is_dir() {
                pending.push(path);
                continue;
            }
            if !file_type.is_file() {
                continue;
            }
            let Some(key) = relative_key(root, &path) else {
                continue;
            };
            if !key.starts_with(prefix) {
                continue;
            }
            let size = object_size(&path).map_err(WalkError::Io)?;
            found.push(ListedObject { key, size });
        }
    }
    Ok(())
}

/// The key of a file: its path below the root with `/` separators. A name
/// that is not UTF-8 is listed lossily (it can only be a foreign object).
fn relative_key(root: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(root).ok()?;
    let segments: Vec<String> = relative
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    Some(segments.join("/"))
}

/// The body size of the object in `path` (its length less its header).
fn object_size(path: &Path) -> io::Result<u64> {
    let mut file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let mut first = Vec::with_capacity(envelope::PREAMBLE_BYTES);
    (&mut file)
        .take(envelope::PREAMBLE_BYTES as u64)
        .read_to_end(&mut first)?;
    Ok(match envelope::read_preamble(&first) {
        Ok(Preamble::Header { text_len }) => {
            file_len.saturating_sub((envelope::PREAMBLE_BYTES as u64) + u64::from(text_len))
        }
        // A raw file, or one whose header is corrupt: list its whole length
        // and let a HEAD or GET report the corruption.
        Ok(Preamble::Raw) | Err(_) => file_len,
    })
}
