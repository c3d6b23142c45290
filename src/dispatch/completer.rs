//! The one-shot completion of an async or blocking yield.

use crate::loom::Arc;
use crate::process::mailbox::{Admission, ProcessCell};
use crate::process::{CommandError, Event, Pid, Tag};
use crate::Payload;

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
    completed: bool,
}

impl YieldCompleter {
    pub(crate) fn new(cell: Arc<ProcessCell>, pid: Pid, tag: Tag) -> Self {
        YieldCompleter {
            cell,
            pid,
            tag,
            completed: false,
        }
    }

    /// Delivers the result. Returns `false` if the process is gone (the result was dropped).
    pub(crate) fn complete(mut self, result: Result<Payload, CommandError>) -> bool {
        self.completed = true;
        self.deliver(result) == Admission::Accepted
    }

    fn deliver(&self, result: Result<Payload, CommandError>) -> Admission {
        self.cell.deliver(
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
