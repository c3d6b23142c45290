//! Scheduler metrics: [`SchedulerMetrics`], the snapshot users read, and the counters behind it.
//!
//! | module | concept |
//! |---|---|
//! | `counters` | the sharded counters the hot paths bump; the longest recent step |
//! | `export` | recording a snapshot through the `metrics` facade (cargo feature `metrics`) |

mod counters;
#[cfg(feature = "metrics")]
mod export;

pub(crate) use counters::{Counter, Counters, COUNTING_OFF};

use crate::executor::ExecutorMetrics;
use crate::process::Pid;
use std::time::Duration;

/// A snapshot of a scheduler's metrics, from [`Scheduler::metrics`](crate::Scheduler::metrics).
///
/// Counters (`spawned`, `finished`, `messages`, ...) count since the scheduler was built and
/// never decrease; gauges (`processes`) are the state at the snapshot. Counters are kept per
/// worker with relaxed atomics and summed here: each value is exact once the work it counts has
/// happened, but a snapshot taken while processes run is not atomic across fields.
///
/// With the cargo feature `metrics`, `SchedulerMetrics::export` records it through the
/// [`metrics`](https://docs.rs/metrics) facade.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// let sched = Scheduler::builder().workers(2).build()?;
/// let handle = sched.spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(1) })?;
/// sched.block_on(handle)?;
/// let metrics = sched.metrics();
/// assert_eq!(metrics.spawned, 1);
/// assert_eq!(metrics.finished.done, 1);
/// assert_eq!(metrics.processes.total(), 0);
/// assert_eq!(metrics.executor.workers().len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerMetrics {
    /// Gauge: live processes by state (not counting processes inside `init`, or finishing).
    /// A scan of the process table, one cell after another, not an instant's picture: under
    /// spawn churn it may count a process that ended early in the scan and one spawned late in
    /// it, so its total can exceed [`live_processes`](crate::Scheduler::live_processes) (exact)
    /// and even `max_processes`. Processes a shutdown abandoned (stuck in a call past its
    /// bound: [`ShutdownReport::abandoned`](crate::metrics::ShutdownReport::abandoned)) are
    /// still counted in their last state until their call returns and they are closed
    /// ([`wait_for_abandoned`](crate::Scheduler::wait_for_abandoned)): none of them runs another
    /// step.
    pub processes: ProcessCounts,
    /// Processes started: `spawn` returned a handle.
    pub spawned: u64,
    /// Spawns whose `init` failed or panicked (no process was started).
    pub init_failed: u64,
    /// Steps run, over all processes.
    pub steps: u64,
    /// Processes finished, by outcome: how the scheduler ended them (the shutdown report's
    /// classes).
    pub finished: FinishCounts,
    /// Processes finished, by the exit reason their handle, links and monitors carry.
    pub exits: ExitCounts,
    /// Messages sent (`send`), delivered or rejected by reason.
    pub messages: MessageCounts,
    /// Yields dispatched, by the kind of their handler.
    pub yields: YieldCounts,
    /// Handler completions that reported an error: [`CommandError::Failed`](crate::error::CommandError::Failed)
    /// or [`CommandError::TimedOut`](crate::error::CommandError::TimedOut).
    pub handler_errors: u64,
    /// Handlers that panicked ([`CommandError::Panicked`](crate::error::CommandError::Panicked)).
    pub handler_panics: u64,
    /// Destructors of user values (messages, payloads, completions, commands, a process's own
    /// state, an unread result, an aborted handler's future) that panicked when the scheduler
    /// dropped them. Each was contained and traced (`warn`, with the PID where one is known);
    /// none changes how its process ended. Includes
    /// `ExecutorMetrics::destructor_panics` (those of
    /// executor tasks' outputs): do not add the two.
    pub destructor_panics: u64,
    /// Most events ever queued at once in one process's mailbox: the peak of its
    /// [`ProcessInfo::mailbox_depth`](crate::metrics::ProcessInfo::mailbox_depth) over the
    /// scheduler's life, counting events of every kind (messages, completions, exit signals,
    /// `Down`s, cancels, overflow markers, and an `async fn` body's wake-ups by futures outside
    /// procsched). Only messages count against `mailbox_capacity`, so it may exceed the
    /// capacity. What a process took from its mailbox and holds unread (an `async fn` body's
    /// inbox and signals) is not counted: see
    /// [`ProcessInfo::unread_messages`](crate::metrics::ProcessInfo::unread_messages) and
    /// [`ProcessInfo::unread_signals`](crate::metrics::ProcessInfo::unread_signals). The peak
    /// is recorded when the process takes its events, and when the depth is observed (this
    /// snapshot, `process_info`): a mailbox flooding while its process is stuck shows here
    /// without waiting for a step; a peak no one observed and the process did not take whole
    /// (it drained part of a backlog while more arrived) may be missed.
    pub mailbox_high_water: usize,
    /// The longest *sampled* step of the last one to two minutes, with its process: one step in
    /// 64 of each process is timed (timing every step would cost more than a step), so a
    /// process with repeatedly slow steps shows up quickly, a single slow step with
    /// probability 1/64.
    pub longest_step: Option<StepSample>,
    /// The executor's per-worker counters.
    pub executor: ExecutorMetrics,
}

/// Live processes by [`ProcessState`](crate::process::ProcessState) (in [`SchedulerMetrics::processes`]).
///
/// # Examples
///
/// ```
/// let sched = procsched::Scheduler::builder().workers(1).build()?;
/// let processes = sched.metrics().processes;
/// assert_eq!((processes.ready, processes.idle, processes.total()), (0, 0, 0));
/// # Ok::<(), procsched::error::BuildError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessCounts {
    /// Queued, waiting for a worker.
    pub ready: usize,
    /// Being stepped.
    pub running: usize,
    /// Waiting for yield completions (or, for a body, anything it awaits that is not a
    /// receive: [`ProcessState::Blocked`](crate::metrics::ProcessState::Blocked)).
    pub blocked: usize,
    /// Waiting for messages.
    pub idle: usize,
}

impl ProcessCounts {
    /// Every live process counted: `ready + running + blocked + idle`.
    ///
    /// # Examples
    ///
    /// See [`ProcessCounts`].
    pub fn total(&self) -> usize {
        self.ready + self.running + self.blocked + self.idle
    }
}

/// Finished processes by outcome (in [`SchedulerMetrics::finished`]). Every process started is
/// counted in exactly one field once it has finished.
///
/// # Examples
///
/// ```
/// let sched = procsched::Scheduler::builder().workers(1).build()?;
/// let finished = sched.metrics().finished;
/// assert_eq!(finished.total(), finished.done + finished.failed + finished.panicked
///     + finished.terminated + finished.cancelled + finished.forced);
/// # Ok::<(), procsched::error::BuildError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FinishCounts {
    /// Finished with a result ([`Status::Done`](crate::state_machine::Status::Done)) outside
    /// a shutdown (one that ends with a result after its shutdown `Cancel` counts as
    /// `cancelled`, its handle still holding the result).
    pub done: u64,
    /// A step returned an error — other than a cancellation (`RecvError::Cancelled`,
    /// `ExitReason::Shutdown`, … anywhere in its `source` chain), counted `cancelled`.
    pub failed: u64,
    /// A step or `close` panicked (also during shutdown).
    pub panicked: u64,
    /// Stopped from outside: by [`terminate`](crate::SchedulerHandle::terminate), or by the
    /// exit signal of a linked process it does not trap — whatever that signal's reason (its
    /// handle, links and monitors carry the reason: `Killed`, or the linked process's own
    /// `Failed` / `Panicked` / …). Counted here even after a [`cancel`](crate::SchedulerHandle::cancel)
    /// asked it to finish: the stop is how it ended. Not during a shutdown's grace period
    /// (that end is `cancelled`).
    pub terminated: u64,
    /// Finished after being asked to finish, other than by a panic: during a shutdown's grace
    /// period, after its [`Event::Cancel`](crate::state_machine::Event::Cancel) (the
    /// [`ShutdownReport::graceful`](crate::metrics::ShutdownReport::graceful) ones), however
    /// it ended; or after a [`cancel`](crate::SchedulerHandle::cancel) (a supervisor stopping a
    /// child, say) by ending on its own — with a result, the cancellation, or an error of its own
    /// (counted here; its handle says `Failed`). A cancelled process then stopped by `terminate` or an
    /// exit signal, outside a shutdown, is `terminated`. Also a process that ended with an
    /// error that is a cancellation, asked to finish or not (a body returning
    /// `ExitReason::Shutdown`, as OTP's `exit(shutdown)`).
    pub cancelled: u64,
    /// Stopped by shutdown after its grace period
    /// ([`ShutdownReport::forced`](crate::metrics::ShutdownReport::forced), and abandoned processes once
    /// their call returns), other than by a panic. Not a spawn whose `init` was still running
    /// when the shutdown began: the report counts it (its `init` and `close` ran), but it never
    /// became a process — its `spawn` fails `ShuttingDown` — so no metric does.
    pub forced: u64,
}

impl FinishCounts {
    /// Every finished process.
    ///
    /// # Examples
    ///
    /// See [`FinishCounts`].
    pub fn total(&self) -> u64 {
        self.done + self.failed + self.panicked + self.terminated + self.cancelled + self.forced
    }
}

/// Finished processes by [`ExitReason`](crate::supervision::ExitReason) (in
/// [`SchedulerMetrics::exits`]): the reason their handle resolves with and their links and
/// monitors hear, one field per variant. Every process started is counted in exactly one field
/// once it has finished, as in [`FinishCounts`], which classes the same ends by how the
/// scheduler ended them: a process killed by a linked process's `Failed` exit is
/// `finished.terminated` and `exits.failed`; one that propagated its cancel during a shutdown
/// (`recv().await?`) is `finished.cancelled` and `exits.shutdown`, and so is one that heard it and
/// returned `Ok` (or a state machine's `Done`; its handle has its output, its links and monitors
/// hear `Shutdown`: asked to finish, it did). The `outcome` of the `process finished` trace event names how the process
/// future ended (`done`, `terminated`, `stopped`…), not these classes. A process past a
/// shutdown's deadline (`forced` or `abandoned` in its report) reads cancelled on its handle whatever its last call
/// returned, and is counted `exits.shutdown` unless it panicked or was stopped.
///
/// The two totals are equal once the processes counted have finished; a snapshot taken while
/// processes end is not atomic across fields (counters are per-thread shards), so under load
/// `exits.total()` and `finished.total()` may differ by the ends in flight.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let fails = sched.spawn_fn(|_: ProcessCx| async { Err::<(), BoxError>("bad input".into()) })?;
/// let _ = sched.block_on(fails);
/// let exits = sched.metrics().exits;
/// assert_eq!((exits.failed, exits.total()), (1, 1));
/// assert_eq!(exits.total(), sched.metrics().finished.total());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExitCounts {
    /// `Normal`: finished (`Done`, a body's `Ok`) without being asked to.
    pub normal: u64,
    /// `Failed`: an error, its own or a linked process's.
    pub failed: u64,
    /// `Panicked`: a panic, its own or a linked process's.
    pub panicked: u64,
    /// `Killed`: terminated, or killed through a link (or a body that returned
    /// `ExitReason::Killed` as its error: a process ends with the reason it returns).
    pub killed: u64,
    /// `Shutdown`: asked to finish and did (a shutdown, a cancel, a supervisor), or forced by
    /// a shutdown.
    pub shutdown: u64,
    /// `NoProc`: killed through a link to a process that was already gone.
    pub no_proc: u64,
    /// `NoConnection`: killed through a link to a process whose node was lost (feature
    /// `cluster`).
    pub no_connection: u64,
}

impl ExitCounts {
    /// Every finished process.
    ///
    /// # Examples
    ///
    /// See [`ExitCounts`].
    pub fn total(&self) -> u64 {
        self.normal
            + self.failed
            + self.panicked
            + self.killed
            + self.shutdown
            + self.no_proc
            + self.no_connection
    }
}

/// Messages sent with [`send`](crate::SchedulerHandle::send), by what became of them (in
/// [`SchedulerMetrics::messages`]).
///
/// # Examples
///
/// ```
/// use procsched::{Message, Payload, Pid, Scheduler};
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let nobody = Pid::from_raw(1 << 26).unwrap();
/// assert!(sched.send(nobody, Message::new("hi", Payload::empty())).is_err());
/// let messages = sched.metrics().messages;
/// assert_eq!((messages.delivered, messages.not_found, messages.rejected()), (0, 1, 1));
/// # Ok::<(), procsched::error::BuildError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MessageCounts {
    /// Queued in the process's mailbox.
    pub delivered: u64,
    /// Rejected: the mailbox capacity or the topic budget was reached
    /// ([`SendErrorKind::MailboxFull`](crate::error::SendErrorKind::MailboxFull)).
    pub mailbox_full: u64,
    /// Rejected: the process was finishing ([`SendErrorKind::Closed`](crate::error::SendErrorKind::Closed)).
    pub closed: u64,
    /// Rejected: no live process has the PID ([`SendErrorKind::NotFound`](crate::error::SendErrorKind::NotFound)).
    pub not_found: u64,
}

impl MessageCounts {
    /// Every rejected message.
    ///
    /// # Examples
    ///
    /// See [`MessageCounts`].
    pub fn rejected(&self) -> u64 {
        self.mailbox_full + self.closed + self.not_found
    }
}

/// Yields dispatched, by the kind of handler they went to (in [`SchedulerMetrics::yields`]).
///
/// # Examples
///
/// ```
/// let sched = procsched::Scheduler::builder().workers(1).build()?;
/// let yields = sched.metrics().yields;
/// assert_eq!(
///     yields.total(),
///     yields.inline + yields.asynchronous + yields.blocking + yields.no_handler + yields.asks
/// );
/// # Ok::<(), procsched::error::BuildError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct YieldCounts {
    /// Run by an inline handler, on the worker.
    pub inline: u64,
    /// Run by an async handler (on the workers, inside the handler runtime's context).
    pub asynchronous: u64,
    /// Run by a blocking handler (tokio's blocking pool).
    pub blocking: u64,
    /// No handler registered for the command's type: completed at once with
    /// [`CommandError::NoHandler`](crate::error::CommandError::NoHandler) (and a `warn` event).
    pub no_handler: u64,
    /// A state machine's asks ([`Addr::ask_command`](crate::Addr::ask_command)): yields the
    /// process asked answers, not a handler. An `async fn` body's
    /// [`ask`](crate::Addr::ask) is no yield of a step: it is counted as the message it sends
    /// ([`MessageCounts::delivered`]), as an ask from outside any process is.
    pub asks: u64,
}

impl YieldCounts {
    /// Every yield dispatched.
    ///
    /// # Examples
    ///
    /// See [`YieldCounts`].
    pub fn total(&self) -> u64 {
        self.inline + self.asynchronous + self.blocking + self.no_handler + self.asks
    }
}

/// A timed step: which process, and how long it ran (in [`SchedulerMetrics::longest_step`]).
///
/// # Examples
///
/// ```
/// let sched = procsched::Scheduler::builder().workers(1).build()?;
/// if let Some(step) = sched.metrics().longest_step {
///     println!("{} stepped for {:?}", step.pid, step.duration);
/// }
/// # Ok::<(), procsched::error::BuildError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSample {
    /// The process.
    pub pid: Pid,
    /// How long its step ran.
    pub duration: Duration,
}
