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
//! | `task/` | one allocation per task; the atomic state word (`task/state.rs`); wakers; `JoinHandle` |
//! | `queue` | per-worker deque (crossbeam, LIFO for the owner), global and per-worker FIFO injectors |
//! | `worker` | the worker loop: where to look for work, in which order, when to sleep |
//! | `idle` | how many workers search or sleep; the protocol that never loses a wake-up |
//! | `park` | the sleep primitive |
//! | `shared` | the state all workers share, and where each runnable task is queued |
//! | `owned` | every live task, so that shutdown can cancel them all |
//! | `unowned` | tasks spawned without the owned list, whose owner (the scheduler) cancels them |
//! | `monitor` | the monitor thread: long-poll detection, hand-off of a stuck worker's work, the protocols |
//! | `spare` | the spare workers that replace stuck ones, and their pool |
//! | `blocking` | [`block_in_place`] |
//! | `threads` | starting worker threads (configured and spare) |
//! | `metrics` | per-worker counters, the monitor's figures |
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
mod idle;
mod metrics;
mod monitor;
mod owned;
mod park;
mod queue;
mod shared;
mod spare;
mod task;
mod threads;
mod unowned;
mod worker;

#[cfg(test)]
mod tests;

pub use blocking::block_in_place;
pub use metrics::{ExecutorMetrics, MonitorMetrics, WorkerMetrics};
pub use monitor::{LongPoll, DEFAULT_LONG_POLL_THRESHOLD};
pub(crate) use task::panic_message;
pub use task::{JoinError, JoinHandle};
pub(crate) use unowned::TaskRef;

use crate::loom::{lock, thread, Arc, Mutex};
use monitor::{Monitor, MonitorConfig};
use shared::{Remote, Shared};
use spare::Spares;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use threads::{ThreadConfig, WorkerContext};

/// How long dropping an [`Executor`] waits for workers to finish their current poll.
pub const DROP_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

/// Configures and starts an [`Executor`].
///
/// # Examples
///
/// ```
/// use procsched::executor::Executor;
///
/// let executor = Executor::builder().workers(4).thread_name("my-app").build()?;
/// assert_eq!(executor.handle().num_workers(), 4);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    workers: usize,
    thread_name: String,
    worker_context: Option<WorkerContext>,
    monitor: MonitorConfig,
    /// `None`: as many as `workers`.
    max_spare_workers: Option<usize>,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            thread_name: "procsched-worker".to_owned(),
            worker_context: None,
            monitor: MonitorConfig {
                enabled: true,
                threshold: DEFAULT_LONG_POLL_THRESHOLD,
                observer: None,
            },
            max_spare_workers: None,
        }
    }

    /// Runs the monitor thread (default: `true`): it reports polls longer than
    /// [`long_poll_threshold`](Self::long_poll_threshold) and starts spare workers to run the
    /// work a stuck worker holds up. Off, a blocking poll stalls the work queued behind it until
    /// it returns; [`block_in_place`] still hands off (once, when called).
    ///
    /// The monitor costs nothing per poll beyond two plain stores, ticks every
    /// `threshold / 4` (between 1 and 10 ms) while workers are busy and sleeps while all are
    /// idle.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().monitor(false).build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn monitor(&mut self, enabled: bool) -> &mut Self {
        self.monitor.enabled = enabled;
        self
    }

    /// How long a poll may run before the monitor reports it and hands its worker's queue to a
    /// spare (default [`DEFAULT_LONG_POLL_THRESHOLD`], at least 1 ms). Detection is precise to
    /// one monitor tick (`threshold / 4`, between 1 and 10 ms).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let executor = procsched::executor::Executor::builder()
    ///     .long_poll_threshold(Duration::from_millis(50))
    ///     .build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn long_poll_threshold(&mut self, threshold: Duration) -> &mut Self {
        self.monitor.threshold = threshold.max(Duration::from_millis(1));
        self
    }

    /// Most spare workers running at once in place of stuck ones (default: as many as
    /// [`workers`](Self::workers)). Spare threads start on first need and then sleep between
    /// uses; 0 disables hand-off (long polls are still reported).
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder()
    ///     .workers(2)
    ///     .max_spare_workers(8)
    ///     .build()?;
    /// assert_eq!(executor.metrics().spares().len(), 8);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn max_spare_workers(&mut self, max: usize) -> &mut Self {
        self.max_spare_workers = Some(max);
        self
    }

    /// Calls `observer` (on the monitor thread) once for every long poll, instead of the
    /// default `tracing` warning. It should return quickly: the monitor waits for it.
    ///
    /// # Examples
    ///
    /// See [`LongPoll`].
    pub fn on_long_poll(
        &mut self,
        observer: impl Fn(&LongPoll) + Send + Sync + 'static,
    ) -> &mut Self {
        self.monitor.observer = Some(std::sync::Arc::new(observer));
        self
    }

    /// Number of worker threads (at least 1). Default: the available parallelism.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(2).build()?;
    /// assert_eq!(executor.handle().num_workers(), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn workers(&mut self, workers: usize) -> &mut Self {
        self.workers = workers.max(1);
        self
    }

    /// Worker thread name prefix; workers are named `<prefix>-<index>`.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).thread_name("app").build()?;
    /// let name = executor.spawn(async { std::thread::current().name().map(str::to_owned) });
    /// assert_eq!(executor.block_on(name).unwrap().as_deref(), Some("app-0"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.thread_name = name.into();
        self
    }

    /// Runs every worker's loop inside `context`, which must call the closure it is given
    /// exactly once: to enter, for the thread's whole life, a context its tasks rely on — a tokio
    /// runtime (`handle.enter()`), a tracing span, a thread-local.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::executor::Executor;
    ///
    /// let runtime = tokio::runtime::Runtime::new()?;
    /// let handle = runtime.handle().clone();
    /// let executor = Executor::builder()
    ///     .workers(1)
    ///     .worker_context(move |run| {
    ///         let _inside = handle.enter();
    ///         run()
    ///     })
    ///     .build()?;
    /// // Tasks can use tokio timers and I/O directly.
    /// let slept = executor.spawn(async {
    ///     tokio::time::sleep(std::time::Duration::from_millis(1)).await
    /// });
    /// executor.block_on(slept).unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn worker_context(
        &mut self,
        context: impl Fn(&mut dyn FnMut()) + Send + Sync + 'static,
    ) -> &mut Self {
        self.worker_context = Some(WorkerContext(std::sync::Arc::new(context)));
        self
    }

    /// Starts the worker threads.
    ///
    /// # Errors
    ///
    /// Fails if the operating system refuses to start a thread; the workers already started are
    /// stopped again.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// assert_eq!(executor.block_on(executor.spawn(async { 7 })).unwrap(), 7);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn build(&mut self) -> std::io::Result<Executor> {
        let workers = self.workers;
        let max_spare = self.max_spare_workers.unwrap_or(workers);
        let slots = workers + max_spare;
        let mut locals: Vec<queue::Local<shared::Notified>> =
            (0..slots).map(|_| queue::Local::new()).collect();
        let remotes = locals
            .iter()
            .map(|local| Remote {
                stealer: local.stealer(),
                inject: queue::Injector::new(),
                woken: queue::Injector::new(),
                parker: park::Parker::new(),
            })
            .collect();
        let spares = Spares::new(workers, locals.split_off(workers));
        let monitor = Monitor::new(self.monitor.clone(), slots, spares);
        let config = ThreadConfig {
            name: self.thread_name.clone(),
            context: self.worker_context.clone(),
        };
        let shared = Arc::new(Shared::new(remotes, workers, monitor, config));
        let mut threads = Vec::with_capacity(workers);
        for (index, local) in locals.into_iter().enumerate() {
            match shared.threads.spawn(shared.clone(), index, local) {
                Ok(thread) => threads.push(thread),
                Err(error) => {
                    // Workers that never started must still count as exited.
                    for _ in index..workers {
                        shared.worker_exited();
                    }
                    let executor = Executor::from_parts(shared, threads, None);
                    let _ = executor.shutdown(DROP_SHUTDOWN_TIMEOUT);
                    return Err(error);
                }
            }
        }
        let monitor_thread = match self.start_monitor(&shared) {
            Ok(thread) => thread,
            Err(error) => {
                let executor = Executor::from_parts(shared, threads, None);
                let _ = executor.shutdown(DROP_SHUTDOWN_TIMEOUT);
                return Err(error);
            }
        };
        tracing::debug!(workers, max_spare, "executor started");
        Ok(Executor::from_parts(shared, threads, monitor_thread))
    }

    /// Starts the monitor thread, if enabled. Under loom there is none: models drive
    /// `Monitor::tick` with a manual clock.
    fn start_monitor(
        &self,
        shared: &Arc<Shared>,
    ) -> std::io::Result<Option<thread::JoinHandle<()>>> {
        #[cfg(loom)]
        {
            let _ = shared;
            Ok(None)
        }
        #[cfg(not(loom))]
        {
            if !self.monitor.enabled {
                return Ok(None);
            }
            let shared = shared.clone();
            thread::Builder::new()
                .name(format!("{}-monitor", self.thread_name))
                .spawn(move || monitor::run(shared))
                .map(Some)
        }
    }
}

/// A work-stealing executor: one worker thread per core, each with its own run queue.
///
/// Dropping the executor shuts it down (waiting at most [`DROP_SHUTDOWN_TIMEOUT`] for workers to
/// finish their current poll); unfinished tasks are dropped and their handles resolve to
/// [`JoinError::is_shutdown`].
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
    threads: Vec<thread::JoinHandle<()>>,
    monitor: Option<thread::JoinHandle<()>>,
    report: Option<ExecutorShutdownReport>,
}

/// What [`Executor::shutdown`] did.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutorShutdownReport {
    /// Tasks whose futures were dropped unfinished.
    pub cancelled: usize,
    /// Workers (spares included) still inside a poll when the timeout passed. They exit (and
    /// cancel the task they were polling) as soon as that poll returns.
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
        threads: Vec<thread::JoinHandle<()>>,
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
    /// worker the awaited work may need.
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
            worker::current_shared().is_none(),
            "`Executor::block_on` called on a procsched worker thread (inside a task): blocking it \
             can deadlock. `.await` the future instead."
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
    /// its handle resolves to [`JoinError::is_shutdown`].
    ///
    /// Waits at most `timeout` for workers that are inside a long poll. Idempotent: later and
    /// concurrent calls wait for the first and return its report.
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
        let deadline = Instant::now() + timeout;
        shared.begin_shutdown();
        // No spare starts after this; the ones started are counted live, and joined below.
        let spares = shared.monitor.spares.close();
        state.threads.extend(spares);
        if let Some(monitor) = state.monitor.take() {
            // It stops at its next wake-up, which `begin_shutdown` triggered.
            let _ = monitor.join();
        }
        let stuck_workers = shared.wait_for_workers(deadline);
        if stuck_workers == 0 {
            for thread in state.threads.drain(..) {
                // A worker never panics (user code runs under `catch_unwind`); if it somehow
                // did, the panic was already reported on that thread.
                let _ = thread.join();
            }
        } else {
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

/// A handle to an [`Executor`]: spawn from any thread (a task, a plain thread, a tokio runtime).
///
/// Cloning is cheap (one reference count). A handle does not keep the workers alive: once the
/// executor is shut down or dropped, spawns resolve to [`JoinError::is_shutdown`].
///
/// # Examples
///
/// ```
/// use procsched::executor::Executor;
///
/// let executor = Executor::builder().workers(2).build()?;
/// let handle = executor.handle().clone();
/// let from_thread = std::thread::spawn(move || handle.spawn(async { 7 }))
///     .join()
///     .unwrap();
/// assert_eq!(executor.block_on(from_thread).unwrap(), 7);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Shared>,
}

impl Handle {
    /// Spawns `future` as a task and returns its [`JoinHandle`].
    ///
    /// From a worker thread of this executor the task goes to that worker's deque; from anywhere
    /// else to the global queue, waking a sleeping worker.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// let handle = executor.handle().clone();
    /// let nested = executor.spawn(async move { handle.spawn(async { 5 }).await.unwrap() + 1 });
    /// assert_eq!(executor.block_on(nested).unwrap(), 6);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Shared::spawn(&self.shared, future, 0)
    }

    /// [`spawn`](Self::spawn) with a label the monitor reports a long poll of this task with
    /// ([`LongPoll::label`]; 0 means no label). A scheduler labels each process's task with its
    /// PID.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// let task = executor.handle().spawn_labelled(async { 3 }, 17);
    /// assert_eq!(executor.block_on(task).unwrap(), 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_labelled<F>(&self, future: F, label: u64) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Shared::spawn(&self.shared, future, label)
    }

    /// Spawns `future` as an *unowned* task (`unowned.rs`): not in the owned-task list, so
    /// [`Executor::shutdown`] does not cancel it — the caller must, through the [`TaskRef`]
    /// handed to `keep` before the task is first queued. After shutdown the task is cancelled at
    /// once and `keep` is not called. Not counted by [`live_tasks`](Self::live_tasks).
    #[inline(always)]
    pub(crate) fn spawn_unowned<F>(
        &self,
        future: F,
        label: u64,
        keep: impl FnOnce(TaskRef),
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Shared::spawn_unowned(&self.shared, future, label, keep)
    }

    /// The handle of the executor whose worker runs the current thread, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::executor::{Executor, Handle};
    ///
    /// let executor = Executor::builder().workers(1).build()?;
    /// assert!(Handle::try_current().is_none());
    /// let inside = executor.spawn(async { Handle::try_current().is_some() });
    /// assert!(executor.block_on(inside).unwrap());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_current() -> Option<Handle> {
        worker::current_shared().map(|shared| Handle { shared })
    }

    /// Number of configured worker threads (spares not included).
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(3).build()?;
    /// assert_eq!(executor.handle().num_workers(), 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn num_workers(&self) -> usize {
        self.shared.num_workers()
    }

    /// `true` once shutdown has begun.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// let handle = executor.handle().clone();
    /// executor.shutdown(std::time::Duration::from_secs(1));
    /// assert!(handle.is_shutdown());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_shutdown(&self) -> bool {
        self.shared.is_shutdown()
    }

    /// Wakes every task spawned with [`spawn`](Self::spawn) and not yet finished (takes a lock
    /// per shard): each is polled once more, whether or not something it waits for happened.
    /// Returns how many were woken. Every future must tolerate such a spurious poll; this is for
    /// a condition that tasks check on every poll without registering a waker for it: set it,
    /// then call this (`OwnedTasks::wake_all` says why no task misses it). The scheduler's tokio
    /// bridge uses it when its handler runtime shuts down.
    pub(crate) fn wake_owned_tasks(&self) -> usize {
        self.shared.owned.wake_all()
    }

    /// Number of tasks spawned and not yet finished (takes a lock per shard; for diagnostics).
    /// A scheduler's process tasks are not counted: they are the scheduler's to track.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// let pending = executor.spawn(std::future::pending::<()>());
    /// assert_eq!(executor.handle().live_tasks(), 1);
    /// pending.abort();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn live_tasks(&self) -> usize {
        self.shared.owned.len()
    }

    /// A snapshot of the per-worker counters and the monitor's figures.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(2).build()?;
    /// assert_eq!(executor.handle().metrics().workers().len(), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn metrics(&self) -> ExecutorMetrics {
        self.shared.metrics_snapshot()
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("shared", &self.shared)
            .finish()
    }
}

/// Yields once: the task goes behind the other ready tasks, then runs again.
///
/// On one of the executor's workers the task waits in that worker's yielded lane: the worker runs
/// its deque and the tasks woken from outside first, and every 61st task it looks at the global
/// queue and then the yielded lane first, so neither local nor outside work is starved, while the task stays cache-warm on its worker (and idle workers
/// can still steal it). Anywhere else it goes to the global queue.
///
/// # Examples
///
/// ```
/// let executor = procsched::executor::Executor::builder().workers(1).build()?;
/// let task = executor.spawn(async {
///     for _ in 0..3 {
///         procsched::executor::yield_now().await;
///     }
/// });
/// executor.block_on(task).unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future returned by [`yield_now`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
