//! Containing user destructors: every user value the scheduler holds is dropped here, one at a
//! time, inside its own `catch_unwind`.
//!
//! # Why one at a time
//! A destructor that panics while another panic unwinds aborts the process ("panic in a
//! destructor during cleanup"). Default drop glue runs the destructors of a collection's
//! elements one after the other *during* the unwind of the first one that panicked: a
//! `VecDeque<Message>` holding two messages whose payloads panic when dropped aborts the program,
//! whatever `catch_unwind` surrounds it. So no container of user values in this crate is dropped
//! by its glue: its owner drains it and hands each element to [`drop_contained`] (the mailbox's
//! queues, a step's events and output, the async-fn adapter's inbox and kept completions, the
//! intake queue's stale events; `Queue`, `StepOutput` and the adapter's state do it in their
//! `Drop`).
//!
//! # Counted, and told
//! Each contained panic is traced (`warn`, with the panic's message; inside a process's span,
//! so with its PID) and counted in a per-thread tally. Whoever knows which process the values
//! belonged to reads the tally's growth across its drops ([`drop_contained`] returns it, nested
//! containment included) and adds it to that process's cell (`CellStats`), which the scheduler's
//! metrics sum (`SchedulerMetrics::destructor_panics`). A destructor's panic never changes how
//! a process *ended*: that is decided before its values are dropped.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

std::thread_local! {
    /// Panics contained on this thread so far (module docs, "Counted, and told").
    static CONTAINED: Cell<u64> = const { Cell::new(0) };
}

/// Panics contained on this thread so far.
fn contained_so_far() -> u64 {
    CONTAINED.try_with(Cell::get).unwrap_or(0)
}

/// Drops `value`, a user value (or one holding user values), containing a panic from its
/// destructor: user code must never unwind into the scheduler. Returns how many destructor
/// panics were contained while it was dropped — this one, and those its own destructor
/// contained (a process dropping its inbox message by message) — for the caller to count.
pub(crate) fn drop_contained<T>(value: T) -> u64 {
    if !std::mem::needs_drop::<T>() {
        return 0;
    }
    contained(move || drop(value))
}

/// Runs `drop`, which drops user values in place (a pinned future set to `None`, a value behind
/// a `ManuallyDrop`), containing a panic as [`drop_contained`] does; returns the panics
/// contained.
pub(crate) fn contained(drop: impl FnOnce()) -> u64 {
    let before = contained_so_far();
    if let Err(panic) = catch_unwind(AssertUnwindSafe(drop)) {
        // The panic payload is a user value too: its own destructor may panic (rare enough to
        // leave uncounted, but it must not escape).
        let message = crate::executor::panic_message(&*panic)
            .unwrap_or("non-string panic payload")
            .to_owned();
        if catch_unwind(AssertUnwindSafe(move || std::mem::drop(panic))).is_err() {
            tracing::warn!("a panic payload's destructor panicked; the panic was contained");
        }
        tracing::warn!(panic = %message, "a destructor panicked; the panic was contained");
        let _ = CONTAINED.try_with(|count| count.set(count.get() + 1));
    }
    contained_so_far().wrapping_sub(before)
}

/// Drops every element `items` yields, each with [`drop_contained`]; returns the panics
/// contained.
pub(crate) fn drop_each<T>(items: impl IntoIterator<Item = T>) -> u64 {
    let mut panics = 0;
    for item in items {
        panics += drop_contained(item);
    }
    panics
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;

    /// A value whose destructor counts itself and then panics.
    pub(crate) struct PanicOnDrop(pub(crate) Arc<AtomicUsize>);

    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Relaxed);
            panic!("boom (a test's destructor)");
        }
    }

    /// Silences the default panic hook's output for the test's contained panics.
    pub(crate) fn quiet() {
        std::panic::set_hook(Box::new(|_| {}));
    }

    #[test]
    fn every_destructor_runs_once_and_every_panic_is_counted() {
        quiet();
        let drops = Arc::new(AtomicUsize::new(0));
        let values: Vec<PanicOnDrop> = (0..3).map(|_| PanicOnDrop(drops.clone())).collect();
        assert_eq!(drop_each(values), 3);
        assert_eq!(drops.load(Relaxed), 3);
        assert_eq!(drop_contained(5u8), 0, "nothing to drop, nothing counted");
    }

    #[test]
    fn nested_containment_is_counted_by_the_outer_drop() {
        quiet();
        struct Holder(Vec<PanicOnDrop>);
        impl Drop for Holder {
            fn drop(&mut self) {
                drop_each(std::mem::take(&mut self.0));
            }
        }
        let drops = Arc::new(AtomicUsize::new(0));
        let holder = Holder((0..2).map(|_| PanicOnDrop(drops.clone())).collect());
        assert_eq!(drop_contained(holder), 2);
        assert_eq!(drops.load(Relaxed), 2);
    }
}
