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
use super::process_handle::ProcessHandle;
use crate::dispatch::Run;
use crate::process::context::Owner;
use crate::process::YieldNow;
use crate::process::{BoxError, Call, Cancelled, Command, Message, Pid, Recv, RecvMessage};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
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

    /// Resolves when the process is asked to finish (shutdown), with the reason.
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
    /// computations split into parts.
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
    /// assert_eq!(sched.block_on(handle)?, (0..4_000u64).sum());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn yield_now(&self) -> YieldNow {
        YieldNow::new(self.owner)
    }
}

impl<M> fmt::Debug for ProcessCx<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessCx")
            .field("pid", &self.owner.pid)
            .finish_non_exhaustive()
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
