//! [`drive`]: the one loop every operation runs a capcat-proto machine with.

use std::time::Duration;

use capcat_proto::{Failure, InOrder, Input, Machine, Rows, Statement, StatementFailed, Step};
use tokio::time::Instant;

use crate::error::CatalogError;
use crate::jitter::Jitter;
use crate::transport::Transport;

/// The most steps one machine may take. Every machine terminates within its
/// documented attempt bounds; this bound only turns a machine bug into an
/// error instead of a loop. The largest legitimate run (a lookup of
/// `MAX_LOOKUP_IDS` ids, or an index pass of many chunks retried at every
/// attempt) stays far below it.
pub const MAX_STEPS: u32 = 100_000;

/// After a failure that may have left `stmt` running on the server, waits
/// until its settle time since `sent` ([`Statement::settle_ns`], the
/// protocol's rule; this loop only sleeps).
async fn settle(operation: &'static str, stmt: &Statement, failure: &Failure, sent: Instant) {
    let Some(settle_ns) = stmt
        .settle_ns()
        .filter(|_| failure.leaves_statement_running())
    else {
        return;
    };
    let until = sent + Duration::from_nanos(settle_ns);
    if until > Instant::now() {
        tracing::debug!(
            operation,
            statement = stmt.name,
            settle_ms = settle_ns / 1_000_000,
            "waiting out the fence margin of a statement that may still land"
        );
        tokio::time::sleep_until(until).await;
    }
}

/// Runs `machine` to completion over `transport`, drawing jitter from
/// `jitter`. Returns the machine's outcome.
pub async fn drive<M: Machine>(
    operation: &'static str,
    machine: &mut M,
    transport: &dyn Transport,
    jitter: &Jitter,
) -> Result<M::Outcome, CatalogError> {
    let started = Instant::now();
    let mut statements = 0u32;
    for _ in 0..MAX_STEPS {
        match machine.poll() {
            Step::Execute(stmt) => {
                statements += 1;
                let sent = Instant::now();
                let input = match transport.execute(&stmt).await {
                    Ok(rows) => Input::Rows(rows),
                    Err(failure) => {
                        tracing::debug!(operation, statement = stmt.name, %failure, "statement failed");
                        settle(operation, &stmt, &failure, sent).await;
                        Input::Failed(failure)
                    }
                };
                machine.handle(input);
            }
            Step::Draw { below } => machine.handle(Input::Drawn(jitter.below(below))),
            Step::Done(outcome) => {
                tracing::debug!(
                    operation,
                    statements,
                    transport = transport.kind(),
                    elapsed_us = started.elapsed().as_micros(),
                    "operation finished"
                );
                return Ok(outcome);
            }
        }
    }
    Err(CatalogError::MachineRunaway {
        operation,
        steps: MAX_STEPS,
    })
}

/// Runs `statements`, which decide nothing, in order through [`drive`]
/// (an [`InOrder`] machine): the outcome is every statement's rows, or the
/// first statement that failed.
///
/// # Errors
/// [`CatalogError::MachineRunaway`], before any statement is sent, for a
/// list longer than the loop's step bound; a statement's failure is the
/// inner `Err`.
pub async fn run_in_order(
    operation: &'static str,
    statements: Vec<Statement>,
    transport: &dyn Transport,
) -> Result<Result<Vec<Rows>, StatementFailed>, CatalogError> {
    // One step per statement, plus the final poll.
    if statements.len() >= MAX_STEPS as usize {
        return Err(CatalogError::MachineRunaway {
            operation,
            steps: MAX_STEPS,
        });
    }
    // An InOrder never asks for a draw (one handed to it anyway would end
    // it as a failure), so the generator's seed is never used.
    let unused = Jitter::from_seed(0);
    drive(operation, &mut InOrder::new(statements), transport, &unused).await
}
