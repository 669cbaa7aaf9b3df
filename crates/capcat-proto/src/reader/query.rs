//! Typed search filters, the keyset cursor and the page size.
//!
//! Every filter applies BEFORE aggregation, which is sound only on immutable
//! columns: every row of one capture carries the same value there, so a
//! filter cannot match only the row that loses the `argMax`. A test pins
//! each filter's column to the immutable set. Filtering after aggregation is
//! the alternative, and it forfeits the primary index.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::descriptor::CaptureDescriptor;
use crate::reader::error::ReaderError;
use crate::statement::Param;

/// The largest page the reader serves. The GROUP BY completes before the
/// LIMIT applies, so an unbounded page is an unbounded aggregation.
pub const MAX_PAGE_SIZE: u64 = 5_000;

/// A page size in `1..=MAX_PAGE_SIZE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageSize(u64);

impl PageSize {
    /// Validates a page size.
    pub fn new(requested: u64) -> Result<Self, ReaderError> {
        if (1..=MAX_PAGE_SIZE).contains(&requested) {
            Ok(Self(requested))
        } else {
            Err(ReaderError::BadPageSize {
                requested,
                max: MAX_PAGE_SIZE,
            })
        }
    }

    /// The size.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl Default for PageSize {
    fn default() -> Self {
        Self(100)
    }
}

/// An inclusive range of unsigned values; either end may be open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Range {
    /// Lowest value admitted (`>=`), if bounded below.
    pub from: Option<u64>,
    /// Highest value admitted (`<=`), if bounded above.
    pub until: Option<u64>,
}

/// What a search selects. The tenant is required; every other filter is
/// optional and narrows the result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SearchFilter {
    /// The tenant (required, non-empty).
    pub tenant_id: String,
    /// Only this experiment.
    pub experiment_id: Option<String>,
    /// Only this run.
    pub run_id: Option<String>,
    /// Capture time, nanoseconds, inclusive at both ends.
    pub captured_at_ns: Range,
    /// Only this tensor name.
    pub tensor_name: Option<String>,
    /// Only tensor names starting with this text (a module path, say
    /// `encoder.layers.3.`).
    pub tensor_name_prefix: Option<String>,
    /// Only this element type, e.g. `f32`.
    pub dtype: Option<String>,
    /// Training step, inclusive at both ends.
    pub step: Range,
}

/// The position after which the next page starts: the capture key of the
/// last row returned, and the version the first page pinned.
///
/// Carrying the pinned version is what makes pagination a snapshot read: every
/// page resolves at the same W however far the catalog moves meanwhile.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cursor {
    /// The pinned version every page of this search reads at.
    pub pinned: u64,
    /// The tenant of the last row.
    pub tenant_id: String,
    /// The experiment of the last row.
    pub experiment_id: String,
    /// The run of the last row.
    pub run_id: String,
    /// The capture time of the last row.
    pub captured_at_ns: u64,
    /// The capture id of the last row.
    pub capture_id: Uuid,
}

impl Cursor {
    /// The cursor positioned after `row`, at the pinned version `pinned`.
    pub fn after(pinned: u64, row: &CaptureDescriptor) -> Self {
        Self {
            pinned,
            tenant_id: row.tenant_id.clone(),
            experiment_id: row.experiment_id.clone(),
            run_id: row.run_id.clone(),
            captured_at_ns: row.captured_at_ns,
            capture_id: row.capture_id,
        }
    }
}

impl Cursor {
    /// The cursor as one opaque, printable token a caller can hand back
    /// later (`c1:` then the fields, `:`-separated, with `%` and `:` escaped
    /// inside the three strings).
    pub fn to_token(&self) -> String {
        format!(
            "c1:{}:{}:{}:{}:{}:{}",
            self.pinned,
            self.captured_at_ns,
            self.capture_id.hyphenated(),
            escape(&self.tenant_id),
            escape(&self.experiment_id),
            escape(&self.run_id)
        )
    }

    /// Parses a token made by [`Cursor::to_token`].
    pub fn from_token(token: &str) -> Result<Self, ReaderError> {
        let bad = |reason: &str| ReaderError::BadCursor {
            token: token.to_owned(),
            reason: reason.to_owned(),
        };
        let parts: Vec<&str> = token.split(':').collect();
        let [
            version,
            pinned,
            captured_at_ns,
            capture_id,
            tenant,
            experiment,
            run,
        ] = parts.as_slice()
        else {
            return Err(bad("expected 7 ':'-separated fields"));
        };
        if *version != "c1" {
            return Err(bad("unknown cursor version"));
        }
        Ok(Self {
            pinned: pinned
                .parse()
                .map_err(|_| bad("the pinned version is not a number"))?,
            captured_at_ns: captured_at_ns
                .parse()
                .map_err(|_| bad("captured_at_ns is not a number"))?,
            capture_id: Uuid::parse_str(capture_id).map_err(|_| bad("capture_id is not a UUID"))?,
            tenant_id: unescape(tenant).ok_or_else(|| bad("bad escape in tenant_id"))?,
            experiment_id: unescape(experiment)
                .ok_or_else(|| bad("bad escape in experiment_id"))?,
            run_id: unescape(run).ok_or_else(|| bad("bad escape in run_id"))?,
        })
    }
}

fn escape(s: &str) -> String {
    s.replace('%', "%25").replace(':', "%3A")
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3)?;
        out.push(match code {
            "25" => '%',
            "3A" => ':',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// A search: filters, where to start, how many.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SearchQuery {
    /// What to select.
    pub filter: SearchFilter,
    /// Start after this position (`None`: the first page, which pins W).
    pub cursor: Option<Cursor>,
    /// Rows per page.
    pub page_size: PageSize,
}

/// The WHERE conditions and parameters of a filter (tenant included).
pub(crate) fn filter_conditions(
    filter: &SearchFilter,
    params: &mut BTreeMap<String, Param>,
) -> Result<Vec<String>, ReaderError> {
    if filter.tenant_id.is_empty() {
        return Err(ReaderError::MissingTenant);
    }
    let mut out = vec!["tenant_id = {tenant_id:String}".to_owned()];
    params.insert(
        "tenant_id".to_owned(),
        Param::String(filter.tenant_id.clone()),
    );
    let equals = [
        ("experiment_id", &filter.experiment_id),
        ("run_id", &filter.run_id),
        ("tensor_name", &filter.tensor_name),
        ("dtype", &filter.dtype),
    ];
    for (column, value) in equals {
        if let Some(value) = value {
            out.push(format!("{column} = {{{column}:String}}"));
            params.insert(column.to_owned(), Param::String(value.clone()));
        }
    }
    if let Some(prefix) = &filter.tensor_name_prefix {
        out.push("startsWith(tensor_name, {tensor_name_prefix:String})".to_owned());
        params.insert(
            "tensor_name_prefix".to_owned(),
            Param::String(prefix.clone()),
        );
    }
    range_conditions("captured_at_ns", filter.captured_at_ns, &mut out, params)?;
    range_conditions("step", filter.step, &mut out, params)?;
    Ok(out)
}

/// A range filter is non-strict at both ends. The keyset comparison is the
/// strict one; the two must never be confused, which is why the golden test
/// spells out both.
fn range_conditions(
    column: &'static str,
    range: Range,
    out: &mut Vec<String>,
    params: &mut BTreeMap<String, Param>,
) -> Result<(), ReaderError> {
    if let (Some(from), Some(until)) = (range.from, range.until)
        && from > until
    {
        return Err(ReaderError::InvertedRange {
            filter: column,
            from,
            until,
        });
    }
    if let Some(from) = range.from {
        out.push(format!("{column} >= {{{column}_from:UInt64}}"));
        params.insert(format!("{column}_from"), Param::UInt64(from));
    }
    if let Some(until) = range.until {
        out.push(format!("{column} <= {{{column}_until:UInt64}}"));
        params.insert(format!("{column}_until"), Param::UInt64(until));
    }
    Ok(())
}

/// The columns the filters read, for the test that pins them to the
/// immutable set.
pub const FILTER_COLUMNS: [&str; 7] = [
    "tenant_id",
    "experiment_id",
    "run_id",
    "captured_at_ns",
    "tensor_name",
    "dtype",
    "step",
];
