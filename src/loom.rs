//! The one door to synchronisation primitives.
//!
//! Under `--cfg loom` these are loom's model-checked types; otherwise std's. Nothing else in the
//! crate imports `std::sync::atomic`, `std::sync::{Mutex, Condvar}`, `std::thread` or
//! `std::cell::UnsafeCell` directly, so every atomic protocol in the crate is visible to loom.

#[cfg(loom)]
pub(crate) use loom::{
    sync::{atomic, Arc, Condvar, Mutex, MutexGuard},
    thread,
};

#[cfg(not(loom))]
pub(crate) use std::{
    sync::{atomic, Arc, Condvar, Mutex, MutexGuard},
    thread,
};

/// `thread_local!` with a `const` initializer: std's (fast, no lazy-init check) normally, loom's
/// (one value per model thread, which has no `const` form) under loom.
macro_rules! thread_local_const {
    ($(#[$attr:meta])* static $name:ident: $t:ty = $init:expr;) => {
        #[cfg(loom)]
        loom::thread_local! { $(#[$attr])* static $name: $t = $init; }
        #[cfg(not(loom))]
        std::thread_local! { $(#[$attr])* static $name: $t = const { $init }; }
    };
}
pub(crate) use thread_local_const;

/// `UnsafeCell` with closure-based access, so loom can track every read and write.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// `UnsafeCell` with closure-based access, so loom can track every read and write.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(data: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(data))
    }

    /// Gives `f` a shared pointer to the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Gives `f` an exclusive pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Locks a mutex, ignoring poisoning.
///
/// Our critical sections never run user code, so a poisoned lock can only come from a bug that
/// already panicked elsewhere; the protected data is still consistent at every await point.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Runs a future to completion on the current thread (loom's model-aware version under loom).
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    #[cfg(loom)]
    {
        loom::future::block_on(future)
    }
    #[cfg(not(loom))]
    {
        futures::executor::block_on(future)
    }
}

/// Loom model runners shared by the crate's models.
#[cfg(all(test, loom))]
pub(crate) mod model {
    /// Explores a model at `LOOM_MAX_PREEMPTIONS` (CI: 2) preemptions, or 2 if unset.
    pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(2);
        }
        builder.check(f);
    }

    /// For models that run the whole executor (worker loop, queues, parking) with two workers
    /// or an extra producer thread: every interleaving at one preemption takes a minute already,
    /// two take hours. The protocols they compose are each modelled at two preemptions on their
    /// own.
    pub(crate) fn model_full_stack(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(1);
        builder.check(f);
    }
}
