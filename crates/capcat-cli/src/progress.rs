//! Progress of long operations: a bar on a terminal, `tracing` lines
//! otherwise.
//!
//! indicatif draws only when stderr is a terminal, so a piped or redirected
//! run shows no bar; the same progress then reaches the log (at `info`, at
//! most every [`LOG_EVERY`]) so an operator tailing a service's output still
//! sees a long drain advance.

use std::time::{Duration, Instant};

use capcat_service::FlushProgress;
use indicatif::{ProgressBar, ProgressStyle};

/// The longest gap between two progress lines in the log.
const LOG_EVERY: Duration = Duration::from_secs(5);

/// A bar of `len` steps labelled `what`.
pub(crate) fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} {per_sec}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

/// A spinner labelled `what`, for work of unknown length.
pub(crate) fn spinner(what: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_message(what.to_owned());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// Shows a flush's progress: the packs sealed before it that are now
/// queryable (or set aside), of all of them.
#[derive(Debug)]
pub(crate) struct FlushProgressView {
    what: &'static str,
    bar: Option<ProgressBar>,
    logged: Option<Instant>,
}

impl FlushProgressView {
    /// A view labelled `what` (the command's name).
    pub(crate) fn new(what: &'static str) -> Self {
        Self {
            what,
            bar: None,
            logged: None,
        }
    }

    /// Records one step of progress.
    pub(crate) fn observe(&mut self, progress: FlushProgress) {
        let (done, total) = (progress.done as u64, progress.total as u64);
        let bar = self.bar.get_or_insert_with(|| bar(total, self.what));
        bar.set_position(done);
        let due = self.logged.is_none_or(|at| at.elapsed() >= LOG_EVERY);
        if due || done == total {
            tracing::info!(done, total, "{}: packs queryable", self.what);
            self.logged = Some(Instant::now());
        }
    }

    /// Removes the bar (the summary line follows it).
    pub(crate) fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
