//! The adapter's state between polls of the body: live calls, the inbox, cancellation, and what
//! the body's pending futures wait for.
//!
//! A call's completion is not filed on arrival: when it is the step's only event (the common
//! case), the step holds it on its stack ([`Arrived`]) for the poll, and the call takes it from
//! there. Only a completion that arrived with other events, or that no call took during the poll
//! that saw it, is kept here (`completions`) for its call to find. A message is handled the same
//! way: the step's only event, behind an empty inbox, is held for the next receive, and only a
//! message that arrived with others or that no receive took goes to the inbox (whose box and
//! buffer a process receiving one message at a time never allocates).
//!
//! # Futures polled with their own waker
//! A process's events re-poll its body, and the body's combinators poll what they hold with
//! the body's waker — `join!`, `select!`, a small `join_all` — so a receive or a call never
//! needs its waker. A combinator that gives each future a waker of its own
//! (`FuturesUnordered`, `buffer_unordered`, `join_all` past 30 futures) polls again only the
//! futures whose waker was woken: a call or receive it holds would wait for ever. So a process
//! future that finds it was polled with a waker other than the body's (`Scope::wait_for_call`,
//! `Scope::wait_for_mail`) leaves a clone here, and the step wakes it, before the poll, once
//! what it waits for has arrived ([`CxState::ready_foreign`]): a call's completion (or a
//! cancellation, which ends an ask), mail, a signal or a cancellation filed in that step for a
//! receive (a dropped receive's waker is woken past a limit, `MAIL_WAKERS_FLUSH`). The
//! body's own waker costs one comparison; the clones live in the boxes that exist for calls
//! awaited together and for mail.
//!
//! Nothing the body's futures do through the step scope drops a user value (a payload's
//! destructor could re-enter the scope): what they discard is left for the adapter to drop after
//! the poll ([`CxState::keep`], [`CxState::purge_forgotten`]). Every user value the state drops —
//! a completion no call wants, the inbox and the kept completions when the process ends — is
//! dropped on its own, its destructor's panic contained (`process/contain.rs`).

use super::live_calls::LiveCalls;
use crate::process::exit::Signal;
use crate::process::mailbox::saturate;
use crate::process::{drop_contained, drop_later};
use crate::process::{CancelReason, CommandError, Event, Events, Message, Payload, Tag, Topic};
use std::collections::VecDeque;
use std::task::Waker;

/// The fewest kept wakers of receives (`Mail::wakers`) at which a step wakes them all, mail
/// or not: a waker cannot tell whether its future still exists, and a body that polls a new
/// combinator's receive on every turn of a loop would otherwise add one for every turn until
/// mail arrives. The live ones register again in the poll that follows; the limit is then
/// twice their number (`Mail::flush_at`), so that many live receives are not woken step
/// after step (each wake is a step more: that would never settle).
const MAIL_WAKERS_FLUSH: usize = 32;

/// A call's completion.
pub(super) type Completion = Result<Payload, CommandError>;

/// The completion a step received as its only event, while the body is polled.
pub(super) type Arrived = Option<(Tag, Completion)>;

/// What the body's pending futures wait for, gathered during one poll (reset before each).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Wants {
    /// Receives (`recv`, `cancelled`, the signal receives) pending: polled in this poll, not
    /// ready, and not dropped since (`pending_mark.rs`). Park `Idle` if nothing else waits.
    pub(super) receives: u32,
    /// `yield_now`: run again after other ready work (`Continue`).
    pub(super) yield_now: bool,
    /// A receive found mail in the inbox but yielded instead ([`Mail::must_yield`]): its
    /// waker, if not the body's own, is woken at once (`scope::note_mail_waiter`), since no
    /// new mail will.
    pub(super) preempted_receive: bool,
}

#[derive(Debug, Default)]
pub(super) struct CxState {
    next_tag: Tag,
    /// Calls sent, and not yet resolved or dropped.
    calls: LiveCalls,
    /// Messages and overflow markers not yet received by the body: boxed, and absent until
    /// the first arrives, since a process that only makes calls never needs them (two empty
    /// queues inline would cost every async-fn process 64 bytes; the box, 8).
    pub(super) mail: Option<Box<Mail>>,
    /// Latched when `Cancel` arrives.
    pub(super) cancelled: Option<CancelReason>,
    /// The receives have reported the cancellation (the first to meet it does), or
    /// `cancelled()` has: they return what is queued instead.
    pub(super) cancel_reported: bool,
    /// The body has been told of the cancellation, by any future — a receive, an ask, or
    /// `cancelled()`: the asks it starts after that are cleanup, and proceed (`asking.rs`).
    pub(super) cancel_told: bool,
    pub(super) wants: Wants,
    /// Which poll of the body this is (wrapping, never 0): what a receive's `PendingMark`
    /// compares with (`pending_mark.rs`).
    pub(super) poll_mark: u32,
    /// The process's mailbox is bounded: a receive that takes the last message the body held
    /// publishes that it holds none (one lock then, not per message), so that its senders are
    /// not refused for messages it has taken. Set for each
    /// poll. Without it the count would wait for the step's end — and a step lasts past an
    /// answer it sends: the asker's next message could find the mailbox "full" of messages
    /// already handled.
    pub(super) publish_unread: bool,
}

impl CxState {
    /// Files an event where the body's futures will look for it (not during a poll: it may drop
    /// a completion). Returns the destructor panics contained (a completion no call wants).
    pub(super) fn route(&mut self, event: Event) -> u64 {
        match event {
            Event::YieldComplete { tag, result } => return self.keep(tag, result),
            Event::Message(message) => {
                let mail = self.mail();
                mail.inbox.push_back(Event::Message(message));
                mail.arrived += 1;
            }
            Event::Cancel { reason } => self.cancelled = Some(reason),
            Event::MailboxOverflow { topic } => {
                let mail = self.mail();
                mail.overflows.push_back((mail.arrived, topic));
            }
            Event::Exit(exit) => self.mail().file_signal(Signal::Exit(exit)),
            Event::Down(down) => self.mail().file_signal(Signal::Down(down)),
            // Only a re-poll was asked for.
            Event::Woken => {}
        }
        0
    }

    /// Takes the first signal `wanted` accepts (`signals.rs`). Drops nothing.
    pub(super) fn take_signal(&mut self, wanted: impl Fn(&Signal) -> bool) -> Option<Signal> {
        let signals = &mut self.mail.as_mut()?.signals;
        let at = signals.iter().position(|(_, signal)| wanted(signal))?;
        signals.remove(at).map(|(_, signal)| signal)
    }

    /// Files a step's batch of messages (two or more, nothing else among them) behind an empty
    /// inbox by taking the step's buffer whole: one exchange instead of a move per message,
    /// which `route` costs (`msgprobe async`: a fifth of the worker's instructions per message).
    /// `false`, and nothing filed, otherwise.
    pub(super) fn file_messages(&mut self, events: &mut Events) -> bool {
        let mail = self.mail();
        match events.give_messages(&mut mail.inbox) {
            Some(filed) => {
                mail.arrived += filed as u64;
                true
            }
            None => false,
        }
    }

    /// Takes the oldest signal if it arrived before every message still in the inbox (a
    /// receive of either, [`RecvAny`](super::signals::RecvAny), takes them in arrival order).
    /// Drops nothing.
    pub(super) fn take_signal_if_next(&mut self) -> Option<Signal> {
        let mail = self.mail.as_mut()?;
        let &(messages_before, _) = mail.signals.front()?;
        if messages_before > mail.taken {
            return None;
        }
        mail.signals.pop_front().map(|(_, signal)| signal)
    }

    /// Takes what waits for a receive in the inbox: an overflow marker first, then the oldest
    /// message. Drops nothing.
    pub(super) fn take_mail(&mut self) -> Option<Received> {
        let mail = self.mail.as_mut()?;
        if let Some(topic) = mail.take_overflow_if_next() {
            return Some(Received::Overflow(topic));
        }
        if mail.must_yield() {
            self.yield_receive();
            return None;
        }
        mail.pop_message().map(Received::Message)
    }

    /// A receive yields the worker with mail in the inbox ([`Mail::must_yield`]): the body
    /// runs again after the other ready work (`Continue`), and the receive then takes it.
    #[cold]
    pub(super) fn yield_receive(&mut self) {
        self.wants.yield_now = true;
        self.wants.preempted_receive = true;
    }

    /// `true` if no message waits in the inbox (the step may hand a lone message straight to
    /// the next receive: it is next in line).
    #[inline]
    pub(super) fn inbox_is_empty(&self) -> bool {
        self.mail.as_ref().is_none_or(|mail| mail.inbox.is_empty())
    }

    /// Messages in the inbox: filed by a step, not yet received by the body
    /// ([`Process::unread_messages`](crate::process::Process::unread_messages)).
    pub(super) fn unread(&self) -> usize {
        self.mail.as_ref().map_or(0, |mail| mail.inbox.len())
    }

    /// What the body holds unread — messages in its inbox, signals in its queue — if it
    /// changed since the last call (for `process_info`: `CellStats::set_held`). Without mail
    /// (a body that never kept any) it holds none, and nothing was published.
    #[inline]
    pub(super) fn held_changed(&mut self) -> Option<(u32, u32)> {
        let mail = self.mail.as_mut()?;
        let held = (saturate(mail.inbox.len()), saturate(mail.signals.len()));
        (held != mail.published).then(|| {
            mail.published = held;
            held
        })
    }

    fn mail(&mut self) -> &mut Mail {
        self.mail.get_or_insert_with(Box::default)
    }

    /// Keeps call `tag`'s completion for a later poll, or drops it if the call is gone (not
    /// during a poll).
    pub(super) fn keep(&mut self, tag: Tag, completion: Completion) -> u64 {
        // A call dropped before its completion is no longer live: the result is dropped.
        match self.calls.keep(tag, completion) {
            Ok(()) => 0,
            Err(unwanted) => drop_contained(unwanted),
        }
    }

    /// A new call: its tag, live from now on.
    #[inline]
    pub(super) fn start_call(&mut self) -> Tag {
        // Tag 0 means "no call" to `LiveCalls`: skipped when the counter wraps.
        self.next_tag = self.next_tag.wrapping_add(1).max(1);
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
            _ => self.calls.take_kept(tag),
        }?;
        self.calls.remove(tag);
        Some(completion)
    }

    /// `true` if live call `tag` is waiting for its completion: none arrived for this poll
    /// (`arrived`) or is kept from an earlier one.
    pub(super) fn awaits_completion(&self, arrived: &Arrived, tag: Tag) -> bool {
        self.calls.contains(tag)
            && !matches!(arrived, Some((t, _)) if *t == tag)
            && !self.calls.has_kept(tag)
    }

    /// The call future was dropped: it is no longer live. A completion already kept for it
    /// stays until [`purge_forgotten`](Self::purge_forgotten); one arriving later is dropped by
    /// [`keep`](Self::keep). Drops nothing.
    #[inline]
    pub(super) fn forget_call(&mut self, tag: Tag) {
        self.calls.remove(tag);
    }

    /// A call dropped before its completion came (`Call`'s drop): its handler task is to be
    /// aborted after the poll ([`move_dropped_calls`](Self::move_dropped_calls)).
    pub(super) fn note_dropped_call(&mut self, tag: Tag) {
        self.calls.note_dropped(tag);
    }

    /// After a poll: the calls it dropped, into `into` (the step's output), for the process
    /// future to abort their handler tasks.
    #[inline]
    pub(super) fn move_dropped_calls(&mut self, into: &mut Vec<Tag>) {
        self.calls.move_dropped(into);
    }

    /// Drops the kept completions of the calls the poll dropped, and the kept wakers of the
    /// calls that stopped being live in it (after a poll); returns the destructor panics
    /// contained.
    #[inline]
    pub(super) fn purge_forgotten(&mut self) -> u64 {
        self.calls.purge_forgotten()
    }

    /// `true` while some live call has not completed (between polls: after
    /// [`purge_forgotten`](Self::purge_forgotten), and with what the poll left kept).
    #[inline]
    pub(super) fn has_outstanding_calls(&self) -> bool {
        self.calls.has_outstanding()
    }
}

impl CxState {
    /// Receives polled with a waker not the body's wait for mail ("Futures polled with their
    /// own waker"): keeps a clone (once per waker).
    #[cold]
    #[inline(never)]
    pub(super) fn wait_for_mail_with(&mut self, waker: &Waker) {
        let mail = self.mail();
        mail.registered = mail.registered.wrapping_add(1);
        let wakers = &mut mail.wakers;
        if !wakers.iter().any(|kept| kept.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }

    /// Call `tag`, polled with a waker not the body's, waits for its completion: keeps a clone
    /// (of the latest one polled it), and returns the one it replaced, for the caller to drop
    /// outside the scope (a waker's destructor is user code).
    #[cold]
    #[inline(never)]
    #[must_use]
    pub(super) fn wait_for_call_with(&mut self, tag: Tag, waker: &Waker) -> Option<Waker> {
        self.calls.wait_with(tag, waker)
    }

    /// `true` if some future waits with a waker of its own (a cheap look before
    /// [`ready_foreign`](Self::ready_foreign)).
    #[inline]
    pub(super) fn has_foreign_waiters(&self) -> bool {
        self.calls.has_waiters() || self.has_mail_waiters()
    }

    /// `true` if a receive polled with a waker of its own waits for mail (the body is `Idle`
    /// even in a poll that did not reach it).
    pub(super) fn has_mail_waiters(&self) -> bool {
        self.mail
            .as_ref()
            .is_some_and(|mail| !mail.wakers.is_empty())
    }

    /// A mark of the mail filed so far — messages, overflow markers, signals — to tell whether a
    /// step's routing filed any (it only adds: the marks before and after differ iff it did).
    pub(super) fn mail_mark(&self) -> (u64, usize) {
        self.mail.as_ref().map_or((0, 0), |mail| {
            (mail.arrived, mail.overflows.len() + mail.signals.len())
        })
    }

    /// Takes the wakers of the futures whose wait is over, for the step to wake before it polls
    /// the body: calls whose completion is here (`arrived`, or kept), or all of them if the
    /// process was asked to finish in this step (`cancel_arrived`: an ask gives up); receives,
    /// if mail, a signal or a cancellation arrived in this step (`mail_arrived`) — only new
    /// mail: a receive that waits looked at what was there, and one that waits beside mail it
    /// does not take (a `recv_down` beside a message) would otherwise be woken step after
    /// step, each wake a step more. Only the calls whose completion came are visited, not
    /// every call that waits (`live_calls.rs`).
    #[cold]
    #[inline(never)]
    pub(super) fn ready_foreign(
        &mut self,
        arrived: &Arrived,
        mail_arrived: bool,
        cancel_arrived: bool,
    ) -> Vec<Waker> {
        let mut ready = Vec::new();
        let arrived = arrived.as_ref().map(|(tag, _)| *tag);
        self.calls.take_ready(arrived, cancel_arrived, &mut ready);
        if let Some(mail) = &mut self.mail {
            if let Some(registered) = mail.measuring.take() {
                // The receives that registered again in the poll after the last take: live.
                mail.flush_at = mail
                    .registered
                    .wrapping_sub(registered)
                    .saturating_mul(2)
                    .max(MAIL_WAKERS_FLUSH);
            }
            // A long list is woken too: its receives may have been dropped with their
            // combinators (a set made per loop turn) — the live ones register again.
            let mail_waits =
                mail_arrived || mail.wakers.len() >= mail.flush_at.max(MAIL_WAKERS_FLUSH);
            if mail_waits && !mail.wakers.is_empty() {
                ready.append(&mut mail.wakers);
                mail.measuring = Some(mail.registered);
            }
        }
        ready
    }
}

impl Drop for CxState {
    /// The inbox is user values: one at a time, each contained (the kept completions are
    /// dropped likewise by `LiveCalls`).
    fn drop(&mut self) {
        if let Some(mail) = self.mail.take() {
            // What the body never received: dropped after the process's outcome is published
            // when the process future is the one dropping us (`contain.rs`, "After the
            // outcome"), else now. An exit reason may hold a user's error.
            // The count is the thread's (`contain.rs`): whoever drops us reads it.
            drop_later(mail.inbox);
            drop_later(mail.signals.into_iter().map(|(_, signal)| signal));
        }
    }
}

/// What arrived for the body's `recv`s.
#[derive(Debug, Default)]
pub(super) struct Mail {
    /// Messages not yet received by the body: only `Event::Message`s, held as events so that a
    /// step's batch of them is filed by exchanging buffers ([`CxState::file_messages`]).
    pub(super) inbox: VecDeque<Event>,
    /// Topics whose overflow marker the body has not yet received, each with the number of
    /// messages that arrived before it: reported in arrival order, after those (a topic's
    /// marker is the last of its traffic until its budget starts afresh), as signals are.
    pub(super) overflows: VecDeque<(u64, Topic)>,
    /// Exit signals (when trapping) and monitors' `Down`s not yet received (`signals.rs`),
    /// each with the number of messages that arrived before it: a signal is next in arrival
    /// order once that many have been taken (`taken`).
    pub(super) signals: VecDeque<(u64, Signal)>,
    /// Messages filed in the inbox, ever.
    arrived: u64,
    /// Messages taken from the inbox, ever.
    taken: u64,
    /// The wakers of receives polled with a waker not the body's ("Futures polled with their
    /// own waker").
    wakers: Vec<Waker>,
    /// Registrations into `wakers`, ever (wrapping is harmless: only differences are read).
    registered: usize,
    /// Set when `wakers` were taken: `registered` then, to count the live receives
    /// that register again before the next step.
    measuring: Option<usize>,
    /// The length at which `wakers` are woken without mail ([`MAIL_WAKERS_FLUSH`]; 0 until the
    /// first measure).
    flush_at: usize,
    /// What `process_info` was last told the body holds: inbox, signals
    /// ([`CxState::held_changed`]).
    published: (u32, u32),
}

/// Receives from the inbox between two looks at the executor's preemption request
/// ([`Mail::must_yield`]): a power of two, so the look costs a mask and a compare per message.
const PREEMPT_CHECK_EVERY: u64 = 16;

impl Mail {
    /// `true` if the next receive from the inbox should yield the worker instead: the
    /// executor's monitor saw the poll running this body last a tick or more (`executor/
    /// monitor.rs`, "Preemption request"). The process future looks at the request between two
    /// steps; this looks inside one, between two receives: a step's batch may hold up to
    /// `max_batch` messages, and a body doing CPU work per message (300 µs, 64 of them)
    /// otherwise held its worker for the whole batch while the processes queued behind it
    /// waited. Looked at before every [`PREEMPT_CHECK_EVERY`]th message taken from the inbox
    /// (never for a step's lone message: a message hop never looks).
    #[inline(always)]
    pub(super) fn must_yield(&self) -> bool {
        self.taken % PREEMPT_CHECK_EVERY == PREEMPT_CHECK_EVERY - 1
            && !self.inbox.is_empty()
            && preempt_requested()
    }

    /// Takes the oldest overflow marker if every message that arrived before it has been
    /// taken.
    #[inline(always)]
    pub(super) fn take_overflow_if_next(&mut self) -> Option<Topic> {
        let &(messages_before, _) = self.overflows.front()?;
        if messages_before > self.taken {
            return None;
        }
        self.overflows.pop_front().map(|(_, topic)| topic)
    }

    fn file_signal(&mut self, signal: Signal) {
        self.signals.push_back((self.arrived, signal));
    }

    /// The oldest message in the inbox. Inlined into the receive: out of line, its result came
    /// back through memory, written in pieces and read back whole (a store-forwarding stall on
    /// every message a body receives from its inbox).
    #[inline(always)]
    pub(super) fn pop_message(&mut self) -> Option<Message> {
        let Event::Message(message) = self.inbox.pop_front()? else {
            unreachable!("the inbox holds only messages (`Mail::inbox`)")
        };
        self.taken += 1;
        Some(message)
    }
}

/// [`crate::executor::yield_requested`], out of the receive's inlined path.
#[cold]
#[inline(never)]
fn preempt_requested() -> bool {
    crate::executor::yield_requested()
}

/// What waits in the inbox for a receive.
#[derive(Debug)]
pub(super) enum Received {
    /// A topic's overflow marker.
    Overflow(Topic),
    /// A message.
    Message(Message),
}
