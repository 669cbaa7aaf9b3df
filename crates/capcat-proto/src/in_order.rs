//! [`InOrder`]: statements that decide nothing, run one after another.
//!
//! Some catalog work is a fixed list of statements whose results the
//! protocol does not interpret: dropping the schema, a demand append, a
//! demand compaction's appends and deletes. They still go through the one
//! drive loop as a machine, so every statement the adapters send is
//! logged, timed and bounded in one place.
//!
//! ```
//! use capcat_proto::{InOrder, Input, Machine, Rows, Step, Tables};
//!
//! let tables = Tables::new("t").unwrap();
//! let mut drop = InOrder::new(capcat_proto::schema::drop_schema(&tables));
//! let outcome = loop {
//!     match drop.poll() {
//!         Step::Execute(_stmt) => drop.handle(Input::Rows(Rows::empty())),
//!         Step::Draw { .. } => unreachable!("InOrder never draws"),
//!         Step::Done(outcome) => break outcome,
//!     }
//! };
//! assert!(outcome.is_ok());
//! ```

use crate::machine::{Failure, Input, Machine, Step};
use crate::statement::{Rows, Statement};

/// Runs its statements in order and stops at the first that fails. Its
/// outcome is every statement's rows, in order, or the first failure.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InOrder {
    statements: Vec<Statement>,
    /// The rows of the statements that ran, one entry each.
    rows: Vec<Rows>,
    failed: Option<StatementFailed>,
}

/// The statement an [`InOrder`] stopped at.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("statement {index} ({statement}) failed: {failure}")]
pub struct StatementFailed {
    /// Its position in the list (0-based): this many statements before it
    /// succeeded.
    pub index: usize,
    /// Its name.
    pub statement: &'static str,
    /// What the driver reported. As always, a failure may still land.
    pub failure: Failure,
}

impl InOrder {
    /// A machine that runs `statements` in order.
    pub fn new(statements: Vec<Statement>) -> Self {
        Self {
            rows: Vec::with_capacity(statements.len()),
            statements,
            failed: None,
        }
    }
}

impl Machine for InOrder {
    type Outcome = Result<Vec<Rows>, StatementFailed>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        if let Some(failed) = &self.failed {
            return Step::Done(Err(failed.clone()));
        }
        match self.statements.get(self.rows.len()) {
            Some(stmt) => Step::Execute(stmt.clone()),
            None => Step::Done(Ok(self.rows.clone())),
        }
    }

    fn handle(&mut self, input: Input) {
        let index = self.rows.len();
        let Some(stmt) = self.statements.get(index) else {
            return;
        };
        if self.failed.is_some() {
            return;
        }
        match input {
            Input::Rows(rows) => self.rows.push(rows),
            Input::Failed(failure) => {
                self.failed = Some(StatementFailed {
                    index,
                    statement: stmt.name,
                    failure,
                });
            }
            drawn @ Input::Drawn(_) => {
                self.failed = Some(StatementFailed {
                    index,
                    statement: stmt.name,
                    failure: Failure::unasked(&drawn),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statement::Value;
    use crate::tables::Tables;

    fn statements() -> Vec<Statement> {
        crate::schema::drop_schema(&Tables::new("t").expect("a valid prefix"))
    }

    #[test]
    fn every_statement_runs_once_in_order_and_their_rows_come_back() {
        let expected = statements();
        let mut machine = InOrder::new(expected.clone());
        let mut sent = Vec::new();
        let outcome = loop {
            match machine.poll() {
                Step::Execute(stmt) => {
                    let row = Rows(vec![vec![Value::UInt64(sent.len() as u64)]]);
                    sent.push(stmt);
                    machine.handle(Input::Rows(row));
                }
                Step::Draw { .. } => panic!("InOrder never draws"),
                Step::Done(outcome) => break outcome,
            }
        };
        assert_eq!(sent, expected);
        let rows = outcome.expect("nothing failed");
        assert_eq!(rows.len(), expected.len());
        assert_eq!(rows[2], Rows(vec![vec![Value::UInt64(2)]]));
    }

    #[test]
    fn the_first_failure_ends_it_and_names_the_statement() {
        let expected = statements();
        let mut machine = InOrder::new(expected.clone());
        machine.handle(Input::Rows(Rows::empty()));
        machine.handle(Input::Failed(Failure::Timeout));
        // Anything handed after the end is ignored.
        machine.handle(Input::Rows(Rows::empty()));
        let Step::Done(Err(failed)) = machine.poll() else {
            panic!("the machine must be done with the failure");
        };
        assert_eq!(failed.index, 1);
        assert_eq!(failed.statement, expected[1].name);
        assert_eq!(failed.failure, Failure::Timeout);
    }

    #[test]
    fn a_draw_where_rows_were_asked_for_is_a_failure_not_a_panic() {
        let mut machine = InOrder::new(statements());
        machine.handle(Input::Drawn(3));
        assert!(matches!(
            machine.poll(),
            Step::Done(Err(StatementFailed { index: 0, .. }))
        ));
    }

    #[test]
    fn no_statements_is_done_at_once() {
        assert_eq!(InOrder::new(Vec::new()).poll(), Step::Done(Ok(Vec::new())));
    }
}
