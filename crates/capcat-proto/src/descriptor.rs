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
//! How descriptor values reach the server: as the INSERT's data, not as
//! text. `INSERT INTO {p}_capture_raw (<columns>) FORMAT RowBinary` names
//! every column of [`CAPTURE_COLUMNS`] in order, and the rows follow the
//! statement in ClickHouse's `RowBinary` format
//! ([`CaptureDescriptor::write_row_binary`]): the server streams them into
//! the table's blocks without parsing a constant first, and the bytes are
//! exactly the values (a float's bits, a string's bytes), so nothing about a
//! value depends on how text is escaped or spelled. docs/protocol.md gives
//! the byte layout for a native writer, docs/benchmarks.md the measurements.
//! Rows go in chunks of at most [`crate::Config::insert_rows`] rows and
//! [`MAX_INSERT_DATA_BYTES`] of data ([`descriptor_chunks`]).
//!
//! [`Statement`]: crate::statement::Statement
//! [`insert_descriptors`]: crate::index::sql::insert_descriptors

use uuid::Uuid;

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
/// column list of the descriptor INSERT, the field order of each row's data
/// ([`CaptureDescriptor::write_row_binary`]) and of [`CaptureDescriptor`]'s
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

/// The most bytes of `RowBinary` data one descriptor INSERT carries, besides
/// its row bound ([`crate::Config::insert_rows`]).
///
/// Why a bound at all: the whole chunk is built in memory before it is sent
/// (a statement is plain data), and an unbounded pass would hold every row
/// twice. 32 MiB is about 80,000 demo-shaped rows (~400 bytes each), above
/// the default row bound, so for ordinary rows the row bound decides; only
/// rows with very long names reach this one. clickhouse-server takes data
/// of any size; capcat-chdb's HTTP front takes up to 256 MiB.
pub const MAX_INSERT_DATA_BYTES: usize = 32 << 20;

/// Splits `rows` into consecutive chunks of at most `max_rows` rows and at
/// most `max_bytes` of data ([`CaptureDescriptor::row_binary_len`]), in
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
        let size = row.row_binary_len();
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

/// An `f64` compared and hashed by its bits, so descriptors can live inside
/// machine states (`Eq + Hash`) without pretending floats are totally ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct F64Bits(u64);

impl F64Bits {
    /// Wraps a float. Every NaN becomes the one canonical NaN: the catalog
    /// returns floats as text (`nan` has no payload), so a NaN's sign and
    /// payload bits could not survive a round trip, and comparing by bits
    /// would then call a stored summary different from the one written.
    /// (The INSERT's `RowBinary` would carry the bits; the read back would
    /// not.)
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
    /// Appends this row in ClickHouse's `RowBinary` format to `out`, fields
    /// in [`CAPTURE_COLUMNS`] order:
    ///
    /// - `String`: its length as an unsigned LEB128 varint, then its bytes;
    /// - `UInt64`, `UInt32`: little-endian, 8 and 4 bytes;
    /// - `UUID`: 16 bytes, the UUID's first 8 bytes reversed, then its last
    ///   8 bytes reversed (two little-endian 64-bit halves, high half first);
    /// - `Float64`: the IEEE 754 bits, little-endian;
    /// - `Array(UInt64)`: the element count as a varint, then the elements.
    pub fn write_row_binary(&self, out: &mut Vec<u8>) {
        let s = &self.summary;
        let l = &self.locator;
        put_string(out, &self.tenant_id);
        put_string(out, &self.experiment_id);
        put_string(out, &self.run_id);
        out.extend_from_slice(&self.captured_at_ns.to_le_bytes());
        put_uuid(out, self.capture_id);
        put_string(out, &l.store_id);
        put_uuid(out, l.pack_id);
        out.extend_from_slice(&self.index_version.to_le_bytes());
        out.extend_from_slice(&self.step.to_le_bytes());
        put_string(out, &self.tensor_name);
        put_string(out, &self.dtype);
        put_varint(out, self.shape.len() as u64);
        for d in &self.shape {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&s.summary_version.to_le_bytes());
        out.extend_from_slice(&s.element_count.to_le_bytes());
        for f in [
            s.minimum,
            s.maximum,
            s.mean,
            s.l2_norm,
            s.abs_max,
            s.zero_fraction,
        ] {
            out.extend_from_slice(&f.get().to_bits().to_le_bytes());
        }
        out.extend_from_slice(&l.payload_offset.to_le_bytes());
        out.extend_from_slice(&l.payload_length.to_le_bytes());
        put_string(out, &l.payload_sha256);
    }

    /// The bytes [`Self::write_row_binary`] appends, computed without
    /// writing them.
    pub fn row_binary_len(&self) -> usize {
        let l = &self.locator;
        let strings = [
            &self.tenant_id,
            &self.experiment_id,
            &self.run_id,
            &l.store_id,
            &self.tensor_name,
            &self.dtype,
            &l.payload_sha256,
        ];
        let string_bytes: usize = strings
            .iter()
            .map(|s| varint_len(s.len() as u64) + s.len())
            .sum();
        // Fixed-size fields: captured_at_ns, index_version, step,
        // element_count, payload_offset, payload_length (8 each), two UUIDs
        // (16 each), summary_version (4), six floats (8 each).
        let fixed = 6 * 8 + 2 * 16 + 4 + 6 * 8;
        let shape = varint_len(self.shape.len() as u64) + 8 * self.shape.len();
        string_bytes + fixed + shape
    }
}

/// An unsigned LEB128 varint: 7 bits a byte, low bits first, the high bit
/// set on every byte but the last.
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        // Truncation keeps the low 7 bits, which is the point.
        out.push((value as u8 & 0x7F) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varint_len(value: u64) -> usize {
    let bits = 64 - value.leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

fn put_string(out: &mut Vec<u8>, value: &str) {
    put_varint(out, value.len() as u64);
    out.extend_from_slice(value.as_bytes());
}

fn put_uuid(out: &mut Vec<u8>, id: Uuid) {
    let (high, low) = id.as_u64_pair();
    out.extend_from_slice(&high.to_le_bytes());
    out.extend_from_slice(&low.to_le_bytes());
}

/// The comma-separated column list of [`CAPTURE_COLUMNS`].
pub fn capture_column_list() -> String {
    let names: Vec<&str> = CAPTURE_COLUMNS.iter().map(|c| c.name).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statement::InsertData;

    fn row_named(name: &str) -> CaptureDescriptor {
        CaptureDescriptor {
            tenant_id: "t".into(),
            tensor_name: name.into(),
            shape: vec![896],
            ..CaptureDescriptor::default()
        }
    }

    #[test]
    fn the_length_of_a_row_is_exactly_what_writing_it_adds() {
        let rows = vec![
            row_named("model.layers.0.mlp"),
            row_named("back\\slash\ttab\nnewline\r\0"),
            row_named(""),
            row_named(&"long".repeat(100)),
            CaptureDescriptor {
                shape: (0..200).collect(),
                ..row_named("many dims")
            },
        ];
        let bytes = InsertData::Descriptors(rows.clone().into()).to_bytes();
        let sum: usize = rows.iter().map(CaptureDescriptor::row_binary_len).sum();
        assert_eq!(sum, bytes.len());
        for row in &rows {
            let mut one = Vec::new();
            row.write_row_binary(&mut one);
            assert_eq!(one.len(), row.row_binary_len(), "{row:?}");
        }
    }

    #[test]
    fn a_row_is_written_field_by_field_in_clickhouse_row_binary() {
        let row = CaptureDescriptor {
            tenant_id: "t".into(),
            experiment_id: String::new(),
            run_id: "é".into(),
            captured_at_ns: 0x0102_0304_0506_0708,
            capture_id: Uuid::from_u128(0x0011_2233_4455_6677_8899_aabb_ccdd_eeff),
            locator: Locator {
                store_id: "s".into(),
                pack_id: Uuid::from_u128(1),
                payload_offset: 2,
                payload_length: 3,
                payload_sha256: "ab".into(),
            },
            index_version: 4,
            step: 5,
            tensor_name: "x".repeat(200),
            dtype: "f32".into(),
            shape: vec![1, 896],
            summary: SummaryColumns {
                summary_version: 2,
                element_count: 896,
                minimum: F64Bits::new(-0.0),
                maximum: F64Bits::new(1.0),
                mean: F64Bits::new(f64::INFINITY),
                l2_norm: F64Bits::new(0.5),
                abs_max: F64Bits::new(f64::NAN),
                zero_fraction: F64Bits::new(f64::MIN_POSITIVE),
            },
        };
        let mut want: Vec<u8> = Vec::new();
        want.extend([1, b't', 0, 2, 0xC3, 0xA9]);
        want.extend([8, 7, 6, 5, 4, 3, 2, 1]);
        want.extend([0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00]);
        want.extend([0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88]);
        want.extend([1, b's']);
        want.extend([0; 8]);
        want.extend([1, 0, 0, 0, 0, 0, 0, 0]);
        want.extend(4u64.to_le_bytes());
        want.extend(5u64.to_le_bytes());
        // 200 is 0xC8: two varint bytes, 0x48 | 0x80 then 0x01.
        want.extend([0xC8, 0x01]);
        want.extend([b'x'; 200]);
        want.extend([3, b'f', b'3', b'2']);
        want.extend([2]);
        want.extend(1u64.to_le_bytes());
        want.extend(896u64.to_le_bytes());
        want.extend(2u32.to_le_bytes());
        want.extend(896u64.to_le_bytes());
        for f in [-0.0, 1.0, f64::INFINITY, 0.5, f64::NAN, f64::MIN_POSITIVE] {
            want.extend(f64::to_bits(f).to_le_bytes());
        }
        want.extend(2u64.to_le_bytes());
        want.extend(3u64.to_le_bytes());
        want.extend([2, b'a', b'b']);
        let mut got = Vec::new();
        row.write_row_binary(&mut got);
        assert_eq!(got, want);
        assert_eq!(row.row_binary_len(), want.len());
    }

    #[test]
    fn varints_take_seven_bits_a_byte() {
        for (value, bytes) in [
            (0u64, vec![0u8]),
            (127, vec![0x7F]),
            (128, vec![0x80, 0x01]),
            (16_383, vec![0xFF, 0x7F]),
            (16_384, vec![0x80, 0x80, 0x01]),
            (
                u64::MAX,
                vec![0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
            ),
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(out, bytes, "{value}");
            assert_eq!(varint_len(value), bytes.len(), "{value}");
        }
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
                let bytes: usize = rows[chunk.clone()]
                    .iter()
                    .map(CaptureDescriptor::row_binary_len)
                    .sum();
                assert!(bytes <= max_bytes, "{chunk:?}: {bytes} > {max_bytes}");
                next = chunk.end;
            }
            assert_eq!(next, rows.len());
            // Greedy: no chunk could have taken the next row.
            for pair in chunks.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                let with_next: usize = rows[a.start..=b.start]
                    .iter()
                    .map(CaptureDescriptor::row_binary_len)
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
}
