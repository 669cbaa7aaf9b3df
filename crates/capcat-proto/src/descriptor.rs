//! The capture descriptor: one row of `{p}_capture_raw`, and the one column
//! table every statement about that table is generated from.
//!
//! [`CAPTURE_COLUMNS`] is the single source of truth for the descriptor's
//! columns: the DDL (`schema/`), the reader projection (`reader/`) and the
//! index pass's INSERT (here) all derive their column lists from it, so a
//! column added in one place is added everywhere or the golden tests fail.
//!
//! The immutability rule: `(tenant_id, capture_id)` identifies a capture, and
//! every column except the locator and the version is immutable for that
//! identity. Two rows for one capture may differ ONLY in where its bytes are
//! (which store, which pack, where in the pack) and in the version that wrote
//! them. The reader relies on this twice: filters on immutable columns can run
//! before aggregation (a filter cannot match only the row that loses the
//! `argMax`, because every row of the capture carries the same value), and
//! grouping on the five identity columns is the same partition as grouping on
//! `(tenant_id, capture_id)`.
//!
//! How descriptor values reach the server: as ONE query parameter of type
//! `String` holding the rows in ClickHouse's `TabSeparated` format (one line
//! per row, [`CaptureDescriptor::to_tsv_row`]), parsed by the
//! `format(TabSeparated, '<structure>', {rows:String})` table function
//! inside an `INSERT ... SELECT`. The structure is a literal generated from
//! [`CAPTURE_COLUMNS`] ([`descriptor_rows_structure`]), so the server parses
//! every field as its column's exact type.
//!
//! A `String` of rows keeps [`Statement`] one shape (text + parameters) for
//! every statement, keeps values out of SQL text, and is parsed by the
//! engine far faster than a typed `Array(Tuple(...))` parameter;
//! `TabSeparated` only ever parses data, where `Values` would evaluate a
//! field it cannot parse as an expression. docs/protocol.md gives the
//! reasons and docs/benchmarks.md the measurements. The parameter grows
//! with the rows, so descriptor rows go in chunks of at most
//! [`crate::config::MAX_CHUNK`] rows and [`MAX_DESCRIPTOR_PARAM_BYTES`] of
//! parameter text ([`descriptor_chunks`]).
//!
//! [`Statement`]: crate::statement::Statement
//! [`insert_descriptors`]: crate::index::sql::insert_descriptors

use std::fmt::Write as _;

use uuid::Uuid;

use crate::text_format::escape_text;

/// What a descriptor column is for. Decides whether it may differ between two
/// rows describing the same capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ColumnRole {
    /// Part of the capture's identity and the reader's GROUP BY key.
    /// Immutable by definition.
    Identity,
    /// Immutable metadata about the capture (what was captured, its summary).
    Metadata,
    /// Where the capture's bytes are: mutable between rows of one capture.
    Locator,
    /// The catalog version that wrote the row: mutable between rows.
    Version,
}

/// One column of `{p}_capture_raw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CaptureColumn {
    /// The column name.
    pub name: &'static str,
    /// The ClickHouse type, as written in DDL and in the INSERT parameter.
    pub clickhouse_type: &'static str,
    /// True when every row of one capture carries the same value (identity
    /// and metadata); only these may be filtered before aggregation.
    pub immutable: bool,
    /// Why the column exists.
    pub role: ColumnRole,
}

const fn col(name: &'static str, clickhouse_type: &'static str, role: ColumnRole) -> CaptureColumn {
    CaptureColumn {
        name,
        clickhouse_type,
        immutable: matches!(role, ColumnRole::Identity | ColumnRole::Metadata),
        role,
    }
}

/// Every column of `{p}_capture_raw`, in table order. The order is also the
/// field order of [`descriptor_rows_structure`], of each row
/// ([`CaptureDescriptor::to_tsv_row`]) and of [`CaptureDescriptor`]'s
/// fields.
pub const CAPTURE_COLUMNS: &[CaptureColumn] = &[
    col("tenant_id", "String", ColumnRole::Identity),
    col("experiment_id", "String", ColumnRole::Identity),
    col("run_id", "String", ColumnRole::Identity),
    col("captured_at_ns", "UInt64", ColumnRole::Identity),
    col("capture_id", "UUID", ColumnRole::Identity),
    col("store_id", "String", ColumnRole::Locator),
    col("pack_id", "UUID", ColumnRole::Locator),
    col("index_version", "UInt64", ColumnRole::Version),
    col("step", "UInt64", ColumnRole::Metadata),
    col("tensor_name", "String", ColumnRole::Metadata),
    col("dtype", "String", ColumnRole::Metadata),
    col("shape", "Array(UInt64)", ColumnRole::Metadata),
    col("summary_version", "UInt32", ColumnRole::Metadata),
    col("element_count", "UInt64", ColumnRole::Metadata),
    col("minimum", "Float64", ColumnRole::Metadata),
    col("maximum", "Float64", ColumnRole::Metadata),
    col("mean", "Float64", ColumnRole::Metadata),
    col("l2_norm", "Float64", ColumnRole::Metadata),
    col("abs_max", "Float64", ColumnRole::Metadata),
    col("zero_fraction", "Float64", ColumnRole::Metadata),
    col("payload_offset", "UInt64", ColumnRole::Locator),
    col("payload_length", "UInt64", ColumnRole::Locator),
    col("payload_sha256", "String", ColumnRole::Locator),
];

/// The reader's GROUP BY key: the capture identity. A prefix of
/// [`CAPTURE_SORT_KEY`], so pages prune on the primary index.
pub const CAPTURE_IDENTITY: &[&str] = &[
    "tenant_id",
    "experiment_id",
    "run_id",
    "captured_at_ns",
    "capture_id",
];

/// The physical `ORDER BY` of `{p}_capture_raw`: the identity, then pack
/// identity. Pack identity is in the key so that ReplacingMergeTree can never
/// collapse two rows describing one capture in two different packs (a merge
/// would silently delete the one a pinned snapshot still needs).
pub const CAPTURE_SORT_KEY: &[&str] = &[
    "tenant_id",
    "experiment_id",
    "run_id",
    "captured_at_ns",
    "capture_id",
    "store_id",
    "pack_id",
];

/// The physical `ORDER BY` of `{p}_capture_by_id`: the columns of
/// [`CAPTURE_SORT_KEY`] with `capture_id` moved second, so a lookup of ids
/// within a tenant is a primary-key range per id. The same columns as the
/// descriptor table's key, only permuted, so ReplacingMergeTree collapses
/// exactly the rows there that it collapses in `{p}_capture_raw`: the two
/// tables resolve every capture alike whenever their merges run.
pub const CAPTURE_BY_ID_SORT_KEY: &[&str] = &[
    "tenant_id",
    "capture_id",
    "experiment_id",
    "run_id",
    "captured_at_ns",
    "store_id",
    "pack_id",
];

/// The `PRIMARY KEY` of `{p}_capture_by_id`: the prefix of
/// [`CAPTURE_BY_ID_SORT_KEY`] a lookup filters on. The engine keeps one
/// entry of the primary key in memory per granule; the rest of the sort key
/// still orders the rows and decides what a merge collapses, but nothing
/// searches on it, so it need not be held in memory.
pub const CAPTURE_BY_ID_PRIMARY_KEY: &[&str] = &["tenant_id", "capture_id"];

/// Rows per granule of `{p}_capture_by_id`. A lookup of `n` ids spread over
/// the tenant reads `n` granules, so the granule, not the catalog, sets its
/// cost: at the engine's default of 8,192 rows, 100 ids would read up to
/// 819,200 rows; at 64, up to 6,400. Measured on a catalog of 10^6
/// captures (docs/benchmarks.md), 100 ids took 62 ms at 256 rows a granule
/// and 42 to 44 ms at 64 with the block sizes below; 32 was no faster. The
/// primary index has one entry per 64 rows, 24 bytes each for the two
/// columns of [`CAPTURE_BY_ID_PRIMARY_KEY`]: about 4 MB at 10^7 captures.
pub const CAPTURE_BY_ID_GRANULE: u64 = 64;

/// `min_compress_block_size` and `max_compress_block_size` of
/// `{p}_capture_by_id`, in bytes. The engine compresses a column in blocks
/// of at least 64 KiB by default, many granules each, and a read of one
/// granule decompresses its whole block, once per column: a lookup of 100
/// ids would decompress about 100 x 23 blocks of 64 KiB to use a few
/// hundred bytes of each. Blocks of 1 to 8 KiB hold one or two granules of
/// 64 rows; the table takes about 1.7 times the space of the default (39
/// against 23 MB per 10^6 captures).
pub const CAPTURE_BY_ID_COMPRESS_BLOCK: (u64, u64) = (1_024, 8_192);

/// The reader's `argMax` ordering key. `index_version` leads, so a later
/// publish supersedes; `(store_id, pack_id)` makes it a total order over the
/// rows of one capture, so the winner never depends on physical layout.
pub const RESOLUTION_ORDER: &[&str] = &["index_version", "store_id", "pack_id"];

/// The ClickHouse type of the descriptor-rows parameter: the rows travel as
/// text in [`DESCRIPTOR_ROWS_FORMAT`] ([`descriptor_rows_text`]) and the
/// statement's `format(...)` structure gives them their column types.
pub const DESCRIPTOR_ROWS_PARAM_TYPE: &str = "String";

/// The input format the descriptor-rows parameter is written in.
pub const DESCRIPTOR_ROWS_FORMAT: &str = "TabSeparated";

/// The `format(...)` table function's structure argument: every column of
/// [`CAPTURE_COLUMNS`] with its type, in order. A literal in the SQL text
/// (the function takes only a constant structure), made of names and types
/// the code defines, never of values.
pub fn descriptor_rows_structure() -> String {
    let fields: Vec<String> = CAPTURE_COLUMNS
        .iter()
        .map(|c| format!("{} {}", c.name, c.clickhouse_type))
        .collect();
    fields.join(", ")
}

/// The descriptor-rows parameter's value before the parameter's own text
/// escaping: the rows in [`DESCRIPTOR_ROWS_FORMAT`], each
/// [`CaptureDescriptor::to_tsv_row`] ended by a newline.
pub fn descriptor_rows_text(rows: &[CaptureDescriptor]) -> String {
    let mut out = String::new();
    for row in rows {
        out.push_str(&row.to_tsv_row());
        out.push('\n');
    }
    out
}

/// The most bytes one descriptor-rows parameter carries in its text form
/// (after the parameter's own escaping), besides the [`MAX_CHUNK`] row
/// bound.
///
/// Why: over HTTP a query parameter travels in the request URL (the
/// `clickhouse` crate sends `param_<name>` as a URL setting), percent-encoding
/// at most triples it, and clickhouse-server refuses a URI over
/// `http_max_uri_size` (1 MiB by default) with an HTTP error the service
/// would take for an outage and retry for ever. 256 KiB of text is at most
/// 768 KiB encoded, which leaves room for the other settings. Demo-shaped
/// rows (~400 bytes) give chunks of ~600 rows, so the 1,000-row bound still
/// applies to small rows.
///
/// [`MAX_CHUNK`]: crate::config::MAX_CHUNK
pub const MAX_DESCRIPTOR_PARAM_BYTES: usize = 256 * 1024;

/// The bytes `row` adds to the descriptor-rows parameter's text form: its
/// `TabSeparated` line and newline after the parameter's own escaping, which
/// doubles each backslash and spells each tab and newline as two characters.
/// Exact: the sum over a chunk's rows is the length of
/// [`crate::statement::Param::Descriptors`]'s text.
pub fn descriptor_param_bytes(row: &CaptureDescriptor) -> usize {
    // The newline that ends the row is escaped to two characters.
    escape_text(&row.to_tsv_row()).len() + 2
}

/// Splits `rows` into consecutive chunks of at most `max_rows` rows and at
/// most `max_bytes` of parameter text ([`descriptor_param_bytes`]), in
/// order, covering every row once. A row larger than `max_bytes` on its own
/// goes alone (a row is never split, and no chunk is empty), so the server
/// judges it; every other chunk fits both bounds.
pub fn descriptor_chunks(
    rows: &[CaptureDescriptor],
    max_rows: usize,
    max_bytes: usize,
) -> Vec<std::ops::Range<usize>> {
    let max_rows = max_rows.max(1);
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, row) in rows.iter().enumerate() {
        let size = descriptor_param_bytes(row);
        let full = i - start == max_rows || (i > start && bytes + size > max_bytes);
        if full {
            chunks.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < rows.len() {
        chunks.push(start..rows.len());
    }
    chunks
}

/// A string field of a `TabSeparated` row: backslash, tab and newline
/// escaped (the format's separators and escape character), and carriage
/// return and NUL too, so the value does not depend on server settings such
/// as `input_format_tsv_crlf_end_of_line`; everything else (quotes, unicode)
/// as is.
fn tsv_field(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            other => out.push(other),
        }
    }
    out
}

/// An `f64` compared and hashed by its bits, so descriptors can live inside
/// machine states (`Eq + Hash`) without pretending floats are totally ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct F64Bits(u64);

impl F64Bits {
    /// Wraps a float. Every NaN becomes the one canonical NaN: the catalog
    /// receives floats as text (`nan` has no payload), so a NaN's sign and
    /// payload bits could not survive a round trip, and comparing by bits
    /// would then call a stored summary different from the one written.
    pub fn new(value: f64) -> Self {
        if value.is_nan() {
            Self(f64::NAN.to_bits())
        } else {
            Self(value.to_bits())
        }
    }
    /// The float.
    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
    /// ClickHouse's text form: shortest round-trip digits, and `nan`, `inf`,
    /// `-inf` spelled the way the server parses them.
    pub fn to_text(self) -> String {
        let v = self.get();
        if v.is_nan() {
            "nan".to_owned()
        } else if v.is_infinite() {
            if v > 0.0 { "inf" } else { "-inf" }.to_owned()
        } else {
            format!("{v:?}")
        }
    }
}

impl From<f64> for F64Bits {
    fn from(value: f64) -> Self {
        Self::new(value)
    }
}

/// The tensor summary stored beside a descriptor (immutable metadata).
///
/// Float64 in the catalog: it exists for filtering and ranking; the exact
/// values (integer order statistics included) live in the pack itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SummaryColumns {
    /// Version of the summary computation that produced these values.
    pub summary_version: u32,
    /// Number of elements in the tensor.
    pub element_count: u64,
    /// Smallest element.
    pub minimum: F64Bits,
    /// Largest element.
    pub maximum: F64Bits,
    /// Arithmetic mean.
    pub mean: F64Bits,
    /// Euclidean norm.
    pub l2_norm: F64Bits,
    /// Largest absolute value.
    pub abs_max: F64Bits,
    /// Fraction of elements equal to zero.
    pub zero_fraction: F64Bits,
}

/// Where a capture's bytes are: the pack, and the byte range inside it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Locator {
    /// The object store holding the pack.
    pub store_id: String,
    /// The pack (immutable, named by UUID).
    pub pack_id: Uuid,
    /// Byte offset of the payload inside the pack.
    pub payload_offset: u64,
    /// Byte length of the payload.
    pub payload_length: u64,
    /// Lower-case hex SHA-256 of the payload bytes.
    pub payload_sha256: String,
}

/// One row of `{p}_capture_raw`: a capture described by one pack.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CaptureDescriptor {
    /// Tenant owning the capture (identity).
    pub tenant_id: String,
    /// Experiment (identity; a function of the capture).
    pub experiment_id: String,
    /// Run (identity; a function of the capture).
    pub run_id: String,
    /// Capture time in nanoseconds (identity; a function of the capture).
    pub captured_at_ns: u64,
    /// The capture's id (identity).
    pub capture_id: Uuid,
    /// Where its bytes are (mutable between packs).
    pub locator: Locator,
    /// The catalog version that wrote this row; the index pass stamps it.
    pub index_version: u64,
    /// Training step the capture was taken at.
    pub step: u64,
    /// Name of the captured tensor.
    pub tensor_name: String,
    /// Element type, e.g. `f32`, `bf16`, `i64`.
    pub dtype: String,
    /// Tensor shape.
    pub shape: Vec<u64>,
    /// The tensor summary.
    pub summary: SummaryColumns,
}

impl CaptureDescriptor {
    /// The pack this row lives in: `(store_id, pack_id)`.
    pub fn pack(&self) -> (String, Uuid) {
        (self.locator.store_id.clone(), self.locator.pack_id)
    }
}

impl CaptureDescriptor {
    /// This row as one `TabSeparated` line (without its newline), fields in
    /// [`CAPTURE_COLUMNS`] order: strings escaped by the format's rules,
    /// UUIDs hyphenated, the shape as an array literal, floats in
    /// [`F64Bits::to_text`]'s spelling.
    pub fn to_tsv_row(&self) -> String {
        let s = &self.summary;
        let l = &self.locator;
        let mut shape = String::from("[");
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                shape.push(',');
            }
            let _ = write!(shape, "{d}");
        }
        shape.push(']');
        let fields: [String; 23] = [
            tsv_field(&self.tenant_id),
            tsv_field(&self.experiment_id),
            tsv_field(&self.run_id),
            self.captured_at_ns.to_string(),
            self.capture_id.hyphenated().to_string(),
            tsv_field(&l.store_id),
            l.pack_id.hyphenated().to_string(),
            self.index_version.to_string(),
            self.step.to_string(),
            tsv_field(&self.tensor_name),
            tsv_field(&self.dtype),
            shape,
            s.summary_version.to_string(),
            s.element_count.to_string(),
            s.minimum.to_text(),
            s.maximum.to_text(),
            s.mean.to_text(),
            s.l2_norm.to_text(),
            s.abs_max.to_text(),
            s.zero_fraction.to_text(),
            l.payload_offset.to_string(),
            l.payload_length.to_string(),
            tsv_field(&l.payload_sha256),
        ];
        fields.join("\t")
    }
}

/// The comma-separated column list of [`CAPTURE_COLUMNS`].
pub fn capture_column_list() -> String {
    let names: Vec<&str> = CAPTURE_COLUMNS.iter().map(|c| c.name).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statement::Param;

    #[test]
    fn the_structure_names_every_column_with_its_type_in_table_order() {
        let structure = descriptor_rows_structure();
        let fields: Vec<&str> = structure.split(", ").collect();
        assert_eq!(fields.len(), CAPTURE_COLUMNS.len());
        for (field, c) in fields.iter().zip(CAPTURE_COLUMNS) {
            assert_eq!(*field, format!("{} {}", c.name, c.clickhouse_type));
        }
        assert!(!structure.contains('\''), "{structure}");
    }

    #[test]
    fn the_rows_text_is_one_tsv_line_per_row() {
        let a = CaptureDescriptor::default();
        let b = CaptureDescriptor {
            run_id: "r\t1\n2".into(),
            ..CaptureDescriptor::default()
        };
        let text = descriptor_rows_text(&[a.clone(), b.clone()]);
        assert_eq!(text, format!("{}\n{}\n", a.to_tsv_row(), b.to_tsv_row()));
        assert_eq!(descriptor_rows_text(&[]), "");
        assert_eq!(a.to_tsv_row().split('\t').count(), CAPTURE_COLUMNS.len());
        assert_eq!(b.to_tsv_row().split('\t').count(), CAPTURE_COLUMNS.len());
    }

    #[test]
    fn a_tsv_string_field_escapes_only_what_the_format_reads_specially() {
        assert_eq!(tsv_field("a\\b\tc\nd\re\0f"), "a\\\\b\\tc\\nd\\re\\0f");
        assert_eq!(tsv_field("it's \"ü\" \\N"), "it's \"ü\" \\\\N");
    }

    fn row_named(name: &str) -> CaptureDescriptor {
        CaptureDescriptor {
            tenant_id: "t".into(),
            tensor_name: name.into(),
            shape: vec![896],
            ..CaptureDescriptor::default()
        }
    }

    #[test]
    fn the_parameter_size_of_a_row_is_exactly_what_its_text_adds() {
        let rows = vec![
            row_named("model.layers.0.mlp"),
            row_named("back\\slash\ttab\nnewline\r\0"),
            row_named(""),
        ];
        let text = Param::Descriptors(rows.clone()).to_text();
        let sum: usize = rows.iter().map(descriptor_param_bytes).sum();
        assert_eq!(sum, text.len(), "{text}");
    }

    #[test]
    fn descriptor_chunks_respect_the_row_and_byte_bounds_and_cover_every_row_in_order() {
        let rows: Vec<CaptureDescriptor> = (0..50)
            .map(|i| row_named(&"x".repeat(10 + 37 * (i % 7))))
            .collect();
        for (max_rows, max_bytes) in [(1000, usize::MAX), (7, usize::MAX), (1000, 900), (3, 500)] {
            let chunks = descriptor_chunks(&rows, max_rows, max_bytes);
            let mut next = 0;
            for chunk in &chunks {
                assert_eq!(chunk.start, next, "{chunks:?}");
                assert!(!chunk.is_empty() && chunk.len() <= max_rows, "{chunks:?}");
                let bytes: usize = rows[chunk.clone()].iter().map(descriptor_param_bytes).sum();
                assert!(bytes <= max_bytes, "{chunk:?}: {bytes} > {max_bytes}");
                next = chunk.end;
            }
            assert_eq!(next, rows.len());
            // Greedy: no chunk could have taken the next row.
            for pair in chunks.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                let with_next: usize = rows[a.start..=b.start]
                    .iter()
                    .map(descriptor_param_bytes)
                    .sum();
                assert!(a.len() == max_rows || with_next > max_bytes, "{chunks:?}");
            }
        }
    }

    #[test]
    fn a_row_larger_than_the_byte_bound_goes_alone_and_no_chunk_is_empty() {
        let rows = vec![
            row_named("a"),
            row_named(&"big".repeat(400)),
            row_named("b"),
        ];
        let chunks = descriptor_chunks(&rows, 1000, 600);
        assert_eq!(chunks, vec![0..1, 1..2, 2..3]);
        assert!(descriptor_chunks(&[], 1000, 600).is_empty());
    }

    #[test]
    fn every_nan_is_the_canonical_nan_so_a_round_trip_compares_equal() {
        // x86's 0/0 gives the negative quiet NaN 0xFFF8...; the server sends
        // back the canonical `nan`.
        let negative = f64::from_bits(0xFFF8_0000_0000_0000);
        let payload = f64::from_bits(0x7FF8_0000_0000_0001);
        assert_eq!(F64Bits::new(negative), F64Bits::new(f64::NAN));
        assert_eq!(F64Bits::new(payload), F64Bits::new(f64::NAN));
        assert_eq!(F64Bits::new(-0.0).get().to_bits(), (-0.0f64).to_bits());
    }

    #[test]
    fn floats_use_the_spelling_the_server_parses() {
        assert_eq!(F64Bits::new(f64::NAN).to_text(), "nan");
        assert_eq!(F64Bits::new(f64::NEG_INFINITY).to_text(), "-inf");
        assert_eq!(F64Bits::new(1.0).to_text(), "1.0");
        assert_eq!(F64Bits::new(1e300).to_text(), "1e300");
    }
}
