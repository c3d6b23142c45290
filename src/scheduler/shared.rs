//! The state every [`SchedulerHandle`](super::SchedulerHandle) shares, and what the process
//! future needs of it (the [`Host`] implementation).

use super::lifecycle::{Leave, Lifecycle};
use super::table::Table;
use crate::dispatch::{self, HandlerSet};
use crate::executor;
use crate::loom::Arc;
use crate::process::future::Host;
use crate::process::mailbox::ProcessCell;
use crate::process::{CancelReason, Event, Events, Pid, Yield};

pub(crate) struct Inner {
    pub(super) executor: executor::Handle,
    handlers: HandlerSet,
    runtime: Option<tokio::runtime::Handle>,
    pub(super) table: Table,
    pub(super) lifecycle: Lifecycle,
    max_batch: usize,
    step_budget: usize,
}

impl Inner {
    pub(super) fn new(
        executor: executor::Handle,
        handlers: HandlerSet,
        runtime: Option<tokio::runtime::Handle>,
        mailbox_capacity: usize,
        max_batch: usize,
        step_budget: usize,
        max_processes: usize,
    ) -> Inner {
        Inner {
            executor,
            handlers,
            runtime,
            table: Table::new(mailbox_capacity),
            lifecycle: Lifecycle::new(max_processes),
            max_batch,
            step_budget,
        }
    }

    /// The tokio runtime handlers run on, if any.
    pub(super) fn runtime(&self) -> Option<&tokio::runtime::Handle> {
        self.runtime.as_ref()
    }

    /// Shutdown step 1: stops admission and delivers `Cancel` to every live process, once.
    /// Returns `false` if shutdown had begun already.
    pub(super) fn begin_shutdown(&self) -> bool {
        if !self.lifecycle.begin_shutdown() {
            return false;
        }
        tracing::debug!("scheduler shutdown: cancelling every process");
        for cell in self.table.cells() {
            cancel(cell);
        }
        true
    }
}

/// Delivers shutdown's `Cancel` to the process the cell hosts, if any.
pub(super) fn cancel(cell: &ProcessCell) {
    let _ = cell.deliver_current(Event::Cancel {
        reason: CancelReason::Shutdown,
    });
}

impl Host for Inner {
    type Outstanding = tokio::task::AbortHandle;

    fn dispatch(
        &self,
        pid: Pid,
        cell: &Arc<ProcessCell>,
        yielded: Yield,
        completions: &mut Events,
    ) -> Option<Self::Outstanding> {
        dispatch::dispatch(
            &self.handlers,
            self.runtime.as_ref(),
            pid,
            cell,
            yielded,
            completions,
        )
    }

    fn abort(&self, outstanding: Self::Outstanding) {
        outstanding.abort();
    }

    fn is_finished(&self, outstanding: &Self::Outstanding) -> bool {
        outstanding.is_finished()
    }

    fn finished(&self, pid: Pid, cell: &ProcessCell) {
        self.lifecycle
            .leave(Leave::Finished, || self.table.release(pid, cell));
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }

    fn step_budget(&self) -> usize {
        self.step_budget
    }

    fn should_stop(&self) -> bool {
        self.lifecycle.is_forcing()
    }
}
