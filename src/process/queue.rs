//! The event queue of a mailbox and of a step's [`Events`](super::Events): the first event inline, a buffer
//! only for a backlog.
//!
//! Most mailboxes (and most steps) hold at most one event at a time: a message to an idle process, the
//! completion of the one yield a process waits on. A plain `VecDeque` allocates at its first
//! push, and the first push comes from the *producer's* thread — a sender outside the scheduler,
//! a tokio handler — while the buffer moves on to (and is eventually freed by) a worker. Under
//! glibc that pairs every first message with a malloc in the sender's arena and a free that
//! takes that arena's lock from a worker: `probe send_from_thread` measured 0.7–0.9 µs for a
//! first message against 0.2–0.3 µs for later ones (the process bench's growth table: 0.7–2.5 µs
//! against tokio's 0.12–0.17). So one event lives inline in the cell, and a buffer is allocated
//! only when a second event queues behind it. The step's `Events` is the same queue: the worker
//! moving a lone event into it would otherwise allocate a buffer for every process that ever
//! received one (a million idle processes pinged once: 400 MB, and a malloc each).
//!
//! A buffer, once allocated, stays (empty) until the process finishes: a process that gets
//! bursts keeps the allocation it needs, and `close` resets the queue to inline, so a flood to
//! one process never stays allocated in the pooled cell for the next.
//!
//! # Buffers on a worker
//! A poll moves a whole backlog into its (empty) step events by swapping buffers. The step
//! events belong to the poll, so the buffer would be freed when the poll ends, and the
//! mailbox — left without one — would allocate again, on the sender, at its next backlog: a
//! malloc/free pair per burst, across threads. Instead each thread keeps one spare buffer: a
//! poll ends by parking its step events' empty buffer there ([`Queue::release_buffer`]), and a
//! mailbox that gave its buffer away takes the spare in exchange. A steady sender and its
//! receiver then trade the same two buffers for ever.

use super::{drop_each, CommandError, Event, Payload, Tag};
use std::cell::Cell;
use std::collections::VecDeque;

/// Most events a thread's spare buffer may hold room for: a larger one (a past flood) is freed
/// rather than kept.
const SPARE_MAX: usize = 256;

std::thread_local! {
    /// A spare buffer per thread (module docs, "Buffers on a worker").
    static SPARE: Cell<VecDeque<Event>> = const { Cell::new(VecDeque::new()) };
}

/// A FIFO of events (module docs). Oldest first in both forms. Dropped with events left in
/// it, it drops them one at a time, each destructor's panic contained (`contain.rs`).
#[derive(Debug)]
pub(crate) enum Queue {
    /// No event, or one: no allocation.
    Inline(Option<Event>),
    /// Any number of events in a buffer (allocated when a second event queued).
    Spilled(VecDeque<Event>),
}

impl Default for Queue {
    fn default() -> Queue {
        Queue::Inline(None)
    }
}

impl Drop for Queue {
    #[inline]
    fn drop(&mut self) {
        if !self.is_empty() {
            drop_each(self.take());
        }
    }
}

impl Queue {
    /// Number of queued events.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            Queue::Inline(slot) => usize::from(slot.is_some()),
            Queue::Spilled(buffer) => buffer.len(),
        }
    }

    /// `true` if no event is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Queue::Inline(slot) => slot.is_none(),
            Queue::Spilled(buffer) => buffer.is_empty(),
        }
    }

    /// `true` if it holds no event and no buffer: nothing to take, nothing to free.
    #[inline]
    pub(crate) fn is_inline_empty(&self) -> bool {
        matches!(self, Queue::Inline(None))
    }

    /// The newest event.
    pub(crate) fn back(&self) -> Option<&Event> {
        match self {
            Queue::Inline(slot) => slot.as_ref(),
            Queue::Spilled(buffer) => buffer.back(),
        }
    }

    /// Queues `event` behind the others and returns how many are queued now; allocates only
    /// when it is the second event and no buffer exists yet.
    #[inline]
    pub(crate) fn push_back(&mut self, event: Event) -> usize {
        match self {
            Queue::Inline(slot @ None) => {
                *slot = Some(event);
                1
            }
            Queue::Inline(Some(_)) => {
                self.spill(event);
                2
            }
            Queue::Spilled(buffer) => {
                buffer.push_back(event);
                buffer.len()
            }
        }
    }

    /// Queues a yield's completion, as `push_back(Event::YieldComplete { tag, result })`, but
    /// builds the event in its slot: the inline handler's hot path. Built on the stack and then
    /// copied (what `push_back` compiles to), the 80-byte event is written in 8-byte pieces and
    /// read back in 16-byte ones, a store-forwarding stall per yield (perf on the process
    /// bench's `many_yields`: a quarter of the inline handler's samples).
    #[inline(always)]
    pub(crate) fn push_completion(&mut self, tag: Tag, result: Result<Payload, CommandError>) {
        match self {
            Queue::Inline(slot @ None) => {
                *slot = Some(Event::YieldComplete { tag, result });
            }
            _ => {
                self.push_back(Event::YieldComplete { tag, result });
            }
        }
    }

    /// A second event behind the inline one: move both into a buffer.
    #[cold]
    #[inline(never)]
    fn spill(&mut self, event: Event) {
        let mut buffer = VecDeque::with_capacity(4);
        if let Queue::Inline(slot) = self {
            buffer.extend(slot.take());
        }
        buffer.push_back(event);
        *self = Queue::Spilled(buffer);
    }

    /// Takes the oldest event.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<Event> {
        match self {
            Queue::Inline(slot) => slot.take(),
            Queue::Spilled(buffer) => buffer.pop_front(),
        }
    }

    /// Removes the oldest event `matches` accepts (a demonitor's queued `Down`), for the caller
    /// to drop (outside its lock).
    pub(crate) fn remove_first(&mut self, matches: impl Fn(&Event) -> bool) -> Option<Event> {
        match self {
            Queue::Inline(slot) => {
                if slot.as_ref().is_some_and(&matches) {
                    slot.take()
                } else {
                    None
                }
            }
            Queue::Spilled(buffer) => {
                let at = buffer.iter().position(matches)?;
                buffer.remove(at)
            }
        }
    }

    /// The events, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Event> + '_ {
        let (first, rest) = match self {
            Queue::Inline(slot) => (slot.as_ref(), None),
            Queue::Spilled(buffer) => (None, Some(buffer.iter())),
        };
        first.into_iter().chain(rest.into_iter().flatten())
    }

    /// Moves up to `max` events (`max > 0`), oldest first, to the back of `dest`. Returns
    /// `true` if events are left behind.
    #[inline]
    pub(crate) fn move_into(&mut self, dest: &mut Queue, max: usize) -> bool {
        match self {
            Queue::Inline(slot) => {
                if let Queue::Inline(empty @ None) = dest {
                    // Slot to slot. `take` then `push_back` copies the event through a stack
                    // temporary that `take` writes in pieces offset from the 16-byte loads
                    // `push_back` reads it with: a store-forwarding stall on every drain of a
                    // lone message (perf on the process bench's `ring`: a third of
                    // `drain_into`'s samples, on the first of those loads).
                    *empty = slot.take();
                } else if let Some(event) = slot.take() {
                    dest.push_back(event);
                }
                false
            }
            Queue::Spilled(buffer) => {
                if dest.is_empty() && buffer.len() <= max {
                    // A whole backlog into an empty queue: swap, no event moved one by one.
                    std::mem::swap(self, dest);
                    if matches!(self, Queue::Inline(_)) {
                        self.adopt_spare();
                    }
                    false
                } else {
                    for event in buffer.drain(..buffer.len().min(max)) {
                        dest.push_back(event);
                    }
                    !buffer.is_empty()
                }
            }
        }
    }

    /// Takes this thread's spare buffer, if it has one (module docs, "Buffers on a worker").
    fn adopt_spare(&mut self) {
        let spare = SPARE.try_with(Cell::take).unwrap_or_default();
        if spare.capacity() > 0 {
            *self = Queue::Spilled(spare);
        }
    }

    /// Parks this queue's buffer, if it has an empty one of a reasonable size, as the thread's
    /// spare (module docs, "Buffers on a worker"); the queue is left inline.
    #[inline]
    pub(crate) fn release_buffer(&mut self) {
        if let Queue::Spilled(buffer) = self {
            if buffer.is_empty() {
                let buffer = std::mem::take(buffer);
                *self = Queue::Inline(None);
                if buffer.capacity() <= SPARE_MAX {
                    // Whatever spare the thread had is freed.
                    let _ = SPARE.try_with(|spare| spare.set(buffer));
                }
            }
        }
    }

    /// Hands every event to `into` by exchanging buffers, if `into` is empty, this queue holds
    /// its events in a buffer no larger than a spare may be ([`SPARE_MAX`]: a buffer grown by
    /// a past flood would stay with `into`'s owner) and `all` accepts each of them; returns how
    /// many moved. The buffer `into` gave back stays here for
    /// [`release_buffer`](Self::release_buffer) to park — unless it never allocated, since
    /// parking it would free the thread's spare.
    #[inline]
    pub(crate) fn give_buffer_if_all(
        &mut self,
        into: &mut VecDeque<Event>,
        all: impl Fn(&Event) -> bool,
    ) -> Option<usize> {
        let Queue::Spilled(buffer) = self else {
            return None;
        };
        if !into.is_empty() || buffer.capacity() > SPARE_MAX || !buffer.iter().all(all) {
            return None;
        }
        std::mem::swap(buffer, into);
        if buffer.capacity() == 0 {
            *self = Queue::Inline(None);
        }
        Some(into.len())
    }

    /// Moves every event of `front` ahead of this queue's, in their order.
    pub(crate) fn prepend(&mut self, front: &mut Queue) {
        if self.is_empty() {
            std::mem::swap(self, front);
            return;
        }
        while let Some(event) = front.pop_back() {
            self.push_front(event);
        }
    }

    fn pop_back(&mut self) -> Option<Event> {
        match self {
            Queue::Inline(slot) => slot.take(),
            Queue::Spilled(buffer) => buffer.pop_back(),
        }
    }

    fn push_front(&mut self, event: Event) {
        match self {
            Queue::Inline(slot @ None) => *slot = Some(event),
            Queue::Inline(Some(_)) => {
                self.spill(event);
                if let Queue::Spilled(buffer) = self {
                    // `spill` queued it behind the inline one.
                    buffer.rotate_right(1);
                }
            }
            Queue::Spilled(buffer) => buffer.push_front(event),
        }
    }

    /// Empties the queue, dropping any buffer: the events, for the caller to drop.
    pub(crate) fn take(&mut self) -> impl Iterator<Item = Event> {
        let (first, rest) = match self {
            Queue::Inline(slot) => (slot.take(), VecDeque::new()),
            Queue::Spilled(buffer) => (None, std::mem::take(buffer)),
        };
        *self = Queue::Inline(None);
        first.into_iter().chain(rest)
    }

    /// The events, for the caller to drop (each contained: `contain.rs`).
    pub(crate) fn into_events(mut self) -> impl Iterator<Item = Event> {
        self.take()
    }

    /// Events the queue can hold without allocating.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn capacity(&self) -> usize {
        match self {
            Queue::Inline(_) => 1,
            Queue::Spilled(buffer) => buffer.capacity(),
        }
    }

    /// `source.move_into(self, usize::MAX)`.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn take_from_for_test(&mut self, source: &mut Queue) {
        assert!(!source.move_into(self, usize::MAX));
    }

    /// `true` while no buffer is allocated.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn is_inline(&self) -> bool {
        matches!(self, Queue::Inline(_))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn message(n: u64) -> Event {
        Event::Message(super::super::Message::new("n", Payload::new(n)))
    }

    #[test]
    fn a_buffer_of_messages_is_given_whole_unless_grown_past_a_spare_or_mixed() {
        let mut queue = Queue::default();
        for n in 0..3 {
            queue.push_back(message(n));
        }
        let is_message = |event: &Event| matches!(event, Event::Message(_));
        let mut inbox = std::collections::VecDeque::new();
        assert_eq!(queue.give_buffer_if_all(&mut inbox, is_message), Some(3));
        assert!(queue.is_empty() && inbox.len() == 3);
        // `into` not empty: refused.
        queue.push_back(message(3));
        queue.push_back(message(4));
        assert_eq!(queue.give_buffer_if_all(&mut inbox, is_message), None);
        inbox.clear();
        // Not all messages: refused, nothing moved.
        queue.push_back(Event::Woken);
        assert_eq!(queue.give_buffer_if_all(&mut inbox, is_message), None);
        assert_eq!(queue.len(), 3);
        // A buffer grown past what a spare may hold stays where it is.
        let mut flooded = Queue::default();
        for n in 0..(SPARE_MAX as u64 + 1) {
            flooded.push_back(message(n));
        }
        while flooded.len() > 2 {
            drop(flooded.pop_front());
        }
        assert_eq!(flooded.give_buffer_if_all(&mut inbox, is_message), None);
        assert!(inbox.is_empty());
    }

    fn drained(queue: &mut Queue) -> Vec<u64> {
        std::iter::from_fn(|| queue.pop_front())
            .map(|e| match e {
                Event::YieldComplete { tag, .. } => tag,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    fn completion(tag: u64) -> Event {
        Event::YieldComplete {
            tag,
            result: Err(CommandError::TimedOut),
        }
    }

    #[test]
    fn one_event_stays_inline_and_costs_no_more_than_a_buffer_handle_plus_an_event() {
        let mut queue = Queue::default();
        queue.push_back(completion(1));
        assert!(queue.is_inline());
        assert_eq!(queue.len(), 1);
        assert!(std::mem::size_of::<Queue>() <= std::mem::size_of::<Event>() + 8);
        let mut events = Queue::default();
        assert!(!queue.move_into(&mut events, 8));
        assert!(queue.is_empty() && queue.is_inline());
        assert_eq!(drained(&mut events), [1]);
    }

    #[test]
    fn a_lone_event_moves_behind_an_occupied_destination() {
        let mut queue = Queue::default();
        queue.push_back(completion(2));
        let mut events = Queue::default();
        events.push_back(completion(1));
        assert!(!queue.move_into(&mut events, 8));
        assert!(queue.is_empty());
        assert_eq!(drained(&mut events), [1, 2]);
    }

    #[test]
    fn a_backlog_spills_in_order_and_keeps_its_buffer() {
        let mut queue = Queue::default();
        for tag in 1..=6 {
            queue.push_back(completion(tag));
        }
        assert!(!queue.is_inline());
        assert_eq!(queue.len(), 6);
        assert!(matches!(
            queue.back(),
            Some(Event::YieldComplete { tag: 6, .. })
        ));
        let mut events = Queue::default();
        assert!(queue.move_into(&mut events, 4), "two left");
        assert_eq!(drained(&mut events), [1, 2, 3, 4]);
        assert!(!queue.move_into(&mut events, 4));
        assert_eq!(drained(&mut events), [5, 6]);
        assert!(queue.is_empty() && !queue.is_inline());
        queue.push_back(completion(7));
        assert_eq!(queue.len(), 1);
        let taken: Vec<Event> = queue.take().collect();
        assert_eq!(taken.len(), 1);
        assert!(queue.is_inline() && queue.is_empty());
    }

    #[test]
    fn a_completion_queues_like_any_event_inline_or_behind_others() {
        let mut queue = Queue::default();
        queue.push_completion(1, Err(CommandError::TimedOut));
        assert!(queue.is_inline());
        queue.push_completion(2, Err(CommandError::TimedOut));
        queue.push_back(completion(3));
        queue.push_completion(4, Err(CommandError::TimedOut));
        assert_eq!(drained(&mut queue), [1, 2, 3, 4]);
    }

    #[test]
    fn prepend_keeps_both_orders() {
        for (front, back) in [(0, 0), (1, 0), (0, 1), (1, 1), (1, 3), (3, 1), (3, 3)] {
            let mut queue = Queue::default();
            let mut ahead = Queue::default();
            for tag in 0..front {
                ahead.push_back(completion(tag));
            }
            for tag in front..front + back {
                queue.push_back(completion(tag));
            }
            queue.prepend(&mut ahead);
            assert!(ahead.is_empty());
            assert_eq!(drained(&mut queue), (0..front + back).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_drained_backlog_leaves_its_source_the_threads_spare_buffer() {
        // This test's thread starts with no spare.
        let mut mailbox = Queue::default();
        let mut events = Queue::default();
        for round in 0..3 {
            for tag in 0..3 {
                mailbox.push_back(completion(tag));
            }
            events.take_from_for_test(&mut mailbox);
            assert_eq!(drained(&mut events), [0, 1, 2]);
            // From the second round on, the mailbox got the spare and kept a buffer.
            assert_eq!(!mailbox.is_inline(), round > 0, "round {round}");
            events.release_buffer();
            assert!(events.is_inline());
        }
    }

    #[test]
    fn take_returns_the_inline_event_then_the_buffer() {
        let mut queue = Queue::default();
        queue.push_back(Event::Message(crate::process::Message::new(
            "a",
            Payload::new(1u8),
        )));
        assert_eq!(queue.take().count(), 1);
        assert!(queue.is_empty());
        assert_eq!(queue.take().count(), 0);
    }
}
