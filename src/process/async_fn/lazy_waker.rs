//! The waker a body is polled with, made only when something keeps it.
//!
//! Most bodies await only procsched futures (calls, receives), which never touch the waker: a
//! process's own events re-poll it. Building the real waker — an allocation that delivers
//! [`Event::Woken`](crate::state_machine::Event::Woken) into the process's cell — for every process would be
//! paid by all for the few that await a foreign future. So the body is polled with a *lazy*
//! waker that points at the adapter: cloning it (what a future does to be woken later) builds
//! the real one; waking it in place during the poll (what a future that is ready again at once
//! does) just tells the adapter to run the body again soon.

use crate::process::context::ProcessWake;
use std::cell::Cell;
use std::task::{RawWaker, RawWakerVTable, Waker};

/// The adapter's side of the lazy waker.
#[derive(Default)]
pub(super) struct LazyWaker {
    /// What a real waker wakes (its allocation is made on the first clone of a poll's lazy
    /// waker); `None` when the process is driven by hand (no cell).
    target: Option<ProcessWake>,
    /// The body woke its own (borrowed) waker during the last poll.
    woken_in_place: Cell<bool>,
}

impl LazyWaker {
    pub(super) fn new(target: Option<ProcessWake>) -> LazyWaker {
        LazyWaker {
            target,
            woken_in_place: Cell::new(false),
        }
    }

    /// `panics` destructor panics were contained for this process: counted in its cell's
    /// statistics (none to count when it is driven by hand).
    #[inline]
    pub(super) fn destructors_panicked(&self, panics: u64) {
        if panics != 0 {
            if let Some(target) = &self.target {
                target.destructors_panicked(panics);
            }
        }
    }

    /// What a real waker wakes: the process's cell, if it runs in a scheduler.
    pub(super) fn target(&self) -> Option<&ProcessWake> {
        self.target.as_ref()
    }

    /// `true` if a real waker can be made: foreign futures can wake this process.
    pub(super) fn can_wake(&self) -> bool {
        self.target.is_some()
    }

    /// Runs `poll` with the lazy waker; returns its result and whether the body woke the waker
    /// in place.
    #[inline]
    pub(super) fn poll_with<R>(&self, poll: impl FnOnce(&Waker) -> R) -> (R, bool) {
        self.woken_in_place.set(false);
        let raw = RawWaker::new((self as *const LazyWaker).cast(), &VTABLE);
        // SAFETY: the vtable's functions uphold `RawWaker`'s contract for this data pointer as
        // long as the pointee is alive and not mutably borrowed: `self` is borrowed for this
        // whole function, and the `Waker` is only lent to `poll` by reference (`ManuallyDrop`:
        // dropping it would be a no-op anyway), so no copy of the pointer outlives this call —
        // a future that keeps the waker clones it, and `clone` returns a real waker that does
        // not point here.
        let waker = std::mem::ManuallyDrop::new(unsafe { Waker::from_raw(raw) });
        let result = poll(&waker);
        (result, self.woken_in_place.get())
    }
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

/// # Safety
/// `data` points to a live `LazyWaker` (see [`LazyWaker::poll_with`]).
unsafe fn lazy<'a>(data: *const ()) -> &'a LazyWaker {
    // SAFETY: the caller's contract.
    unsafe { &*data.cast::<LazyWaker>() }
}

unsafe fn clone(data: *const ()) -> RawWaker {
    // SAFETY: only called through a waker made by `poll_with`, during its `poll`.
    let lazy = unsafe { lazy(data) };
    let real = match &lazy.target {
        Some(target) => target.clone().waker(),
        None => Waker::noop().clone(),
    };
    let real = std::mem::ManuallyDrop::new(real);
    RawWaker::new(real.data(), real.vtable())
}

unsafe fn wake(data: *const ()) {
    // SAFETY: as `clone` (a lazy waker is only ever lent, so this is `wake_by_ref` in effect).
    unsafe { wake_by_ref(data) }
}

unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: as `clone`.
    unsafe { lazy(data) }.woken_in_place.set(true);
}

unsafe fn drop_waker(_: *const ()) {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_clone_without_a_target_is_a_harmless_waker_and_an_in_place_wake_is_reported() {
        let lazy = LazyWaker::new(None);
        let ((), woken) = lazy.poll_with(|waker| {
            let kept = waker.clone();
            kept.wake_by_ref();
            drop(kept);
        });
        assert!(!woken, "a clone's wake is not an in-place wake");
        let ((), woken) = lazy.poll_with(Waker::wake_by_ref);
        assert!(woken);
        let ((), woken) = lazy.poll_with(|_| {});
        assert!(!woken, "reset for every poll");
    }
}
