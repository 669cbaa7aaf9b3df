//! The names of the catalog's tables and views under a prefix.
//!
//! Identifiers cannot be query parameters, so the prefix is the one piece of
//! caller input that is spliced into SQL text. It is validated here, once,
//! and every statement takes its names from [`Tables`].

/// The validated names of every catalog object under one prefix.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tables {
    prefix: String,
}

/// A prefix that cannot be spliced safely into SQL identifiers.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid catalog prefix {prefix:?}: use 1 to 48 ASCII letters, digits or underscores, \
     starting with a letter or underscore"
)]
pub struct InvalidPrefix {
    /// The rejected prefix.
    pub prefix: String,
}

/// The longest prefix accepted. ClickHouse allows long names, but a prefix
/// this long already says something is wrong with the caller.
pub const MAX_PREFIX_LEN: usize = 48;

impl Tables {
    /// Validates `prefix` and returns the names under it.
    pub fn new(prefix: &str) -> Result<Self, InvalidPrefix> {
        let mut chars = prefix.chars();
        let starts_well = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if starts_well && rest_ok && prefix.len() <= MAX_PREFIX_LEN {
            Ok(Self {
                prefix: prefix.to_owned(),
            })
        } else {
            Err(InvalidPrefix {
                prefix: prefix.to_owned(),
            })
        }
    }

    /// The prefix itself.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn name(&self, suffix: &str) -> String {
        format!("{}_{}", self.prefix, suffix)
    }

    /// `{p}_capture_raw`: one row per capture per pack (ReplacingMergeTree).
    pub fn capture_raw(&self) -> String {
        self.name("capture_raw")
    }
    /// `{p}_capture_by_id`: the same rows as `{p}_capture_raw`, ordered by
    /// `(tenant_id, capture_id, ...)` in small granules, so a lookup by id
    /// reads the granules of the ids it names and not a whole tenant.
    pub fn capture_by_id(&self) -> String {
        self.name("capture_by_id")
    }
    /// `{p}_capture_by_id_feed`: the materialized view that copies every
    /// block inserted into `{p}_capture_raw` into `{p}_capture_by_id`, inside
    /// the same INSERT.
    pub fn capture_by_id_feed(&self) -> String {
        self.name("capture_by_id_feed")
    }
    /// `{p}_pack_inventory_raw`: the replay guard, written only after a publish.
    pub fn pack_inventory_raw(&self) -> String {
        self.name("pack_inventory_raw")
    }
    /// `{p}_index_watermark`: (index_version, publish_id, published_at_ns).
    pub fn index_watermark(&self) -> String {
        self.name("index_watermark")
    }
    /// `{p}_snapshot_manifest`: (index_version, publish_id, store_id, pack_id).
    pub fn snapshot_manifest(&self) -> String {
        self.name("snapshot_manifest")
    }
    /// `{p}_version_claims`: the sole-claimant version allocator's log.
    pub fn version_claims(&self) -> String {
        self.name("version_claims")
    }
    /// `{p}_publisher_lease`: the publisher lease log.
    pub fn publisher_lease(&self) -> String {
        self.name("publisher_lease")
    }
    /// `{p}_schema_version`: one row, written last by `ensure_schema`.
    pub fn schema_version(&self) -> String {
        self.name("schema_version")
    }
    /// `{p}_demand_events`: demand records appended as events, folded on read.
    pub fn demand_events(&self) -> String {
        self.name("demand_events")
    }
    /// `{p}_capture`: the public view of published captures.
    pub fn capture_view(&self) -> String {
        self.name("capture")
    }
    /// `{p}_pack_inventory`: the public view of the inventory.
    pub fn pack_inventory_view(&self) -> String {
        self.name("pack_inventory")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_that_could_break_out_of_an_identifier_are_refused() {
        for bad in [
            "",
            "1abc",
            "a-b",
            "a b",
            "a;DROP",
            "a`b",
            "é",
            &"x".repeat(49),
        ] {
            assert!(Tables::new(bad).is_err(), "{bad:?} was accepted");
        }
        for good in ["capcat", "_t", "test_01", &"x".repeat(48)] {
            assert!(Tables::new(good).is_ok(), "{good:?} was refused");
        }
    }

    #[test]
    fn names_carry_the_prefix() {
        let t = Tables::new("cc").expect("valid prefix");
        assert_eq!(t.capture_raw(), "cc_capture_raw");
        assert_eq!(t.capture_view(), "cc_capture");
    }
}
