use crate::machine::Failure;

/// Why no version was allocated.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum AllocateError {
    /// Every attempt met another claimant at its version.
    #[error(
        "version allocation contested at every attempt ({attempts} attempts, last version {last_version})"
    )]
    Exhausted {
        /// Attempts made (the configured bound).
        attempts: u32,
        /// The last version claimed.
        last_version: u64,
    },
    /// A statement failed; a claim row may still land (inert either way).
    #[error("allocation statement {statement} failed: {failure}")]
    Statement {
        /// The statement's stable name.
        statement: &'static str,
        /// What the driver reported.
        failure: Failure,
    },
    /// A statement returned rows of the wrong shape.
    #[error("allocation statement {statement} returned an unreadable row: {detail}")]
    Malformed {
        /// The statement's stable name.
        statement: &'static str,
        /// What did not match.
        detail: String,
    },
    /// The driver handed back an input the machine did not ask for.
    #[error("the driver answered {got} where the allocator expected {expected}")]
    UnexpectedInput {
        /// What the machine asked for.
        expected: &'static str,
        /// What it got.
        got: &'static str,
    },
}
