//! [`SchedulerHandle`]: spawn, send, terminate and observe processes from anywhere.

use super::addr::Addr;
use super::error::{SendError, SendErrorKind, SpawnError};
use super::info::{coarse_now, ProcessInfo};
use super::lifecycle::Leave;
use super::links::Link;
use super::metrics::{Counter, SchedulerMetrics};
use super::process_handle::ProcessHandle;
use super::shared::{cancel, Inner};
use super::spawn_options::SpawnOptions;
use super::table;
use super::tasks;
use crate::loom::Arc;
use crate::process::exit::ExitReason;
use crate::process::future::ProcessFuture;
use crate::process::mailbox::{Admission, Incarnation, ProcessCell};
use crate::process::{display_contained, drop_contained, panic_message};
use crate::process::{Message, Payload, Pid, Process};
use crate::process::{MessageType, ProcessContext, ProcessState};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A cheap, clonable handle to a [`Scheduler`](crate::Scheduler): spawn and send from anywhere,
/// including from inside a process (see [`ProcessContext::scheduler`]).
///
/// Every method is non-blocking and may be called from sync code, async code of any runtime,
/// and from inside a process's `init` or `step`.
///
/// # Examples
///
/// ```
/// use procsched::{BoxError, Payload, Scheduler, state_machine::{Events, Process, ProcessContext, StepOutput}, error::InitError};
///
/// struct Quick;
/// impl Process for Quick {
///     type Output = Payload;
///     fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> { Ok(()) }
///     fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
///         out.done(Payload::new(1u8));
///         Ok(())
///     }
/// }
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let handle = sched.handle().clone();
/// let from_thread = std::thread::spawn(move || handle.spawn(Quick, "run", Payload::empty()).map(|h| h.pid()));
/// assert!(from_thread.join().unwrap().is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct SchedulerHandle {
    pub(super) inner: Arc<Inner>,
}

impl SchedulerHandle {
    /// `true` if `self` and `other` are handles to the same scheduler.
    #[cfg(feature = "cluster")]
    pub(crate) fn same_scheduler(&self, other: &SchedulerHandle) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Delivers exit signal `exit` (from a process linked across nodes) to process `to`.
    #[cfg(feature = "cluster")]
    pub(crate) fn exit_signal(&self, to: Pid, exit: crate::process::Exit) {
        self.inner.exit_signal(to, exit);
    }

    /// Starts a process: runs `init(method, input)` on the calling thread, then queues its first
    /// step. Works from sync code, any async code and from inside a process.
    ///
    /// # Errors
    ///
    /// [`SpawnError::Init`] / [`SpawnError::InitPanicked`] if `init` failed (the process never
    /// steps; its `close` was called), [`SpawnError::ShuttingDown`] during shutdown (also when
    /// shutdown gave up waiting while this `init` ran: the process was counted as abandoned and
    /// its `close` has run), [`SpawnError::Limit`] at the process limit.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{BoxError, Payload, Scheduler, state_machine::{Events, Process, ProcessContext, StepOutput}, error::InitError};
    ///
    /// struct Greeter;
    /// impl Process for Greeter {
    ///     type Output = Payload;
    ///     fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
    ///         match method {
    ///             "greet" => Ok(()),
    ///             other => Err(InitError::unknown_method(other)),
    ///         }
    ///     }
    ///     fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
    ///         out.done(Payload::new("hello"));
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.handle().spawn(Greeter, "greet", Payload::empty())?;
    /// assert_eq!(sched.block_on(handle)?.downcast::<&str>().unwrap(), "hello");
    /// let err = sched.handle().spawn(Greeter, "wave", Payload::empty()).unwrap_err();
    /// assert!(err.is_unknown_method());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn<P: Process>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<ProcessHandle<P::Output>, SpawnError> {
        self.spawn_with(SpawnOptions::new(), process, method, input)
    }

    /// [`spawn`](Self::spawn) as `incarnation` says (its `spawned_at` is set here): naming the
    /// process's type `kind` in its span and its [`ProcessInfo`], with the message type it
    /// takes and its mailbox's bound.
    pub(crate) fn spawn_as<P: Process>(
        &self,
        mut process: P,
        method: &str,
        input: Payload,
        mut incarnation: Incarnation,
        link: Option<Link>,
    ) -> Result<ProcessHandle<P::Output>, SpawnError> {
        let inner = &self.inner;
        let kind = incarnation.kind;
        // Protocol steps in the module docs of `scheduler`.
        if let Err(refused) = inner.lifecycle.admit() {
            tracing::debug!(kind, method, error = %refused, "spawn refused");
            inner.contained(drop_contained(input) + drop_contained(process));
            return Err(refused);
        }
        // A body may await tokio directly, and a step may call it: every process runs inside a
        // runtime's context, whatever spawned it first (`lazy_runtime.rs`), and one that has not
        // shut down (`outlived.rs`). A check once built.
        let now = coarse_now();
        let _ = inner.process_runtime_looking(super::outlived::Caller::Spawn(now));
        incarnation.spawned_at = now;
        let Some((pid, cell)) = inner.table.claim_as(incarnation) else {
            inner.lifecycle.leave(Leave::Refused, || {});
            inner.contained(drop_contained(input) + drop_contained(process));
            return Err(SpawnError::Limit(table::MAX_SLOTS));
        };
        // Step 3. The cell is open from here on: events sent to `pid` during `init` wait for
        // the first step. Observers (`state`, `processes`, `metrics`) do not show the process
        // until its task is kept (`tasks::spawn`; `mailbox/observe.rs`). The process's span is
        // entered around `init` (and `close` if it fails), then around every poll of the
        // process future.
        // A root span: a process outlives the request, task or process that spawned it, and
        // inheriting that span would file its logs under the spawner for its whole life (and
        // nest a chain of spawns ever deeper). The spawner is linked, not a parent.
        let span = tracing::info_span!(parent: None, "process", pid = %pid, kind, method);
        span.follows_from(tracing::Span::current());
        let entered = span.enter();
        let ctx = ProcessContext::new(pid, self).with_cell(&cell);
        let initialised = catch_unwind(AssertUnwindSafe(|| process.init(&ctx, method, input)));
        let failure = match initialised {
            Ok(Ok(())) => None,
            Ok(Err(error)) => {
                // Outside `init`'s `catch_unwind`, and the cell is open: the error's `Display`
                // (user code, run by the subscriber) is contained (`process/contain.rs`).
                tracing::debug!(%pid, error = %display_contained(&error, Some(pid)), "init failed");
                Some(SpawnError::Init(error))
            }
            Err(panic) => {
                let message = panic_message(&*panic);
                cell.stats.destructors_panicked(drop_contained(panic));
                tracing::warn!(%pid, panic = %message, "init panicked");
                Some(SpawnError::InitPanicked(message))
            }
        };
        // Step 4.
        let failure = failure.or_else(|| {
            inner
                .lifecycle
                .is_sealed()
                .then_some(SpawnError::ShuttingDown)
        });
        if let Some(error) = failure {
            if !matches!(error, SpawnError::ShuttingDown) {
                inner.counters.add(Counter::InitFailed);
            }
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| process.close())) {
                let message = panic_message(&*panic);
                cell.stats.destructors_panicked(drop_contained(panic));
                tracing::warn!(%pid, panic = %message, "close panicked after a failed spawn");
            }
            cell.stats.destructors_panicked(drop_contained(process));
            drop(entered);
            let panics = cell.close();
            cell.stats.destructors_panicked(panics);
            let mut watches = Vec::new();
            inner.lifecycle.leave(Leave::Refused, || {
                (watches, _) = inner.table.release(pid, &cell);
            });
            // Links or monitors its `init` set up: it never ran.
            if !watches.is_empty() {
                inner.ended(pid, &ExitReason::NoProc, watches);
            }
            return Err(error);
        }
        // Step 5. Shutdown may have started since admission: make sure this process is
        // cancelled. Shutdown's scan locks every cell after setting its flag. If it locked ours
        // after we opened it, it cancelled us; if before, our `open` took the lock after the scan
        // released it, so this load sees the flag. (A cell the scan could not find yet — created
        // just now — is covered by the fence in `Table::create_cell`.)
        // A supervisor's child is left to its supervisor, which stops its children in order
        // (`shared.rs`, `begin_shutdown`).
        if let Some(link) = link.filter(|link| link.supervised) {
            cell.set_supervised(pid.generation(), link.parent);
        }
        if inner.lifecycle.is_shutting_down() {
            // Not a supervisor's child (`shutdown_target` checks), and not cancelled by the
            // scan already: its one shutdown `Cancel`.
            if let Some(generation) = cell.shutdown_target() {
                let _ = cancel(&cell, generation);
            }
        }
        if let Some(link) = link {
            // Before the first step: the child cannot have ended (`links.rs`).
            inner.link_new(pid, &cell, link.parent);
        }
        tracing::debug!(%pid, "process spawned");
        drop(entered);
        inner.counters.add(Counter::Spawned);
        let cell_ptr: *const ProcessCell = &*cell;
        let future = ProcessFuture::with_span(process, pid, cell, inner.clone(), span);
        // SAFETY: the cell the future now owns is also owned by its table slot, until the table
        // drops (`Table`), and `inner` — which owns the table — outlives this borrow. (A table
        // lookup by PID would find the same cell, for a few more instructions per spawn.)
        let cell = unsafe { &*cell_ptr };
        let join = tasks::spawn(&inner.executor, cell, pid, future);
        Ok(ProcessHandle::new(pid, join, self.clone()))
    }

    /// Delivers `message` to process `pid`, waking it if it is blocked or idle.
    ///
    /// # Errors
    ///
    /// A [`SendError`] that hands the message back, of kind [`SendErrorKind::NotFound`] if no
    /// live process has this PID (never spawned or finished), [`SendErrorKind::Closed`] if it is
    /// finishing, [`SendErrorKind::MailboxFull`] if the mailbox capacity or the message's topic
    /// budget refused it (see [`Message::with_budget`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{Message, Payload, Pid, Scheduler, error::SendError};
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let nobody = Pid::from_raw(1 << 26).unwrap();
    /// let err = sched.handle().send(nobody, Message::new("hi", Payload::empty())).unwrap_err();
    /// assert!(err.is_not_found() && err.pid() == nobody);
    /// let message = err.into_message().unwrap(); // handed back
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn send(&self, pid: Pid, message: Message) -> Result<(), SendError> {
        self.inner
            .post(pid, message)
            .map_err(|(kind, message)| SendError::new(kind, pid, Some(message)))
    }

    /// The typed address of process `pid`, which receives `M`s: for a PID learned at run time
    /// (from a table, a message). For a process spawned here, prefer its handle's
    /// [`addr`](ProcessHandle::addr), whose type the compiler knows; a state machine that
    /// reads `M` payloads from its `Event::Message`s is addressed this way too. The compiler
    /// cannot check that the process reads `M`, and a local send does not either (that would
    /// cost every send a look at the process): a message of another type is delivered, and the
    /// body's `recv` fails with [`RecvError::TypeMismatch`](crate::error::RecvError::TypeMismatch)
    /// (the message dropped; `?` then ends the body failed), as with [`named`](Self::named).
    /// Across nodes, the receiving node checks it (the cluster's `RemoteError::WrongType`).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx<u64>| async move { Ok::<_, BoxError>(cx.recv().await? + 1) })?;
    /// let addr = sched.handle().addr::<u64>(handle.pid());
    /// addr.send(41)?;
    /// assert_eq!(sched.block_on(handle)?, 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn addr<M>(&self, pid: Pid) -> Addr<M> {
        Addr::new(pid, self.clone())
    }

    /// Stops process `pid`: it gets no more steps (a running step finishes first), its
    /// outstanding handler tasks are aborted, its `close` runs, and its handle resolves to
    /// [`ProcessError::is_terminated`](crate::error::ProcessError::is_terminated) — unless the
    /// step running when the request came ends the process itself (it finishes, fails or
    /// panics): then that end is its handle's, and the metrics' and monitors'. Messages still
    /// queued are dropped unread. A process whose body has not started yet (spawned, not yet
    /// polled) ends without running it: a guard its body would build never exists (a state
    /// machine's `close` runs all the same; to clean up whatever happens, `cancel` first).
    ///
    /// # Errors
    ///
    /// A [`SendError`] of kind [`SendErrorKind::NotFound`] for an unknown or finished PID,
    /// [`SendErrorKind::Closed`] if it is already finishing (its `close` runs). A second
    /// `terminate` while the first waits for a running step to return is `Ok`: the request
    /// stands, once.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{BoxError, Payload, Scheduler, state_machine::{Events, Process, ProcessContext, StepOutput}, error::InitError};
    ///
    /// struct Sleeper;
    /// impl Process for Sleeper {
    ///     type Output = Payload;
    ///     fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> { Ok(()) }
    ///     fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
    ///         out.idle();
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn(Sleeper, "run", Payload::empty())?;
    /// sched.handle().terminate(handle.pid())?;
    /// assert!(sched.block_on(handle).unwrap_err().is_terminated());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn terminate(&self, pid: Pid) -> Result<(), SendError> {
        let admission = match self.inner.table.get(pid) {
            Some(cell) => cell.request_terminate(pid.generation()),
            None => Admission::Gone,
        };
        match admission {
            Admission::Accepted | Admission::Dropped => {
                tracing::debug!(%pid, "terminate requested");
                Ok(())
            }
            refused => Err(SendError::new(kind_of(refused), pid, None)),
        }
    }

    /// The observable state of `pid`, or `None` if no live process has this PID (never
    /// spawned, finished, or still inside `init`: its `spawn` has not returned). A process
    /// whose `close` is running reads [`Complete`](crate::metrics::ProcessState::Complete)
    /// here, though [`process_info`](Self::process_info), [`processes`](Self::processes) and
    /// the metrics' gauge no longer list it (it still counts in
    /// [`live_processes`](Self::live_processes) until its end is settled).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{Pid, Scheduler};
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// assert_eq!(sched.handle().state(Pid::from_raw(1 << 26).unwrap()), None);
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn state(&self, pid: Pid) -> Option<ProcessState> {
        self.inner.table.get(pid)?.state(pid.generation())
    }

    /// `true` while process `pid` holds its cell: live, inside `init`, or finishing (what
    /// [`state`](Self::state) does not show, a link still reaches).
    #[cfg(feature = "cluster")]
    pub(crate) fn hosts(&self, pid: Pid) -> bool {
        self.inner
            .table
            .get(pid)
            .is_some_and(|cell| cell.hosts(pid.generation()))
    }

    /// The tokio runtime the scheduler's processes use (its handler runtime, or the one it
    /// builds for itself), for what must run in one when nobody else provides it (the
    /// cluster's tasks, a `testing::Harness` step outside any runtime).
    pub(crate) fn tokio_runtime(&self) -> Option<tokio::runtime::Handle> {
        self.inner.process_runtime().cloned()
    }

    /// `true` if a wait for this scheduler's processes may spin or linger before it parks:
    /// more than one core, and not built with `spin_waits(false)` (`spin_wait.rs`; the
    /// cluster's inbound task lingers for an ask's answer by the same setting).
    #[cfg(feature = "cluster")]
    pub(crate) fn spins_waiting(&self) -> bool {
        self.inner.spin_gate.is_enabled()
    }

    /// The message type live process `pid` declared (`ProcessCx<M>`; `Some(None)` for a state
    /// machine or an untyped body), or `None` if no live process has the PID: for senders
    /// whose type the compiler could not check (the cluster's, holding only a PID; a
    /// `SupervisorRef` made from any PID).
    pub(crate) fn takes(&self, pid: Pid) -> Option<Option<MessageType>> {
        self.inner.table.get(pid)?.takes(pid.generation())
    }

    /// `true` if process `pid` is on its way out (terminated, asked to end by a linked
    /// process's exit, finishing) or gone: a name it holds is about to be free (a supervisor's
    /// restart waits for it).
    pub(crate) fn is_ending(&self, pid: Pid) -> bool {
        self.inner
            .table
            .get(pid)
            .is_none_or(|cell| cell.is_ending(pid.generation()))
    }

    /// Number of live processes: spawned (admitted) and not yet finished — a process still
    /// inside `init`, or finishing, included, which [`processes`](Self::processes),
    /// [`state`](Self::state) and the metrics' process gauges leave out. It is the count
    /// `max_processes` admits against, and never reads above it.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// assert_eq!(sched.handle().live_processes(), 0);
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn live_processes(&self) -> usize {
        self.inner.lifecycle.admitted()
    }

    /// `true` once shutdown has begun.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// assert!(!sched.handle().is_shutting_down());
    /// sched.shutdown(std::time::Duration::from_millis(10));
    /// assert!(sched.handle().is_shutting_down());
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn is_shutting_down(&self) -> bool {
        self.inner.lifecycle.is_shutting_down()
    }

    /// Number of processes in the process table (takes every cell's lock; for diagnostics).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// assert_eq!(sched.handle().registered_processes(), 0);
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn registered_processes(&self) -> usize {
        self.inner.table.len()
    }

    /// A snapshot of the scheduler's metrics: live processes by state, spawns, finishes by
    /// outcome, messages, yields, handler errors, the mailbox high-water mark, the longest
    /// recent step, and the executor's per-worker counters (see [`SchedulerMetrics`]).
    ///
    /// Takes every process cell's lock once (to count live processes by state): meant for a
    /// periodic scrape, not a hot loop.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(2).build()?;
    /// let metrics = sched.handle().metrics();
    /// assert_eq!((metrics.spawned, metrics.processes.total()), (0, 0));
    /// assert_eq!(metrics.executor.workers().len(), 2);
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn metrics(&self) -> SchedulerMetrics {
        let inner = &self.inner;
        inner.counters.snapshot(
            inner.table.cells().map(|cell| cell.survey()),
            inner.executor.metrics(),
        )
    }

    /// What process `pid` is doing: its state, steps, mailbox depth, age and outstanding
    /// yields; `None` if no live process has this PID (never spawned, still inside `init`,
    /// finishing, or finished).
    ///
    /// # Examples
    ///
    /// See [`ProcessInfo`].
    pub fn process_info(&self, pid: Pid) -> Option<ProcessInfo> {
        let cell = self.inner.table.get(pid)?.info(Some(pid.generation()))?;
        Some(ProcessInfo::new(pid.index(), cell, coarse_now()))
    }

    /// Every live process, for a debugging endpoint or a console. Lazy: each item is read (under
    /// its process's lock) when the iterator reaches it, so processes spawned or finished
    /// meanwhile may or may not appear; processes still inside `init` do not. The walk covers
    /// every slot the table has grown to (its high-water mark: the README's "Memory"), not
    /// only the live processes' — after a wave of 200 000, about 25 ms.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::metrics::ProcessState;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let idle = sched.spawn_fn(|cx: ProcessCx| async move { let _ = cx.cancelled().await; Ok::<_, BoxError>(()) })?;
    /// while sched.state(idle.pid()) != Some(ProcessState::Idle) {
    ///     std::thread::yield_now();
    /// }
    /// let live: Vec<procsched::metrics::ProcessInfo> = sched.handle().processes().collect();
    /// assert_eq!(live.len(), 1);
    /// assert_eq!((live[0].pid, live[0].state), (idle.pid(), ProcessState::Idle));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn processes(&self) -> impl Iterator<Item = ProcessInfo> + '_ {
        let now = coarse_now();
        self.inner
            .table
            .entries()
            .filter_map(move |(index, cell)| Some(ProcessInfo::new(index, cell.info(None)?, now)))
    }
}

/// The error kind of a refused delivery.
pub(super) fn kind_of(refused: Admission) -> SendErrorKind {
    match refused {
        Admission::Dropped | Admission::OverBudget => SendErrorKind::MailboxFull,
        Admission::Closed => SendErrorKind::Closed,
        Admission::Gone | Admission::Accepted => SendErrorKind::NotFound,
    }
}

impl fmt::Debug for SchedulerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerHandle")
            .field("lifecycle", &self.inner.lifecycle)
            .finish_non_exhaustive()
    }
}
