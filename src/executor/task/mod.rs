//! Tasks: one allocation per spawned future, driven by an atomic state word.
//!
//! The task module knows nothing about workers or queues; it talks to its executor through the
//! [`Schedule`] trait. That keeps the state protocol testable with loom against a toy scheduler.
//!
//! | handle | references | may |
//! |---|---|---|
//! | [`Task`] | 1 | live in the scheduler's owned-task list (or with an unowned task's owner); cancel the task at shutdown |
//! | [`Notified`] | 1 | sit in a run queue; be run (poll) by exactly one worker |
//! | [`JoinHandle`] | 1 + `JOIN_INTEREST` | read the output; abort |
//! | `Waker` | 1 each | wake the task |
//!
//! A [`Task`] can wake its task too ([`Task::wake_by_broadcast`]): the owned-task list's
//! `wake_all` does, for a condition its tasks check on every poll.

mod after_complete;
mod deferred_wake;
mod error;
mod harness;
mod join;
mod raw;
mod state;
mod waker;

#[cfg(test)]
pub(super) mod tests;

pub(crate) use after_complete::defer as defer_after_complete;
pub(crate) use deferred_wake::DeferredWake;
pub(crate) use error::panic_message;
pub use error::JoinError;
pub use join::JoinHandle;
pub(crate) use raw::{Header, RawTask};

use state::TransitionToNotified;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

/// What a task needs from its executor.
pub(crate) trait Schedule: Send + Sync + Sized + 'static {
    /// A task became runnable (woken, or aborted while idle).
    fn schedule(&self, task: Notified<Self>);

    /// A task woke itself while running: queue it behind other ready work.
    fn yield_now(&self, task: Notified<Self>);

    /// The task completed: remove it from the owned-task list and return the list's reference,
    /// or `None` if the list no longer holds it (shutdown already took it).
    fn release(&self, task: &Task<Self>) -> Option<Task<Self>>;

    /// `true` once the executor is shutting down (a cancelled task then reports `Shutdown`).
    fn is_shutdown(&self) -> bool;

    /// A destructor of the task labelled `label` (its future, or an output nobody will read)
    /// panicked after the task had its outcome; the harness contained it. For the metrics.
    fn destructor_panicked(&self, label: u64) {
        let _ = label;
    }
}

/// The owner's reference to a task: the owned-task list's, or an unowned task's `TaskRef`'s.
pub(crate) struct Task<S: 'static> {
    raw: RawTask,
    _scheduler: PhantomData<S>,
}

/// A task that is scheduled to run: the reference a run queue holds. Running it consumes it.
pub(crate) struct Notified<S: 'static>(Task<S>);

// SAFETY: tasks are only created from `Send` futures with `Send` outputs; everything a `Task`
// gives access to is behind the state word's protocol.
unsafe impl<S: Schedule> Send for Task<S> {}
// SAFETY: as above; `&Task` only reads atomics.
unsafe impl<S: Schedule> Sync for Task<S> {}
// SAFETY: as for `Task`.
unsafe impl<S: Schedule> Send for Notified<S> {}

/// Allocates a task for `future`, bound to `scheduler`.
///
/// Returns the owned-list reference, the first `Notified` (to queue) and the `JoinHandle`.
#[cfg(test)]
pub(crate) fn new<F, S>(future: F, scheduler: S) -> (Task<S>, Notified<S>, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    new_labelled(future, scheduler, 0)
}

/// `new` with a label (0: none) the executor's monitor reports a long poll of this task with.
#[inline(always)]
pub(crate) fn new_labelled<F, S>(
    future: F,
    scheduler: S,
    label: u64,
) -> (Task<S>, Notified<S>, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    let raw = RawTask::from_raw(raw::Cell::allocate(future, scheduler, label));
    // SAFETY: the state word starts with three references, one for each handle, `SCHEDULED`
    // (for the `Notified`) and `JOIN_INTEREST` (for the `JoinHandle`); the output type is `F::Output`.
    unsafe {
        (
            Task::from_raw(raw),
            Notified::from_raw(raw),
            JoinHandle::new(raw),
        )
    }
}

impl<S: Schedule> Task<S> {
    /// # Safety
    /// The caller transfers one task reference to the new `Task`.
    pub(super) unsafe fn from_raw(raw: RawTask) -> Task<S> {
        Task {
            raw,
            _scheduler: PhantomData,
        }
    }

    pub(crate) fn header(&self) -> &Header {
        self.raw.header()
    }

    /// Cancels the task unless a worker is polling it (that worker cancels it when the poll
    /// returns) or it already completed. Returns `true` if this call dropped the future.
    /// Idempotent.
    pub(crate) fn shutdown(&self) -> bool {
        self.raw.shutdown()
    }

    /// Wakes the task for a broadcast (`OwnedTasks::wake_all`, `state.rs` "Wake by reference"): an
    /// idle task is queued, a running one polled once more, a queued or completed one left as it
    /// is. A spurious wake, which every future must tolerate.
    pub(crate) fn wake_by_broadcast(&self) {
        match self.raw.state().transition_to_notified_by_ref() {
            TransitionToNotified::Submit => self.raw.schedule(),
            TransitionToNotified::DoNothing => {}
            TransitionToNotified::Dealloc => unreachable!("a wake never drops a reference"),
        }
    }

    /// `true` if both handles refer to the same task.
    pub(crate) fn ptr_eq(&self, other: &Task<S>) -> bool {
        self.raw == other.raw
    }
}

impl<S: Schedule> Notified<S> {
    /// # Safety
    /// The caller transfers one task reference and the task's `SCHEDULED` bit to the new value.
    pub(super) unsafe fn from_raw(raw: RawTask) -> Notified<S> {
        // SAFETY: forwarded.
        Notified(unsafe { Task::from_raw(raw) })
    }

    pub(crate) fn header(&self) -> &Header {
        self.0.header()
    }

    /// Polls the task once (or cancels it, or drops this stale reference).
    pub(crate) fn run(self) {
        let raw = self.0.raw;
        std::mem::forget(self);
        raw.poll();
    }
}

impl<S: 'static> Drop for Task<S> {
    fn drop(&mut self) {
        self.raw.drop_reference();
    }
}

impl<S: 'static> fmt::Debug for Task<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("state", self.raw.state())
            .finish()
    }
}

impl<S: 'static> fmt::Debug for Notified<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Notified").field(&self.0).finish()
    }
}
