//! [`Signals`]: how the service's tasks tell each other what happened.

use tokio::sync::{Notify, watch};

/// The three signals between the cycle loop, the reconciler, flush and
/// close. Each is a plain notification; the state they announce lives in
/// the service's `State`.
#[derive(Debug)]
pub(crate) struct Signals {
    /// Bumped after every cycle and every reconcile pass: a flush waits on
    /// it rather than on a cycle, so it returns at its deadline whatever a
    /// cycle is doing.
    progress: watch::Sender<u64>,
    /// Cuts the cycle loop's backoff short (a flush wants a cycle now).
    wake: Notify,
    /// Set once, by close or drop; every task returns at its next await.
    stop: watch::Sender<bool>,
}

impl Signals {
    pub(crate) fn new() -> Self {
        Self {
            progress: watch::channel(0).0,
            wake: Notify::new(),
            stop: watch::channel(false).0,
        }
    }

    /// Announces that a cycle or a reconcile pass ended.
    pub(crate) fn advanced(&self) {
        self.progress.send_modify(|n| *n += 1);
    }

    /// A receiver that sees every later [`Signals::advanced`].
    pub(crate) fn progress(&self) -> watch::Receiver<u64> {
        self.progress.subscribe()
    }

    /// Asks the cycle loop for a cycle now.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Resolves when [`Signals::wake`] is called (or was, since the last
    /// wait: the permit is kept).
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Tells every task to stop, and wakes the cycle loop so it sees it.
    pub(crate) fn stop(&self) {
        self.stop.send_replace(true);
        self.wake.notify_one();
    }

    /// Whether the service was told to stop.
    pub(crate) fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    /// A receiver whose `changed()` resolves when the service is told to
    /// stop.
    pub(crate) fn stop_signal(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }
}
