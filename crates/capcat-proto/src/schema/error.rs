//! Why `ensure_schema` did not complete.

use crate::machine::Failure;
use crate::schema::guard::Refusal;

/// Why `ensure_schema` did not complete.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The guard refused the catalog. The refusal says what the server
    /// holds and the instruction that repairs it; nothing was created.
    #[error("{0}")]
    Refused(Box<Refusal>),
    /// A statement failed. DDL already issued stays on the server; every
    /// create is idempotent, so running `ensure_schema` again resumes.
    #[error("schema statement {statement} failed: {failure}")]
    Statement {
        /// The statement's name.
        statement: &'static str,
        /// What the transport or the server reported.
        failure: Failure,
    },
    /// A probe returned rows of the wrong shape.
    #[error("schema statement {statement} returned malformed rows: {message}")]
    Malformed {
        /// The statement's name.
        statement: &'static str,
        /// What did not match.
        message: String,
    },
}
