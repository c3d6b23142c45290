//! Work a task's future leaves for the executor to run once the task's result is published.
//!
//! Why: some of what a finishing future drops must not hold up whoever awaits it — a process's
//! unread messages, whose destructors may block (`process/contain.rs`, "After the outcome") —
//! yet still runs on the thread that finished it, not on some other thread at some other time.
//! The future hands it over with [`defer`]; the harness's `complete` runs it ([`run`]) after it
//! has stored the result and woken the handle. The executor knows only closures: what they drop
//! is their owner's business.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

std::thread_local! {
    /// What [`defer`] was given on this thread, for [`run`].
    static DEFERRED: RefCell<Deferred> = const { RefCell::new(Deferred(Vec::new())) };
}

/// Work deferred on this thread. Empty whenever the executor is not completing a task; if a
/// thread ends with some left (a future finished outside the executor), it runs then.
struct Deferred(Vec<Box<dyn FnOnce()>>);

impl Drop for Deferred {
    fn drop(&mut self) {
        for work in self.0.drain(..) {
            run_one(work);
        }
    }
}

/// Runs `work` once the executor has published the result of the task finishing on this
/// thread (at once on a thread being torn down: nothing comes after).
pub(crate) fn defer(work: Box<dyn FnOnce()>) {
    let mut work = Some(work);
    let _ = DEFERRED.try_with(|deferred| deferred.borrow_mut().0.extend(work.take()));
    if let Some(work) = work {
        run_one(work);
    }
}

/// Runs what [`defer`] was given on this thread: called by the harness once a task's result is
/// published.
#[inline]
pub(crate) fn run() {
    while let Some(work) = DEFERRED
        .try_with(|deferred| deferred.borrow_mut().0.pop())
        .ok()
        .flatten()
    {
        run_one(work);
    }
}

/// Runs one piece of deferred work: a panic in it (its owner should have contained it) never
/// unwinds into a worker.
#[cold]
fn run_one(work: Box<dyn FnOnce()>) {
    if catch_unwind(AssertUnwindSafe(work)).is_err() {
        tracing::error!("work deferred after a task's completion panicked: contained");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn deferred_work_runs_at_the_next_run_each_once_and_a_panic_is_contained() {
        let ran = Rc::new(Cell::new(0));
        for _ in 0..3 {
            let ran = ran.clone();
            defer(Box::new(move || ran.set(ran.get() + 1)));
        }
        defer(Box::new(|| panic!("a deferred destructor")));
        assert_eq!(ran.get(), 0, "nothing before the run");
        run();
        assert_eq!(ran.get(), 3);
        run();
        assert_eq!(ran.get(), 3, "each once");
    }
}
