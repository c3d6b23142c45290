//! A general-purpose work-stealing executor for any `Future + Send + 'static`.
//!
//! ```
//! use procsched::executor::Executor;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//!
//! let executor = Executor::builder().workers(2).thread_name("demo").build()?;
//! let count = Arc::new(AtomicUsize::new(0));
//! let handles: Vec<_> = (0..100)
//!     .map(|i| {
//!         let count = count.clone();
//!         executor.spawn(async move {
//!             count.fetch_add(1, Ordering::Relaxed);
//!             i * 2
//!         })
//!     })
//!     .collect();
//! let sum: usize = executor.block_on(async {
//!     let mut sum = 0;
//!     for handle in handles {
//!         sum += handle.await.unwrap();
//!     }
//!     sum
//! });
//! assert_eq!(sum, 9900);
//! assert_eq!(count.load(Ordering::Relaxed), 100);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Architecture
//! | module | concept |
//! |---|---|
//! | `builder` | [`Builder`]: settings, starting the worker and monitor threads |
//! | `handle` | [`Handle`]: spawning from any thread, the executor's figures |
//! | `yield_now` | [`yield_now()`]: a task gives the other ready tasks a turn |
//! | `task/` | one allocation per task; the atomic state word (`task/state.rs`); wakers; `JoinHandle` |
//! | `queue` | per-worker deque (crossbeam, LIFO for the owner), global and per-worker FIFO injectors |
//! | `worker` | the worker loop: where to look for work, in which order, when to sleep; `worker/current.rs`: the current thread's worker, and pushes to its own queues |
//! | `idle` | how many workers search or sleep; the protocol that never loses a wake-up |
//! | `park` | the sleep primitive |
//! | `shared` | the state all workers share, and where each runnable task is queued |
//! | `schedule` | spawning; the task module's `Schedule`: which queue, by calling thread |
//! | `owned` | every live task, so that shutdown can cancel them all |
//! | `unowned` | tasks spawned without the owned list, whose owner (the scheduler) cancels them |
//! | `monitor` | the monitor thread: long-poll detection, hand-off of a stuck worker's work, the protocols |
//! | `spare` | the spare workers that replace stuck ones, and their pool |
//! | `start` | starting worker threads (configured and spare); the monitor's hand-off steps 3 and 4 |
//! | `blocking` | [`block_in_place`] |
//! | `threads` | how worker threads are started: name and context |
//! | `metrics` | per-worker counters, the monitor's figures |
//!
//! Imports point one way, from each group to the ones before it: `task/`, `queue`, `park`,
//! `idle`, `metrics`, `late_context`, `threads`, `yield_now`; `owned`, `spare`; `monitor`;
//! `shared`; `unowned`, `worker`; `schedule`, `start`; `blocking`, `handle`, `builder`; then
//! this module. A lower module that needs a higher one gets a narrow trait: the task module's
//! `Schedule` (implemented in `schedule`), the monitor's `MonitorHost` and the spare pool's
//! `SpareHost` (both in `start`: the monitor and the pool are part of `shared`'s state, and
//! starting a spare runs the worker loop).
//!
//! # Blocking code
//! A future that blocks its thread holds its worker until it returns; futures cannot be
//! preempted. The executor's monitor thread notices a poll running longer than
//! [`Builder::long_poll_threshold`] (default [`DEFAULT_LONG_POLL_THRESHOLD`]), reports it once
//! ([`Builder::on_long_poll`]) and, if work is waiting, starts a spare worker that runs the
//! stuck worker's queue meanwhile (at most [`Builder::max_spare_workers`] at once). Code that
//! knows it will block says so with [`block_in_place`], which hands off at once.
//!
//! The executor knows nothing of processes; `procsched`'s process layer runs on it as ordinary
//! futures.

mod blocking;
mod builder;
mod handle;
mod idle;
pub(crate) mod late_context;
mod metrics;
mod monitor;
mod next_slot;
mod owned;
mod park;
mod queue;
mod schedule;
mod shared;
mod spare;
mod start;
mod task;
mod threads;
mod unowned;
mod worker;
mod yield_now;

#[cfg(test)]
mod tests;

pub use blocking::block_in_place;
pub use builder::Builder;
pub use handle::Handle;
pub use metrics::{ExecutorMetrics, MonitorMetrics, WorkerMetrics};
pub use monitor::{LongPoll, DEFAULT_LONG_POLL_THRESHOLD};
pub use spare::DEFAULT_SPARE_KEEP_ALIVE;
pub(crate) use task::{defer_after_complete, panic_message, DeferredWake};
pub use task::{JoinError, JoinHandle};
pub(crate) use unowned::TaskRef;
pub(crate) use worker::{on_worker_thread, yield_requested};
pub use yield_now::yield_now;

use crate::loom::{lock, thread, Arc, Mutex};
use shared::Shared;
use std::fmt;
use std::future::Future;
use std::time::Duration;

/// How long dropping an [`Executor`] waits for workers to finish their current poll.
pub const DROP_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

/// Default stack size of a worker thread: 8 MiB, the main thread's on Linux
/// ([`Builder::thread_stack_size`] says why more than std's 2 MiB for spawned threads).
pub const DEFAULT_STACK_SIZE: usize = 8 << 20;

/// The smallest worker stack [`Builder::build`] accepts, in bytes (256 KiB): enough for a
/// worker's own loop and a panic's unwinding and report (a backtrace included) in an
/// unoptimised build; what the processes need comes on top.
///
/// # Examples
///
/// ```
/// use procsched::executor::{Executor, MIN_STACK_SIZE};
/// let refused = Executor::builder().thread_stack_size(MIN_STACK_SIZE - 1).build();
/// assert_eq!(refused.err().map(|e| e.kind()), Some(std::io::ErrorKind::InvalidInput));
/// assert!(Executor::builder().thread_stack_size(MIN_STACK_SIZE).build().is_ok());
/// ```
pub const MIN_STACK_SIZE: usize = 256 << 10;

/// The most worker threads, spares included (`workers + max_spare_workers`), one executor
/// starts: 4 096. Every slot's queues are made at `build` (about 4 KiB each, spares' too, so
/// that a spare starts without allocating), and the idle set counts them in 16 bits; past
/// this, [`Builder::build`] fails with `InvalidInput` instead of reserving gigabytes for
/// spares a cap would never start, or panicking.
///
/// # Examples
///
/// ```
/// use procsched::executor::{Executor, MAX_THREADS};
/// let refused = Executor::builder().workers(2).max_spare_workers(MAX_THREADS).build();
/// assert_eq!(refused.err().map(|e| e.kind()), Some(std::io::ErrorKind::InvalidInput));
/// ```
pub const MAX_THREADS: usize = 4096;

/// A work-stealing executor: one worker thread per core, each with its own run queue.
///
/// Dropping the executor shuts it down (waiting at most [`DROP_SHUTDOWN_TIMEOUT`] for workers to
/// finish their current poll); unfinished tasks are dropped and their handles resolve to
/// [`JoinError::is_shutdown`] ([`JoinError::is_panic`] if a future's destructor panicked).
///
/// # Examples
///
/// ```
/// use procsched::executor::Executor;
/// use std::time::Duration;
///
/// let executor = Executor::builder().workers(2).build()?;
/// let handle = executor.spawn(async { "hello" });
/// assert_eq!(executor.block_on(handle).unwrap(), "hello");
/// let never = executor.spawn(std::future::pending::<()>());
/// let report = executor.shutdown(Duration::from_secs(1));
/// assert_eq!(report.cancelled, 1);
/// assert!(executor.block_on(never).unwrap_err().is_shutdown());
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Executor {
    handle: Handle,
    shutdown: Mutex<ShutdownState>,
}

struct ShutdownState {
    /// Every worker thread started, with its slot (a spare slot may have had several).
    threads: Vec<(usize, thread::JoinHandle<()>)>,
    monitor: Option<thread::JoinHandle<()>>,
    report: Option<ExecutorShutdownReport>,
}

/// What [`Executor::shutdown`] did.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let executor = procsched::executor::Executor::builder().workers(1).build()?;
/// let pending = executor.spawn(std::future::pending::<()>());   // never finishes by itself
/// let report = executor.shutdown(Duration::from_secs(5));
/// assert_eq!(report.cancelled, 1);       // its future was dropped unfinished
/// assert_eq!(report.stuck_workers, 0);   // no worker was inside a poll at the deadline
/// assert!(executor.block_on(pending).unwrap_err().is_shutdown());
/// # Ok::<(), std::io::Error>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutorShutdownReport {
    /// Tasks whose futures were dropped unfinished.
    pub cancelled: usize,
    /// Workers (spares included) still inside a poll when the timeout passed, not counting the
    /// worker that called [`Executor::shutdown`] from inside a task. They exit (and cancel the
    /// task they were polling) as soon as that poll returns. Workers that were only parked or
    /// between two polls are not stuck: shutdown waits for them to exit (shortly, even past the
    /// timeout) and joins their threads.
    pub stuck_workers: usize,
}

impl Executor {
    /// A builder with the default settings.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    fn from_parts(
        shared: Arc<Shared>,
        threads: Vec<(usize, thread::JoinHandle<()>)>,
        monitor: Option<thread::JoinHandle<()>>,
    ) -> Executor {
        Executor {
            handle: Handle { shared },
            shutdown: Mutex::new(ShutdownState {
                threads,
                monitor,
                report: None,
            }),
        }
    }

    /// A cheap, clonable handle that spawns from any thread.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// let handle = executor.handle().clone();
    /// let from_thread = std::thread::spawn(move || handle.spawn(async { 1 })).join().unwrap();
    /// assert_eq!(executor.block_on(from_thread).unwrap(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Spawns a task; see [`Handle::spawn`].
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// let task = executor.spawn(async { "done" });
    /// assert_eq!(executor.block_on(task).unwrap(), "done");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }

    /// Spawns a labelled task; see [`Handle::spawn_labelled`].
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// // The label names the task in the monitor's long-poll reports.
    /// let task = executor.spawn_labelled(async { 1 + 1 }, 42);
    /// assert_eq!(executor.block_on(task).unwrap(), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_labelled<F>(&self, future: F, label: u64) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn_labelled(future, label)
    }

    /// Runs `future` to completion on the calling thread (not on a worker), blocking it.
    ///
    /// Tasks spawned meanwhile run on the workers as usual. From async code, `.await` the
    /// future instead (a [`JoinHandle`] works on any executor); blocking a thread that drives
    /// other async work (a tokio runtime's) stalls that work.
    ///
    /// # Panics
    ///
    /// If called on a worker of a procsched executor (inside a task), where it would hold the
    /// worker the awaited work may need, unless inside [`block_in_place`] (the worker has handed
    /// its work off: blocking is what it is for). Also if called inside another `block_on`
    /// (futures' `EnterError`: a thread runs one such blocking executor at a time).
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// assert_eq!(executor.block_on(async { 1 + 1 }), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        assert!(
            worker::current_shared().is_none() || worker::in_block_in_place(),
            "`Executor::block_on` called on a procsched worker thread (inside a task): blocking it \
             can deadlock. `.await` the future instead, or wrap the blocking code in \
             `block_in_place`."
        );
        crate::loom::block_on(future)
    }

    /// A snapshot of the per-worker counters.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// executor.block_on(executor.spawn(async {})).unwrap();
    /// assert!(executor.metrics().total().polls >= 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn metrics(&self) -> ExecutorMetrics {
        self.handle.metrics()
    }

    /// Stops the executor: no new tasks (spawns resolve to [`JoinError::is_shutdown`]), workers
    /// stop after their current poll, every unfinished task is dropped (its destructor runs) and
    /// its handle resolves to [`JoinError::is_shutdown`], or to [`JoinError::is_panic`] if that
    /// destructor panicked (contained, as tokio does: the panic becomes the outcome).
    ///
    /// Waits at most `timeout` for workers that are inside a long poll; those still inside one
    /// then are the report's `stuck_workers`, and their threads are left to end when the poll
    /// returns. Workers that were idle (parked, between polls) are waited for and joined even
    /// with a zero `timeout` (briefly: they need only be scheduled). Called from inside a task,
    /// its own worker is neither waited for nor counted. Idempotent: later and concurrent calls
    /// wait for the first and return its report.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// let report = executor.shutdown(Duration::from_secs(1));
    /// assert_eq!(report.cancelled, 0);
    /// assert!(executor.block_on(executor.spawn(async {})).unwrap_err().is_shutdown());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn shutdown(&self, timeout: Duration) -> ExecutorShutdownReport {
        let mut state = lock(&self.shutdown);
        if let Some(report) = state.report {
            return report;
        }
        let shared = &self.handle.shared;
        let deadline = crate::deadline::after(timeout);
        shared.begin_shutdown();
        // No spare starts after this; the ones started are counted live, and joined below.
        let spares = shared.monitor.spares.close();
        state.threads.extend(spares);
        if let Some(monitor) = state.monitor.take() {
            // It stops at its next wake-up, which `begin_shutdown` triggered.
            let _ = monitor.join();
        }
        // Called from inside one of our own polls (a task shutting its executor down): that
        // worker cannot leave its poll while it waits here, and is not stuck.
        let own_worker = worker::current_index(shared);
        let stuck_workers = shared.wait_for_workers(deadline, own_worker);
        // Joined: every thread whose worker has left its loop (what remains is its context's
        // tail). Not joined (dropping a handle detaches its thread): our own, which cannot be
        // joined from inside its poll, and — when some worker has not left — any thread still
        // running, which may be inside a poll that never returns (a worker seen idle may
        // begin one more poll if it read the shutdown flag just before it was set): a join
        // there could outlast every bound the caller was given.
        let all_left = shared.workers_left(usize::from(own_worker.is_some()));
        for (index, thread) in state.threads.drain(..) {
            if Some(index) == own_worker || !(all_left || has_finished(&thread)) {
                continue;
            }
            // A worker never panics (user code runs under `catch_unwind`); if it somehow did,
            // the panic was already reported on that thread.
            let _ = thread.join();
        }
        if stuck_workers > 0 {
            tracing::warn!(
                stuck_workers,
                "executor shutdown timed out waiting for workers inside a poll"
            );
        }
        let cancelled = shared.cancel_all();
        let report = ExecutorShutdownReport {
            cancelled,
            stuck_workers,
        };
        tracing::debug!(?report, "executor shut down");
        state.report = Some(report);
        report
    }
}

/// `true` if `thread` has ended (loom's handles cannot tell: not there).
fn has_finished(thread: &thread::JoinHandle<()>) -> bool {
    #[cfg(not(loom))]
    return thread.is_finished();
    #[cfg(loom)]
    {
        let _ = thread;
        false
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.shutdown(DROP_SHUTDOWN_TIMEOUT);
    }
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("shared", &self.handle.shared)
            .finish_non_exhaustive()
    }
}
