//! The engine's error type, and the parser of ClickHouse exception text.

use std::path::PathBuf;

/// Everything that can go wrong between a caller and libchdb.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChdbError {
    /// The library could not be loaded, or lacks a symbol this crate needs.
    #[error(
        "cannot load libchdb from {path}: {reason} (run `cargo xtask fetch-engine` and set CAPCAT_LIBCHDB)"
    )]
    Load {
        /// The path that was tried (`CAPCAT_LIBCHDB`, else the cache default).
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// No library path could be determined: `CAPCAT_LIBCHDB`,
    /// `CAPCAT_CACHE_DIR` and `HOME` are all unset.
    #[error(
        "no libchdb path: set CAPCAT_LIBCHDB (or CAPCAT_CACHE_DIR / HOME for the cache default)"
    )]
    NoLibraryPath,
    /// The data directory could not be created or resolved.
    #[error("data path {path}: {source}")]
    DataPath {
        /// The path given to [`crate::Engine::open`].
        path: PathBuf,
        /// The file system error.
        #[source]
        source: std::io::Error,
    },
    /// This process already runs the engine on another data path. libchdb
    /// serves one data path per process; close every [`crate::Engine`] of
    /// the other path first.
    #[error(
        "this process already has the engine open on {open}; cannot open {requested} too (libchdb serves one data path per process)"
    )]
    OtherPathOpen {
        /// The path the engine of this process serves.
        open: PathBuf,
        /// The path that was asked for.
        requested: PathBuf,
    },
    /// Another process holds the data path (its `status` file is locked).
    /// ClickHouse allows one server per data directory.
    #[error(
        "data path {path} is in use by another process (its status file is locked); stop that process or use another path"
    )]
    LockedByAnotherProcess {
        /// The data path.
        path: PathBuf,
    },
    /// `chdb_connect` returned no connection. libchdb writes its reason to
    /// the process's stderr only, so it is not available here.
    #[error("libchdb refused a connection to {path} (its reason is on stderr)")]
    Connect {
        /// The data path.
        path: PathBuf,
    },
    /// The engine ran the statement and raised a ClickHouse exception.
    #[error("ClickHouse error {code} ({name}): {message}")]
    Query {
        /// ClickHouse's numeric error code, e.g. 60 for UNKNOWN_TABLE.
        code: u32,
        /// ClickHouse's symbolic error name, e.g. `UNKNOWN_TABLE`; empty
        /// when the text carried none.
        name: String,
        /// The whole exception text as the engine gave it.
        message: String,
    },
    /// A caller-provided string cannot be passed: a setting or parameter
    /// name that is not an identifier, or a database name with a NUL.
    #[error("invalid {what}: {value:?}")]
    InvalidInput {
        /// Which input was refused, e.g. "setting name".
        what: &'static str,
        /// The refused value.
        value: String,
    },
    /// libchdb returned a null result handle (out of memory or a closed
    /// connection).
    #[error("libchdb returned no result for the statement")]
    NullResult,
    /// The blocking task that ran the statement panicked or was cancelled
    /// (only from [`crate::Engine::execute_async`]).
    #[error("the engine task failed: {reason}")]
    TaskFailed {
        /// tokio's description of the failure.
        reason: String,
    },
    /// Every connection of the pool stayed busy for the whole acquire timeout.
    #[error("no engine connection became free within {waited_ms} ms ({max} in use)")]
    PoolTimeout {
        /// How long the caller waited, in milliseconds.
        waited_ms: u64,
        /// The pool's size.
        max: usize,
    },
    /// The process is exiting and the engine was stopped for it (see
    /// `docs/embedded-engine.md`, "Exiting"); libchdb cannot be started again
    /// in this process. Only a thread still issuing statements while the
    /// process exits sees this.
    #[error("the embedded engine was stopped because the process is exiting")]
    Stopped,
}

impl ChdbError {
    /// ClickHouse's exception code, when the engine raised one.
    pub fn code(&self) -> Option<u32> {
        match self {
            Self::Query { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Builds [`ChdbError::Query`] from the text of a ClickHouse exception.
    pub(crate) fn from_exception_text(text: &str) -> Self {
        let parsed = parse_exception(text);
        Self::Query {
            code: parsed.code,
            name: parsed.name,
            message: text.trim_end().to_owned(),
        }
    }
}

/// The parts of `Code: NNN. DB::Exception: <message> (NAME) (version ...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedException {
    /// The number after `Code:`; [`UNKNOWN_EXCEPTION`] when the text has none.
    pub(crate) code: u32,
    /// The symbolic name in the last parenthesised upper-case word, if any.
    pub(crate) name: String,
}

/// ClickHouse's own code for an exception it could not classify; used when
/// the engine's text does not start with `Code: NNN.`.
pub(crate) const UNKNOWN_EXCEPTION: u32 = 1002;

/// Parses an exception text. Never fails: text without a code gets
/// [`UNKNOWN_EXCEPTION`] so a caller always has a number to send on.
pub(crate) fn parse_exception(text: &str) -> ParsedException {
    let text = text.trim();
    let code = text
        .find("Code: ")
        .map(|at| &text[at + "Code: ".len()..])
        .and_then(|rest| {
            let digits: &str = &rest[..rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len())];
            digits.parse::<u32>().ok()
        })
        .unwrap_or(UNKNOWN_EXCEPTION);
    // Strip a trailing `(version ...)` clause, then take the last `(NAME)`.
    let mut body = text;
    if let Some(at) = body.rfind(" (version ") {
        body = body[..at].trim_end();
    }
    let name = body
        .strip_suffix(')')
        .and_then(|rest| rest.rfind('(').map(|open| &rest[open + 1..]))
        .filter(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .unwrap_or_default()
        .to_owned();
    ParsedException { code, name }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_code_and_name_as_libchdb_writes_them() {
        // Verbatim from libchdb 26.7.3.
        let text = "Code: 46. DB::Exception: Function with name `nosuchfunc` does not exist. In scope SELECT nosuchfunc(). (UNKNOWN_FUNCTION)";
        assert_eq!(
            parse_exception(text),
            ParsedException {
                code: 46,
                name: "UNKNOWN_FUNCTION".into()
            }
        );
    }

    #[test]
    fn parses_code_and_name_with_a_server_version_suffix() {
        let text = "Code: 159. DB::Exception: Timeout exceeded: elapsed 1.2 seconds, maximum: 0.1. (TIMEOUT_EXCEEDED) (version 24.10.1.2812 (official build))\n";
        assert_eq!(
            parse_exception(text),
            ParsedException {
                code: 159,
                name: "TIMEOUT_EXCEEDED".into()
            }
        );
    }

    #[test]
    fn text_without_a_code_is_unknown_not_a_panic() {
        for text in [
            "",
            "boom",
            "Code: ",
            "Code: x1.",
            "(lower)",
            "Code: 99999999999999.",
        ] {
            let parsed = parse_exception(text);
            assert_eq!(parsed.code, UNKNOWN_EXCEPTION, "{text:?}");
            assert_eq!(parsed.name, "", "{text:?}");
        }
    }

    #[test]
    fn message_parentheses_are_not_taken_for_the_name() {
        let parsed = parse_exception("Code: 62. DB::Exception: Syntax error (at foo)");
        assert_eq!(parsed.code, 62);
        assert_eq!(parsed.name, "");
    }
}
