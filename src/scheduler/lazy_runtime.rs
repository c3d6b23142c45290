//! The tokio runtime a scheduler builds for itself, only when a process first needs one.
//!
//! Async-fn bodies may await tokio timers and I/O directly, which needs a tokio runtime's
//! context on the worker that polls them. A scheduler built inside a multi-thread runtime, or
//! given one (`tokio_handle`), or with an async or blocking handler registered, runs its workers
//! inside that runtime's context from the start. One built outside any runtime — or inside a
//! current-thread one, which the builder does not adopt: its timers and I/O run only while its
//! own `block_on` does — with none of those would have none, so its first spawn of any kind
//! (or `ProcessCx::run`, or `Scheduler::block_on` called outside any runtime, whose future may
//! await tokio too) builds a small runtime of its own (one worker thread, timers and I/O), and
//! every worker enters its context before its next poll (`executor/late_context.rs`).
//!
//! At the first spawn of any kind, not only of an async-fn body: a state machine's step that
//! calls `tokio::spawn` or `Handle::current()` would otherwise see a runtime or not depending on
//! whether some other call had built it before the step ran — the same program passing or
//! panicking from one run to the next. A scheduler built where a runtime is supplied never
//! builds one; one that only runs state machines outside tokio pays one idle thread for a
//! behaviour that does not depend on timing.

use crate::executor::{self, late_context::LateContext};
use std::any::Any;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::runtime::{EnterGuard, Handle, Runtime};

/// The runtime, once built (module docs).
///
/// Shut down with the [`Scheduler`](crate::Scheduler) — once its shutdown has finished — not
/// with the last handle: an `Addr` or `ProcessHandle` kept after the scheduler is gone (in a
/// registry, a test's leftovers) kept its idle `procsched-io` thread alive, one per scheduler
/// a program built (a black-box review counted five such threads after five schedulers).
#[derive(Default)]
pub(super) struct LazyRuntime {
    /// Its handle, once built (`None`: the build failed).
    handle: OnceLock<Option<Handle>>,
    /// The runtime itself, until shut down.
    runtime: Mutex<Option<Runtime>>,
}

impl LazyRuntime {
    /// The runtime's handle, building it (and publishing its context to `executor`'s workers)
    /// on the first call. `None` if the operating system refused its thread (then every body
    /// awaiting tokio fails as it would without a runtime; the error was traced).
    pub(super) fn get_or_build(&self, executor: &executor::Handle) -> Option<&Handle> {
        // Not in a loom model (which spawns processes on schedulers built without one): tokio
        // built with `--cfg loom` runs on loom's primitives, and its threads would join the
        // model's interleavings.
        if cfg!(loom) {
            return None;
        }
        self.handle
            .get_or_init(|| {
                let built = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("procsched-io")
                    .enable_all()
                    .build();
                match built {
                    Ok(runtime) => {
                        let handle = runtime.handle().clone();
                        let context = Arc::new(TokioContext(handle.clone()));
                        executor.set_late_context(context);
                        *self.runtime.lock().unwrap_or_else(|p| p.into_inner()) = Some(runtime);
                        tracing::debug!("built the scheduler's tokio runtime for its processes");
                        Some(handle)
                    }
                    Err(error) => {
                        tracing::warn!(%error, "could not build a tokio runtime for the processes");
                        None
                    }
                }
            })
            .as_ref()
    }

    /// The runtime's handle, if it was built.
    pub(super) fn get(&self) -> Option<&Handle> {
        self.handle.get()?.as_ref()
    }

    /// Shuts the runtime down, if it was built: its thread ends, and whatever still uses its
    /// handle meets a runtime that is shutting down (nothing of the scheduler's does: this runs
    /// once its shutdown has finished). Never blocks, and is allowed anywhere — inside an async
    /// context, on one of the scheduler's workers.
    pub(super) fn shut_down(&self) {
        let runtime = self
            .runtime
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(runtime) = runtime {
            runtime.shutdown_background();
        }
    }
}

impl Drop for LazyRuntime {
    fn drop(&mut self) {
        self.shut_down();
    }
}

impl std::fmt::Debug for LazyRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyRuntime")
            .field("built", &self.get().is_some())
            .finish()
    }
}

/// A tokio runtime's context, for the executor's workers to enter.
struct TokioContext(Handle);

impl LateContext for TokioContext {
    fn enter(&self) -> Box<dyn Any> {
        Box::new(Entered::new(self.0.clone()))
    }
}

/// Inside a runtime's context until dropped: the guard, and the handle it borrows.
struct Entered {
    /// Borrows `*handle`: dropped first (`Drop`).
    guard: ManuallyDrop<EnterGuard<'static>>,
    /// Boxed: the guard borrows it where it lies, and a box does not move when `Entered` does.
    handle: ManuallyDrop<Box<Handle>>,
}

impl Entered {
    fn new(handle: Handle) -> Entered {
        let handle = Box::new(handle);
        let guard = handle.enter();
        // SAFETY: the guard borrows the handle on the heap, which stays where it is and alive
        // for as long as `Entered` holds the box: `Drop` drops the guard before the box, and
        // nothing moves or drops the handle meanwhile. The `'static` is never observed: the
        // guard is only ever dropped.
        let guard = unsafe { std::mem::transmute::<EnterGuard<'_>, EnterGuard<'static>>(guard) };
        Entered {
            guard: ManuallyDrop::new(guard),
            handle: ManuallyDrop::new(handle),
        }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        // SAFETY: each is dropped once, here, the guard before the handle it borrows.
        unsafe {
            ManuallyDrop::drop(&mut self.guard);
            ManuallyDrop::drop(&mut self.handle);
        }
    }
}
