//! Sharing one list of payloads to hash between the caller's thread and one
//! helper thread: the caller takes chunks from the front, the helper from
//! the back, until they meet. Whichever thread has the more time (the other
//! may be parsing, or waiting for a core on a busy machine) hashes the
//! more; the results do not depend on who hashed what.

use std::ops::Range;
use std::sync::{Mutex, PoisonError};

/// Items taken per claim: small enough to balance, large enough that the
/// lock is taken rarely.
const CHUNK: usize = 32;

/// The items `[front, back)` not yet taken.
#[derive(Debug)]
pub(crate) struct TwoEnds {
    ends: Mutex<(usize, usize)>,
}

impl TwoEnds {
    /// Items `0..len`, none taken.
    pub(crate) fn new(len: usize) -> Self {
        Self {
            ends: Mutex::new((0, len)),
        }
    }

    /// The next chunk from the front, or `None` when nothing is left.
    pub(crate) fn front(&self) -> Option<Range<usize>> {
        let mut ends = self.lock();
        let (front, back) = *ends;
        (front < back).then(|| {
            let end = back.min(front + CHUNK);
            ends.0 = end;
            front..end
        })
    }

    /// The next chunk from the back, or `None` when nothing is left.
    pub(crate) fn back(&self) -> Option<Range<usize>> {
        let mut ends = self.lock();
        let (front, back) = *ends;
        (front < back).then(|| {
            let start = front.max(back.saturating_sub(CHUNK));
            ends.1 = start;
            start..back
        })
    }

    /// Takes whatever is left, so neither end gets more.
    pub(crate) fn cancel(&self) {
        let mut ends = self.lock();
        ends.1 = ends.0;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, usize)> {
        // Two integers updated together under the lock: a panic elsewhere
        // cannot leave them half-written, so a poisoned lock is still good.
        self.ends.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_ends_take_every_item_once() {
        for len in [0, 1, CHUNK - 1, CHUNK, 3 * CHUNK + 5] {
            let ends = TwoEnds::new(len);
            let mut taken = Vec::new();
            let mut turn = 0;
            // Each pass takes at least one item or stops.
            loop {
                turn += 1;
                let next = if turn % 3 == 0 {
                    ends.back()
                } else {
                    ends.front()
                };
                match next {
                    Some(range) => taken.extend(range),
                    None => break,
                }
            }
            assert!(ends.back().is_none());
            taken.sort_unstable();
            assert_eq!(taken, (0..len).collect::<Vec<_>>(), "{len}");
        }
        let ends = TwoEnds::new(100);
        assert_eq!(ends.front(), Some(0..CHUNK));
        ends.cancel();
        assert_eq!((ends.front(), ends.back()), (None, None));
    }
}
