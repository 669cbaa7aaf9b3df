//! The reader's machines: a search page and a lookup by ids.
//!
//! Both read the published head first, sequentially consistent. A first page
//! pins W to it; a cursor or a lookup already carries W and the head read
//! only proves this server is not behind it, so a lagging replica fails
//! loudly instead of answering from a smaller snapshot.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use uuid::Uuid;

use crate::descriptor::CaptureDescriptor;
use crate::machine::{Failure, Input, Machine, Step};
use crate::reader::error::ReaderError;
use crate::reader::plan::{decode_pinned_version, get_by_ids, pin_snapshot, search_page};
use crate::reader::projection::decode_records;
use crate::reader::query::{Cursor, SearchQuery};
use crate::statement::{Rows, Statement};
use crate::tables::Tables;

/// One page of a search.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Page {
    /// The version the page was read at.
    pub pinned: u64,
    /// The captures, in capture-key order, at most the page size.
    pub records: Vec<CaptureDescriptor>,
    /// Where the next page starts, when there is one.
    pub next: Option<Cursor>,
}

pub(super) fn input_error(statement: &'static str, input: Input) -> Result<Rows, ReaderError> {
    match input {
        Input::Rows(rows) => Ok(rows),
        Input::Failed(failure) => Err(ReaderError::Statement { statement, failure }),
        Input::Drawn(_) => Err(ReaderError::Statement {
            statement,
            failure: Failure::unasked(&input),
        }),
    }
}

fn check_head(head: u64, pinned: u64) -> Result<(), ReaderError> {
    if head < pinned {
        Err(ReaderError::SnapshotAhead { pinned, head })
    } else {
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum SearchState {
    PinHead,
    Search { pinned: u64, statement: Statement },
    Done(Result<Page, ReaderError>),
}

/// `SearchPage`: `reader.pin_snapshot`, then `reader.search_page`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SearchPage {
    tables: Tables,
    query: SearchQuery,
    state: SearchState,
}

impl SearchPage {
    /// A page of `query`. Filters are validated here, so a bad query never
    /// reaches the server.
    pub fn new(tables: Tables, query: SearchQuery) -> Result<Self, ReaderError> {
        search_page(&tables, &query, 0)?;
        Ok(Self {
            tables,
            query,
            state: SearchState::PinHead,
        })
    }

    fn on_head(&self, rows: &Rows) -> Result<SearchState, ReaderError> {
        let head = decode_pinned_version(rows)?;
        let pinned = match &self.query.cursor {
            Some(cursor) => {
                check_head(head, cursor.pinned)?;
                cursor.pinned
            }
            None => head,
        };
        Ok(SearchState::Search {
            pinned,
            statement: search_page(&self.tables, &self.query, pinned)?,
        })
    }

    fn on_page(&self, pinned: u64, rows: &Rows) -> Result<Page, ReaderError> {
        let mut records = decode_records("reader.search_page", rows)?;
        let size = usize::try_from(self.query.page_size.get()).unwrap_or(usize::MAX);
        let next = if records.len() > size {
            records.truncate(size);
            records.last().map(|last| Cursor::after(pinned, last))
        } else {
            None
        };
        Ok(Page {
            pinned,
            records,
            next,
        })
    }
}

impl Machine for SearchPage {
    type Outcome = Result<Page, ReaderError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        match &self.state {
            SearchState::PinHead => Step::Execute(pin_snapshot(&self.tables)),
            SearchState::Search { statement, .. } => Step::Execute(statement.clone()),
            SearchState::Done(outcome) => Step::Done(outcome.clone()),
        }
    }

    fn handle(&mut self, input: Input) {
        let next = match &self.state {
            SearchState::PinHead => {
                input_error("reader.pin_snapshot", input).and_then(|rows| self.on_head(&rows))
            }
            SearchState::Search { pinned, .. } => input_error("reader.search_page", input)
                .and_then(|rows| self.on_page(*pinned, &rows))
                .map(|page| SearchState::Done(Ok(page))),
            SearchState::Done(_) => return,
        };
        self.state = next.unwrap_or_else(|error| SearchState::Done(Err(error)));
    }
}

/// What a lookup found at its pinned version.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lookup {
    /// The tenant looked up.
    pub tenant_id: String,
    /// The version the lookup resolved at.
    pub pinned: u64,
    /// The captures found, by id.
    pub records: BTreeMap<Uuid, CaptureDescriptor>,
    /// The ids asked for and not found.
    pub missing: BTreeSet<Uuid>,
}

impl Lookup {
    /// Every id must resolve: a pinned selection whose captures no longer
    /// resolve at its pinned version is an error naming them, never a shorter
    /// answer.
    pub fn resolve(self) -> Result<BTreeMap<Uuid, CaptureDescriptor>, ReaderError> {
        if self.missing.is_empty() {
            Ok(self.records)
        } else {
            Err(ReaderError::Unresolved {
                tenant: self.tenant_id,
                pinned: self.pinned,
                missing: self.missing,
            })
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum LookupState {
    PinHead,
    Chunks(VecDeque<Statement>),
    Done(Result<Lookup, ReaderError>),
}

/// `GetByIds`: `reader.pin_snapshot` (to prove the server is not behind
/// W), then one `reader.get_by_ids` per chunk of at most 1000 ids.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GetByIds {
    tables: Tables,
    tenant_id: String,
    pinned: u64,
    requested: BTreeSet<Uuid>,
    found: BTreeMap<Uuid, CaptureDescriptor>,
    state: LookupState,
}

impl GetByIds {
    /// A lookup of `ids` for `tenant` at the pinned version `pinned`.
    pub fn new(
        tables: Tables,
        tenant: &str,
        ids: BTreeSet<Uuid>,
        pinned: u64,
    ) -> Result<Self, ReaderError> {
        // Validates the tenant and the id bound before anything runs.
        get_by_ids(&tables, tenant, &ids, pinned)?;
        Ok(Self {
            tables,
            tenant_id: tenant.to_owned(),
            pinned,
            requested: ids,
            found: BTreeMap::new(),
            state: LookupState::PinHead,
        })
    }

    fn finish(&self) -> LookupState {
        let missing = self
            .requested
            .iter()
            .filter(|id| !self.found.contains_key(id))
            .copied()
            .collect();
        LookupState::Done(Ok(Lookup {
            tenant_id: self.tenant_id.clone(),
            pinned: self.pinned,
            records: self.found.clone(),
            missing,
        }))
    }

    fn after_statement(&self, queue: VecDeque<Statement>) -> LookupState {
        if queue.is_empty() {
            self.finish()
        } else {
            LookupState::Chunks(queue)
        }
    }

    fn on_head(&self, rows: &Rows) -> Result<LookupState, ReaderError> {
        check_head(decode_pinned_version(rows)?, self.pinned)?;
        let queue = get_by_ids(&self.tables, &self.tenant_id, &self.requested, self.pinned)?;
        Ok(self.after_statement(queue.into()))
    }

    fn on_chunk(&mut self, rows: &Rows) -> Result<(), ReaderError> {
        for record in decode_records("reader.get_by_ids", rows)? {
            if record.tenant_id != self.tenant_id || !self.requested.contains(&record.capture_id) {
                return Err(ReaderError::Malformed {
                    statement: "reader.get_by_ids",
                    message: format!(
                        "returned capture {} of tenant {:?}, which was not asked for",
                        record.capture_id, record.tenant_id
                    ),
                });
            }
            self.found.insert(record.capture_id, record);
        }
        Ok(())
    }
}

impl Machine for GetByIds {
    type Outcome = Result<Lookup, ReaderError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        match &self.state {
            LookupState::PinHead => Step::Execute(pin_snapshot(&self.tables)),
            LookupState::Chunks(queue) => match queue.front() {
                Some(statement) => Step::Execute(statement.clone()),
                None => Step::Done(Err(ReaderError::Malformed {
                    statement: "reader.get_by_ids",
                    message: "no chunk left to run".to_owned(),
                })),
            },
            LookupState::Done(outcome) => Step::Done(outcome.clone()),
        }
    }

    fn handle(&mut self, input: Input) {
        let state = std::mem::replace(&mut self.state, LookupState::PinHead);
        let next = match state {
            LookupState::PinHead => {
                input_error("reader.pin_snapshot", input).and_then(|rows| self.on_head(&rows))
            }
            LookupState::Chunks(mut queue) => input_error("reader.get_by_ids", input)
                .and_then(|rows| self.on_chunk(&rows))
                .map(|()| {
                    queue.pop_front();
                    self.after_statement(queue)
                }),
            done @ LookupState::Done(_) => Ok(done),
        };
        self.state = next.unwrap_or_else(|error| LookupState::Done(Err(error)));
    }
}
