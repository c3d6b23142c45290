//! Unowned tasks: spawned without the owned-task list, their owner holding the task's reference
//! and cancelling it at shutdown.
//!
//! The owned list (`owned.rs`) costs every task a shard lock at spawn and another at completion,
//! on a line that moves between the spawning thread and the worker that completes the task. A
//! crate-internal owner that already reaches each of its tasks — the scheduler, through its process
//! table — can take that job over: [`Handle::spawn_unowned`](super::Handle::spawn_unowned) hands it
//! the reference the list would have held, a [`TaskRef`], and the executor forgets the task except
//! to run it. Ordinary spawns ([`Handle::spawn`](super::Handle::spawn)) keep the owned list.
//!
//! # Protocol
//! 1. `spawn_unowned` (`schedule.rs`) allocates the task as any spawn does (three references:
//!    the owner's — here the `TaskRef` —, the first `Notified`, the `JoinHandle`), then reads
//!    `shutdown`: set, it cancels the task at once and hands out no `TaskRef` (spawn after
//!    shutdown, as for an owned task); clear, it hands the `TaskRef` to the owner (who stores it)
//!    *before* queueing the first poll — so the task cannot run, let alone finish, before its
//!    owner has it — then queues it (the queues' own shutdown handshake in `shared.rs` keeps the
//!    `Notified` from being stranded). The header's `owner_slot` keeps its initial value,
//!    [`owned::UNBOUND`](super::owned::UNBOUND).
//! 2. Completion: `Schedule::release` sees `UNBOUND` and returns at once (no lock); the completing
//!    thread drops only its own references. The `TaskRef`, wherever the owner keeps it, is dropped
//!    by the owner: it is one counted reference like any other.
//! 3. Shutdown: `cancel_all` drops every queued `Notified` but cannot reach an unowned task. The
//!    owner must cancel it ([`TaskRef::shutdown`]): after `Executor::shutdown` (which sets the flag
//!    before anything else), its own pass takes every `TaskRef` it stored and cancels it.
//! 4. Spawn racing shutdown: a spawn may pass step 1's check just before the flag is set, and
//!    store its `TaskRef` just after the owner's pass looked. So the spawner, once its `TaskRef`
//!    is stored (under a lock the owner's pass also takes, for that entry), reads
//!    [`is_shutdown`](super::Handle::is_shutdown) again, and if set takes the `TaskRef` back (if
//!    the pass has not) and cancels the task itself. If the pass took the entry's lock first, the
//!    spawner's store comes after it, hence after the flag, and its re-read sees the flag; if
//!    after, the pass found the `TaskRef`. (An entry the pass cannot find at all must be covered
//!    by a fence of the owner's, as the process table's `create_cell` does.) Whoever takes the
//!    `TaskRef` out of the entry cancels: exactly one of them.
//!
//! Cancelling is [`Task::shutdown`]: it drops the future unless a worker is polling it (that
//! worker then cancels it when the poll returns) or it has completed. Checked with the one owner
//! there is, the scheduler's process tasks (`scheduler/tests/loom_tasks.rs`):
//! `loom_process_task_spawn_racing_with_the_forced_stop` (steps 1, 3, 4: a task parked forever is
//! still dropped, once) and `loom_process_task_finishing_while_the_forced_stop_cancels_it` (step 2
//! against the owner's cancel). Unit tests: `executor/tests/unowned.rs`.

use super::shared::Shared;
use super::task::Task;
use crate::loom::Arc;
use std::fmt;

/// The owner's reference to an unowned task (module docs): lets it cancel the task. Dropping it
/// only drops the reference.
pub(crate) struct TaskRef(pub(super) Task<Arc<Shared>>);

impl TaskRef {
    /// Cancels the task unless a worker is polling it (that worker cancels it when its poll
    /// returns) or it has completed, then drops this reference. Returns `true` if this call
    /// dropped the future (which runs its destructor on this thread).
    pub(crate) fn shutdown(self) -> bool {
        self.0.shutdown()
    }
}

impl fmt::Debug for TaskRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TaskRef").field(&self.0).finish()
    }
}
