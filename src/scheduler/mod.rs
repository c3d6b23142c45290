//! The public facade: spawn processes, send them messages, observe and shut them down.
//!
//! A [`Scheduler`] owns a work-stealing [`Executor`](crate::executor::Executor) (one worker per
//! core), the handlers yields are dispatched to, the tokio runtime async handlers run on, and the
//! process table: pooled process cells, found by [`Pid`] without a lock (`table.rs`).

mod table;

#[cfg(all(test, loom))]
mod loom_table;

use crate::dispatch::{self, Handler, HandlerSet};
use crate::executor::{self, Executor};
use crate::loom::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};
use crate::loom::{lock, Arc, Condvar, Mutex};
use crate::process::future::{Host, ProcessFuture};
use crate::process::mailbox::{Admission, ProcessCell};
use crate::process::{
    panic_message, CancelReason, Event, Events, Message, Pid, Process, ProcessContext,
    ProcessHandle, ProcessState, SendError, SpawnError, Yield,
};
use crate::Payload;
use std::any::TypeId;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};
use table::Table;

/// Default most events moved into one step.
pub const DEFAULT_MAX_BATCH: usize = 64;
/// Default most steps in one poll before a process is re-queued behind other work.
pub const DEFAULT_STEP_BUDGET: usize = 64;
/// How long dropping a [`Scheduler`] lets cancelled processes finish before forcing them.
pub const DEFAULT_DROP_TIMEOUT: Duration = Duration::from_millis(250);

/// Why [`SchedulerBuilder::build`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// Two handlers were registered for the same command type.
    #[error("two handlers registered for command type `{0}`")]
    DuplicateHandler(&'static str),
    /// A worker thread or the tokio runtime could not be started.
    #[error("could not start the scheduler: {0}")]
    Io(#[from] std::io::Error),
}

/// Configures and starts a [`Scheduler`].
///
/// # Examples
///
/// ```
/// use procsched::{CommandError, Payload, Scheduler};
///
/// struct Lookup(u32);
/// struct Fetch(String);
///
/// let sched = Scheduler::builder()
///     .workers(2)
///     .inline_handler(|Lookup(key): Lookup| Ok(Payload::new(key * 2)))
///     .async_handler(|Fetch(url): Fetch| async move {
///         Ok::<_, CommandError>(Payload::new(url.len()))
///     })
///     .build()?;
/// # Ok::<(), procsched::BuildError>(())
/// ```
pub struct SchedulerBuilder {
    executor: executor::Builder,
    handlers: Vec<(TypeId, &'static str, Handler)>,
    runtime: Option<tokio::runtime::Handle>,
    max_batch: usize,
    step_budget: usize,
    max_processes: usize,
    mailbox_capacity: usize,
    drop_timeout: Duration,
}

impl SchedulerBuilder {
    /// Number of worker threads (default: the available parallelism).
    pub fn workers(&mut self, workers: usize) -> &mut Self {
        self.executor.workers(workers);
        self
    }

    /// Worker thread name prefix.
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.executor.thread_name(name);
        self
    }

    /// Registers a synchronous handler for commands of type `C`, run on the worker during
    /// dispatch. Keep it short and non-blocking; use [`blocking_handler`](Self::blocking_handler)
    /// for blocking work.
    pub fn inline_handler<C, F>(&mut self, handler: F) -> &mut Self
    where
        C: Send + 'static,
        F: Fn(C) -> Result<Payload, crate::CommandError> + Send + Sync + 'static,
    {
        self.add::<C>(Handler::inline(handler))
    }

    /// Registers an async handler for commands of type `C`: each command runs as a tokio task.
    pub fn async_handler<C, F, Fut>(&mut self, handler: F) -> &mut Self
    where
        C: Send + 'static,
        F: Fn(C) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Payload, crate::CommandError>> + Send + 'static,
    {
        self.add::<C>(Handler::asynchronous(handler))
    }

    /// Registers a blocking handler for commands of type `C`: each command runs on tokio's
    /// blocking thread pool.
    pub fn blocking_handler<C, F>(&mut self, handler: F) -> &mut Self
    where
        C: Send + 'static,
        F: Fn(C) -> Result<Payload, crate::CommandError> + Send + Sync + 'static,
    {
        self.add::<C>(Handler::blocking(handler))
    }

    fn add<C: 'static>(&mut self, handler: Handler) -> &mut Self {
        self.handlers
            .push((TypeId::of::<C>(), std::any::type_name::<C>(), handler));
        self
    }

    /// The tokio runtime async and blocking handlers run on. Default: the runtime `build` is
    /// called from, if any, else a small runtime the scheduler owns (started only if an async or
    /// blocking handler is registered).
    pub fn tokio_handle(&mut self, handle: tokio::runtime::Handle) -> &mut Self {
        self.runtime = Some(handle);
        self
    }

    /// Most events delivered to one step (default [`DEFAULT_MAX_BATCH`]); the rest wait for the
    /// next steps, so one flooded process cannot monopolise a worker.
    pub fn max_batch(&mut self, max_batch: usize) -> &mut Self {
        self.max_batch = max_batch.max(1);
        self
    }

    /// Most steps in one poll (default [`DEFAULT_STEP_BUDGET`]) before the process is re-queued
    /// behind other ready work.
    pub fn step_budget(&mut self, step_budget: usize) -> &mut Self {
        self.step_budget = step_budget.max(1);
        self
    }

    /// Most live processes; `spawn` beyond it fails with [`SpawnError::Limit`]. Default: no limit
    /// beyond the process table's, 2^26 (about 67 million) live processes.
    pub fn max_processes(&mut self, max_processes: usize) -> &mut Self {
        self.max_processes = max_processes;
        self
    }

    /// Most messages waiting in one process's mailbox (default: unbounded). Past it, `send`
    /// reports [`SendError::MailboxFull`] and drops the message. Yield completions and `Cancel`
    /// are never counted or dropped.
    pub fn mailbox_capacity(&mut self, capacity: usize) -> &mut Self {
        self.mailbox_capacity = capacity;
        self
    }

    /// How long dropping the scheduler lets cancelled processes finish (default
    /// [`DEFAULT_DROP_TIMEOUT`]).
    pub fn drop_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.drop_timeout = timeout;
        self
    }

    /// Starts the scheduler.
    ///
    /// # Errors
    ///
    /// [`BuildError::DuplicateHandler`] if two handlers share a command type;
    /// [`BuildError::Io`] if a thread could not be started.
    pub fn build(&mut self) -> Result<Scheduler, BuildError> {
        let mut handlers = HandlerSet::default();
        for (type_id, name, handler) in self.handlers.drain(..) {
            if !handlers.insert(type_id, handler) {
                return Err(BuildError::DuplicateHandler(name));
            }
        }
        let mut owned_runtime = None;
        let runtime = match self.runtime.clone() {
            Some(handle) => Some(handle),
            None => match tokio::runtime::Handle::try_current() {
                Ok(handle) => Some(handle),
                Err(_) if handlers.needs_runtime() => {
                    let runtime = tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(1)
                        .thread_name("procsched-io")
                        .enable_all()
                        .build()?;
                    let handle = runtime.handle().clone();
                    owned_runtime = Some(runtime);
                    Some(handle)
                }
                Err(_) => None,
            },
        };
        let executor = self.executor.build()?;
        let inner = Arc::new(Inner {
            executor: executor.handle().clone(),
            handlers,
            runtime,
            table: Table::new(self.mailbox_capacity),
            live: AtomicUsize::new(0),
            shutting_down: AtomicBool::new(false),
            graceful: AtomicUsize::new(0),
            forced: AtomicUsize::new(0),
            forcing: AtomicBool::new(false),
            all_done: (Mutex::new(()), Condvar::new()),
            max_batch: self.max_batch,
            step_budget: self.step_budget,
            max_processes: self.max_processes,
        });
        Ok(Scheduler {
            handle: SchedulerHandle { inner },
            executor,
            runtime: owned_runtime,
            shutdown: Mutex::new(None),
            drop_timeout: self.drop_timeout,
        })
    }
}

impl fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("executor", &self.executor)
            .field("handlers", &self.handlers.len())
            .field("max_batch", &self.max_batch)
            .field("step_budget", &self.step_budget)
            .finish_non_exhaustive()
    }
}

/// What [`Scheduler::shutdown`] did.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Processes that finished on their own during the grace period (after their `Cancel`).
    pub graceful: usize,
    /// Processes still running at the timeout, terminated (their handles report
    /// [`ProcessError::is_cancelled`](crate::ProcessError::is_cancelled)). Every process live
    /// during shutdown is counted exactly once, as graceful or forced.
    pub forced: usize,
}

/// Runs processes: spawn, send, observe, shut down.
///
/// Dropping it shuts it down with the builder's drop timeout.
///
/// # Examples
///
/// ```
/// use procsched::{BoxError, Event, Events, InitError, Message, Payload, Process, ProcessContext, Scheduler, StepOutput};
///
/// /// Echoes the first message's payload back as its result.
/// struct Echo;
/// impl Process for Echo {
///     fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> { Ok(()) }
///     fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
///         match events.pop() {
///             Some(Event::Message(m)) => out.done(m.payload),
///             _ => out.idle(),
///         }
///         Ok(())
///     }
/// }
///
/// let sched = Scheduler::builder().workers(2).build()?;
/// let handle = sched.spawn(Echo, "run", Payload::empty())?;
/// sched.send(handle.pid(), Message::new("hello", Payload::new("world")))?;
/// assert_eq!(sched.block_on(handle)?.downcast::<&str>().unwrap(), "world");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Scheduler {
    handle: SchedulerHandle,
    executor: Executor,
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: Mutex<Option<ShutdownReport>>,
    drop_timeout: Duration,
}

/// A cheap, clonable handle to a [`Scheduler`]: spawn and send from anywhere, including from
/// inside a process (see [`ProcessContext::scheduler`]).
#[derive(Clone)]
pub struct SchedulerHandle {
    inner: Arc<Inner>,
}

struct Inner {
    executor: executor::Handle,
    handlers: HandlerSet,
    runtime: Option<tokio::runtime::Handle>,
    table: Table,
    /// Processes admitted and not yet finished.
    live: AtomicUsize,
    shutting_down: AtomicBool,
    /// Processes that finished during shutdown's grace period, and after it (forced). Each
    /// process is counted once, when it finishes, so the two always add up.
    graceful: AtomicUsize,
    forced: AtomicUsize,
    /// The grace period is over: processes stop before their next step.
    forcing: AtomicBool,
    /// Signalled when `live` drops to zero during shutdown.
    all_done: (Mutex<()>, Condvar),
    max_batch: usize,
    step_budget: usize,
    max_processes: usize,
}

impl Scheduler {
    /// A builder with default settings.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// # Ok::<(), procsched::BuildError>(())
    /// ```
    pub fn builder() -> SchedulerBuilder {
        SchedulerBuilder {
            executor: Executor::builder(),
            handlers: Vec::new(),
            runtime: None,
            max_batch: DEFAULT_MAX_BATCH,
            step_budget: DEFAULT_STEP_BUDGET,
            max_processes: usize::MAX,
            mailbox_capacity: usize::MAX,
            drop_timeout: DEFAULT_DROP_TIMEOUT,
        }
    }

    /// A clonable handle.
    pub fn handle(&self) -> &SchedulerHandle {
        &self.handle
    }

    /// See [`SchedulerHandle::spawn`].
    ///
    /// # Errors
    ///
    /// See [`SchedulerHandle::spawn`].
    pub fn spawn<P: Process>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<ProcessHandle, SpawnError> {
        self.handle.spawn(process, method, input)
    }

    /// See [`SchedulerHandle::send`].
    ///
    /// # Errors
    ///
    /// See [`SchedulerHandle::send`].
    pub fn send(&self, pid: Pid, message: Message) -> Result<(), SendError> {
        self.handle.send(pid, message)
    }

    /// See [`SchedulerHandle::terminate`].
    ///
    /// # Errors
    ///
    /// See [`SchedulerHandle::terminate`].
    pub fn terminate(&self, pid: Pid) -> Result<(), SendError> {
        self.handle.terminate(pid)
    }

    /// See [`SchedulerHandle::state`].
    pub fn state(&self, pid: Pid) -> Option<ProcessState> {
        self.handle.state(pid)
    }

    /// Number of live processes.
    pub fn live_processes(&self) -> usize {
        self.handle.live_processes()
    }

    /// The executor's per-worker counters.
    pub fn metrics(&self) -> executor::ExecutorMetrics {
        self.executor.metrics()
    }

    /// Runs `future` to completion on the calling thread (not a worker), e.g. to await a
    /// [`ProcessHandle`] from synchronous code.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.executor.block_on(future)
    }

    /// Graceful shutdown: admits no new processes, delivers [`Event::Cancel`] to every live
    /// process and keeps running them (they may still yield and receive completions); when all
    /// have finished, or `timeout` passed, terminates the rest and stops the workers. Every
    /// process's `close` has run when this returns, and no step is running.
    ///
    /// Idempotent; concurrent and later callers get the first call's report.
    ///
    /// # Examples
    ///
    /// ```
    /// # use procsched::{BoxError, Events, InitError, Payload, Process, ProcessContext, Scheduler, StepOutput};
    /// # struct Stubborn;
    /// # impl Process for Stubborn {
    /// #     fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> { Ok(()) }
    /// #     fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> { out.idle(); Ok(()) }
    /// # }
    /// use std::time::Duration;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn(Stubborn, "run", Payload::empty())?; // ignores Cancel
    /// let report = sched.shutdown(Duration::from_millis(50));
    /// assert_eq!((report.graceful, report.forced), (0, 1));
    /// assert!(sched.block_on(handle).unwrap_err().is_cancelled());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        let deadline = Instant::now() + timeout;
        let mut done = lock(&self.shutdown);
        if let Some(report) = *done {
            return report;
        }
        let inner = &self.handle.inner;
        inner.begin_shutdown();
        inner.wait_until_idle(deadline);
        // Grace is over: processes still running stop before their next step, ...
        inner.forcing.store(true, SeqCst);
        // ... and the executor drops every unfinished process future (`close` runs, handles
        // report cancellation) once the workers finished their current poll.
        let remaining = deadline.saturating_duration_since(Instant::now());
        self.executor
            .shutdown(remaining.max(executor::DROP_SHUTDOWN_TIMEOUT));
        let report = ShutdownReport {
            graceful: inner.graceful.load(SeqCst),
            forced: inner.forced.load(SeqCst),
        };
        tracing::debug!(?report, "scheduler shut down");
        *done = Some(report);
        report
    }

    /// [`shutdown`](Self::shutdown) for async code: the grace period is awaited (on a helper
    /// thread), not blocked on, so it may be called from a task of any runtime. Only the final
    /// stop of the workers — at most the duration of one poll — blocks.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// let report = futures::executor::block_on(sched.shutdown_async(Duration::from_secs(1)));
    /// assert_eq!((report.graceful, report.forced), (0, 0));
    /// # Ok::<(), procsched::BuildError>(())
    /// ```
    pub async fn shutdown_async(&self, timeout: Duration) -> ShutdownReport {
        let deadline = Instant::now() + timeout;
        let inner = self.handle.inner.clone();
        inner.begin_shutdown();
        let (tx, rx) = futures::channel::oneshot::channel();
        let waiter = std::thread::Builder::new()
            .name("procsched-shutdown".to_owned())
            .spawn(move || {
                inner.wait_until_idle(deadline);
                let _ = tx.send(());
            });
        if waiter.is_ok() {
            let _ = rx.await;
        }
        self.shutdown(deadline.saturating_duration_since(Instant::now()))
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shutdown(self.drop_timeout);
        if let Some(runtime) = self.runtime.take() {
            // Never blocks, and is allowed inside an async context (a plain drop is not).
            runtime.shutdown_background();
        }
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

/// Delivers shutdown's `Cancel` to the process the cell hosts, if any.
fn cancel(cell: &ProcessCell) {
    let _ = cell.deliver_current(Event::Cancel {
        reason: CancelReason::Shutdown,
    });
}

impl SchedulerHandle {
    /// Starts a process: runs `init(method, input)` on the calling thread, then queues its first
    /// step. Works from sync code, any async code and from inside a process.
    ///
    /// # Errors
    ///
    /// [`SpawnError::Init`] / [`SpawnError::InitPanicked`] if `init` failed (the process never
    /// steps; its `close` was called), [`SpawnError::ShuttingDown`] during shutdown,
    /// [`SpawnError::Limit`] at the process limit.
    pub fn spawn<P: Process>(
        &self,
        mut process: P,
        method: &str,
        input: Payload,
    ) -> Result<ProcessHandle, SpawnError> {
        let inner = &self.inner;
        // Admission: reserve a slot first, so concurrent spawns can never overshoot, and so that
        // shutdown — which sets its flag, fences, then waits for `live` to reach zero — either
        // makes us fail here or waits for this process (the fences make it a Dekker pair). SeqCst
        // accesses without the fence would do in the C++ model, but loom models them as AcqRel
        // and then finds a spawn that shutdown misses; the fence keeps the proof checkable.
        let live_before = inner.live.fetch_add(1, AcqRel);
        fence(SeqCst);
        if inner.shutting_down.load(Relaxed) {
            inner.release_slot();
            return Err(SpawnError::ShuttingDown);
        }
        if live_before >= inner.max_processes {
            inner.release_slot();
            return Err(SpawnError::Limit(inner.max_processes));
        }
        let Some((pid, cell)) = inner.table.claim() else {
            inner.release_slot();
            return Err(SpawnError::Limit(table::MAX_SLOTS));
        };
        // The cell is open from here on: events sent to `pid` during `init` wait for the first
        // step.
        let ctx = ProcessContext::new(pid, self);
        let initialised = catch_unwind(AssertUnwindSafe(|| process.init(&ctx, method, input)));
        let failure = match initialised {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(SpawnError::Init(error)),
            Err(panic) => Some(SpawnError::InitPanicked(panic_message(&*panic))),
        };
        if let Some(error) = failure {
            if catch_unwind(AssertUnwindSafe(|| process.close())).is_err() {
                tracing::warn!(%pid, "close panicked after a failed init");
            }
            cell.close();
            inner.table.release(pid, &cell);
            inner.release_slot();
            return Err(error);
        }
        // Shutdown may have started since the check above: make sure this process is cancelled.
        // Shutdown's scan locks every cell after setting its flag. If it locked ours after we
        // opened it, it cancelled us; if before, our `open` took the lock after the scan released
        // it, so this load sees the flag. (A cell the scan could not find yet — created just now —
        // is covered by the fence in `Table::create_cell`.)
        if inner.shutting_down.load(Acquire) {
            cancel(&cell);
        }
        let future = ProcessFuture::new(process, pid, cell, inner.clone());
        let join = inner.executor.spawn(future);
        Ok(ProcessHandle::new(pid, join))
    }

    /// Delivers `message` to process `pid`, waking it if it is blocked or idle.
    ///
    /// # Errors
    ///
    /// [`SendError::NotFound`] if no live process has this PID (never spawned or finished);
    /// [`SendError::Closed`] if it is finishing; [`SendError::MailboxFull`] if the message was
    /// dropped by the mailbox capacity or its topic budget (see [`Message::with_budget`]).
    pub fn send(&self, pid: Pid, message: Message) -> Result<(), SendError> {
        let Some(cell) = self.inner.table.get(pid) else {
            return Err(SendError::NotFound(pid));
        };
        match cell.deliver(pid.generation(), Event::Message(message)) {
            Admission::Accepted => Ok(()),
            Admission::Dropped => Err(SendError::MailboxFull(pid)),
            Admission::Closed => Err(SendError::Closed(pid)),
            Admission::Gone => Err(SendError::NotFound(pid)),
        }
    }

    /// Stops process `pid`: it gets no more steps (a running step finishes first), its
    /// outstanding handler tasks are aborted, its `close` runs, and its handle resolves to
    /// [`ProcessError::is_terminated`](crate::ProcessError::is_terminated).
    ///
    /// # Errors
    ///
    /// [`SendError::NotFound`] for an unknown or finished PID; [`SendError::Closed`] if it is
    /// already finishing.
    pub fn terminate(&self, pid: Pid) -> Result<(), SendError> {
        let admission = match self.inner.table.get(pid) {
            Some(cell) => cell.request_terminate(pid.generation()),
            None => Admission::Gone,
        };
        match admission {
            Admission::Closed => Err(SendError::Closed(pid)),
            Admission::Gone => Err(SendError::NotFound(pid)),
            Admission::Accepted | Admission::Dropped => Ok(()),
        }
    }

    /// The observable state of `pid`, or `None` if no live process has this PID.
    pub fn state(&self, pid: Pid) -> Option<ProcessState> {
        self.inner.table.get(pid)?.state(pid.generation())
    }

    /// Number of live processes (spawned and not finished).
    pub fn live_processes(&self) -> usize {
        self.inner.live.load(Acquire)
    }

    /// `true` once shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutting_down.load(Acquire)
    }

    /// Number of processes in the process table (takes every cell's lock; for diagnostics).
    pub fn registered_processes(&self) -> usize {
        self.inner.table.len()
    }
}

impl fmt::Debug for SchedulerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerHandle")
            .field("live", &self.inner.live.load(Relaxed))
            .field("shutting_down", &self.inner.shutting_down.load(Relaxed))
            .finish_non_exhaustive()
    }
}

impl Inner {
    /// Stops admission and delivers `Cancel` to every live process, once.
    fn begin_shutdown(&self) {
        if self.shutting_down.swap(true, SeqCst) {
            return;
        }
        // Pairs with `spawn`'s SeqCst admission and with the fence after a cell is created
        // (`Table::claim`): a racing spawn either sees the flag, or is counted in `live` (so
        // shutdown waits for it) and its cell is reached by this scan.
        fence(SeqCst);
        tracing::debug!("scheduler shutdown: cancelling every process");
        for cell in self.table.cells() {
            cancel(cell);
        }
    }

    fn release_slot(&self) {
        if self.live.fetch_sub(1, AcqRel) == 1 && self.shutting_down.load(Acquire) {
            let _guard = lock(&self.all_done.0);
            self.all_done.1.notify_all();
        }
    }

    /// Waits until no process is live or `deadline` passes.
    fn wait_until_idle(&self, deadline: Instant) {
        let mut guard = lock(&self.all_done.0);
        loop {
            let live = self.live.load(Acquire);
            let now = Instant::now();
            if live == 0 || (now >= deadline && !cfg!(loom)) {
                return;
            }
            guard = match self.all_done.1.wait_timeout(guard, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

impl Host for Inner {
    type Outstanding = tokio::task::AbortHandle;

    fn dispatch(
        &self,
        pid: Pid,
        cell: &Arc<ProcessCell>,
        yielded: Yield,
        completions: &mut Events,
    ) -> Option<Self::Outstanding> {
        dispatch::dispatch(
            &self.handlers,
            self.runtime.as_ref(),
            pid,
            cell,
            yielded,
            completions,
        )
    }

    fn abort(&self, outstanding: Self::Outstanding) {
        outstanding.abort();
    }

    fn is_finished(&self, outstanding: &Self::Outstanding) -> bool {
        outstanding.is_finished()
    }

    fn finished(&self, pid: Pid, cell: &ProcessCell) {
        if self.shutting_down.load(Acquire) {
            let counter = if self.forcing.load(Acquire) {
                &self.forced
            } else {
                &self.graceful
            };
            counter.fetch_add(1, AcqRel);
        }
        self.table.release(pid, cell);
        self.release_slot();
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }

    fn step_budget(&self) -> usize {
        self.step_budget
    }

    fn should_stop(&self) -> bool {
        self.forcing.load(Relaxed)
    }
}
