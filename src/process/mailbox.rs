//! The per-process event queue, bound to a generation, and the process's shared cell.
//!
//! Producers — message senders and yield completers — push under a short mutex (never held
//! while user code runs); the one consumer is the worker stepping the process, which moves a
//! bounded batch out per step.
//!
//! # Generations
//! Every producer binds to the generation it observed when it was created (a completer: when its
//! yield was dispatched; a sender: when it looked the PID up). [`Mailbox::reset`] bumps the
//! generation, and [`Mailbox::close`] shuts the queue: pushes bound to an older generation, or to a
//! closed queue, are rejected — so a late completion can never reach another incarnation of the
//! queue, and nothing is pushed into a process that is gone.

use super::state::StateWord;
use super::{Event, Events, Message, Pid, ProcessState, Topic};
use crate::loom::{lock, Mutex};
use std::collections::HashMap;
use std::collections::VecDeque;
use std::task::Waker;

/// The generation a producer is bound to.
pub(crate) type Generation = u64;

/// What [`Mailbox::drain_into`] left behind.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Drained {
    /// The mailbox is empty.
    All,
    /// More than a batch was waiting: the rest is for the next step.
    More,
    /// Termination was requested (read under the same lock as the events: see `terminate`).
    Terminate,
}

/// What happened to a pushed event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Queued; the process will see it.
    Accepted,
    /// A message over the mailbox capacity or its topic budget: not queued.
    Dropped,
    /// Closed queue or stale generation: the event was not queued.
    Rejected,
}

pub(crate) struct Mailbox {
    inner: Mutex<Inner>,
}

struct Inner {
    events: VecDeque<Event>,
    /// Messages (not completions, cancels or overflow markers) in `events`.
    queued_messages: usize,
    /// Set once by `terminate`. Read by the poller in the same critical section that drains
    /// events, so — exactly like an event — a request that lands after a drain finds the
    /// process `Running` (and flags it) or parked (and wakes it).
    terminate: bool,
    /// Most queued messages; `usize::MAX` when unbounded.
    capacity: usize,
    /// Usage of the topics that carry a budget.
    topics: HashMap<Topic, TopicUsage>,
    generation: Generation,
    closed: bool,
    /// The process task's waker, registered by its poll.
    waker: Option<Waker>,
}

/// Everything a process shares with the rest of the scheduler: its PID, state word and mailbox.
pub(crate) struct ProcessCell {
    pub(crate) pid: Pid,
    pub(crate) state: StateWord,
    pub(crate) mailbox: Mailbox,
}

impl ProcessCell {
    #[cfg(test)]
    pub(crate) fn new(pid: Pid) -> ProcessCell {
        ProcessCell::with_capacity(pid, usize::MAX)
    }

    /// A cell whose mailbox holds at most `capacity` messages (yield completions are never
    /// counted or dropped).
    pub(crate) fn with_capacity(pid: Pid, capacity: usize) -> ProcessCell {
        ProcessCell {
            pid,
            state: StateWord::new(),
            mailbox: Mailbox {
                inner: Mutex::new(Inner {
                    events: VecDeque::new(),
                    terminate: false,
                    queued_messages: 0,
                    capacity,
                    topics: HashMap::new(),
                    generation: 1,
                    closed: false,
                    waker: None,
                }),
            },
        }
    }

    /// Delivers a message at the current generation (a sender binds to the generation it finds,
    /// in the same critical section).
    pub(crate) fn send(&self, event: Event) -> Admission {
        self.push(None, event)
    }

    /// Delivers `event` if the mailbox is open at `generation`, waking the process if it is
    /// blocked or idle (`state.rs`, protocol step 1).
    pub(crate) fn deliver(&self, generation: Generation, event: Event) -> Admission {
        self.push(Some(generation), event)
    }

    fn push(&self, generation: Option<Generation>, event: Event) -> Admission {
        let mut inner = lock(&self.mailbox.inner);
        if inner.closed || generation.is_some_and(|g| g != inner.generation) {
            drop(inner);
            drop_caught(event);
            return Admission::Rejected;
        }
        if let Event::Message(message) = &event {
            let admitted = inner.admit(message);
            if admitted != Admission::Accepted {
                if inner.events.back().is_some_and(is_overflow_marker) {
                    // `admit` may just have queued the overflow marker: the process must see it.
                    self.wake_if_waiting(&inner);
                }
                drop(inner);
                drop_caught(event);
                return admitted;
            }
            inner.queued_messages += 1;
        }
        inner.events.push_back(event);
        self.wake_if_waiting(&inner);
        Admission::Accepted
    }

    fn wake_if_waiting(&self, inner: &Inner) {
        // Under the lock, so the waker cannot change (or be taken at close) meanwhile.
        if self.state.on_event() {
            if let Some(waker) = &inner.waker {
                waker.wake_by_ref();
            }
        }
    }

    /// Asks the process to stop before its next step, waking it if it waits. Returns `false` if
    /// the mailbox is already closed (the process is finishing).
    pub(crate) fn request_terminate(&self) -> bool {
        let mut inner = lock(&self.mailbox.inner);
        if inner.closed {
            return false;
        }
        inner.terminate = true;
        // As for an event: a running process re-checks before parking, a waiting one is woken.
        if self.state.on_event() {
            if let Some(waker) = &inner.waker {
                waker.wake_by_ref();
            }
        }
        true
    }

    /// The current generation, for a new producer to bind to.
    pub(crate) fn generation(&self) -> Generation {
        lock(&self.mailbox.inner).generation
    }

    pub(crate) fn state(&self) -> ProcessState {
        self.state.load()
    }
}

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
        if inner.events.is_empty() {
            return Drained::All;
        }
        let before = events.len();
        events.take_from(&mut inner.events, max);
        if inner.capacity != usize::MAX || !inner.topics.is_empty() {
            // Bounded mailbox: give back what the moved events used.
            for event in events.iter().skip(before) {
                inner.release(event);
            }
        }
        if inner.events.is_empty() {
            Drained::All
        } else {
            Drained::More
        }
    }

    /// `true` if events are waiting.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn has_events(&self) -> bool {
        !lock(&self.inner).events.is_empty()
    }

    /// Closes the queue: later pushes are rejected; queued events and the waker are dropped.
    pub(crate) fn close(&self) {
        let (events, waker) = {
            let mut inner = lock(&self.inner);
            inner.closed = true;
            (std::mem::take(&mut inner.events), inner.waker.take())
        };
        // Outside the lock: payload destructors are user code.
        for event in events {
            drop_caught(event);
        }
        drop(waker);
    }

    /// Starts a new generation: producers bound to older ones are rejected from now on.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn reset(&self) -> Generation {
        let mut inner = lock(&self.inner);
        inner.generation += 1;
        inner.closed = false;
        inner.generation
    }
}

/// Per-topic usage of a budgeted topic.
#[derive(Debug, Default)]
struct TopicUsage {
    items: usize,
    bytes: usize,
    /// The budget overflowed and the marker is queued: drop the topic's traffic until the
    /// process receives the marker.
    overflowed: bool,
}

impl Inner {
    /// Capacity and topic-budget admission of a message (the lock is held).
    fn admit(&mut self, message: &Message) -> Admission {
        if self.queued_messages >= self.capacity {
            return Admission::Dropped;
        }
        let Some((budget, size)) = message.budget else {
            return Admission::Accepted;
        };
        let usage = self.topics.entry(message.topic.clone()).or_default();
        if usage.overflowed {
            return Admission::Dropped;
        }
        if usage.items + 1 > budget.max_items || usage.bytes.saturating_add(size) > budget.max_bytes
        {
            usage.overflowed = true;
            self.events.push_back(Event::MailboxOverflow {
                topic: message.topic.clone(),
            });
            return Admission::Dropped;
        }
        usage.items += 1;
        usage.bytes += size;
        Admission::Accepted
    }

    /// An event left the mailbox for a step.
    fn release(&mut self, event: &Event) {
        match event {
            Event::Message(message) => {
                self.queued_messages -= 1;
                if let Some((_, size)) = message.budget {
                    if let Some(usage) = self.topics.get_mut(&message.topic) {
                        usage.items = usage.items.saturating_sub(1);
                        usage.bytes = usage.bytes.saturating_sub(size);
                    }
                }
            }
            Event::MailboxOverflow { topic } => {
                // The process has the marker: the topic starts afresh.
                self.topics.remove(topic);
            }
            _ => {}
        }
    }
}

fn is_overflow_marker(event: &Event) -> bool {
    matches!(event, Event::MailboxOverflow { .. })
}

/// Drops an event, containing a panic from a payload destructor (user code).
fn drop_caught(event: Event) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(event))).is_err() {
        tracing::warn!("a payload destructor panicked; the panic was contained");
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{CommandError, Payload};

    fn completion(tag: u64) -> Event {
        Event::YieldComplete {
            tag,
            result: Err(CommandError::TimedOut),
        }
    }

    #[test]
    fn a_late_completion_from_a_previous_generation_is_rejected() {
        let cell = ProcessCell::new(Pid::from_raw(1).unwrap());
        let old = cell.generation();
        assert_eq!(cell.deliver(old, completion(1)), Admission::Accepted);
        let new = cell.mailbox.reset();
        assert_ne!(old, new);
        assert_eq!(cell.deliver(old, completion(2)), Admission::Rejected);
        assert_eq!(cell.deliver(new, completion(3)), Admission::Accepted);
        let mut events = Events::default();
        let _ = cell.mailbox.drain_into(&mut events, 10, None);
        let tags: Vec<u64> = events
            .drain()
            .map(|e| match e {
                Event::YieldComplete { tag, .. } => tag,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(tags, [1, 3]);
    }

    #[test]
    fn a_closed_mailbox_rejects_and_drops_queued_events() {
        let cell = ProcessCell::new(Pid::from_raw(1).unwrap());
        let generation = cell.generation();
        let msg = || Event::Message(crate::Message::new("t", Payload::new(1u8)));
        assert_eq!(cell.deliver(generation, msg()), Admission::Accepted);
        cell.mailbox.close();
        assert!(!cell.mailbox.has_events());
        assert_eq!(cell.deliver(generation, msg()), Admission::Rejected);
    }

    fn budgeted(topic: &'static str, n: u32) -> Event {
        let budget = crate::TopicBudget {
            max_items: 3,
            max_bytes: 1_000,
        };
        Event::Message(crate::Message::new(topic, Payload::new(n)).with_budget(budget, 100))
    }

    fn kinds(cell: &ProcessCell) -> Vec<String> {
        let mut events = Events::default();
        let _ = cell.mailbox.drain_into(&mut events, usize::MAX, None);
        events
            .drain()
            .map(|e| match e {
                Event::Message(m) => {
                    format!("{}:{}", m.topic, m.payload.downcast::<u32>().unwrap())
                }
                Event::MailboxOverflow { topic } => format!("overflow:{topic}"),
                Event::YieldComplete { tag, .. } => format!("done:{tag}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_topic_over_budget_gets_one_marker_then_drops_until_drained() {
        let cell = ProcessCell::new(Pid::from_raw(1).unwrap());
        let generation = cell.generation();
        let outcomes: Vec<Admission> = (0..6).map(|n| cell.send(budgeted("a", n))).collect();
        use Admission::*;
        assert_eq!(
            outcomes,
            [Accepted, Accepted, Accepted, Dropped, Dropped, Dropped]
        );
        // Other topics and completions are unaffected.
        assert_eq!(cell.send(budgeted("b", 0)), Accepted);
        assert_eq!(cell.deliver(generation, completion(9)), Accepted);
        assert_eq!(
            kinds(&cell),
            ["a:0", "a:1", "a:2", "overflow:a", "b:0", "done:9"],
            "exactly one marker, in order"
        );
        // The process received the marker: the topic starts afresh.
        assert_eq!(cell.send(budgeted("a", 7)), Accepted);
        assert_eq!(kinds(&cell), ["a:7"]);
    }

    #[test]
    fn byte_budgets_count_declared_sizes() {
        let cell = ProcessCell::new(Pid::from_raw(1).unwrap());
        let budget = crate::TopicBudget {
            max_items: 100,
            max_bytes: 250,
        };
        let msg = |size| {
            Event::Message(crate::Message::new("t", Payload::new(0u32)).with_budget(budget, size))
        };
        assert_eq!(cell.send(msg(200)), Admission::Accepted);
        assert_eq!(cell.send(msg(100)), Admission::Dropped);
        assert_eq!(kinds(&cell), ["t:0", "overflow:t"]);
    }

    #[test]
    fn capacity_drops_messages_but_never_completions() {
        let cell = ProcessCell::with_capacity(Pid::from_raw(1).unwrap(), 2);
        let generation = cell.generation();
        let msg = |n: u32| Event::Message(crate::Message::new("m", Payload::new(n)));
        assert_eq!(cell.send(msg(0)), Admission::Accepted);
        assert_eq!(cell.send(msg(1)), Admission::Accepted);
        assert_eq!(cell.send(msg(2)), Admission::Dropped);
        for tag in 0..5 {
            assert_eq!(
                cell.deliver(generation, completion(tag)),
                Admission::Accepted
            );
        }
        assert_eq!(kinds(&cell).len(), 7);
        assert_eq!(
            cell.send(msg(3)),
            Admission::Accepted,
            "drained: room again"
        );
    }

    #[test]
    fn batches_are_bounded() {
        let cell = ProcessCell::new(Pid::from_raw(1).unwrap());
        let generation = cell.generation();
        for tag in 0..10 {
            let _ = cell.deliver(generation, completion(tag));
        }
        let mut events = Events::default();
        assert_eq!(cell.mailbox.drain_into(&mut events, 4, None), Drained::More);
        assert_eq!(events.len(), 4);
        assert!(cell.mailbox.has_events());
    }
}
