//! The `poll`/`handle` contract every protocol machine implements.

use crate::statement::{Rows, Statement};

/// What a machine wants next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step<T> {
    /// Execute this statement and hand back [`Input::Rows`] or [`Input::Failed`].
    Execute(Statement),
    /// Draw a uniform integer in `0..below` and hand it back as [`Input::Drawn`].
    ///
    /// This is how jitter enters a machine without the machine owning a
    /// random number generator: the driver draws, the model checker
    /// enumerates every value.
    Draw {
        /// Exclusive upper bound of the draw; always at least 1.
        below: u64,
    },
    /// The operation is over.
    Done(T),
}

/// What the driver hands back after a [`Step`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    /// The statement ran; these are its rows (empty for DDL and INSERT).
    Rows(Rows),
    /// The statement did not run to completion, or its outcome is unknown.
    Failed(Failure),
    /// The value drawn for a [`Step::Draw`].
    Drawn(u64),
}

/// Why a statement produced no rows.
///
/// A failure is *ambiguous* unless stated otherwise: an INSERT that timed out
/// may still land its rows later, so machines must never treat a failure as
/// proof that nothing was written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failure {
    /// The server answered with an exception.
    Server {
        /// ClickHouse's numeric exception code (`X-ClickHouse-Exception-Code`).
        code: u32,
        /// The exception text, as the server sent it.
        message: String,
    },
    /// The statement hit its `max_execution_time` or the client's timeout.
    Timeout,
    /// The connection failed (refused, reset, closed mid-response).
    Transport {
        /// What the transport reported.
        message: String,
    },
    /// The server answered, but not with the rows the statement expects.
    Malformed {
        /// What did not match.
        message: String,
    },
}

impl Failure {
    /// Whether the statement may still be running on the server: the
    /// client gave up (a timeout) or lost the connection. A server
    /// exception or a malformed answer means the server finished with it.
    /// (A `Timeout` may also be the server's own cap firing; treating it as
    /// still running only makes the client wait a little longer.)
    pub fn leaves_statement_running(&self) -> bool {
        matches!(self, Self::Timeout | Self::Transport { .. })
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Server { code, message } => write!(f, "server exception {code}: {message}"),
            Self::Timeout => f.write_str("statement timed out"),
            Self::Transport { message } => write!(f, "transport failure: {message}"),
            Self::Malformed { message } => write!(f, "malformed result: {message}"),
        }
    }
}

/// A protocol operation as a sans-IO state machine.
///
/// Contract: after [`Machine::poll`] returns [`Step::Execute`] or
/// [`Step::Draw`], the driver calls [`Machine::handle`] exactly once before
/// polling again. Once `poll` returns [`Step::Done`] it keeps returning the
/// same outcome. Every machine terminates within its documented attempt
/// bound whatever inputs it is given.
pub trait Machine {
    /// The typed result of the operation.
    type Outcome;
    /// The next thing the machine needs, or its outcome.
    fn poll(&mut self) -> Step<Self::Outcome>;
    /// The result of the last [`Step::Execute`] or [`Step::Draw`].
    fn handle(&mut self, input: Input);
}
