//! The process future: drains the mailbox, steps the process, dispatches its yields.
//!
//! # One poll
//! 1. State → `Running` (`state.rs`, protocol 2 step 1).
//! 2. Move a bounded batch of events from the mailbox into the step's `Events` (after any inline
//!    completions of the previous step); the poll's first drain also registers the task's waker.
//! 3. Call `step` (panics caught). `Err` → the process fails; `Done` → it finishes (yields of that
//!    step are dropped, with a warning).
//! 4. Dispatch the yields through the [`Host`]: inline handlers complete right here (their
//!    completions feed the next step of this same poll); async and blocking ones complete later
//!    through the mailbox. Then abort the handler tasks of the calls the step dropped
//!    (`outstanding.rs`).
//! 5. `Continue` → state `Ready`, wake ourselves (the executor queues us behind other ready work),
//!    return `Pending` (`state.rs`, protocol 4). `Wait`/`Idle` → if inline completions are
//!    pending, or the mailbox held more than one batch, step again (step 2, draining only if the
//!    `NOTIFIED` flag says something arrived: protocol 2 step 3); if the last drain stopped at a
//!    message slot a sender has claimed and not yet written (`mailbox/intake.rs`), re-queue as
//!    for `Continue`: the drain never waits for that sender, and the process polls again after
//!    the other ready work; otherwise try to park (protocol 2 step 4): parked → `Pending`; an
//!    event landed → step again. Every extra step spends one unit of the step budget; when it
//!    is spent, or the executor's monitor asks the poll to yield (it has run for a monitor tick
//!    or more: `executor/monitor.rs`, "Preemption request"), re-queue as for `Continue`.
//!
//! # Buffers
//! The step's [`Events`] and [`StepOutput`] belong to the poll, not to the process: they are
//! empty whenever a poll ends, so a waiting process carries neither (176 bytes of every idle
//! process). The one exception is a poll that ends on its step budget with inline completions
//! not yet stepped: they wait at the front of the mailbox ([`ProcessCell`]'s `carry_over`),
//! which the next poll drains first. The yields' buffer is borrowed from the worker thread for
//! the poll (`output.rs`).
//!
//! # Finish (done, failed, panicked, terminated, or dropped by a shutdown)
//! State → `Complete` (`state.rs`, protocol 6); the cell closes (later sends see `Closed`, then `NotFound`); outstanding
//! handler tasks are aborted (those of calls the body drops are aborted sooner, after the step
//! that dropped them: `outstanding.rs`); `close` runs exactly once (panics caught); the
//! process's own values are dropped; the host counts the finish, forgets the PID and may reuse
//! the cell for another process, so the future never touches it again. What the process left
//! *unread* — the events its mailbox still held (taken out by the close), an async body's inbox,
//! the events its last step did not read — is dropped last, once the executor has published its
//! result (`contain.rs`, "After the outcome"): a destructor there that blocks or takes long
//! holds up neither its handle nor how it is counted.
//!
//! # Observability
//! The process's span (made at spawn, where it is entered around `init`) is entered for every
//! poll — around each step, the dispatch of its yields (so handler spans are its children) and
//! `close` — and when the future is dropped unfinished; a disabled span is not touched. A step's
//! detail (events in, yields out, status) is a `trace` event, which costs one load of the
//! global max level when `trace` is off. A panic is a `warn` event.
//!
//! Counting costs next to nothing on the hot path: a poll counts its steps and its yields (by
//! handler kind, filled in by the host's dispatch) in a [`PollStats`] on the stack and hands it
//! to the host once, at the end of the poll; the cell's step count (for `process_info`) is
//! published when the process parks, is re-queued or finishes — before the state word says so,
//! so whoever sees it parked sees its steps. One step in [`SAMPLE_EVERY`] of each process — at a phase drawn from its
//! PID, so processes that live for one step are sampled one in [`SAMPLE_EVERY`] too — is timed
//! ([`Host::step_timed`]): a clock read costs more than an inline step.

use super::contain;
use super::exit::ExitReason;
use super::host::{Host, Outcome, PollStats};
use super::mailbox::{saturate, Drained, ProcessCell};
use super::output::Status;
use super::outstanding::Outstanding;
use super::state::{ParkAs, TakeNotified, TransitionToParked};
use super::unread::{take_unread, Unread};
use super::{close_panic_message, display_contained, drop_contained, drop_each, panic_message};
use super::{Event, Events, Pid, Process, ProcessError, StepOutput};
use crate::loom::Arc;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;
use tracing::Span;

/// One step in this many of each process is timed (module docs).
pub(crate) const SAMPLE_EVERY: u64 = 64;

/// A process, wrapped as a future for the executor.
pub(crate) struct ProcessFuture<P: Process, H: Host> {
    /// Dropped in place by [`finish`](Self::finish) (so never after `finished` is set), each
    /// destructor panic contained and counted: the process's values belong to its end, not to
    /// whoever drops the future (the executor, after the outcome is settled).
    process: ManuallyDrop<P>,
    /// Also names the cell's incarnation: `pid.generation()`.
    pid: Pid,
    cell: Arc<ProcessCell>,
    host: Arc<H>,
    /// The handler tasks this process waits on (`outstanding.rs`).
    outstanding: Outstanding<H::Outstanding>,
    finished: bool,
    /// The process's span (module docs), if enabled: boxed, so that a disabled one adds one
    /// word to the future (which is moved on every spawn), not five. Taken out while a poll
    /// has it entered.
    span: Option<Box<Span>>,
    /// Steps run so far (published to the cell after each poll).
    steps: u64,
    /// Steps until the next timed one (module docs): a countdown, cheaper per step than a
    /// modulo of the step count.
    until_timed: u32,
    /// The cell's mailbox has a capacity: it counts what the process holds unread.
    bounded: bool,
    /// With a bounded mailbox: the drained messages the process said after its last step it
    /// holds unread (`Process::unread_messages`; `Some(0)` until its first step says), and what
    /// the mailbox counts for it now. `None` for a process that handles what each step
    /// delivers, and with an unbounded mailbox.
    unread: Option<u32>,
    unread_counted: u32,
    /// What the process leaves unread is dropped after the executor publishes its result
    /// (module docs, "Finish"); `false` only for a future polled by hand (the loom models),
    /// which drops it at once.
    unread_after_outcome: bool,
    /// Inline completions the last poll put back at the front of the mailbox (`requeue`): the
    /// next drain takes them beyond `max_batch`, as the module docs of `process` say a step gets
    /// them — whether or not the step budget ran out in between. (Counted against it, they had
    /// been split `max_batch` at a time, a requeue each: a black-box review's ten completions
    /// at `max_batch(1)` took ten polls.)
    carried: u32,
}

// Not `Unpin` when the process is not: the async-fn adapter's body is polled in place and
// relies on the future staying where the executor pinned it (`async_fn/mod.rs`, "Where it
// lives"). State-machine processes are `Unpin`, and so is their future.

impl<P: Process, H: Host> ProcessFuture<P, H> {
    /// The future of `process`, hosted by `cell` in the incarnation `pid` names (just opened).
    #[cfg(all(test, loom))]
    pub(crate) fn new(process: P, pid: Pid, cell: Arc<ProcessCell>, host: Arc<H>) -> Self {
        let mut future = Self::with_span(process, pid, cell, host, Span::none());
        future.unread_after_outcome = false;
        future
    }

    /// The future of `process`, hosted by `cell` in the incarnation `pid` names (just opened),
    /// entering `span` (unless disabled) for every poll and for `close`.
    #[inline(always)]
    pub(crate) fn with_span(
        process: P,
        pid: Pid,
        cell: Arc<ProcessCell>,
        host: Arc<H>,
        span: Span,
    ) -> Self {
        let bounded = cell.is_bounded();
        ProcessFuture {
            process: ManuallyDrop::new(process),
            pid,
            cell,
            host,
            outstanding: Outstanding::default(),
            finished: false,
            span: (!span.is_disabled()).then(|| Box::new(span)),
            steps: 0,
            bounded,
            unread: bounded.then_some(0),
            unread_counted: 0,
            unread_after_outcome: true,
            carried: 0,
            // The phase drawn from the PID: one-step processes are sampled one in
            // `SAMPLE_EVERY` too.
            until_timed: ((pid.as_u64().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % SAMPLE_EVERY)
                as u32
                + 1,
        }
    }

    fn poll_steps(
        &mut self,
        cx: &mut Context<'_>,
        stats: &mut PollStats,
        scratch: &mut Scratch<P::Output>,
    ) -> Poll<Result<P::Output, ProcessError>> {
        let Scratch { events, out } = scratch;
        self.cell.state.transition_to_running();
        let max_batch = self.host.max_batch();
        let mut budget = self.host.step_budget().max(1);
        // The first step of a poll drains the mailbox. Later steps of the same poll drain it only
        // if something may have arrived: every delivery made while we are `Running` sets the
        // state word's `NOTIFIED` flag (after queueing, under the mailbox lock), so a step that
        // only consumes inline completions skips the lock entirely.
        let mut must_drain = true;
        // The last drain stopped at a slot a sender claimed and has not written (`drain.rs`):
        // events may wait behind it, so the process must not park (module docs, step 5).
        let mut behind_unwritten = false;
        let mut register = Some(cx.waker());
        // Once per poll: checked in the step loop, even this one load measurably slowed a step
        // of a few dozen nanoseconds.
        let trace_steps = tracing::level_enabled!(tracing::Level::TRACE);
        loop {
            if self.host.should_stop() {
                // Shutdown's grace period is over: stop stepping; the forced stop drops us next.
                return Poll::Pending;
            }
            let drained = if must_drain || self.cell.state.take_notified() == TakeNotified::Notified
            {
                let max_batch =
                    max_batch.saturating_add(std::mem::take(&mut self.carried) as usize);
                let drained = match self.unread {
                    Some(unread) => {
                        let mut counted = unread as usize;
                        let drained = self.cell.drain_counting_unread(
                            events,
                            max_batch,
                            register.take(),
                            &mut counted,
                        );
                        self.unread_counted = saturate(counted);
                        drained
                    }
                    None => {
                        if self.unread_counted != 0 {
                            // A process whose first step said it handles what each step
                            // delivers, and that has not parked since: the count the first
                            // drain made for it goes (else it would stand until it parks).
                            self.cell.set_unread(0);
                            self.unread_counted = 0;
                        }
                        self.cell.drain_into(events, max_batch, register.take())
                    }
                };
                behind_unwritten = drained == Drained::Unwritten;
                drained
            } else {
                Drained::All
            };
            must_drain = drained == Drained::More;
            if drained == Drained::Terminate {
                // Terminated: inline completions still buffered are left unread.
                let unread = take_unread(events);
                let pid = self.pid;
                tracing::debug!(%pid, "terminated");
                // By a linked process's exit signal, or on request.
                let error = match self.cell.take_exit_reason() {
                    Some(reason) => ProcessError::exited(pid, reason),
                    None => ProcessError::terminated(pid),
                };
                return Poll::Ready(self.finish(Err(error), Outcome::Terminated, unread));
            }
            let events_in = if trace_steps { events.len() } else { 0 };
            self.until_timed -= 1;
            let timed = if self.until_timed == 0 {
                self.until_timed = SAMPLE_EVERY as u32;
                (!cfg!(procsched_no_counters)).then(Instant::now)
            } else {
                None
            };
            self.steps += 1;
            stats.steps += 1;
            let process = &mut *self.process;
            let (bounded, unread) = (self.bounded, &mut self.unread);
            let stepped = catch_unwind(AssertUnwindSafe(|| {
                let stepped = process.step(events, out);
                if bounded {
                    // Inside the step's `catch_unwind`: it is the process's code too.
                    *unread = process.unread_messages().map(saturate);
                }
                stepped
            }));
            let pid = self.pid;
            if let Some(start) = timed {
                let end = Instant::now();
                self.host
                    .step_timed(pid, end.saturating_duration_since(start), end);
            }
            let stats_of_cell = &self.cell.stats;
            // What the step did not read: dropped now if the process goes on, else left unread
            // with its mailbox (module docs, "Finish").
            let ends = !matches!(stepped, Ok(Ok(()))) || matches!(out.status(), Status::Done(_));
            let unread = if ends {
                take_unread(events)
            } else {
                stats_of_cell.destructors_panicked(drop_unread(events));
                Vec::new()
            };
            match stepped {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    let dropped_yields = out.yield_count();
                    stats_of_cell.destructors_panicked(discard(out));
                    if self.host.is_cancellation(&error) {
                        tracing::debug!(
                            %pid,
                            error = %display_contained(&*error, Some(pid)),
                            "step ended the process on its cancellation"
                        );
                        drop_contained(error);
                        let ended = ProcessError::cancelled_by(pid, self.cell.take_exit_reason());
                        return Poll::Ready(self.finish(Err(ended), Outcome::Cancelled, unread));
                    }
                    // The error's `Display` is user code, run by the subscriber, outside the
                    // step's `catch_unwind`: contained (`contain.rs`), the process stays failed.
                    tracing::debug!(
                        %pid,
                        error = %display_contained(&*error, Some(pid)),
                        dropped_yields,
                        "step failed"
                    );
                    return Poll::Ready(self.finish(
                        Err(ProcessError::failed(pid, error)),
                        Outcome::Failed,
                        unread,
                    ));
                }
                Err(panic) => {
                    let message = panic_message(&*panic);
                    let dropped_yields = out.yield_count();
                    stats_of_cell.destructors_panicked(discard(out) + drop_contained(panic));
                    tracing::warn!(%pid, panic = %message, dropped_yields, "step panicked");
                    return Poll::Ready(self.finish(
                        Err(ProcessError::panicked(pid, message)),
                        Outcome::Panicked,
                        unread,
                    ));
                }
            }
            let status = out.take_status();
            let park_as = match status {
                Status::Done(result) => {
                    let dropped = out.yield_count();
                    if trace_steps {
                        trace_step_done(pid, events_in, dropped);
                    }
                    if dropped > 0 {
                        tracing::warn!(%pid, dropped, "yields of a Done step are dropped");
                        stats_of_cell.destructors_panicked(drop_each(out.take_yields()));
                    }
                    return Poll::Ready(self.finish(Ok(result), Outcome::Done, unread));
                }
                Status::Continue => None,
                Status::Wait => Some(ParkAs::Blocked),
                Status::Idle => Some(ParkAs::Idle),
            };
            if trace_steps {
                trace_step(pid, events_in, out.yield_count(), park_as);
            }
            self.dispatch_yields(out, events, stats);
            if !out.dropped_calls().is_empty() {
                // Calls the body dropped: their handler tasks go (`outstanding.rs`).
                self.outstanding
                    .abort_dropped(&*self.host, out.dropped_calls());
            }
            budget -= 1;
            let step_again = match park_as {
                None => false,
                // Inline completions, or a backlog past one batch: no event will come to wake us
                // for those, so parking now would strand them.
                Some(_) if !events.is_empty() || drained == Drained::More => true,
                // A sender is between its claim and its write: poll again after the other
                // ready work rather than park, whose wake-up that sender may not give (its
                // tell finds the process already flagged and writes nothing).
                Some(_) if behind_unwritten => false,
                Some(park_as) => {
                    // Published before the park (Release) makes the state visible: whoever
                    // sees the process parked (`process_info`) sees its steps too.
                    self.cell.stats.set_steps(self.steps);
                    // Before parking: a parked process drains again only when an event comes,
                    // and its senders must not be refused for messages it has handled.
                    let unread = self.unread.unwrap_or(0);
                    if self.bounded && unread != self.unread_counted {
                        self.cell.set_unread(unread as usize);
                        self.unread_counted = unread;
                    }
                    // A failed park cleared `NOTIFIED`: the next step must drain regardless.
                    must_drain = self.cell.state.transition_to_parked(park_as)
                        == TransitionToParked::Notified;
                    must_drain
                }
            };
            if !step_again {
                if park_as.is_none() || behind_unwritten {
                    return self.requeue(cx, events);
                }
                return Poll::Pending;
            }
            // Spent, or the executor's monitor saw this poll run for a tick or more: behind the
            // other ready work (`executor/monitor.rs`, "Preemption request"). Only between
            // steps of one poll: a poll of one step (most) never reads it.
            if budget == 0 || crate::executor::yield_requested() {
                return self.requeue(cx, events);
            }
        }
    }

    /// Back into the run queue, behind other ready work. Inline completions not yet stepped
    /// wait at the front of the mailbox: the poll's events do not outlive it (module docs,
    /// "Buffers"), and the next poll drains the mailbox first thing.
    fn requeue(
        &mut self,
        cx: &mut Context<'_>,
        events: &mut Events,
    ) -> Poll<Result<P::Output, ProcessError>> {
        if !events.is_empty() {
            self.carried = u32::try_from(events.len()).unwrap_or(u32::MAX);
            self.cell.mailbox.carry_over(events);
        }
        self.cell.stats.set_steps(self.steps);
        self.cell.state.transition_to_requeued();
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn dispatch_yields(
        &mut self,
        out: &mut StepOutput<P::Output>,
        events: &mut Events,
        stats: &mut PollStats,
    ) {
        if out.yield_count() == 0 {
            return;
        }
        let host = &*self.host;
        let (pid, cell) = (self.pid, &self.cell);
        let outstanding = &mut self.outstanding;
        // In place: moving a whole yield out of the buffer stalls on store forwarding
        // (`YieldSlot`'s docs).
        out.dispatch_in_place(|yielded| {
            let tag = yielded.tag;
            if let Some(task) = host.dispatch(pid, cell, yielded, events, stats) {
                outstanding.push(host, tag, task);
            }
        });
    }

    /// The finish protocol (module docs). `result` (of `outcome`) is what the handle receives,
    /// unless `close` panics; `unread`, events the last step did not read.
    fn finish(
        &mut self,
        result: Result<P::Output, ProcessError>,
        outcome: Outcome,
        unread: Vec<Event>,
    ) -> Result<P::Output, ProcessError> {
        debug_assert!(!self.finished);
        self.finished = true;
        let (pid, cell) = (self.pid, &self.cell);
        cell.stats.set_steps(self.steps);
        let (unread_mail, mut panics, stopped_by, cancel_asked) = cell.close_keeping_unread();
        // Given its `Cancel` (asked to finish, and not left unread: a process that ended on its
        // own before reading it did not hear it, as an OTP process that exits `normal` before
        // it handles the `EXIT`).
        let heard_cancel = cancel_asked
            && !unread_mail.as_ref().is_some_and(|mail| mail.holds_cancel())
            && !unread
                .iter()
                .any(|event| matches!(event, Event::Cancel { .. }));
        self.outstanding.abort_all(&*self.host);
        let process = &mut *self.process;
        let closed = catch_unwind(AssertUnwindSafe(|| process.close()));
        let (result, outcome) = match closed {
            Ok(()) => (result, outcome),
            Err(panic) => {
                let message = panic_message(&*panic);
                panics += drop_contained(panic);
                tracing::warn!(%pid, panic = %message, "close panicked");
                let ending = result.as_ref().err().map(ProcessError::exit_reason);
                let message = close_panic_message(&message, ending.as_ref());
                let result = Err(ProcessError::panicked(pid, message));
                (result, Outcome::Panicked)
            }
        };
        // The process's own values (its state; an async body, kept completions) go now,
        // whatever happened to it: their destructors' panics are counted, not an outcome. An
        // async body's inbox — messages it never received — is collected instead, and left
        // unread with the mailbox's.
        let (dropped, unread_inbox) =
            contain::collecting(|| drop_contained(DropInPlace(&mut self.process)));
        panics += dropped;
        if panics > 0 {
            tracing::warn!(
                %pid,
                panics,
                "destructors of the process's values panicked; each was contained"
            );
            cell.stats.destructors_panicked(panics);
        }
        tracing::debug!(%pid, outcome = outcome.name(), "process finished");
        let reason = match (&result, stopped_by) {
            // Stopped by its supervisor's end (trapping exits), and its cleanup ended well: it
            // ends with its supervisor's reason all the same, as an OTP behaviour exits with
            // its parent's `Reason` after `terminate/2` (`watch.rs`, protocol 9).
            (Ok(_), Some(stopped_by)) => stopped_by,
            // Asked to finish — by a cancel, its supervisor or a shutdown — it heard it and did
            // (a state machine's `Done` after its `Cancel`, a body's `Ok`): its links and
            // monitors hear `Shutdown`, as an OTP process stopped by its supervisor exits
            // `shutdown` after its cleanup. Its handle keeps its result.
            (Ok(_), None) if heard_cancel => ExitReason::Shutdown,
            (Ok(_), None) => ExitReason::Normal,
            (Err(error), _) => error.exit_reason(),
        };
        let left = Unread {
            mail: unread_mail,
            inbox: unread_inbox,
            events: unread,
        };
        // After the outcome is out, or (a future dropped unfinished, or polled by hand) before
        // the end is counted: then whoever waits for the process to be closed
        // (`wait_for_abandoned`) waits for these destructors too.
        let late = if self.unread_after_outcome {
            let late = self.host.finished(pid, cell, outcome, reason);
            left.leave(pid, cell, true);
            late
        } else {
            left.leave(pid, cell, false);
            self.host.finished(pid, cell, outcome, reason)
        };
        if late && !matches!(outcome, Outcome::Panicked | Outcome::Stopped) {
            // The shutdown's report counts it forced or abandoned: the handle agrees.
            drop_contained(result);
            return Err(ProcessError::cancelled(pid));
        }
        result
    }
}

impl<P: Process, H: Host> Future for ProcessFuture<P, H> {
    type Output = Result<P::Output, ProcessError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: nothing is moved out of the future or swapped; its fields are reached by `&mut`
        // only, and the process — the one field whose address may matter (the async-fn
        // adapter's body) — stays in place until the future is dropped.
        let this = unsafe { self.get_unchecked_mut() };
        let mut stats = PollStats::default();
        let mut scratch = Scratch::default();
        // Taken out while entered (`poll_steps` needs `&mut self`).
        let span = this.span.take();
        let entered = span.as_deref().map(Span::enter);
        let polled = this.poll_steps(cx, &mut stats, &mut scratch);
        drop(entered);
        this.span = span;
        // Empty unless a forced stop cut the poll short (with inline completions unstepped).
        this.cell
            .stats
            .destructors_panicked(drop_unread(&mut scratch.events));
        scratch.events.release_buffer();
        scratch.out.return_yield_buffer();
        this.host.polled(&stats);
        polled
    }
}

impl<P: Process, H: Host> Drop for ProcessFuture<P, H> {
    fn drop(&mut self) {
        // Dropped unfinished: the forced stop cancelled the task (or it was aborted). `close` still
        // runs exactly once; whoever awaits the handle sees the cancellation — unless `close`
        // panicked, which its links, monitors and metrics hear as the reason.
        if !self.finished {
            // Dropped unfinished (forced, aborted): its outcome is a stop whatever its messages'
            // destructors take, so what it left unread is dropped before its end is counted —
            // `wait_for_abandoned` then waits for those destructors too (the closer that drops
            // it returns from user code only once they ran).
            self.unread_after_outcome = false;
            let pid = self.pid;
            let span = self.span.take();
            let entered = span.as_deref().map(Span::enter);
            let result = self.finish(
                Err(ProcessError::cancelled(pid)),
                Outcome::Stopped,
                Vec::new(),
            );
            drop(entered);
            drop(span);
            if let Err(error) = result {
                if error.is_panicked() && !std::thread::panicking() {
                    // The executor stores a dropped task's result as its own cancellation; an
                    // unwind is the one thing it passes on (every drop of the task's future is
                    // inside its `catch_unwind`). `resume_unwind` runs no panic hook; the
                    // fields left (two `Arc`s that others own too, an empty list) drop quietly.
                    std::panic::resume_unwind(Box::new(StoppedResult(error)));
                }
            }
        }
    }
}

/// The result of a process future dropped unfinished whose `close` panicked, carried out of its
/// drop as an unwind's payload: the process handle reads it (`process_handle.rs`) in place of
/// the task's cancellation, so that the handle says what the links, monitors and metrics say.
pub(crate) struct StoppedResult(pub(crate) ProcessError);

/// Drops a process in place when it is dropped itself: the process future's `finish`, through
/// [`drop_contained`]. In place, because the process may be pinned (the async-fn adapter's
/// body): a pinned value may be dropped where it lies, never moved out first.
struct DropInPlace<'a, P>(&'a mut ManuallyDrop<P>);

impl<P> Drop for DropInPlace<'_, P> {
    fn drop(&mut self) {
        // SAFETY: made only by `finish`, which runs once per future (its `finished` flag); the
        // future never touches `process` after it, and has no other path that drops it.
        unsafe { ManuallyDrop::drop(self.0) }
    }
}

/// A poll's buffers (module docs, "Buffers").
struct Scratch<O> {
    events: Events,
    out: StepOutput<O>,
}

impl<O> Default for Scratch<O> {
    fn default() -> Self {
        Scratch {
            events: Events::default(),
            out: StepOutput::default(),
        }
    }
}

/// Drops the events the step left unread, one at a time (`contain.rs`); returns the destructor
/// panics contained.
#[inline]
fn drop_unread(events: &mut Events) -> u64 {
    // Almost always empty: the check stays in the step loop, the loop out of it.
    if events.is_empty() {
        0
    } else {
        drop_each_unread(events)
    }
}

#[inline(never)]
fn drop_each_unread(events: &mut Events) -> u64 {
    drop_each(std::iter::from_fn(|| events.pop()))
}

/// Drops what a failed or panicked step left in its output (yields, a `Done` value), each
/// destructor's panic contained; returns how many were.
#[cold]
fn discard<O>(out: &mut StepOutput<O>) -> u64 {
    drop_each(out.take_yields()) + drop_contained(out.take_status())
}

/// The step's `trace` event, out of line: the step loop stays small.
#[cold]
#[inline(never)]
fn trace_step(pid: Pid, events_in: usize, yields_out: usize, park_as: Option<ParkAs>) {
    let status = match park_as {
        None => "continue",
        Some(ParkAs::Blocked) => "wait",
        Some(ParkAs::Idle) => "idle",
    };
    tracing::trace!(%pid, events_in, yields_out, status, "step");
}

/// [`trace_step`] for a `Done` step (whose yields are dropped).
#[cold]
#[inline(never)]
fn trace_step_done(pid: Pid, events_in: usize, yields_out: usize) {
    tracing::trace!(%pid, events_in, yields_out, status = "done", "step");
}
