//! The adapter's state between polls of the body: live calls, the inbox, cancellation, and what
//! the body's pending futures wait for.
//!
//! A call's completion is not filed on arrival: when it is the step's only event (the common
//! case), the step holds it on its stack ([`Arrived`]) for the poll, and the call takes it from
//! there. Only a completion that arrived with other events, or that no call took during the poll
//! that saw it, is kept here (`completions`) for its call to find.
//!
//! Nothing the body's futures do through the step scope drops a user value (a payload's
//! destructor could re-enter the scope): what they discard is left for the adapter to drop after
//! the poll ([`CxState::keep`], [`CxState::purge_forgotten`]).

use crate::process::{CancelReason, CommandError, Event, Message, Payload, Tag, Topic};
use smallvec::SmallVec;
use std::collections::VecDeque;

/// A call's completion.
pub(super) type Completion = Result<Payload, CommandError>;

/// The completion a step received as its only event, while the body is polled.
pub(super) type Arrived = Option<(Tag, Completion)>;

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
    /// Calls sent, and not yet resolved or dropped.
    calls: LiveCalls,
    /// Completions not taken in the poll of the step they arrived in. Between polls, only of
    /// live calls (at most one each); during a poll, possibly also of calls dropped in it
    /// ([`purge_forgotten`](Self::purge_forgotten) drops those after it).
    completions: Vec<(Tag, Completion)>,
    /// Messages and overflow markers not yet received by the body: boxed, and absent until
    /// the first arrives, since a process that only makes calls never needs them (two empty
    /// queues inline would cost every async-fn process 64 bytes; the box, 8).
    pub(super) mail: Option<Box<Mail>>,
    /// Latched when `Cancel` arrives.
    pub(super) cancelled: Option<CancelReason>,
    /// `recv` has reported the cancellation (it does so once).
    pub(super) cancel_reported: bool,
    pub(super) wants: Wants,
}

impl CxState {
    /// Files an event where the body's futures will look for it (not during a poll: it may drop
    /// a completion).
    pub(super) fn route(&mut self, event: Event) {
        match event {
            Event::YieldComplete { tag, result } => self.keep(tag, result),
            Event::Message(message) => self.mail().inbox.push_back(message),
            Event::Cancel { reason } => self.cancelled = Some(reason),
            Event::MailboxOverflow { topic } => self.mail().overflows.push_back(topic),
            // Only a re-poll was asked for.
            Event::Woken => {}
        }
    }

    fn mail(&mut self) -> &mut Mail {
        self.mail.get_or_insert_with(Box::default)
    }

    /// Keeps call `tag`'s completion for a later poll, or drops it if the call is gone (not
    /// during a poll).
    pub(super) fn keep(&mut self, tag: Tag, completion: Completion) {
        // A call dropped before its completion is no longer live: the result is dropped.
        if self.calls.contains(tag) {
            self.completions.push((tag, completion));
        }
    }

    /// A new call: its tag, live from now on.
    #[inline]
    pub(super) fn start_call(&mut self) -> Tag {
        self.next_tag = self.next_tag.wrapping_add(1);
        let tag = self.next_tag;
        self.calls.insert(tag);
        tag
    }

    /// The completion of live call `tag`, if it has arrived (the call is then resolved: no
    /// longer live). `arrived` is what the step holds for the poll. Drops nothing.
    #[inline]
    pub(super) fn take_completion(
        &mut self,
        arrived: &mut Arrived,
        tag: Tag,
    ) -> Option<Completion> {
        let completion = match arrived {
            Some((t, _)) if *t == tag => arrived.take().map(|(_, completion)| completion),
            _ => self.take_kept(tag),
        }?;
        self.calls.remove(tag);
        Some(completion)
    }

    /// [`take_completion`](Self::take_completion) off the fast path: a kept completion.
    #[cold]
    #[inline(never)]
    fn take_kept(&mut self, tag: Tag) -> Option<Completion> {
        let index = self.completions.iter().position(|(t, _)| *t == tag)?;
        Some(self.completions.swap_remove(index).1)
    }

    /// The call future was dropped: it is no longer live. A completion already kept for it
    /// stays until [`purge_forgotten`](Self::purge_forgotten); one arriving later is dropped by
    /// [`keep`](Self::keep). Drops nothing.
    #[inline]
    pub(super) fn forget_call(&mut self, tag: Tag) {
        self.calls.remove(tag);
    }

    /// Drops the kept completions of calls no longer live (after a poll).
    #[inline]
    pub(super) fn purge_forgotten(&mut self) {
        if !self.completions.is_empty() {
            let calls = &self.calls;
            self.completions.retain(|(tag, _)| calls.contains(*tag));
        }
    }

    /// `true` while some live call has not completed (between polls: after
    /// [`purge_forgotten`](Self::purge_forgotten), and with what the poll left kept).
    #[inline]
    pub(super) fn has_outstanding_calls(&self) -> bool {
        if self.completions.is_empty() {
            return !self.calls.is_empty();
        }
        self.calls
            .iter()
            .any(|tag| !self.completions.iter().any(|(t, _)| *t == tag))
    }
}

/// What arrived for the body's `recv`s.
#[derive(Debug, Default)]
pub(super) struct Mail {
    /// Messages not yet received by the body.
    pub(super) inbox: VecDeque<Message>,
    /// Topics whose overflow marker the body has not yet received.
    pub(super) overflows: VecDeque<Topic>,
}

/// The tags of live calls: the first inline, the others (calls awaited together) after it. Few
/// at a time: a linear scan beats hashing.
#[derive(Debug, Default)]
struct LiveCalls {
    /// `None` only when there are none.
    first: Option<Tag>,
    more: SmallVec<[Tag; 2]>,
}

impl LiveCalls {
    #[inline]
    fn insert(&mut self, tag: Tag) {
        if self.first.is_none() {
            self.first = Some(tag);
        } else {
            self.more.push(tag);
        }
    }

    #[inline]
    fn remove(&mut self, tag: Tag) {
        if self.first == Some(tag) {
            self.first = self.more.pop();
        } else if let Some(index) = self.more.iter().position(|t| *t == tag) {
            self.more.swap_remove(index);
        }
    }

    #[inline]
    fn contains(&self, tag: Tag) -> bool {
        self.first == Some(tag) || self.more.contains(&tag)
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    fn iter(&self) -> impl Iterator<Item = Tag> + '_ {
        self.first.into_iter().chain(self.more.iter().copied())
    }
}
