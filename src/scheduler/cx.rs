//! [`ProcessCx`]: what an `async fn` process gets — its identity, its yields and receives, its
//! scheduler.
//!
//! The context lives here, in the scheduler layer, because it holds the scheduler's handle; the
//! futures it makes (`Call`, `Recv`, …) are the process layer's, bound to the process by its
//! [`Owner`] (`process/async_fn/scope.rs`). The async-fn adapter never sees a `ProcessCx`: it
//! calls the start closure [`SchedulerHandle::spawn_fn`] gives it with the owner, and the
//! closure builds the context (`process/async_fn/mod.rs`, "The door to the scheduler").

use super::addr::Addr;
use super::error::SpawnError;
use super::handle::SchedulerHandle;
use super::names::RegisterError;
use super::process_handle::ProcessHandle;
use crate::dispatch::Run;
use crate::process::async_fn::forget_down;
use crate::process::context::Owner;
use crate::process::{BoxError, Call, Cancelled, Command, Message, Pid, Recv, RecvMessage};
use crate::process::{MonitorRef, RecvAny, RecvDown, RecvExit, RecvSignal, YieldNow};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// What an async-fn process gets: its identity and the means to yield, receive and spawn.
/// Cheap to clone; `Send + Sync`.
///
/// `M` is the type of the messages the process receives: [`recv`](Self::recv) resolves to an
/// `M`, and its address ([`addr`](Self::addr), its handle's `addr`) sends only `M`s — a wrong
/// type does not compile. Several kinds of message: an enum. The default, [`Message`], is the
/// untyped form (topic, sender, payload), for processes that route by topic.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// struct Double(u64);
/// procsched::command!(Double => u64);
///
/// let sched = Scheduler::builder()
///     .workers(1)
///     .inline_handler(|Double(n): Double| Ok::<_, BoxError>(n * 2))
///     .build()?;
/// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
///     let doubled = cx.call(Double(21)).await?;
///     Ok::<_, BoxError>(doubled)
/// })?;
/// assert_eq!(sched.block_on(handle)?, 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ProcessCx<M = Message> {
    /// This process among every host's: its futures remember it (`process/async_fn/scope.rs`).
    owner: Owner,
    /// The scheduler running it.
    sched: SchedulerHandle,
    /// `fn() -> M`: the process only receives `M`s; the context is `Send + Sync` whatever `M` is.
    _receives: PhantomData<fn() -> M>,
}

impl<M> Clone for ProcessCx<M> {
    fn clone(&self) -> Self {
        ProcessCx {
            owner: self.owner,
            sched: self.sched.clone(),
            _receives: PhantomData,
        }
    }
}

impl<M: 'static> ProcessCx<M> {
    /// The context of the process `owner`, run by `sched` (the start closure `spawn_fn` hands to
    /// the async-fn adapter: `process/async_fn/mod.rs`, "The door to the scheduler").
    pub(crate) fn new(owner: Owner, sched: SchedulerHandle) -> ProcessCx<M> {
        ProcessCx {
            owner,
            sched,
            _receives: PhantomData,
        }
    }

    /// This process's PID.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move { Ok::<_, BoxError>(cx.pid()) })?;
    /// let pid = handle.pid();
    /// assert_eq!(sched.block_on(handle)?, pid);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pid(&self) -> Pid {
        self.owner.pid
    }

    /// Yields `command` to its handler and resolves to the reply. The process is `Blocked`
    /// until the reply arrives.
    ///
    /// A call in flight is not cut short by the process's cancel (shutdown, `cancel`): a
    /// graceful shutdown lets the handler finish and the body have its reply within the grace
    /// period, and the body sees the cancel at its next receive. To stop waiting at the
    /// cancel, race the call against [`cancelled`](Self::cancelled) (`tokio::select!`); past
    /// the grace period the process is stopped wherever it waits. A call dropped unfinished (the
    /// losing branch of such a race) aborts its async handler's task ([`Call`]'s docs).
    ///
    /// # Examples
    ///
    /// See [`ProcessCx`].
    pub fn call<C: Command>(&self, command: C) -> Call<C> {
        Call::new(command, None, self.owner)
    }

    /// [`call`](Self::call) with a deadline: past it the call fails with
    /// [`CommandError::TimedOut`](crate::error::CommandError::TimedOut) (async and blocking handlers).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::error::CommandError;
    /// use std::time::Duration;
    ///
    /// struct Never;
    /// procsched::command!(Never => ());
    ///
    /// let sched = Scheduler::builder()
    ///     .workers(1)
    ///     .async_handler(|Never: Never| std::future::pending::<Result<(), BoxError>>())
    ///     .build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let late = cx.call_within(Never, Duration::from_millis(10)).await;
    ///     Ok::<_, BoxError>(matches!(late, Err(CommandError::TimedOut)))
    /// })?;
    /// assert!(sched.block_on(handle)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn call_within<C: Command>(&self, command: C, timeout: Duration) -> Call<C> {
        Call::new(command, Some(timeout), self.owner)
    }

    /// The next message, an `M`. The process is `Idle` while it waits. Fails with
    /// [`RecvError::Cancelled`](crate::error::RecvError::Cancelled) (once) when the process is asked to finish — `?` then ends the
    /// body as *cancelled* (`ProcessError::is_cancelled`), not failed — with
    /// [`RecvError::Overflow`](crate::error::RecvError::Overflow) when a topic's budget dropped messages, and with
    /// [`RecvError::TypeMismatch`](crate::error::RecvError::TypeMismatch) (dropping the message) if an untyped sender sent something
    /// that is not an `M` (a typed [`Addr<M>`](crate::Addr) cannot).
    ///
    /// A cancel queues behind the messages already in the mailbox, and is reported as soon as
    /// a step has delivered it: ahead of the messages delivered to the body and not received
    /// yet, after those still queued. Each step delivers up to `max_batch` messages, and steps
    /// go on delivering while the body awaits something other than a receive (a timer, a
    /// call): a body that was not receiving may find the cancel ahead of its whole backlog,
    /// one that receives all along ahead of at most a batch (a backlog larger than that delays
    /// it; a shutdown whose grace period ends first forces the process). A body that
    /// must handle the messages it went ahead of can go on receiving after the `Cancelled`:
    /// the next receives return them, then wait — until a shutdown's grace period ends, and
    /// outside a shutdown (a [`cancel`](crate::SchedulerHandle::cancel)) for as long as the
    /// process lives, so drain with `cx.recv().now_or_never()` (from `futures::FutureExt`)
    /// until it gives `None`.
    ///
    /// **In `tokio::select!`**: the receive is cancel-safe (a [`Recv`] dropped
    /// unfinished took no message), but the cancellation is reported **once**, to whichever
    /// receive meets it first — `recv`, `recv_message`, `recv_signal`, `recv_any`, `cancelled`.
    /// A `select!` over two of them sees it in one branch only: handle `Cancelled` in every
    /// branch that can get it, or wait in one [`recv_any`](Self::recv_any), which reports
    /// messages, signals and the cancellation alike.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// enum Account { Deposit(u64), Close }
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let account = sched.spawn_fn(|cx: ProcessCx<Account>| async move {
    ///     let mut balance = 0;
    ///     loop {
    ///         match cx.recv().await? {
    ///             Account::Deposit(n) => balance += n,
    ///             Account::Close => return Ok::<_, BoxError>(balance),
    ///         }
    ///     }
    /// })?;
    /// let addr = account.addr();
    /// addr.send(Account::Deposit(40))?;
    /// addr.send(Account::Deposit(2))?;
    /// addr.send(Account::Close)?;
    /// assert_eq!(sched.block_on(account)?, 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recv(&self) -> Recv<M> {
        Recv::new(self.owner)
    }

    /// The next message, whole and untyped: its topic, sender and payload, whatever was sent.
    /// Fails as [`recv`](Self::recv) does (except on types).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let message = cx.recv_message().await?;
    ///     Ok::<_, BoxError>(message.topic.into_owned())
    /// })?;
    /// sched.send(handle.pid(), Message::new("ping", Payload::empty()))?;
    /// assert_eq!(sched.block_on(handle)?, "ping");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recv_message(&self) -> RecvMessage {
        RecvMessage::new(self.owner)
    }

    /// Resolves when the process is asked to finish (shutdown), with the reason, as often as it
    /// is awaited. Having resolved, it has told the body: the asks the body starts after it are
    /// cleanup, and proceed, and its receives no longer report the cancellation — they return
    /// the messages still queued (drain them with `cx.recv().now_or_never()` until `None`),
    /// then wait. (An ask or a `send_wait` that fails with the cancellation does not spare the
    /// receives their report: a body that handles that error and goes back to `recv().await?`
    /// still ends on it.)
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use std::time::Duration;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let Err(why) = cx.cancelled().await;           // never `Ok`: it resolves with the reason
    ///     assert!(why.is_cancelled());
    ///     Ok::<_, BoxError>("cleaned up")                 // or `cx.cancelled().await?`: ends as cancelled
    /// })?;
    /// let report = sched.shutdown(Duration::from_secs(5));
    /// assert_eq!(report.graceful, 1);
    /// assert_eq!(sched.block_on(handle)?, "cleaned up");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancelled(&self) -> Cancelled {
        Cancelled::new(self.owner)
    }

    /// Lets other ready work run before the body continues (a `Continue` step): for long
    /// computations split into parts. It does not report a cancel (nor does a call): a body
    /// that never receives runs on after one — await [`cancelled`](Self::cancelled) beside
    /// its work (`select!`) to stop on it.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let mut sum = 0u64;
    ///     for chunk in 0..4u64 {
    ///         sum += (chunk * 1_000..(chunk + 1) * 1_000).sum::<u64>();
    ///         cx.yield_now().await;
    ///     }
    ///     Ok::<_, BoxError>(sum)
    /// })?;
    /// assert_eq!(sched.block_on(handle)?, (0..4_000u64).sum::<u64>());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn yield_now(&self) -> YieldNow {
        YieldNow::new(self.owner)
    }
}

impl<M> ProcessCx<M> {
    /// Drops `value` — a user value a body the crate wrote holds (a supervisor's child spec,
    /// an exit reason that may hold a child's error) — with a panic of its destructor
    /// contained and counted on this process (`process/contain.rs`): the body goes on.
    pub(crate) fn dispose<T>(&self, value: T) {
        self.dispose_each(std::iter::once(value));
    }

    /// [`dispose`](Self::dispose) for each of `items`, one at a time: a collection's own drop
    /// glue would abort on a second panicking destructor.
    pub(crate) fn dispose_each<T>(&self, items: impl IntoIterator<Item = T>) {
        let panics = crate::process::drop_each(items);
        crate::process::async_fn::count_destructor_panics(self.owner, panics);
    }
}

impl<M> fmt::Debug for ProcessCx<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessCx")
            .field("pid", &self.owner.pid)
            .finish_non_exhaustive()
    }
}

/// Links, monitors and names: what a body does with other processes' ends
/// ([`SchedulerHandle::link`] has the semantics).
impl<M: Send + 'static> ProcessCx<M> {
    /// Traps exits (or stops trapping them): a linked process's end arrives as an
    /// [`Exit`](crate::supervision::Exit) signal ([`recv_signal`](Self::recv_signal),
    /// [`recv_exit`](Self::recv_exit)) instead of ending this process too.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let watcher = sched.spawn_fn(|cx: ProcessCx<()>| async move {
    ///     cx.trap_exit(true);
    ///     let child = cx.spawn_link(|_: ProcessCx| async { Err::<(), BoxError>("crash".into()) })?;
    ///     let exit = cx.recv_exit().await?;
    ///     Ok::<_, BoxError>((exit.pid == child, exit.reason.is_failed()))
    /// })?;
    /// assert_eq!(sched.block_on(watcher)?, (true, true));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn trap_exit(&self, trap: bool) {
        // This process runs (it is polling): only a finished one is refused.
        let _ = self.sched.set_trap_exit(self.pid(), trap);
    }

    /// Links this process and `pid` ([`SchedulerHandle::link`]): if `pid` is already gone,
    /// this process gets the exit signal at once (`NoProc`).
    ///
    /// # Examples
    ///
    /// See [`SchedulerHandle::link`].
    pub fn link(&self, pid: Pid) {
        let _ = self.sched.link(self.pid(), pid);
    }

    /// Removes the link between this process and `pid`, both directions.
    ///
    /// # Examples
    ///
    /// See [`SchedulerHandle::unlink`].
    pub fn unlink(&self, pid: Pid) {
        self.sched.unlink(self.pid(), pid);
    }

    /// Starts a child process linked to this one from before its first poll; returns its
    /// PID. Link semantics as [`link`](Self::link).
    ///
    /// # Errors
    ///
    /// As [`SchedulerHandle::spawn_fn`].
    ///
    /// # Examples
    ///
    /// See [`trap_exit`](Self::trap_exit).
    pub fn spawn_link<F, Fut, T, E, N>(&self, body: F) -> Result<Pid, SpawnError>
    where
        F: FnOnce(ProcessCx<N>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<BoxError>,
        N: Send + 'static,
    {
        self.sched
            .spawn_fn_linked(self.pid(), body)
            .map(|child| child.pid())
    }

    /// Monitors `pid`: exactly one [`Down`](crate::supervision::Down) arrives when it ends
    /// ([`recv_down`](Self::recv_down), [`recv_signal`](Self::recv_signal)) — at once, with
    /// `NoProc`, if it is already gone.
    ///
    /// # Examples
    ///
    /// See [`MonitorRef`].
    pub fn monitor(&self, pid: Pid) -> MonitorRef {
        match self.sched.monitor_from(self.pid(), pid) {
            Ok(monitor) => monitor,
            // Only a finished process is refused, and it polls no more.
            Err(_) => MonitorRef::next(pid),
        }
    }

    /// Ends the monitor `monitor`: no `Down` of it is received afterwards (one already
    /// delivered and not yet received is discarded). `true` if it was active or its `Down` was
    /// waiting unreceived (and is now discarded); `false` only when there was nothing to end or
    /// discard (the `Down` already received, or the reference never this process's). OTP's
    /// `demonitor(Ref, [flush, info])` answers `false` for a discarded `DOWN` too; here both
    /// cases that leave no `Down` to come read `true`.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let target = sched.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// let target_addr = target.addr();
    /// let watcher = sched.spawn_fn(move |cx: ProcessCx<()>| async move {
    ///     let first = cx.monitor(target_addr.pid());
    ///     let second = cx.monitor(target_addr.pid());
    ///     cx.demonitor(first);
    ///     target_addr.send(())?;
    ///     let down = cx.recv_down().await?;
    ///     Ok::<_, BoxError>(down.monitor == second)   // the first one never comes
    /// })?;
    /// assert!(sched.block_on(watcher)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn demonitor(&self, monitor: MonitorRef) -> bool {
        let held = self.sched.demonitor_from(self.pid(), monitor);
        forget_down(self.owner, monitor) || held
    }

    /// Gives this process the name `name` ([`SchedulerHandle::register`]).
    ///
    /// # Errors
    ///
    /// [`RegisterError::Taken`] if another process holds it;
    /// [`RegisterError::AlreadyNamed`] if this process holds another name (given with
    /// [`ChildSpec::register_as`](crate::supervision::ChildSpec::register_as), or registered
    /// before): a process has at most one, as in OTP.
    ///
    /// # Examples
    ///
    /// See [`SchedulerHandle::register`].
    pub fn register(&self, name: impl Into<Arc<str>>) -> Result<(), RegisterError> {
        self.sched.register(name, self.pid())
    }

    /// The next signal: an [`Exit`](crate::supervision::Exit) (this process traps exits) or a
    /// [`Down`](crate::supervision::Down). The process is `Idle` while it waits; reports the
    /// cancellation like [`recv`](Self::recv).
    ///
    /// # Examples
    ///
    /// See [`Supervisor`](crate::supervision::Supervisor).
    pub fn recv_signal(&self) -> RecvSignal {
        RecvSignal::new(self.owner)
    }

    /// The next `Down` (exit signals wait for [`recv_signal`](Self::recv_signal)).
    ///
    /// # Examples
    ///
    /// See [`MonitorRef`].
    pub fn recv_down(&self) -> RecvDown {
        RecvDown::new(self.owner)
    }

    /// The next `Exit` (`Down`s wait for [`recv_signal`](Self::recv_signal)).
    ///
    /// # Examples
    ///
    /// See [`trap_exit`](Self::trap_exit).
    pub fn recv_exit(&self) -> RecvExit {
        RecvExit::new(self.owner)
    }

    /// The next message or signal, in the order they arrived (OTP's mailbox order: a linked
    /// process's last messages come before its exit signal): for a process that serves
    /// requests and watches others (a supervisor).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::supervision::{Incoming, Signal};
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx<u32>| async move {
    ///     let worker = cx.scheduler().spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(()) })?;
    ///     cx.monitor(worker.pid());
    ///     match cx.recv_any().await? {
    ///         Incoming::Signal(Signal::Down(down)) => Ok::<_, BoxError>(down.reason.is_normal()),
    ///         _ => Ok(false),
    ///     }
    /// })?;
    /// assert!(sched.block_on(handle)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recv_any(&self) -> RecvAny<M> {
        RecvAny::new(self.owner)
    }
}

/// What a body reaches through its scheduler.
impl<M: Send + 'static> ProcessCx<M> {
    /// This process's own address: hand it to others so they can send it `M`s (a reply
    /// address in a request, a registration).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(2).build()?;
    /// let echo = sched.spawn_fn(|cx: ProcessCx<(u32, Addr<u32>)>| async move {
    ///     let (n, reply_to) = cx.recv().await?;
    ///     reply_to.send(n * 2)?;
    ///     Ok::<_, BoxError>(())
    /// })?;
    /// let echo_addr = echo.addr();
    /// let asker = sched.spawn_fn(move |cx: ProcessCx<u32>| async move {
    ///     echo_addr.send((21, cx.addr()))?;
    ///     Ok::<_, BoxError>(cx.recv().await?)
    /// })?;
    /// assert_eq!(sched.block_on(asker)?, 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn addr(&self) -> Addr<M> {
        self.sched.addr(self.pid())
    }
    /// The scheduler running this process (a cheap handle: a reference count).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     Ok::<_, BoxError>(cx.scheduler().live_processes())
    /// })?;
    /// assert_eq!(sched.block_on(handle)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scheduler(&self) -> SchedulerHandle {
        self.sched.clone()
    }

    /// Starts a child process written as an `async fn` (see [`SchedulerHandle::spawn_fn`]);
    /// await its handle to get its result.
    ///
    /// # Errors
    ///
    /// As [`SchedulerHandle::spawn_fn`].
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(2).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let child = cx.spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(20) })?;
    ///     Ok::<_, BoxError>(child.await? + 1)
    /// })?;
    /// assert_eq!(sched.block_on(handle)?, 21);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_fn<F, Fut, T, E, N>(&self, body: F) -> Result<ProcessHandle<T, N>, SpawnError>
    where
        F: FnOnce(ProcessCx<N>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<BoxError>,
        N: Send + 'static,
    {
        self.sched.spawn_fn(body)
    }

    /// Runs any `Send` future as a task on the scheduler's tokio runtime (the handler runtime)
    /// and resolves to its output: for work that is not a registered command. Dropping the
    /// returned [`Run`] aborts the task.
    ///
    /// Futures that only need a tokio *context* (timers, I/O) can also be awaited directly in
    /// the body: the workers run inside the handler runtime's context.
    ///
    /// Unlike [`call`](Self::call), a run is not a yield: it is a tokio task the body awaits
    /// like any other future, so the metrics count it in neither `yields` nor
    /// `handler_panics` (its panic is the run's `Err`), and a
    /// [`testing::Harness`](crate::testing::Harness), which steps the body by hand with no
    /// runtime to wake it, cannot drive it (the step fails, naming a future that is not
    /// procsched's own): script a `call` instead where a test must see the work.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use std::time::Duration;
    ///
    /// let runtime = tokio::runtime::Runtime::new()?;
    /// let sched = Scheduler::builder().workers(1).tokio_handle(runtime.handle().clone()).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let slept = cx.run(async {
    ///         tokio::time::sleep(Duration::from_millis(1)).await;
    ///         "rested"
    ///     });
    ///     Ok::<_, BoxError>(slept.await?)
    /// })?;
    /// assert_eq!(sched.block_on(handle)?, "rested");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run<F>(&self, future: F) -> Run<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // In the process's span (current during its step), so the future's events carry its PID.
        let future = tracing::Instrument::in_current_span(future);
        Run::spawn(self.sched.inner.process_runtime(), future)
    }
}
