//! The consumer's side of the mailbox: the worker stepping the process moves a batch out (the
//! locked queue first, then the intake queue: `intake.rs`, protocol 7 step 4) and puts back
//! what its poll could not step.

use super::intake::Stale;
#[cfg(all(test, not(loom)))]
use super::Generation;
use super::{Drained, Inner, Mailbox};
use crate::loom::lock;
use crate::process::{Event, Events};
use std::task::Waker;

impl Mailbox {
    /// Moves up to `max` queued events into `events`. The first drain of a poll also registers
    /// the task's waker (cheap when unchanged), in the same critical section: the waker is only
    /// needed once the process parks, which happens after this drain.
    pub(crate) fn drain_into(
        &self,
        events: &mut Events,
        max: usize,
        waker: Option<&Waker>,
    ) -> Drained {
        // Declared before the guard, so dropped after the unlock (`intake.rs`, protocol 7 step 4).
        let mut stale = Stale::default();
        let mut inner = lock(&self.inner);
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
            let depth = inner.events.len() + self.intake.len();
            inner.max_depth = inner.max_depth.max(depth);
        }
        let bounded = self.capacity != usize::MAX || inner.topics.is_some();
        let before = events.len();
        let mut more = events.take_from(&mut inner.events, max);
        if bounded {
            // Bounded mailbox: give back what the moved events used. (The intake queue holds
            // none of those: only unbudgeted messages to an unbounded mailbox take it.)
            for event in events.iter().skip(before) {
                inner.release(event);
            }
        }
        if !more && intake_waiting {
            // The intake queue's events come after the locked queue's (protocol 7, step 4).
            let room = max - (events.len() - before);
            more = self.take_from_intake(events, room, &mut stale);
        }
        if more {
            Drained::More
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
        let mut inner = lock(&self.inner);
        events.move_in_front_of(&mut inner.events);
    }

    /// Protocol 7 of `intake.rs`, step 4, under the lock: moves the intake queue's events behind
    /// the locked queue's, setting stale ones aside for `stale` to drop after the unlock.
    pub(super) fn move_intake_into_queue(&self, inner: &mut Inner, stale: &mut Stale) {
        if self.intake.is_empty() {
            return;
        }
        let (generation, _) = self.gate.load();
        while let Some(event) = self.intake.pop_current(generation, stale) {
            // Counted like a message queued under the lock: the drain gives it back.
            inner.queued_messages += usize::from(matches!(event, Event::Message(_)));
            let depth = inner.events.push_back(event);
            inner.max_depth = inner.max_depth.max(depth);
        }
    }

    /// Protocol 7 of `intake.rs`, step 4, under the lock: moves up to `room` of the intake
    /// queue's events into `events`, setting stale ones aside. `true` if some are left.
    fn take_from_intake(&self, events: &mut Events, room: usize, stale: &mut Stale) -> bool {
        let (generation, _) = self.gate.load();
        for _ in 0..room {
            match self.intake.pop_current(generation, stale) {
                Some(event) => events.push(event),
                None => return false,
            }
        }
        !self.intake.is_empty()
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
                intake.push((generation, event));
                Ok(())
            }
            None => Err(event),
        }
    }

    /// `true` if events are waiting.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn has_events(&self) -> bool {
        !lock(&self.inner).events.is_empty() || !self.intake.is_empty()
    }

    /// The topic-budget map's `(len, capacity)`: what the budgets keep allocated.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn topic_entries(&self) -> (usize, usize) {
        let inner = lock(&self.inner);
        inner
            .topics
            .as_ref()
            .map_or((0, 0), |topics| (topics.len(), topics.capacity()))
    }

    /// The event queue's capacity: what a past flood keeps allocated.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn event_capacity(&self) -> usize {
        lock(&self.inner).events.capacity()
    }
}
