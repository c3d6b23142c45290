//! The observable state of a process, in one atomic word.
//!
//! | value | state | meaning |
//! |---|---|---|
//! | 0 | `Ready` | queued on the executor (a wake is pending) |
//! | 1 | `Running` | a worker is inside its poll (stepping it) |
//! | 2 | `Blocked` | waiting for yield completions |
//! | 3 | `Idle` | waiting for messages |
//! | 4 | `Complete` | finished (or no process yet); left only when the cell hosts its next process (`reset`) |
//!
//! Bit 3, `NOTIFIED`, is the process-level wakeup flag: set when an event is delivered while the
//! process is `Running`.
//!
//! # Protocol: an event that lands while the process runs is never lost
//! 1. A producer pushes the event into the mailbox, then calls [`StateWord::on_event`]:
//!    `Blocked`/`Idle` → `Ready` and the producer wakes the task; `Running` → set `NOTIFIED`
//!    (no wake: the worker is still there); `Ready` → nothing (a poll is coming).
//! 2. After a step, the worker calls [`StateWord::try_park`] to go `Running` → `Blocked`/`Idle`.
//!    The CAS fails if `NOTIFIED` is set: the worker clears it and steps again (within its step
//!    budget; past the budget it re-queues the process behind other work).
//!
//! Both steps are read-modify-writes on this one word, so either the producer's RMW comes first
//! (the worker's CAS fails and it steps again, seeing the event, which was pushed before) or the
//! worker's does (the producer sees `Blocked`/`Idle` and wakes it). Exactly one more step sees the
//! event either way.

use crate::loom::atomic::{AtomicU8, Ordering::*};

const STATE_MASK: u8 = 0b0111;
const NOTIFIED: u8 = 0b1000;

/// The observable state of a process ([`Scheduler::state`](crate::Scheduler::state)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProcessState {
    /// Queued, waiting for a worker.
    Ready,
    /// A worker is stepping it.
    Running,
    /// Waiting for yield completions.
    Blocked,
    /// Waiting for messages.
    Idle,
    /// Finished.
    Complete,
}

impl ProcessState {
    fn from_bits(bits: u8) -> ProcessState {
        match bits & STATE_MASK {
            0 => ProcessState::Ready,
            1 => ProcessState::Running,
            2 => ProcessState::Blocked,
            3 => ProcessState::Idle,
            _ => ProcessState::Complete,
        }
    }

    fn bits(self) -> u8 {
        match self {
            ProcessState::Ready => 0,
            ProcessState::Running => 1,
            ProcessState::Blocked => 2,
            ProcessState::Idle => 3,
            ProcessState::Complete => 4,
        }
    }
}

/// The atomic state word (see the module docs).
#[derive(Debug)]
pub(crate) struct StateWord(AtomicU8);

/// What [`StateWord::try_park`] found.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Park {
    /// Parked: the next event wakes the process.
    Parked,
    /// An event arrived during the step: step again.
    Notified,
}

impl StateWord {
    /// A new cell's word: `Complete` until a process is spawned into it ([`reset`](Self::reset)).
    pub(crate) fn new() -> StateWord {
        StateWord(AtomicU8::new(ProcessState::Complete.bits()))
    }

    /// A process is spawned into the cell: `Ready`, its first poll is queued right after. Called
    /// under the mailbox lock while the cell is not yet open, so no producer touches the word.
    pub(crate) fn reset(&self) {
        self.0.store(ProcessState::Ready.bits(), Release);
    }

    pub(crate) fn load(&self) -> ProcessState {
        ProcessState::from_bits(self.0.load(Acquire))
    }

    /// A worker starts a poll. Clears a stale `NOTIFIED`: this poll drains the mailbox anyway.
    pub(crate) fn start_poll(&self) {
        self.0.store(ProcessState::Running.bits(), SeqCst);
    }

    /// Protocol step 1. Returns `true` if the caller must wake the task.
    pub(crate) fn on_event(&self) -> bool {
        let mut current = self.0.load(Acquire);
        loop {
            let next = match ProcessState::from_bits(current) {
                ProcessState::Blocked | ProcessState::Idle => ProcessState::Ready.bits(),
                ProcessState::Running if current & NOTIFIED == 0 => current | NOTIFIED,
                _ => return false,
            };
            match self.0.compare_exchange_weak(current, next, AcqRel, Acquire) {
                Ok(_) => return next == ProcessState::Ready.bits(),
                Err(actual) => current = actual,
            }
        }
    }

    /// Protocol step 2: `Running` → `to` (`Blocked` or `Idle`), unless an event arrived.
    pub(crate) fn try_park(&self, to: ProcessState) -> Park {
        debug_assert!(matches!(to, ProcessState::Blocked | ProcessState::Idle));
        match self
            .0
            .compare_exchange(ProcessState::Running.bits(), to.bits(), AcqRel, Acquire)
        {
            Ok(_) => Park::Parked,
            Err(actual) => {
                debug_assert_eq!(actual, ProcessState::Running.bits() | NOTIFIED);
                // The caller drains the mailbox after this, so events that land from here on
                // are seen even though their `on_event` finds the flag still set.
                self.0.fetch_and(!NOTIFIED, AcqRel);
                Park::Notified
            }
        }
    }

    /// Consumes the `NOTIFIED` flag: `true` if an event (or a terminate request) was delivered
    /// while running, since the last check.
    pub(crate) fn take_notified(&self) -> bool {
        if self.0.load(Acquire) & NOTIFIED == 0 {
            return false;
        }
        self.0.fetch_and(!NOTIFIED, AcqRel);
        true
    }

    /// The process goes back in the run queue (`Continue`, or the step budget ran out).
    pub(crate) fn requeue(&self) {
        self.0.store(ProcessState::Ready.bits(), SeqCst);
    }

    pub(crate) fn complete(&self) {
        self.0.store(ProcessState::Complete.bits(), SeqCst);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn an_event_while_running_makes_park_fail_once() {
        let s = StateWord::new();
        s.reset();
        assert_eq!(s.load(), ProcessState::Ready);
        s.start_poll();
        assert!(!s.on_event(), "running: no wake");
        assert!(!s.on_event(), "second event: flag already set");
        assert_eq!(s.try_park(ProcessState::Blocked), Park::Notified);
        assert_eq!(s.load(), ProcessState::Running);
        assert_eq!(s.try_park(ProcessState::Idle), Park::Parked);
        assert_eq!(s.load(), ProcessState::Idle);
        assert!(s.on_event(), "idle: the producer wakes it");
        assert_eq!(s.load(), ProcessState::Ready);
        assert!(!s.on_event(), "already ready");
        s.complete();
        assert!(!s.on_event());
    }
}
