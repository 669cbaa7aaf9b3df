//! `--catalog` and `--store`: where the catalog and the packs live.

use std::path::{Path, PathBuf};

use capcat_clickhouse::{Catalog, CatalogError, HttpOptions, Password};
use capcat_s3::{AnyStore, LocalStore, S3Config, S3Credentials, S3Store};
use capcat_service::ValidConfig;

/// The signing region of an S3 store that names none.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Whether a command may create what it opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A command that only reads (search, get, hydrate, status, a demo
    /// verification): a mistyped `embedded:` or `local:` path is an error,
    /// not a new empty catalog or store left behind.
    ReadOnly,
    /// A command that writes: the catalog and store directories are created
    /// when absent.
    Create,
}

/// A catalog location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CatalogTarget {
    /// libchdb in this process, data at this path.
    Embedded(PathBuf),
    /// A ClickHouse server.
    Http(String),
}

/// A store location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreTarget {
    /// A local directory.
    Local(PathBuf),
    /// An S3 bucket at an endpoint.
    S3 {
        /// The bucket.
        bucket: String,
        /// The endpoint URL.
        endpoint: String,
        /// The signing region.
        region: String,
    },
}

impl std::fmt::Display for CatalogTarget {
    /// As `--catalog` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Embedded(path) => write!(f, "embedded:{}", path.display()),
            Self::Http(url) => f.write_str(url),
        }
    }
}

impl std::fmt::Display for StoreTarget {
    /// As `--store` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local(dir) => write!(f, "local:{}", dir.display()),
            Self::S3 {
                bucket,
                endpoint,
                region,
            } => write!(f, "s3://{bucket}?endpoint={endpoint}&region={region}"),
        }
    }
}

/// A refused `--catalog` or `--store`, or one that could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// The text is not one of the accepted forms.
    #[error("{flag} {value:?}: {expected}")]
    Syntax {
        /// The flag.
        flag: &'static str,
        /// The value given.
        value: String,
        /// The accepted forms.
        expected: &'static str,
    },
    /// The catalog could not be opened.
    #[error("catalog: {0}")]
    Catalog(String),
    /// The store could not be opened.
    #[error("store: {0}")]
    Store(String),
    /// A read-only command was pointed at a directory that does not exist.
    #[error(
        "{what} {}: no such directory (check {flag}; a command that writes, \
         such as `capcat schema check` or `capcat ingest`, creates it)",
        path.display()
    )]
    Missing {
        /// "catalog" or "store".
        what: &'static str,
        /// The flag that names it.
        flag: &'static str,
        /// The path.
        path: PathBuf,
    },
}

/// Refuses a missing directory for a read-only command.
fn require_dir(
    access: Access,
    what: &'static str,
    flag: &'static str,
    path: &std::path::Path,
) -> Result<(), TargetError> {
    if access == Access::ReadOnly && !path.is_dir() {
        return Err(TargetError::Missing {
            what,
            flag,
            path: path.to_owned(),
        });
    }
    Ok(())
}

impl CatalogTarget {
    /// Parses `embedded:<path>` or `http(s)://...`.
    ///
    /// # Errors
    /// Any other form.
    pub fn parse(value: &str) -> Result<Self, TargetError> {
        if let Some(path) = value.strip_prefix("embedded:")
            && !path.is_empty()
        {
            return Ok(Self::Embedded(PathBuf::from(path)));
        }
        if value.starts_with("http://") || value.starts_with("https://") {
            return Ok(Self::Http(value.to_owned()));
        }
        Err(TargetError::Syntax {
            flag: "--catalog",
            value: value.to_owned(),
            expected: "expected embedded:<path> or http(s)://host:port",
        })
    }

    /// Opens the catalog of `cfg` (its tables, protocol configuration,
    /// timeouts, credentials and TLS trust), loading libchdb, fetched when
    /// absent, for an embedded catalog. The transport is capcat-clickhouse's
    /// business: the CLI never sees it.
    ///
    /// # Errors
    /// The engine cannot be loaded, the URL is refused, or the password
    /// file cannot be read.
    pub fn open(&self, access: Access, cfg: &ValidConfig) -> Result<Catalog, TargetError> {
        let tables = &cfg.tables;
        let catalog = match self {
            Self::Embedded(path) => {
                require_dir(access, "catalog", "--catalog", path)?;
                crate::engine::ensure_libchdb().map_err(|e| TargetError::Catalog(e.to_string()))?;
                std::fs::create_dir_all(path)
                    .map_err(|e| TargetError::Catalog(format!("{}: {e}", path.display())))?;
                Catalog::embedded(path, tables.prefix())
            }
            Self::Http(url) => {
                let raw = &cfg.raw;
                let password = match (&raw.catalog_password, &raw.catalog_password_file) {
                    (Some(password), _) => Some(password.clone()),
                    (None, Some(path)) => Some(read_password_file(path)?),
                    (None, None) => None,
                };
                let options = HttpOptions {
                    request_timeout: cfg.catalog_request_timeout,
                    connect_timeout: cfg.catalog_connect_timeout,
                    user: raw.catalog_user.clone(),
                    password,
                    ca_file: raw.catalog_ca_file.clone(),
                    allow_insecure_http: raw.allow_insecure_http,
                    ..HttpOptions::default()
                };
                Catalog::http(url, tables.prefix(), options)
            }
        }
        .map_err(open_error)?;
        Ok(catalog.with_config(cfg.protocol.clone()))
    }

    /// The URL the service configuration validates, when there is one.
    #[must_use]
    pub fn url(&self) -> Option<String> {
        match self {
            Self::Http(url) => Some(url.clone()),
            Self::Embedded(_) => None,
        }
    }
}

/// The password in `path`: its text without one trailing newline (`echo`
/// writes one; a password that ends in a newline is not supported).
///
/// # Errors
/// The file cannot be read, is not UTF-8, or holds nothing.
fn read_password_file(path: &Path) -> Result<Password, TargetError> {
    let refused = |reason: String| {
        TargetError::Catalog(format!(
            "catalog_password_file {}: {reason}",
            path.display()
        ))
    };
    let text = std::fs::read_to_string(path).map_err(|e| refused(e.to_string()))?;
    let password = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(&text);
    if password.is_empty() {
        return Err(refused("the file is empty".to_owned()));
    }
    Ok(Password::new(password))
}

/// A catalog that did not open, worded as the engine or the HTTP client
/// words it (without [`CatalogError`]'s own "embedded engine: " prefix:
/// [`TargetError::Catalog`] already says "catalog: ").
fn open_error(error: CatalogError) -> TargetError {
    TargetError::Catalog(match error {
        CatalogError::Engine(engine) => engine.to_string(),
        other => other.to_string(),
    })
}

impl StoreTarget {
    /// Parses `local:<dir>` or `s3://bucket?endpoint=URL[&region=R]`.
    ///
    /// # Errors
    /// Any other form.
    pub fn parse(value: &str) -> Result<Self, TargetError> {
        let syntax = || TargetError::Syntax {
            flag: "--store",
            value: value.to_owned(),
            expected: "expected local:<dir> or s3://bucket?endpoint=http(s)://host:port[&region=us-east-1]",
        };
        if let Some(path) = value.strip_prefix("local:") {
            if path.is_empty() {
                return Err(syntax());
            }
            return Ok(Self::Local(PathBuf::from(path)));
        }
        let rest = value.strip_prefix("s3://").ok_or_else(syntax)?;
        let (bucket, query) = rest.split_once('?').ok_or_else(syntax)?;
        let mut endpoint = None;
        let mut region = DEFAULT_REGION.to_owned();
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("endpoint", v)) => endpoint = Some(v.to_owned()),
                Some(("region", v)) => v.clone_into(&mut region),
                _ => return Err(syntax()),
            }
        }
        let endpoint = endpoint.ok_or_else(syntax)?;
        if bucket.is_empty() {
            return Err(syntax());
        }
        Ok(Self::S3 {
            bucket: bucket.to_owned(),
            endpoint,
            region,
        })
    }

    /// Opens the store. S3 credentials come from `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY`; a plain-HTTP endpoint is used only with
    /// `allow_insecure_http`, and `s3_ca_file` adds a trusted CA.
    ///
    /// # Errors
    /// The directory cannot be created or the S3 configuration is refused.
    pub fn open(&self, access: Access, cfg: &ValidConfig) -> Result<AnyStore, TargetError> {
        match self {
            Self::Local(dir) => {
                require_dir(access, "store", "--store", dir)?;
                LocalStore::open(dir.clone())
                    .map(AnyStore::from)
                    .map_err(|e| TargetError::Store(e.to_string()))
            }
            Self::S3 {
                bucket,
                endpoint,
                region,
            } => {
                let mut config = S3Config::new(
                    endpoint.clone(),
                    region.clone(),
                    bucket.clone(),
                    S3Credentials::Environment,
                );
                // The flag also covers a plain catalog; S3 takes it only for
                // a plain endpoint, where it means something.
                config.allow_http = cfg.raw.allow_insecure_http && endpoint.starts_with("http://");
                config.ca_file.clone_from(&cfg.raw.s3_ca_file);
                S3Store::new(&config)
                    .map(AnyStore::from)
                    .map_err(|e| TargetError::Store(e.to_string()))
            }
        }
    }

    /// The store id written into descriptors.
    #[must_use]
    pub fn store_id(&self) -> String {
        match self {
            Self::Local(_) => "local".to_owned(),
            Self::S3 { bucket, .. } => format!("s3:{bucket}"),
        }
    }

    /// The S3 endpoint, when there is one.
    #[must_use]
    pub fn endpoint(&self) -> Option<String> {
        match self {
            Self::S3 { endpoint, .. } => Some(endpoint.clone()),
            Self::Local(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_forms() {
        assert_eq!(
            CatalogTarget::parse("embedded:/tmp/c").ok(),
            Some(CatalogTarget::Embedded("/tmp/c".into()))
        );
        assert!(matches!(
            CatalogTarget::parse("http://h:8123"),
            Ok(CatalogTarget::Http(_))
        ));
        assert!(CatalogTarget::parse("embedded:").is_err());
        assert!(CatalogTarget::parse("h:8123").is_err());
    }

    #[test]
    fn store_forms() {
        assert_eq!(
            StoreTarget::parse("local:/tmp/s").ok(),
            Some(StoreTarget::Local("/tmp/s".into()))
        );
        let s3 = StoreTarget::parse("s3://b?endpoint=http://127.0.0.1:9000&region=eu-west-1").ok();
        assert_eq!(
            s3,
            Some(StoreTarget::S3 {
                bucket: "b".into(),
                endpoint: "http://127.0.0.1:9000".into(),
                region: "eu-west-1".into()
            })
        );
        assert!(StoreTarget::parse("s3://b").is_err());
        assert!(StoreTarget::parse("s3://?endpoint=http://x").is_err());
        assert!(StoreTarget::parse("ftp://x").is_err());
    }
}
