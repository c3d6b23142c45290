//! The `Waker` of a task: one static vtable, the data pointer is the task header.
//!
//! A waker owns one task reference (taken by `clone`, given back by `drop` or `wake`), except the
//! borrowed waker a worker builds for a poll, which lives inside a `ManuallyDrop` and leans on the
//! poll's own reference.

use super::raw::{Header, RawTask};
use super::state::TransitionToNotified;
use std::ptr::NonNull;
use std::task::{RawWaker, RawWakerVTable, Waker};

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake_by_val, wake_by_ref, drop_waker);

/// A waker that does not own a reference; never drop it (wrap it in `ManuallyDrop`).
pub(super) fn borrowed(raw: RawTask) -> Waker {
    // SAFETY: the vtable functions below uphold the `RawWaker` contract for a task pointer; the
    // caller keeps the task alive while the waker (and its non-dropped copy) is in use.
    unsafe { Waker::from_raw(raw_waker(raw)) }
}

/// The task `waker` wakes, if it is one of this executor's wakers (which keeps the task alive
/// while it is borrowed). `VTABLE` is a `static`, so its address identifies our wakers.
#[inline]
pub(super) fn task_of(waker: &Waker) -> Option<RawTask> {
    // SAFETY: a waker with our vtable was built by `raw_waker`, from a task header pointer.
    std::ptr::eq(waker.vtable(), &VTABLE).then(|| unsafe { raw_task(waker.data()) })
}

fn raw_waker(raw: RawTask) -> RawWaker {
    RawWaker::new(raw.header_ptr().as_ptr() as *const (), &VTABLE)
}

/// # Safety
/// `ptr` is the data pointer of one of our wakers, which keeps the task alive.
unsafe fn raw_task(ptr: *const ()) -> RawTask {
    // SAFETY: our wakers are only ever built from non-null header pointers.
    RawTask::from_raw(unsafe { NonNull::new_unchecked(ptr as *mut Header) })
}

unsafe fn clone(ptr: *const ()) -> RawWaker {
    // SAFETY: `ptr` comes from one of our wakers, which holds (or borrows) a reference.
    let raw = unsafe { raw_task(ptr) };
    raw.state().ref_inc();
    raw_waker(raw)
}

unsafe fn wake_by_val(ptr: *const ()) {
    // SAFETY: `ptr` comes from an owning waker; its reference is consumed below.
    let raw = unsafe { raw_task(ptr) };
    match raw.state().transition_to_notified_by_val() {
        TransitionToNotified::Submit => raw.schedule(),
        TransitionToNotified::DoNothing => {}
        TransitionToNotified::Dealloc => raw.dealloc(),
    }
}

unsafe fn wake_by_ref(ptr: *const ()) {
    // SAFETY: `ptr` comes from a live waker.
    let raw = unsafe { raw_task(ptr) };
    match raw.state().transition_to_notified_by_ref() {
        TransitionToNotified::Submit => raw.schedule(),
        TransitionToNotified::DoNothing => {}
        TransitionToNotified::Dealloc => unreachable!("wake_by_ref never drops a reference"),
    }
}

unsafe fn drop_waker(ptr: *const ()) {
    // SAFETY: `ptr` comes from an owning waker, whose reference is dropped here.
    unsafe { raw_task(ptr) }.drop_reference();
}
