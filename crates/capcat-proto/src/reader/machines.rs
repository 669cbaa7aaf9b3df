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
use crate::reader::plan::{decode_watermark, get_by_ids, pin_watermark, search_page};
use crate::reader::projection::decode_records;
use crate::reader::query::{Cursor, SearchQuery};
use crate::statement::{Rows, Statement};
use crate::tables::Tables;

/// One page of a search.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Page {
    /// The watermark the page was read at.
    pub watermark: u64,
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
        Err(ReaderError::WatermarkAhead { pinned, head })
    } else {
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum SearchState {
    PinHead,
    Search {
        watermark: u64,
        statement: Statement,
    },
    Done(Result<Page, ReaderError>),
}

/// `SearchPage`: `reader.pin_watermark`, then `reader.search_page`.
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
        let head = decode_watermark(rows)?;
        let watermark = match &self.query.cursor {
            Some(cursor) => {
                check_head(head, cursor.watermark)?;
                cursor.watermark
            }
            None => head,
        };
        Ok(SearchState::Search {
            watermark,
            statement: search_page(&self.tables, &self.query, watermark)?,
        })
    }

    fn on_page(&self, watermark: u64, rows: &Rows) -> Result<Page, ReaderError> {
        let mut records = decode_records("reader.search_page", rows)?;
        let size = usize::try_from(self.query.page_size.get()).unwrap_or(usize::MAX);
        let next = if records.len() > size {
            records.truncate(size);
            records.last().map(|last| Cursor::after(watermark, last))
        } else {
            None
        };
        Ok(Page {
            watermark,
            records,
            next,
        })
    }
}

impl Machine for SearchPage {
    type Outcome = Result<Page, ReaderError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        match &self.state {
            SearchState::PinHead => Step::Execute(pin_watermark(&self.tables)),
            SearchState::Search { statement, .. } => Step::Execute(statement.clone()),
            SearchState::Done(outcome) => Step::Done(outcome.clone()),
        }
    }

    fn handle(&mut self, input: Input) {
        let next = match &self.state {
            SearchState::PinHead => {
                input_error("reader.pin_watermark", input).and_then(|rows| self.on_head(&rows))
            }
            SearchState::Search { watermark, .. } => input_error("reader.search_page", input)
                .and_then(|rows| self.on_page(*watermark, &rows))
                .map(|page| SearchState::Done(Ok(page))),
            SearchState::Done(_) => return,
        };
        self.state = next.unwrap_or_else(|error| SearchState::Done(Err(error)));
    }
}

/// What a lookup found at its watermark.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lookup {
    /// The tenant looked up.
    pub tenant_id: String,
    /// The watermark the lookup resolved at.
    pub watermark: u64,
    /// The captures found, by id.
    pub records: BTreeMap<Uuid, CaptureDescriptor>,
    /// The ids asked for and not found.
    pub missing: BTreeSet<Uuid>,
}

impl Lookup {
    /// Every id must resolve: a pinned selection whose captures no longer
    /// resolve at its watermark is an error naming them, never a shorter
    /// answer.
    pub fn resolve(self) -> Result<BTreeMap<Uuid, CaptureDescriptor>, ReaderError> {
        if self.missing.is_empty() {
            Ok(self.records)
        } else {
            Err(ReaderError::Unresolved {
                tenant: self.tenant_id,
                watermark: self.watermark,
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

/// `GetByIds`: `reader.pin_watermark` (to prove the server is not behind
/// W), then one `reader.get_by_ids` per chunk of at most 1000 ids.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GetByIds {
    tables: Tables,
    tenant_id: String,
    watermark: u64,
    requested: BTreeSet<Uuid>,
    found: BTreeMap<Uuid, CaptureDescriptor>,
    state: LookupState,
}

impl GetByIds {
    /// A lookup of `ids` for `tenant` at `watermark`.
    pub fn new(
        tables: Tables,
        tenant: &str,
        ids: BTreeSet<Uuid>,
        watermark: u64,
    ) -> Result<Self, ReaderError> {
        // Validates the tenant and the id bound before anything runs.
        get_by_ids(&tables, tenant, &ids, watermark)?;
        Ok(Self {
            tables,
            tenant_id: tenant.to_owned(),
            watermark,
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
            watermark: self.watermark,
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
        check_head(decode_watermark(rows)?, self.watermark)?;
        let queue = get_by_ids(
            &self.tables,
            &self.tenant_id,
            &self.requested,
            self.watermark,
        )?;
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
            LookupState::PinHead => Step::Execute(pin_watermark(&self.tables)),
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
                input_error("reader.pin_watermark", input).and_then(|rows| self.on_head(&rows))
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
