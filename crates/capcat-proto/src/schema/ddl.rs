//! The DDL text of every catalog object.
//!
//! Only object names (from [`Tables`]) are spliced into this text; no value
//! is. The descriptor table's columns come from the one descriptor column
//! table ([`crate::descriptor`]), which the reader's projection is generated
//! from as well, so the two cannot disagree about what a capture row holds.

use crate::descriptor::{
    CAPTURE_BY_ID_COMPRESS_BLOCK, CAPTURE_BY_ID_GRANULE, CAPTURE_BY_ID_PRIMARY_KEY,
    CAPTURE_BY_ID_SORT_KEY, CAPTURE_COLUMNS, CAPTURE_SORT_KEY,
};
use crate::fragments::MembershipBound;
use crate::schema::objects::CatalogObject;
use crate::tables::Tables;

/// The server's clock in nanoseconds, as a column default. Every timestamp
/// the protocol compares is stamped by the server, never by a client.
pub const SERVER_NOW_DEFAULT: &str = "toUInt64(toUnixTimestamp64Nano(now64(9)))";

/// One column of a fixed-shape catalog table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ColumnDef {
    name: &'static str,
    ty: &'static str,
    /// A DEFAULT expression; only server-clock stamps use one.
    default: Option<&'static str>,
}

const fn col(name: &'static str, ty: &'static str) -> ColumnDef {
    ColumnDef {
        name,
        ty,
        default: None,
    }
}

const fn stamped(name: &'static str) -> ColumnDef {
    ColumnDef {
        name,
        ty: "UInt64",
        default: Some(SERVER_NOW_DEFAULT),
    }
}

const PACK_INVENTORY_COLUMNS: [ColumnDef; 5] = [
    col("store_id", "String"),
    col("pack_id", "UUID"),
    col("index_version", "UInt64"),
    col("publish_id", "UUID"),
    stamped("committed_at_ns"),
];

const WATERMARK_COLUMNS: [ColumnDef; 3] = [
    col("index_version", "UInt64"),
    col("publish_id", "UUID"),
    stamped("published_at_ns"),
];

const MANIFEST_COLUMNS: [ColumnDef; 4] = [
    col("index_version", "UInt64"),
    col("publish_id", "UUID"),
    col("store_id", "String"),
    col("pack_id", "UUID"),
];

const VERSION_CLAIM_COLUMNS: [ColumnDef; 3] = [
    col("index_version", "UInt64"),
    col("claim_id", "UUID"),
    stamped("claimed_at_ns"),
];

const LEASE_COLUMNS: [ColumnDef; 5] = [
    col("term", "UInt64"),
    col("lease_id", "UUID"),
    col("holder", "String"),
    col("acquired_at_ns", "UInt64"),
    col("expires_at_ns", "UInt64"),
];

const SCHEMA_VERSION_COLUMNS: [ColumnDef; 2] = [col("version", "UInt64"), stamped("stamped_at_ns")];

/// The names of the columns `object` must carry, in DDL order.
pub(crate) fn column_names(object: CatalogObject) -> Vec<&'static str> {
    match object {
        CatalogObject::CaptureRaw | CatalogObject::CaptureById => {
            CAPTURE_COLUMNS.iter().map(|c| c.name).collect()
        }
        CatalogObject::DemandEvents => crate::demand::storage::COLUMNS
            .iter()
            .map(|(name, _)| *name)
            .collect(),
        CatalogObject::CaptureView
        | CatalogObject::PackInventoryView
        | CatalogObject::CaptureByIdFeed => Vec::new(),
        table => fixed_columns(table).iter().map(|c| c.name).collect(),
    }
}

fn fixed_columns(object: CatalogObject) -> &'static [ColumnDef] {
    match object {
        CatalogObject::PackInventoryRaw => &PACK_INVENTORY_COLUMNS,
        CatalogObject::IndexWatermark => &WATERMARK_COLUMNS,
        CatalogObject::SnapshotManifest => &MANIFEST_COLUMNS,
        CatalogObject::VersionClaims => &VERSION_CLAIM_COLUMNS,
        CatalogObject::PublisherLease => &LEASE_COLUMNS,
        CatalogObject::SchemaVersion => &SCHEMA_VERSION_COLUMNS,
        CatalogObject::CaptureRaw
        | CatalogObject::CaptureById
        | CatalogObject::CaptureByIdFeed
        | CatalogObject::DemandEvents
        | CatalogObject::CaptureView
        | CatalogObject::PackInventoryView => &[],
    }
}

fn column_list(columns: impl Iterator<Item = (String, String)>) -> String {
    let body: Vec<String> = columns
        .map(|(name, def)| format!("    {name} {def}"))
        .collect();
    body.join(",\n")
}

fn fixed_table(name: &str, columns: &[ColumnDef], engine: &str) -> String {
    let cols = column_list(columns.iter().map(|c| {
        let def = match c.default {
            Some(default) => format!("{} DEFAULT {default}", c.ty),
            None => c.ty.to_owned(),
        };
        (c.name.to_owned(), def)
    }));
    format!("CREATE TABLE IF NOT EXISTS {name}\n(\n{cols}\n)\n{engine}")
}

/// The CREATE statement text of `object`.
pub(crate) fn create_sql(object: CatalogObject, tables: &Tables) -> String {
    let name = object.name(tables);
    match object {
        CatalogObject::CaptureRaw => capture_table(&name, CAPTURE_SORT_KEY, ""),
        CatalogObject::CaptureById => {
            let (min_block, max_block) = CAPTURE_BY_ID_COMPRESS_BLOCK;
            capture_table(
                &name,
                CAPTURE_BY_ID_SORT_KEY,
                &format!(
                    "\nPRIMARY KEY ({})\nSETTINGS index_granularity = {CAPTURE_BY_ID_GRANULE}, \
                     min_compress_block_size = {min_block}, max_compress_block_size = {max_block}",
                    CAPTURE_BY_ID_PRIMARY_KEY.join(", ")
                ),
            )
        }
        CatalogObject::CaptureByIdFeed => format!(
            "CREATE MATERIALIZED VIEW IF NOT EXISTS {name} TO {}\nAS SELECT {}\nFROM {}",
            tables.capture_by_id(),
            column_names(CatalogObject::CaptureRaw).join(", "),
            tables.capture_raw()
        ),
        CatalogObject::PackInventoryRaw => fixed_table(
            &name,
            &PACK_INVENTORY_COLUMNS,
            "ENGINE = ReplacingMergeTree(index_version)\nORDER BY (store_id, pack_id)",
        ),
        CatalogObject::IndexWatermark => fixed_table(
            &name,
            &WATERMARK_COLUMNS,
            "ENGINE = MergeTree\nORDER BY (index_version, publish_id)",
        ),
        CatalogObject::SnapshotManifest => fixed_table(
            &name,
            &MANIFEST_COLUMNS,
            "ENGINE = MergeTree\nORDER BY (index_version, publish_id, store_id, pack_id)",
        ),
        CatalogObject::VersionClaims => fixed_table(
            &name,
            &VERSION_CLAIM_COLUMNS,
            "ENGINE = MergeTree\nORDER BY (index_version, claim_id)",
        ),
        CatalogObject::PublisherLease => fixed_table(
            &name,
            &LEASE_COLUMNS,
            "ENGINE = MergeTree\nORDER BY (term, lease_id)",
        ),
        CatalogObject::DemandEvents => crate::demand::storage::ddl(tables),
        CatalogObject::SchemaVersion => fixed_table(
            &name,
            &SCHEMA_VERSION_COLUMNS,
            "ENGINE = MergeTree\nORDER BY tuple()",
        ),
        CatalogObject::CaptureView => capture_view_sql(tables),
        CatalogObject::PackInventoryView => format!(
            "CREATE OR REPLACE VIEW {name} AS\nSELECT {}\nFROM {} FINAL",
            PACK_INVENTORY_COLUMNS
                .iter()
                .map(|c| c.name)
                .collect::<Vec<_>>()
                .join(", "),
            tables.pack_inventory_raw()
        ),
    }
}

/// A table of descriptor rows (`{p}_capture_raw` or `{p}_capture_by_id`):
/// the descriptor columns, ReplacingMergeTree on `index_version`, ordered by
/// `sort_key`, then `layout` (a `PRIMARY KEY` and settings, or nothing).
/// Both tables share this one definition, so the copy cannot
/// drift from the original in a column or in what a merge collapses.
fn capture_table(name: &str, sort_key: &[&str], layout: &str) -> String {
    let cols = column_list(
        CAPTURE_COLUMNS
            .iter()
            .map(|c| (c.name.to_owned(), c.clickhouse_type.to_owned())),
    );
    format!(
        "CREATE TABLE IF NOT EXISTS {name}\n(\n{cols}\n)\n\
         ENGINE = ReplacingMergeTree(index_version)\nORDER BY ({}){layout}",
        sort_key.join(", ")
    )
}

/// `{p}_capture`: published descriptor rows, engine-deduplicated.
///
/// `FINAL` hides the engine's transient duplicates; the membership
/// predicate hides rows no publish admitted (batches written and never
/// published, rows orphaned by a crash before the publish). Filtering under
/// `FINAL` is sound only because `(store_id, pack_id)` belongs to the sort
/// key: rows a merge may collapse share those columns, so the predicate
/// keeps or drops a whole group. The view does not group on capture
/// identity: a capture described by two packs is two published rows, and
/// choosing between them (supersession) belongs to the reader alone.
fn capture_view_sql(tables: &Tables) -> String {
    format!(
        "CREATE OR REPLACE VIEW {} AS\nSELECT {}\nFROM {} FINAL\nWHERE {}",
        tables.capture_view(),
        column_names(CatalogObject::CaptureRaw).join(", "),
        tables.capture_raw(),
        crate::fragments::membership_predicate(tables, MembershipBound::Published)
    )
}
