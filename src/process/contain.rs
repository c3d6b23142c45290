//! Containing user code the scheduler calls on its own: destructors (every user value the
//! scheduler holds is dropped here, one at a time, inside its own `catch_unwind`) and `Display`
//! (an error a step, body, `init` or handler returned, which the scheduler traces, or writes
//! into an exit reason or a wire frame).
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
//! `Drop`). A body the crate writes itself — a supervisor — holds user values too (its
//! children's specs, the exit reasons it hears): it disposes of them the same way
//! (`ProcessCx::dispose`), counted on its own process.
//!
//! # Counted, and told
//! Each contained panic is traced (`warn`, with the panic's message; inside a process's span,
//! so with its PID) and counted in a per-thread tally. Whoever knows which process the values
//! belonged to reads the tally's growth across its drops ([`drop_contained`] returns it, nested
//! containment included) and adds it to that process's cell (`CellStats`), which the scheduler's
//! metrics sum (`SchedulerMetrics::destructor_panics`). A destructor's panic never changes how
//! a process *ended*: that is decided before its values are dropped.
//!
//! # After the outcome
//! What a process leaves *unread* — messages and completions still in its mailbox, and those an
//! `async fn` body took into its inbox and never received — is dropped only once its outcome is
//! published: counted in the shutdown's report and the metrics, its handle resolved. A message
//! whose destructor blocks or takes long (it closes a connection, say) then holds up nothing
//! but the thread that drops it. The process future collects them at its finish
//! ([`collecting`]: the adapter's inbox hands its messages to [`drop_later`] instead of
//! dropping them) and hands them, with its mailbox's, to [`after_outcome`]; the executor runs
//! them once it has published the task's result (`executor/task/after_complete.rs`). A process
//! future dropped unfinished (a forced stop, an abort) is a stop whatever its destructors take:
//! it drops them before its end is counted, so that `wait_for_abandoned`, which waits for the
//! forced processes to be closed, waits for them too.
//!
//! # A user value's `Display`
//! The scheduler formats user errors where no `catch_unwind` of the user's call surrounds it:
//! a `debug` event after a step or `init` failed (when a subscriber formats the field), a
//! supervisor's log of a child's exit reason, a failed start's text, an exit reason sent to
//! another node. A `Display` that panics there would unwind into a worker, a spawn's caller,
//! a supervisor or a cluster task, and turn a *failed* process into a panicked or lost one. So
//! every such place formats through [`display_contained`]: the text is the user's, or
//! [`DISPLAY_PANICKED`] in its place; the panic is traced (`warn`, with the PID where one is
//! known) and changes nothing else. It is not counted: no metric counts formatting panics, and
//! `destructor_panics` means destructors.

use super::Pid;
use std::cell::{Cell, OnceCell, RefCell};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

std::thread_local! {
    /// Panics contained on this thread so far (module docs, "Counted, and told").
    static CONTAINED: Cell<u64> = const { Cell::new(0) };
    /// How many [`collecting`] calls the thread is inside, and how many values [`COLLECTED`]
    /// holds: plain counters, so that a `collecting` that collects nothing — nearly every
    /// process's end — costs two reads and writes of a cell, and `COLLECTED` is never touched.
    static COLLECTING: Cell<(u32, usize)> = const { Cell::new((0, 0)) };
    /// Inside [`collecting`]: what [`drop_later`] was given (module docs, "After the outcome"),
    /// an outer call's first.
    static COLLECTED: RefCell<Vec<Later>> = const { RefCell::new(Vec::new()) };
}

/// Drops user values, each contained; returns the destructor panics (module docs, "After the
/// outcome").
pub(crate) type Later = Box<dyn FnOnce() -> u64 + Send>;

/// Runs `drop` — which drops a process's values — collecting what [`drop_later`] is given
/// meanwhile on this thread instead of dropping it; returns `drop`'s result and the collected.
pub(crate) fn collecting<R>(drop: impl FnOnce() -> R) -> (R, Vec<Later>) {
    let (depth, mark) = COLLECTING.get();
    COLLECTING.set((depth + 1, mark));
    let result = drop();
    let (_, held) = COLLECTING.get();
    COLLECTING.set((depth, mark));
    let collected = if held > mark {
        // What an outer call collected before this one stays its own.
        COLLECTED.with(|collected| collected.borrow_mut().split_off(mark))
    } else {
        Vec::new()
    };
    (result, collected)
}

/// Drops `items` (user values a process left unread) each contained — now, or, inside
/// [`collecting`], once the process's outcome is published. Returns the destructor panics of a
/// drop made now (0 when deferred: counted when they happen).
pub(crate) fn drop_later<T: Send + 'static>(
    items: impl IntoIterator<Item = T> + Send + 'static,
) -> u64 {
    let later: Later = Box::new(move || drop_each(items));
    let (depth, held) = COLLECTING.get();
    if depth == 0 {
        return later();
    }
    COLLECTED.with(|collected| collected.borrow_mut().push(later));
    COLLECTING.set((depth, held + 1));
    0
}

/// Runs `later` once the executor has published the result of the task finishing on this
/// thread (`executor/task/after_complete.rs`); it contains and counts its own panics.
pub(crate) fn after_outcome(later: Later) {
    crate::executor::defer_after_complete(Box::new(move || {
        later();
    }));
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

/// What [`display_contained`] writes in place of a user value's text when its `Display`
/// panicked.
pub(crate) const DISPLAY_PANICKED: &str = "<Display panicked>";

/// What [`display_contained`] writes in place of a user value's text when its `Display`
/// returned an error (which `to_string` would turn into a panic of ours).
pub(crate) const DISPLAY_FAILED: &str = "<Display failed>";

/// `value`, a user value (an error a step, body, `init` or handler returned, or an exit reason
/// holding one), displayed with its `Display` contained (module docs, "A user value's
/// `Display`"): as a tracing field (`error = %display_contained(&*error, Some(pid))`) or as
/// text (`.to_string()`), never a panic.
///
/// `pid` is the process the value came from, for the `warn` a panic is.
pub(crate) fn display_contained<T: fmt::Display + ?Sized>(
    value: &T,
    pid: Option<Pid>,
) -> ContainedDisplay<'_, T> {
    ContainedDisplay {
        value,
        pid,
        text: OnceCell::new(),
        panicked: Cell::new(None),
    }
}

/// See [`display_contained`]. Formats the user's value once, however often it is displayed.
pub(crate) struct ContainedDisplay<'a, T: ?Sized> {
    value: &'a T,
    pid: Option<Pid>,
    text: OnceCell<Box<str>>,
    /// The message of the panic its `Display` raised, until it is traced (`Drop`).
    panicked: Cell<Option<String>>,
}

impl<T: fmt::Display + ?Sized> fmt::Display for ContainedDisplay<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.text.get_or_init(|| {
            let mut text = String::new();
            let value = self.value;
            match catch_unwind(AssertUnwindSafe(|| {
                fmt::Write::write_fmt(&mut text, format_args!("{value}"))
            })) {
                Ok(Ok(())) => text.into(),
                Ok(Err(fmt::Error)) => DISPLAY_FAILED.into(),
                Err(panic) => {
                    self.panicked.set(Some(super::take_panic_message(panic)));
                    DISPLAY_PANICKED.into()
                }
            }
        });
        f.write_str(text)
    }
}

impl<T: ?Sized> Drop for ContainedDisplay<'_, T> {
    fn drop(&mut self) {
        // Traced here, not in `fmt`: `fmt` may run inside a subscriber's handling of the event
        // the value is a field of, where a scoped subscriber drops nested events. A tracing
        // field's value is dropped after its event is dispatched.
        if let Some(message) = self.panicked.take() {
            tracing::warn!(
                pid = self.pid.map(tracing::field::display),
                panic = %message,
                "a user value's Display panicked; the panic was contained"
            );
        }
    }
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

    /// An error whose `Display` panics.
    struct PanicOnDisplay;

    impl fmt::Display for PanicOnDisplay {
        fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
            panic!("boom (a test's Display)");
        }
    }

    /// An error whose `Display` fails.
    struct FailingDisplay;

    impl fmt::Display for FailingDisplay {
        fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
            Err(fmt::Error)
        }
    }

    #[test]
    fn a_display_that_panics_or_fails_leaves_a_placeholder() {
        quiet();
        assert_eq!(display_contained("fine", None).to_string(), "fine");
        assert_eq!(
            display_contained(&PanicOnDisplay, None).to_string(),
            DISPLAY_PANICKED
        );
        assert_eq!(
            display_contained(&FailingDisplay, None).to_string(),
            DISPLAY_FAILED
        );
    }

    #[test]
    fn a_value_is_formatted_once_however_often_it_is_displayed() {
        struct Counted(AtomicUsize);
        impl fmt::Display for Counted {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fetch_add(1, Relaxed);
                f.write_str("counted")
            }
        }
        let value = Counted(AtomicUsize::new(0));
        let shown = display_contained(&value, None);
        assert_eq!(format!("{shown} {shown}"), "counted counted");
        assert_eq!(value.0.load(Relaxed), 1);
    }
}
