//! Object keys and the pack key layout `v1/<prefix>/<pack_id>.pack`.
//!
//! `v1` is the layout version: a future layout gets its own top-level
//! directory so that both can coexist in one bucket. `<prefix>` names one
//! catalog (so a reconciler listing `v1/<prefix>/` sees only that catalog's
//! packs), and `<pack_id>` is the pack's UUID in canonical form (lowercase,
//! hyphenated), so every key maps to exactly one pack id and back.

use std::fmt;

use uuid::Uuid;

/// The layout version, the first segment of every pack key.
pub const KEY_LAYOUT_VERSION: &str = "v1";

/// The suffix of every pack key.
const PACK_SUFFIX: &str = ".pack";

/// The longest object key S3 accepts, in bytes.
const MAX_KEY_BYTES: usize = 1024;

/// The longest catalog prefix, in bytes.
const MAX_PREFIX_BYTES: usize = 128;

/// File names beginning with this are the local store's temporary files, so
/// no object key may contain a segment that starts with it.
pub(crate) const RESERVED_SEGMENT_PREFIX: &str = ".capcat-";

/// A refused key or prefix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key is empty.
    #[error("an object key may not be empty")]
    Empty,
    /// The key is longer than S3 allows.
    #[error("object key of {len} bytes is longer than {MAX_KEY_BYTES}: {key:?}")]
    TooLong {
        /// The key's length in bytes.
        len: usize,
        /// The key.
        key: String,
    },
    /// A segment between slashes is empty, `.` or `..`, or the key starts or
    /// ends with a slash.
    #[error("object key {key:?} has an empty, `.` or `..` segment")]
    BadSegment {
        /// The key.
        key: String,
    },
    /// The key contains a control character or a backslash.
    #[error("object key {key:?} contains a control character or a backslash")]
    BadCharacter {
        /// The key.
        key: String,
    },
    /// A segment starts with the local store's reserved temporary-file prefix.
    #[error(
        "object key {key:?} has a segment starting with the reserved {RESERVED_SEGMENT_PREFIX:?}"
    )]
    Reserved {
        /// The key.
        key: String,
    },
    /// A catalog prefix is empty, too long, `.`/`..`, or has a character
    /// outside `[A-Za-z0-9._-]`.
    #[error(
        "catalog prefix {prefix:?} must be 1 to {MAX_PREFIX_BYTES} characters of [A-Za-z0-9._-], not `.` or `..`"
    )]
    BadPrefix {
        /// The prefix.
        prefix: String,
    },
}

/// A key the stores accept: 1 to 1024 bytes, segments separated by single
/// slashes, none empty, `.` or `..`, no control characters or backslashes.
///
/// These rules are stricter than S3's so that every key is also a safe
/// relative path for [`crate::LocalStore`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey(String);

impl ObjectKey {
    /// Validates `key`.
    ///
    /// # Errors
    /// A [`KeyError`] saying which rule `key` breaks.
    pub fn new(key: impl Into<String>) -> Result<Self, KeyError> {
        let key = key.into();
        if key.is_empty() {
            return Err(KeyError::Empty);
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(KeyError::TooLong {
                len: key.len(),
                key,
            });
        }
        if key.chars().any(|c| c.is_control() || c == '\\') {
            return Err(KeyError::BadCharacter { key });
        }
        if key
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
        {
            return Err(KeyError::BadSegment { key });
        }
        if key
            .split('/')
            .any(|s| s.starts_with(RESERVED_SEGMENT_PREFIX))
        {
            return Err(KeyError::Reserved { key });
        }
        Ok(Self(key))
    }

    /// The key as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The name of one catalog's directory in the object store: 1 to 128
/// characters of `[A-Za-z0-9._-]`, not `.` or `..`.
///
/// It has no slash, so no catalog's key space nests inside another's: the
/// listing of `v1/a/` never holds the packs of a catalog named `a/b`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CatalogPrefix(String);

impl CatalogPrefix {
    /// Validates `prefix`.
    ///
    /// # Errors
    /// [`KeyError::BadPrefix`] when it breaks a rule.
    pub fn new(prefix: impl Into<String>) -> Result<Self, KeyError> {
        let prefix = prefix.into();
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if prefix.is_empty()
            || prefix.len() > MAX_PREFIX_BYTES
            || prefix == "."
            || prefix == ".."
            || !prefix.chars().all(allowed)
        {
            return Err(KeyError::BadPrefix { prefix });
        }
        Ok(Self(prefix))
    }

    /// The prefix as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The listing prefix holding every pack of this catalog:
    /// `v1/<prefix>/`.
    #[must_use]
    pub fn list_prefix(&self) -> String {
        format!("{KEY_LAYOUT_VERSION}/{}/", self.0)
    }
}

impl fmt::Display for CatalogPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The key of one pack: `v1/<prefix>/<pack_id>.pack`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PackKey {
    prefix: CatalogPrefix,
    pack_id: Uuid,
}

impl PackKey {
    /// The key of pack `pack_id` in catalog `prefix`.
    #[must_use]
    pub fn new(prefix: CatalogPrefix, pack_id: Uuid) -> Self {
        Self { prefix, pack_id }
    }

    /// Parses a listed key of catalog `prefix`. `None` when the key is not
    /// exactly `v1/<prefix>/<canonical uuid>.pack`: a nested key, another
    /// suffix, an uppercase, braced or unhyphenated UUID are all foreign.
    #[must_use]
    pub fn parse(prefix: &CatalogPrefix, key: &str) -> Option<Self> {
        let name = key.strip_prefix(prefix.list_prefix().as_str())?;
        let id_text = name.strip_suffix(PACK_SUFFIX)?;
        let pack_id = parse_canonical_uuid(id_text)?;
        Some(Self {
            prefix: prefix.clone(),
            pack_id,
        })
    }

    /// The catalog prefix.
    #[must_use]
    pub fn prefix(&self) -> &CatalogPrefix {
        &self.prefix
    }

    /// The pack id.
    #[must_use]
    pub fn pack_id(&self) -> Uuid {
        self.pack_id
    }

    /// The object key.
    #[must_use]
    pub fn object_key(&self) -> ObjectKey {
        // A catalog prefix has no slash or control character and a hyphenated
        // UUID has neither, so the assembled key always satisfies ObjectKey.
        ObjectKey(self.to_string())
    }
}

impl fmt::Display for PackKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{KEY_LAYOUT_VERSION}/{}/{}{PACK_SUFFIX}",
            self.prefix,
            self.pack_id.hyphenated()
        )
    }
}

/// Parses `text` as a UUID written in canonical form (36 characters,
/// lowercase, hyphenated), refusing every other spelling `Uuid::parse_str`
/// accepts, so that each pack id has exactly one key.
pub(crate) fn parse_canonical_uuid(text: &str) -> Option<Uuid> {
    let id = Uuid::try_parse(text).ok()?;
    let mut buffer = Uuid::encode_buffer();
    (id.hyphenated().encode_lower(&mut buffer) == text).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix() -> CatalogPrefix {
        CatalogPrefix::new("cat_1").expect("valid prefix")
    }

    #[test]
    fn pack_key_round_trips_through_its_text() {
        let id = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let key = PackKey::new(prefix(), id);
        assert_eq!(
            key.to_string(),
            "v1/cat_1/01234567-89ab-cdef-0123-456789abcdef.pack"
        );
        assert_eq!(
            PackKey::parse(&prefix(), &key.to_string()),
            Some(key.clone())
        );
        assert_eq!(ObjectKey::new(key.to_string()), Ok(key.object_key()));
    }

    #[test]
    fn non_canonical_or_foreign_keys_do_not_parse() {
        let p = prefix();
        for key in [
            "v1/cat_1/01234567-89AB-CDEF-0123-456789ABCDEF.pack",
            "v1/cat_1/0123456789abcdef0123456789abcdef.pack",
            "v1/cat_1/{01234567-89ab-cdef-0123-456789abcdef}.pack",
            "v1/cat_1/urn:uuid:01234567-89ab-cdef-0123-456789abcdef.pack",
            "v1/cat_1/01234567-89ab-cdef-0123-456789abcdef.pack.tmp",
            "v1/cat_1/01234567-89ab-cdef-0123-456789abcdef",
            "v1/cat_1/sub/01234567-89ab-cdef-0123-456789abcdef.pack",
            "v1/cat_10/01234567-89ab-cdef-0123-456789abcdef.pack",
            "v2/cat_1/01234567-89ab-cdef-0123-456789abcdef.pack",
            "v1/cat_1/not-a-uuid.pack",
            "v1/cat_1/.pack",
        ] {
            assert_eq!(PackKey::parse(&p, key), None, "{key}");
        }
    }

    #[test]
    fn object_keys_refuse_unsafe_paths() {
        assert_eq!(ObjectKey::new(""), Err(KeyError::Empty));
        for key in [
            "/a",
            "a/",
            "a//b",
            "a/./b",
            "../a",
            "a\\b",
            "a\nb",
            "a/.capcat-tmp.1",
        ] {
            assert!(ObjectKey::new(key).is_err(), "{key}");
        }
        assert!(matches!(
            ObjectKey::new("a".repeat(1025)),
            Err(KeyError::TooLong { len: 1025, .. })
        ));
        assert!(ObjectKey::new("v1/x/.hidden.pack").is_ok());
    }

    #[test]
    fn catalog_prefixes_have_no_slash() {
        for bad in ["", ".", "..", "a/b", "a b", "é", &"a".repeat(129)] {
            assert!(CatalogPrefix::new(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            CatalogPrefix::new("A.b_c-9").map(|p| p.list_prefix()),
            Ok("v1/A.b_c-9/".to_owned())
        );
    }
}
