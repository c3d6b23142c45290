//! The task state word: every bit, every transition.
//!
//! One `AtomicUsize` per task holds its lifecycle flags (low bits) and its reference count (high
//! bits). Every change goes through one of the named `transition_*` functions below, each a single
//! compare-and-swap loop (or one read-modify-write) in [`State::fetch_update_action`], so the whole
//! protocol can be read in this file.
//!
//! | bit | name | meaning | invariant |
//! |---|---|---|---|
//! | 0 | `RUNNING` | a thread holds the future: it is polling it, or cancelling it | at most one holder; only the holder clears it |
//! | 1 | `COMPLETE` | the future is gone and the output (or error) is stored | once set, never unset; never set together with `RUNNING` |
//! | 2 | `SCHEDULED` | a [`Notified`](super::Notified) for this task exists (in a queue, or in a worker's hand) | at most one `Notified` at a time |
//! | 3 | `NOTIFIED` | the wakeup flag: woken while `RUNNING`; re-queue when the poll returns `Pending` | only set while `RUNNING` |
//! | 4 | `CANCELLED` | `abort()` or shutdown asked the task to stop | once set, never unset |
//! | 5 | `JOIN_INTEREST` | a `JoinHandle` exists | set at spawn, cleared once when the handle drops |
//! | 6 | `JOIN_WAKER` | the join-waker slot belongs to the runtime (which may read and wake it) | see "join waker" below |
//! | 7.. | refcount | number of live references (`Task`, `Notified`, `Waker`, `JoinHandle`) | the allocation is freed when it reaches 0 |
//!
//! **Initial state:** `SCHEDULED | JOIN_INTEREST` with three references: the owner's (the
//! executor's owned-task list, or for an unowned task the `TaskRef` its spawner keeps —
//! `executor/unowned.rs`), the first `Notified` (about to be queued) and the `JoinHandle`.
//! Starting `SCHEDULED` (rather than idle) means the first poll goes through the same path as
//! every later one.
//!
//! # Wake while running (the wakeup flag)
//! 1. A worker holding a `Notified` calls [`State::transition_to_running`]: `SCHEDULED` is cleared
//!    and `RUNNING` set in one CAS. The `Notified`'s reference now belongs to the running worker.
//! 2. A wake during the poll finds `RUNNING` and only sets `NOTIFIED` — it must not queue the task,
//!    or a second worker could poll it concurrently.
//! 3. When the poll returns `Pending`, [`State::transition_to_idle`] clears `RUNNING` in the same CAS
//!    that reads `NOTIFIED`. If it was set, the CAS also swaps it for `SCHEDULED` and the worker
//!    re-queues the very `Notified` it holds (no reference-count traffic); if not, the CAS also
//!    drops the `Notified`'s reference (the worker frees the task if it was the last).
//!
//! No wake is lost: a wake either lands before the CAS of step 3 (then step 3 sees `NOTIFIED`) or
//! after it (then the waker sees the task idle and queues it itself). Both are RMWs on one word, so
//! there is no third order. No double poll: a `Notified` exists only while `SCHEDULED` is set, and
//! `SCHEDULED` is set only by a waker that saw neither `RUNNING` nor `SCHEDULED`.
//!
//! Checked (`executor/tests/loom_task.rs`, against the toy scheduler) by
//! `loom_wake_while_running_causes_exactly_one_more_poll` and, for a wake racing the final poll,
//! `loom_wake_racing_with_completion`; cancellation ([`State::transition_to_notified_and_cancel`],
//! [`State::transition_to_shutdown`]) by `loom_abort_racing_with_a_poll` and
//! `loom_shutdown_racing_with_a_wake`.
//!
//! # Join waker
//! `JOIN_WAKER` hands the waker slot back and forth between the `JoinHandle` and the runtime:
//! - clear: only the `JoinHandle` may touch the slot (write a new waker, drop the old one);
//! - set: only the runtime may touch it (read it to wake), until it clears the bit again after
//!   completion ([`State::unset_waker_after_complete`]);
//! - the `JoinHandle` sets it only while `COMPLETE` is clear, and clears it only while `COMPLETE` is
//!   clear, so after completion the runtime's wake can never race with a handle rewriting the slot.
//!
//! Checked by `loom_join_handle_waker_registration_racing_with_completion` and, for the output's
//! ownership when the handle drops, `loom_join_handle_drop_racing_with_completion`.
//!
//! # Wake by reference (and broadcast)
//! 1. A thread publishes an event the task reads on its next poll (a flag, a queue, a mailbox),
//!    or, for a broadcast, a condition every owned task reads on every poll.
//! 2. It applies [`State::transition_to_notified_by_ref`] — through `wake_by_ref`, a
//!    [`DeferredWake`](super::DeferredWake) prepared under a mailbox lock, or `OwnedTasks::wake_all`
//!    for every owned task: idle → `SCHEDULED` and queued; running → `NOTIFIED`; queued → written
//!    back unchanged.
//! 3. The task's next poll begins with [`State::transition_to_running`] and then reads the event.
//!
//! Step 2 always writes (unless `COMPLETE`), so it and step 3 are both RMWs on this word: in
//! either order the poll that reads the event comes after step 2 in the word's order and
//! synchronizes with it, so it sees step 1. A plain load where there is nothing to change (a
//! queued or already-notified task) would leave step 1's store and the poller's load in a
//! store-buffering race: the load could return a `SCHEDULED` whose poll has already read the
//! event unset, and the wake would be lost. Checked by
//! `loom_a_condition_set_before_waking_every_owned_task_is_seen` (`executor/tests/loom_park.rs`),
//! `loom_wake_by_ref_while_running_causes_exactly_one_more_poll` and
//! `loom_deferred_wake_while_running_causes_exactly_one_more_poll` (`executor/tests/loom_task.rs`),
//! each of which deadlocks with the plain load.

use crate::loom::atomic::{AtomicUsize, Ordering::*};
use std::fmt;

const RUNNING: usize = 1 << 0;
const COMPLETE: usize = 1 << 1;
const SCHEDULED: usize = 1 << 2;
const NOTIFIED: usize = 1 << 3;
const CANCELLED: usize = 1 << 4;
const JOIN_INTEREST: usize = 1 << 5;
const JOIN_WAKER: usize = 1 << 6;

const REF_SHIFT: u32 = 7;
const REF_ONE: usize = 1 << REF_SHIFT;
const FLAG_MASK: usize = REF_ONE - 1;

/// Three references: the owner (owned-task list or `TaskRef`), first `Notified`, `JoinHandle`.
const INITIAL_STATE: usize = (REF_ONE * 3) | SCHEDULED | JOIN_INTEREST;

/// The atomic state word of one task.
pub(crate) struct State {
    val: AtomicUsize,
}

/// A copy of the state word, read through named predicates.
#[derive(Copy, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot(usize);

/// What [`State::transition_to_running`] found.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TransitionToRunning {
    /// The caller now holds the future and should poll it.
    Success,
    /// The caller now holds the future but must cancel it instead of polling.
    Cancelled,
    /// Someone else holds or finished the future: drop the `Notified` (its reference) and move on.
    Failed,
}

/// What [`State::transition_to_idle`] found.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TransitionToIdle {
    /// Released, and the reference the caller held for the poll dropped in the same CAS.
    Ok,
    /// Released, and that reference was the last one: the caller frees the task.
    OkDealloc,
    /// Woken during the poll: the task is `SCHEDULED` again and the caller must re-queue the
    /// `Notified` it holds.
    OkNotified,
    /// Cancelled during the poll: the caller still holds the future and must cancel it.
    Cancelled,
}

/// What a wake (or an abort) should do.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TransitionToNotified {
    /// Nothing: already queued, running (flag set instead), or complete.
    DoNothing,
    /// The task was idle: the caller must queue a `Notified` (whose reference the transition took).
    Submit,
    /// `by_val` only: nothing to queue, and the waker's reference was the last one.
    Dealloc,
}

/// What dropping the `JoinHandle` must clean up.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TransitionToJoinHandleDrop {
    /// The task completed: nobody else will drop the output.
    pub(crate) drop_output: bool,
    /// The join-waker slot belongs to the handle: it drops the waker.
    pub(crate) drop_waker: bool,
}

impl State {
    pub(crate) fn new() -> State {
        State {
            val: AtomicUsize::new(INITIAL_STATE),
        }
    }

    pub(crate) fn load(&self) -> Snapshot {
        Snapshot(self.val.load(Acquire))
    }

    /// Step 1 of the poll protocol: take the future (see the module docs).
    pub(crate) fn transition_to_running(&self) -> TransitionToRunning {
        self.fetch_update_action(|mut next| {
            debug_assert!(next.is_scheduled(), "running a task that is not scheduled");
            if next.is_running() || next.is_complete() {
                // A shutdown cancelled the task while this `Notified` waited in a queue.
                return (TransitionToRunning::Failed, None);
            }
            next.0 &= !SCHEDULED;
            next.0 |= RUNNING;
            let action = if next.is_cancelled() {
                TransitionToRunning::Cancelled
            } else {
                TransitionToRunning::Success
            };
            (action, Some(next))
        })
    }

    /// Step 3 of the poll protocol: release the future after a `Pending` poll.
    pub(crate) fn transition_to_idle(&self) -> TransitionToIdle {
        self.fetch_update_action(|mut next| {
            debug_assert!(next.is_running());
            if next.is_cancelled() {
                return (TransitionToIdle::Cancelled, None);
            }
            next.0 &= !RUNNING;
            if next.is_notified() {
                next.0 &= !NOTIFIED;
                next.0 |= SCHEDULED;
                (TransitionToIdle::OkNotified, Some(next))
            } else {
                // The poll's reference goes in the same RMW: one atomic per poll fewer (a
                // message hop is a few of them: `docs/bench-process-history.md`).
                next.ref_dec();
                if next.ref_count() == 0 {
                    (TransitionToIdle::OkDealloc, Some(next))
                } else {
                    (TransitionToIdle::Ok, Some(next))
                }
            }
        })
    }

    /// The future returned `Ready` (or was cancelled) and its output is stored: `RUNNING` → `COMPLETE`.
    /// Returns the state after the transition.
    pub(crate) fn transition_to_complete(&self) -> Snapshot {
        const DELTA: usize = RUNNING | COMPLETE;
        let prev = Snapshot(self.val.fetch_xor(DELTA, AcqRel));
        debug_assert!(prev.is_running() && !prev.is_complete());
        Snapshot(prev.0 ^ DELTA)
    }

    /// A waker holding its own reference fires (`wake`). The reference is reused for the
    /// `Notified` on `Submit`, and must be dropped by the caller on `DoNothing`.
    pub(crate) fn transition_to_notified_by_val(&self) -> TransitionToNotified {
        self.fetch_update_action(|mut next| {
            if next.is_running() {
                next.0 |= NOTIFIED;
                // Drop the waker's reference in the same CAS; the running worker holds one.
                next.ref_dec();
                (TransitionToNotified::DoNothing, Some(next))
            } else if next.is_complete() || next.is_scheduled() {
                next.ref_dec();
                let action = if next.ref_count() == 0 {
                    TransitionToNotified::Dealloc
                } else {
                    TransitionToNotified::DoNothing
                };
                (action, Some(next))
            } else {
                next.0 |= SCHEDULED;
                (TransitionToNotified::Submit, Some(next))
            }
        })
    }

    /// A wake that keeps its reference: a borrowed waker fires (`wake_by_ref`), a
    /// [`DeferredWake`](super::DeferredWake) is prepared, or a broadcast wakes every owned task
    /// (module docs, "Wake by reference"). On `Submit` a new reference was taken for the
    /// `Notified`. It *writes* the word in every case but `COMPLETE` — a queued or
    /// already-notified task gets its own value back — so that it is an RMW in the word's order
    /// (module docs: a plain load would race with the poller's and could lose the wake).
    pub(crate) fn transition_to_notified_by_ref(&self) -> TransitionToNotified {
        self.fetch_update_action(|mut next| {
            if next.is_complete() {
                (TransitionToNotified::DoNothing, None)
            } else if next.is_running() {
                next.0 |= NOTIFIED;
                (TransitionToNotified::DoNothing, Some(next))
            } else if next.is_scheduled() {
                (TransitionToNotified::DoNothing, Some(next))
            } else {
                next.0 |= SCHEDULED;
                next.ref_inc();
                (TransitionToNotified::Submit, Some(next))
            }
        })
    }

    /// `abort()`: set `CANCELLED`; if the task is idle, also schedule it so a worker cancels it
    /// (taking a reference for the `Notified`). A running task notices at the end of its poll; a
    /// queued one when its `Notified` is run.
    pub(crate) fn transition_to_notified_and_cancel(&self) -> TransitionToNotified {
        self.fetch_update_action(|mut next| {
            if next.is_cancelled() || next.is_complete() {
                (TransitionToNotified::DoNothing, None)
            } else if next.is_running() || next.is_scheduled() {
                next.0 |= CANCELLED;
                (TransitionToNotified::DoNothing, Some(next))
            } else {
                next.0 |= CANCELLED | SCHEDULED;
                next.ref_inc();
                (TransitionToNotified::Submit, Some(next))
            }
        })
    }

    /// Shutdown: set `CANCELLED`, and if nobody holds the future, take it (`RUNNING`). Returns
    /// `true` when the caller now holds the future and must cancel it.
    pub(crate) fn transition_to_shutdown(&self) -> bool {
        let mut taken = false;
        let _ = self.fetch_update(|mut next| {
            taken = false;
            if next.is_running() || next.is_complete() {
                next.0 |= CANCELLED;
            } else {
                next.0 |= CANCELLED | RUNNING;
                taken = true;
            }
            Some(next)
        });
        taken
    }

    /// `JoinHandle::poll`, slot owned by the handle: publish the waker just written.
    /// Fails (returning the state) if the task completed meanwhile; the slot stays the handle's.
    pub(crate) fn set_join_waker(&self) -> Result<Snapshot, Snapshot> {
        self.fetch_update(|mut next| {
            debug_assert!(next.is_join_interested());
            if next.is_complete() {
                return None;
            }
            debug_assert!(!next.is_join_waker_set());
            next.0 |= JOIN_WAKER;
            Some(next)
        })
    }

    /// `JoinHandle::poll` with a different waker: take the slot back before rewriting it.
    /// Fails if the task completed meanwhile (then the slot stays the runtime's until it is done).
    pub(crate) fn unset_join_waker(&self) -> Result<Snapshot, Snapshot> {
        self.fetch_update(|mut next| {
            debug_assert!(next.is_join_interested());
            if next.is_complete() {
                // The runtime may already have handed the slot back after waking it.
                return None;
            }
            debug_assert!(next.is_join_waker_set());
            next.0 &= !JOIN_WAKER;
            Some(next)
        })
    }

    /// Runtime, after waking the join waker on completion: hand the slot back. Returns the state
    /// after the transition; if the handle is gone by now, the runtime drops the waker.
    pub(crate) fn unset_waker_after_complete(&self) -> Snapshot {
        let prev = Snapshot(self.val.fetch_and(!JOIN_WAKER, AcqRel));
        debug_assert!(prev.is_complete() && prev.is_join_waker_set());
        Snapshot(prev.0 & !JOIN_WAKER)
    }

    /// The `JoinHandle` is dropped: clear `JOIN_INTEREST`, and if the task is not complete take the
    /// waker slot back too (the runtime will then neither wake it nor touch the output).
    pub(crate) fn transition_to_join_handle_dropped(&self) -> TransitionToJoinHandleDrop {
        self.fetch_update_action(|mut next| {
            debug_assert!(next.is_join_interested());
            next.0 &= !JOIN_INTEREST;
            let drop_output = next.is_complete();
            if !drop_output {
                next.0 &= !JOIN_WAKER;
            }
            let drop_waker = !next.is_join_waker_set();
            (
                TransitionToJoinHandleDrop {
                    drop_output,
                    drop_waker,
                },
                Some(next),
            )
        })
    }

    /// Takes one more reference (a cloned waker).
    pub(crate) fn ref_inc(&self) {
        // Relaxed is enough: a new reference is always made from an existing one, which keeps
        // the task alive meanwhile (the argument of `Arc::clone`).
        let prev = self.val.fetch_add(REF_ONE, Relaxed);
        if prev > isize::MAX as usize {
            // Like `Arc`, refuse to overflow the count: a leak of 2^57 wakers is a bug anyway.
            std::process::abort();
        }
    }

    /// Drops one reference; returns `true` if it was the last (the caller deallocates).
    pub(crate) fn ref_dec(&self) -> bool {
        let prev = Snapshot(self.val.fetch_sub(REF_ONE, AcqRel));
        debug_assert!(prev.ref_count() >= 1);
        prev.ref_count() == 1
    }

    /// Drops two references at once (the running worker's and the owned list's, at completion).
    pub(crate) fn ref_dec_twice(&self) -> bool {
        let prev = Snapshot(self.val.fetch_sub(2 * REF_ONE, AcqRel));
        debug_assert!(prev.ref_count() >= 2);
        prev.ref_count() == 2
    }

    /// The single CAS loop every conditional transition goes through.
    fn fetch_update_action<T>(&self, mut f: impl FnMut(Snapshot) -> (T, Option<Snapshot>)) -> T {
        let mut curr = self.load();
        loop {
            let (action, next) = f(curr);
            let Some(next) = next else { return action };
            match self
                .val
                .compare_exchange_weak(curr.0, next.0, AcqRel, Acquire)
            {
                Ok(_) => return action,
                Err(actual) => curr = Snapshot(actual),
            }
        }
    }

    fn fetch_update(
        &self,
        mut f: impl FnMut(Snapshot) -> Option<Snapshot>,
    ) -> Result<Snapshot, Snapshot> {
        let mut curr = self.load();
        loop {
            let Some(next) = f(curr) else {
                return Err(curr);
            };
            match self
                .val
                .compare_exchange_weak(curr.0, next.0, AcqRel, Acquire)
            {
                Ok(_) => return Ok(next),
                Err(actual) => curr = Snapshot(actual),
            }
        }
    }
}

impl Snapshot {
    pub(crate) fn is_running(self) -> bool {
        self.0 & RUNNING != 0
    }
    pub(crate) fn is_complete(self) -> bool {
        self.0 & COMPLETE != 0
    }
    pub(crate) fn is_scheduled(self) -> bool {
        self.0 & SCHEDULED != 0
    }
    pub(crate) fn is_notified(self) -> bool {
        self.0 & NOTIFIED != 0
    }
    pub(crate) fn is_cancelled(self) -> bool {
        self.0 & CANCELLED != 0
    }
    pub(crate) fn is_join_interested(self) -> bool {
        self.0 & JOIN_INTEREST != 0
    }
    pub(crate) fn is_join_waker_set(self) -> bool {
        self.0 & JOIN_WAKER != 0
    }
    pub(crate) fn ref_count(self) -> usize {
        self.0 >> REF_SHIFT
    }
    fn ref_inc(&mut self) {
        self.0 += REF_ONE;
    }
    fn ref_dec(&mut self) {
        debug_assert!(self.ref_count() > 0);
        self.0 -= REF_ONE;
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.load().fmt(f)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("flags", &format_args!("{:#09b}", self.0 & FLAG_MASK))
            .field("running", &self.is_running())
            .field("complete", &self.is_complete())
            .field("scheduled", &self.is_scheduled())
            .field("notified", &self.is_notified())
            .field("cancelled", &self.is_cancelled())
            .field("join_interest", &self.is_join_interested())
            .field("join_waker", &self.is_join_waker_set())
            .field("refs", &self.ref_count())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn initial_state_is_scheduled_with_three_refs() {
        let s = State::new().load();
        assert!(s.is_scheduled() && s.is_join_interested());
        assert!(!s.is_running() && !s.is_complete() && !s.is_notified());
        assert_eq!(s.ref_count(), 3);
    }

    #[test]
    fn wake_while_running_sets_flag_and_requeues_once() {
        let state = State::new();
        assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
        assert_eq!(
            state.transition_to_notified_by_ref(),
            TransitionToNotified::DoNothing
        );
        assert!(state.load().is_notified());
        assert_eq!(state.transition_to_idle(), TransitionToIdle::OkNotified);
        let s = state.load();
        assert!(s.is_scheduled() && !s.is_notified() && !s.is_running());
        assert_eq!(s.ref_count(), 3, "re-queue reuses the running reference");
    }

    #[test]
    fn wake_when_idle_submits_and_takes_a_reference() {
        let state = State::new();
        assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
        assert_eq!(state.transition_to_idle(), TransitionToIdle::Ok);
        assert_eq!(
            state.load().ref_count(),
            2,
            "idle dropped the poll's reference"
        );
        assert_eq!(
            state.transition_to_notified_by_ref(),
            TransitionToNotified::Submit
        );
        assert_eq!(state.load().ref_count(), 3);
        assert_eq!(
            state.transition_to_notified_by_ref(),
            TransitionToNotified::DoNothing,
            "a second wake while queued does nothing"
        );
    }

    #[test]
    fn cancel_is_seen_by_the_runner() {
        let state = State::new();
        assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
        assert_eq!(
            state.transition_to_notified_and_cancel(),
            TransitionToNotified::DoNothing
        );
        assert_eq!(state.transition_to_idle(), TransitionToIdle::Cancelled);
        assert!(
            state.load().is_running(),
            "the runner still holds the future"
        );
    }

    #[test]
    fn shutdown_takes_an_idle_future_only() {
        let state = State::new();
        assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
        assert!(
            !state.transition_to_shutdown(),
            "running: the runner cancels"
        );
        let state = State::new();
        assert!(state.transition_to_shutdown(), "queued: the caller cancels");
        assert_eq!(state.transition_to_running(), TransitionToRunning::Failed);
    }

    #[test]
    fn join_handle_drop_after_complete_owns_the_output() {
        let state = State::new();
        assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
        let s = state.transition_to_complete();
        assert!(s.is_complete() && !s.is_running());
        let t = state.transition_to_join_handle_dropped();
        assert!(t.drop_output && t.drop_waker);
    }
}
