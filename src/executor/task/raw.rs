//! Memory layout of a task: one heap allocation holding header, future and join waker.
//!
//! ```text
//! Cell<F, S> (repr(C), one Box)
//! ├── Header   state word, vtable, two scheduler-owned words   ← every pointer points here
//! ├── Core     scheduler S, Stage<F>: Running(F) | Finished(output) | Consumed
//! └── Trailer  join waker slot
//! ```
//!
//! Type-erased code (wakers, `JoinHandle<T>`, queues) holds a `NonNull<Header>` and reaches the
//! typed parts through the [`Vtable`], whose functions are monomorphised for `F` and `S`.
//!
//! | field | who may touch it |
//! |---|---|
//! | `Header::state` | anyone holding a reference (atomic) |
//! | `Core::stage` | the holder of `RUNNING`; after `COMPLETE`, the `JoinHandle` (while `JOIN_INTEREST`) or else the completer |
//! | `Trailer::waker` | per `JOIN_WAKER` (see `state.rs`) |
//! | `Header::owner_slot`, `Header::affinity` | the scheduler (plain atomics, relaxed) |
//! | `Header::label` | nobody: written once at allocation, read by the worker that polls the task |

use super::error::JoinError;
use super::state::State;
use super::Schedule;
use crate::loom::atomic::AtomicUsize;
use crate::loom::UnsafeCell;
use std::future::Future;
use std::ptr::NonNull;
use std::task::{Poll, Waker};

/// The type-independent head of every task allocation.
#[repr(C)]
pub(crate) struct Header {
    pub(super) state: State,
    pub(super) vtable: &'static Vtable,
    /// Where the scheduler's owned-task list keeps this task (scheduler-defined meaning).
    pub(crate) owner_slot: AtomicUsize,
    /// The worker that last ran the task, for wake affinity (scheduler-defined meaning).
    pub(crate) affinity: AtomicUsize,
    /// The spawner's label (0: none), published by the polling worker for the monitor.
    pub(crate) label: u64,
}

/// Functions that know the concrete `F` and `S` of a task.
pub(super) struct Vtable {
    /// Runs one scheduled poll; consumes the `Notified` reference.
    pub(super) poll: unsafe fn(NonNull<Header>),
    /// Hands a `Notified` (whose reference the caller already took) to the scheduler.
    pub(super) schedule: unsafe fn(NonNull<Header>),
    /// Frees the allocation; the reference count is zero.
    pub(super) dealloc: unsafe fn(NonNull<Header>),
    /// `JoinHandle::poll`: writes `Poll<Result<F::Output, JoinError>>` to the pointer if ready.
    pub(super) try_read_output: unsafe fn(NonNull<Header>, *mut (), &Waker),
    /// `JoinHandle::drop`.
    pub(super) drop_join_handle_slow: unsafe fn(NonNull<Header>),
    /// Shutdown: cancel the task if nobody is running it; `true` if this call cancelled it.
    pub(super) shutdown: unsafe fn(NonNull<Header>) -> bool,
}

/// The typed allocation.
#[repr(C)]
pub(super) struct Cell<F: Future, S> {
    pub(super) header: Header,
    pub(super) core: Core<F, S>,
    pub(super) trailer: Trailer,
}

pub(super) struct Core<F: Future, S> {
    pub(super) scheduler: S,
    pub(super) stage: UnsafeCell<Stage<F>>,
}

pub(super) enum Stage<F: Future> {
    Running(F),
    Finished(Result<F::Output, JoinError>),
    Consumed,
}

pub(super) struct Trailer {
    pub(super) waker: UnsafeCell<Option<Waker>>,
}

impl<F, S> Cell<F, S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    /// Allocates a task; the state word starts with three references (see `state.rs`).
    #[inline(always)]
    pub(super) fn allocate(future: F, scheduler: S, label: u64) -> NonNull<Header> {
        let cell = Box::new(Cell {
            header: Header {
                state: State::new(),
                vtable: super::harness::vtable::<F, S>(),
                owner_slot: AtomicUsize::new(usize::MAX),
                affinity: AtomicUsize::new(usize::MAX),
                label,
            },
            core: Core {
                scheduler,
                stage: UnsafeCell::new(Stage::Running(future)),
            },
            trailer: Trailer {
                waker: UnsafeCell::new(None),
            },
        });
        // `Header` is the first field of a `repr(C)` struct, so a pointer to the cell is a
        // pointer to its header, with provenance over the whole allocation.
        NonNull::from(Box::leak(cell)).cast::<Header>()
    }
}

/// A type-erased, non-owning task pointer. Owning wrappers (`Task`, `Notified`, `JoinHandle`,
/// wakers) decide when references are taken and dropped.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawTask {
    ptr: NonNull<Header>,
}

impl RawTask {
    pub(super) fn from_raw(ptr: NonNull<Header>) -> RawTask {
        RawTask { ptr }
    }

    pub(super) fn header_ptr(self) -> NonNull<Header> {
        self.ptr
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: every `RawTask` is created from a live allocation, and its users hold a
        // reference (counted in the state word) for as long as they use it.
        unsafe { self.ptr.as_ref() }
    }

    pub(super) fn state(&self) -> &State {
        &self.header().state
    }

    /// Runs one poll. The caller gives up the reference of the `Notified` it held.
    pub(super) fn poll(self) {
        // SAFETY: the vtable matches the allocation (set in `allocate`); the caller owned a
        // `Notified` reference, which `poll` consumes.
        unsafe { (self.header().vtable.poll)(self.ptr) }
    }

    pub(super) fn schedule(self) {
        // SAFETY: as in `poll`; the caller took the reference the `Notified` will own.
        unsafe { (self.header().vtable.schedule)(self.ptr) }
    }

    pub(super) fn dealloc(self) {
        // SAFETY: as in `poll`; the reference count reached zero, so nobody else uses the task.
        unsafe { (self.header().vtable.dealloc)(self.ptr) }
    }

    /// # Safety
    /// `dst` must point to a `Poll<Result<T, JoinError>>` where `T` is the task's output type,
    /// and the caller must be the task's `JoinHandle`.
    pub(super) unsafe fn try_read_output(self, dst: *mut (), waker: &Waker) {
        // SAFETY: forwarded to the caller.
        unsafe { (self.header().vtable.try_read_output)(self.ptr, dst, waker) }
    }

    pub(super) fn drop_join_handle_slow(self) {
        // SAFETY: as in `poll`; only the `JoinHandle` calls this, once, from its `Drop`.
        unsafe { (self.header().vtable.drop_join_handle_slow)(self.ptr) }
    }

    pub(super) fn shutdown(self) -> bool {
        // SAFETY: as in `poll`; the caller holds a reference for the duration of the call.
        unsafe { (self.header().vtable.shutdown)(self.ptr) }
    }

    /// Drops one reference, freeing the task if it was the last.
    pub(super) fn drop_reference(self) {
        if self.state().ref_dec() {
            self.dealloc();
        }
    }
}

impl<F: Future, S> Core<F, S> {
    /// # Safety
    /// The caller holds `RUNNING` (or is the sole owner of the output per the table above).
    ///
    /// Drops the stage (the future or the output) in place and leaves `Consumed`, also when the
    /// drop panics (callers that may run user destructors wrap this in `catch_unwind`).
    ///
    /// In place rather than by assigning a new `Stage`: a `Stage` is as large as the future,
    /// and assigning one copies all of it (a `memcpy` per transition for large futures, such as
    /// async-fn processes), where only the discriminant changes.
    pub(super) unsafe fn drop_stage(&self) {
        /// Writes `Consumed` over the dropped (or half-dropped, after a panic) stage.
        struct Consume<F: Future>(*mut Stage<F>);
        impl<F: Future> Drop for Consume<F> {
            fn drop(&mut self) {
                // SAFETY: the stage was just dropped in place (`drop_in_place` drops every
                // field even when one panics): writing over it leaks nothing and drops nothing.
                unsafe { std::ptr::write(self.0, Stage::Consumed) };
            }
        }
        self.stage.with_mut(|ptr| {
            let _consume = Consume(ptr);
            // SAFETY: exclusive access per the caller's contract; `_consume` overwrites the
            // dropped value before anyone can see it.
            unsafe { std::ptr::drop_in_place(ptr) };
        });
    }

    /// # Safety
    /// As for [`Core::drop_stage`]; the stage is `Consumed` (dropped by `drop_stage`).
    pub(super) unsafe fn store_output(&self, output: Result<F::Output, JoinError>) {
        self.stage.with_mut(|ptr| {
            // SAFETY: exclusive access per the caller's contract.
            debug_assert!(matches!(unsafe { &*ptr }, Stage::Consumed));
            // SAFETY: as above; `Consumed` owns nothing, so nothing is leaked by not dropping it.
            unsafe { std::ptr::write(ptr, Stage::Finished(output)) };
        });
    }

    /// # Safety
    /// As for [`Core::drop_stage`].
    pub(super) unsafe fn take_output(&self) -> Result<F::Output, JoinError> {
        self.stage.with_mut(|ptr| {
            // SAFETY: exclusive access per the caller's contract.
            let Stage::Finished(output) = (unsafe { &mut *ptr }) else {
                panic!("JoinHandle polled after its output was taken")
            };
            // SAFETY: the output is moved out and the stage overwritten with `Consumed` at
            // once, without dropping it: it is read exactly once. Only the output is copied,
            // not a whole `Stage` (see `drop_stage`).
            unsafe {
                let output = std::ptr::read(output);
                std::ptr::write(ptr, Stage::Consumed);
                output
            }
        })
    }

    /// # Safety
    /// The caller holds `RUNNING`.
    pub(super) unsafe fn poll_future(&self, cx: &mut std::task::Context<'_>) -> Poll<F::Output> {
        self.stage.with_mut(|ptr| {
            // SAFETY: `RUNNING` gives exclusive access; the future is never moved out of the
            // allocation while in `Stage::Running`, so pinning it here is sound.
            let future = match unsafe { &mut *ptr } {
                // SAFETY: as above: pinned in place inside the task allocation.
                Stage::Running(future) => unsafe { std::pin::Pin::new_unchecked(future) },
                _ => unreachable!("polled a task whose future is gone"),
            };
            future.poll(cx)
        })
    }
}

impl Trailer {
    /// # Safety
    /// The caller owns the slot per `JOIN_WAKER` (see `state.rs`).
    pub(super) unsafe fn set_waker(&self, waker: Option<Waker>) {
        // SAFETY: exclusive slot ownership per the caller's contract.
        self.waker.with_mut(|ptr| unsafe { *ptr = waker });
    }

    /// # Safety
    /// The slot is readable by the caller: it owns it, or `JOIN_WAKER` is set and it is the runtime.
    pub(super) unsafe fn will_wake(&self, waker: &Waker) -> bool {
        // SAFETY: shared read access per the caller's contract.
        self.waker
            .with(|ptr| unsafe { (*ptr).as_ref() }.is_some_and(|w| w.will_wake(waker)))
    }

    /// # Safety
    /// As for [`Trailer::will_wake`].
    pub(super) unsafe fn wake_join(&self) {
        self.waker.with(|ptr| {
            // SAFETY: shared read access per the caller's contract.
            if let Some(waker) = unsafe { (*ptr).as_ref() } {
                waker.wake_by_ref();
            }
        });
    }
}
