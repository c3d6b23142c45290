//! A one-token parker: the place a worker sleeps when it found no work.

use crate::loom::{lock, Condvar, Mutex};

/// Blocks a worker thread until [`Parker::unpark`] is called.
///
/// The token is sticky: an `unpark` that arrives before `park` makes the next `park` return at
/// once, so an unpark racing with a worker on its way to sleep is never lost. Spurious returns are
/// allowed; the worker loop re-checks its queues after every return.
#[derive(Debug, Default)]
pub(crate) struct Parker {
    notified: Mutex<bool>,
    condvar: Condvar,
}

impl Parker {
    pub(crate) fn new() -> Parker {
        Parker::default()
    }

    /// Sleeps until the token is available, then consumes it.
    pub(crate) fn park(&self) {
        let mut notified = lock(&self.notified);
        while !*notified {
            notified = match self.condvar.wait(notified) {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
        *notified = false;
    }

    /// Sleeps until the token is available (consumed: `true`) or `timeout` has passed
    /// (`false`). Under loom, which does not model time, any timeout is zero: it takes the
    /// token if it is there and returns at once otherwise, so the models explore a timeout
    /// racing with the unpark.
    pub(crate) fn park_timeout(&self, timeout: std::time::Duration) -> bool {
        if cfg!(loom) {
            let mut notified = lock(&self.notified);
            let _ = timeout;
            return std::mem::replace(&mut *notified, false);
        }
        let deadline = crate::deadline::after(timeout);
        let mut notified = lock(&self.notified);
        while !*notified {
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            notified = match self.condvar.wait_timeout(notified, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        *notified = false;
        true
    }

    /// Makes the token available and wakes the parked thread, if any.
    pub(crate) fn unpark(&self) {
        *lock(&self.notified) = true;
        self.condvar.notify_one();
    }
}
