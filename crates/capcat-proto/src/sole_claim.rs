//! The sole-claimant protocol both the lease and the version allocator
//! run: read the head, draw a jitter skip above it, append a claim there,
//! read back who claimed it. Alone, the claimant holds the slot; beside a
//! rival, every claimant abandons it and goes round again.
//!
//! [`Phase`] is where such a machine is, and [`next`] its one transition
//! table; a [`Claimant`] supplies what differs (what a head is, what a slot
//! is, the statements, and how rows are judged). A failed claim INSERT
//! goes to the read-back like a successful one, because it may still have
//! landed.

use crate::config::jitter_window;
use crate::machine::{Failure, Input, Step};
use crate::statement::{Rows, Statement};

/// Where a sole-claimant machine is. `H` is what the head read found, `S`
/// the slot claimed, `O` the outcome.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Phase<H, S, O> {
    /// Waiting for the head read's rows.
    ReadHead,
    /// Waiting for the jitter draw above this head.
    Draw(H),
    /// Waiting for the claim INSERT at this slot.
    Insert(S),
    /// Waiting for the read-back of this slot's claims.
    ReadBack(S),
    /// Over.
    Done(O),
}

/// The phase of claimant `C`.
pub(crate) type PhaseOf<C> =
    Phase<<C as Claimant>::Head, <C as Claimant>::Slot, <C as Claimant>::Outcome>;

/// What a sole-claimant machine supplies to [`next`] and [`poll`].
pub(crate) trait Claimant {
    /// What the head read yields for the draw (the term or version to skip
    /// above, and anything the claim carries).
    type Head;
    /// The slot claimed (a term and a lease id, or a version).
    type Slot: Clone;
    /// The machine's outcome.
    type Outcome: Clone;
    /// The head read's statement name (for errors).
    const READ_HEAD: &'static str;
    /// The read-back's statement name (for errors).
    const READ_CLAIMS: &'static str;

    /// Attempts abandoned so far: it sizes the jitter window.
    fn attempt(&self) -> u32;
    /// The head read.
    fn read_head(&self) -> Statement;
    /// The claim INSERT at `slot`.
    fn insert_claim(&self, slot: &Self::Slot) -> Statement;
    /// The read-back of `slot`.
    fn read_claims(&self, slot: &Self::Slot) -> Statement;
    /// The phase after the head read returned `rows`: a draw, or done.
    fn on_head(&self, rows: &Rows) -> PhaseOf<Self>;
    /// The phase after `skip` was drawn above `head`: an insert, or done
    /// (no slot above the head).
    fn above(&self, head: Self::Head, skip: u64) -> PhaseOf<Self>;
    /// The phase after the read-back of `slot` returned `rows`: done, or a
    /// fresh head read after abandoning the slot.
    fn on_read_back(&mut self, slot: Self::Slot, rows: &Rows) -> PhaseOf<Self>;
    /// The outcome of a failed read.
    fn failed(statement: &'static str, failure: Failure) -> Self::Outcome;
    /// The outcome of an input of the wrong kind.
    fn unexpected(expected: &'static str, got: &'static str) -> Self::Outcome;
}

/// What the machine in `phase` asks for.
pub(crate) fn poll<C: Claimant>(claimant: &C, phase: &PhaseOf<C>) -> Step<C::Outcome> {
    match phase {
        Phase::ReadHead => Step::Execute(claimant.read_head()),
        Phase::Draw(_) => Step::Draw {
            below: jitter_window(claimant.attempt()),
        },
        Phase::Insert(slot) => Step::Execute(claimant.insert_claim(slot)),
        Phase::ReadBack(slot) => Step::Execute(claimant.read_claims(slot)),
        Phase::Done(outcome) => Step::Done(outcome.clone()),
    }
}

/// The phase after `phase` handles `input`: every (phase, input) pair is
/// matched, so a missing transition cannot hide behind a catch-all.
pub(crate) fn next<C: Claimant>(claimant: &mut C, phase: PhaseOf<C>, input: Input) -> PhaseOf<C> {
    let window = jitter_window(claimant.attempt());
    match (phase, input) {
        (done @ Phase::Done(_), _) => done,
        (Phase::ReadHead, Input::Rows(rows)) => claimant.on_head(&rows),
        (Phase::ReadHead, Input::Failed(failure)) => Phase::Done(C::failed(C::READ_HEAD, failure)),
        (Phase::Draw(head), Input::Drawn(skip)) if skip < window => claimant.above(head, skip),
        // A claim whose INSERT failed may still have landed: the read-back
        // decides, exactly as it does for one that succeeded.
        (Phase::Insert(slot), Input::Rows(_) | Input::Failed(_)) => Phase::ReadBack(slot),
        (Phase::ReadBack(slot), Input::Rows(rows)) => claimant.on_read_back(slot, &rows),
        (Phase::ReadBack(_), Input::Failed(failure)) => {
            Phase::Done(C::failed(C::READ_CLAIMS, failure))
        }
        (Phase::Draw(_), input) => Phase::Done(C::unexpected(
            "a draw within the jitter window",
            input.describe(),
        )),
        (Phase::ReadHead | Phase::Insert(_) | Phase::ReadBack(_), input @ Input::Drawn(_)) => {
            Phase::Done(C::unexpected("rows or a failure", input.describe()))
        }
    }
}
