//! `capcat._capcat.NativeService`: the storage service behind
//! `capcat.Service`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use capcat_pack::{CaptureIdentity, Dtype, RecordMetadata};
use capcat_proto::LeaseError;
use capcat_s3::AnyStore;
use capcat_service::{Service, owner_lock, start_waiting_for_lease};
use capcat_targets::Access;
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use uuid::Uuid;

use crate::errors::{Field, Raised};
use crate::open::{self, Locations, parse_config};
use crate::runtime;

/// One tensor of a capture as the Python half passes it: tensor name,
/// module path, dtype name (`BF16`, `F32`, ...), shape, and its bytes
/// (little-endian, row-major, as a `B`-format buffer).
type Item = (String, String, String, Vec<u64>, PyBuffer<u8>);

/// What every tensor of one capture shares besides its identity.
struct Common {
    model: String,
    hook: String,
    step: u64,
    tags: BTreeMap<String, String>,
}

/// A tensor's record, checked and copied out of its Python buffer.
struct Record {
    metadata: RecordMetadata,
    payload: Bytes,
}

/// The storage service: spool -> store -> catalog, in this process.
#[pyclass(frozen, module = "capcat._capcat")]
pub(crate) struct NativeService {
    /// `None` once closed. An `Arc` so a flush on one thread never holds
    /// the lock that a capture on another thread needs.
    service: Mutex<Option<Arc<Service<AnyStore>>>>,
}

impl NativeService {
    fn running(&self) -> Result<Arc<Service<AnyStore>>, Raised> {
        self.service
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| Raised::new("ClosedError", "Closed", "the service is closed"))
    }
}

/// Checks one tensor and copies its bytes (with the GIL held: the buffer
/// is Python's).
fn record(
    py: Python<'_>,
    identity: &CaptureIdentity,
    common: &Common,
    item: Item,
) -> Result<Record, Raised> {
    let (tensor_name, module_path, dtype, shape, buffer) = item;
    let refused = |kind: &str, message: String| {
        Raised::new("CaptureError", kind, message).with("tensor", Field::Text(tensor_name.clone()))
    };
    let dtype = Dtype::from_str(&dtype).map_err(|e| refused("UnknownDtype", e.to_string()))?;
    let expected = dtype.byte_length(&shape).ok_or_else(|| {
        refused(
            "ShapeOverflow",
            format!("tensor {tensor_name:?}: shape {shape:?} overflows"),
        )
    })?;
    let actual = (buffer.item_count() * buffer.item_size()) as u64;
    if actual != expected {
        return Err(refused(
            "PayloadLength",
            format!(
                "tensor {tensor_name:?}: {dtype} {shape:?} is {expected} bytes, the data is {actual}"
            ),
        ));
    }
    let payload = buffer
        .to_vec(py)
        .map_err(|e| refused("Buffer", format!("tensor {tensor_name:?}: {e}")))?;
    drop(buffer);
    Ok(Record {
        metadata: RecordMetadata {
            identity: CaptureIdentity {
                capture_id: Uuid::new_v4(),
                ..identity.clone()
            },
            model: common.model.clone(),
            module_path,
            hook: common.hook.clone(),
            step: common.step,
            tensor_name,
            dtype,
            shape,
            tags: common.tags.clone(),
        },
        payload: Bytes::from(payload),
    })
}

/// Refuses a name that cannot be what the caller meant, by the `capcat`
/// command's rule ([`capcat_targets::name_refusal`]).
fn check_name(what: &'static str, value: &str) -> Result<(), Raised> {
    let Some(reason) = capcat_targets::name_refusal(value) else {
        return Ok(());
    };
    Err(Raised::new(
        "CaptureError",
        "BadName",
        format!("{what} {value:?}: {reason}"),
    )
    .with("field", Field::Text(what.to_owned()))
    .with("value", Field::Text(value.to_owned())))
}

#[pymethods]
impl NativeService {
    /// Starts the service (see `capcat.Service`).
    #[new]
    #[pyo3(signature = (catalog, store, spool, prefix, config_kind, config_text, lease_wait_s))]
    #[expect(
        clippy::too_many_arguments,
        reason = "the keyword arguments of capcat.Service"
    )]
    fn new(
        py: Python<'_>,
        catalog: String,
        store: String,
        spool: Option<PathBuf>,
        prefix: Option<String>,
        config_kind: &str,
        config_text: Option<String>,
        lease_wait_s: f64,
    ) -> PyResult<Self> {
        let started = (|| {
            let lease_wait = if lease_wait_s == 0.0 {
                Duration::ZERO
            } else {
                positive_seconds("lease_wait", lease_wait_s)?
            };
            let config = parse_config(config_kind, config_text)?;
            let holder = format!("capcat-python-{}", std::process::id());
            let resolved = open::resolve(
                Locations {
                    catalog,
                    store,
                    spool,
                    prefix,
                },
                config,
                holder,
            )?;
            runtime::block(py, async move {
                let cfg = resolved.cfg;
                let catalog = resolved.catalog.open(Access::Create, &cfg)?;
                catalog.check_access().await?;
                let store = resolved.store.open(Access::Create, &cfg)?;
                // The spool's owner lock first and once, as the command
                // takes it: a live owner is refused at once, and no retry
                // of a start waiting for the lease sweeps the spool again.
                let ownership = if cfg.raw.owns_spool {
                    Some(owner_lock::take(&cfg.raw.spool_dir, &cfg.raw.holder)?)
                } else {
                    None
                };
                let announce = |refusal: &LeaseError| {
                    tracing::warn!(
                        %refusal,
                        "waiting up to {lease_wait:.0?} for the publisher lease to expire \
                         (a stopped or killed process's?)"
                    );
                };
                Ok(
                    start_waiting_for_lease(cfg, ownership, store, catalog, lease_wait, announce)
                        .await?,
                )
            })
        })();
        let service = started.map_err(|e| e.into_py_err(py))?;
        Ok(Self {
            service: Mutex::new(Some(Arc::new(service))),
        })
    }

    /// Appends one capture's tensors; returns their capture ids in order.
    /// Every tensor is checked before any is appended, so a refused
    /// capture leaves nothing behind.
    #[pyo3(signature = (tenant, experiment, run, step, model, hook, tags, captured_at_ns, items))]
    #[expect(
        clippy::too_many_arguments,
        reason = "the keyword arguments of capcat.Service.capture"
    )]
    fn capture(
        &self,
        py: Python<'_>,
        tenant: String,
        experiment: String,
        run: String,
        step: u64,
        model: String,
        hook: String,
        tags: BTreeMap<String, String>,
        captured_at_ns: Option<u64>,
        items: Vec<Item>,
    ) -> PyResult<Vec<String>> {
        let appended = (|| {
            for (what, value) in [
                ("tenant", &tenant),
                ("experiment", &experiment),
                ("run", &run),
            ] {
                check_name(what, value)?;
            }
            for item in &items {
                check_name("tensor name", &item.0)?;
            }
            let service = self.running()?;
            let identity = CaptureIdentity {
                tenant_id: tenant,
                experiment_id: experiment,
                run_id: run,
                captured_at_ns: captured_at_ns.unwrap_or_else(capcat_clickhouse::unix_now_ns),
                capture_id: Uuid::nil(),
            };
            let common = Common {
                model,
                hook,
                step,
                tags,
            };
            let records = items
                .into_iter()
                .map(|item| record(py, &identity, &common, item))
                .collect::<Result<Vec<_>, _>>()?;
            // Sealing a full pack writes and syncs it to the spool: disk
            // work, done without the GIL.
            py.detach(|| {
                let mut ids = Vec::with_capacity(records.len());
                for Record { metadata, payload } in records {
                    let id = metadata.identity.capture_id;
                    service.append(metadata, payload)?;
                    ids.push(id.to_string());
                }
                Ok::<_, Raised>(ids)
            })
        })();
        appended.map_err(|e| e.into_py_err(py))
    }

    /// Seals the open pack and waits until everything captured before the
    /// call is queryable, or `timeout_s` passes. Returns (packs, seconds).
    fn flush(&self, py: Python<'_>, timeout_s: f64) -> PyResult<(usize, f64)> {
        let flushed = (|| {
            let timeout = positive_seconds("timeout", timeout_s)?;
            let service = self.running()?;
            runtime::block(py, async move {
                let report = service.flush(timeout).await?;
                Ok((report.packs, report.elapsed.as_secs_f64()))
            })
        })();
        flushed.map_err(|e| e.into_py_err(py))
    }

    /// The service's counters as JSON (`capcat.Service.snapshot` parses it).
    fn snapshot_json(&self, py: Python<'_>) -> PyResult<String> {
        let service = self.running().map_err(|e| e.into_py_err(py))?;
        serde_json::to_string(&service.snapshot()).map_err(|e| {
            Raised::new("CapcatError", "Snapshot", format!("snapshot: {e}")).into_py_err(py)
        })
    }

    /// Whether `close` has run.
    fn closed(&self) -> bool {
        self.service
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }

    /// Seals, flushes within the configured `close_flush_timeout_s`, stops
    /// the service and releases the lease. Returns whether the lease was
    /// released; raises the final flush's error after everything else ran.
    fn close(&self, py: Python<'_>) -> PyResult<bool> {
        let taken = self
            .service
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(service) = taken else {
            return Ok(false);
        };
        let closed = runtime::block(py, async move {
            let service = exclusive(service).await;
            let Some(service) = service else {
                // Another thread's call still holds the service after the
                // wait: it is stopped without waiting for it, and its
                // lease expires on its own.
                return Ok((Ok(()), false));
            };
            let report = service.close().await;
            Ok((report.flush.map(|_| ()), report.lease_released))
        });
        match closed {
            Ok((Ok(()), released)) => Ok(released),
            Ok((Err(flush), _)) => Err(Raised::from(flush).into_py_err(py)),
            Err(raised) => Err(raised.into_py_err(py)),
        }
    }
}

impl Drop for NativeService {
    /// A service Python drops without `close()` (garbage collected, or the
    /// interpreter exiting) seals its open pack into the spool, a local
    /// write, so nothing captured is lost: the next service on the spool,
    /// or `capcat drain`, uploads and indexes it. It waits for nothing
    /// else: the service's tasks stop at once and its lease expires on its
    /// own.
    fn drop(&mut self) {
        let taken = self
            .service
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(service) = taken else {
            return;
        };
        match service.seal() {
            Ok(Some(pack_id)) => tracing::warn!(
                %pack_id,
                "a capcat.Service was dropped without close(): its open pack is sealed in the \
                 spool; the next service on the spool or `capcat drain` finishes it"
            ),
            Ok(None) => tracing::debug!("a capcat.Service was dropped without close()"),
            Err(error) => tracing::error!(
                %error,
                "a capcat.Service was dropped without close() and its open pack could not be sealed"
            ),
        }
    }
}

/// How long `close` waits for calls still running on other threads (a
/// capture sealing a pack) to let go of the service.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// The service alone, once every other thread's call has returned it, or
/// `None` after [`CLOSE_WAIT`] (the service is then dropped, which stops
/// it without waiting).
async fn exclusive(mut service: Arc<Service<AnyStore>>) -> Option<Service<AnyStore>> {
    let started = Instant::now();
    loop {
        match Arc::try_unwrap(service) {
            Ok(service) => return Some(service),
            Err(shared) if started.elapsed() < CLOSE_WAIT => {
                service = shared;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(_still_shared) => {
                tracing::warn!(
                    "close: another thread still uses the service after {CLOSE_WAIT:?}; \
                     stopping it without the final flush"
                );
                return None;
            }
        }
    }
}

/// A positive, finite number of seconds.
pub(crate) fn positive_seconds(name: &'static str, value: f64) -> Result<Duration, Raised> {
    if value.is_finite()
        && value > 0.0
        && let Ok(duration) = Duration::try_from_secs_f64(value)
    {
        return Ok(duration);
    }
    Err(Raised::new(
        "ConfigError",
        "NotPositive",
        format!("{name} = {value} must be a positive, finite number of seconds"),
    )
    .with("field", Field::Text(name.to_owned()))
    .with("value", Field::Seconds(value)))
}
