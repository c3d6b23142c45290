//! The adapter's state between polls of the body: call slots, the inbox, cancellation, and what
//! the body's pending futures wait for.

use crate::process::{CancelReason, CommandError, Event, Message, Payload, Tag, Topic};
use smallvec::SmallVec;
use std::collections::VecDeque;

/// A call's slot: `None` while outstanding, then its completion until the call future takes it.
type Slot = Option<Result<Payload, CommandError>>;

/// What the body's pending futures wait for, gathered during one poll (reset before each).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Wants {
    /// A `recv` (or `cancelled`) is pending: park `Idle` if nothing else is.
    pub(super) message: bool,
    /// `yield_now`: run again after other ready work (`Continue`).
    pub(super) yield_now: bool,
}

#[derive(Debug, Default)]
pub(super) struct CxState {
    next_tag: Tag,
    /// Outstanding and completed-but-untaken calls. Few at a time: a linear scan beats hashing.
    calls: SmallVec<[(Tag, Slot); 4]>,
    /// Messages not yet received by the body.
    pub(super) inbox: VecDeque<Message>,
    /// Topics whose overflow marker the body has not yet received.
    pub(super) overflows: VecDeque<Topic>,
    /// Latched when `Cancel` arrives.
    pub(super) cancelled: Option<CancelReason>,
    /// `recv` has reported the cancellation (it does so once).
    pub(super) cancel_reported: bool,
    pub(super) wants: Wants,
}

impl CxState {
    /// Files the step's events where the body's futures will look for them.
    pub(super) fn route(&mut self, event: Event) {
        match event {
            Event::YieldComplete { tag, result } => {
                // A call dropped before its completion has no slot: the result is dropped.
                if let Some((_, slot)) = self.calls.iter_mut().find(|(t, _)| *t == tag) {
                    *slot = Some(result);
                }
            }
            Event::Message(message) => self.inbox.push_back(message),
            Event::Cancel { reason } => self.cancelled = Some(reason),
            Event::MailboxOverflow { topic } => self.overflows.push_back(topic),
            // Only a re-poll was asked for.
            Event::Woken => {}
        }
    }

    /// A new call: its tag, with an outstanding slot.
    pub(super) fn start_call(&mut self) -> Tag {
        self.next_tag = self.next_tag.wrapping_add(1);
        let tag = self.next_tag;
        self.calls.push((tag, None));
        tag
    }

    /// The completion of call `tag`, if it has arrived (the slot goes).
    pub(super) fn take_completion(&mut self, tag: Tag) -> Option<Result<Payload, CommandError>> {
        let index = self.calls.iter().position(|(t, _)| *t == tag)?;
        self.calls[index].1.as_ref()?;
        self.calls.swap_remove(index).1
    }

    /// The call future was dropped: forget its slot (a late completion is dropped).
    pub(super) fn forget_call(&mut self, tag: Tag) {
        if let Some(index) = self.calls.iter().position(|(t, _)| *t == tag) {
            self.calls.swap_remove(index);
        }
    }

    /// `true` while some call has not completed.
    pub(super) fn has_outstanding_calls(&self) -> bool {
        self.calls.iter().any(|(_, slot)| slot.is_none())
    }
}
