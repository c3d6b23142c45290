//! [`Scheduler`]: the owner of the workers and the handler runtime; its shutdown, blocking and
//! async, is driven by `shutdown.rs`.

use super::blocking;
use super::builder::SchedulerBuilder;
use super::error::{SendError, SpawnError};
use super::handle::SchedulerHandle;
use super::info::ProcessInfo;
use super::lifecycle::ShutdownReport;
use super::metrics::SchedulerMetrics;
use super::process_handle::ProcessHandle;
use super::shared::Inner;
use super::shutdown::{self, Shutdown};
use super::spawn_options::SpawnOptions;
use crate::executor::Executor;
use crate::loom::Arc;
use crate::process::{Message, Payload, Pid, Process, ProcessState};
use std::fmt;
use std::future::Future;
use std::time::Duration;

/// Runs processes: spawn, send, observe, shut down.
///
/// It owns the workers; everything else a program does with it is its [`SchedulerHandle`]'s
/// (`Clone`, for other threads and tasks), which it dereferences to: `sched.addr::<M>(pid)`,
/// `sched.whereis(name)`, `sched.cancel(pid)`, `sched.link(a, b)` reach the handle's methods.
/// So does `clone()`: a `Scheduler` is not `Clone`, and `sched.clone()` is a `SchedulerHandle`
/// (dropping that shuts nothing down; write `sched.handle().clone()` to say so).
///
/// Dropping it shuts it down with the builder's drop timeout; inside an async context or on a
/// worker thread the drop does not wait: it cancels every process and leaves the rest of the
/// shutdown to a background thread. That thread holds the scheduler's worker threads (and the
/// runtime it built for its processes, if any) until its processes finish or the drop timeout
/// passes: a loop that creates and drops schedulers inside async code, with bodies that ignore
/// their cancel, keeps up to `drop timeout + 50 ms` worth of schedulers' threads alive at once
/// (1 000 drops in a tight loop peaked at 844 threads in a trial). Await
/// [`shutdown_async`](Self::shutdown_async) before dropping to bound it.
///
/// A scheduler that adopted the caller's tokio runtime (built inside a multi-thread one, or given
/// [`tokio_handle`](crate::config::SchedulerBuilder::tokio_handle)) serves its bodies' tokio
/// timers and I/O from that runtime: drop the scheduler (or shut it down) before the runtime.
/// If the runtime goes first, a body that then awaits a timer panics with tokio's message; the
/// panic is caught and fails that process only.
///
/// # Examples
///
/// ```
/// use procsched::{BoxError, Message, Payload, Scheduler, state_machine::{Event, Events, Process, ProcessContext, StepOutput}, error::InitError};
///
/// /// Echoes the first message's payload back as its result.
/// struct Echo;
/// impl Process for Echo {
///     type Output = Payload;
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
    /// The threads, and their shutdown (`shutdown.rs`).
    shutdown: Shutdown,
}

impl std::ops::Deref for Scheduler {
    type Target = SchedulerHandle;

    /// The scheduler's handle ([`handle`](Scheduler::handle)).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let echo = sched.spawn_fn(|cx: ProcessCx<u64>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// sched.register("echo", echo.pid())?;             // a `SchedulerHandle` method
    /// let addr = sched.addr::<u64>(sched.whereis("echo").unwrap());
    /// addr.send(7)?;
    /// assert_eq!(sched.block_on(echo)?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn deref(&self) -> &SchedulerHandle {
        &self.handle
    }
}

impl Scheduler {
    /// A builder with default settings.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn builder() -> SchedulerBuilder {
        SchedulerBuilder::new()
    }

    pub(super) fn from_parts(
        inner: Arc<Inner>,
        executor: Executor,
        runtime: Option<tokio::runtime::Runtime>,
        drop_timeout: Duration,
    ) -> Scheduler {
        Scheduler {
            handle: SchedulerHandle { inner },
            shutdown: Shutdown::new(executor, runtime, drop_timeout),
        }
    }

    fn inner(&self) -> &Inner {
        &self.handle.inner
    }

    /// A clonable handle.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// let handle = sched.handle().clone();
    /// std::thread::spawn(move || assert_eq!(handle.live_processes(), 0)).join().unwrap();
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn handle(&self) -> &SchedulerHandle {
        &self.handle
    }

    /// See [`SchedulerHandle::spawn`].
    ///
    /// # Errors
    ///
    /// See [`SchedulerHandle::spawn`].
    ///
    /// # Examples
    ///
    /// See [`SchedulerHandle::spawn`].
    pub fn spawn<P: Process>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<ProcessHandle<P::Output>, SpawnError> {
        self.handle.spawn(process, method, input)
    }

    /// See [`SchedulerHandle::spawn_fn`].
    ///
    /// # Errors
    ///
    /// See [`SchedulerHandle::spawn_fn`].
    ///
    /// # Examples
    ///
    /// See [`ProcessCx`](crate::ProcessCx).
    pub fn spawn_fn<F, Fut, T, E, M>(&self, body: F) -> Result<ProcessHandle<T, M>, SpawnError>
    where
        F: FnOnce(crate::ProcessCx<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<crate::process::BoxError>,
        M: Send + 'static,
    {
        self.handle.spawn_fn(body)
    }

    /// See [`SchedulerHandle::spawn_with`].
    ///
    /// # Errors
    ///
    /// See [`SchedulerHandle::spawn`].
    ///
    /// # Examples
    ///
    /// See [`SchedulerHandle::spawn_with`].
    pub fn spawn_with<P: Process>(
        &self,
        opts: SpawnOptions,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<ProcessHandle<P::Output>, SpawnError> {
        self.handle.spawn_with(opts, process, method, input)
    }

    /// See [`SchedulerHandle::spawn_fn_with`].
    ///
    /// # Errors
    ///
    /// See [`SchedulerHandle::spawn_fn`].
    ///
    /// # Examples
    ///
    /// See [`SpawnOptions`].
    pub fn spawn_fn_with<F, Fut, T, E, M>(
        &self,
        opts: SpawnOptions,
        body: F,
    ) -> Result<ProcessHandle<T, M>, SpawnError>
    where
        F: FnOnce(crate::ProcessCx<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<crate::process::BoxError>,
        M: Send + 'static,
    {
        self.handle.spawn_fn_with(opts, body)
    }

    /// See [`SchedulerHandle::send`].
    ///
    /// # Errors
    ///
    /// See [`SchedulerHandle::send`].
    ///
    /// # Examples
    ///
    /// See [`Scheduler`].
    pub fn send(&self, pid: Pid, message: Message) -> Result<(), SendError> {
        self.handle.send(pid, message)
    }

    /// Monitors `pid` from outside any process ([`SchedulerHandle::monitor`]): the returned
    /// future resolves to its one `Down`.
    ///
    /// # Examples
    ///
    /// See [`SchedulerHandle::monitor`].
    pub fn monitor(&self, pid: Pid) -> crate::supervision::Monitor {
        self.handle().monitor(pid)
    }

    /// See [`SchedulerHandle::terminate`].
    ///
    /// # Errors
    ///
    /// See [`SchedulerHandle::terminate`].
    ///
    /// # Examples
    ///
    /// See [`SchedulerHandle::terminate`].
    pub fn terminate(&self, pid: Pid) -> Result<(), SendError> {
        self.handle.terminate(pid)
    }

    /// See [`SchedulerHandle::state`].
    ///
    /// # Examples
    ///
    /// See [`SchedulerHandle::state`].
    pub fn state(&self, pid: Pid) -> Option<ProcessState> {
        self.handle.state(pid)
    }

    /// Number of live processes: those inside `init` and finishing included
    /// ([`SchedulerHandle::live_processes`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// assert_eq!(sched.live_processes(), 0);
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn live_processes(&self) -> usize {
        self.handle.live_processes()
    }

    /// See [`SchedulerHandle::metrics`].
    ///
    /// # Examples
    ///
    /// See [`SchedulerMetrics`].
    pub fn metrics(&self) -> SchedulerMetrics {
        self.handle.metrics()
    }

    /// See [`SchedulerHandle::process_info`].
    ///
    /// # Examples
    ///
    /// See [`ProcessInfo`].
    pub fn process_info(&self, pid: Pid) -> Option<ProcessInfo> {
        self.handle.process_info(pid)
    }

    /// See [`SchedulerHandle::processes`].
    ///
    /// # Examples
    ///
    /// See [`SchedulerHandle::processes`].
    pub fn processes(&self) -> impl Iterator<Item = ProcessInfo> + '_ {
        self.handle.processes()
    }

    /// Runs `future` to completion on the calling thread, e.g. to await a [`ProcessHandle`]
    /// from synchronous code.
    ///
    /// `future` runs inside the tokio runtime the scheduler's processes use (its handler
    /// runtime, or the one it builds for them when nothing else supplies one), unless the
    /// calling thread has entered one itself: it may await tokio timers and I/O, as a body may
    /// (`tokio::time::timeout(limit, handle)` as a hang guard, say — not under tokio's paused
    /// clock, see [`ProcessHandle`]). A scheduler built inside a current-thread runtime uses a
    /// runtime of its own, so this works wherever the scheduler was built; one given a
    /// current-thread runtime explicitly ([`tokio_handle`](SchedulerBuilder::tokio_handle))
    /// has its timers and I/O served only while another thread is inside that runtime's
    /// `Runtime::block_on`: otherwise `block_on` waits for ever (tokio can tell no one whether
    /// a runtime is driven), hang guard included.
    ///
    /// # Panics
    ///
    /// If called from a thread that drives async work — inside a tokio runtime (a task,
    /// `#[tokio::main]`, `#[tokio::test]`, a `spawn_blocking` closure, which runs in the
    /// runtime's context) or on a procsched worker (inside a step) — where
    /// blocking could deadlock: `.await` the future there instead. That includes `future`
    /// itself: a blocking call in it (a nested `block_on`, `shutdown`) panics the same way,
    /// naming the nesting; it awaits (`shutdown_async`) instead.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// assert_eq!(sched.block_on(async { 6 * 7 }), 42);
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        blocking::assert_may_block("Scheduler::block_on", "future.await");
        // Not under loom: tokio compiles its drivers out there, and no model awaits tokio.
        #[cfg(not(loom))]
        let _context = match tokio::runtime::Handle::try_current() {
            Ok(_) => None,
            Err(_) => self
                .inner()
                .process_runtime_looking(super::outlived::Caller::BlockOn)
                .map(|runtime| runtime.enter()),
        };
        let _inside = blocking::ThreadMark::in_block_on();
        self.shutdown.executor().block_on(future)
    }

    /// Graceful shutdown: admits no new processes, delivers [`Event::Cancel`](crate::state_machine::Event::Cancel)
    /// to every live process and keeps running them (they may still yield and receive
    /// completions) until all have finished or `timeout` passed; then stops the rest before their
    /// next step and stops the workers. A supervisor's children are not cancelled directly: their
    /// supervisor stops them in reverse start order, each by its
    /// [`ChildShutdown`](crate::supervision::ChildShutdown) policy, so a tree shuts down as
    /// Erlang/OTP's does (the `timeout` still bounds it all). A child no longer linked to its
    /// supervisor (it trapped its supervisor's exit, or unlinked) is cancelled like any other.
    ///
    /// Returns within `timeout + 2 ×` [`FORCED_STOP_WAIT`](super::FORCED_STOP_WAIT), whatever
    /// the number of processes (the workers' wait, then the wait for the forced processes'
    /// `close` calls, which run on threads of their own; the processes the grace period was too
    /// short to deliver a `Cancel` to are forced with the rest) with every process counted once
    /// in the [`ShutdownReport`]: `graceful` and `forced`
    /// ones are closed; a process still inside `init`, a `step` or `close` then cannot be
    /// preempted and is `abandoned` — it is closed when its call returns
    /// ([`wait_for_abandoned`](Self::wait_for_abandoned) waits for that). A forced `close` that
    /// blocks is `abandoned` too, and the processes queued behind it are closed by another
    /// thread (`abandoned` as well if that thread has not reached them in time — as are, with
    /// many processes, the ones the forced stop had no time to close: closed after it returns).
    ///
    /// Idempotent; concurrent and later callers get the first call's report, waiting for it if
    /// it is not made yet — and keep to the first call's `timeout` while it is in progress: a
    /// concurrent call with a shorter one (a signal handler's) does not cut its grace period
    /// short. A call dropped before it resolved (a `shutdown_async` under a timeout) gives its
    /// timeout up: the calls still in progress keep to the next one's from then on, down to
    /// their own. One exception, so that it cannot deadlock: a call from user code the
    /// forced stop runs (a drop guard or `close` of a forced process that shuts the application
    /// down with it) returns at once with the report *so far* — the processes finished until
    /// then, and every one not yet closed, its own among them, counted `abandoned`, so
    /// [`is_complete`](ShutdownReport::is_complete) is `false`. The first call's report is the
    /// final one. (A forced process's cleanup that *waits* for another
    /// thread calling `shutdown` waits until the forced stop gives up on it — the process is
    /// then `abandoned` — and that thread gets the report.)
    ///
    /// # Panics
    ///
    /// If called from a thread that drives async work (see [`block_on`](Self::block_on)): use
    /// [`shutdown_async`](Self::shutdown_async) there.
    ///
    /// # Examples
    ///
    /// ```
    /// # use procsched::{BoxError, Payload, Scheduler, error::InitError, state_machine::{Events, Process, ProcessContext, StepOutput}};
    /// # struct Stubborn;
    /// # impl Process for Stubborn {
    /// #     type Output = Payload;
    /// #     fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> { Ok(()) }
    /// #     fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> { out.idle(); Ok(()) }
    /// # }
    /// use std::time::Duration;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn(Stubborn, "run", Payload::empty())?; // ignores Cancel
    /// let report = sched.shutdown(Duration::from_millis(50));
    /// assert_eq!((report.graceful, report.forced, report.abandoned), (0, 1, 0));
    /// assert!(sched.block_on(handle).unwrap_err().is_cancelled());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        // A forced process's cleanup calling this runs on a closer thread, which may block
        // (`blocking.rs`, `ThreadMark::may_block`); this scheduler's own stop then returns at once.
        blocking::assert_may_block(
            "Scheduler::shutdown",
            "Scheduler::shutdown_async(timeout).await",
        );
        self.shutdown.shutdown(&self.handle.inner, timeout)
    }

    /// [`shutdown`](Self::shutdown) for async code, on any executor (tokio of either flavour,
    /// `futures::executor`, …): the grace period is awaited, not blocked on, so handlers running
    /// on the same runtime — even a current-thread one — keep running. Only the final stop
    /// blocks: at most `2 ×` [`FORCED_STOP_WAIT`](super::FORCED_STOP_WAIT) (the workers, then
    /// the forced processes' `close` calls). Its deadline needs no runtime's timer: one thread for the whole program
    /// (`procsched-timer`, started at the first such wait and shared by every scheduler) wakes
    /// it. Concurrent and re-entrant calls behave as [`shutdown`](Self::shutdown)'s do.
    ///
    /// Dropped before it resolves (a `tokio::time::timeout` around it, a `select!` it lost),
    /// the shutdown stays begun — spawns are refused, processes have their cancel — but nothing
    /// forces the processes that ignore it: call `shutdown_async` (or `shutdown`) again to
    /// finish it, or drop the [`Scheduler`], whose drop stops what is left.
    ///
    /// Awaited inside the body of one of this scheduler's own processes, it shuts down every
    /// *other* process (the grace period ends as soon as they have all finished, and the final
    /// stop does not wait for the caller's worker): the caller is still inside its step when the
    /// report is made, so the report counts it `abandoned`, and its handle reports
    /// cancellation however its body ends ([`ProcessError::is_cancelled`](crate::error::ProcessError::is_cancelled)).
    /// The call then lives only as long as that body: if the shutdown itself ends the caller —
    /// the exit signal of a linked process that ends `Shutdown`, its supervisor stopping it —
    /// the call is dropped as above, and nothing forces the processes that ignore their
    /// cancel. So a process that shuts its scheduler down should trap exits and not be a
    /// supervised child (or one with [`ChildShutdown::Infinity`](crate::supervision::ChildShutdown::Infinity)),
    /// or, better, hand the call to code outside the scheduler (a tokio task, the main
    /// thread). Two processes awaiting it at once each wait for the other: the grace period
    /// then runs to its end.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// let report = futures::executor::block_on(sched.shutdown_async(Duration::from_secs(1)));
    /// assert_eq!(report.total(), 0);
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub async fn shutdown_async(&self, timeout: Duration) -> ShutdownReport {
        self.shutdown
            .shutdown_async(&self.handle.inner, timeout)
            .await
    }

    /// After a shutdown: waits until every abandoned process has returned from user code and
    /// been closed, or `timeout` passes. Returns `true` if no process is left. Before shutdown
    /// it does not wait: it tells whether no process is live.
    ///
    /// # Panics
    ///
    /// If called from a thread that drives async work (see [`block_on`](Self::block_on)): use
    /// [`wait_for_abandoned_async`](Self::wait_for_abandoned_async) there.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// let report = sched.shutdown(Duration::from_millis(10));
    /// assert!(sched.wait_for_abandoned(Duration::from_secs(1)));
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    #[track_caller]
    pub fn wait_for_abandoned(&self, timeout: Duration) -> bool {
        blocking::assert_may_block(
            "Scheduler::wait_for_abandoned",
            "Scheduler::wait_for_abandoned_async().await",
        );
        shutdown::wait_for_abandoned(self.inner(), timeout)
    }

    /// Async [`wait_for_abandoned`](Self::wait_for_abandoned), without a timeout (wrap it in
    /// your runtime's timeout). Before shutdown it resolves when no process is live.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// futures::executor::block_on(async {
    ///     let report = sched.shutdown_async(Duration::from_millis(10)).await;
    ///     sched.wait_for_abandoned_async().await;
    /// });
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub async fn wait_for_abandoned_async(&self) {
        shutdown::wait_for_abandoned_async(self.inner()).await;
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shutdown.on_drop(&self.handle.inner);
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}
