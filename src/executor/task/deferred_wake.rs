//! A wake split in two: the task's state transition now, its queue push later.
//!
//! A mailbox wakes its process's task only after releasing its lock, so that the run-queue push
//! (and perhaps an unpark) stays out of the critical section the worker's drain contends on.
//! But the waker lives under that lock and may be dropped as soon as it is released (shutdown
//! closes the cell), so a plain [`Waker`] has to be cloned under the lock — one read-modify-write
//! of the task's state word, for the reference — and woken by value after it — a second one, for
//! the transition. Every message hop between processes pays both.
//!
//! For one of this executor's wakers, [`DeferredWake::prepare`] makes the wake's transition under
//! the lock with `wake_by_ref`'s compare-and-swap, which takes the `Notified`'s reference in the
//! same instruction; [`DeferredWake::fire`] queues that `Notified` after the unlock. Any other
//! waker is cloned and woken later, as before.
//!
//! # Why the gap between the two halves is safe
//! It is the gap inside every wake, between its transition and its push, made longer:
//! - the task is `SCHEDULED` with no `Notified` in a queue yet, so no worker can poll it, and
//!   every other wake in the gap sees `SCHEDULED` and leaves the queuing to this one (a wake
//!   that found the task idle takes the reference and *must* queue: hence firing on drop);
//! - the reference taken keeps the task alive through the gap, whatever happens to the waker
//!   it was prepared from;
//! - a shutdown in the gap finds the task idle-and-scheduled, as it could find any queued
//!   task; the late `Notified` goes where any late wake goes (`Schedule::schedule`).
//!
//! Checked by `loom_deferred_wake_while_running_causes_exactly_one_more_poll` and
//! `loom_deferred_wake_racing_with_completion` (`executor/tests/loom_task.rs`).

use super::raw::RawTask;
use super::state::TransitionToNotified;
use super::waker;
use std::task::Waker;

/// A wake whose transition is made and whose queuing is pending (module docs). Fires when
/// dropped: a prepared transition that took the task's `Notified` must be queued.
#[must_use = "a deferred wake fires when dropped; drop it after the lock it was prepared under"]
pub(crate) struct DeferredWake(Pending);

enum Pending {
    /// Nothing to wake (no waker, or the task is already queued, running or done).
    Nothing,
    /// One of this executor's tasks, `SCHEDULED` by `prepare`, with the `Notified`'s reference.
    Task(RawTask),
    /// Some other executor's waker (a clone), woken by value when fired.
    Foreign(Waker),
}

impl DeferredWake {
    /// Nothing to wake.
    pub(crate) const NONE: DeferredWake = DeferredWake(Pending::Nothing);

    /// Makes `waker`'s wake transition now (typically under the lock `waker` is kept under);
    /// the queuing waits for [`fire`](Self::fire) or the drop.
    #[inline]
    pub(crate) fn prepare(waker: &Waker) -> DeferredWake {
        match waker::task_of(waker) {
            Some(raw) => match raw.state().transition_to_notified_by_ref() {
                TransitionToNotified::Submit => DeferredWake(Pending::Task(raw)),
                TransitionToNotified::DoNothing => DeferredWake::NONE,
                TransitionToNotified::Dealloc => {
                    unreachable!("a wake by reference never drops a reference")
                }
            },
            None => DeferredWake(Pending::Foreign(waker.clone())),
        }
    }

    /// [`prepare`](Self::prepare) for a waker that may be absent.
    #[inline]
    pub(crate) fn prepare_opt(waker: Option<&Waker>) -> DeferredWake {
        waker.map_or(DeferredWake::NONE, DeferredWake::prepare)
    }

    /// Queues the task (or wakes the foreign waker): the wake's second half.
    #[inline]
    pub(crate) fn fire(self) {
        drop(self);
    }
}

impl Drop for DeferredWake {
    #[inline]
    fn drop(&mut self) {
        match std::mem::replace(&mut self.0, Pending::Nothing) {
            Pending::Nothing => {}
            // `prepare`'s transition set `SCHEDULED` and took the reference this `Notified` owns.
            Pending::Task(raw) => raw.schedule(),
            Pending::Foreign(waker) => waker.wake(),
        }
    }
}

impl std::fmt::Debug for DeferredWake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pending = match self.0 {
            Pending::Nothing => "nothing",
            Pending::Task(_) => "task",
            Pending::Foreign(_) => "foreign",
        };
        f.debug_tuple("DeferredWake").field(&pending).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::DeferredWake;
    use crate::executor::task::tests::toy::{probe, spawn, take_waker, ProbeShared, Toy};
    use crate::executor::JoinHandle;
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    /// A task polled once (waiting for its probe's event), its waker, and a wake prepared from it.
    fn prepared() -> (
        Arc<Toy>,
        Arc<ProbeShared>,
        JoinHandle<usize>,
        Waker,
        DeferredWake,
    ) {
        let toy = Arc::new(Toy::default());
        let (future, probe) = probe();
        let join = spawn(&toy, future);
        toy.run_all();
        let waker = take_waker(&probe);
        let wake = DeferredWake::prepare(&waker);
        (toy, probe, join, waker, wake)
    }

    #[test]
    fn a_prepared_wake_queues_the_task_once_when_fired() {
        let (toy, probe, join, waker, wake) = prepared();
        // A second wake in the gap leaves the queuing to the first.
        waker.wake_by_ref();
        assert!(toy.queue_len() == 0, "not queued before it fires");
        probe.event.store(true, SeqCst);
        wake.fire();
        assert_eq!(toy.queue_len(), 1);
        toy.run_all();
        assert_eq!(futures::executor::block_on(join).unwrap(), 2);
    }

    #[test]
    fn a_prepared_wake_keeps_the_task_alive_after_its_waker_drops() {
        let (toy, probe, join, waker, wake) = prepared();
        drop(waker);
        probe.event.store(true, SeqCst);
        drop(wake); // fires
        toy.run_all();
        assert_eq!(futures::executor::block_on(join).unwrap(), 2);
    }

    #[test]
    fn a_foreign_waker_is_woken_when_fired() {
        struct Count(std::sync::atomic::AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, SeqCst);
            }
        }
        let count = Arc::new(Count(0.into()));
        let waker = Waker::from(count.clone());
        let wake = DeferredWake::prepare(&waker);
        assert_eq!(count.0.load(SeqCst), 0);
        wake.fire();
        assert_eq!(count.0.load(SeqCst), 1);
        DeferredWake::prepare_opt(None).fire();
    }
}
