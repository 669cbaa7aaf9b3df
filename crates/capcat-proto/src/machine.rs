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

impl Input {
    /// What this input is, for error messages: "rows", "a failure" or "a
    /// draw".
    pub fn describe(&self) -> &'static str {
        match self {
            Input::Rows(_) => "rows",
            Input::Failed(_) => "a failure",
            Input::Drawn(_) => "a draw",
        }
    }
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

impl Failure {
    /// The failure a machine that asked for a statement's result reports
    /// when it is handed `input` of another kind (a draw).
    pub fn unasked(input: &Input) -> Self {
        Self::Malformed {
            message: format!(
                "{} was handed to a machine that asked for a statement",
                input.describe()
            ),
        }
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
/// A machine has two methods, called in a fixed order until it is done:
///
/// 1. [`Machine::poll`] says what the machine needs next: a statement to
///    execute ([`Step::Execute`]), a jitter value to draw ([`Step::Draw`]),
///    or nothing more, with its outcome ([`Step::Done`]).
/// 2. After `Execute` or `Draw`, the driver calls [`Machine::handle`]
///    exactly once with the answer ([`Input::Rows`], [`Input::Failed`] or
///    [`Input::Drawn`]) before it polls again.
///
/// ```
/// use capcat_proto::{Allocate, Config, Input, Machine, Rows, Step, Tables, Value};
///
/// let mut allocate = Allocate::new(Tables::new("t").unwrap(), Config::default(), uuid::Uuid::nil());
/// let outcome = loop {
///     match allocate.poll() {
///         // A real driver runs the statement on the catalog; this one
///         // answers as an empty catalog would.
///         Step::Execute(stmt) => allocate.handle(Input::Rows(match stmt.name {
///             "allocate.read_head" => Rows(vec![vec![Value::UInt64(0)]]),
///             "allocate.read_claims" => Rows(vec![vec![Value::Uuid(uuid::Uuid::nil())]]),
///             _ => Rows::empty(),
///         })),
///         Step::Draw { below } => allocate.handle(Input::Drawn(below - 1)),
///         Step::Done(outcome) => break outcome,
///     }
/// };
/// assert_eq!(outcome, Ok(1));
/// ```
///
/// Contract: once `poll` returns [`Step::Done`] it keeps returning the same
/// outcome, and `handle` ignores anything it is given. An input of the
/// wrong kind (a draw where a statement's result was asked for) ends the
/// machine with a typed error, never a panic. Every machine terminates
/// within its documented attempt bound whatever inputs it is given, and
/// consumes its state by value on every `handle`: no step copies it.
pub trait Machine {
    /// The typed result of the operation.
    type Outcome;
    /// The next thing the machine needs, or its outcome.
    fn poll(&mut self) -> Step<Self::Outcome>;
    /// The result of the last [`Step::Execute`] or [`Step::Draw`].
    fn handle(&mut self, input: Input);
}
