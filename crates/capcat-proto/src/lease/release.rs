//! Release: one fenced statement, local state cleared only after it ran.

use crate::config::Config;
use crate::machine::{Input, Machine, Step};
use crate::tables::Tables;

use super::{Lease, LeaseError, sql};

/// Releases a lease with ONE fenced `INSERT ... SELECT` (`lease.release`).
///
/// Outcome `Ok(())` means the statement ran to completion, so no live lease
/// of the caller's remains: either the fence admitted it and the tombstone is
/// the head, or the fence refused because the head was no longer the
/// caller's live lease. Only then may the caller forget its [`Lease`].
/// `Err` means the statement's effect is unknown and the caller must keep
/// its lease (to retry the release, or to let it expire): clearing it first
/// would leave a live lease on the server that nothing can release.
///
/// Whatever the outcome, once a release was sent the lease must never renew,
/// publish or claim again under its id: a tombstone makes every rival's
/// claim read-back ignore that lease's rows, so a later row under the same
/// id would be invisible to them. And a release is not sent while a
/// guarded statement of the lease may still land ([`Lease::unsettled`]):
/// its rows would land after a successor, which no longer waits for the
/// lease's expiry, took over. Such a release ends at once with
/// [`LeaseError::Unsettled`], and the lease is left to expire.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Release {
    tables: Tables,
    cfg: Config,
    lease: Lease,
    outcome: Option<Result<(), LeaseError>>,
}

impl Release {
    /// Release `lease`.
    pub fn new(tables: Tables, cfg: Config, lease: Lease) -> Self {
        let outcome = lease.unsettled().then_some(Err(LeaseError::Unsettled {
            lease_id: lease.lease_id,
            until_ns: lease.unsettled_until_ns,
        }));
        Self {
            tables,
            cfg,
            lease,
            outcome,
        }
    }

    /// The lease being released.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }
}

impl Machine for Release {
    type Outcome = Result<(), LeaseError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        match &self.outcome {
            Some(outcome) => Step::Done(outcome.clone()),
            None => Step::Execute(sql::release(&self.tables, &self.cfg, &self.lease)),
        }
    }

    fn handle(&mut self, input: Input) {
        if self.outcome.is_some() {
            return;
        }
        self.outcome = Some(match input {
            Input::Rows(_) => Ok(()),
            Input::Failed(failure) => Err(LeaseError::Statement {
                statement: "lease.release",
                failure,
            }),
            Input::Drawn(_) => Err(LeaseError::UnexpectedInput {
                expected: "rows or a failure",
                got: input.describe(),
            }),
        });
    }
}
