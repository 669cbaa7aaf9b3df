//! [`AdmittedPacks`]: every pack a pinned snapshot admits, for a store
//! scrub (`capcat verify`).
//!
//! A pack is admitted at W when a manifest row names it and the commit row
//! of the same publish stands at or below W
//! ([`crate::fragments::published_pairs`] with [`MembershipBound::Pinned`],
//! the pairing every pinned read uses). The list is read in pages in the
//! server's `(store_id, pack_id)` order with a strict keyset comparison, so
//! a catalog of any size is listed without one unbounded answer.
//!
//! The server's order is not Rust's: ClickHouse compares UUIDs by its own
//! representation (the two 64-bit halves, high half first as stored), not
//! by their bytes. The machine therefore never compares packs itself; the
//! keyset is the last row the server returned, and a pack seen twice is a
//! malformed answer.

use std::collections::{BTreeMap, BTreeSet};

use crate::decode::{string_at, uuid_at};
use crate::fragments::{MembershipBound, PINNED_VERSION_PARAM, published_pairs};
use crate::machine::{Input, Machine, Step};
use crate::publish::PackRef;
use crate::statement::{Expect, Param, Rows, Settings, Statement};
use crate::tables::Tables;

use super::ReaderError;
use super::machines::input_error;
use super::plan::{decode_pinned_version, pin_snapshot};

/// The statement's name.
const STATEMENT: &str = "reader.admitted_packs";

/// Packs per page.
pub const ADMITTED_PAGE: u64 = 10_000;

/// The most pages one listing reads: 5 * 10^8 packs at [`ADMITTED_PAGE`],
/// far beyond any catalog (a pack holds up to a million records), and
/// within the adapters' bound of 100,000 statements per machine. A listing
/// that reaches it is refused rather than left to run without bound.
pub const MAX_ADMITTED_PAGES: u64 = 50_000;

/// `reader.admitted_packs`: one page of the packs admitted at `pinned`,
/// after `after` (exclusive) in `(store_id, pack_id)` order, at most
/// `limit` of them.
pub fn admitted_packs(
    tables: &Tables,
    pinned: u64,
    after: Option<&PackRef>,
    limit: u64,
) -> Statement {
    let mut params = BTreeMap::new();
    params.insert(PINNED_VERSION_PARAM.to_owned(), Param::UInt64(pinned));
    params.insert("limit".to_owned(), Param::UInt64(limit));
    let mut conditions = vec![published_pairs(tables, MembershipBound::Pinned)];
    if let Some((store_id, pack_id)) = after {
        conditions.push(
            "(store_id, pack_id) > ({after_store_id:String}, {after_pack_id:UUID})".to_owned(),
        );
        params.insert("after_store_id".to_owned(), Param::String(store_id.clone()));
        params.insert("after_pack_id".to_owned(), Param::Uuid(*pack_id));
    }
    Statement {
        name: STATEMENT,
        sql: format!(
            "SELECT DISTINCT store_id, pack_id FROM {manifest} WHERE {conditions} \
             ORDER BY store_id, pack_id LIMIT {{limit:UInt64}}",
            manifest = tables.snapshot_manifest(),
            conditions = conditions.join(" AND "),
        ),
        params,
        settings: Settings::default(),
        expect: Expect::Rows(crate::index::sql::pack_columns()),
        data: None,
    }
}

/// What a listing found: the version it pinned and every pack admitted
/// there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Admitted {
    /// The pinned version W.
    pub pinned: u64,
    /// Every pack admitted at W, each once, in Rust's `(store_id, pack_id)`
    /// order.
    pub packs: Vec<PackRef>,
}

/// What the listing waits for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Waiting {
    /// The published head, to pin.
    Head,
    /// The page after the last pack listed.
    Page { pinned: u64, pages: u64 },
}

/// Pins the published head, then lists every pack admitted there, page by
/// page (`reader.pin_snapshot`, then `reader.admitted_packs` until a page
/// comes back short).
///
/// ```
/// use capcat_proto::reader::AdmittedPacks;
/// use capcat_proto::{Input, Machine, Rows, Step, Tables, Value};
/// use uuid::Uuid;
///
/// let mut list = AdmittedPacks::new(Tables::new("t").unwrap(), 2);
/// let Step::Execute(pin) = list.poll() else { unreachable!() };
/// assert_eq!(pin.name, "reader.pin_snapshot");
/// list.handle(Input::Rows(Rows(vec![vec![Value::UInt64(7)]])));
/// let Step::Execute(page) = list.poll() else { unreachable!() };
/// assert_eq!(page.name, "reader.admitted_packs");
/// let pack = vec![Value::String("s".into()), Value::Uuid(Uuid::from_u128(1))];
/// list.handle(Input::Rows(Rows(vec![pack])));
/// let Step::Done(Ok(admitted)) = list.poll() else { unreachable!() };
/// assert_eq!((admitted.pinned, admitted.packs.len()), (7, 1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AdmittedPacks {
    tables: Tables,
    page_size: u64,
    waiting: Waiting,
    /// Every pack listed so far.
    packs: BTreeSet<PackRef>,
    /// The last row of the last page: where the next page starts.
    last: Option<PackRef>,
    outcome: Option<Result<Admitted, ReaderError>>,
}

impl AdmittedPacks {
    /// A listing of the catalog under `tables`, `page_size` packs per
    /// statement (at least one).
    pub fn new(tables: Tables, page_size: u64) -> Self {
        Self {
            tables,
            page_size: page_size.max(1),
            waiting: Waiting::Head,
            packs: BTreeSet::new(),
            last: None,
            outcome: None,
        }
    }

    fn on_page(
        &mut self,
        pinned: u64,
        pages: u64,
        rows: &Rows,
    ) -> Option<Result<Admitted, ReaderError>> {
        let malformed = |message: String| {
            Some(Err(ReaderError::Malformed {
                statement: STATEMENT,
                message,
            }))
        };
        if rows.0.len() as u64 > self.page_size {
            return malformed(format!(
                "a page of at most {} packs returned {}",
                self.page_size,
                rows.0.len()
            ));
        }
        for row in &rows.0 {
            let pack = match string_at(row, 0, "store_id")
                .and_then(|s| uuid_at(row, 1, "pack_id").map(|p| (s, p)))
            {
                Ok(pack) => pack,
                Err(bad) => return malformed(bad.0),
            };
            // Each pack once: the keyset is strict, so a pack seen again is
            // a server that did not page as asked.
            if !self.packs.insert(pack.clone()) {
                return malformed(format!("{pack:?} was listed twice"));
            }
            self.last = Some(pack);
        }
        if (rows.0.len() as u64) < self.page_size {
            return Some(Ok(Admitted {
                pinned,
                packs: std::mem::take(&mut self.packs).into_iter().collect(),
            }));
        }
        if pages + 1 >= MAX_ADMITTED_PAGES {
            return malformed(format!(
                "more than {MAX_ADMITTED_PAGES} pages of {} packs",
                self.page_size
            ));
        }
        self.waiting = Waiting::Page {
            pinned,
            pages: pages + 1,
        };
        None
    }
}

impl Machine for AdmittedPacks {
    type Outcome = Result<Admitted, ReaderError>;

    fn poll(&mut self) -> Step<Self::Outcome> {
        if let Some(outcome) = &self.outcome {
            return Step::Done(outcome.clone());
        }
        match &self.waiting {
            Waiting::Head => Step::Execute(pin_snapshot(&self.tables)),
            Waiting::Page { pinned, .. } => Step::Execute(admitted_packs(
                &self.tables,
                *pinned,
                self.last.as_ref(),
                self.page_size,
            )),
        }
    }

    fn handle(&mut self, input: Input) {
        if self.outcome.is_some() {
            return;
        }
        match self.waiting.clone() {
            Waiting::Head => {
                match input_error("reader.pin_snapshot", input)
                    .and_then(|rows| decode_pinned_version(&rows))
                {
                    // Versions start at 1: W = 0 admits nothing, so there
                    // is nothing to list.
                    Ok(0) => {
                        self.outcome = Some(Ok(Admitted {
                            pinned: 0,
                            packs: Vec::new(),
                        }));
                    }
                    Ok(pinned) => self.waiting = Waiting::Page { pinned, pages: 0 },
                    Err(error) => self.outcome = Some(Err(error)),
                }
            }
            Waiting::Page { pinned, pages } => {
                self.outcome = match input_error(STATEMENT, input) {
                    Ok(rows) => self.on_page(pinned, pages, &rows),
                    Err(error) => Some(Err(error)),
                };
            }
        }
    }
}
