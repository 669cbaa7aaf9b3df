//! The claim id a catalog's lease acquires present until one of them holds.
//!
//! A lease claim INSERT whose client failed (a timeout, a dropped
//! connection) may still land, after its acquire was refused: a live row
//! under the id that acquire presented. An acquire that then minted a new
//! id would read that row as a rival's live lease and be refused by its own
//! claim for up to one TTL (the TLA+ spec found it: `OneLiveLease`, its
//! self-lockout part, with late claims). So an id that never held is kept
//! and presented again by the next acquire, which reads such a row as its
//! own and claims over it. That is safe because no statement was ever sent
//! under that id: it never held.
//!
//! An id that held is never handed out again (after a release its rows are
//! ignored by every rival's read-back, so presenting it again could make
//! two holders), and two acquires running at once never share an id (each
//! would read the other's claim as its own): the id is taken out of the
//! slot for the length of an acquire, and a second acquire meanwhile mints
//! its own.

use std::sync::{Mutex, PoisonError};

use uuid::Uuid;

/// The id the next acquire presents, when an earlier one did not hold.
#[derive(Debug, Default)]
pub(crate) struct ClaimIds {
    unheld: Mutex<Option<Uuid>>,
}

impl ClaimIds {
    /// The id for an acquire about to start: the unheld one left by an
    /// earlier acquire, or a fresh one.
    pub(crate) fn take(&self) -> Uuid {
        self.unheld
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_else(Uuid::new_v4)
    }

    /// Hands back the id of an acquire that did not hold, for the next one
    /// (unless another acquire already left one: either id is as good, the
    /// other one's rows are waited out like any rival's).
    pub(crate) fn give_back(&self, id: Uuid) {
        let mut slot = self.unheld.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_that_did_not_hold_is_presented_again_and_a_held_one_never() {
        let ids = ClaimIds::default();
        let first = ids.take();
        ids.give_back(first);
        assert_eq!(ids.take(), first, "an unheld id is presented again");
        // `first` held this time: it is not given back.
        let next = ids.take();
        assert_ne!(next, first, "a held id is never handed out again");
    }

    #[test]
    fn two_acquires_at_once_never_share_an_id() {
        let ids = ClaimIds::default();
        let first = ids.take();
        ids.give_back(first);
        let a = ids.take();
        let b = ids.take();
        assert_ne!(a, b);
    }
}
