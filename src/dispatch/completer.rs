//! The one-shot completion of an async or blocking yield.

use crate::loom::Arc;
use crate::process::mailbox::{Admission, ProcessCell};
use crate::process::Payload;
use crate::process::{CommandError, Event, Events, Pid, Tag};

/// The sending half of a yield's oneshot: completes the yield exactly once, as a
/// `YieldComplete` event in the process's mailbox (which wakes the process).
///
/// Bound to the cell's generation at dispatch (the process's PID names it), so a completion that
/// arrives after the process ended — even once the cell hosts another process — is rejected
/// instead of reaching anyone else. Dropped without completing (the handler task was aborted or
/// its runtime shut down), it completes the yield with [`CommandError::Cancelled`], so the
/// process is never left waiting.
pub(crate) struct YieldCompleter {
    cell: Arc<ProcessCell>,
    pid: Pid,
    tag: Tag,
    /// The command's type name, for the `warn` a handler's panic is.
    command: &'static str,
    completed: bool,
}

impl YieldCompleter {
    /// The completer of the yield `tag` of `pid`, which counts as outstanding until it completes.
    pub(crate) fn new(cell: Arc<ProcessCell>, pid: Pid, tag: Tag, command: &'static str) -> Self {
        cell.stats.yield_dispatched();
        YieldCompleter {
            cell,
            pid,
            tag,
            command,
            completed: false,
        }
    }

    /// The process the yield belongs to.
    pub(crate) fn pid(&self) -> Pid {
        self.pid
    }

    /// The process's cell (for its statistics).
    pub(crate) fn cell(&self) -> &Arc<ProcessCell> {
        &self.cell
    }

    /// Delivers the handler's result, counting an error or a panic in the cell's statistics (a
    /// panic is also a `warn` event). Returns `false` if the process is gone (the result was
    /// dropped).
    pub(crate) fn complete(mut self, result: Result<Payload, CommandError>) -> bool {
        self.finished(&result);
        self.deliver(result) == Admission::Accepted
    }

    /// Completes the yield within the dispatching step: its event goes straight into the step's
    /// `completions` (the process is being polled right now), as an inline handler's does.
    pub(crate) fn complete_in(
        mut self,
        completions: &mut Events,
        result: Result<Payload, CommandError>,
    ) {
        self.finished(&result);
        self.cell.stats.yield_completed();
        completions.push(Event::YieldComplete {
            tag: self.tag,
            result,
        });
    }

    /// Marks the yield completed and counts its result (a panic is also a `warn` event).
    fn finished(&mut self, result: &Result<Payload, CommandError>) {
        self.completed = true;
        self.cell.stats.handler_finished(result);
        if let Err(CommandError::Panicked(message)) = result {
            tracing::warn!(
                pid = %self.pid,
                tag = self.tag,
                command = self.command,
                panic = %message,
                "handler panicked"
            );
        }
    }

    fn deliver(&self, result: Result<Payload, CommandError>) -> Admission {
        self.cell.complete_yield(
            self.pid.generation(),
            Event::YieldComplete {
                tag: self.tag,
                result,
            },
        )
    }
}

impl Drop for YieldCompleter {
    fn drop(&mut self) {
        if !self.completed {
            let _ = self.deliver(Err(CommandError::Cancelled));
        }
    }
}

impl std::fmt::Debug for YieldCompleter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("YieldCompleter")
            .field("pid", &self.pid)
            .field("tag", &self.tag)
            .finish()
    }
}
