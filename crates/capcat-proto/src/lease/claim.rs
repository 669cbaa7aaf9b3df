//! Acquire, re-acquire and renew: one sole-claimant machine in two modes.

use std::collections::BTreeSet;

use uuid::Uuid;

use crate::config::Config;
use crate::decode::{BadRow, bool_at, string_at, u64_at, uuid_at};
use crate::machine::{Failure, Input, Machine, Step};
use crate::sole_claim::{self, Claimant, Phase, PhaseOf};
use crate::statement::{Rows, Statement};
use crate::tables::Tables;

use super::{Lease, LeaseError, LeaseHead, sql};

/// What a [`LeaseClaim`] is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClaimMode {
    /// Take the lease if nobody live holds it; re-acquire (same `lease_id`,
    /// new term) if the caller's own lease is the head.
    Acquire,
    /// Extend the caller's lease; refuse unless its lease is the
    /// uncontested head.
    Renew,
}

/// What a head read hands the draw: the term to claim above, and the
/// lease id the claim carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Above {
    head_term: u64,
    lease_id: Uuid,
}

/// The term a claim is for, under the lease id it carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TermClaim {
    term: u64,
    lease_id: Uuid,
}

/// Where the claim machine is.
type State = PhaseOf<LeaseClaim>;

/// The lease claim machine. Outcome: the lease now held, or why not.
///
/// Statements per uncontested claim: `lease.read_head`, `lease.insert_claim`,
/// `lease.read_claims` (plus one `Step::Draw`). Bounded by
/// [`Config::max_claim_attempts`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseClaim {
    tables: Tables,
    cfg: Config,
    mode: ClaimMode,
    holder: String,
    held: Option<Lease>,
    fresh_lease_id: Uuid,
    attempt: u32,
    state: State,
}

impl LeaseClaim {
    /// Acquire the lease as `holder`. `held` is the lease the caller already
    /// holds, if any: when it is still the head, the claim keeps its
    /// `lease_id` (a holder re-acquiring must not become a stranger to its
    /// own row). Otherwise the claim uses `fresh_lease_id`, which the caller
    /// mints (a random v4 UUID).
    pub fn acquire(
        tables: Tables,
        cfg: Config,
        holder: String,
        held: Option<Lease>,
        fresh_lease_id: Uuid,
    ) -> Self {
        Self {
            tables,
            cfg,
            mode: ClaimMode::Acquire,
            holder,
            held,
            fresh_lease_id,
            attempt: 0,
            state: Phase::ReadHead,
        }
    }

    /// Renew `lease`: claim a new term under the same `lease_id`, with a
    /// fresh server-stamped expiry. Refuses with [`LeaseError::NotHeld`] when
    /// the head is not `lease` (taken over, released, contested, or empty).
    pub fn renew(tables: Tables, cfg: Config, lease: Lease) -> Self {
        Self {
            tables,
            cfg,
            mode: ClaimMode::Renew,
            holder: lease.holder.clone(),
            fresh_lease_id: lease.lease_id,
            held: Some(lease),
            attempt: 0,
            state: Phase::ReadHead,
        }
    }

    /// The mode this machine runs in.
    pub fn mode(&self) -> ClaimMode {
        self.mode
    }

    /// Attempts started so far (1-based once running).
    pub fn attempts(&self) -> u32 {
        self.attempt + 1
    }

    fn malformed(statement: &'static str, bad: BadRow) -> State {
        Phase::Done(Err(LeaseError::Malformed {
            statement,
            detail: bad.0,
        }))
    }

    fn retry(&mut self, last_term: u64) -> State {
        self.attempt += 1;
        if self.attempt >= self.cfg.max_claim_attempts() {
            Phase::Done(Err(LeaseError::Contested {
                attempts: self.attempt,
                last_term,
            }))
        } else {
            Phase::ReadHead
        }
    }
}

impl Claimant for LeaseClaim {
    type Head = Above;
    type Slot = TermClaim;
    type Outcome = Result<Lease, LeaseError>;
    const READ_HEAD: &'static str = "lease.read_head";
    const READ_CLAIMS: &'static str = "lease.read_claims";

    fn attempt(&self) -> u32 {
        self.attempt
    }

    fn read_head(&self) -> Statement {
        sql::read_head(&self.tables)
    }

    fn insert_claim(&self, slot: &TermClaim) -> Statement {
        sql::insert_claim(
            &self.tables,
            slot.term,
            slot.lease_id,
            &self.holder,
            self.cfg.lease_ttl_ns(),
        )
    }

    fn read_claims(&self, slot: &TermClaim) -> Statement {
        sql::read_claims(&self.tables, slot.term, slot.lease_id)
    }

    fn on_head(&self, rows: &Rows) -> State {
        let head = match parse_head(rows) {
            Ok(head) => head,
            Err(bad) => return Self::malformed("lease.read_head", bad),
        };
        let own_id = self.held.as_ref().map(|l| l.lease_id);
        // In an acquire, the claim id is the caller's own too: a claim it
        // abandoned (its read-back saw a rival) stands under that id, and
        // an acquire refused by its own abandoned row would wait out a TTL
        // for nothing (`OneLiveLease`).
        let own = |id: Uuid| {
            Some(id) == own_id || (self.mode == ClaimMode::Acquire && id == self.fresh_lease_id)
        };
        // Its own tombstone (expiry 0) is not its head to claim over: a
        // released lease is not held, so a renewal over it is refused.
        let ours = head
            .as_ref()
            .is_some_and(|h| !h.contested && own(h.lease_id) && h.expires_at_ns != 0);
        let head_term = head.as_ref().map_or(0, |h| h.term);
        match self.mode {
            ClaimMode::Renew => {
                if !ours {
                    let lease_id = own_id.unwrap_or(self.fresh_lease_id);
                    return Phase::Done(Err(LeaseError::NotHeld { lease_id, head }));
                }
            }
            ClaimMode::Acquire => {
                // A term is held while ANY row at it is live, whatever the head
                // row says: a claimant at that term may have read itself back as
                // the sole claimant before a rival claim (or a late release
                // tombstone, whose term is computed when it is evaluated) landed
                // beside it, and may still have a fenced statement in flight
                // that would grow a pinned snapshot. Every row at the term
                // expires within one TTL; the error names the head row and the
                // term's latest expiry, which is when an acquire can next
                // succeed. A head row of the caller's own lease is never held
                // against it (`OneLiveLease`).
                let held = |h: &LeaseHead| h.term_live && !own(h.lease_id);
                if let Some(h) = head.as_ref().filter(|h| !ours && held(h)) {
                    return Phase::Done(Err(LeaseError::Held {
                        holder: h.holder.clone(),
                        lease_id: h.lease_id,
                        term: h.term,
                        expires_at_ns: h.term_expires_at_ns,
                    }));
                }
            }
        }
        // Over its own head, contested or not, the claim keeps that head's
        // id (the held lease's, or the claim id of an abandoned attempt): a
        // holder that minted a second id would be a stranger to its own live
        // row. Never over its own tombstone: a released id must not claim
        // again, because the read-back of every rival ignores the rows of a
        // released lease.
        let reuse = head
            .as_ref()
            .filter(|h| own(h.lease_id) && h.expires_at_ns != 0)
            .map(|h| h.lease_id);
        let lease_id = reuse.unwrap_or(self.fresh_lease_id);
        Phase::Draw(Above {
            head_term,
            lease_id,
        })
    }

    fn on_read_back(&mut self, slot: TermClaim, rows: &Rows) -> State {
        let TermClaim { term, lease_id } = slot;
        let mut ids = BTreeSet::new();
        let mut expiry = None;
        for row in &rows.0 {
            let id = match uuid_at(row, 0, "lease_id") {
                Ok(id) => id,
                Err(bad) => return Self::malformed("lease.read_claims", bad),
            };
            let exp = match u64_at(row, 1, "expires_at_ns") {
                Ok(exp) => exp,
                Err(bad) => return Self::malformed("lease.read_claims", bad),
            };
            if id == lease_id {
                expiry = Some(expiry.map_or(exp, |e: u64| e.max(exp)));
            }
            ids.insert(id);
        }
        match expiry {
            Some(expires_at_ns) if ids.len() == 1 => {
                // The claim was stamped at `expires_at_ns - ttl` by the
                // server's clock, before anything this lease sends next is
                // evaluated: if that is past every abandoned statement's
                // last moment, none of them can land any more.
                let carried = self.held.as_ref().map_or(0, |l| l.unsettled_until_ns);
                let mut lease = Lease {
                    lease_id,
                    holder: self.holder.clone(),
                    term,
                    expires_at_ns,
                    unsettled_until_ns: carried,
                };
                if lease.claimed_at_ns(self.cfg.lease_ttl_ns()) > carried {
                    lease.unsettled_until_ns = 0;
                }
                Phase::Done(Ok(lease))
            }
            // Contested (or our row never landed): abandon the term and go
            // round again, from a fresh head read, with a wider jitter window.
            _ => self.retry(term),
        }
    }

    fn above(&self, head: Above, skip: u64) -> State {
        let Above {
            head_term,
            lease_id,
        } = head;
        match head_term.checked_add(1 + skip) {
            Some(term) => Phase::Insert(TermClaim { term, lease_id }),
            None => Phase::Done(Err(LeaseError::Malformed {
                statement: "lease.read_head",
                detail: format!("head term {head_term} leaves no term above it"),
            })),
        }
    }

    fn failed(statement: &'static str, failure: Failure) -> Self::Outcome {
        Err(LeaseError::Statement { statement, failure })
    }

    fn unexpected(expected: &'static str, got: &'static str) -> Self::Outcome {
        Err(LeaseError::UnexpectedInput { expected, got })
    }
}

/// Reads the head (and whether it is contested) from `lease.read_head`.
pub(crate) fn parse_head(rows: &Rows) -> Result<Option<LeaseHead>, BadRow> {
    let Some(first) = rows.0.first() else {
        return Ok(None);
    };
    let term = u64_at(first, 0, "term")?;
    let lease_id = uuid_at(first, 1, "lease_id")?;
    let mut contested = false;
    if let Some(second) = rows.0.get(1) {
        let second_term = u64_at(second, 0, "term")?;
        let second_id = uuid_at(second, 1, "lease_id")?;
        contested = second_term == term && second_id != lease_id;
    }
    Ok(Some(LeaseHead {
        term,
        lease_id,
        holder: string_at(first, 2, "holder")?,
        expires_at_ns: u64_at(first, 3, "expires_at_ns")?,
        live: bool_at(first, 4, "live")?,
        contested,
        term_expires_at_ns: u64_at(first, 5, "term_expires_at_ns")?,
        term_live: bool_at(first, 6, "term_live")?,
    }))
}

impl Machine for LeaseClaim {
    type Outcome = Result<Lease, LeaseError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        sole_claim::poll(self, &self.state)
    }

    fn handle(&mut self, input: Input) {
        // The state is consumed by value and the transition names the next
        // one; `ReadHead` only holds the slot while it runs.
        let state = std::mem::replace(&mut self.state, Phase::ReadHead);
        self.state = sole_claim::next(self, state, input);
    }
}
