//! [`Handle`]: spawning onto an executor from any thread.

use super::metrics::ExecutorMetrics;
use super::schedule;
use super::shared::Shared;
use super::task::JoinHandle;
use super::unowned::TaskRef;
use super::worker;
use crate::loom::Arc;
use std::fmt;
use std::future::Future;

/// A handle to an [`Executor`](super::Executor): spawn from any thread (a task, a plain thread, a tokio runtime).
///
/// Cloning is cheap (one reference count). A handle does not keep the workers alive: once the
/// executor is shut down or dropped, spawns resolve to [`JoinError::is_shutdown`](super::JoinError::is_shutdown).
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
    pub(super) shared: Arc<Shared>,
}

impl Handle {
    /// Publishes a context every worker enters before its next poll (`late_context.rs`);
    /// `false` if one was set already.
    pub(crate) fn set_late_context(
        &self,
        context: std::sync::Arc<dyn super::late_context::LateContext>,
    ) -> bool {
        self.shared.late_context.set(context)
    }

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
        schedule::spawn(&self.shared, future, 0)
    }

    /// [`spawn`](Self::spawn) with a label the monitor reports a long poll of this task with
    /// ([`LongPoll::label`](super::LongPoll::label); 0 means no label). A scheduler labels each process's task with its
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
        schedule::spawn(&self.shared, future, label)
    }

    /// Spawns `future` as an *unowned* task (`unowned.rs`): not in the owned-task list, so
    /// [`Executor::shutdown`](super::Executor::shutdown) does not cancel it — the caller must, through the [`TaskRef`]
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
        schedule::spawn_unowned(&self.shared, future, label, keep)
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
    /// A scheduler's process tasks are not counted: they are the scheduler's to track. After
    /// [`Executor::shutdown`](super::Executor::shutdown) it is 0: every task was released then,
    /// including one a stuck worker is still polling (its handle resolves when that poll
    /// returns: [`ExecutorShutdownReport::stuck_workers`](super::ExecutorShutdownReport::stuck_workers)).
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
