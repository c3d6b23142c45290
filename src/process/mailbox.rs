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
use super::{Event, Events, Pid, ProcessState};
use crate::loom::atomic::{AtomicBool, Ordering::SeqCst};
use crate::loom::{lock, Mutex};
use std::collections::VecDeque;
use std::task::Waker;

/// The generation a producer is bound to.
pub(crate) type Generation = u64;

/// What happened to a pushed event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Queued; the process will see it.
    Accepted,
    /// Closed queue or stale generation: the event was not queued.
    Rejected,
}

pub(crate) struct Mailbox {
    inner: Mutex<Inner>,
}

struct Inner {
    events: VecDeque<Event>,
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
    /// Set once by `terminate`; the process future checks it before every step.
    terminate: AtomicBool,
}

impl ProcessCell {
    pub(crate) fn new(pid: Pid) -> ProcessCell {
        ProcessCell {
            pid,
            state: StateWord::new(),
            terminate: AtomicBool::new(false),
            mailbox: Mailbox {
                inner: Mutex::new(Inner {
                    events: VecDeque::new(),
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
        inner.events.push_back(event);
        // Under the lock, so the waker cannot change (or be taken at close) meanwhile.
        if self.state.on_event() {
            if let Some(waker) = &inner.waker {
                waker.wake_by_ref();
            }
        }
        Admission::Accepted
    }

    /// Asks the process to stop before its next step, waking it if it waits. Returns `false` if
    /// the mailbox is already closed (the process is finishing).
    pub(crate) fn request_terminate(&self) -> bool {
        let inner = lock(&self.mailbox.inner);
        if inner.closed {
            return false;
        }
        self.terminate.store(true, SeqCst);
        // As for an event: a running process re-checks before parking, a waiting one is woken.
        if self.state.on_event() {
            if let Some(waker) = &inner.waker {
                waker.wake_by_ref();
            }
        }
        true
    }

    pub(crate) fn is_terminate_requested(&self) -> bool {
        self.terminate.load(SeqCst)
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
    /// Registers the waker of the task stepping this process (cheap when unchanged).
    pub(crate) fn register_waker(&self, waker: &Waker) {
        let mut inner = lock(&self.inner);
        match &inner.waker {
            Some(current) if current.will_wake(waker) => {}
            _ => inner.waker = Some(waker.clone()),
        }
    }

    /// Moves up to `max` queued events into `events`.
    pub(crate) fn drain_into(&self, events: &mut Events, max: usize) {
        let mut inner = lock(&self.inner);
        if !inner.events.is_empty() {
            events.take_from(&mut inner.events, max);
        }
    }

    /// `true` if events are waiting.
    #[cfg(test)]
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
        cell.mailbox.drain_into(&mut events, 10);
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

    #[test]
    fn batches_are_bounded() {
        let cell = ProcessCell::new(Pid::from_raw(1).unwrap());
        let generation = cell.generation();
        for tag in 0..10 {
            let _ = cell.deliver(generation, completion(tag));
        }
        let mut events = Events::default();
        cell.mailbox.drain_into(&mut events, 4);
        assert_eq!(events.len(), 4);
        assert!(cell.mailbox.has_events());
    }
}
