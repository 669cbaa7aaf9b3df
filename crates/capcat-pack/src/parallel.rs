//! Spreading a pack's hashing over a few threads.
//!
//! Seal and verify spend most of their time in SHA-256: one digest per
//! payload and one over the header. Each digest is sequential, but digests
//! of different payloads are independent. So a large pack's records are cut
//! into jobs, runs of whole records of about [`JOB_BYTES`] each, which a few
//! threads share out ([`share`]) while the caller's thread does the work
//! that must be done in order (a seal writes the file and hashes its header
//! as the payload digests come in); an open also hashes its header on a second
//! thread while it parses it ([`both`]). Every digest and every byte written
//! is the same whatever the number of threads; only the time changes.
//!
//! The threads are scoped: they end before seal or open returns, so a call
//! holds no thread after it and a panic in one reaches the caller. When the
//! system refuses a thread, the threads there are do its work.

use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};
use std::thread::{Builder, Scope, ScopedJoinHandle};

/// The most threads one seal or one open uses, the caller's included. A
/// capture engine seals and verifies packs beside its own work, so one call
/// takes a few cores, not the machine.
pub(crate) const MAX_THREADS: usize = 4;

/// The fewest bytes worth hashing on a thread of their own. Starting and
/// joining a thread costs tens of microseconds; hashing 1 MiB at 2 GB/s
/// takes half a millisecond, so a smaller run is hashed where it is.
pub(crate) const MIN_BYTES_PER_THREAD: u64 = 1 << 20;

/// How many threads hash `bytes` bytes: one per [`MIN_BYTES_PER_THREAD`],
/// at most the cores this process may use and at most [`MAX_THREADS`].
pub(crate) fn threads_for(bytes: u64) -> usize {
    let by_size = usize::try_from(bytes / MIN_BYTES_PER_THREAD).unwrap_or(usize::MAX);
    available().min(by_size).max(1)
}

/// The cores this process may use, capped at [`MAX_THREADS`]. Asked once:
/// the answer reads the scheduler's affinity and the cgroup's quota.
fn available() -> usize {
    static AVAILABLE: OnceLock<usize> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, NonZeroUsize::get)
            .min(MAX_THREADS)
    })
}

/// Cuts items of the given byte lengths, in order, into at most `runs`
/// consecutive runs of about equal bytes. The runs cover every item once,
/// in order. There is always at least one run, and only an empty list of
/// items gives an empty run (its only one).
pub(crate) fn runs_by_bytes(lengths: &[u64], runs: usize) -> Vec<Range<usize>> {
    let total: u64 = lengths.iter().sum();
    let runs = runs.clamp(1, lengths.len().max(1));
    let mut out = Vec::with_capacity(runs);
    let mut start = 0;
    let mut sum = 0u128;
    for (index, &length) in lengths.iter().enumerate() {
        sum += u128::from(length);
        // Run k (from 0) closes once the bytes so far reach its share,
        // k + 1 runs' worth of the total; the last run takes the rest.
        let share = u128::from(total) * (out.len() as u128 + 1) / runs as u128;
        if out.len() + 1 < runs && sum >= share {
            out.push(start..index + 1);
            start = index + 1;
        }
    }
    if start < lengths.len() || out.is_empty() {
        out.push(start..lengths.len());
    }
    out
}

/// How many jobs to cut `bytes` bytes into for `threads` threads: one job
/// when there is one thread (no cut to join), otherwise one per
/// [`JOB_BYTES`], and at least one per thread.
pub(crate) fn jobs_for(bytes: u64, threads: usize) -> usize {
    if threads <= 1 {
        return 1;
    }
    let by_size = usize::try_from(bytes.div_ceil(JOB_BYTES)).unwrap_or(usize::MAX);
    by_size.max(threads)
}

/// The bytes of one job. Threads take jobs one at a time, so one that
/// started late or runs slowly takes fewer; a thread waits for the others
/// at most one job's time (a quarter of a millisecond at 2 GB/s). Each job
/// costs a few microseconds more to join (its CRC run), so a job is not
/// smaller.
pub(crate) const JOB_BYTES: u64 = 512 << 10;

/// Jobs `0..count` shared out between the caller's thread and up to
/// `threads - 1` scoped threads. The scoped threads start on the jobs at
/// once, taking the next job not yet taken until none is left. The caller's
/// thread runs `caller`, which does its own work and takes each result it
/// needs with [`Jobs::take`], doing jobs itself while it waits. Each job is
/// done once. Jobs nobody took by the time `caller` returns (it returned
/// early, on an error) are not done.
pub(crate) fn share<B, R>(
    threads: usize,
    count: usize,
    job: impl Fn(usize) -> R + Sync,
    caller: impl FnOnce(&Jobs<'_, R>) -> B,
) -> B
where
    R: Send,
{
    let jobs = Jobs {
        job: &job,
        count,
        next: AtomicUsize::new(0),
        state: Mutex::new(Done {
            results: (0..count).map(|_| Slot::Waiting).collect(),
            panicked: false,
        }),
        changed: Condvar::new(),
        left: Mutex::new(Vec::new()),
    };
    let jobs = &jobs;
    std::thread::scope(|scope| {
        // A refused thread is simply not there: the others, the caller's
        // included, take its jobs.
        let helpers: Vec<_> = (1..threads.min(count))
            .filter_map(|_| {
                spawn(scope, move || {
                    while jobs.do_one() {}
                    jobs.drop_left();
                })
            })
            .collect();
        let out = caller(jobs);
        // No job is taken after this: the helpers end with the job in hand.
        jobs.next.fetch_max(count, Ordering::Relaxed);
        for helper in helpers {
            joined(helper);
        }
        out
    })
}

/// The jobs of one [`share`], and their results as they are done.
pub(crate) struct Jobs<'j, R> {
    job: &'j (dyn Fn(usize) -> R + Sync),
    count: usize,
    /// The next job to take; `count` or more when none is left.
    next: AtomicUsize,
    state: Mutex<Done<R>>,
    /// Signalled when a job is done, or panicked.
    changed: Condvar,
    /// Values the caller is done with, for a helper to drop.
    left: Mutex<Vec<Box<dyn Send + 'j>>>,
}

struct Done<R> {
    results: Vec<Slot<R>>,
    /// A job panicked: the job's result will never come.
    panicked: bool,
}

enum Slot<R> {
    Waiting,
    Done(R),
    Taken,
}

impl<'j, R> Jobs<'j, R> {
    /// Job `index`'s result, which only one caller may take. Until it is
    /// done, this thread does jobs nobody has taken yet, and then waits for
    /// the thread doing it.
    ///
    /// # Panics
    /// When the job panicked on another thread, or its result was taken.
    pub(crate) fn take(&self, index: usize) -> R {
        assert!(index < self.count, "job {index} of {}", self.count);
        loop {
            let mut done = self.lock();
            match std::mem::replace(&mut done.results[index], Slot::Taken) {
                Slot::Done(result) => return result,
                Slot::Taken => unreachable!("the result of job {index} was taken twice"),
                Slot::Waiting => done.results[index] = Slot::Waiting,
            }
            drop(done);
            if self.do_one() {
                continue;
            }
            // Every job is taken, this one by another thread, which wakes
            // this one when it is done.
            let mut done = self.lock();
            while matches!(done.results[index], Slot::Waiting) {
                assert!(!done.panicked, "a job panicked on another thread");
                done = self
                    .changed
                    .wait(done)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
    }

    /// Leaves `value` for a helper to drop once no job is left, so that
    /// freeing it (many small allocations, say) is off the caller's path.
    /// A value left after the helpers have ended is dropped when the
    /// [`share`] returns.
    pub(crate) fn leave(&self, value: impl Send + 'j) {
        self.left
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Box::new(value));
    }

    /// Drops what the caller has left so far, outside the lock.
    fn drop_left(&self) {
        let left = std::mem::take(&mut *self.left.lock().unwrap_or_else(PoisonError::into_inner));
        drop(left);
    }

    /// Takes the next job nobody has taken and does it on this thread.
    /// False when none is left.
    fn do_one(&self) -> bool {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        if index >= self.count {
            return false;
        }
        let watch = PanicWatch(self);
        let result = (self.job)(index);
        std::mem::forget(watch);
        self.lock().results[index] = Slot::Done(result);
        self.changed.notify_all();
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Done<R>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Dropped only when a job panics (a job that returns forgets it): tells
/// the waiting threads that the job's result will never come.
struct PanicWatch<'a, 'j, R>(&'a Jobs<'j, R>);

impl<R> Drop for PanicWatch<'_, '_, R> {
    fn drop(&mut self) {
        self.0.lock().panicked = true;
        self.0.changed.notify_all();
    }
}

/// `first` on the caller's thread while `second` runs on a scoped thread
/// (or afterwards on the caller's thread, when the system refuses one).
pub(crate) fn both<A, B>(first: impl FnOnce() -> A, second: impl FnOnce() -> B + Send) -> (A, B)
where
    B: Send,
{
    let slot = Mutex::new(Some(second));
    let run = || take_slot(&slot).map(|second| second());
    let run = &run;
    std::thread::scope(|scope| {
        let thread = spawn(scope, run);
        let first = first();
        let second = match thread.and_then(joined).or_else(run) {
            Some(second) => second,
            // The thread took the work, or it is still in its slot.
            None => unreachable!("the second work was taken but not done"),
        };
        (first, second)
    })
}

const THREAD_NAME: &str = "capcat-hash";

/// `work` on a scoped thread, or `None` when the system refuses one.
fn spawn<'scope, R: Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    work: impl FnOnce() -> R + Send + 'scope,
) -> Option<ScopedJoinHandle<'scope, R>> {
    Builder::new()
        .name(THREAD_NAME.to_owned())
        .spawn_scoped(scope, work)
        .ok()
}

/// What the thread returned; its panic, if it panicked, goes on in the
/// caller.
fn joined<R>(handle: ScopedJoinHandle<'_, R>) -> R {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The slot's content, leaving it empty.
fn take_slot<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

#[cfg(test)]
mod tests;
