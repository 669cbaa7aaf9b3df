//! Every Rust error, raised as a class of `capcat.errors` with its kind and
//! fields.
//!
//! An error is first turned into a [`Raised`]: plain data, built where the
//! error happened (often with the GIL released), naming the Python class,
//! the Rust variant (`kind`) and the fields a caller may act on. Only then,
//! with the GIL held, does [`Raised::into_py_err`] instantiate the class.

use std::fmt::Debug;

use capcat_clickhouse::CatalogError;
use capcat_proto::LeaseError;
use capcat_service::{ConfigError, FlushError, HydrateError, SinkError, StartError};
use capcat_targets::TargetError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// One field of a raised error.
#[derive(Clone, Debug)]
pub(crate) enum Field {
    /// A string.
    Text(String),
    /// An unsigned number.
    Count(u64),
    /// Seconds.
    Seconds(f64),
    /// Strings (pack ids, capture ids).
    Texts(Vec<String>),
    /// Nothing (an optional field that is absent).
    Absent,
}

/// An error on its way to Python.
#[derive(Debug)]
pub(crate) struct Raised {
    /// The class in `capcat.errors`.
    class: &'static str,
    /// The Rust variant.
    kind: String,
    /// The message (the Rust error's `Display`).
    message: String,
    /// Named fields.
    fields: Vec<(&'static str, Field)>,
}

impl Raised {
    /// An error of `class`, kind `kind`, with `message` and no fields.
    pub(crate) fn new(class: &'static str, kind: &str, message: impl Into<String>) -> Self {
        Self {
            class,
            kind: kind.to_owned(),
            message: message.into(),
            fields: Vec::new(),
        }
    }

    /// Adds a field.
    #[must_use]
    pub(crate) fn with(mut self, name: &'static str, value: Field) -> Self {
        self.fields.push((name, value));
        self
    }

    /// The Python exception. When `capcat.errors` cannot be imported (the
    /// native module loaded on its own), a `RuntimeError` still says what
    /// went wrong.
    pub(crate) fn into_py_err(self, py: Python<'_>) -> PyErr {
        match self.instantiate(py) {
            Ok(error) => error,
            Err(import) => PyRuntimeError::new_err(format!(
                "{} ({}): {} [capcat.errors unavailable: {import}]",
                self.class, self.kind, self.message
            )),
        }
    }

    fn instantiate(&self, py: Python<'_>) -> PyResult<PyErr> {
        let class = py.import("capcat.errors")?.getattr(self.class)?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("kind", &self.kind)?;
        for (name, value) in &self.fields {
            match value {
                Field::Text(text) => kwargs.set_item(name, text)?,
                Field::Count(n) => kwargs.set_item(name, n)?,
                Field::Seconds(s) => kwargs.set_item(name, s)?,
                Field::Texts(texts) => kwargs.set_item(name, texts)?,
                Field::Absent => kwargs.set_item(name, py.None())?,
            }
        }
        let instance = class.call((&self.message,), Some(&kwargs))?;
        Ok(PyErr::from_value(instance))
    }
}

/// The name of an enum value's variant, as `Debug` prints it first.
pub(crate) fn variant(value: &impl Debug) -> String {
    let text = format!("{value:?}");
    let end = text
        .find(|c: char| !c.is_alphanumeric() && c != '_')
        .unwrap_or(text.len());
    text[..end].to_owned()
}

impl From<TargetError> for Raised {
    fn from(error: TargetError) -> Self {
        let message = error.to_string();
        match error {
            TargetError::Syntax { flag, value, .. } => Self::new("ConfigError", "Syntax", message)
                .with(
                    "argument",
                    Field::Text(flag.trim_start_matches('-').to_owned()),
                )
                .with("value", Field::Text(value)),
            TargetError::Missing { what, path, .. } => Self::new("ConfigError", "Missing", message)
                .with("what", Field::Text(what.to_owned()))
                .with("path", Field::Text(path.display().to_string())),
            TargetError::Store(_) => Self::new("StoreError", "Open", message),
            other => Self::new("CatalogError", &variant(&other), message),
        }
    }
}

impl From<ConfigError> for Raised {
    fn from(error: ConfigError) -> Self {
        let message = error.to_string();
        let kind = variant(&error);
        let raised = Self::new("ConfigError", &kind, message);
        match error {
            ConfigError::NotFinite { field, value }
            | ConfigError::NotPositive { field, value }
            | ConfigError::TooLong { field, value, .. } => raised
                .with("field", Field::Text(field.to_owned()))
                .with("value", Field::Seconds(value)),
            ConfigError::EndpointScheme { field, value } => raised
                .with("field", Field::Text(field.to_owned()))
                .with("value", Field::Text(value)),
            _ => raised,
        }
    }
}

impl From<StartError> for Raised {
    fn from(error: StartError) -> Self {
        let message = error.to_string();
        match error {
            StartError::SpoolBusy { .. } => Self::new("SpoolBusyError", "SpoolBusy", message),
            StartError::Spool(_) | StartError::OwnerLock { .. } => {
                Self::new("SpoolError", &variant(&error), message)
            }
            StartError::Lease(LeaseError::Held { ref holder, .. }) => {
                let holder = holder.clone();
                Self::new("LeaseHeldError", "Held", message).with("holder", Field::Text(holder))
            }
            other => Self::new("CatalogError", &variant(&other), message),
        }
    }
}

impl From<SinkError> for Raised {
    fn from(error: SinkError) -> Self {
        let message = error.to_string();
        match error {
            SinkError::Closed => Self::new("ClosedError", "Closed", message),
            SinkError::Spool(_) => Self::new("SpoolError", "Spool", message),
            SinkError::Pack(pack) => Self::new("CaptureError", &variant(&pack), message),
            other => Self::new("CaptureError", &variant(&other), message),
        }
    }
}

fn ids(ids: &[uuid::Uuid]) -> Field {
    Field::Texts(ids.iter().map(ToString::to_string).collect())
}

impl From<FlushError> for Raised {
    fn from(error: FlushError) -> Self {
        let message = error.to_string();
        match error {
            FlushError::NotDrained {
                waited,
                pending,
                set_aside,
                last_error,
            } => Self::new("FlushError", "NotDrained", message)
                .with("waited_s", Field::Seconds(waited.as_secs_f64()))
                .with("pending", Field::Count(pending as u64))
                .with("set_aside", ids(&set_aside))
                .with(
                    "last_error",
                    last_error.map_or(Field::Absent, |e| Field::Text(e.to_string())),
                ),
            FlushError::SetAside { packs } => {
                Self::new("FlushError", "SetAside", message).with("set_aside", ids(&packs))
            }
            FlushError::Stopped => Self::new("ClosedError", "Stopped", message),
            other => Self::new("FlushError", &variant(&other), message),
        }
    }
}

/// ClickHouse's UNKNOWN_TABLE: a read of a catalog that has no tables yet.
const UNKNOWN_TABLE: u32 = 60;

impl From<CatalogError> for Raised {
    fn from(error: CatalogError) -> Self {
        let message = error.to_string();
        if let CatalogError::Reader(capcat_proto::reader::ReaderError::Statement {
            failure:
                capcat_proto::Failure::Server {
                    code: UNKNOWN_TABLE,
                    ..
                },
            ..
        }) = &error
        {
            return Self::new(
                "CatalogError",
                "NoSchema",
                format!(
                    "the catalog has no tables under this prefix (nothing was captured into it yet): {message}"
                ),
            );
        }
        let kind = match &error {
            CatalogError::Reader(reader) => variant(reader),
            other => variant(other),
        };
        Self::new("CatalogError", &kind, message)
    }
}

impl From<capcat_proto::reader::ReaderError> for Raised {
    fn from(error: capcat_proto::reader::ReaderError) -> Self {
        Self::new("QueryError", &variant(&error), error.to_string())
    }
}

impl From<HydrateError> for Raised {
    fn from(error: HydrateError) -> Self {
        let message = error.to_string();
        match error {
            HydrateError::Store {
                capture_id,
                pack_id,
                ..
            } => Self::new("StoreError", "Read", message)
                .with("capture_id", Field::Text(capture_id.to_string()))
                .with("pack_id", Field::Text(pack_id.to_string())),
            other => {
                let kind = match &other {
                    HydrateError::Verify { source, .. } => variant(source),
                    _ => variant(&other),
                };
                let capture_id = match &other {
                    HydrateError::BadDigest { capture_id, .. }
                    | HydrateError::BadRange { capture_id, .. }
                    | HydrateError::Verify { capture_id, .. } => {
                        Field::Text(capture_id.to_string())
                    }
                    _ => Field::Absent,
                };
                Self::new("IntegrityError", &kind, message).with("capture_id", capture_id)
            }
        }
    }
}
