//! The current thread's worker (`CURRENT`): who is asked, from anywhere on the thread, whether
//! it runs one of our workers and in which state, and the pushes that go to that worker's own
//! queues (`shared.rs`, "Where a runnable task goes", rows 1, 4 and 6).

use super::{Core, CURRENT};
use crate::executor::shared::{Notified, Shared};
use crate::loom::Arc;
use std::rc::Rc;

/// Runs `push` with the current thread's worker if it is a worker of `shared` and `accepts`
/// it; `task` is moved into `push` then, and handed back otherwise.
#[inline]
fn push_on_own_worker(
    shared: &Arc<Shared>,
    task: Notified,
    accepts: impl FnOnce(&Core) -> bool,
    push: impl FnOnce(&Core, Notified),
) -> Result<(), Notified> {
    let mut task = Some(task);
    let _ = CURRENT.try_with(|current| {
        if let Some(core) = current.borrow().as_ref() {
            if Arc::ptr_eq(&core.shared, shared) && accepts(core) {
                if let Some(task) = task.take() {
                    push(core, task);
                }
            }
        }
    });
    task.map_or(Ok(()), Err)
}

/// Where [`try_push_local`] left a task.
pub(crate) enum PushLocal {
    /// On the current worker's queue.
    Pushed,
    /// Not pushed: the current thread is a worker of this executor inside `block_in_place`.
    Blocked(Notified),
    /// Not pushed: the current thread is not a worker of this executor.
    Elsewhere(Notified),
}

/// Pushes `task` to the current thread's deque if it is a worker of `shared` and not inside
/// `block_in_place`; gives it back otherwise. A blocked worker has handed its queues off
/// (`blocking.rs`) and pops nothing until its closure returns: a task queued there would wait
/// for the closure (forever, if the closure waits for the task) or for the monitor's nudge.
pub(crate) fn try_push_local(shared: &Arc<Shared>, task: Notified) -> PushLocal {
    let mut blocked = false;
    let pushed = push_on_own_worker(
        shared,
        task,
        |core| {
            blocked = core.blocking_depth.get() > 0;
            !blocked
        },
        Core::push_local,
    );
    match pushed {
        Ok(()) => PushLocal::Pushed,
        Err(task) if blocked => PushLocal::Blocked(task),
        Err(task) => PushLocal::Elsewhere(task),
    }
}

/// `true` if the current thread is a worker (any executor's) inside `block_in_place`: it has
/// handed its work off, so blocking it is allowed (`Executor::block_on`).
pub(crate) fn in_block_in_place() -> bool {
    with_current(|core| core.blocking_depth.get() > 0).unwrap_or(false)
}

/// The slot of the current thread's worker if it is a worker of `shared` (shutdown called from
/// inside one of its polls).
pub(crate) fn current_index(shared: &Arc<Shared>) -> Option<usize> {
    with_current(|core| Arc::ptr_eq(&core.shared, shared).then_some(core.index)).flatten()
}

/// `f` of the current thread's worker; `None` off a worker's thread (or while its slot is being
/// set or cleared).
fn with_current<R>(f: impl FnOnce(&Core) -> R) -> Option<R> {
    CURRENT
        .try_with(|current| current.try_borrow().ok()?.as_deref().map(f))
        .ok()
        .flatten()
}

/// Queues a task that yielded (`yield_now`) on the current thread's inject queue if the thread
/// is a configured, not stuck worker of `shared`; gives it back otherwise (a spare may retire
/// and a stuck worker's queues are being handed over: the global injector is for those).
pub(crate) fn try_push_yielded(shared: &Arc<Shared>, task: Notified) -> Result<(), Notified> {
    push_on_own_worker(
        shared,
        task,
        |core| !core.is_spare && !shared.monitor.is_stuck(core.index),
        |core, task| shared.push_own_inject(core.index, task),
    )
}

/// The worker running on the current thread, if any.
pub(crate) fn current() -> Option<Rc<Core>> {
    CURRENT
        .try_with(|current| current.borrow().clone())
        .ok()
        .flatten()
}

/// `true` if the executor's monitor asks the task being polled on this thread to yield: its poll
/// has run for a monitor tick or more (`monitor.rs`, "Preemption request"). A future that loops
/// over units of work within one poll checks it between two units and, if set, wakes itself
/// and returns `Pending`. `false` off a worker's thread and with the monitor off.
pub(crate) fn yield_requested() -> bool {
    CURRENT
        .try_with(|current| {
            current.try_borrow().is_ok_and(|core| {
                core.as_ref()
                    .is_some_and(|core| core.activity().yield_requested())
            })
        })
        .unwrap_or(false)
}

/// `true` on a worker's thread (any executor's): where a wait must not spin, since the thread
/// has other tasks to run (`scheduler/spin_wait.rs`).
pub(crate) fn on_worker_thread() -> bool {
    CURRENT
        .try_with(|current| current.borrow().is_some())
        .unwrap_or(false)
}

/// The executor whose worker runs on the current thread, if any.
pub(crate) fn current_shared() -> Option<Arc<Shared>> {
    CURRENT
        .try_with(|current| current.borrow().as_ref().map(|core| core.shared.clone()))
        .ok()
        .flatten()
}
