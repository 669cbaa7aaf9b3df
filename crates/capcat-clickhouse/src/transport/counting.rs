//! [`Counting`]: a transport wrapper that counts statements by name, for
//! benchmarks and for tests that pin how many round trips an operation costs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capcat_proto::{Failure, Rows, Statement};

use super::{BoxFuture, Transport};

/// How many statements of each name ran (successful or not).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatementCount {
    /// Count by statement name.
    pub by_name: BTreeMap<&'static str, u64>,
    /// Time spent in each statement name (from send to decoded rows).
    pub elapsed_by_name: BTreeMap<&'static str, Duration>,
}

impl StatementCount {
    /// Every statement counted.
    pub fn total(&self) -> u64 {
        self.by_name.values().sum()
    }
}

/// Wraps a transport and counts what passes through it.
#[derive(Clone, Debug)]
pub struct Counting<T> {
    inner: T,
    counts: Arc<Mutex<StatementCount>>,
}

impl<T> Counting<T> {
    /// Wraps `inner` with zero counts.
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            counts: Arc::new(Mutex::new(StatementCount::default())),
        }
    }

    /// The counts so far, and resets them.
    pub fn take(&self) -> StatementCount {
        std::mem::take(&mut *self.counts.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl<T: Transport> Transport for Counting<T> {
    fn execute<'a>(&'a self, stmt: &'a Statement) -> BoxFuture<'a, Result<Rows, Failure>> {
        Box::pin(async move {
            let started = Instant::now();
            let result = self.inner.execute(stmt).await;
            let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
            *counts.by_name.entry(stmt.name).or_default() += 1;
            *counts.elapsed_by_name.entry(stmt.name).or_default() += started.elapsed();
            result
        })
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn check_access(&self) -> BoxFuture<'_, Result<(), super::AccessError>> {
        self.inner.check_access()
    }
}
