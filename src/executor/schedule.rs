//! Spawning, and the task module's [`Schedule`] for `Arc<Shared>`: a runnable task is queued per
//! `shared.rs`, "Where a runnable task goes".
//!
//! The row depends on the calling thread: one of our workers pushes to its own deque or yielded
//! lane (`worker.rs`), any other thread to the shared queues (`shared.rs`). So this sits above
//! both.

use super::shared::{Notified, Shared};
use super::task::{self, JoinHandle, Schedule, Task};
use super::unowned::TaskRef;
use super::{start, worker};
use crate::loom::Arc;
use std::future::Future;

/// Spawns a task: binds it to the owned list and queues its first poll.
pub(crate) fn spawn<F>(shared: &Arc<Shared>, future: F, label: u64) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (task, notified, join) = task::new_labelled(future, shared.clone(), label);
    match shared.owned.bind(task) {
        Ok(()) => schedule_task(shared, notified, false),
        Err(task) => {
            // Closed: spawned after shutdown. Cancel right here; the handle reports it.
            drop(notified);
            task.shutdown();
        }
    }
    join
}

/// Spawns a task without the owned list (`unowned.rs`, protocol step 1): hands its [`TaskRef`]
/// to `keep`, then queues its first poll; after shutdown it is cancelled at once and `keep` is
/// not called.
#[inline(always)]
pub(crate) fn spawn_unowned<F>(
    shared: &Arc<Shared>,
    future: F,
    label: u64,
    keep: impl FnOnce(TaskRef),
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (task, notified, join) = task::new_labelled(future, shared.clone(), label);
    if shared.is_shutdown() {
        // Spawned after shutdown: cancel right here, as `spawn` does; the handle reports it.
        drop(notified);
        task.shutdown();
        return join;
    }
    // Before the first poll is queued: the owner stores the reference while nobody else
    // touches the task (or, for the scheduler, the process's cell) yet.
    keep(TaskRef(task));
    schedule_task(shared, notified, false);
    join
}

/// Queues a runnable task per the table in `shared.rs` ("Where a runnable task goes").
fn schedule_task(shared: &Arc<Shared>, task: Notified, is_yield: bool) {
    if is_yield {
        // Not the deque: its owner pops LIFO, so the task would run again at once. The own
        // inject queue runs it after the deque's work and is reachable by thieves and by
        // the monitor's hand-off; unlike the global injector, its lines stay on this worker
        // (`docs/bench-executor.md`: yield_many).
        let Err(task) = worker::try_push_yielded(shared, task) else {
            return;
        };
        return shared.push_global(task);
    }
    match worker::try_push_local(shared, task) {
        worker::PushLocal::Pushed => {}
        worker::PushLocal::Elsewhere(task) => shared.schedule_remote(task),
        worker::PushLocal::Blocked(task) => {
            // Scheduled from inside `block_in_place` (its closure, or a `block_on` in it): as
            // from outside, to a shared queue (the worker's own lanes are skipped: it is marked
            // blocked), which wakes a parked worker. With every configured worker busy or
            // blocked there is none, and the closure may wait for this very task: hand-off
            // steps 3 and 4 start or wake a spare then, as entering `block_in_place` does when
            // work is queued; with a spare already active they do nothing.
            shared.schedule_remote(task);
            start::hand_off(shared);
        }
    }
}

impl Schedule for Arc<Shared> {
    fn schedule(&self, task: Notified) {
        schedule_task(self, task, false);
    }

    fn yield_now(&self, task: Notified) {
        schedule_task(self, task, true);
    }

    fn release(&self, task: &Task<Self>) -> Option<Task<Self>> {
        self.owned.release(task)
    }

    fn is_shutdown(&self) -> bool {
        Shared::is_shutdown(self)
    }

    fn destructor_panicked(&self, label: u64) {
        self.metrics.destructor_panicked();
        // The executor knows labels, not what they name: whoever labels tasks may say more.
        match &self.destructor_panic_observer {
            Some(observer) => observer(label),
            None => tracing::warn!(
                task = label,
                "a task's destructor panicked after its outcome; the panic was contained"
            ),
        }
    }
}
