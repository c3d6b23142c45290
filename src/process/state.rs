//! The process state word: every value, every transition, every protocol.
//!
//! One `AtomicU8` per process cell holds the observable [`ProcessState`] (low three bits) and the
//! process-level wakeup flag `NOTIFIED` (bit 3). Every change goes through one of the named
//! `transition_*` functions below (and [`StateWord::take_notified`]), each one pass of the single
//! compare-and-swap loop [`StateWord::fetch_update_action`]; reads go through [`Snapshot`]. The
//! mailbox orders the events themselves (under its lock, or in the queue of its lock-free path,
//! `mailbox/intake.rs`): this word only decides who steps or wakes the process next.
//!
//! | bits | name | meaning | invariant |
//! |---|---|---|---|
//! | `000` | `Ready` | a poll is due: queued on the executor, or about to be | left by that poll (to `Running`) or by `close`; producers never write it |
//! | `001` | `Running` | a worker is inside the poll, stepping the process | one poller; only the holder of the future leaves `Running` (park, requeue, close) |
//! | `010` | `Blocked` | parked, waiting for yield completions | left by the first event (to `Ready`, and that producer wakes) or by `close` |
//! | `011` | `Idle` | parked, waiting for messages | as `Blocked`: the two differ only for observers |
//! | `100` | `Complete` | finished, or no process in the cell yet | left only by [`transition_to_ready`](StateWord::transition_to_ready), when the cell hosts its next process |
//! | bit 3 | `NOTIFIED` | an event (or a terminate request or `Cancel`) arrived while `Running` | set only while `Running`; cleared by the poller, or dropped by a transition out of `Running` |
//!
//! **Initial state:** `Complete`. A new cell hosts no process, so it must read like a finished
//! one: observers see no live process and producers never wake anything through it (its mailbox
//! refuses them anyway). Spawning moves it to `Ready` (protocol 1), the same state a woken process
//! is in, so the first poll takes the same path as every later one.
//!
//! Orderings: every write is an `AcqRel` CAS but the poller's `Ready` → `Running` (a `Release`
//! store: in `Ready` it is the word's only writer, see
//! [`transition_to_running`](StateWord::transition_to_running)), every read `Acquire`.
//! Correctness rests on the single modification order of this one word — every other transition
//! is a read-modify-write, so each sees the latest value and no two can both act on the same old
//! one — and on the mailbox lock,
//! which publishes the events. `Acquire`/`Release` make each transition also carry what its writer
//! did before (e.g. a producer's push), so no argument below needs more than the RMW order. One
//! protocol pairs this word with another location in a store-then-load (Dekker) pattern: a
//! lock-free send pushes into the intake queue and then may only *read* this word (already
//! flagged: step 2 writes nothing). The worker's side of that pattern is an RMW of the queue's
//! tail, not a load (`mailbox/intake.rs`, "No wake is lost"), so there too the RMW orders
//! suffice and no `SeqCst` is needed.
//!
//! # 1. Spawn (reset)
//! 1. The scheduler takes a `Free` cell off its free list and calls `ProcessCell::open`, which,
//!    under the mailbox lock, bumps the generation, marks the mailbox `Open` and calls
//!    [`StateWord::transition_to_ready`]: `Complete` → `Ready`.
//! 2. `init` runs; events sent meanwhile are queued and find `Ready`: nothing to do.
//! 3. The process future is spawned: its first poll is queued.
//!
//! Nothing is lost: until step 1 the mailbox refuses every producer, so no producer reads the
//! word before it is `Ready`; from then until the first poll every producer sees `Ready`, and the
//! first poll drains all they queued. Checked by `loom_terminate_racing_with_the_first_poll` and
//! `loom_stale_completion_racing_with_the_cells_reuse`.
//!
//! # 2. Wake while running, and park
//! 1. A worker polls: [`StateWord::transition_to_running`] (`Ready` → `Running`, dropping nothing:
//!    `NOTIFIED` is never set in `Ready`). It drains the mailbox and steps.
//! 2. A producer pushes an event under the mailbox lock and, still under it, calls
//!    [`StateWord::transition_on_event`]: `Running` → set `NOTIFIED` (no wake: the worker is still
//!    there); `Blocked`/`Idle` → `Ready`, and this producer alone wakes the task (after unlocking);
//!    `Ready`, `Complete`, or already flagged → nothing. A message sent on the mailbox's lock-free
//!    path is pushed into its intake queue instead, and the sender makes this same call after the
//!    push, without the lock (protocol 7).
//! 3. Before a step that would otherwise skip the mailbox (one fed only by inline completions),
//!    the worker calls [`StateWord::take_notified`]: if `NOTIFIED` was set, it clears it and
//!    drains.
//! 4. When the process waits, the worker calls [`StateWord::transition_to_parked`]: `Running` →
//!    `Blocked`/`Idle` if `NOTIFIED` is clear (poll returns `Pending`); otherwise it clears the flag,
//!    stays `Running`, and steps again after draining (within its step budget, else protocol 4).
//!
//! No wake is lost: steps 2, 3 and 4 are RMWs on one word, so a producer's step 2 is ordered
//! either before the worker's step 3/4 (which then finds `NOTIFIED`, and the drain that follows
//! sees the event, published before the flag: by the lock, or by the intake queue's push) or after
//! its successful park (then step 2 finds `Blocked`/`Idle` and wakes). There is no third order. Never two pollers: only the
//! producer whose RMW moved the word out of `Blocked`/`Idle` wakes, and the worker leaves
//! `Running` only by parking or protocols 4 and 6. Checked by
//! `loom_event_racing_inline_steps_and_a_park` (state word alone, 2 preemptions),
//! `loom_idle_process_sent_a_message_while_stepping_or_parking`,
//! `loom_completion_while_running_causes_one_more_step` and
//! `loom_completion_during_inline_steps_is_not_skipped` (on the executor).
//!
//! # 3. Terminate
//! 1. `request_terminate` sets the mailbox's `terminate` flag under the mailbox lock, then calls
//!    [`StateWord::transition_on_event`] like any event (protocol 2, step 2).
//! 2. Each drain reads the flag in the same critical section as the events; seeing it, the
//!    worker finishes the process (protocol 6) instead of stepping.
//!
//! No request is lost, by protocol 2's argument: it is an event that every drain sees. Checked by
//! `loom_terminate_request_racing_a_park` (state word alone), and
//! `loom_terminate_racing_with_a_running_step` and `loom_terminate_racing_with_the_first_poll`.
//!
//! # 4. Requeue
//! 1. A step returns `Continue`, or the poll spent its step budget: the worker calls
//!    [`StateWord::transition_to_requeued`] (`Running` → `Ready`, dropping any `NOTIFIED`), then
//!    wakes its own task (the executor queues it behind other ready work) and returns `Pending`.
//!
//! Nothing is lost: a flag dropped here stood for events that are in the mailbox, and the next
//! poll drains it before its first step. A producer that lands after the transition finds
//! `Ready` and does nothing, and must not wake: the worker's own wake already queues the one poll
//! due. Checked by `loom_requeue_racing_an_event`.
//!
//! # 5. Shutdown's cancel
//! 1. The scheduler's shutdown delivers `Event::Cancel` to every cell (`shutdown_target`, then
//!    `deliver`): an event like any other (protocol 2, step 2), so a waiting process is woken to see it.
//! 2. When the grace period is over, the host's `should_stop` turns true: a worker about to step
//!    returns `Pending` instead, leaving the word `Running` (no producer wakes a `Running`
//!    process, and no poll follows), and the scheduler's forced stop cancels the task, dropping the
//!    future (`scheduler/tasks.rs`): protocol 6.
//!
//! Checked by `loom_shutdown_racing_with_a_completion` and (in the scheduler layer's models)
//! `loom_scheduler_shutdown_racing_with_a_spawn`.
//!
//! # 6. Complete and close
//! 1. The process finishes (done, failed, panicked, terminated), or its future is dropped
//!    unfinished (shutdown), or `init` failed before it ever ran: `ProcessCell::close` calls
//!    [`StateWord::transition_to_complete`] from whatever state the word is in (`Running`, or
//!    `Ready`/`Blocked`/`Idle` when nobody polls), then marks the mailbox `Closing` under its lock.
//! 2. From then on producers find `Complete` (or a refusing mailbox) and never wake; one that
//!    moved the word to `Ready` just before step 1 wakes a task that is finished or being dropped,
//!    which the executor ignores.
//! 3. `release` frees the cell; only protocol 1 leaves `Complete`.
//!
//! Checked by `loom_close_racing_an_event`.
//!
//! # 7. Lock-free send
//! A message's way into the mailbox without its lock, and what it keeps of protocols 2 and 6: in
//! `mailbox/intake.rs`, with its models (`process/tests/loom_intake.rs`).

use crate::loom::atomic::{AtomicU8, Ordering::*};
use std::fmt;

const STATE_MASK: u8 = 0b0111;
const READY: u8 = 0b000;
const RUNNING: u8 = 0b001;
const BLOCKED: u8 = 0b010;
const IDLE: u8 = 0b011;
const COMPLETE: u8 = 0b100;
const NOTIFIED: u8 = 0b1000;

/// A new cell hosts no process: `Complete` (see the module docs).
const INITIAL_STATE: u8 = COMPLETE;

/// The observable state of a process ([`Scheduler::state`](crate::Scheduler::state)).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::metrics::ProcessState;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let worker = sched.spawn_fn(|cx: ProcessCx<()>| async move {
///     let me = cx.scheduler().state(cx.pid());     // a process sees itself being stepped
///     cx.recv().await?;
///     Ok::<_, BoxError>(me)
/// })?;
/// let pid = worker.pid();
/// // A console would sample it; here, until it parks to wait for its message.
/// while sched.state(pid) != Some(ProcessState::Idle) {
///     std::thread::yield_now();
/// }
/// worker.addr().send(())?;
/// assert_eq!(sched.block_on(worker)?, Some(ProcessState::Running));
/// assert_eq!(sched.state(pid), None, "ended: no live process has the PID");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProcessState {
    /// Queued, waiting for a worker.
    Ready,
    /// A worker is stepping it.
    Running,
    /// Waiting for yield completions — for an `async fn` body, for anything it awaits that is
    /// not a receive: a call or an ask, a tokio timer, `cx.run`, a `send_wait` for room.
    Blocked,
    /// Waiting for messages.
    Idle,
    /// Finished.
    Complete,
}

/// The atomic state word (see the module docs).
pub(crate) struct StateWord(AtomicU8);

/// A copy of the state word, read through named predicates.
#[derive(Copy, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot(u8);

/// What [`StateWord::transition_on_event`] did.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TransitionOnEvent {
    /// The process was parked and is `Ready` now: the caller must wake its task.
    Wake,
    /// The process is `Running`: `NOTIFIED` is set, so the worker drains before it parks.
    Notified,
    /// Nothing: a poll is due (`Ready`), the flag was already set, or the process is `Complete`.
    DoNothing,
}

/// What [`StateWord::transition_to_parked`] found.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TransitionToParked {
    /// Parked: the next event wakes the process.
    Parked,
    /// An event arrived during the step: the flag is cleared, the process still `Running`; drain
    /// and step again.
    Notified,
}

/// What [`StateWord::take_notified`] found.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TakeNotified {
    /// An event arrived since the last check (the flag is now cleared): drain.
    Notified,
    /// Nothing arrived: the mailbox may be skipped.
    NotNotified,
}

/// Where the process parks ([`StateWord::transition_to_parked`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParkAs {
    /// `Blocked`: waiting for yield completions.
    Blocked,
    /// `Idle`: waiting for messages.
    Idle,
}

impl StateWord {
    /// A new cell's word: `Complete` until a process is spawned into it.
    pub(crate) fn new() -> StateWord {
        StateWord(AtomicU8::new(INITIAL_STATE))
    }

    /// A copy of the word.
    pub(crate) fn load(&self) -> Snapshot {
        Snapshot(self.0.load(Acquire))
    }

    /// Protocol 1, step 1: the cell hosts a new process, `Complete` → `Ready`. Called in the
    /// critical section that opens the mailbox: producers touch the word only under that lock
    /// after seeing `Open`, and no process future of this incarnation exists yet (the previous
    /// one released the cell only after its last access), so nobody else reads or writes the
    /// word meanwhile. A plain store would do; the CAS costs nothing that matters on spawn and
    /// checks that the word was `Complete`.
    pub(crate) fn transition_to_ready(&self) {
        self.fetch_update_from(Snapshot(COMPLETE), |curr| {
            debug_assert!(curr.is_complete(), "reset of a live process: {curr:?}");
            ((), Some(Snapshot(READY)))
        });
    }

    /// Protocol 2, step 1: a worker starts a poll, `Ready` → `Running`. A plain store, not a
    /// CAS: in `Ready` nobody but this poller writes the word — producers do nothing there
    /// ([`transition_on_event`](Self::transition_on_event)), and the one other way out of
    /// `Ready`, `close` (protocol 6), runs either inside this poll or when the future is
    /// dropped, never beside a poll (the task's `RUNNING` bit makes the poller its only
    /// holder). So no write can fall between the value this poll starts from and its own, and
    /// every later RMW of a producer reads `Running` or what followed it. One read-modify-write
    /// fewer per message hop.
    #[inline]
    pub(crate) fn transition_to_running(&self) {
        debug_assert!(self.load().is_ready(), "a poll that was not due");
        self.0.store(RUNNING, Release);
    }

    /// Protocol 2, step 2 (the producer, after queueing its event: under the mailbox lock, or
    /// after a lock-free push, protocol 7).
    /// Hot path: one load, and at most one CAS — none when a poll is already due or flagged.
    pub(crate) fn transition_on_event(&self) -> TransitionOnEvent {
        self.fetch_update_action(|curr| {
            if curr.is_parked() {
                (TransitionOnEvent::Wake, Some(Snapshot(READY)))
            } else if curr.is_running() && !curr.is_notified() {
                (
                    TransitionOnEvent::Notified,
                    Some(Snapshot(curr.0 | NOTIFIED)),
                )
            } else {
                (TransitionOnEvent::DoNothing, None)
            }
        })
    }

    /// Protocol 2, step 3: consumes `NOTIFIED`. Hot path: one load when nothing arrived.
    #[inline]
    pub(crate) fn take_notified(&self) -> TakeNotified {
        self.fetch_update_action(|curr| {
            debug_assert!(
                curr.is_running(),
                "only the poller takes the flag: {curr:?}"
            );
            if curr.is_notified() {
                (TakeNotified::Notified, Some(Snapshot(curr.0 & !NOTIFIED)))
            } else {
                (TakeNotified::NotNotified, None)
            }
        })
    }

    /// Protocol 2, step 4: `Running` → `Blocked`/`Idle`, unless an event arrived. Hot path: the
    /// CAS starts from the expected plain `Running` without a load, so parking costs one CAS, and
    /// a notified park two (the failed one, then the one clearing the flag).
    pub(crate) fn transition_to_parked(&self, park_as: ParkAs) -> TransitionToParked {
        self.fetch_update_from(Snapshot(RUNNING), |curr| {
            debug_assert!(curr.is_running(), "only the poller parks: {curr:?}");
            if curr.is_notified() {
                // The caller drains next. An event landing after this CAS sets the flag again and
                // fails the next park: at worst one drain too many, never one too few.
                (
                    TransitionToParked::Notified,
                    Some(Snapshot(curr.0 & !NOTIFIED)),
                )
            } else {
                let parked = match park_as {
                    ParkAs::Blocked => BLOCKED,
                    ParkAs::Idle => IDLE,
                };
                (TransitionToParked::Parked, Some(Snapshot(parked)))
            }
        })
    }

    /// Protocol 4: `Running` (flagged or not) → `Ready`; the caller then wakes its own task.
    pub(crate) fn transition_to_requeued(&self) {
        self.fetch_update_from(Snapshot(RUNNING), |curr| {
            debug_assert!(curr.is_running(), "only the poller requeues: {curr:?}");
            ((), Some(Snapshot(READY)))
        });
    }

    /// Protocol 6, step 1: any live state → `Complete` (dropping `NOTIFIED`).
    pub(crate) fn transition_to_complete(&self) {
        self.fetch_update_action(|curr| {
            debug_assert!(!curr.is_complete(), "completed twice");
            ((), Some(Snapshot(COMPLETE)))
        });
    }

    /// The single CAS loop every transition goes through, starting from a fresh load.
    fn fetch_update_action<T>(&self, f: impl FnMut(Snapshot) -> (T, Option<Snapshot>)) -> T {
        self.fetch_update_from(self.load(), f)
    }

    /// The CAS loop, starting from `expected` instead of a load: for the poller's transitions,
    /// whose starting value is known (a wrong guess costs one failed CAS, which returns the
    /// actual value). `f` maps the current value to its outcome and the value to write (`None`:
    /// write nothing). `AcqRel` on success, `Acquire` on failure (module docs).
    fn fetch_update_from<T>(
        &self,
        expected: Snapshot,
        mut f: impl FnMut(Snapshot) -> (T, Option<Snapshot>),
    ) -> T {
        let mut curr = expected;
        loop {
            let (action, next) = f(curr);
            let Some(next) = next else { return action };
            match self
                .0
                .compare_exchange_weak(curr.0, next.0, AcqRel, Acquire)
            {
                Ok(_) => return action,
                Err(actual) => curr = Snapshot(actual),
            }
        }
    }
}

impl Snapshot {
    pub(crate) fn is_ready(self) -> bool {
        self.0 & STATE_MASK == READY
    }
    pub(crate) fn is_running(self) -> bool {
        self.0 & STATE_MASK == RUNNING
    }
    /// `Blocked` or `Idle`: the next event wakes it.
    pub(crate) fn is_parked(self) -> bool {
        matches!(self.0 & STATE_MASK, BLOCKED | IDLE)
    }
    pub(crate) fn is_complete(self) -> bool {
        self.0 & STATE_MASK == COMPLETE
    }
    pub(crate) fn is_notified(self) -> bool {
        self.0 & NOTIFIED != 0
    }

    /// The observable state.
    pub(crate) fn process_state(self) -> ProcessState {
        match self.0 & STATE_MASK {
            READY => ProcessState::Ready,
            RUNNING => ProcessState::Running,
            BLOCKED => ProcessState::Blocked,
            IDLE => ProcessState::Idle,
            _ => ProcessState::Complete,
        }
    }
}

impl fmt::Debug for StateWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.load().fmt(f)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("state", &self.process_state())
            .field("notified", &self.is_notified())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A word in the given state, reached through the transitions (never written directly).
    fn running() -> StateWord {
        let s = StateWord::new();
        s.transition_to_ready();
        s.transition_to_running();
        s
    }

    fn parked(park_as: ParkAs) -> StateWord {
        let s = running();
        assert_eq!(s.transition_to_parked(park_as), TransitionToParked::Parked);
        s
    }

    #[test]
    fn a_new_word_is_complete_and_ignores_events() {
        let s = StateWord::new();
        assert!(s.load().is_complete());
        assert_eq!(s.load().process_state(), ProcessState::Complete);
        assert_eq!(s.transition_on_event(), TransitionOnEvent::DoNothing);
        assert!(s.load().is_complete() && !s.load().is_notified());
    }

    #[test]
    fn reset_makes_a_poll_due_and_events_then_do_nothing() {
        let s = StateWord::new();
        s.transition_to_ready();
        assert!(s.load().is_ready());
        assert_eq!(s.transition_on_event(), TransitionOnEvent::DoNothing);
        assert_eq!(s.load(), Snapshot(READY), "no flag outside Running");
    }

    #[test]
    fn an_event_while_running_sets_the_flag_once() {
        let s = running();
        assert_eq!(s.transition_on_event(), TransitionOnEvent::Notified);
        assert_eq!(s.transition_on_event(), TransitionOnEvent::DoNothing);
        let snapshot = s.load();
        assert!(snapshot.is_running() && snapshot.is_notified());
        assert_eq!(snapshot.process_state(), ProcessState::Running);
    }

    #[test]
    fn take_notified_consumes_the_flag() {
        let s = running();
        assert_eq!(s.take_notified(), TakeNotified::NotNotified);
        assert_eq!(s.transition_on_event(), TransitionOnEvent::Notified);
        assert_eq!(s.take_notified(), TakeNotified::Notified);
        assert_eq!(s.take_notified(), TakeNotified::NotNotified);
        assert_eq!(s.load(), Snapshot(RUNNING));
    }

    #[test]
    fn a_notified_park_fails_once_and_clears_the_flag() {
        let s = running();
        assert_eq!(s.transition_on_event(), TransitionOnEvent::Notified);
        assert_eq!(
            s.transition_to_parked(ParkAs::Blocked),
            TransitionToParked::Notified
        );
        assert_eq!(s.load(), Snapshot(RUNNING));
        assert_eq!(
            s.transition_to_parked(ParkAs::Blocked),
            TransitionToParked::Parked
        );
        assert_eq!(s.load().process_state(), ProcessState::Blocked);
    }

    #[test]
    fn an_event_wakes_a_parked_process_exactly_once() {
        for (park_as, observed) in [
            (ParkAs::Blocked, ProcessState::Blocked),
            (ParkAs::Idle, ProcessState::Idle),
        ] {
            let s = parked(park_as);
            assert_eq!(s.load().process_state(), observed);
            assert!(s.load().is_parked());
            assert_eq!(s.transition_on_event(), TransitionOnEvent::Wake);
            assert!(s.load().is_ready());
            assert_eq!(
                s.transition_on_event(),
                TransitionOnEvent::DoNothing,
                "the first producer already woke it"
            );
            s.transition_to_running();
            assert_eq!(
                s.load(),
                Snapshot(RUNNING),
                "the woken poll starts unflagged"
            );
        }
    }

    #[test]
    fn requeue_drops_the_flag_and_makes_a_poll_due() {
        let s = running();
        assert_eq!(s.transition_on_event(), TransitionOnEvent::Notified);
        s.transition_to_requeued();
        assert_eq!(s.load(), Snapshot(READY));
        assert_eq!(s.transition_on_event(), TransitionOnEvent::DoNothing);
        s.transition_to_running();
        s.transition_to_requeued();
        assert!(s.load().is_ready());
    }

    #[test]
    fn complete_is_reached_from_every_live_state_and_is_final() {
        let ready = StateWord::new();
        ready.transition_to_ready();
        let flagged = running();
        assert_eq!(flagged.transition_on_event(), TransitionOnEvent::Notified);
        for s in [
            ready,
            running(),
            flagged,
            parked(ParkAs::Blocked),
            parked(ParkAs::Idle),
        ] {
            s.transition_to_complete();
            assert_eq!(s.load(), Snapshot(COMPLETE), "flag dropped too");
            assert_eq!(s.transition_on_event(), TransitionOnEvent::DoNothing);
            // The cell hosts its next process.
            s.transition_to_ready();
            assert!(s.load().is_ready());
        }
    }
}
