//! [`Embedded`]: statements run on libchdb in this process (capcat-chdb).

use std::path::Path;
use std::time::Instant;

use capcat_chdb::{ChdbError, Engine, Request};
use capcat_proto::{Expect, Failure, InsertData, Rows, Statement};

use super::decode::{RESULT_FORMAT, decode_rows};
use super::exception::failure_from_exception;
use super::{BoxFuture, Transport, check_insert_with_data};

/// The embedded engine as a [`Transport`].
///
/// Each statement takes a connection of its own from the engine's pool, so
/// independent statements (two publishers, a reader beside an indexer) run
/// in parallel; the engine call blocks, so it runs on tokio's blocking pool.
#[derive(Clone, Debug)]
pub struct Embedded {
    engine: Engine,
}

impl Embedded {
    /// A transport over an engine the caller already opened (libchdb serves
    /// one data path per process: share one [`Engine`] between transports).
    pub fn new(engine: Engine) -> Self {
        Self { engine }
    }

    /// Opens (or joins) the engine on `data_path`.
    pub fn open(data_path: impl AsRef<Path>) -> Result<Self, ChdbError> {
        Engine::open(data_path).map(Self::new)
    }

    /// The engine underneath.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

/// The capcat-chdb request for `stmt`: the SQL unchanged (an INSERT with
/// data has its `FORMAT` clause split off and its data attached, which is
/// how libchdb takes data, with [`InsertData::SETTINGS`]), every parameter
/// in its text form, the statement's settings, and the strict result
/// format. Public so a harness that runs statements on an engine of its own
/// (the trace replay, in a database per trace) builds them exactly as this
/// transport does.
///
/// # Errors
/// [`ChdbError::InvalidInput`] when the statement carries data but its text
/// does not end in `FORMAT <name>`.
pub fn request_for(stmt: &Statement) -> Result<Request, ChdbError> {
    let format = match stmt.expect {
        Expect::Rows(_) => RESULT_FORMAT,
        Expect::Nothing => "TabSeparated",
    };
    let base = match &stmt.data {
        None => Request::new(stmt.sql.clone()),
        Some(data) => InsertData::SETTINGS.iter().fold(
            Request::insert(&stmt.sql, data.to_bytes())?,
            |r, (name, value)| r.setting(*name, *value),
        ),
    };
    let request = stmt.params.iter().fold(base, |r, (name, value)| {
        r.param(name.clone(), value.to_text())
    });
    Ok(request
        .select_sequential_consistency(stmt.settings.select_sequential_consistency)
        .max_execution_time_s(stmt.settings.max_execution_time_s)
        .format(format))
}

fn failure_from_chdb(error: ChdbError) -> Failure {
    match error {
        ChdbError::Query { code, message, .. } => failure_from_exception(Some(code), &message),
        ChdbError::PoolTimeout { .. } => Failure::Timeout,
        other => Failure::Transport {
            message: other.to_string(),
        },
    }
}

impl Transport for Embedded {
    fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
        Box::pin(async move {
            check_insert_with_data(stmt)?;
            let request = request_for(stmt).map_err(failure_from_chdb)?;
            let engine = self.engine.clone();
            let started = Instant::now();
            let output = tokio::task::spawn_blocking(move || engine.execute(&request))
                .await
                .map_err(|join| Failure::Transport {
                    message: format!("the blocking engine call did not complete: {join}"),
                })?
                .map_err(failure_from_chdb);
            let result = output.and_then(|bytes| match &stmt.expect {
                Expect::Nothing => Ok(Rows::empty()),
                Expect::Rows(columns) => decode_rows(columns, &bytes),
            });
            match &result {
                Ok(rows) => tracing::debug!(
                    statement = stmt.name,
                    rows = rows.0.len(),
                    elapsed_us = started.elapsed().as_micros(),
                    "embedded statement ran"
                ),
                Err(failure) => tracing::debug!(
                    statement = stmt.name,
                    %failure,
                    elapsed_us = started.elapsed().as_micros(),
                    "embedded statement failed"
                ),
            }
            result
        })
    }

    fn kind(&self) -> &'static str {
        "embedded"
    }
}
