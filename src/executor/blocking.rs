//! [`block_in_place`]: run blocking code on a worker without stalling the work queued behind it.

use super::{start, worker};

/// Runs `f`, which may block its thread for long, on the current worker: first hands the
/// worker's queued work off to the other workers, starting or waking a spare worker if every
/// configured worker would otherwise be busy, so the rest of the executor keeps its
/// parallelism while `f` blocks. Returns what `f` returns.
///
/// Off a procsched worker thread it just runs `f`. Nested calls hand off once. The executor's
/// monitor does the same for a poll it finds running past the long-poll threshold, but only
/// after the threshold; `block_in_place` hands off at once and is not reported as a long poll.
/// A process's `step` (or a command handler run inline) may call it too:
/// [`procsched::executor::block_in_place`](crate::executor::block_in_place) is the same function.
///
/// Tasks `f` spawns or wakes go to the shared queues, not to this worker's own (it pops nothing
/// until `f` returns): another worker, or a spare started for them, runs them while `f` blocks,
/// so `f` may wait for them — [`Executor::block_on`](crate::executor::Executor::block_on)
/// included, which is allowed here and nowhere else on a worker. Unless no thread is left to
/// run them: with every worker blocked and the spares at their cap
/// (`Builder::max_spare_workers`, 0 included), they wait until a worker is free — and if
/// every blocked thread waits for such a task (more concurrent `block_in_place` calls waiting
/// for work they spawned than workers and spares together), none ever is: a deadlock, which
/// the monitor reports (a `warn` trace, and `MonitorMetrics::exhausted`) but cannot undo. Size
/// `max_spare_workers` for the most calls that may block at once.
///
/// The spare keeps running while `f` blocks; when `f` returns, the surplus spare gives its
/// queue back and retires at its next safe point (`Builder::max_spare_workers` caps how many
/// spares may run at once).
///
/// # Panics
///
/// Propagates a panic of `f` (the worker is marked as running again first).
///
/// # Examples
///
/// ```
/// use procsched::executor::{block_in_place, Executor};
/// use std::sync::mpsc;
///
/// let executor = Executor::builder().workers(1).build()?;
/// let (tx, rx) = mpsc::channel::<u32>();
/// // Blocks the only worker; the second task still runs, on a spare.
/// let blocked = executor.spawn(async move { block_in_place(|| rx.recv().unwrap()) });
/// let sender = executor.spawn(async move { tx.send(7).unwrap() });
/// executor.block_on(sender).unwrap();
/// assert_eq!(executor.block_on(blocked).unwrap(), 7);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn block_in_place<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    let Some(core) = worker::current() else {
        return f();
    };
    /// Marks the worker as running again, even if `f` panics.
    struct Leave(std::rc::Rc<worker::Core>);
    impl Drop for Leave {
        fn drop(&mut self) {
            self.0.leave_blocking();
        }
    }
    if let Some(shared) = core.enter_blocking() {
        // Hand-off steps 3 and 4 (`monitor.rs`; steps 1 and 2 were the worker's).
        start::hand_off(shared);
    }
    let _leave = Leave(core);
    f()
}
