//! `EnsureSchema`: read the system tables, judge, create, stamp.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::machine::{Failure, Input, Machine, Step};
use crate::schema::error::SchemaError;
use crate::schema::guard::{Diagnosis, Observed, ObservedObject, StampState, Verdict, judge};
use crate::schema::objects::{CatalogObject, ObjectKind, create_schema};
use crate::schema::probe;
use crate::statement::{Rows, Statement};
use crate::tables::Tables;

/// What `ensure_schema` did.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EnsureOutcome {
    /// The catalog did not exist; every object was created and stamped.
    Created,
    /// An install of this build had stopped before stamping; the idempotent
    /// DDL ran again and the catalog is now stamped.
    Completed,
    /// The catalog was current. Every view was reinstalled with this
    /// build's definition; these had been missing.
    Current {
        /// The views that were missing (empty when none was).
        recreated_views: BTreeSet<String>,
    },
}

impl std::fmt::Display for EnsureOutcome {
    /// In words, for a person reading a command's output or a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Created => f.write_str("created"),
            Self::Completed => {
                f.write_str("completed (an interrupted install was finished and stamped)")
            }
            Self::Current { recreated_views } if recreated_views.is_empty() => {
                f.write_str("current")
            }
            Self::Current { recreated_views } => {
                f.write_str("current; missing view(s) recreated: ")?;
                for (i, view) in recreated_views.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(view)?;
                }
                Ok(())
            }
        }
    }
}

/// Where the machine is, named by the answer it waits for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum State {
    /// The first listing of our objects: does the stamp table exist?
    ListTables,
    /// The stamp, read before the objects it vouches for.
    ReadStamp,
    /// The objects, listed again after the stamp was read.
    RelistTables {
        stamp: StampState,
    },
    /// The columns of the objects listed.
    ReadColumns {
        objects: BTreeMap<String, ObservedObject>,
        stamp: StampState,
    },
    /// The membership counts, read only when the verdict needs them.
    CountMembership {
        observed: Observed,
    },
    /// The DDL the verdict calls for, in order.
    Apply {
        queue: VecDeque<Statement>,
        outcome: EnsureOutcome,
    },
    Done(Result<EnsureOutcome, SchemaError>),
}

/// The `ensure_schema` machine.
///
/// Statements, in order: `schema.read_tables`; when it lists the stamp
/// table, `schema.read_stamp` and `schema.read_tables` again; then
/// `schema.read_columns`, `schema.count_membership` (only when every table
/// is present and in shape), then the DDL the verdict calls for: everything and
/// `schema.stamp` for a fresh or unfinished install, every view (`CREATE OR
/// REPLACE`) for a current catalog. Nothing is created before the verdict,
/// so a refused catalog is left exactly as it was found.
///
/// The objects judged are listed after the stamp is read, never before.
/// The stamp row is the last statement of an install, so a stamp read
/// current vouches for every object created before it, and a later listing
/// sees them all. Listed the other way round, a process that found another
/// process's install half made and then read its finished stamp would see
/// a stamped catalog with tables missing, and refuse a catalog that is
/// whole. When the first listing shows no stamp table, no object of ours
/// from this build's install existed then (the stamp table is created
/// first), so that listing is judged as it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EnsureSchema {
    tables: Tables,
    state: State,
}

impl EnsureSchema {
    /// A machine for the catalog under `tables`.
    pub fn new(tables: Tables) -> Self {
        Self {
            tables,
            state: State::ListTables,
        }
    }

    fn current_statement(&self) -> Option<Statement> {
        match &self.state {
            State::ListTables | State::RelistTables { .. } => {
                Some(probe::read_tables(&self.tables))
            }
            State::ReadStamp => Some(probe::read_stamp(&self.tables)),
            State::ReadColumns { .. } => Some(probe::read_columns(&self.tables)),
            State::CountMembership { .. } => Some(probe::count_membership(&self.tables)),
            State::Apply { queue, .. } => queue.front().cloned(),
            State::Done(_) => None,
        }
    }

    /// Moves on once all probes are in: judge, then act on the verdict.
    fn decide(&mut self, observed: Observed) {
        self.state = match judge(&self.tables, &observed) {
            Verdict::Fresh => self.apply_all(EnsureOutcome::Created),
            Verdict::Incomplete { .. } => self.apply_all(EnsureOutcome::Completed),
            Verdict::Current { missing_views } => {
                // Every view is reinstalled, not only the missing ones: a
                // view holds no rows, `CREATE OR REPLACE` is idempotent, and
                // a view left from an earlier build of the same schema
                // version would otherwise keep serving its old definition.
                let queue = CatalogObject::ALL
                    .iter()
                    .filter(|o| o.kind() == ObjectKind::View)
                    .map(|o| o.create(&self.tables))
                    .collect();
                State::Apply {
                    queue,
                    outcome: EnsureOutcome::Current {
                        recreated_views: missing_views,
                    },
                }
            }
            Verdict::Refuse(refusal)
                if refusal.diagnosis == Diagnosis::MembershipUncounted
                    && observed.membership.is_none() =>
            {
                State::CountMembership { observed }
            }
            Verdict::Refuse(refusal) => State::Done(Err(SchemaError::Refused(refusal))),
        };
        self.finish_if_idle();
    }

    fn apply_all(&self, outcome: EnsureOutcome) -> State {
        let mut queue: VecDeque<Statement> = create_schema(&self.tables).into();
        queue.push_back(probe::stamp_statement(&self.tables));
        State::Apply { queue, outcome }
    }

    fn finish_if_idle(&mut self) {
        if let State::Apply { queue, outcome } = &self.state
            && queue.is_empty()
        {
            self.state = State::Done(Ok(outcome.clone()));
        }
    }

    fn fail(&mut self, statement: &'static str, failure: Failure) {
        self.state = State::Done(Err(SchemaError::Statement { statement, failure }));
    }

    fn on_rows(&mut self, rows: Rows) -> Result<(), SchemaError> {
        let state = std::mem::replace(&mut self.state, State::ListTables);
        self.state = match state {
            State::ListTables => {
                let objects = probe::parse_tables(&rows)?;
                let stamp_table = CatalogObject::SchemaVersion.name(&self.tables);
                let stamp_is_table = objects
                    .get(&stamp_table)
                    .is_some_and(|o| ObjectKind::Table.matches_engine(&o.engine));
                if stamp_is_table {
                    State::ReadStamp
                } else {
                    State::ReadColumns {
                        objects,
                        stamp: StampState::Absent,
                    }
                }
            }
            State::ReadStamp => State::RelistTables {
                stamp: probe::parse_stamp(&rows)?,
            },
            State::RelistTables { stamp } => State::ReadColumns {
                objects: probe::parse_tables(&rows)?,
                stamp,
            },
            State::ReadColumns { objects, stamp } => {
                self.decide(Observed {
                    objects,
                    columns: probe::parse_columns(&rows)?,
                    stamp,
                    membership: None,
                });
                return Ok(());
            }
            State::CountMembership { mut observed } => {
                observed.membership = Some(probe::parse_membership(&rows)?);
                self.decide(observed);
                return Ok(());
            }
            State::Apply { mut queue, outcome } => {
                queue.pop_front();
                State::Apply { queue, outcome }
            }
            done @ State::Done(_) => done,
        };
        self.finish_if_idle();
        Ok(())
    }
}

impl Machine for EnsureSchema {
    type Outcome = Result<EnsureOutcome, SchemaError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        match (&self.state, self.current_statement()) {
            (State::Done(outcome), _) => Step::Done(outcome.clone()),
            (_, Some(statement)) => Step::Execute(statement),
            // `finish_if_idle` turns an Apply state with an empty queue into
            // Done before `poll` can see it; answering with its outcome
            // keeps this arm truthful should that ever change.
            (State::Apply { outcome, .. }, None) => Step::Done(Ok(outcome.clone())),
            (_, None) => Step::Done(Err(SchemaError::Malformed {
                statement: "schema.ensure",
                message: "the machine has no statement to run and no outcome".to_owned(),
            })),
        }
    }

    fn handle(&mut self, input: Input) {
        let Some(statement) = self.current_statement() else {
            return;
        };
        match input {
            Input::Rows(rows) => {
                if let Err(error) = self.on_rows(rows) {
                    self.state = State::Done(Err(error));
                }
            }
            Input::Failed(failure) => self.fail(statement.name, failure),
            Input::Drawn(_) => self.fail(statement.name, Failure::unasked(&input)),
        }
    }
}
