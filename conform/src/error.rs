//! The kit's one error type.

/// Why the kit could not run a case to a verdict. A driver that answers
/// with a different step is not an error: that is a verdict
/// ([`crate::kit::Difference`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConformError {
    /// The driver command could not be started.
    #[error("could not start the driver `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// What the system reported.
        source: std::io::Error,
    },
    /// Writing to the driver or reading from it failed.
    #[error("talking to the driver failed while {doing}: {source}")]
    Io {
        /// What the kit was doing.
        doing: &'static str,
        /// What the system reported.
        source: std::io::Error,
    },
    /// The driver closed its stdout (it exited or crashed).
    #[error("the driver closed its output while {doing} (did it crash? its stderr is above)")]
    Closed {
        /// What the kit was waiting for.
        doing: &'static str,
    },
    /// The driver did not answer in time.
    #[error("the driver did not answer within {seconds} s while {doing}")]
    Timeout {
        /// The bound waited.
        seconds: u64,
        /// What the kit was waiting for.
        doing: &'static str,
    },
    /// The driver reported that it cannot go on (`{"error": ...}`).
    #[error("the driver gave up: {message}")]
    DriverError {
        /// The driver's message.
        message: String,
    },
    /// A line was not valid JSON, or not a message the protocol defines.
    #[error("malformed protocol message: {what}")]
    BadMessage {
        /// What was wrong.
        what: String,
    },
    /// The driver speaks another protocol version.
    #[error("the driver speaks protocol {driver}; this kit speaks {kit}")]
    Version {
        /// The driver's version.
        driver: u64,
        /// The kit's.
        kit: u64,
    },
    /// A trace of the model's corpus could not be followed: the corpus is
    /// stale or the replay's lifecycle is wrong. A kit defect, never the
    /// driver's.
    #[error("the kit could not replay the model's corpus: {what}")]
    Corpus {
        /// Where and why.
        what: String,
    },
    /// `--case` named no case the kit knows.
    #[error("no case is named `{name}` (`--list` prints them)")]
    UnknownCase {
        /// The name asked for.
        name: String,
    },
}
