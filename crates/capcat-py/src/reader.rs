//! `capcat._capcat.NativeReader`: one tenant's reads behind
//! `capcat.Reader`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use capcat_clickhouse::Catalog;
use capcat_proto::CaptureDescriptor;
use capcat_proto::reader::{Cursor, PageSize, Range, SearchFilter, SearchQuery};
use capcat_s3::{AnyStore, CatalogPrefix};
use capcat_targets::Access;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict};
use uuid::Uuid;

use crate::errors::{Field, Raised};
use crate::open::{self, Locations, parse_config};
use crate::runtime;

/// Ids per catalog lookup: one statement's parameters stay small whatever
/// the caller asks for.
const LOOKUP_SLICE: usize = 1_000;

/// Range reads in flight at once during a hydrate.
const HYDRATE_IN_FLIGHT: usize = 16;

struct Inner {
    catalog: Catalog,
    store: AnyStore,
    prefix: CatalogPrefix,
    tenant: String,
    /// The configuration's `read_byte_limit`: the most payload bytes one
    /// hydrate returns.
    byte_limit: u64,
}

/// A tenant's reads: search pages, lookups by id, verified payloads.
#[pyclass(frozen, module = "capcat._capcat")]
pub(crate) struct NativeReader {
    inner: Arc<Inner>,
}

/// The descriptors found (by id, in id order), the ids not found, and the
/// version the lookup pinned.
type Found = (Vec<CaptureDescriptor>, Vec<Uuid>, u64);

fn parse_ids(ids: &[String]) -> Result<BTreeSet<Uuid>, Raised> {
    ids.iter()
        .map(|id| {
            Uuid::parse_str(id).map_err(|e| {
                Raised::new("QueryError", "BadId", format!("capture id {id:?}: {e}"))
                    .with("id", Field::Text(id.clone()))
            })
        })
        .collect()
}

impl Inner {
    /// Looks `ids` up at `pinned` (the published head when `None`).
    async fn lookup(&self, ids: BTreeSet<Uuid>, pinned: Option<u64>) -> Result<Found, Raised> {
        let pinned = match pinned {
            Some(pinned) => pinned,
            None => self.catalog.pin().await?,
        };
        let ids: Vec<Uuid> = ids.into_iter().collect();
        let mut found = Vec::with_capacity(ids.len());
        let mut missing = Vec::new();
        for slice in ids.chunks(LOOKUP_SLICE) {
            let lookup = self
                .catalog
                .get_by_ids(&self.tenant, slice.iter().copied().collect(), pinned)
                .await?;
            found.extend(lookup.records.into_values());
            missing.extend(lookup.missing);
        }
        Ok((found, missing, pinned))
    }
}

fn descriptor<'py>(py: Python<'py>, d: &CaptureDescriptor) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("capture_id", d.capture_id.to_string())?;
    dict.set_item("tenant_id", &d.tenant_id)?;
    dict.set_item("experiment_id", &d.experiment_id)?;
    dict.set_item("run_id", &d.run_id)?;
    dict.set_item("captured_at_ns", d.captured_at_ns)?;
    dict.set_item("step", d.step)?;
    dict.set_item("tensor_name", &d.tensor_name)?;
    dict.set_item("dtype", &d.dtype)?;
    dict.set_item("shape", &d.shape)?;
    dict.set_item("index_version", d.index_version)?;
    dict.set_item("store_id", &d.locator.store_id)?;
    dict.set_item("pack_id", d.locator.pack_id.to_string())?;
    dict.set_item("payload_offset", d.locator.payload_offset)?;
    dict.set_item("payload_length", d.locator.payload_length)?;
    dict.set_item("payload_sha256", &d.locator.payload_sha256)?;
    let s = &d.summary;
    let summary = PyDict::new(py);
    summary.set_item("summary_version", s.summary_version)?;
    summary.set_item("element_count", s.element_count)?;
    summary.set_item("minimum", s.minimum.get())?;
    summary.set_item("maximum", s.maximum.get())?;
    summary.set_item("mean", s.mean.get())?;
    summary.set_item("l2_norm", s.l2_norm.get())?;
    summary.set_item("abs_max", s.abs_max.get())?;
    summary.set_item("zero_fraction", s.zero_fraction.get())?;
    dict.set_item("summary", summary)?;
    Ok(dict)
}

fn descriptors<'py>(
    py: Python<'py>,
    found: &[CaptureDescriptor],
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    found.iter().map(|d| descriptor(py, d)).collect()
}

fn id_texts(ids: &[Uuid]) -> Vec<String> {
    ids.iter().map(ToString::to_string).collect()
}

#[pymethods]
impl NativeReader {
    /// Opens the catalog and store read-only for `tenant`.
    #[new]
    #[pyo3(signature = (catalog, store, prefix, config_kind, config_text, tenant))]
    fn new(
        py: Python<'_>,
        catalog: String,
        store: String,
        prefix: Option<String>,
        config_kind: &str,
        config_text: Option<String>,
        tenant: String,
    ) -> PyResult<Self> {
        let opened = (|| {
            if let Some(reason) = capcat_targets::name_refusal(&tenant) {
                return Err(Raised::new(
                    "ConfigError",
                    "BadTenant",
                    format!("tenant {tenant:?}: {reason}"),
                ));
            }
            let config = parse_config(config_kind, config_text)?;
            let resolved = open::resolve(
                Locations {
                    catalog,
                    store,
                    spool: None,
                    prefix,
                },
                config,
                format!("capcat-python-reader-{}", std::process::id()),
            )?;
            runtime::block(py, async move {
                let cfg = resolved.cfg;
                let catalog = resolved.catalog.open(Access::ReadOnly, &cfg)?;
                catalog.check_access().await?;
                let store = resolved.store.open(Access::ReadOnly, &cfg)?;
                Ok(Inner {
                    catalog,
                    store,
                    prefix: cfg.prefix.clone(),
                    tenant,
                    byte_limit: u64::try_from(cfg.raw.read_byte_limit).unwrap_or(0),
                })
            })
        })();
        let inner = opened.map_err(|e| e.into_py_err(py))?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// One page: (descriptors, pinned version, next cursor token).
    #[pyo3(signature = (experiment, run, tensor_name, tensor_prefix, dtype, step_from, step_until, captured_from_ns, captured_until_ns, page_size, cursor))]
    #[expect(
        clippy::too_many_arguments,
        reason = "the keyword filters of capcat.Reader.search"
    )]
    fn search_page<'py>(
        &self,
        py: Python<'py>,
        experiment: Option<String>,
        run: Option<String>,
        tensor_name: Option<String>,
        tensor_prefix: Option<String>,
        dtype: Option<String>,
        step_from: Option<u64>,
        step_until: Option<u64>,
        captured_from_ns: Option<u64>,
        captured_until_ns: Option<u64>,
        page_size: u64,
        cursor: Option<String>,
    ) -> PyResult<(Vec<Bound<'py, PyDict>>, u64, Option<String>)> {
        let inner = Arc::clone(&self.inner);
        let page = (|| {
            let query = SearchQuery {
                filter: SearchFilter {
                    tenant_id: inner.tenant.clone(),
                    experiment_id: experiment,
                    run_id: run,
                    captured_at_ns: Range {
                        from: captured_from_ns,
                        until: captured_until_ns,
                    },
                    tensor_name,
                    tensor_name_prefix: tensor_prefix,
                    dtype,
                    step: Range {
                        from: step_from,
                        until: step_until,
                    },
                },
                cursor: cursor.as_deref().map(Cursor::from_token).transpose()?,
                page_size: PageSize::new(page_size)?,
            };
            runtime::block(py, async move { Ok(inner.catalog.search(query).await?) })
        })();
        let page = page.map_err(|e| e.into_py_err(py))?;
        Ok((
            descriptors(py, &page.records)?,
            page.pinned,
            page.next.map(|c| c.to_token()),
        ))
    }

    /// The published version a read made now would see.
    fn pin(&self, py: Python<'_>) -> PyResult<u64> {
        let inner = Arc::clone(&self.inner);
        runtime::block(py, async move { Ok(inner.catalog.pin().await?) })
            .map_err(|e| e.into_py_err(py))
    }

    /// (descriptors found, ids missing, pinned version).
    #[pyo3(signature = (ids, pinned))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<String>,
        pinned: Option<u64>,
    ) -> PyResult<(Vec<Bound<'py, PyDict>>, Vec<String>, u64)> {
        let inner = Arc::clone(&self.inner);
        let found = parse_ids(&ids)
            .and_then(|ids| runtime::block(py, async move { inner.lookup(ids, pinned).await }));
        let (found, missing, pinned) = found.map_err(|e| e.into_py_err(py))?;
        Ok((descriptors(py, &found)?, id_texts(&missing), pinned))
    }

    /// (list of (descriptor, payload bytes verified), ids missing, pinned
    /// version).
    #[pyo3(signature = (ids, pinned))]
    #[expect(clippy::type_complexity, reason = "a tuple Python unpacks")]
    fn hydrate<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<String>,
        pinned: Option<u64>,
    ) -> PyResult<(
        Vec<(Bound<'py, PyDict>, Bound<'py, PyByteArray>)>,
        Vec<String>,
        u64,
    )> {
        let inner = Arc::clone(&self.inner);
        let read = parse_ids(&ids).and_then(|ids| {
            runtime::block(py, async move {
                let (found, missing, pinned) = inner.lookup(ids, pinned).await?;
                let total: u64 = found.iter().map(|d| d.locator.payload_length).sum();
                if total > inner.byte_limit {
                    return Err(Raised::new(
                        "QueryError",
                        "TooManyBytes",
                        format!(
                            "the {} capture(s) asked for hold {total} payload bytes, more than \
                             read_byte_limit = {}; hydrate fewer at a time",
                            found.len(),
                            inner.byte_limit
                        ),
                    )
                    .with("bytes", Field::Count(total))
                    .with("limit", Field::Count(inner.byte_limit)));
                }
                let payloads = read_all(&inner, &found).await?;
                Ok((found, payloads, missing, pinned))
            })
        });
        let (found, payloads, missing, pinned) = read.map_err(|e| e.into_py_err(py))?;
        let mut out = Vec::with_capacity(found.len());
        for (d, payload) in found.iter().zip(payloads) {
            out.push((descriptor(py, d)?, PyByteArray::new(py, &payload)));
        }
        Ok((out, id_texts(&missing), pinned))
    }
}

/// Every payload of `found`, in order, at most [`HYDRATE_IN_FLIGHT`]
/// reads at once; the first that fails or does not verify fails them all.
async fn read_all(
    inner: &Arc<Inner>,
    found: &[CaptureDescriptor],
) -> Result<Vec<bytes::Bytes>, Raised> {
    let mut payloads: BTreeMap<usize, bytes::Bytes> = BTreeMap::new();
    let mut reads = tokio::task::JoinSet::new();
    let mut next = found.iter().enumerate();
    loop {
        while reads.len() < HYDRATE_IN_FLIGHT {
            let Some((index, d)) = next.next() else { break };
            let inner = Arc::clone(inner);
            let d = d.clone();
            reads.spawn(async move {
                let payload = capcat_service::hydrate(&inner.store, &inner.prefix, &d).await;
                (index, payload)
            });
        }
        let Some(joined) = reads.join_next().await else {
            break;
        };
        let (index, payload) = joined.map_err(|e| {
            Raised::new("CapcatError", "Task", format!("a hydrate read failed: {e}"))
        })?;
        payloads.insert(index, payload?);
    }
    Ok(payloads.into_values().collect())
}
