//! The mailbox lock: a spin lock whose release is a plain store.
//!
//! # Why not `std::sync::Mutex`
//! Every message hop takes the mailbox lock twice — the sender's push, the worker's drain — and
//! std's mutex costs two read-modify-writes per critical section: the `lock` CAS and the
//! `unlock` swap (which must read whether a waiter sleeps on the futex). On the 2-core VM of
//! `docs/bench-messages.md` those unlock swaps were a fifth of the push's and a third of the
//! drain's samples. Here the release is a `Release` store (a plain `mov` on x86), which no one
//! has to read for waiters: nobody sleeps on this lock.
//!
//! That is sound only because every critical section of the mailbox is short and runs no user
//! code: a few queue operations, a waker clone (the task's own: a reference count), a gate
//! store. Payload destructors, wakes and frees of large buffers all run after the unlock
//! (`lifecycle.rs`: `close`; `deliver.rs`: `try_push`; `intake.rs`: `Stale`). A waiter spins briefly, then yields
//! its thread to the holder (which, preempted in the section, needs a core to finish it).
//!
//! # Protocol 10: the mailbox lock
//! | value | meaning |
//! |---|---|
//! | `false` | free |
//! | `true` | held: exactly one guard exists, and only it reaches the value |
//!
//! 1. **Acquire**: CAS `false` → `true` (`Acquire`), retried after a relaxed read sees `false`
//!    (spinning, then yielding the thread, while it sees `true`).
//! 2. **Release**: the guard's drop stores `false` (`Release`).
//!
//! Mutual exclusion: only a successful CAS from `false` makes a guard, and the word becomes
//! `false` again only by that guard's drop, so two guards never coexist (the CAS's RMW order on
//! the one word). Publication: each acquire reads the `false` written by the previous holder's
//! release store (the only writes of `false`), so it synchronizes with it and sees everything
//! that holder wrote under the lock — what std's mutex promises, and all the mailbox's protocols
//! (`state.rs`, `intake.rs`, `watch.rs`) ask of it. Checked by
//! `loom_mailbox_lock_excludes_and_publishes` (below), and by every mailbox model, which run on
//! this lock.

use crate::loom::atomic::{AtomicBool, Ordering::*};
use std::fmt;
use std::ops::{Deref, DerefMut};

/// A spin lock for the mailbox (module docs).
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: Cell<T>,
}

// SAFETY: the lock hands the value to one thread at a time (protocol 10), as `Mutex<T>` does:
// shareable when `T` may be sent.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as for `Mutex<T>`: owning the lock owns the value.
unsafe impl<T: Send> Send for SpinLock<T> {}

/// The held lock: the one way to reach the value.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Loom's record of the access, ended before the release.
    #[cfg(loom)]
    access: Option<loom::cell::MutPtr<T>>,
}

impl<T> SpinLock<T> {
    pub(crate) fn new(value: T) -> SpinLock<T> {
        SpinLock {
            locked: AtomicBool::new(false),
            value: Cell::new(value),
        }
    }

    /// Protocol 10, step 1. The uncontended path is one CAS, inlined; waiting is out of line.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard {
            lock: self,
            #[cfg(loom)]
            access: Some(self.value.0.get_mut()),
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            while self.locked.load(Relaxed) {
                // Loom explores the other threads' progress only at a yield.
                if cfg!(loom) || spins >= SPINS_BEFORE_YIELD {
                    crate::loom::thread::yield_now();
                } else {
                    spins += 1;
                    for _ in 0..(1u32 << spins.min(6)) {
                        std::hint::spin_loop();
                    }
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Acquire, Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

/// Busy-wait rounds (1, 2, 4 … 64 pauses) before a waiter yields its thread: a critical
/// section is a few dozen nanoseconds unless its holder was preempted, and then only yielding
/// lets it finish.
const SPINS_BEFORE_YIELD: u32 = 8;

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(loom)]
        drop(self.access.take());
        // Protocol 10, step 2.
        self.lock.locked.store(false, Release);
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        #[cfg(loom)]
        {
            let access = self.access.as_ref().expect("held until the drop");
            // SAFETY: the guard holds the lock (protocol 10): no other access to the value
            // exists; loom tracks this one until the guard drops.
            unsafe { access.deref() }
        }
        #[cfg(not(loom))]
        // SAFETY: the guard holds the lock (protocol 10): no other access to the value exists
        // while it lives, and this borrow cannot outlive it.
        unsafe {
            &*self.lock.value.0.get()
        }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        #[cfg(loom)]
        {
            let access = self.access.as_ref().expect("held until the drop");
            // SAFETY: the guard holds the lock (protocol 10), and `&mut self` makes this borrow
            // the only one through the guard.
            unsafe { access.deref() }
        }
        #[cfg(not(loom))]
        // SAFETY: the guard holds the lock (protocol 10), and `&mut self` makes this borrow
        // the only one through the guard; it cannot outlive the guard.
        unsafe {
            &mut *self.lock.value.0.get()
        }
    }
}

impl<T> fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpinLock")
            .field("locked", &self.locked.load(Relaxed))
            .finish_non_exhaustive()
    }
}

/// The value's cell: loom's (which checks every access against the lock's orderings) under
/// loom, std's otherwise.
#[cfg(loom)]
struct Cell<T>(loom::cell::UnsafeCell<T>);
#[cfg(not(loom))]
struct Cell<T>(std::cell::UnsafeCell<T>);

impl<T> Cell<T> {
    fn new(value: T) -> Cell<T> {
        #[cfg(loom)]
        {
            Cell(loom::cell::UnsafeCell::new(value))
        }
        #[cfg(not(loom))]
        {
            Cell(std::cell::UnsafeCell::new(value))
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn threads_take_turns_and_see_each_others_writes() {
        let lock = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        *lock.lock() += 1;
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*lock.lock(), 600);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::loom::model::model;
    use crate::loom::{thread, Arc};

    /// Protocol 10: two threads each add under the lock, and each reads what the other wrote
    /// before (loom's cell reports any access the lock does not order).
    #[test]
    fn loom_mailbox_lock_excludes_and_publishes() {
        model(|| {
            let lock = Arc::new(SpinLock::new((0u32, 0u32)));
            let other = lock.clone();
            let adder = thread::spawn(move || {
                let mut guard = other.lock();
                guard.0 += 1;
                guard.1 += 10;
            });
            {
                let mut guard = lock.lock();
                let seen = guard.0;
                guard.0 += 1;
                assert_eq!(
                    guard.1,
                    seen * 10,
                    "a holder's writes are published together"
                );
                guard.1 += 10;
            }
            adder.join().unwrap();
            let guard = lock.lock();
            assert_eq!(*guard, (2, 20));
        });
    }
}
