//! The poll, complete and cancel protocol of a task: the vtable functions for one `F` and `S`.
//!
//! # Poll (a worker holds a `Notified`)
//! 1. `transition_to_running`: take the future, or learn it was cancelled, or drop the stale
//!    `Notified` (shutdown got there first).
//! 2. Poll it inside `catch_unwind`, with a borrowed waker (no reference-count traffic).
//! 3. `Pending` → `transition_to_idle`: release it and its reference in one RMW; if woken
//!    meanwhile re-queue the same `Notified`
//!    through [`Schedule::yield_now`] (behind other ready work); if cancelled meanwhile, cancel.
//! 4. `Ready` or panic → store the output (or `JoinError::Panic`), then complete.
//!
//! # Complete (the caller holds `RUNNING`, the output is stored)
//! 1. Remove the task from the scheduler's owned list (so an awakened joiner sees it gone); an
//!    unowned task was never in it (`executor/unowned.rs`, step 2), and its owner's reference is
//!    the owner's to drop.
//! 2. `transition_to_complete`: `RUNNING` → `COMPLETE` in one RMW.
//! 3. No `JoinHandle`? Drop the output here. Otherwise, if the join waker is registered, wake it
//!    and hand the slot back (`unset_waker_after_complete`); if the handle vanished meanwhile,
//!    drop the waker here.
//! 4. Drop the owned list's reference (if it held one) together with the caller's, in one RMW.
//! 5. Run the work its future deferred until its result is out (`after_complete.rs`: a
//!    process's unread messages, whose destructors then hold up neither its handle nor its
//!    count).
//!
//! Panics from user destructors (future, output) and from the join waker are caught at every
//! step: a task can never unwind into a worker. Those that change nothing the `JoinHandle`
//! reports (an output nobody reads, a panicked future's remains) are told to the scheduler
//! ([`Schedule::destructor_panicked`]) for its metrics.

use super::error::JoinError;
use super::raw::{Cell, Header, RawTask, Vtable};
use super::state::{TransitionToIdle, TransitionToRunning};
use super::{waker, Notified, Schedule, Task};
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::task::{Context, Poll, Waker};

pub(super) fn vtable<F, S>() -> &'static Vtable
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    &Vtable {
        poll: poll::<F, S>,
        schedule: schedule::<F, S>,
        dealloc: dealloc::<F, S>,
        try_read_output: try_read_output::<F, S>,
        drop_join_handle_slow: drop_join_handle_slow::<F, S>,
        shutdown: shutdown::<F, S>,
    }
}

/// Typed view of a task allocation.
struct Harness<F: Future, S: 'static> {
    cell: NonNull<Cell<F, S>>,
}

impl<F, S> Harness<F, S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    /// # Safety
    /// `ptr` points to a live `Cell<F, S>` (the vtable that led here was built for `F`, `S`).
    unsafe fn from_raw(ptr: NonNull<Header>) -> Self {
        Harness { cell: ptr.cast() }
    }

    fn cell(&self) -> &Cell<F, S> {
        // SAFETY: the allocation is live while the caller holds a reference (`from_raw`).
        unsafe { self.cell.as_ref() }
    }

    fn raw(&self) -> RawTask {
        RawTask::from_raw(self.cell.cast())
    }

    /// A destructor (the future's, or an unread output's) panicked after the task's outcome
    /// was settled, and was contained: tell the scheduler, for its metrics.
    #[cold]
    fn destructor_panicked(&self) {
        let cell = self.cell();
        cell.core.scheduler.destructor_panicked(cell.header.label);
    }

    fn poll(self) {
        match self.cell().header.state.transition_to_running() {
            TransitionToRunning::Success => self.poll_inner(),
            TransitionToRunning::Cancelled => {
                self.cancel_future();
                self.complete(1);
            }
            TransitionToRunning::Failed => self.raw().drop_reference(),
        }
    }

    fn poll_inner(self) {
        let raw = self.raw();
        // A borrowed waker: valid while this poll holds the `Notified` reference; clones made by
        // the future take their own references.
        let waker = ManuallyDrop::new(waker::borrowed(raw));
        let mut cx = Context::from_waker(&waker);
        let core = &self.cell().core;
        // SAFETY: we hold `RUNNING`.
        let polled = catch_unwind(AssertUnwindSafe(|| unsafe { core.poll_future(&mut cx) }));
        match polled {
            Ok(Poll::Pending) => match self.cell().header.state.transition_to_idle() {
                TransitionToIdle::Ok => {}
                TransitionToIdle::OkDealloc => raw.dealloc(),
                TransitionToIdle::OkNotified => {
                    // SAFETY: `OkNotified` set `SCHEDULED` again; the poll's reference is reused.
                    let notified = unsafe { Notified::<S>::from_raw(raw) };
                    core.scheduler.yield_now(notified);
                }
                TransitionToIdle::Cancelled => {
                    self.cancel_future();
                    self.complete(1);
                }
            },
            Ok(Poll::Ready(output)) => {
                // Drop the future before publishing the output: its destructor may panic.
                // SAFETY: we hold `RUNNING`.
                let dropped = catch_unwind(AssertUnwindSafe(|| unsafe { core.drop_stage() }));
                let result = match dropped {
                    Ok(()) => Ok(output),
                    Err(panic) => Err(JoinError::panic(panic)),
                };
                // SAFETY: we hold `RUNNING`.
                unsafe { core.store_output(result) };
                self.complete(1);
            }
            Err(panic) => {
                tracing::debug!(
                    message = super::error::panic_message(&*panic),
                    "task panicked"
                );
                // SAFETY: we hold `RUNNING`; the future may be half-torn by the panic, but
                // dropping it is the only thing left to do.
                if catch_unwind(AssertUnwindSafe(|| unsafe { core.drop_stage() })).is_err() {
                    self.destructor_panicked();
                }
                // SAFETY: we hold `RUNNING`.
                unsafe { core.store_output(Err(JoinError::panic(panic))) };
                self.complete(1);
            }
        }
    }

    /// Drops the future and stores the matching error. The caller holds `RUNNING`.
    fn cancel_future(&self) {
        let core = &self.cell().core;
        // SAFETY: the caller holds `RUNNING`.
        let dropped = catch_unwind(AssertUnwindSafe(|| unsafe { core.drop_stage() }));
        let error = match dropped {
            Err(panic) => JoinError::panic(panic),
            Ok(()) if core.scheduler.is_shutdown() => JoinError::shutdown(),
            Ok(()) => JoinError::cancelled(),
        };
        // SAFETY: the caller holds `RUNNING`.
        unsafe { core.store_output(Err(error)) };
    }

    /// The completion protocol (module docs). `held_refs` references of the caller are dropped.
    fn complete(self, held_refs: usize) {
        let cell = self.cell();
        let raw = self.raw();
        // Leave the owned list first, so that whoever the join waker wakes already sees the task
        // gone from it (`Handle::live_tasks`). Safe before `COMPLETE`: we hold `RUNNING`, so a
        // concurrent shutdown could only mark the task cancelled, which no longer matters.
        // SAFETY: `raw` is live (we hold references); the `ManuallyDrop` means this borrowed
        // `Task` never drops a reference it does not own.
        let me = ManuallyDrop::new(unsafe { Task::<S>::from_raw(raw) });
        let released = cell.core.scheduler.release(&me);
        let count = held_refs + usize::from(released.is_some());
        // The released `Task` reference is dropped together with ours below, in one RMW.
        std::mem::forget(released);

        let snapshot = cell.header.state.transition_to_complete();
        if !snapshot.is_join_interested() {
            // SAFETY: no `JoinHandle`: the completer owns the output.
            if catch_unwind(AssertUnwindSafe(|| unsafe { cell.core.drop_stage() })).is_err() {
                self.destructor_panicked();
            }
        }
        let _ = catch_unwind(AssertUnwindSafe(|| {
            if snapshot.is_join_interested() && snapshot.is_join_waker_set() {
                // SAFETY: `JOIN_WAKER` is set: the slot is ours to read until we unset it.
                unsafe { cell.trailer.wake_join() };
                let after = cell.header.state.unset_waker_after_complete();
                if !after.is_join_interested() {
                    // SAFETY: the handle was dropped while we held the slot; it left the waker
                    // to us.
                    unsafe { cell.trailer.set_waker(None) };
                }
            }
        }));

        let last = match count {
            1 => cell.header.state.ref_dec(),
            2 => cell.header.state.ref_dec_twice(),
            _ => {
                // Shutdown path with no held reference and the task already released.
                debug_assert_eq!(count, 0);
                false
            }
        };
        if last {
            raw.dealloc();
        }
        // The result is out: the work the future deferred runs now, on this thread.
        super::after_complete::run();
    }
}

unsafe fn poll<F, S>(ptr: NonNull<Header>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: the vtable is this function's `F`, `S`.
    unsafe { Harness::<F, S>::from_raw(ptr) }.poll();
}

unsafe fn schedule<F, S>(ptr: NonNull<Header>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: the vtable is this function's `F`, `S`.
    let harness = unsafe { Harness::<F, S>::from_raw(ptr) };
    // SAFETY: the caller took the reference and set `SCHEDULED` for this `Notified`.
    let notified = unsafe { Notified::<S>::from_raw(harness.raw()) };
    harness.cell().core.scheduler.schedule(notified);
}

unsafe fn dealloc<F, S>(ptr: NonNull<Header>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: the reference count is zero, so this is the only pointer; it came from
    // `Box::leak` in `Cell::allocate` with this `F`, `S`.
    let cell = unsafe { Box::from_raw(ptr.cast::<Cell<F, S>>().as_ptr()) };
    // Only `Consumed` (or a never-read `Finished`, if the last reference went away before the
    // handle read it and then dropped it — impossible by the protocol) can remain; still, user
    // types must not unwind out of a waker drop.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(cell)));
}

unsafe fn try_read_output<F, S>(ptr: NonNull<Header>, dst: *mut (), waker: &Waker)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: the vtable is this function's `F`, `S`; the caller is the `JoinHandle`.
    let harness = unsafe { Harness::<F, S>::from_raw(ptr) };
    let cell = harness.cell();
    if can_read_output(cell, waker) {
        // SAFETY: `COMPLETE` with `JOIN_INTEREST`: the output belongs to the handle.
        let output = unsafe { cell.core.take_output() };
        // SAFETY: the caller passes a `Poll<Result<F::Output, JoinError>>` (`RawTask::try_read_output`).
        unsafe { *dst.cast::<Poll<Result<F::Output, JoinError>>>() = Poll::Ready(output) };
    }
}

/// `JoinHandle::poll`'s side of the join-waker protocol: `true` once the output can be read,
/// otherwise the waker is registered.
fn can_read_output<F: Future, S>(cell: &Cell<F, S>, waker: &Waker) -> bool {
    let state = &cell.header.state;
    let snapshot = state.load();
    if snapshot.is_complete() {
        return true;
    }
    let result = if !snapshot.is_join_waker_set() {
        // SAFETY: `JOIN_WAKER` clear: the slot is the handle's.
        unsafe { cell.trailer.set_waker(Some(waker.clone())) };
        state.set_join_waker()
    } else {
        // SAFETY: `JOIN_WAKER` set: the handle may read the slot (the runtime only reads it).
        if unsafe { cell.trailer.will_wake(waker) } {
            return false;
        }
        // Take the slot back, then publish the new waker.
        match state.unset_join_waker() {
            Ok(_) => {
                // SAFETY: the slot is the handle's again.
                unsafe { cell.trailer.set_waker(Some(waker.clone())) };
                state.set_join_waker()
            }
            Err(snapshot) => Err(snapshot),
        }
    };
    match result {
        Ok(_) => false,
        Err(snapshot) => {
            debug_assert!(snapshot.is_complete());
            if !snapshot.is_join_waker_set() {
                // SAFETY: `JOIN_WAKER` clear: our stale waker is ours to drop.
                unsafe { cell.trailer.set_waker(None) };
            }
            true
        }
    }
}

unsafe fn drop_join_handle_slow<F, S>(ptr: NonNull<Header>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: the vtable is this function's `F`, `S`; the caller is the `JoinHandle`.
    let harness = unsafe { Harness::<F, S>::from_raw(ptr) };
    let cell = harness.cell();
    let transition = cell.header.state.transition_to_join_handle_dropped();
    if transition.drop_output {
        // SAFETY: `COMPLETE` and we held `JOIN_INTEREST`: the output is ours. A panicking
        // output destructor must not unwind into whoever dropped the handle.
        if catch_unwind(AssertUnwindSafe(|| unsafe { cell.core.drop_stage() })).is_err() {
            harness.destructor_panicked();
        }
    }
    if transition.drop_waker {
        // SAFETY: `JOIN_WAKER` is clear after the transition: the slot is ours.
        unsafe { cell.trailer.set_waker(None) };
    }
    harness.raw().drop_reference();
}

unsafe fn shutdown<F, S>(ptr: NonNull<Header>) -> bool
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: the vtable is this function's `F`, `S`; the caller holds a reference.
    let harness = unsafe { Harness::<F, S>::from_raw(ptr) };
    if harness.cell().header.state.transition_to_shutdown() {
        harness.cancel_future();
        // The caller keeps (and later drops) its own reference.
        harness.complete(0);
        true
    } else {
        false
    }
}
