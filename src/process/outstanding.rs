//! The handler tasks a process future waits on: what it aborts when the body drops a call, or
//! when the process ends.
//!
//! # Dropped calls
//! A body's call future dropped before its completion came (a `select!` loser, a timeout)
//! notes its tag in the step's output; after the step's yields are dispatched, the process
//! future aborts that call's handler task and forgets it ([`Outstanding::abort_dropped`]): an
//! async handler's future is dropped at once, or when its current poll returns, as a dropped
//! `Run`'s task is. Its completion (`Cancelled`, from the aborted task) is dropped by the
//! body's adapter on arrival: the call is no longer live, so no future ever sees it. A
//! blocking handler already running on its thread cannot be stopped: it leaves the list all
//! the same, and its result is dropped on arrival.
//!
//! # Pruning
//! The other tasks stay in the list after they finish, until pruned: before a push, once the
//! list holds twice what the last pruning left (at least [`PRUNE_AT_LEAST`]), the finished
//! ones are dropped. One scan per doubling: a process awaiting many calls pays amortized
//! O(1) per dispatch (a scan of the whole list per step was quadratic), and the list holds at
//! most twice its live tasks, plus a few.

use super::host::Host;
use super::Tag;
use smallvec::SmallVec;

/// The fewest outstanding handler tasks at which the finished ones are pruned before a push.
const PRUNE_AT_LEAST: u32 = 4;

/// A process's outstanding handler tasks, with their yields' tags (module docs).
pub(crate) struct Outstanding<T> {
    /// Mostly none or one (a yield to an async handler): one is kept inline, so a process
    /// waiting on its handler holds no buffer for it (`burst_spawn`'s memory per live process;
    /// a malloc and a free per such process).
    tasks: SmallVec<[(Tag, T); 1]>,
    /// The length at which the finished tasks are pruned before the next push.
    prune_at: u32,
}

impl<T> Default for Outstanding<T> {
    fn default() -> Self {
        Outstanding {
            tasks: SmallVec::new(),
            prune_at: PRUNE_AT_LEAST,
        }
    }
}

impl<T> Outstanding<T> {
    /// The task of yield `tag`, just dispatched.
    #[inline]
    pub(crate) fn push<H: Host<Outstanding = T>>(&mut self, host: &H, tag: Tag, task: T) {
        if self.tasks.len() >= self.prune_at as usize {
            self.prune_finished(host);
        }
        self.tasks.push((tag, task));
    }

    /// Drops the finished tasks' handles; the next pruning is at twice what is left.
    #[cold]
    #[inline(never)]
    fn prune_finished<H: Host<Outstanding = T>>(&mut self, host: &H) {
        self.tasks.retain(|(_, task)| !host.is_finished(task));
        self.prune_at = u32::try_from(self.tasks.len() * 2)
            .unwrap_or(u32::MAX)
            .max(PRUNE_AT_LEAST);
    }

    /// Aborts the tasks of the calls dropped in the last step (`dropped`, left empty), and
    /// forgets them (module docs, "Dropped calls"). A tag without a task (an inline handler's,
    /// an ask's, a finished task already pruned) is skipped.
    #[cold]
    #[inline(never)]
    pub(crate) fn abort_dropped<H: Host<Outstanding = T>>(
        &mut self,
        host: &H,
        dropped: &mut Vec<Tag>,
    ) {
        for tag in dropped.drain(..) {
            if let Some(at) = self.tasks.iter().position(|(t, _)| *t == tag) {
                let (_, task) = self.tasks.swap_remove(at);
                host.abort(task);
            }
        }
    }

    /// Aborts every task (the process ended).
    pub(crate) fn abort_all<H: Host<Outstanding = T>>(&mut self, host: &H) {
        for (_, task) in self.tasks.drain(..) {
            host.abort(task);
        }
    }

    /// How many handles the list holds (finished tasks not yet pruned included).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn len(&self) -> usize {
        self.tasks.len()
    }
}
