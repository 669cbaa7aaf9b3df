//! The reader's projection: the one row that wins a capture, by the total
//! order `(index_version, store_id, pack_id)`, and the decoding of rows back
//! into [`CaptureDescriptor`]s.
//!
//! A page picks the winner with one `argMax` over a tuple of every resolved
//! column ([`resolution_aggregate`]), so that it can aggregate in key order
//! and stop after its LIMIT. A lookup keeps the winning row itself
//! ([`latest_row_tail`]: `ORDER BY <identity>, index_version DESC, store_id
//! DESC, pack_id DESC LIMIT 1 BY <identity>`), which builds no tuple per row
//! and needs no outer query to unpack one (17-20% faster for one id, 4-12%
//! for 1,000; docs/benchmarks.md). Both pick the same row, by two rules:
//!
//! The ORDER buys determinism: one index pass allocates one version for a
//! whole batch, so two packs describing one capture tie on `index_version`
//! alone, and ClickHouse leaves the winner of a tie undefined; it moves with
//! the physical layout, so a merge could change what a pinned selection
//! resolves to. `(index_version, store_id, pack_id)` is a total order over
//! the rows of one capture, because they differ by pack identity.
//! The SINGLE row buys coherence: separate `argMax` calls per column could
//! each keep a different row, producing a descriptor that describes no pack
//! at all. One aggregate (or one row kept whole) keeps one row, so that is
//! impossible rather than merely unobserved.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::descriptor::{
    CAPTURE_COLUMNS, CAPTURE_IDENTITY, CaptureColumn, CaptureDescriptor, ColumnRole, F64Bits,
    Locator, RESOLUTION_ORDER, SummaryColumns,
};
use crate::reader::error::ReaderError;
use crate::statement::{Column, ColumnType, Rows, Value};

/// The alias of the aggregate in the inner query.
const RESOLVED: &str = "resolved";

/// The columns resolved by the aggregate: every descriptor column that is
/// not part of the capture identity (the locator, the version and the
/// immutable metadata), in [`CAPTURE_COLUMNS`] order.
pub fn resolved_columns() -> Vec<&'static CaptureColumn> {
    CAPTURE_COLUMNS
        .iter()
        .filter(|c| c.role != ColumnRole::Identity)
        .collect()
}

/// `argMax(tuple(<every resolved column>), tuple(index_version, store_id, pack_id))`.
pub fn resolution_aggregate() -> String {
    let resolved: Vec<&str> = resolved_columns().iter().map(|c| c.name).collect();
    format!(
        "argMax(tuple({}), tuple({}))",
        resolved.join(", "),
        RESOLUTION_ORDER.join(", ")
    )
}

/// `ORDER BY <identity>, index_version DESC, store_id DESC, pack_id DESC
/// LIMIT 1 BY <identity>`, a clause a line, each indented as a lookup's
/// other clauses are: what follows a lookup's WHERE clause, keeping of each
/// capture's rows the one [`resolution_aggregate`] would pick, whole.
pub fn latest_row_tail() -> String {
    let identity = CAPTURE_IDENTITY.join(", ");
    let order: Vec<String> = RESOLUTION_ORDER
        .iter()
        .map(|c| format!("{c} DESC"))
        .collect();
    format!(
        "    ORDER BY {identity}, {}\n    LIMIT 1 BY {identity}",
        order.join(", ")
    )
}

/// How a resolved column leaves the outer query, read from `element` (its
/// slot in the aggregate, or the column itself). Values travel in the
/// protocol's small set of column types: a `Float64` goes out as its IEEE
/// bits (`reinterpretAsUInt64`, exact, no text round trip), and an
/// `Array(UInt64)` as its comma-separated decimal elements.
fn outer_expression(column: &CaptureColumn, element: &str) -> String {
    match column.clickhouse_type {
        "Float64" => format!("reinterpretAsUInt64({element}) AS {}", column.name),
        "Array(UInt64)" => format!(
            "arrayStringConcat(arrayMap(x -> toString(x), {element}), ',') AS {}",
            column.name
        ),
        // A column read as itself needs no alias.
        _ if element == column.name => element.to_owned(),
        _ => format!("{element} AS {}", column.name),
    }
}

fn result_type(column: &CaptureColumn) -> ColumnType {
    match column.clickhouse_type {
        "String" | "Array(UInt64)" => ColumnType::String,
        "UUID" => ColumnType::Uuid,
        // Unsigned integers of every width, and Float64 carried as its bits.
        _ => ColumnType::UInt64,
    }
}

/// The outer SELECT list: the identity columns as grouped, then each
/// resolved column unpacked from the aggregate. The order is
/// [`CAPTURE_COLUMNS`]' order, which is also [`result_columns`]' order.
pub fn outer_select_list() -> String {
    let mut items: Vec<String> = CAPTURE_IDENTITY.iter().map(|c| (*c).to_owned()).collect();
    items.extend(
        resolved_columns()
            .iter()
            .enumerate()
            .map(|(i, c)| outer_expression(c, &format!("tupleElement({RESOLVED}, {})", i + 1))),
    );
    items.join(", ")
}

/// The SELECT list over whole rows (a lookup's): the identity columns, then
/// each resolved column converted as [`outer_select_list`] converts it, in
/// the same order.
pub fn row_select_list() -> String {
    let mut items: Vec<String> = CAPTURE_IDENTITY.iter().map(|c| (*c).to_owned()).collect();
    items.extend(
        resolved_columns()
            .iter()
            .map(|c| outer_expression(c, c.name)),
    );
    items.join(", ")
}

/// The inner SELECT list: the identity columns and the one aggregate.
pub fn inner_select_list() -> String {
    format!(
        "{}, {} AS {RESOLVED}",
        CAPTURE_IDENTITY.join(", "),
        resolution_aggregate()
    )
}

/// The columns a reader statement returns, in order.
pub fn result_columns() -> Vec<Column> {
    let identity = CAPTURE_COLUMNS
        .iter()
        .filter(|c| c.role == ColumnRole::Identity);
    identity
        .chain(resolved_columns())
        .map(|c| Column {
            name: c.name,
            ty: result_type(c),
        })
        .collect()
}

struct RowReader<'a> {
    statement: &'static str,
    values: BTreeMap<&'static str, &'a Value>,
}

impl RowReader<'_> {
    fn bad(&self, message: String) -> ReaderError {
        ReaderError::Malformed {
            statement: self.statement,
            message,
        }
    }

    fn get(&self, name: &str) -> Result<&Value, ReaderError> {
        self.values
            .get(name)
            .copied()
            .ok_or_else(|| self.bad(format!("column {name} is missing")))
    }

    fn string(&self, name: &str) -> Result<String, ReaderError> {
        match self.get(name)? {
            Value::String(s) => Ok(s.clone()),
            other => Err(self.bad(format!("{name}: expected a string, got {other:?}"))),
        }
    }

    fn u64(&self, name: &str) -> Result<u64, ReaderError> {
        match self.get(name)? {
            Value::UInt64(v) => Ok(*v),
            other => Err(self.bad(format!(
                "{name}: expected an unsigned integer, got {other:?}"
            ))),
        }
    }

    fn u32(&self, name: &str) -> Result<u32, ReaderError> {
        let v = self.u64(name)?;
        u32::try_from(v).map_err(|_| self.bad(format!("{name}: {v} does not fit UInt32")))
    }

    fn f64(&self, name: &str) -> Result<F64Bits, ReaderError> {
        Ok(F64Bits::new(f64::from_bits(self.u64(name)?)))
    }

    fn uuid(&self, name: &str) -> Result<Uuid, ReaderError> {
        match self.get(name)? {
            Value::Uuid(v) => Ok(*v),
            other => Err(self.bad(format!("{name}: expected a UUID, got {other:?}"))),
        }
    }

    fn shape(&self, name: &str) -> Result<Vec<u64>, ReaderError> {
        let text = self.string(name)?;
        if text.is_empty() {
            return Ok(Vec::new());
        }
        text.split(',')
            .map(|d| {
                d.parse::<u64>()
                    .map_err(|_| self.bad(format!("{name}: {d:?} is not a dimension")))
            })
            .collect()
    }
}

/// Decodes the rows of a reader statement (`reader.search_page`,
/// `reader.get_by_ids`) into descriptors, in row order.
///
/// A row must have exactly [`result_columns`]' width: a row of another width
/// zipped against the column names would slide every field onto its
/// neighbour, so it is refused rather than read.
pub fn decode_records(
    statement: &'static str,
    rows: &Rows,
) -> Result<Vec<CaptureDescriptor>, ReaderError> {
    let columns = result_columns();
    rows.0
        .iter()
        .map(|row| {
            if row.len() != columns.len() {
                return Err(ReaderError::Malformed {
                    statement,
                    message: format!("expected {} columns, got {}", columns.len(), row.len()),
                });
            }
            let reader = RowReader {
                statement,
                values: columns.iter().map(|c| c.name).zip(row.iter()).collect(),
            };
            decode_one(&reader)
        })
        .collect()
}

fn decode_one(r: &RowReader<'_>) -> Result<CaptureDescriptor, ReaderError> {
    Ok(CaptureDescriptor {
        tenant_id: r.string("tenant_id")?,
        experiment_id: r.string("experiment_id")?,
        run_id: r.string("run_id")?,
        captured_at_ns: r.u64("captured_at_ns")?,
        capture_id: r.uuid("capture_id")?,
        locator: Locator {
            store_id: r.string("store_id")?,
            pack_id: r.uuid("pack_id")?,
            payload_offset: r.u64("payload_offset")?,
            payload_length: r.u64("payload_length")?,
            payload_sha256: r.string("payload_sha256")?,
        },
        index_version: r.u64("index_version")?,
        step: r.u64("step")?,
        tensor_name: r.string("tensor_name")?,
        dtype: r.string("dtype")?,
        shape: r.shape("shape")?,
        summary: SummaryColumns {
            summary_version: r.u32("summary_version")?,
            element_count: r.u64("element_count")?,
            minimum: r.f64("minimum")?,
            maximum: r.f64("maximum")?,
            mean: r.f64("mean")?,
            l2_norm: r.f64("l2_norm")?,
            abs_max: r.f64("abs_max")?,
            zero_fraction: r.f64("zero_fraction")?,
        },
    })
}

/// Encodes a descriptor as the row a reader statement would return for it:
/// the inverse of [`decode_records`], for fakes and tests.
pub fn encode_record(d: &CaptureDescriptor) -> Vec<Value> {
    let s = &d.summary;
    let l = &d.locator;
    let shape: Vec<String> = d.shape.iter().map(u64::to_string).collect();
    let by_name: BTreeMap<&str, Value> = [
        ("tenant_id", Value::String(d.tenant_id.clone())),
        ("experiment_id", Value::String(d.experiment_id.clone())),
        ("run_id", Value::String(d.run_id.clone())),
        ("captured_at_ns", Value::UInt64(d.captured_at_ns)),
        ("capture_id", Value::Uuid(d.capture_id)),
        ("store_id", Value::String(l.store_id.clone())),
        ("pack_id", Value::Uuid(l.pack_id)),
        ("index_version", Value::UInt64(d.index_version)),
        ("step", Value::UInt64(d.step)),
        ("tensor_name", Value::String(d.tensor_name.clone())),
        ("dtype", Value::String(d.dtype.clone())),
        ("shape", Value::String(shape.join(","))),
        (
            "summary_version",
            Value::UInt64(u64::from(s.summary_version)),
        ),
        ("element_count", Value::UInt64(s.element_count)),
        ("minimum", Value::UInt64(s.minimum.get().to_bits())),
        ("maximum", Value::UInt64(s.maximum.get().to_bits())),
        ("mean", Value::UInt64(s.mean.get().to_bits())),
        ("l2_norm", Value::UInt64(s.l2_norm.get().to_bits())),
        ("abs_max", Value::UInt64(s.abs_max.get().to_bits())),
        (
            "zero_fraction",
            Value::UInt64(s.zero_fraction.get().to_bits()),
        ),
        ("payload_offset", Value::UInt64(l.payload_offset)),
        ("payload_length", Value::UInt64(l.payload_length)),
        ("payload_sha256", Value::String(l.payload_sha256.clone())),
    ]
    .into_iter()
    .collect();
    result_columns()
        .iter()
        .map(|c| by_name.get(c.name).cloned().unwrap_or(Value::Null))
        .collect()
}
