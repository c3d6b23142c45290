//! A process stepped by hand — a [`testing::Harness`](crate::testing::Harness)'s — as an entry
//! of its scheduler's table: a cell claimed and opened as a spawn's is, with no task polling it.
//!
//! So what the scheduler does for a process it runs, it does for this one: links, monitors,
//! `trap_exit` and names are registered on the cell, and the messages, exit signals and `Down`s
//! sent to its PID land in its mailbox, which the harness drains into the next step's events
//! ([`SteppedCell::drain`]), as the process future does (`process/future.rs`). Its end closes
//! the cell ([`SteppedCell::finish`]): its name is released, its links get its exit signal and
//! its monitors their `Down`, as `Inner::finished` does for a spawned process.
//!
//! What differs, and why:
//! - Its generation is drawn from a program-wide count (from 2^32: not a generation a real
//!   scheduler's slot 0 reaches), so no two harnesses' processes share a PID (each harness has
//!   its own scheduler, whose first claim is always slot 0), nor a real scheduler's, and its slot
//!   is retired when it ends (`Table::retire`): the slot's next generations may be other
//!   harnesses' PIDs.
//! - It is not admitted by the lifecycle: it is no spawned process, a shutdown of the harness's
//!   scheduler does not wait for it (its scan still sends it a `Cancel`, which its next step
//!   reads), and the metrics do not count it (`registered_processes`, a count of the table's
//!   entries, does; and a shutdown that ends with it still live reports it abandoned). Its
//!   cell stays `starting`, so observers (`state`, `process_info`, `processes`) do not show
//!   it: nothing would ever park it.
//! - Its mailbox is unbounded: the harness does not count what its process holds unread.
//! - It never parks, so a delivery only flags it (`state.rs`): nothing is woken; the test
//!   steps it.

use super::handle::SchedulerHandle;
use crate::loom::Arc;
use crate::process::mailbox::{Drained, Incarnation, MailboxBound, ProcessCell};
use crate::process::{BoxError, Events, ExitReason, Pid, ProcessError};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The next stepped process's generation: program-wide (module docs). It starts far above any
/// generation a scheduler's slot 0 reaches (2^32 incarnations of one slot), so a harness's PID
/// is not one a real scheduler in the same program also issues — a test passing a harnessed
/// process's PID to a real scheduler meets `NotFound`, not a stranger (PIDs are only unique
/// within one scheduler, but the two side by side are a test's everyday setup).
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1 << 32);

/// A PID for a process stepped by hand, unique in this program among theirs, to open its cell
/// with ([`SchedulerHandle::open_stepped`]) on a scheduler that has claimed no slot yet.
pub(crate) fn stepped_pid() -> Pid {
    Pid::new(0, NEXT_GENERATION.fetch_add(1, Relaxed))
}

/// The table entry of a process stepped by hand (module docs).
pub(crate) struct SteppedCell {
    pid: Pid,
    cell: Arc<ProcessCell>,
    sched: SchedulerHandle,
    /// [`finish`](Self::finish) ran.
    finished: bool,
}

/// What a drain found.
pub(crate) enum Arrived {
    /// The events are in the step's `Events`.
    Events,
    /// A linked process's exit (or a `terminate`) ended the process before its next step, as
    /// on a scheduler: the error it ends with.
    Terminated(ProcessError),
}

impl SchedulerHandle {
    /// Opens the table entry of the process `pid` ([`stepped_pid`]), of type `kind`, stepped by
    /// hand. `None` if the scheduler had claimed a slot already, or `pid`'s generation is out of
    /// range: `pid` could not be its.
    pub(crate) fn open_stepped(&self, pid: Pid, kind: &'static str) -> Option<SteppedCell> {
        let incarnation = Incarnation {
            kind,
            mailbox: MailboxBound::Unbounded,
            ..Incarnation::default()
        };
        let (claimed, cell) = self.inner.table.claim_from(incarnation, pid.generation())?;
        if claimed != pid {
            // Not this scheduler's first claim: give the slot back as a spawn that failed would.
            cell.close();
            let _ = self.inner.table.release(claimed, &cell);
            return None;
        }
        Some(SteppedCell {
            pid,
            cell,
            sched: self.clone(),
            finished: false,
        })
    }
}

impl SteppedCell {
    /// Moves what arrived in the mailbox since the last drain into `events`, after those
    /// already there.
    pub(crate) fn drain(&self, events: &mut Events) -> Arrived {
        loop {
            match self.cell.drain_into(events, usize::MAX, None) {
                Drained::More => continue,
                Drained::Terminate => {
                    let error = match self.cell.take_exit_reason() {
                        Some(reason) => ProcessError::exited(self.pid, reason),
                        None => ProcessError::terminated(self.pid),
                    };
                    return Arrived::Terminated(error);
                }
                // A sender between its claim and its write: its event is the next step's.
                _ => return Arrived::Events,
            }
        }
    }

    /// `true` if `error`, a step's, is the process's own cancellation (it ends cancelled, not
    /// failed), as the scheduler decides it.
    pub(crate) fn is_cancellation(&self, error: &BoxError) -> bool {
        use crate::process::host::Host;
        self.sched.inner.is_cancellation(error)
    }

    /// The process ended, with `reason` unless its supervisor's end stopped it (then with its
    /// supervisor's, as on a scheduler: `process/future.rs`, `finish`): the cell closes, its
    /// slot is retired, its name released, its links and monitors signalled. Once; later calls
    /// do nothing.
    pub(crate) fn finish(&mut self, reason: ExitReason) {
        if self.finished {
            return;
        }
        self.finished = true;
        let (panics, stopped_by) = self.cell.close_taking_exit_reason();
        self.cell.stats.destructors_panicked(panics);
        // A cancellation it ended on is its supervisor's stop too (`ProcessError::cancelled_by`).
        let reason = match (stopped_by, reason) {
            (Some(stopped_by), ExitReason::Normal | ExitReason::Shutdown) => stopped_by,
            (_, reason) => reason,
        };
        let inner = &self.sched.inner;
        let (watches, _) = inner.table.retire(self.pid, &self.cell);
        if !watches.is_empty() {
            inner.ended(self.pid, &reason, watches);
        }
    }
}

impl Drop for SteppedCell {
    fn drop(&mut self) {
        // Dropped with its process still live (its harness went): as if stopped at a shutdown.
        self.finish(ExitReason::Shutdown);
    }
}
