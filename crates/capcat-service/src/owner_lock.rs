//! Spool ownership: an exclusive advisory lock on `<spool_dir>/.owner.lock`.
//!
//! A service that owns its spool sweeps stale `.open` files at start and
//! writes `status.json`. Both are safe only when no other owner runs on the
//! same directory: a second process (`capcat drain`, `reconcile`, `ingest`,
//! a second demo on one `--dir`) that swept would delete the `.open` pack a
//! running sink is writing. The lock makes ownership exclusive. It is an
//! `flock` on Linux, so the kernel releases it when the holding process
//! dies, even by `kill -9`: a crashed owner never blocks its successor.
//!
//! The holder writes its pid and lease holder name into the file after
//! taking the lock, so a refused process can say who owns the spool.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use crate::error::StartError;
pub use crate::spool::{OWNER_LOCK_FILE_NAME, SpoolHolder};

/// The outcome of trying to take the lock.
#[derive(Debug)]
pub(crate) enum TakeOutcome {
    /// This process owns the spool until the lock is dropped.
    Taken(OwnerLock),
    /// Another process holds it (named when it wrote itself down).
    Busy(Option<SpoolHolder>),
}

/// A held owner lock: dropping it (or the process dying) releases it.
#[derive(Debug)]
pub(crate) struct OwnerLock {
    // Held only for its lock; closing the descriptor releases the flock.
    _file: File,
}

/// The lock file's path for `spool_dir`.
#[must_use]
pub fn owner_lock_path(spool_dir: &Path) -> PathBuf {
    spool_dir.join(OWNER_LOCK_FILE_NAME)
}

fn parse_holder(text: &str) -> Option<SpoolHolder> {
    let (pid, holder) = text.trim_end_matches('\n').split_once(' ')?;
    Some(SpoolHolder {
        pid: pid.parse().ok()?,
        holder: holder.to_owned(),
    })
}

/// Tries once, never waits, to take the owner lock of `spool_dir`.
///
/// # Errors
/// The lock file cannot be opened, locked for a reason other than being
/// held, or written.
pub(crate) fn try_take(spool_dir: &Path, holder: &str) -> Result<TakeOutcome, std::io::Error> {
    let path = owner_lock_path(spool_dir);
    // Never truncated on open: the holder's name in it must survive a
    // refused process opening the file.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let named = file
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| parse_holder(&text));
            return Ok(TakeOutcome::Busy(named));
        }
        Err(TryLockError::Error(error)) => return Err(error),
    }
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    writeln!(file, "{} {holder}", std::process::id())?;
    file.flush()?;
    Ok(TakeOutcome::Taken(OwnerLock { _file: file }))
}

/// A spool's owner lock, held for a caller that must own the spool before
/// the service starts (a capture that seals packs into the spool first,
/// like `capcat demo`): take it with [`take`], pass clones to
/// [`crate::Service::start_owning`]. The lock is released when the last
/// clone drops (or the process dies).
#[derive(Clone, Debug)]
pub struct SpoolOwnership {
    pub(crate) spool_dir: PathBuf,
    pub(crate) lock: std::sync::Arc<OwnerLock>,
}

impl SpoolOwnership {
    /// The spool directory owned.
    #[must_use]
    pub fn spool_dir(&self) -> &Path {
        &self.spool_dir
    }
}

/// Takes the owner lock of `spool_dir` (creating the directory), or
/// refuses at once when another live process holds it.
///
/// # Errors
/// [`StartError::SpoolBusy`] naming the holder, [`StartError::OwnerLock`]
/// when the lock file cannot be opened or locked, [`StartError::Spool`]
/// when the directory cannot be created.
pub fn take(spool_dir: &Path, holder: &str) -> Result<SpoolOwnership, StartError> {
    let spool = crate::Spool::open(spool_dir)?;
    match try_take(spool.dir(), holder) {
        Ok(TakeOutcome::Taken(lock)) => Ok(SpoolOwnership {
            spool_dir: spool.dir().to_owned(),
            lock: std::sync::Arc::new(lock),
        }),
        Ok(TakeOutcome::Busy(holder)) => Err(StartError::SpoolBusy {
            spool_dir: spool.dir().to_owned(),
            holder,
        }),
        Err(source) => Err(StartError::OwnerLock {
            path: owner_lock_path(spool.dir()),
            source,
        }),
    }
}

/// Refuses at once when another live process owns `spool_dir`, for a
/// command that would open a catalog (an embedded one is itself locked by
/// the running service) before [`crate::Service::start`] could say who owns
/// the spool. It takes the lock for a moment and lets it go, so it is only
/// a courtesy: `Service::start` still takes the lock itself. A spool
/// directory that does not exist yet is free.
///
/// # Errors
/// [`StartError::SpoolBusy`] naming the holder, or
/// [`StartError::OwnerLock`] when the lock file cannot be opened or locked.
pub fn check_free(spool_dir: &Path) -> Result<(), StartError> {
    if !spool_dir.is_dir() {
        return Ok(());
    }
    match try_take(spool_dir, "(capcat: checking the spool is free)") {
        Ok(TakeOutcome::Taken(_released_here)) => Ok(()),
        Ok(TakeOutcome::Busy(holder)) => Err(StartError::SpoolBusy {
            spool_dir: spool_dir.to_owned(),
            holder,
        }),
        Err(source) => Err(StartError::OwnerLock {
            path: owner_lock_path(spool_dir),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_refused_and_told_who_holds_it_until_release() {
        let dir = tempfile::tempdir().expect("tempdir");
        let TakeOutcome::Taken(first) = try_take(dir.path(), "first").expect("take") else {
            panic!("a fresh spool is free");
        };
        // flock locks belong to the open file description, so a second
        // open in the same process is refused like another process would be.
        match try_take(dir.path(), "second").expect("try") {
            TakeOutcome::Busy(Some(holder)) => {
                assert_eq!(holder.pid, std::process::id());
                assert_eq!(holder.holder, "first");
            }
            other => panic!("expected busy, got {other:?}"),
        }
        assert!(matches!(
            check_free(dir.path()),
            Err(StartError::SpoolBusy {
                holder: Some(_),
                ..
            })
        ));
        drop(first);
        check_free(dir.path()).expect("free once released");
        let owned = take(dir.path(), "third").expect("take");
        let clone = owned.clone();
        drop(owned);
        assert!(matches!(
            take(dir.path(), "fourth"),
            Err(StartError::SpoolBusy { .. })
        ));
        drop(clone);
        take(dir.path(), "fourth").expect("free once every clone dropped");
        assert!(matches!(
            try_take(dir.path(), "second").expect("take"),
            TakeOutcome::Taken(_)
        ));
    }
}
