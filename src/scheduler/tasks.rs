//! Process tasks: spawned without the executor's owned-task list; each process's cell holds its
//! task's reference, and the forced stop cancels them through the table.
//!
//! The executor's owned list exists so that shutdown can cancel a task parked on a waker nobody
//! will fire. The process table already reaches every live process, so the scheduler spawns
//! process tasks *unowned* (`executor/unowned.rs`) and keeps each task's
//! [`TaskRef`] in its process's cell: stored under the cell's lock at
//! spawn, while the cell's line is still the spawner's (it just opened the cell) and before any
//! worker can touch it; taken out at finish in the critical section `close` takes anyway. The
//! spawner and the finishing worker no longer meet on an owned-list shard.
//!
//! # Protocol
//! **Spawn** (`handle.rs`, spawn step 5), [`spawn`]:
//! 1. `spawn_unowned` the process future. After the executor's shutdown it is cancelled right
//!    there (its drop closes the process: a forced finish) and there is no reference to keep.
//! 2. Before the task is first queued, keep its reference in the cell, under the cell's lock,
//!    bound to the process's generation ([`ProcessCell::set_task`]; the cell's line is still
//!    the spawner's from `open_as`, and no worker can contend for it yet).
//! 3. Once the task is queued, re-read the executor's `is_shutdown`; if set, take the reference
//!    back ([`ProcessCell::take_task`]) and cancel the task here.
//!
//! **Finish**: `close` (`ProcessCell::close`) takes the reference out in the critical section
//! that closes the cell, and drops it.
//!
//! **Forced stop** (shutdown step 4, `shutdown.rs`), [`walk_all`], after `Executor::shutdown`
//! (which set its flag first, then stopped the workers and dropped every queued poll):
//! 4. For every cell, take the reference out under the cell's lock — a piece of the table at a
//!    time, by the closer threads (`closers.rs`), so that the walk of a large table is bounded
//!    by the forced stop's deadline like the closes, and what it has not reached by then is
//!    counted `abandoned` and closed after it, as a `close` that has not run yet is; then
//!    cancel each task, on a closer thread: a task nobody is polling — idle, parked on any waker, or
//!    queued — has its future dropped there (`close` runs, the process is counted `forced`, or
//!    `abandoned` if that `close` is still running, or not reached, at the closes' deadline);
//!    one a stuck worker is polling is marked cancelled and dropped by that worker when its poll
//!    returns (the process is `abandoned`, closed then). Between the take and the cancel, no
//!    worker can start a poll of the task (the executor is shut down), and a poll in progress
//!    that finishes the process finds no reference in the cell to drop: the cancel then finds
//!    the task complete and only drops the reference.
//!
//! **Why every process task is cancelled, once.** The reference leaves the cell under the cell's
//! lock, once per incarnation: by `close`, by the spawner's step 3, or by step 4 — whoever takes
//! it cancels (`close` needs not: its task is finishing). A spawn racing the forced stop: if step 4
//! locked the cell before step 2, step 2 comes after it, hence after the executor's flag was set,
//! and step 3 sees the flag; otherwise step 4 finds the reference. A cell step 4 cannot find
//! (its slot's pointer not yet visible) was created after the executor's flag and fence in the
//! SeqCst order: `Table::create_cell` fences after publishing it, so whoever spawns into it, later,
//! sees the flag in step 3. And the future's drop runs `close` at most once (the process future's
//! `finished` flag), so `close` runs exactly once for every process, as before.
//!
//! Checked (`tests/loom_tasks.rs`, a real cell and executor, a stand-in process future) by
//! `loom_process_task_spawn_racing_with_the_forced_stop` (steps 1–4: a process parked on a waker
//! nobody fires is dropped and closed once, whoever cancels it) and
//! `loom_process_task_finishing_while_the_forced_stop_cancels_it` (`close` against step 4, the
//! task being polled: as with a stuck worker); through the whole scheduler by
//! `loom_scheduler_shutdown_racing_with_a_spawn` (`tests/loom_lifecycle.rs`).

use super::closers::Walk;
use super::shared::Inner;
use crate::executor::{self, JoinHandle, TaskRef};
use crate::loom::Arc;
use crate::process::mailbox::ProcessCell;
use crate::process::Pid;
use std::future::Future;

/// Slots the forced stop's walk visits in one piece ([`walk_all`]): a few microseconds of work
/// under the closers' queue lock, which the waiter needs at its deadline.
const WALK_PIECE: usize = 256;

/// Spawn steps 1–3 (module docs): runs `future`, the task of process `pid` hosted by `cell`.
#[inline(always)]
pub(super) fn spawn<F>(
    executor: &executor::Handle,
    cell: &ProcessCell,
    pid: Pid,
    future: F,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let generation = pid.generation();
    let mut kept = false;
    // Steps 1 and 2.
    let join = executor.spawn_unowned(future, pid.as_u64(), |task| {
        // Not refused: the process cannot have finished, its task has not run yet.
        let refused = cell.set_task(generation, task);
        debug_assert!(refused.is_none(), "the process closed before its task ran");
        kept = refused.is_none();
        drop(refused);
    });
    // Step 3.
    if kept && executor.is_shutdown() {
        if let Some(task) = cell.take_task(Some(generation)) {
            task.shutdown();
        }
    }
    join
}

/// Step 4 (module docs): a walk over `inner`'s process table, in pieces of [`WALK_PIECE`] slots,
/// that takes out every process task the cells hold, for the forced stop to cancel
/// ([`TaskRef::shutdown`], on its closer threads: `closers.rs`).
pub(super) fn walk_all(inner: Arc<Inner>) -> Walk<TaskRef> {
    let mut next = Some(0);
    Box::new(move |queue| {
        let Some(from) = next else {
            return false;
        };
        next = inner
            .table
            .visit_from(from, WALK_PIECE, |cell| queue.extend(take(cell)));
        true
    })
}

/// Step 4 for one cell: the process task's reference it holds, if any.
pub(super) fn take(cell: &ProcessCell) -> Option<TaskRef> {
    cell.take_task(None)
}
