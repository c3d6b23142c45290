//! The state every [`SchedulerHandle`](super::SchedulerHandle) shares, and what the process
//! future needs of it (the [`Host`] implementation).

use super::error::AskError;
use super::error::SendErrorKind;
use super::handle::kind_of;
use super::lazy_runtime::LazyRuntime;
use super::lifecycle::{Leave, Lifecycle, Tallied};
use super::metrics::{Counter, Counters, COUNTING_OFF};
use super::names::Names;
use super::outlived::{self, Outlived};
use super::table::Table;
use crate::dispatch::{self, Dispatched, HandlerRuntime, HandlerSet, HandlerTask};
use crate::executor;
use crate::loom::Arc;
use crate::process::context::HostId;
use crate::process::exit::ExitReason;
use crate::process::host::{Host, Outcome, PollStats};
use crate::process::mailbox::{Admission, Generation, ProcessCell, Ticket};
use crate::process::stats::HandlerOutcome;
use crate::process::{from_message, into_message, CancelReason, Events, Message, Pid};
use crate::process::{BoxError, ProcessError, RecvError, YieldSlot};
use std::time::{Duration, Instant};

pub(crate) struct Inner {
    /// This scheduler among every host of processes (`process/context.rs`).
    pub(crate) host_id: HostId,
    pub(super) executor: executor::Handle,
    handlers: HandlerSet,
    runtime: Option<HandlerRuntime>,
    /// Without a handler runtime, or once an adopted one shut down (`outlived`): the one
    /// built for the processes on first need (`lazy_runtime.rs`).
    lazy_runtime: LazyRuntime,
    /// Whether the handler runtime, when adopted rather than owned, shut down first
    /// (`outlived.rs`).
    outlived: Option<Outlived>,
    pub(super) table: Table,
    pub(super) lifecycle: Lifecycle,
    /// The hot paths' counters (`metrics/counters.rs`).
    pub(super) counters: Counters,
    max_batch: usize,
    step_budget: usize,
    /// Named processes (`names.rs`).
    pub(super) names: Names,
    /// Which wait from outside the scheduler may spin before it parks (`spin_wait.rs`).
    pub(super) spin_gate: super::spin_wait::SpinGate,
    /// The hooks of monitors whose `Down` the cluster delivers (`held_monitors.rs`).
    #[cfg(feature = "cluster")]
    pub(super) held: super::held_monitors::HeldMonitors,
}

impl Drop for Inner {
    fn drop(&mut self) {
        super::hosts::unregister(self.host_id);
    }
}

/// The builder's settings that [`Inner`] keeps.
pub(super) struct Settings {
    pub(super) mailbox_capacity: usize,
    pub(super) max_batch: usize,
    pub(super) step_budget: usize,
    pub(super) max_processes: usize,
    pub(super) spin_waits: bool,
    /// The handler runtime is the caller's (ambient or `tokio_handle`), not one the builder
    /// built and the scheduler owns: it may shut down first (`outlived.rs`).
    pub(super) adopted_runtime: bool,
}

impl Inner {
    pub(super) fn new(
        executor: executor::Handle,
        handlers: HandlerSet,
        runtime: Option<tokio::runtime::Handle>,
        settings: Settings,
    ) -> Inner {
        let outlived = runtime
            .as_ref()
            .filter(|_| settings.adopted_runtime)
            .map(Outlived::new);
        // The bridge runs pending async handlers on this executor (`dispatch/bridge.rs`).
        let runtime = runtime.map(|tokio| HandlerRuntime::new(tokio, executor.clone()));
        Inner {
            host_id: HostId::next(),
            executor,
            handlers,
            runtime,
            lazy_runtime: LazyRuntime::default(),
            outlived,
            table: Table::new(settings.mailbox_capacity),
            lifecycle: Lifecycle::new(settings.max_processes),
            counters: Counters::new(),
            max_batch: settings.max_batch,
            step_budget: settings.step_budget,
            names: Names::default(),
            spin_gate: super::spin_wait::SpinGate::new(settings.spin_waits),
            #[cfg(feature = "cluster")]
            held: Default::default(),
        }
    }

    /// `panics` destructor panics were contained for no particular process (a spawn refused
    /// before it had a cell): counted in the metrics.
    pub(super) fn contained(&self, panics: u64) {
        if panics != 0 {
            self.counters
                .local()
                .add_n(Counter::DestructorPanics, panics);
        }
    }

    /// Shuts down the tokio runtime the scheduler built for its processes, if it did
    /// (`lazy_runtime.rs`): once its shutdown has finished, as the `Scheduler` goes.
    pub(super) fn shut_down_own_runtime(&self) {
        self.lazy_runtime.shut_down();
    }

    /// The tokio runtime processes run inside: the handler runtime, or the one built for them
    /// on the first call (`lazy_runtime.rs`).
    pub(super) fn process_runtime(&self) -> Option<&tokio::runtime::Handle> {
        match &self.runtime {
            Some(runtime) if !self.outlived() => Some(runtime.tokio()),
            _ => self.lazy_runtime.get_or_build(&self.executor),
        }
    }

    /// [`process_runtime`](Self::process_runtime), after a look at whether an adopted handler
    /// runtime shut down (`outlived.rs`): at a spawn, or a `block_on`.
    pub(super) fn process_runtime_looking(
        &self,
        from: outlived::Caller,
    ) -> Option<&tokio::runtime::Handle> {
        if let (Some(runtime), Some(outlived)) = (&self.runtime, &self.outlived) {
            outlived.look(runtime.tokio(), from);
        }
        self.process_runtime()
    }

    /// `true` once an adopted handler runtime was found shut down (`outlived.rs`).
    #[inline]
    fn outlived(&self) -> bool {
        self.outlived.as_ref().is_some_and(Outlived::is_gone)
    }

    /// [`process_runtime`](Self::process_runtime) if there is one, never building it: the
    /// context the forced stop's closer threads enter, as the workers do (`closers.rs`).
    pub(super) fn process_runtime_if_any(&self) -> Option<tokio::runtime::Handle> {
        match &self.runtime {
            Some(runtime) if !self.outlived() => Some(runtime.tokio().clone()),
            _ => self.lazy_runtime.get().cloned(),
        }
    }

    /// Shutdown step 1: stops admission and delivers `Cancel` to every live process, once —
    /// within the grace period, which ends at `deadline`: the cells are visited in order, and
    /// the processes the walk has not reached when it ends (a table of a million takes longer
    /// than a short grace period) get no `Cancel`: the forced stop stops them, as it does every
    /// process still live then. Returns `false` if shutdown had begun already.
    pub(super) fn begin_shutdown(&self, deadline: Instant) -> bool {
        if !self.lifecycle.begin_shutdown() {
            return false;
        }
        let live = self.lifecycle.live();
        tracing::info!(live, "scheduler shutdown: cancelling every process");
        // Supervisors' children are left to their supervisors, which stop them in reverse start
        // order (OTP's shutdown of a tree); the forced pass reaches every process.
        let mut cancelled = 0usize;
        let mut visited = 0usize;
        let mut next = Some(0);
        while let Some(from) = next {
            // The clock is read once a piece: next to a delivery, a clock read is not free.
            // Loom has no clock: the model delivers to every cell.
            if visited > 0 && Instant::now() >= deadline && !cfg!(loom) {
                tracing::info!(
                    cancelled,
                    "scheduler shutdown: grace period over before every process had its Cancel"
                );
                break;
            }
            next = self.table.visit_from(from, CANCEL_PIECE, |cell| {
                if let Some(generation) = cell.shutdown_target() {
                    if cancel(cell, generation) == Admission::Accepted {
                        cancelled += 1;
                    }
                }
            });
            visited += 1;
        }
        tracing::debug!(cancelled, "scheduler shutdown: Cancel delivered");
        true
    }
}

/// Cells [`Inner::begin_shutdown`] visits between two reads of the clock.
const CANCEL_PIECE: usize = 256;

/// A typed send's delivery. A `Message` sent through an `Addr<Message>` may carry a topic
/// budget, which only the locked path counts: it goes the untyped way. Any other type's message
/// has none, and is built where it is stored (`ProcessCell::deliver_unbudgeted`). The test is
/// on two constants once monomorphised.
#[inline(always)]
#[allow(clippy::result_large_err)] // the message comes back by value
fn deliver_typed<M: Send + 'static>(
    cell: &ProcessCell,
    generation: Generation,
    message: M,
) -> Result<(), (Admission, Message)> {
    if std::any::TypeId::of::<M>() == std::any::TypeId::of::<Message>() {
        cell.deliver_message(generation, into_message(message))
    } else {
        cell.deliver_unbudgeted(generation, || into_message(message))
    }
}

impl Inner {
    /// Delivers the typed `message` to `pid` (`Addr::send`), or hands it back with why not;
    /// built into a [`Message`] where it is stored (`ProcessCell::deliver_unbudgeted`).
    #[inline(always)]
    pub(crate) fn post_typed<M: Send + 'static>(
        &self,
        pid: Pid,
        message: M,
    ) -> Result<(), (SendErrorKind, M)> {
        let counters = &self.counters;
        let Some(cell) = self.table.get(pid) else {
            counters.add(Counter::NotFound);
            return Err((SendErrorKind::NotFound, message));
        };
        match deliver_typed(cell, pid.generation(), message) {
            Ok(()) => {
                counters.add(Counter::Delivered);
                Ok(())
            }
            Err((refused, message)) => Err(self.refused_typed(refused, message)),
        }
    }

    /// [`post_typed`](Self::post_typed), waiting for room: a message refused for the mailbox's
    /// capacity is handed back as `Ok(Some(message))` with `waker` kept, to be woken once room
    /// is made or the process ends (`process/mailbox/room.rs`, protocol 12); `Ok(None)`:
    /// delivered. Not counted as refused (the send waits; it is not refused).
    #[allow(clippy::result_large_err)] // the message comes back by value
    pub(crate) fn post_typed_or_wait<M: Send + 'static>(
        &self,
        pid: Pid,
        mut message: M,
        waker: &std::task::Waker,
        ticket: &mut Option<Ticket>,
    ) -> Result<Option<M>, (SendErrorKind, M)> {
        let Some(cell) = self.table.get(pid) else {
            self.counters.add(Counter::NotFound);
            return Err((SendErrorKind::NotFound, message));
        };
        if ticket.is_some_and(|waits| cell.still_in_line(pid.generation(), waits, waker)) {
            // Polled again before its turn: the room there is belongs to those before it.
            return Ok(Some(message));
        }
        loop {
            match deliver_typed(cell, pid.generation(), message) {
                Ok(()) => {
                    self.counters.add(Counter::Delivered);
                    if let Some(waited) = ticket.take() {
                        // Done waiting: out of the line, and room it was woken for and did not
                        // use goes on to the next (`room.rs`, step 4).
                        cell.leave_room_line(pid.generation(), waited);
                    }
                    return Ok(None);
                }
                Err((Admission::Dropped, refused)) if cell.never_has_room() => {
                    // Capacity 0 (`mailbox_capacity(0)`, or a spawn's own): no room will ever
                    // be made, and a send that waits for it would wait for the process's end.
                    if let Some(waited) = ticket.take() {
                        cell.leave_room_line(pid.generation(), waited);
                    }
                    return Err(self.refused_typed(Admission::Dropped, refused));
                }
                Err((Admission::Dropped, refused)) => {
                    message = from_message(refused).unwrap_or_else(|_| unreachable!("ours"));
                    // A sender outside the scheduler (a tokio task) about to wait for the
                    // first time looks for room a few microseconds first: the consumer is
                    // usually draining, and waiting costs a wake-up of a parked thread each
                    // way per message (`spin_wait.rs`).
                    if ticket.is_none()
                        && self
                            .spin_gate
                            .wait_finished(waker, || cell.room_or_gone(pid.generation()))
                    {
                        continue;
                    }
                    if cell.wait_for_room(pid.generation(), waker, ticket) {
                        return Ok(Some(message));
                    }
                    // Room was made, or the process ended, since the refusal: again.
                }
                Err((Admission::OverBudget, refused)) => {
                    // A topic budget drops rather than waits — `MailboxFull`, as `send` says:
                    // room in the mailbox does not end it, and nothing wakes a sender when
                    // the topic drains.
                    if let Some(waited) = ticket.take() {
                        cell.leave_room_line(pid.generation(), waited);
                    }
                    return Err(self.refused_typed(Admission::OverBudget, refused));
                }
                Err((refused, message)) => {
                    // Ended: `close` took the whole line, this ticket with it.
                    *ticket = None;
                    return Err(self.refused_typed(refused, message));
                }
            }
        }
    }

    /// A sender that waited for room in `pid`'s mailbox with `ticket` gives up before it was
    /// delivered (`room.rs`, step 4).
    pub(crate) fn give_up_room(&self, pid: Pid, ticket: Ticket) {
        if let Some(cell) = self.table.get(pid) {
            cell.leave_room_line(pid.generation(), ticket);
        }
    }

    /// A refused typed send, counted; the message back as the `M` it was.
    #[cold]
    fn refused_typed<M: 'static>(
        &self,
        refused: Admission,
        message: Message,
    ) -> (SendErrorKind, M) {
        let kind = kind_of(refused);
        self.counters.add(match kind {
            SendErrorKind::MailboxFull => Counter::MailboxFull,
            SendErrorKind::Closed => Counter::Closed,
            _ => Counter::NotFound,
        });
        let message = from_message(message).unwrap_or_else(|_| unreachable!("our own message"));
        (kind, message)
    }

    /// Delivers `message` to `pid`, or hands it back with why not (every send's path: `send`,
    /// `Addr::send`), counted in the metrics.
    #[inline]
    #[allow(clippy::result_large_err)] // the refused message comes back by value
    pub(crate) fn post(&self, pid: Pid, message: Message) -> Result<(), (SendErrorKind, Message)> {
        let counters = &self.counters;
        let Some(cell) = self.table.get(pid) else {
            counters.add(Counter::NotFound);
            return Err((SendErrorKind::NotFound, message));
        };
        match cell.deliver_message(pid.generation(), message) {
            Ok(()) => {
                counters.add(Counter::Delivered);
                Ok(())
            }
            Err((refused, message)) => {
                let kind = kind_of(refused);
                counters.add(match kind {
                    SendErrorKind::MailboxFull => Counter::MailboxFull,
                    SendErrorKind::Closed => Counter::Closed,
                    _ => Counter::NotFound,
                });
                Err((kind, message))
            }
        }
    }
}

/// `true` if `error`, or an error it wraps (its `source` chain), is a receiving future's report
/// that the process was asked to finish: [`RecvError::Cancelled`] (`recv`, `recv_message`,
/// `cancelled`), [`AskError::Cancelled`] (an ask in flight) or [`SendErrorKind::Cancelled`]
/// (a `send_wait` waiting for room: a `SendError<M>`, whose `M` cannot be named here, gives
/// its kind as its `source`); or, once `shutting_down`, a
/// child's handle that reported its own cancellation ([`ProcessError::is_cancelled`]): every
/// process has been asked to finish then, and which of the two heard it first is a race.
///
/// The walk stops after [`MAX_SOURCES`] links: a `source` chain may be cyclic (user code), and
/// this runs on a worker.
pub(super) fn is_cancellation(
    error: &(dyn std::error::Error + 'static),
    shutting_down: bool,
) -> bool {
    let mut next = Some(error);
    for _ in 0..MAX_SOURCES {
        let Some(error) = next else {
            return false;
        };
        if error
            .downcast_ref::<RecvError>()
            .is_some_and(RecvError::is_cancelled)
            || error
                .downcast_ref::<AskError>()
                .is_some_and(AskError::is_cancelled)
            || error
                .downcast_ref::<SendErrorKind>()
                .is_some_and(|kind| matches!(kind, SendErrorKind::Cancelled(_)))
            || error
                .downcast_ref::<ExitReason>()
                .is_some_and(ExitReason::is_shutdown)
            || (shutting_down
                && error
                    .downcast_ref::<ProcessError>()
                    .is_some_and(ProcessError::is_cancelled))
        {
            return true;
        }
        next = error.source();
    }
    false
}

/// How deep [`is_cancellation`] looks into an error's `source` chain.
const MAX_SOURCES: usize = 64;

/// Delivers shutdown's `Cancel` to the process of `generation` (claimed for it:
/// `ProcessCell::shutdown_target`).
pub(super) fn cancel(cell: &ProcessCell, generation: Generation) -> Admission {
    cell.deliver_cancel(generation, CancelReason::Shutdown)
}

impl Host for Inner {
    type Outstanding = HandlerTask;

    #[inline]
    fn dispatch(
        &self,
        pid: Pid,
        cell: &Arc<ProcessCell>,
        yielded: YieldSlot<'_>,
        completions: &mut Events,
        stats: &mut PollStats,
    ) -> Option<Self::Outstanding> {
        let dispatched = dispatch::dispatch(
            &self.handlers,
            self.runtime.as_ref(),
            pid,
            cell,
            yielded,
            completions,
        );
        match &dispatched {
            Dispatched::Inline(outcome) => {
                stats.inline += 1;
                match outcome {
                    HandlerOutcome::Error => stats.inline_errors += 1,
                    HandlerOutcome::Panicked => stats.inline_panics += 1,
                    HandlerOutcome::Other => {}
                }
            }
            Dispatched::Async(_) => stats.asynchronous += 1,
            Dispatched::Ask(_) => stats.asks += 1,
            Dispatched::Blocking(_) => stats.blocking += 1,
            Dispatched::NoHandler => stats.no_handler += 1,
        }
        dispatched.into_task()
    }

    fn abort(&self, outstanding: Self::Outstanding) {
        outstanding.abort();
    }

    fn is_finished(&self, outstanding: &Self::Outstanding) -> bool {
        outstanding.is_finished()
    }

    fn finished(&self, pid: Pid, cell: &ProcessCell, outcome: Outcome, reason: ExitReason) -> bool {
        let mut late = false;
        let mut reason = reason;
        let mut watches = Vec::new();
        self.lifecycle.leave_tallied(Leave::Finished, |tallied| {
            late = matches!(tallied, Tallied::Forced | Tallied::Sealed);
            if late && !matches!(outcome, Outcome::Panicked | Outcome::Stopped) {
                // Past the shutdown's deadline its handle reads cancelled (`future.rs`): its
                // links, monitors and metrics hear the same reason.
                reason = ExitReason::Shutdown;
            }
            let cancel_asked;
            (watches, cancel_asked) = self.table.release(pid, cell);
            // Counted here, under shutdown's tally lock when it has begun: the metrics agree
            // with its report (`FinishCounts` documents the classes).
            let counter = match (outcome, tallied) {
                (Outcome::Panicked, _) => Counter::Panicked,
                (_, Tallied::Graceful) => Counter::Cancelled,
                (_, Tallied::Forced | Tallied::Sealed) | (Outcome::Stopped, _) => Counter::Forced,
                (Outcome::Done | Outcome::Failed, Tallied::Untallied) if cancel_asked => {
                    Counter::Cancelled
                }
                (Outcome::Done, Tallied::Untallied) => Counter::Done,
                (Outcome::Failed, Tallied::Untallied) => Counter::Failed,
                (Outcome::Cancelled, Tallied::Untallied) => Counter::Cancelled,
                (Outcome::Terminated, Tallied::Untallied) => Counter::Terminated,
            };
            let counters = self.counters.local();
            counters.add(counter);
            counters.add(match &reason {
                ExitReason::Normal => Counter::ExitNormal,
                ExitReason::Failed(_) => Counter::ExitFailed,
                ExitReason::Panicked(_) => Counter::ExitPanicked,
                ExitReason::Killed => Counter::ExitKilled,
                ExitReason::Shutdown => Counter::ExitShutdown,
                ExitReason::NoProc => Counter::ExitNoProc,
                ExitReason::NoConnection => Counter::ExitNoConnection,
            });
        });
        // Outside shutdown's tally lock: names first (whoever restarts the process may take its
        // name at once), then links and monitors (`links.rs`).
        if !watches.is_empty() {
            self.ended(pid, &reason, watches);
        }
        late
    }

    fn polled(&self, stats: &PollStats) {
        if COUNTING_OFF {
            return;
        }
        let local = self.counters.local();
        local.add_n(Counter::Steps, stats.steps);
        // Most polls dispatch nothing, or only inline yields: one test skips the rest.
        if stats.asynchronous | stats.blocking | stats.no_handler | stats.asks != 0 {
            local.add_n(Counter::YieldAsync, stats.asynchronous);
            local.add_n(Counter::YieldBlocking, stats.blocking);
            local.add_n(Counter::YieldNoHandler, stats.no_handler);
            local.add_n(Counter::YieldAsk, stats.asks);
        }
        if stats.inline != 0 {
            local.add_n(Counter::YieldInline, stats.inline);
            if stats.inline_errors | stats.inline_panics != 0 {
                local.add_n(Counter::InlineErrors, stats.inline_errors);
                local.add_n(Counter::InlinePanics, stats.inline_panics);
            }
        }
    }

    fn step_timed(&self, pid: Pid, elapsed: Duration, end: Instant) {
        self.counters.step_timed(pid, elapsed, end);
    }

    fn is_cancellation(&self, error: &BoxError) -> bool {
        is_cancellation(&**error, self.lifecycle.is_shutting_down())
    }

    #[inline]
    fn max_batch(&self) -> usize {
        self.max_batch
    }

    #[inline]
    fn step_budget(&self) -> usize {
        self.step_budget
    }

    #[inline]
    fn should_stop(&self) -> bool {
        self.lifecycle.is_forcing()
    }
}
