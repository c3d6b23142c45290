//! What observers read from a cell — `state`, `process_info`, `processes`, the metrics
//! snapshot — each in one critical section of the mailbox lock.
//!
//! A process is shown from the moment its task is kept (`ProcessCell::set_task`), not from
//! the moment its cell opens: between the two it is inside `init`, which may still fail, and
//! `spawn` has not returned its PID (`Inner::starting`). The flag is written under the lock
//! the spawner takes anyway and read only here: the send and step paths never touch it.

use super::{Generation, Phase, ProcessCell};
use crate::process::stats::{CellInfo, CellSurvey};
use crate::process::{MessageType, ProcessState};

impl ProcessCell {
    /// The message type the process of `generation` declared (`Some(None)`: none), or `None`
    /// if the cell no longer hosts it. Known from `open_as` on: a typed send to a process
    /// inside `init` is checked as any other.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn takes(&self, generation: Generation) -> Option<Option<MessageType>> {
        let inner = self.mailbox.inner.lock();
        let (current, phase) = self.mailbox.gate.load();
        (current == generation && phase == Phase::Open).then_some(inner.takes)
    }

    /// `true` while the cell hosts the process of `generation`, inside `init` or finishing
    /// included (what accepts a link to it).
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn hosts(&self, generation: Generation) -> bool {
        let (current, phase) = self.mailbox.gate.load();
        current == generation && phase != Phase::Free
    }

    /// The state of the process of `generation`, or `None` if the cell does not host it, or
    /// hosts it still inside `init`.
    pub(crate) fn state(&self, generation: Generation) -> Option<ProcessState> {
        let inner = self.mailbox.inner.lock();
        let (current, phase) = self.mailbox.gate.load();
        (current == generation && phase != Phase::Free && !inner.starting)
            .then(|| self.state.load().process_state())
    }

    /// The process of `generation` (`None`: whichever is live), if the cell hosts it and it is
    /// neither inside `init` nor finishing.
    pub(crate) fn info(&self, generation: Option<Generation>) -> Option<CellInfo> {
        let mut inner = self.mailbox.inner.lock();
        let (current, phase) = self.mailbox.gate.load();
        if phase != Phase::Open || inner.starting || generation.is_some_and(|g| g != current) {
            return None;
        }
        let depth = self.mailbox.depth_seen(&mut inner);
        Some(CellInfo {
            generation: current,
            state: self.state.load().process_state(),
            kind: inner.kind,
            spawned_at: inner.spawned_at,
            steps: self.stats.steps(),
            mailbox_depth: depth,
            outstanding: self.stats.outstanding(),
            unread_messages: self.stats.held().0,
            unread_signals: self.stats.held().1,
        })
    }

    /// What the metrics snapshot reads from the cell, in one critical section: a process
    /// inside `init` is not live yet.
    pub(crate) fn survey(&self) -> CellSurvey {
        let mut inner = self.mailbox.inner.lock();
        self.mailbox.depth_seen(&mut inner);
        CellSurvey {
            live: (self.mailbox.gate.load().1 == Phase::Open && !inner.starting)
                .then(|| self.state.load().process_state()),
            max_depth: inner.max_depth,
            handler_errors: self.stats.handler_errors(),
            handler_panics: self.stats.handler_panics(),
            destructor_panics: self.stats.destructor_panics(),
        }
    }
}
