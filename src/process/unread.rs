//! What a finished process left unread — the events its mailbox still held, an `async fn`
//! body's inbox, the events its last step did not read — and its drop once the process's
//! outcome is published (`contain.rs`, "After the outcome"; `future.rs`, "Finish").

use super::contain::{self, Later};
use super::mailbox::{ProcessCell, UnreadMail};
use super::{drop_each, Event, Events, Pid};
use crate::loom::Arc;

/// What one finished process left unread.
pub(super) struct Unread {
    /// Its mailbox's events, if any (`ProcessCell::close_keeping_unread`).
    pub(super) mail: Option<Box<UnreadMail>>,
    /// An async body's inbox, collected as its adapter was dropped (`contain::collecting`).
    pub(super) inbox: Vec<Later>,
    /// The events its last step did not read.
    pub(super) events: Vec<Event>,
}

impl Unread {
    /// Drops it all — once the executor has published the result of the task finishing on this
    /// thread if `after_outcome`, else now — each value contained, the panics counted to
    /// `cell` (whose all-time figures they are, whichever process it hosts by then) and traced
    /// with `pid`.
    #[inline]
    pub(super) fn leave(self, pid: Pid, cell: &Arc<ProcessCell>, after_outcome: bool) {
        if self.mail.is_none() && self.inbox.capacity() == 0 && self.events.capacity() == 0 {
            // Nearly every process: nothing left, nothing allocated. Forgetting owns nothing
            // (two unallocated `Vec`s and a `None`), and skips their drop glue.
            std::mem::forget(self);
            return;
        }
        self.leave_some(pid, cell, after_outcome);
    }

    /// [`leave`](Self::leave) with something to drop.
    #[cold]
    fn leave_some(self, pid: Pid, cell: &Arc<ProcessCell>, after_outcome: bool) {
        let Unread {
            mail,
            inbox,
            events,
        } = self;
        if mail.is_none() && inbox.is_empty() && events.is_empty() {
            // Buffers only, no user value: freed now.
            return;
        }
        let cell = cell.clone();
        let unread: Later = Box::new(move || {
            let mail_panics = mail.map_or(0, |mail| mail.drop_contained());
            let mut panics = mail_panics + drop_each(events);
            for later in inbox {
                panics += later();
            }
            if panics > 0 {
                tracing::warn!(
                    %pid,
                    panics,
                    "destructors of what the process left unread panicked; each was contained"
                );
                cell.stats.destructors_panicked(panics);
            }
            panics
        });
        if after_outcome {
            contain::after_outcome(unread);
        } else {
            unread();
        }
    }
}

/// Takes the events a process's last step left unread, to drop after its outcome.
pub(super) fn take_unread(events: &mut Events) -> Vec<Event> {
    if events.is_empty() {
        return Vec::new();
    }
    std::iter::from_fn(|| events.pop()).collect()
}
