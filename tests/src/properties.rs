//! The property names, spelled as in the stateright model, the TLA+ spec
//! and docs/model-checking.md.

/// Once a reader has seen W, the packs admitted at or below W never change.
pub const PINNED_SNAPSHOT_NEVER_GROWS: &str = "PinnedSnapshotNeverGrows";
/// A statement whose lease is not the live head at evaluation lands no row.
pub const FENCED_OUT_WRITES_NOTHING: &str = "FencedOutWritesNothing";
/// `Won` only when the commit row and its manifest rows stand and pair;
/// a lost attempt only when nothing it wrote is visible.
pub const REPORTED_MEANS_VISIBLE: &str = "ReportedMeansVisible";
/// A pack reaches the inventory only after a publish that made it visible.
pub const INVENTORY_ONLY_AFTER_PUBLISH: &str = "InventoryOnlyAfterPublish";
/// One claimant per allocated version.
pub const VERSIONS_UNIQUE: &str = "VersionsUnique";
