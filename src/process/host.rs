//! The narrow trait through which the process future reaches whoever hosts it (the scheduler),
//! and what it hands over: how a poll went ([`PollStats`]) and how a process ended
//! ([`Outcome`]). The process layer imports nothing from the scheduler: the scheduler implements
//! [`Host`] (`scheduler/shared.rs`), and tests of this layer implement it with counters.

use super::exit::ExitReason;
use super::mailbox::ProcessCell;
use super::output::YieldSlot;
use super::{BoxError, Events, Pid};
use crate::loom::Arc;
use std::time::{Duration, Instant};

/// What one poll did, counted on the stack and handed to the host once ([`Host::polled`]).
#[derive(Debug, Default)]
pub(crate) struct PollStats {
    /// Steps run.
    pub(crate) steps: u64,
    /// Yields by handler kind, and inline handler failures: the host's `dispatch` fills these.
    pub(crate) inline: u64,
    pub(crate) asynchronous: u64,
    pub(crate) blocking: u64,
    pub(crate) no_handler: u64,
    /// A state machine's asks (`ask_command`), yielded to the process asked.
    pub(crate) asks: u64,
    pub(crate) inline_errors: u64,
    pub(crate) inline_panics: u64,
}

/// How a process finished, as the host counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// `Status::Done`.
    Done,
    /// A step returned an error.
    Failed,
    /// A step returned an error that says the process was asked to finish (a receive that
    /// reported the cancellation, propagated with `?`): a graceful end.
    Cancelled,
    /// A step or `close` panicked.
    Panicked,
    /// Terminated on request.
    Terminated,
    /// Dropped unfinished: a shutdown stopped it.
    Stopped,
}

impl Outcome {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
            Outcome::Panicked => "panicked",
            Outcome::Terminated => "terminated",
            Outcome::Stopped => "stopped",
        }
    }
}

/// What the process future needs from the scheduler hosting it.
pub(crate) trait Host: Send + Sync + 'static {
    /// A handle to an in-flight async or blocking handler, aborted if the process ends first.
    type Outstanding: Send + 'static;

    /// Dispatches one yield. An inline handler (or a missing one) completes at once by pushing
    /// its `YieldComplete` to `completions`; other kinds return a handle to their task. Counts
    /// the yield in `stats`.
    fn dispatch(
        &self,
        pid: Pid,
        cell: &Arc<ProcessCell>,
        yielded: YieldSlot<'_>,
        completions: &mut Events,
        stats: &mut PollStats,
    ) -> Option<Self::Outstanding>;

    /// Aborts an outstanding handler task.
    fn abort(&self, outstanding: Self::Outstanding);

    /// `true` if the outstanding handler has finished (its completion is delivered or rejected).
    fn is_finished(&self, outstanding: &Self::Outstanding) -> bool;

    /// The process finished (with `outcome`) and its cell is closed: forget its PID (the cell
    /// may host another process from now on, so the process future never touches it again).
    /// Returns `true` if the finish came after a shutdown's grace period (the shutdown counts
    /// the process forced or abandoned): then its handle reports cancellation, whatever its
    /// last step did, unless it panicked.
    /// `reason` is what its links and monitors are told (`scheduler/links.rs`).
    fn finished(&self, pid: Pid, cell: &ProcessCell, outcome: Outcome, reason: ExitReason) -> bool;

    /// A poll ended (before the process future returns, or is dropped): what it did.
    fn polled(&self, stats: &PollStats) {
        let _ = stats;
    }

    /// A timed step of `pid` ran for `elapsed`, ending at `end` (module docs).
    fn step_timed(&self, pid: Pid, elapsed: Duration, end: Instant) {
        let _ = (pid, elapsed, end);
    }

    /// `true` if `error`, returned by a step, says the process was asked to finish (so it ends
    /// as cancelled, not failed).
    fn is_cancellation(&self, error: &BoxError) -> bool {
        let _ = error;
        false
    }

    /// Most events moved into one step.
    fn max_batch(&self) -> usize;

    /// Most steps in one poll.
    fn step_budget(&self) -> usize;

    /// `true` once the host is force-stopping every process: no further step may start (the
    /// process future is about to be dropped, which closes the process).
    fn should_stop(&self) -> bool;
}
