//! The catalog, store, spool, prefix and configuration a Python caller
//! gives, resolved as the `capcat` command resolves its flags: the
//! configuration first (a TOML file, a dict, or the defaults), then the
//! explicit arguments over it, then the catalog credentials from the
//! environment (`CAPCAT_CATALOG_USER`, `CAPCAT_CATALOG_PASSWORD`,
//! `CAPCAT_CATALOG_PASSWORD_FILE`) over both, as for the command.

use std::path::PathBuf;

use capcat_clickhouse::Password;
use capcat_service::{ServiceConfig, ValidConfig};
use capcat_targets::{CatalogTarget, StoreTarget};

use crate::errors::Raised;

/// The spool when neither the `spool` argument nor the configuration names
/// one: the `capcat` command's, so both find the same directory.
const DEFAULT_SPOOL: &str = "capcat-data/spool";

/// The configuration as the Python half passes it.
#[derive(Debug)]
pub(crate) enum ConfigText {
    /// The library defaults.
    Default,
    /// A TOML document (a file's contents, or a dict written as TOML).
    Toml(String),
}

/// The configuration the Python half passes: `("default", None)` or
/// `("toml", text)` (a file's contents, or a dict written as TOML).
///
/// # Errors
/// Any other pair: a caller of the native module other than the package.
pub(crate) fn parse_config(kind: &str, text: Option<String>) -> Result<ConfigText, Raised> {
    match (kind, text) {
        ("default", None) => Ok(ConfigText::Default),
        ("toml", Some(text)) => Ok(ConfigText::Toml(text)),
        (kind, _) => Err(Raised::new(
            "ConfigError",
            "ConfigKind",
            format!("config kind {kind:?} with or without text is not one the package passes"),
        )),
    }
}

/// What a service or a reader opens.
#[derive(Debug)]
pub(crate) struct Resolved {
    /// The validated configuration.
    pub(crate) cfg: ValidConfig,
    /// The catalog.
    pub(crate) catalog: CatalogTarget,
    /// The store.
    pub(crate) store: StoreTarget,
}

/// Where a service or reader reads and writes.
#[derive(Debug)]
pub(crate) struct Locations {
    /// `embedded:<path>` or `http(s)://host:port`.
    pub(crate) catalog: String,
    /// `local:<dir>` or `s3://bucket?endpoint=URL[&region=R]`.
    pub(crate) store: String,
    /// The spool directory, when given.
    pub(crate) spool: Option<PathBuf>,
    /// The catalog prefix, when given.
    pub(crate) prefix: Option<String>,
}

fn env(name: &str) -> Result<Option<String>, Raised> {
    match std::env::var(name) {
        Ok(value) => Ok(Some(value)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(Raised::new(
            "ConfigError",
            "NotUnicode",
            format!("the environment variable {name} is not UTF-8"),
        )),
    }
}

/// Resolves `locations` over `config`, naming the lease holder `holder`.
///
/// # Errors
/// A malformed location, a configuration that does not parse or validate.
pub(crate) fn resolve(
    locations: Locations,
    config: ConfigText,
    holder: String,
) -> Result<Resolved, Raised> {
    let mut raw = match config {
        ConfigText::Default => ServiceConfig {
            spool_dir: DEFAULT_SPOOL.into(),
            ..ServiceConfig::default()
        },
        ConfigText::Toml(text) => {
            let mut raw = ServiceConfig::parse_toml(&text)?;
            // A file that names no spool gets the command's default spool,
            // not the library's (`spool`), as `--config` does for the
            // command.
            let names_spool = text
                .parse::<toml::Table>()
                .is_ok_and(|table| table.contains_key("spool_dir"));
            if !names_spool {
                raw.spool_dir = DEFAULT_SPOOL.into();
            }
            raw
        }
    };
    let catalog = CatalogTarget::parse(&locations.catalog)?;
    let store = StoreTarget::parse(&locations.store)?;
    raw.holder = holder;
    if let Some(spool) = locations.spool {
        raw.spool_dir = spool;
    }
    if let Some(prefix) = locations.prefix {
        raw.catalog_prefix = prefix;
    }
    raw.catalog_url = catalog.url();
    raw.store_id = store.store_id();
    raw.s3_endpoint = store.endpoint();
    // As for `--store`: an `http://` endpoint named explicitly is the
    // opt-in to plain HTTP for the store.
    if raw
        .s3_endpoint
        .as_deref()
        .is_some_and(|e| e.starts_with("http://"))
    {
        raw.allow_insecure_http = true;
    }
    if let Some(user) = env("CAPCAT_CATALOG_USER")? {
        raw.catalog_user = Some(user);
    }
    if let Some(password) = env("CAPCAT_CATALOG_PASSWORD")? {
        raw.catalog_password = Some(Password::new(password));
        raw.catalog_password_file = None;
    } else if let Some(file) = env("CAPCAT_CATALOG_PASSWORD_FILE")? {
        raw.catalog_password = None;
        raw.catalog_password_file = Some(PathBuf::from(file));
    }
    Ok(Resolved {
        cfg: raw.validate()?,
        catalog,
        store,
    })
}
