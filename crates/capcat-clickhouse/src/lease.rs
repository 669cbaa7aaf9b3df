//! [`LeaseHandle`]: the publisher lease as the caller holds it.

use capcat_proto::{Lease, LeaseClaim, Release};

use crate::catalog::Catalog;
use crate::error::CatalogError;

/// A held publisher lease: acquire, renew, release.
///
/// The handle keeps the lease as of its last successful claim (publishes and
/// index passes renew it and hand the renewed lease back here). A release
/// whose effect is unknown keeps the lease in the handle, so the caller can
/// retry it or let it expire: forgetting it first would leave a live lease
/// on the server that nothing could release.
#[derive(Debug)]
pub struct LeaseHandle {
    catalog: Catalog,
    lease: Lease,
    /// A release was sent (its effect known or not).
    release_sent: bool,
    /// A release completed.
    released: bool,
    /// A machine that may send guarded statements under this lease started
    /// and has not handed the lease back: if the future running it was
    /// dropped (cancelled) mid-statement, a guarded statement may still be
    /// running on the server, under a row this handle may not even know
    /// (the machine may have renewed). Such a handle is never used again
    /// and never released: the lease lapses, and a fresh acquire waits out
    /// every row of it (the claim read-back refuses while any is live).
    in_doubt: bool,
}

impl LeaseHandle {
    pub(crate) async fn acquire(catalog: Catalog, holder: &str) -> Result<Self, CatalogError> {
        // An id an earlier acquire presented without holding, so a claim of
        // that acquire landing late reads as ours (crate::claim_id).
        let claim_id = catalog.claim_ids().take();
        let machine = LeaseClaim::acquire(
            catalog.tables().clone(),
            catalog.config().clone(),
            holder.to_owned(),
            None,
            claim_id,
        );
        let outcome = catalog.run("lease.acquire", machine).await;
        if !matches!(outcome, Ok(Ok(_))) {
            catalog.claim_ids().give_back(claim_id);
        }
        let lease = outcome??;
        tracing::info!(holder, lease_id = %lease.lease_id, term = lease.term, "publisher lease acquired");
        Ok(Self {
            catalog,
            lease,
            release_sent: false,
            released: false,
            in_doubt: false,
        })
    }

    /// The lease as of the last claim; [`CatalogError::Released`] once a
    /// release was sent, whatever its outcome: a tombstone that may still
    /// land makes every rival's read-back ignore this lease's rows, so the
    /// lease must never renew or publish again.
    pub fn current(&self) -> Result<&Lease, CatalogError> {
        if self.in_doubt {
            Err(CatalogError::InDoubt {
                lease_id: self.lease.lease_id,
            })
        } else if self.release_sent {
            Err(CatalogError::Released {
                lease_id: self.lease.lease_id,
            })
        } else {
            Ok(&self.lease)
        }
    }

    /// The lease as last known, released or not (diagnostics).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The lease for a machine that may send guarded statements; the
    /// handle stays in doubt until [`update`](Self::update) hands the
    /// machine's lease back.
    pub(crate) fn begin_guarded_run(&mut self) -> Result<Lease, CatalogError> {
        let lease = self.current()?.clone();
        self.in_doubt = true;
        Ok(lease)
    }

    pub(crate) fn update(&mut self, mut lease: Lease) {
        self.in_doubt = false;
        // A machine hands back the lease it ran with; a renewal inside it only
        // moves the term and expiry forward, never the id.
        if lease.lease_id != self.lease.lease_id || lease.term < self.lease.term {
            return;
        }
        // Only a renewal (a new term, stamped by the server) can prove that
        // an abandoned statement can no longer land: at the same term the
        // mark is kept whatever the machine handed back.
        if lease.term == self.lease.term {
            lease.unsettled_until_ns = lease.unsettled_until_ns.max(self.lease.unsettled_until_ns);
        }
        self.lease = lease;
    }

    /// Extends the lease (a new term under the same lease id, a fresh
    /// server-stamped expiry). Fails with `LeaseError::NotHeld` once the
    /// lease was taken over, released or contested.
    pub async fn renew(&mut self) -> Result<&Lease, CatalogError> {
        let machine = LeaseClaim::renew(
            self.catalog.tables().clone(),
            self.catalog.config().clone(),
            self.current()?.clone(),
        );
        let lease = self.catalog.run("lease.renew", machine).await??;
        self.update(lease);
        Ok(&self.lease)
    }

    /// Re-acquires the lease: keeps this lease id when it is still the head
    /// (live or not), takes a fresh one otherwise (when nobody live holds it).
    /// After a release was sent the old id is never presented again.
    pub async fn reacquire(&mut self) -> Result<&Lease, CatalogError> {
        // A handle in doubt presents nothing: a fresh id waits out every
        // row of its lease, whichever row a dropped machine last claimed.
        let held = (!self.release_sent && !self.in_doubt).then(|| self.lease.clone());
        let claim_id = self.catalog.claim_ids().take();
        let machine = LeaseClaim::acquire(
            self.catalog.tables().clone(),
            self.catalog.config().clone(),
            self.lease.holder.clone(),
            held,
            claim_id,
        );
        let outcome = self.catalog.run("lease.reacquire", machine).await;
        // The claim id is spent only if the lease now held is under it (a
        // re-acquire that kept this lease's id did not use it).
        match &outcome {
            Ok(Ok(lease)) if lease.lease_id == claim_id => {}
            _ => self.catalog.claim_ids().give_back(claim_id),
        }
        let lease = outcome??;
        self.lease = lease;
        self.release_sent = false;
        self.released = false;
        self.in_doubt = false;
        Ok(&self.lease)
    }

    /// Releases the lease with ONE fenced statement: it writes a tombstone
    /// only while this lease is still the live head, so a stale holder can
    /// never revoke a successor. After `Ok` the handle is spent; after `Err`
    /// it still holds the lease. A lease a guarded statement of which may
    /// still land (`Lease::unsettled`, or a handle in doubt) is not
    /// released: the error says so, and the lease is left to expire.
    pub async fn release(&mut self) -> Result<(), CatalogError> {
        if self.in_doubt {
            return Err(CatalogError::InDoubt {
                lease_id: self.lease.lease_id,
            });
        }
        if self.released {
            return Err(CatalogError::Released {
                lease_id: self.lease.lease_id,
            });
        }
        let machine = Release::new(
            self.catalog.tables().clone(),
            self.catalog.config().clone(),
            self.lease.clone(),
        );
        self.release_sent = true;
        self.catalog.run("lease.release", machine).await??;
        self.released = true;
        tracing::info!(lease_id = %self.lease.lease_id, "publisher lease released");
        Ok(())
    }
}
