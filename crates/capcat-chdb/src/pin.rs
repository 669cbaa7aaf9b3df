//! The pinned libchdb: the one place its version and checksum are written.
//!
//! Everything that finds or fetches the engine reads these constants:
//! [`library_path`](crate::library_path) (the cache directory is named
//! after [`VERSION`]), `cargo xtask fetch-engine` (xtask/src/engine.rs) and
//! the fetcher of the `capcat` binary and the Python package (capcat-targets'
//! engine.rs,
//! through capcat-clickhouse's re-export `capcat_clickhouse::libchdb_pin`).
//! Scripts get the path with `cargo xtask fetch-engine`, which prints it.
//! To move to another engine: change the version in `pinned_version!`,
//! fetch once, put the new tarball's SHA-256 in [`TARBALL_SHA256`], and
//! redo the measurements `docs/embedded-engine.md` records.

/// The pinned version, as a literal so the names below can be built from it
/// at compile time with `concat!`.
macro_rules! pinned_version {
    () => {
        "26.7.3-stable.1"
    };
}

/// The npm package that ships libchdb for x86_64 Linux (glibc): the only
/// place chDB publishes its C library as a versioned, immutable artifact.
pub const PACKAGE: &str = "@chdb/lib-linux-x64-gnu";

/// The pinned engine version (the npm package's version, and the name of
/// its directory in the cache: `<cache>/libchdb/<VERSION>/libchdb.so`).
pub const VERSION: &str = pinned_version!();

/// The tarball `npm pack PACKAGE@VERSION` writes.
pub const TARBALL: &str = concat!("chdb-lib-linux-x64-gnu-", pinned_version!(), ".tgz");

/// SHA-256 of [`TARBALL`], computed from the first download on 2026-11-29
/// (npm's sha1 shasum for the same file is
/// d2905fafd0e0ac0e231cccadd1f0f6d010977297). npm's integrity field only
/// proves the registry served what it indexed, not that it is the build we
/// tested, so fetchers refuse any other tarball.
pub const TARBALL_SHA256: &str = "c0d32b129e988f2b9a9a31c9141aecf5e1e2453f9a079efc4d36ab8e3f92b2ad";

/// The member of the tarball that is the library.
pub const MEMBER: &str = "package/libchdb.so";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tarball_is_named_after_the_package_and_version() {
        let scope_less = PACKAGE
            .strip_prefix('@')
            .expect("a scoped npm package")
            .replace('/', "-");
        assert_eq!(TARBALL, format!("{scope_less}-{VERSION}.tgz"));
    }

    #[test]
    fn the_checksum_is_lowercase_hex_sha256() {
        assert_eq!(TARBALL_SHA256.len(), 64);
        assert!(
            TARBALL_SHA256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
    }
}
