//! [`LeaseSlot`]: the publisher lease the cycle, the keep-alive, the
//! reconciler and close share.
//!
//! The slot is one async mutex around the lease and a flag saying whether
//! it holds one. The flag changes only through [`LeaseGuard`], under the
//! lock, so it never disagrees with the slot; a snapshot reads the flag
//! without waiting for a renewal or a publish that holds the lock (possibly
//! while it re-acquires a lost lease).

use std::sync::atomic::{AtomicBool, Ordering};

use capcat_clickhouse::LeaseHandle;
use tokio::sync::{Mutex, MutexGuard};

/// The publisher lease, or nothing after it was lost or released (the next
/// publish acquires it again).
#[derive(Debug)]
pub(crate) struct LeaseSlot {
    handle: Mutex<Option<LeaseHandle>>,
    held: AtomicBool,
}

impl LeaseSlot {
    /// A slot holding `lease`.
    pub(crate) fn new(lease: LeaseHandle) -> Self {
        Self {
            handle: Mutex::new(Some(lease)),
            held: AtomicBool::new(true),
        }
    }

    /// Whether the slot holds a lease right now (no waiting).
    pub(crate) fn is_held(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }

    /// Locks the slot. Every publish, every reconcile inventory read and
    /// every renewal holds this lock, so they never interleave.
    pub(crate) async fn lock(&self) -> LeaseGuard<'_> {
        LeaseGuard {
            handle: self.handle.lock().await,
            held: &self.held,
        }
    }
}

/// The locked slot.
#[derive(Debug)]
pub(crate) struct LeaseGuard<'a> {
    handle: MutexGuard<'a, Option<LeaseHandle>>,
    held: &'a AtomicBool,
}

impl LeaseGuard<'_> {
    /// The lease, when the slot holds one.
    pub(crate) fn lease(&mut self) -> Option<&mut LeaseHandle> {
        self.handle.as_mut()
    }

    /// Puts a newly acquired lease in the slot and returns it.
    pub(crate) fn put(&mut self, lease: LeaseHandle) -> &mut LeaseHandle {
        self.held.store(true, Ordering::SeqCst);
        self.handle.insert(lease)
    }

    /// Takes the lease out of the slot (to release it, or because it was
    /// lost: dropping a `LeaseHandle` lets it expire on its own).
    pub(crate) fn take(&mut self) -> Option<LeaseHandle> {
        self.held.store(false, Ordering::SeqCst);
        self.handle.take()
    }
}
