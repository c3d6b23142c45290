//! A named child's start: its name is freed before the factory runs, and registered for the
//! new instance right after (`Supervising::start`), so no two instances of one named child
//! ever live at once.

use super::Supervising;
use crate::process::Pid;
use crate::scheduler::names::RegisterError;
use crate::scheduler::supervisor::SupervisorError;
use std::sync::Arc;
use std::time::Instant;

impl Supervising {
    /// Waits until no process holds `name`, before a new instance of its child is made.
    ///
    /// A name still held by a process on its way out — the previous instance, one a crashed
    /// sub-supervisor's link is ending, one whose first poll outlived its start — is waited
    /// for: it is free once that process has ended (released before its `Down` or exit signal
    /// can be heard: `names.rs`, "Released before anyone hears"), and the fault that ended it
    /// must cost one restart, not every retry in the meantime. A name held by a live process is
    /// OTP's `already_started`: a failed start.
    ///
    /// The wait is bounded by the child's shutdown policy ([`patience`](super::patience): a
    /// holder stuck in a step or its `close` makes a failed start, not a stuck supervisor) and
    /// ends at the supervisor's own cancel. A start that fails here has made no instance.
    pub(super) async fn await_name(
        &mut self,
        name: &Arc<str>,
        patience: Option<std::time::Duration>,
    ) -> Result<(), SupervisorError> {
        let sched = self.cx.scheduler();
        let deadline = patience.map(crate::deadline::after);
        while let Some(holder) = sched.whereis(name) {
            if !sched.is_ending(holder) {
                let taken = RegisterError::Taken {
                    name: Arc::clone(name),
                    holder,
                };
                return Err(name_not_registered(&taken));
            }
            let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
            let monitor = self.cx.monitor(holder);
            let ended = self.wait_for_end(holder, monitor, left, true).await;
            self.cx.demonitor(monitor);
            if !ended {
                let why = if self.cancelled.is_some() {
                    format!("the supervisor was asked to finish while `{name}` was freed")
                } else {
                    format!("the name `{name}`'s holder did not end within {patience:?}")
                };
                return Err(name_not_registered(&why));
            }
        }
        Ok(())
    }

    /// Registers `name` for the new instance `pid` (OTP's `{local, Name}`), which
    /// [`await_name`](Self::await_name) found free before `pid` was spawned. An instance that
    /// has ended already started all the same: its exit signal is handled as any child's.
    ///
    /// Taken since (another thread's `register`), or `pid` named otherwise already: a failed
    /// start. The instance must not run unreachable by its name, nor overlap the next attempt:
    /// it is terminated and its end awaited (bounded by [`patience`](super::patience); its exit
    /// signal then finds no child and is ignored).
    pub(super) async fn register_child(
        &mut self,
        pid: Pid,
        name: Arc<str>,
        patience: Option<std::time::Duration>,
    ) -> Result<(), SupervisorError> {
        let sched = self.cx.scheduler();
        let error = match sched.register(name, pid) {
            Ok(()) | Err(RegisterError::NotRunning(_)) => return Ok(()),
            Err(error) => error,
        };
        let monitor = self.cx.monitor(pid);
        let _ = sched.terminate(pid);
        self.wait_for_end(pid, monitor, patience, false).await;
        self.cx.demonitor(monitor);
        Err(name_not_registered(&error))
    }
}

/// A start that failed for its name.
fn name_not_registered(why: &dyn std::fmt::Display) -> SupervisorError {
    SupervisorError::Start(format!("its name could not be registered: {why}"))
}
