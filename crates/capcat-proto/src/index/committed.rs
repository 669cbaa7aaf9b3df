//! [`ReadCommitted`]: which packs the inventory (the replay guard) holds.

use std::collections::BTreeSet;

use crate::decode::{string_at, uuid_at};
use crate::machine::{Failure, Input, Machine, Step};
use crate::publish::PackRef;
use crate::statement::Rows;
use crate::tables::Tables;

use super::{IndexError, sql};

const STATEMENT: &str = "index.read_committed";

/// Reads which of a set of packs the inventory holds, one
/// `index.read_committed` per chunk. An index pass starts with it, and a
/// reconciler asks it before fetching any pack.
///
/// Outcome: the packs held, or [`IndexError::Statement`] (the read failed;
/// a read changes nothing, so it may be retried) or
/// [`IndexError::Malformed`] (a row not of the declared shape, or a pack
/// the read did not ask about).
///
/// ```
/// use capcat_proto::index::ReadCommitted;
/// use capcat_proto::{Input, Machine, Rows, Step, Tables, Value};
///
/// let pack = ("store".to_owned(), uuid::Uuid::from_u128(7));
/// let mut read = ReadCommitted::new(Tables::new("t").unwrap(), vec![pack.clone()], 1000);
/// let Step::Execute(stmt) = read.poll() else { unreachable!() };
/// assert_eq!(stmt.name, "index.read_committed");
/// read.handle(Input::Rows(Rows(vec![vec![
///     Value::String(pack.0.clone()),
///     Value::Uuid(pack.1),
/// ]])));
/// assert_eq!(read.poll(), Step::Done(Ok([pack].into())));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReadCommitted {
    tables: Tables,
    packs: Vec<PackRef>,
    chunk_size: usize,
    chunk: usize,
    committed: BTreeSet<PackRef>,
    outcome: Option<Result<BTreeSet<PackRef>, IndexError>>,
}

impl ReadCommitted {
    /// Reads which of `packs` the inventory holds, at most `chunk_size`
    /// packs per statement (at least one).
    pub fn new(tables: Tables, packs: Vec<PackRef>, chunk_size: usize) -> Self {
        let outcome = packs.is_empty().then(|| Ok(BTreeSet::new()));
        Self {
            tables,
            packs,
            chunk_size: chunk_size.max(1),
            chunk: 0,
            committed: BTreeSet::new(),
            outcome,
        }
    }

    fn asked(&self) -> &[PackRef] {
        let start = (self.chunk * self.chunk_size).min(self.packs.len());
        let end = (start + self.chunk_size).min(self.packs.len());
        &self.packs[start..end]
    }

    fn on_rows(&mut self, rows: &Rows) -> Option<Result<BTreeSet<PackRef>, IndexError>> {
        for row in &rows.0 {
            let pack = string_at(row, 0, "store_id")
                .and_then(|s| uuid_at(row, 1, "pack_id").map(|p| (s, p)));
            match pack {
                Ok(pack) if self.asked().contains(&pack) => {
                    self.committed.insert(pack);
                }
                Ok(pack) => {
                    return Some(Err(IndexError::Malformed {
                        statement: STATEMENT,
                        detail: format!("the read returned {pack:?}, which it did not ask about"),
                    }));
                }
                Err(bad) => {
                    return Some(Err(IndexError::Malformed {
                        statement: STATEMENT,
                        detail: bad.0,
                    }));
                }
            }
        }
        self.chunk += 1;
        (self.chunk * self.chunk_size >= self.packs.len())
            .then(|| Ok(std::mem::take(&mut self.committed)))
    }
}

impl Machine for ReadCommitted {
    type Outcome = Result<BTreeSet<PackRef>, IndexError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        match &self.outcome {
            Some(outcome) => Step::Done(outcome.clone()),
            None => Step::Execute(sql::read_committed(&self.tables, self.asked().to_vec())),
        }
    }

    fn handle(&mut self, input: Input) {
        if self.outcome.is_some() {
            return;
        }
        self.outcome = match input {
            Input::Rows(rows) => self.on_rows(&rows),
            Input::Failed(failure) => Some(Err(IndexError::Statement {
                statement: STATEMENT,
                failure,
            })),
            input @ Input::Drawn(_) => Some(Err(IndexError::Statement {
                statement: STATEMENT,
                failure: Failure::unasked(&input),
            })),
        };
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::statement::{Param, Value};

    fn pack(n: u128) -> PackRef {
        ("s".to_owned(), Uuid::from_u128(n))
    }

    fn row(p: &PackRef) -> Vec<Value> {
        vec![Value::String(p.0.clone()), Value::Uuid(p.1)]
    }

    fn tables() -> Tables {
        Tables::new("t").expect("valid prefix")
    }

    #[test]
    fn packs_are_read_chunk_by_chunk_and_the_held_ones_returned() {
        let packs: Vec<PackRef> = (1..=5).map(pack).collect();
        let mut read = ReadCommitted::new(tables(), packs.clone(), 2);
        let mut sizes = Vec::new();
        let outcome = loop {
            match read.poll() {
                Step::Execute(stmt) => {
                    let Some(Param::StorePacks(asked)) = stmt.params.get("packs") else {
                        panic!("the read binds its packs")
                    };
                    sizes.push(asked.len());
                    let held = asked.iter().filter(|p| p.1.as_u128() % 2 == 1).map(row);
                    read.handle(Input::Rows(Rows(held.collect())));
                }
                Step::Draw { .. } => panic!("a read draws nothing"),
                Step::Done(outcome) => break outcome,
            }
        };
        assert_eq!(sizes, [2, 2, 1]);
        assert_eq!(outcome, Ok([pack(1), pack(3), pack(5)].into()));
    }

    #[test]
    fn nothing_to_read_is_done_at_once() {
        let mut read = ReadCommitted::new(tables(), Vec::new(), 2);
        assert_eq!(read.poll(), Step::Done(Ok(BTreeSet::new())));
    }

    #[test]
    fn a_pack_it_did_not_ask_about_and_a_failure_are_typed_errors() {
        let mut read = ReadCommitted::new(tables(), vec![pack(1)], 2);
        read.handle(Input::Rows(Rows(vec![row(&pack(9))])));
        assert!(matches!(
            read.poll(),
            Step::Done(Err(IndexError::Malformed { .. }))
        ));
        let mut read = ReadCommitted::new(tables(), vec![pack(1)], 2);
        read.handle(Input::Failed(Failure::Timeout));
        assert!(matches!(
            read.poll(),
            Step::Done(Err(IndexError::Statement {
                failure: Failure::Timeout,
                ..
            }))
        ));
    }
}
