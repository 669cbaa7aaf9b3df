//! The one ordered table of catalog objects.
//!
//! Creation, the stamp, the guard's "which objects should exist" and
//! [`drop_schema`] all read [`CatalogObject::ALL`], so the DDL and the
//! teardown list cannot drift apart: the seed leaked tables twice from a
//! teardown list kept by eye.

use std::collections::BTreeMap;

use crate::statement::{Expect, Settings, Statement};
use crate::tables::Tables;

/// Whether a catalog object holds rows or is a view over other objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// A MergeTree-family table: it holds rows, so losing it loses data.
    Table,
    /// A plain view: it holds no rows and is recreated outright.
    View,
    /// A materialized view writing into one of our tables: it holds no rows
    /// of its own, but a catalog that lost it has a table that stopped
    /// receiving rows, so it is required like a table and never recreated
    /// over live data.
    Feed,
}

impl ObjectKind {
    /// The word used in DDL and in diagnoses.
    pub fn keyword(self) -> &'static str {
        match self {
            Self::Table => "TABLE",
            Self::View | Self::Feed => "VIEW",
        }
    }

    /// Whether `engine`, as `system.tables` reports it, is this kind.
    ///
    /// A `MaterializedView` is only ever a [`ObjectKind::Feed`]: under a
    /// table's or a plain view's name it is a foreign object.
    pub fn matches_engine(self, engine: &str) -> bool {
        match self {
            Self::View => engine == "View",
            Self::Feed => engine == "MaterializedView",
            Self::Table => engine.ends_with("MergeTree"),
        }
    }

    /// Whether a stamped catalog must already hold the object: tables hold
    /// rows, and a feed that went missing left its table without rows it
    /// should hold. Plain views are reinstalled on every run instead.
    pub fn required_once_stamped(self) -> bool {
        match self {
            Self::Table | Self::Feed => true,
            Self::View => false,
        }
    }
}

/// Every object of the catalog, in creation order.
///
/// The stamp table comes first, so a catalog holding objects of ours
/// without it was not made by this build's install, and an install killed
/// at any later point leaves an empty stamp the guard can finish from (see
/// [`crate::schema::judge`]). The data tables follow, the feed right after
/// the two tables it joins, so it exists before any row can be written;
/// the views come last because they read the tables. The stamp *row*, which
/// lets writers in, is written after all of them (see
/// [`crate::schema::stamp_statement`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CatalogObject {
    /// `{p}_schema_version`.
    SchemaVersion,
    /// `{p}_capture_raw`.
    CaptureRaw,
    /// `{p}_capture_by_id`.
    CaptureById,
    /// `{p}_capture_by_id_feed` (materialized view).
    CaptureByIdFeed,
    /// `{p}_pack_inventory_raw`.
    PackInventoryRaw,
    /// `{p}_index_watermark`.
    IndexWatermark,
    /// `{p}_snapshot_manifest`.
    SnapshotManifest,
    /// `{p}_version_claims`.
    VersionClaims,
    /// `{p}_publisher_lease`.
    PublisherLease,
    /// `{p}_demand_events`.
    DemandEvents,
    /// `{p}_capture` (view).
    CaptureView,
    /// `{p}_pack_inventory` (view).
    PackInventoryView,
}

impl CatalogObject {
    /// Every object, in creation order. [`drop_schema`] drops them in the
    /// reverse order.
    pub const ALL: [Self; 12] = [
        Self::SchemaVersion,
        Self::CaptureRaw,
        Self::CaptureById,
        Self::CaptureByIdFeed,
        Self::PackInventoryRaw,
        Self::IndexWatermark,
        Self::SnapshotManifest,
        Self::VersionClaims,
        Self::PublisherLease,
        Self::DemandEvents,
        Self::CaptureView,
        Self::PackInventoryView,
    ];

    /// The object's name under `tables`' prefix.
    pub fn name(self, tables: &Tables) -> String {
        match self {
            Self::CaptureRaw => tables.capture_raw(),
            Self::CaptureById => tables.capture_by_id(),
            Self::CaptureByIdFeed => tables.capture_by_id_feed(),
            Self::PackInventoryRaw => tables.pack_inventory_raw(),
            Self::IndexWatermark => tables.index_watermark(),
            Self::SnapshotManifest => tables.snapshot_manifest(),
            Self::VersionClaims => tables.version_claims(),
            Self::PublisherLease => tables.publisher_lease(),
            Self::DemandEvents => tables.demand_events(),
            Self::SchemaVersion => tables.schema_version(),
            Self::CaptureView => tables.capture_view(),
            Self::PackInventoryView => tables.pack_inventory_view(),
        }
    }

    /// Table or view.
    pub fn kind(self) -> ObjectKind {
        match self {
            Self::CaptureView | Self::PackInventoryView => ObjectKind::View,
            Self::CaptureByIdFeed => ObjectKind::Feed,
            _ => ObjectKind::Table,
        }
    }

    /// The statement that creates the object. Tables use `IF NOT EXISTS`
    /// (the guard has already decided an existing one is ours and current);
    /// views use `CREATE OR REPLACE` so a rerun always installs this build's
    /// definition.
    pub fn create(self, tables: &Tables) -> Statement {
        let sql = crate::schema::ddl::create_sql(self, tables);
        ddl_statement(self.create_name(), sql)
    }

    /// The statement that drops the object if it exists.
    pub fn drop(self, tables: &Tables) -> Statement {
        let sql = format!(
            "DROP {} IF EXISTS {}",
            self.kind().keyword(),
            self.name(tables)
        );
        ddl_statement(self.drop_name(), sql)
    }

    /// The columns the guard requires the object to carry (empty for views,
    /// whose shape is reinstalled on every run).
    pub fn required_columns(self) -> Vec<&'static str> {
        crate::schema::ddl::column_names(self)
    }

    fn create_name(self) -> &'static str {
        match self {
            Self::CaptureRaw => "schema.create_capture_raw",
            Self::CaptureById => "schema.create_capture_by_id",
            Self::CaptureByIdFeed => "schema.create_capture_by_id_feed",
            Self::PackInventoryRaw => "schema.create_pack_inventory_raw",
            Self::IndexWatermark => "schema.create_index_watermark",
            Self::SnapshotManifest => "schema.create_snapshot_manifest",
            Self::VersionClaims => "schema.create_version_claims",
            Self::PublisherLease => "schema.create_publisher_lease",
            Self::DemandEvents => "schema.create_demand_events",
            Self::SchemaVersion => "schema.create_schema_version",
            Self::CaptureView => "schema.create_capture_view",
            Self::PackInventoryView => "schema.create_pack_inventory_view",
        }
    }

    fn drop_name(self) -> &'static str {
        match self {
            Self::CaptureRaw => "schema.drop_capture_raw",
            Self::CaptureById => "schema.drop_capture_by_id",
            Self::CaptureByIdFeed => "schema.drop_capture_by_id_feed",
            Self::PackInventoryRaw => "schema.drop_pack_inventory_raw",
            Self::IndexWatermark => "schema.drop_index_watermark",
            Self::SnapshotManifest => "schema.drop_snapshot_manifest",
            Self::VersionClaims => "schema.drop_version_claims",
            Self::PublisherLease => "schema.drop_publisher_lease",
            Self::DemandEvents => "schema.drop_demand_events",
            Self::SchemaVersion => "schema.drop_schema_version",
            Self::CaptureView => "schema.drop_capture_view",
            Self::PackInventoryView => "schema.drop_pack_inventory_view",
        }
    }
}

/// Objects an earlier design created under our prefix and this one does
/// not: they are recognised so a diagnosis can name them (and so a leftover
/// one is never mistaken for "an old schema that needs a full rebuild").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LegacyObject {
    /// `{p}_pack_commit_log`: membership before the snapshot manifest.
    PackCommitLog,
}

impl LegacyObject {
    /// Every legacy object we recognise.
    pub const ALL: [Self; 1] = [Self::PackCommitLog];

    /// The object's name under `tables`' prefix.
    pub fn name(self, tables: &Tables) -> String {
        match self {
            Self::PackCommitLog => format!("{}_pack_commit_log", tables.prefix()),
        }
    }
}

/// Every name the guard asks `system.tables` about: ours, then the legacy ones.
pub fn probed_names(tables: &Tables) -> Vec<String> {
    CatalogObject::ALL
        .iter()
        .map(|o| o.name(tables))
        .chain(LegacyObject::ALL.iter().map(|o| o.name(tables)))
        .collect()
}

/// The objects by name, for lookups from what the server reports.
pub fn objects_by_name(tables: &Tables) -> BTreeMap<String, CatalogObject> {
    CatalogObject::ALL
        .iter()
        .map(|o| (o.name(tables), *o))
        .collect()
}

/// `DROP ... IF EXISTS` for every catalog object, views first, generated
/// from [`CatalogObject::ALL`].
///
/// Every drop is conditional, so running the whole list over a partial or
/// an empty catalog is a no-op per missing object: a teardown after a
/// half-finished `ensure_schema` leaves nothing behind.
pub fn drop_schema(tables: &Tables) -> Vec<Statement> {
    CatalogObject::ALL
        .iter()
        .rev()
        .map(|o| o.drop(tables))
        .collect()
}

/// Every statement that creates the catalog, in order, without the stamp.
pub fn create_schema(tables: &Tables) -> Vec<Statement> {
    CatalogObject::ALL
        .iter()
        .map(|o| o.create(tables))
        .collect()
}

pub(crate) fn ddl_statement(name: &'static str, sql: String) -> Statement {
    Statement {
        name,
        sql,
        params: BTreeMap::new(),
        settings: Settings::default(),
        expect: Expect::Nothing,
        data: None,
    }
}
