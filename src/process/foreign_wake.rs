//! Waking a task procsched does not own — a tokio task awaiting an ask, a sender waiting for
//! room — without letting its waker's panic unwind into procsched.
//!
//! A waker is code of whoever polls the future (tokio's, another executor's, or a hand-written
//! one), and `wake` runs it on the waking thread: a `close` on a worker, a body's `Reply::send`,
//! the last process's finish (a shutdown's waiters), the deadline thread, a node's tasks. A
//! panic there would cut short what the waking thread was doing — a process's close (its
//! monitors never told, its name never released), another process's body, every later
//! deadline, the node's frame loop — so each such wake runs inside its own `catch_unwind`, and a
//! panic is traced at `warn`; the wake is then lost to its waiter, whose waker broke, and to no
//! one else (room made for a sender whose waker broke goes on to the next: `room.rs`).
//! Our own tasks' wakers (`DeferredWake`) never panic and are not wrapped.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Waker;

/// Runs `wake`, which wakes a task procsched does not own (`what` names it for the trace),
/// containing a panic of its waker. `Some` with its result, or `None` if it panicked.
pub(crate) fn foreign_wake<R>(what: &'static str, wake: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(wake)) {
        Ok(result) => Some(result),
        Err(panic) => {
            let message = crate::executor::panic_message(&*panic)
                .unwrap_or("non-string panic payload")
                .to_owned();
            // The payload is a user value too: its destructor must not unwind either.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(panic)));
            tracing::warn!(
                panic = %message,
                waking = what,
                "a waker panicked; the panic was contained"
            );
            None
        }
    }
}

/// Wakes `waker`, a task procsched does not own, containing a panic (module docs).
pub(crate) fn wake_foreign(what: &'static str, waker: Waker) {
    let _ = foreign_wake(what, move || waker.wake());
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;
    use std::task::Wake;

    /// Counts its wakes; panics on each if `broken`.
    struct Counting {
        wakes: AtomicUsize,
        broken: bool,
    }

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.wakes.fetch_add(1, Relaxed);
            assert!(!self.broken, "a broken waker");
        }
    }

    fn waker(broken: bool) -> (Arc<Counting>, Waker) {
        let counting = Arc::new(Counting {
            wakes: AtomicUsize::new(0),
            broken,
        });
        (counting.clone(), Waker::from(counting))
    }

    #[test]
    fn a_panicking_waker_is_contained_and_the_next_one_still_wakes() {
        let (broken, broken_waker) = waker(true);
        let (sound, sound_waker) = waker(false);
        wake_foreign("test", broken_waker);
        wake_foreign("test", sound_waker);
        assert_eq!(broken.wakes.load(Relaxed), 1);
        assert_eq!(sound.wakes.load(Relaxed), 1);
        assert_eq!(foreign_wake("test", || 7), Some(7));
        assert_eq!(foreign_wake("test", || -> u8 { panic!("no") }), None);
    }
}
