//! The service's view of the catalog: capcat-clickhouse's [`Catalog`].
//!
//! The service runs every catalog operation through [`Catalog`] (one drive
//! loop, in capcat-clickhouse) and holds the publisher lease as a
//! [`capcat_clickhouse::LeaseHandle`]; nothing here drives a machine. The
//! one decision the service makes about catalog failures, whether a failed
//! index pass counts against its packs, asks the error itself:
//! [`capcat_clickhouse::CatalogError::is_outage`].

pub use capcat_clickhouse::Catalog;
