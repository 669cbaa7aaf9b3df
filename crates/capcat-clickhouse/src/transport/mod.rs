//! [`Transport`]: how a [`Statement`] reaches a ClickHouse engine and its rows
//! come back.
//!
//! A transport makes no protocol decision. It sends the statement's SQL text
//! unchanged, binds every [`capcat_proto::Param`] as a server-side query
//! parameter (`param_<name>` = [`capcat_proto::Param::to_text`]; values never
//! enter SQL text), applies the statement's [`capcat_proto::Settings`], and
//! decodes the result strictly against [`capcat_proto::Expect`]: a column of
//! another name, a row of another width or a value that does not parse as its
//! declared type is [`Failure::Malformed`], never a guess.
//!
//! Two implementations: [`Embedded`] (libchdb in this process, through
//! capcat-chdb) and [`Http`] (a ClickHouse server, or capcat-chdb's HTTP
//! front, through the `clickhouse` crate).

mod access;
mod counting;
mod decode;
mod embedded;
mod exception;
mod http;
mod password;
mod tls;

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;

use capcat_proto::{Expect, Failure, Rows, Statement};

pub use access::{AUTHENTICATION_CODES, AccessError};
pub use counting::{Counting, StatementCount};
pub use decode::{RESULT_FORMAT, decode_rows};
pub use embedded::{Embedded, request_for};
pub use exception::{TIMEOUT_EXCEEDED, failure_from_exception};
pub use http::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT, Http, HttpError, HttpOptions};
pub use password::{Password, REDACTED};

/// A boxed, sendable future: what [`Transport::execute`] returns, so the
/// trait stays object safe (`Arc<dyn Transport>`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs one protocol statement on a ClickHouse engine.
///
/// Contract: `Ok` carries the rows decoded per `stmt.expect` (empty for
/// [`capcat_proto::Expect::Nothing`]); `Err` is a [`Failure`] whose effect
/// is unknown unless the server said otherwise (an INSERT that timed out may
/// still land). Implementations never retry: retrying is a protocol decision.
pub trait Transport: Send + Sync + Debug {
    /// Executes `stmt` and decodes its rows.
    fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>>;

    /// A short name for logs ("embedded", "http").
    fn kind(&self) -> &'static str;

    /// Whether the server accepts this transport at all (its certificate,
    /// the credentials), with the reason when it does not. An in-process
    /// engine has nothing to refuse.
    fn check_access(&self) -> BoxFuture<'_, Result<(), AccessError>> {
        Box::pin(async { Ok(()) })
    }
}

impl<T: Transport + ?Sized> Transport for std::sync::Arc<T> {
    fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
        (**self).execute(stmt)
    }

    fn kind(&self) -> &'static str {
        (**self).kind()
    }

    fn check_access(&self) -> BoxFuture<'_, Result<(), AccessError>> {
        (**self).check_access()
    }
}

/// Refuses a statement with data that also has parameters or expects rows:
/// an INSERT's data is its whole input and it returns nothing, so either
/// would be dropped without a word. Both transports check it before they
/// send anything.
pub(crate) fn check_insert_with_data(stmt: &Statement) -> Result<(), Failure> {
    if stmt.data.is_some() && (!stmt.params.is_empty() || stmt.expect != Expect::Nothing) {
        return Err(Failure::Malformed {
            message: format!(
                "{}: an INSERT with data takes no parameters and returns no rows",
                stmt.name
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use capcat_proto::{InsertData, Param, Settings};

    use super::*;

    fn insert(params: BTreeMap<String, Param>, expect: Expect) -> Statement {
        Statement {
            name: "t.insert",
            sql: "INSERT INTO t (a) FORMAT RowBinary".to_owned(),
            params,
            settings: Settings::default(),
            expect,
            data: Some(InsertData::Descriptors(Vec::new().into())),
        }
    }

    #[test]
    fn an_insert_with_data_takes_no_parameters_and_returns_no_rows() {
        assert_eq!(
            check_insert_with_data(&insert(BTreeMap::new(), Expect::Nothing)),
            Ok(())
        );
        let with_param = BTreeMap::from([("v".to_owned(), Param::UInt64(1))]);
        for refused in [
            insert(with_param, Expect::Nothing),
            insert(BTreeMap::new(), Expect::Rows(Vec::new())),
        ] {
            assert!(matches!(
                check_insert_with_data(&refused),
                Err(Failure::Malformed { .. })
            ));
        }
        let mut plain = insert(
            BTreeMap::from([("v".to_owned(), Param::UInt64(1))]),
            Expect::Nothing,
        );
        plain.data = None;
        assert_eq!(check_insert_with_data(&plain), Ok(()));
    }
}
