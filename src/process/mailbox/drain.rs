//! The consumer's side of the mailbox: the worker stepping the process moves a batch out (the
//! locked queue first, then the intake queue, then what a diversion set behind it: `intake.rs`,
//! protocol 7 step 4) and puts back what its poll could not step. No consumer ever waits for a
//! sender here: a slot a sender claimed and has not written yet is left for a later drain.

use super::intake::{Next, Stale};
#[cfg(all(test, not(loom)))]
use super::Generation;
use super::{Drained, Inner, Mailbox};
use crate::process::stats::CellStats;
use crate::process::{Event, Events};
use std::task::Waker;

/// The most intake events one locked push moves into the locked queue before it starts a
/// diversion instead (`intake.rs`, protocol 7 step 4: "Each sender's messages stay in order").
///
/// Why a bound: the move runs under the mailbox lock and in the pushing thread, so without one
/// a single locked push paid for the whole backlog — a `Cancel` into a mailbox flooded with
/// 16 million messages took 6.7 s (and 1 M: 112 ms), and a shutdown, which delivers every
/// process's `Cancel` from one thread, overran its grace period by as much. Bounded, a push
/// costs at most this many moves; the rest stays in the intake queue for the consumer, and
/// the push goes behind it, as behind an unwritten slot. (One under loom, so that its models
/// reach the bound with two events.)
#[cfg(not(loom))]
pub(crate) const SETTLE_AT_MOST: usize = 256;
#[cfg(loom)]
pub(crate) const SETTLE_AT_MOST: usize = 1;

/// Where a consumer's pass over the intake queue stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IntakeEnd {
    /// Every event in it was taken: nothing is claimed.
    Empty,
    /// Its oldest slot is claimed and not written: the rest waits behind it.
    Unwritten,
    /// The batch was full: events are left.
    Full,
}

impl Mailbox {
    /// Moves up to `max` queued events into `events`. The first drain of a poll also registers
    /// the task's waker (cheap when unchanged), in the same critical section: the waker is only
    /// needed once the process parks, which happens after this drain. Stale intake events'
    /// destructor panics are counted in `stats`.
    pub(crate) fn drain_into(
        &self,
        events: &mut Events,
        max: usize,
        waker: Option<&Waker>,
        stats: &CellStats,
        unread: Option<&mut usize>,
    ) -> Drained {
        // Declared before the guard, so dropped after the unlock (`intake.rs`, protocol 7 step 4).
        let mut stale = Stale::new(stats);
        let mut inner = self.inner.lock();
        if let Some(waker) = waker {
            match &inner.waker {
                Some(current) if current.will_wake(waker) => {}
                _ => inner.waker = Some(waker.clone()),
            }
        }
        if inner.terminate {
            return Drained::Terminate;
        }
        let intake_waiting = !self.intake.is_empty();
        if intake_waiting {
            // Everything queued now is the most this mailbox has held since the last drain.
            self.depth_seen(&mut inner);
        }
        let bounded = self.capacity() != usize::MAX;
        let counted = bounded || inner.topics.is_some();
        let used = if bounded { inner.used() } else { 0 };
        let before = events.len();
        let mut more = events.take_from(&mut inner.events, max);
        let mut unwritten = false;
        if !more && (intake_waiting || !inner.behind.is_empty()) {
            // The intake queue's events come after the locked queue's, and a diversion's after
            // both (protocol 7, step 4).
            let room = max - (events.len() - before);
            let end = if intake_waiting {
                self.take_from_intake(events, room, &mut stale)
            } else {
                IntakeEnd::Empty
            };
            more = match end {
                IntakeEnd::Full => true,
                // Nothing behind the unwritten slot can be taken until it is written.
                IntakeEnd::Unwritten => {
                    unwritten = true;
                    false
                }
                IntakeEnd::Empty => {
                    let room = max - (events.len() - before);
                    self.take_diverted(&mut inner, events, room)
                }
            };
        }
        if inner.abandoned.is_some() {
            inner.forget_answered(events.iter().skip(before));
        }
        let mut moved_messages = 0;
        if counted {
            // Give back what the moved events used: the capacity, their topics' budgets.
            for event in events.iter().skip(before) {
                moved_messages += usize::from(matches!(event, Event::Message(_)));
                inner.release(event, bounded);
            }
        }
        if let (Some(unread), true) = (unread, bounded) {
            // The moved messages leave the queue for the process, which may hold them unread:
            // they count until it says it has handled them (`ProcessCell::set_unread`).
            *unread += moved_messages;
            inner.unread = super::saturate(*unread);
        }
        // Room made: the senders waiting for it try again (`room.rs`, protocol 12 step 2).
        let to_wake = if bounded {
            inner.room_made(used, self.capacity())
        } else {
            super::room::ToWake::None
        };
        drop(inner);
        self.wake_room(to_wake);
        if more {
            Drained::More
        } else if unwritten {
            Drained::Unwritten
        } else {
            Drained::All
        }
    }

    /// Puts `events` — inline completions a poll could not step before its budget ran out —
    /// back at the front of the queue, for the next poll (`future.rs`, "Buffers"). Only the
    /// poller calls this, while `Running`: no wake, no admission (completions are never
    /// counted against the capacity), and a `close` in between drops them with the rest.
    pub(crate) fn carry_over(&self, events: &mut Events) {
        debug_assert!(events
            .iter()
            .all(|e| matches!(e, Event::YieldComplete { .. })));
        let mut inner = self.inner.lock();
        events.move_in_front_of(&mut inner.events);
    }

    /// Protocol 7 of `intake.rs`, step 4, under the lock: moves the intake queue's events behind
    /// the locked queue's, setting stale ones aside for `stale` to drop after the unlock, and
    /// then — if it emptied and a diversion is on — the diverted events, ending the diversion.
    /// Stops at an unwritten slot, or once it has moved `at_most` events with more left (a
    /// push: [`SETTLE_AT_MOST`]; `close`, which takes everything: `usize::MAX`): returns
    /// `false` then, with a diversion on, and the caller's event must go behind
    /// (`Inner::behind`).
    pub(super) fn settle_intake(
        &self,
        inner: &mut Inner,
        stale: &mut Stale<'_>,
        at_most: usize,
    ) -> bool {
        if !self.intake.is_empty() {
            let (generation, _) = self.gate.load();
            let mut moved = 0;
            loop {
                if moved == at_most {
                    if self.intake.is_empty() {
                        break;
                    }
                    if !self.gate.is_diverted() {
                        self.gate.set_diverted(true);
                    }
                    return false;
                }
                moved += 1;
                match self.intake.pop_current(generation, stale) {
                    Next::Event(event) => {
                        // Counted like a message queued under the lock: the drain gives it back.
                        inner.queued_messages += usize::from(matches!(event, Event::Message(_)));
                        let depth = inner.events.push_back(event);
                        inner.max_depth = inner.max_depth.max(depth);
                    }
                    Next::Empty => break,
                    Next::Unwritten => {
                        if !self.gate.is_diverted() {
                            self.gate.set_diverted(true);
                        }
                        return false;
                    }
                }
            }
        }
        if self.gate.is_diverted() {
            // Every event the diversion set aside was pushed after everything queued so far.
            while let Some(event) = inner.behind.pop_front() {
                inner.events.push_back(event);
            }
            self.gate.set_diverted(false);
        }
        true
    }

    /// Protocol 7 of `intake.rs`, step 4, under the lock: moves up to `room` of the intake
    /// queue's events into `events`, setting stale ones aside. Never waits for a slot's value.
    fn take_from_intake(
        &self,
        events: &mut Events,
        room: usize,
        stale: &mut Stale<'_>,
    ) -> IntakeEnd {
        let (generation, _) = self.gate.load();
        for _ in 0..room {
            match self.intake.pop_current(generation, stale) {
                Next::Event(event) => events.push(event),
                Next::Empty => return IntakeEnd::Empty,
                Next::Unwritten => return IntakeEnd::Unwritten,
            }
        }
        if self.intake.is_empty() {
            IntakeEnd::Empty
        } else {
            IntakeEnd::Full
        }
    }

    /// After the intake queue emptied: up to `room` events a diversion set behind it, ending
    /// the diversion once they are all taken. `true` if some are left.
    fn take_diverted(&self, inner: &mut Inner, events: &mut Events, room: usize) -> bool {
        if inner.behind.is_empty() {
            return false;
        }
        if room == 0 {
            return true;
        }
        let more = events.take_from(&mut inner.behind, room);
        if !more && self.gate.is_diverted() {
            self.gate.set_diverted(false);
        }
        more
    }

    /// The intake queue's length, or `None` while none is installed (tests of `intake.rs`).
    #[cfg(test)]
    pub(crate) fn intake_len(&self) -> Option<usize> {
        self.intake.is_installed().then(|| self.intake.len())
    }

    /// Pushes into the intake queue as a sender does after reading the gate (protocol 7, step
    /// 2), with no check of its own: a model of a sender that read an open gate just before
    /// `close`.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn push_to_intake(&self, generation: Generation, event: Event) -> Result<(), Event> {
        match self.intake.installed() {
            Some(intake) => {
                let Event::Message(message) = event else {
                    panic!("only messages take the intake queue");
                };
                intake.push(super::intake::Stamped::new(generation, message));
                Ok(())
            }
            None => Err(event),
        }
    }

    /// A slot of the intake queue claimed and not written, to write later: a sender preempted
    /// between its claim and its write (protocol 8), on demand. `None` without an intake queue.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn claim_intake_slot(
        &self,
    ) -> Option<super::blocks::Claim<'_, super::intake::Stamped>> {
        Some(self.intake.installed()?.claim_for_test())
    }

    /// `true` if events are waiting.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn has_events(&self) -> bool {
        let inner = self.inner.lock();
        !inner.events.is_empty() || !inner.behind.is_empty() || !self.intake.is_empty()
    }

    /// `true` while a diversion is on (tests of `intake.rs`).
    #[cfg(test)]
    pub(crate) fn is_diverted(&self) -> bool {
        let _inner = self.inner.lock();
        self.gate.is_diverted()
    }

    /// The topic-budget map's `(len, capacity)`: what the budgets keep allocated.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn topic_entries(&self) -> (usize, usize) {
        let inner = self.inner.lock();
        inner
            .topics
            .as_ref()
            .map_or((0, 0), |topics| (topics.len(), topics.capacity()))
    }

    /// The event queue's capacity: what a past flood keeps allocated.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn event_capacity(&self) -> usize {
        self.inner.lock().events.capacity()
    }
}
