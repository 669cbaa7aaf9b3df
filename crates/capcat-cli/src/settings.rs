//! Where every setting comes from. One rule for every one of them:
//!
//! a flag, else its environment variable, else the configuration file,
//! else the default.
//!
//! The flags are `Option`s so that "not given" is told apart from "given
//! the default value": a default written into a flag would otherwise
//! overwrite what the file says (issue 16: a file's `catalog_url`,
//! `s3_endpoint` and `allow_insecure_http` were silently replaced by the
//! defaults of `--catalog` and `--store`). Keys that have no flag (timeouts,
//! limits, the holder, ...) follow the same rule without its first two
//! steps: the file, else the default.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use capcat_clickhouse::Password;
use capcat_service::{ServiceConfig, ValidConfig};

use crate::{CliError, Common};
use capcat_targets::{CatalogTarget, StoreTarget};

/// The environment variable of `--config`.
pub(crate) const ENV_CONFIG: &str = "CAPCAT_CONFIG";
/// The environment variable of `--catalog`.
pub(crate) const ENV_CATALOG: &str = "CAPCAT_CATALOG";
/// The environment variable of `--store`.
pub(crate) const ENV_STORE: &str = "CAPCAT_STORE";
/// The environment variable of `--prefix`.
pub(crate) const ENV_PREFIX: &str = "CAPCAT_PREFIX";
/// The environment variable of `--spool`.
pub(crate) const ENV_SPOOL: &str = "CAPCAT_SPOOL";
/// The catalog user (config key `catalog_user`). Credentials have no flag:
/// a flag's value shows in `ps` to every user of the machine.
pub(crate) const ENV_CATALOG_USER: &str = "CAPCAT_CATALOG_USER";
/// The catalog password (config key `catalog_password`).
pub(crate) const ENV_CATALOG_PASSWORD: &str = "CAPCAT_CATALOG_PASSWORD";
/// A file holding the catalog password (config key
/// `catalog_password_file`).
pub(crate) const ENV_CATALOG_PASSWORD_FILE: &str = "CAPCAT_CATALOG_PASSWORD_FILE";

/// Where one setting's value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// A command-line flag (named).
    Flag(&'static str),
    /// An environment variable (named).
    Env(&'static str),
    /// The configuration file.
    File,
    /// The default (of the command: `demo` has its own).
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Flag(flag) => write!(f, "flag {flag}"),
            Self::Env(var) => write!(f, "environment {var}"),
            Self::File => f.write_str("config file"),
            Self::Default => f.write_str("default"),
        }
    }
}

/// What a command uses when neither a flag, nor the environment, nor the
/// file sets a value.
#[derive(Clone, Debug)]
pub(crate) struct Defaults {
    /// The catalog, as `--catalog` would say it.
    pub catalog: String,
    /// The store, as `--store` would say it.
    pub store: String,
    /// Every other key (`spool_dir` and `catalog_prefix` included).
    pub base: ServiceConfig,
}

impl Defaults {
    /// The defaults of every command but `demo`: everything under
    /// `capcat-data/` in the working directory.
    pub(crate) fn cli() -> Self {
        Self {
            catalog: "embedded:capcat-data/catalog".to_owned(),
            store: "local:capcat-data/store".to_owned(),
            base: ServiceConfig {
                spool_dir: "capcat-data/spool".into(),
                ..ServiceConfig::default()
            },
        }
    }
}

/// The settings of one command before validation: a command may still set
/// values of its own flags (the demo's `--records`), then validates.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    /// Every service key, resolved.
    pub raw: ServiceConfig,
    /// The catalog.
    pub catalog: CatalogTarget,
    /// The store.
    pub store: StoreTarget,
    /// The configuration file read, if any, and what named it.
    pub file: Option<(PathBuf, Source)>,
    /// Where the catalog came from.
    pub catalog_source: Source,
    /// Where the store came from.
    pub store_source: Source,
    /// Keys set by something other than the file or the default.
    overridden: BTreeMap<&'static str, Source>,
    /// Keys the file sets.
    file_keys: BTreeSet<String>,
}

/// A value of the environment, when set and not empty (an empty variable
/// is how a shell unsets one for a single command).
///
/// # Errors
/// The value is not UTF-8: refused, not skipped, or the setting would be
/// silently ignored.
fn env(var: &'static str) -> Result<Option<String>, CliError> {
    match std::env::var(var) {
        Ok(value) => Ok(Some(value).filter(|v| !v.is_empty())),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(CliError::Other(format!(
            "environment variable {var} is not valid UTF-8"
        ))),
    }
}

/// The flag's value, else the variable's, with where it came from.
fn pick(
    flag: Option<&String>,
    flag_name: &'static str,
    var: &'static str,
) -> Result<Option<(String, Source)>, CliError> {
    Ok(match flag {
        Some(value) => Some((value.clone(), Source::Flag(flag_name))),
        None => env(var)?.map(|value| (value, Source::Env(var))),
    })
}

impl Resolved {
    /// Resolves every setting of `common` over `defaults`.
    ///
    /// # Errors
    /// The file cannot be read or does not parse, a flag or variable does
    /// not parse, or the file names an S3 endpoint but no bucket.
    pub(crate) fn new(common: &Common, defaults: Defaults) -> Result<Self, CliError> {
        let config_flag = common
            .config
            .as_ref()
            .map(|p| (p.clone(), Source::Flag("--config")));
        let file = match config_flag {
            Some(file) => Some(file),
            None => env(ENV_CONFIG)?.map(|p| (p.into(), Source::Env(ENV_CONFIG))),
        };
        let (mut raw, file_keys) = match &file {
            Some((path, _)) => {
                let text = std::fs::read_to_string(path).map_err(|source| CliError::Path {
                    what: "read the configuration file",
                    path: path.clone(),
                    source,
                })?;
                // Parsed whole first: its errors name the line of the file.
                ServiceConfig::parse_toml(&text)?;
                let table = text.parse::<toml::Table>().map_err(|e| {
                    CliError::Config(capcat_service::ConfigError::Parse {
                        detail: e.to_string(),
                    })
                })?;
                let keys = table.keys().cloned().collect::<BTreeSet<_>>();
                // The keys the file leaves out take the command's defaults,
                // not the library's (whose spool is `spool`, not
                // `capcat-data/spool`).
                let raw = overlay(&defaults.base, table)?;
                (raw, keys)
            }
            None => (defaults.base.clone(), BTreeSet::new()),
        };
        let mut overridden = BTreeMap::new();
        if let Some((prefix, source)) = pick(common.prefix.as_ref(), "--prefix", ENV_PREFIX)? {
            raw.catalog_prefix = prefix;
            overridden.insert("catalog_prefix", source);
        }
        let spool = match &common.spool {
            Some(path) => Some((path.clone(), Source::Flag("--spool"))),
            None => env(ENV_SPOOL)?.map(|p| (p.into(), Source::Env(ENV_SPOOL))),
        };
        if let Some((spool, source)) = spool {
            raw.spool_dir = spool;
            overridden.insert("spool_dir", source);
        }

        let (catalog, catalog_source) =
            match pick(common.catalog.as_ref(), "--catalog", ENV_CATALOG)? {
                Some((text, source)) => {
                    let catalog = CatalogTarget::parse(&text)?;
                    raw.catalog_url = catalog.url();
                    overridden.insert("catalog_url", source);
                    (catalog, source)
                }
                None => match &raw.catalog_url {
                    Some(url) if file_keys.contains("catalog_url") => {
                        (CatalogTarget::Http(url.clone()), Source::File)
                    }
                    _ => (CatalogTarget::parse(&defaults.catalog)?, Source::Default),
                },
            };

        if let Some(user) = env(ENV_CATALOG_USER)? {
            raw.catalog_user = Some(user);
            overridden.insert("catalog_user", Source::Env(ENV_CATALOG_USER));
        }
        // A password from the environment replaces the file's, whichever
        // form the file uses; the variable itself beats the file variable.
        let password = match env(ENV_CATALOG_PASSWORD)? {
            Some(password) => Some((Some(Password::new(password)), None, ENV_CATALOG_PASSWORD)),
            None => env(ENV_CATALOG_PASSWORD_FILE)?
                .map(|path| (None, Some(PathBuf::from(path)), ENV_CATALOG_PASSWORD_FILE)),
        };
        if let Some((password, file, var)) = password {
            raw.catalog_password = password;
            raw.catalog_password_file = file;
            overridden.insert("catalog_password", Source::Env(var));
            overridden.insert("catalog_password_file", Source::Env(var));
        }

        let (store, store_source) = match pick(common.store.as_ref(), "--store", ENV_STORE)? {
            Some((text, source)) => {
                let store = StoreTarget::parse(&text)?;
                raw.store_id = store.store_id();
                raw.s3_endpoint = store.endpoint();
                // An `http://` endpoint given on the command line (or in
                // the environment) is the opt-in to plain HTTP.
                raw.allow_insecure_http = raw
                    .s3_endpoint
                    .as_deref()
                    .is_some_and(|e| e.starts_with("http://"));
                for key in ["store_id", "s3_endpoint", "allow_insecure_http"] {
                    overridden.insert(key, source);
                }
                (store, source)
            }
            None => match &raw.s3_endpoint {
                Some(endpoint) => {
                    // The file has no bucket key: the store id the CLI
                    // writes for `--store s3://B?...` is `s3:B`, so the file
                    // says its bucket the same way.
                    let bucket = raw
                        .store_id
                        .strip_prefix("s3:")
                        .filter(|b| !b.is_empty() && file_keys.contains("store_id"))
                        .ok_or_else(|| {
                            CliError::Other(format!(
                                "the configuration file sets s3_endpoint = {endpoint:?} but \
                                 no bucket: set store_id = \"s3:<bucket>\" in it, or pass \
                                 --store s3://<bucket>?endpoint=..."
                            ))
                        })?;
                    (
                        StoreTarget::S3 {
                            bucket: bucket.to_owned(),
                            endpoint: endpoint.clone(),
                            region: capcat_targets::DEFAULT_REGION.to_owned(),
                        },
                        Source::File,
                    )
                }
                None => {
                    let store = StoreTarget::parse(&defaults.store)?;
                    if !file_keys.contains("store_id") {
                        raw.store_id = store.store_id();
                    }
                    (store, Source::Default)
                }
            },
        };
        Ok(Self {
            raw,
            catalog,
            store,
            file,
            catalog_source,
            store_source,
            overridden,
            file_keys,
        })
    }

    /// Where key `key` of the service configuration came from.
    pub(crate) fn source(&self, key: &str) -> Source {
        if let Some(source) = self.overridden.get(key) {
            *source
        } else if self.file_keys.contains(key) {
            Source::File
        } else {
            Source::Default
        }
    }

    /// Validates the resolved values.
    ///
    /// # Errors
    /// The first rule broken, naming its key.
    pub(crate) fn validate(self) -> Result<(ValidConfig, CatalogTarget, StoreTarget), CliError> {
        Ok((self.raw.validate()?, self.catalog, self.store))
    }

    /// Every setting, one a line: `key = value  (source)`.
    pub(crate) fn describe(&self) -> Result<String, CliError> {
        use std::fmt::Write as _;
        let mut out = String::new();
        let file = match &self.file {
            Some((path, source)) => format!("{}  ({source})", path.display()),
            None => format!("none  (neither --config nor {ENV_CONFIG})"),
        };
        // Writing to a String cannot fail.
        let _ = writeln!(out, "config = {file}");
        let _ = writeln!(out, "catalog = {}  ({})", self.catalog, self.catalog_source);
        let _ = writeln!(out, "store = {}  ({})", self.store, self.store_source);
        let fields = match serde_json::to_value(&self.raw) {
            Ok(serde_json::Value::Object(fields)) => fields,
            Ok(_) => serde_json::Map::new(),
            Err(e) => return Err(CliError::Other(format!("settings: {e}"))),
        };
        // JSON has no NaN or infinity and writes them as `null`, which
        // would print a refused `nan` from a file as if it were unset; TOML
        // spells them (`nan`, `inf`), so a float JSON could not write is
        // shown as TOML shows it.
        let spelled = toml::Table::try_from(&self.raw).unwrap_or_default();
        for (key, value) in fields {
            let shown = match (&value, spelled.get(&key)) {
                (serde_json::Value::Null, Some(toml::Value::Float(x))) => toml_float(*x),
                _ => value.to_string(),
            };
            let _ = writeln!(out, "{key} = {shown}  ({})", self.source(&key));
        }
        Ok(out)
    }
}

/// A float as TOML spells it: `nan`, `inf` and `-inf` for the values JSON
/// cannot write.
fn toml_float(x: f64) -> String {
    if x.is_nan() {
        "nan".to_owned()
    } else if x == f64::INFINITY {
        "inf".to_owned()
    } else if x == f64::NEG_INFINITY {
        "-inf".to_owned()
    } else {
        x.to_string()
    }
}

/// `base` with every key the file's `table` sets replaced by the file's
/// value. Merged as TOML tables, so a key added to `ServiceConfig` is
/// covered without a change here.
fn overlay(base: &ServiceConfig, table: toml::Table) -> Result<ServiceConfig, CliError> {
    let parse = |detail: String| CliError::Config(capcat_service::ConfigError::Parse { detail });
    let mut merged = toml::Table::try_from(base).map_err(|e| parse(e.to_string()))?;
    let file_sets_password = table.contains_key("catalog_password");
    merged.extend(table);
    let mut config: ServiceConfig = toml::Value::Table(merged)
        .try_into()
        .map_err(|e: toml::de::Error| parse(e.to_string()))?;
    // A password serializes as `<redacted>`, so the base's own (never set
    // by the CLI's defaults, but a default is free to) is carried over by
    // value rather than through the table.
    if !file_sets_password {
        config.catalog_password.clone_from(&base.catalog_password);
    }
    Ok(config)
}
