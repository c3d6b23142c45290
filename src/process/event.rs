//! What a process's `step` receives: yield completions, messages and cancellation.

use super::exit::{Down, Exit};
use super::queue::Queue;
use super::{CommandError, Payload, Pid};
use std::borrow::Cow;
use std::collections::VecDeque;

/// The correlation tag of a yield, chosen by the process and returned unchanged with its
/// completion. Keep a process's outstanding tags distinct: the scheduler does not check them,
/// and two yields with one tag complete as two events with that tag, which the process cannot
/// tell apart. (An `async fn` body's calls get distinct tags by construction.)
///
/// # Examples
///
/// ```
/// use procsched::state_machine::{Event, Tag};
///
/// const FETCH: Tag = 1;
/// const STORE: Tag = 2;
///
/// // A step tells its completions apart by tag.
/// fn which(event: &Event) -> Option<&'static str> {
///     match event {
///         Event::YieldComplete { tag: FETCH, .. } => Some("fetched"),
///         Event::YieldComplete { tag: STORE, .. } => Some("stored"),
///         _ => None,
///     }
/// }
/// assert_eq!(which(&Event::YieldComplete { tag: STORE, result: Ok(procsched::Payload::empty()) }), Some("stored"));
/// ```
pub type Tag = u64;

/// The topic of a message: a static string (no allocation) or an owned one.
///
/// # Examples
///
/// ```
/// use procsched::{Message, Payload};
///
/// let fixed = Message::new("orders", Payload::empty()); // borrowed: no allocation
/// let made = Message::new(format!("orders/{}", 7), Payload::empty()); // owned
/// assert_eq!(fixed.topic, "orders");
/// assert_eq!(made.topic, "orders/7");
/// ```
pub type Topic = Cow<'static, str>;

/// One input to a process's `step`.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::state_machine::{Event, Events, Process, StepOutput};
///
/// /// Sums the `u64` messages it receives; finishes with the sum when asked to finish.
/// struct Summer(u64);
///
/// impl Process for Summer {
///     type Output = u64;
///     fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
///         for event in events.drain() {
///             match event {
///                 Event::Message(message) => self.0 += message.payload.take::<u64>()?,
///                 Event::Cancel { .. } => {
///                     out.done(self.0);
///                     return Ok(());
///                 }
///                 _ => {}
///             }
///         }
///         out.wait();
///         Ok(())
///     }
/// }
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let summer = sched.spawn(Summer(0), "run", Payload::empty())?;
/// let addr = sched.handle().addr::<u64>(summer.pid());
/// addr.send(2)?;
/// addr.send(3)?;
/// sched.cancel(summer.pid())?;
/// assert_eq!(sched.block_on(summer)?, 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// A yield dispatched by an earlier step completed.
    YieldComplete {
        /// The tag the process gave the yield.
        tag: Tag,
        /// The handler's result.
        result: Result<Payload, CommandError>,
    },
    /// A message sent with [`Scheduler::send`](crate::Scheduler::send).
    Message(Message),
    /// The process is asked to finish (a shutdown, [`cancel`](crate::SchedulerHandle::cancel),
    /// its supervisor stopping it). It may still yield and receive completions; it should
    /// reach `Done` soon. Ending with `Done` (or with an error that is a cancellation, such as
    /// `ExitReason::Shutdown`) once asked, it ends with exit reason `Shutdown`: its links and
    /// monitors hear that it was stopped, as an `async fn` body's `?` on its cancel says —
    /// its handle still resolves to its output.
    Cancel {
        /// Why.
        reason: CancelReason,
    },
    /// A topic's [`TopicBudget`] overflowed: messages on `topic` were dropped from this point
    /// on. The terminal event of that topic's traffic, after the topic's messages that were
    /// accepted: once a step has been given it, the topic's budget starts afresh. (An `async
    /// fn` body's receive reports it as `RecvError::Overflow` in the same order: after the
    /// messages that arrived before it; the budget starts afresh when the step files it for
    /// the body, which may be before the body's receive reaches it.)
    MailboxOverflow {
        /// The topic whose budget overflowed.
        topic: Topic,
    },
    /// A waker of this process was woken ([`ProcessContext::waker`](crate::state_machine::ProcessContext::waker)):
    /// a future or callback outside procsched has news. Consecutive wakes are coalesced into one
    /// event.
    Woken,
    /// A linked process ended, and this process traps exits
    /// ([`SchedulerHandle::set_trap_exit`](crate::SchedulerHandle::set_trap_exit)); a process
    /// that does not trap them ends with the same reason instead (unless it is `Normal`).
    Exit(Exit),
    /// A process this one monitors ended (or was already gone): once per monitor.
    Down(Down),
}

// Every send moves an `Event` several times, and the mailbox's intake queue holds them in its
// slots: one that grows (a new variant, a wider field) must be a decision, not an accident.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Event>() <= 80);

/// A per-topic mailbox budget, declared by the sender of a message
/// ([`Message::with_budget`]): how many messages, and how many bytes (as the senders declare
/// them), of this topic may wait in the process's mailbox at once.
///
/// # Examples
///
/// ```
/// use procsched::{Message, Payload, config::TopicBudget};
///
/// let budget = TopicBudget { max_items: 100, max_bytes: 64 * 1024 };
/// let m = Message::new("telemetry", Payload::new([0u8; 16])).with_budget(budget, 16);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicBudget {
    /// Most queued messages of the topic.
    pub max_items: usize,
    /// Most queued bytes of the topic, summing the sizes the senders declared.
    pub max_bytes: usize,
}

/// Why a process received [`Event::Cancel`].
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let worker = sched.spawn_fn(|cx: ProcessCx<()>| async move {
///     // `cancelled()` says why the process is asked to finish.
///     let Err(why) = cx.cancelled().await;
///     Ok::<_, BoxError>(why.to_string())
/// })?;
/// sched.cancel(worker.pid())?;
/// let why = sched.block_on(worker)?;
/// assert!(!why.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CancelReason {
    /// The scheduler is shutting down.
    Shutdown,
    /// The process alone was asked to finish
    /// ([`SchedulerHandle::cancel`](crate::SchedulerHandle::cancel): its supervisor stopping
    /// it, or anyone).
    Stop,
}

/// A message between processes (or from outside).
///
/// # Examples
///
/// ```
/// use procsched::{Message, Payload};
///
/// let m = Message::new("cart.updated", Payload::new(3u32));
/// assert_eq!(m.topic, "cart.updated");
/// assert_eq!(m.from, None);
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Message {
    /// The sending process, if a process sent it.
    pub from: Option<Pid>,
    /// What the message is about.
    pub topic: Topic,
    /// The body.
    pub payload: Payload,
    /// The topic budget and this message's declared size, if the sender gave one. Boxed: a
    /// budgeted message is the mailbox's slow path anyway, and out of line the budget costs
    /// every other message one word instead of four (a `Message`, and so an `Event`, of 80
    /// bytes instead of 104: every send moves one several times, and the mailbox's lock-free
    /// intake queue stores them in its slots).
    pub(crate) budget: Option<Box<(TopicBudget, usize)>>,
}

impl Message {
    /// A message with no sender.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{Message, Payload};
    /// let m = Message::new("greet", Payload::new("hello"));
    /// assert_eq!(m.topic, "greet");
    /// ```
    pub fn new(topic: impl Into<Topic>, payload: Payload) -> Message {
        Message {
            from: None,
            topic: topic.into(),
            payload,
            budget: None,
        }
    }

    /// Subjects the message to a per-topic mailbox budget; `size_bytes` is what this message
    /// counts against `budget.max_bytes`. Past the budget, `send` reports
    /// [`SendErrorKind::MailboxFull`](crate::error::SendErrorKind::MailboxFull) and the process receives one
    /// [`Event::MailboxOverflow`] for the topic.
    ///
    /// The budget is kept out of line (one small allocation), so that messages without one stay
    /// small; a budgeted message also takes the mailbox's locked path, where the budget is
    /// counted.
    ///
    /// A budget counts the topic's messages *in the mailbox*: those a step has taken (for an
    /// `async fn` body, filed in its inbox) no longer count. To push back on senders while a
    /// body is busy, bound the mailbox as a whole
    /// ([`mailbox_capacity`](crate::config::SchedulerBuilder::mailbox_capacity)), which counts
    /// the inbox until the body receives.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{Message, Payload, config::TopicBudget};
    /// let budget = TopicBudget { max_items: 100, max_bytes: 64 * 1024 };
    /// let m = Message::new("ticks", Payload::new(1u64)).with_budget(budget, 8);
    /// assert_eq!(m.topic, "ticks");
    /// ```
    pub fn with_budget(mut self, budget: TopicBudget, size_bytes: usize) -> Message {
        self.budget = Some(Box::new((budget, size_bytes)));
        self
    }

    /// Sets the sender.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{Message, Payload, Pid};
    /// let me = Pid::from_raw(1 << 26).unwrap();
    /// let m = Message::new("ask", Payload::empty()).with_from(me);
    /// assert_eq!(m.from, Some(me));
    /// ```
    pub fn with_from(mut self, from: Pid) -> Message {
        self.from = Some(from);
        self
    }
}

/// The iterator of [`Events::drain`]: pops events one at a time.
///
/// Popping (rather than a buffer's `drain`) keeps the per-event cost of the common
/// one-completion step to a single `pop_front`, with no drop guard to run.
///
/// # Examples
///
/// ```
/// use procsched::state_machine::{Event, Events};
///
/// // A step reads its events this way; what it does not read stays for the next step.
/// fn count_messages(events: &mut Events) -> usize {
///     events
///         .drain()
///         .filter(|event| matches!(event, Event::Message(_)))
///         .count()
/// }
/// # let _ = count_messages;
/// ```
#[derive(Debug)]
pub struct EventDrain<'a> {
    events: &'a mut Events,
}

impl Iterator for EventDrain<'_> {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        self.events.queue.pop_front()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.events.queue.len();
        (n, Some(n))
    }
}

impl ExactSizeIterator for EventDrain<'_> {}

impl std::iter::FusedIterator for EventDrain<'_> {}

impl Extend<Event> for Events {
    fn extend<I: IntoIterator<Item = Event>>(&mut self, iter: I) {
        for event in iter {
            self.queue.push_back(event);
        }
    }
}

impl FromIterator<Event> for Events {
    fn from_iter<I: IntoIterator<Item = Event>>(iter: I) -> Events {
        let mut events = Events::default();
        events.extend(iter);
        events
    }
}

/// The events that arrived since the previous step, oldest first.
///
/// `step` takes them by value ([`pop`](Self::pop), [`drain`](Self::drain)), so payloads move out
/// without a clone. Events the step leaves unread are dropped when it returns: every event is
/// presented to exactly one step.
///
/// # Examples
///
/// ```
/// # use procsched::state_machine::{Event, Events};
/// fn count_messages(events: &mut Events) -> usize {
///     events.drain().filter(|e| matches!(e, Event::Message(_))).count()
/// }
/// ```
#[derive(Debug, Default)]
pub struct Events {
    /// One event inline, a buffer for more (`queue.rs`).
    queue: Queue,
}

impl Events {
    /// Number of unread events.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Event, Events};
    /// let events: Events = [Event::Woken, Event::Woken].into_iter().collect();
    /// assert_eq!(events.len(), 2);
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// `true` if there is no unread event.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::state_machine::Events::default().is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The slot holding the only event, when there is exactly one (no buffer): for a reader
    /// that takes it where it lies (`process/typed.rs`, `take_lone`).
    #[inline]
    pub(crate) fn lone_slot(&mut self) -> Option<&mut Option<Event>> {
        match &mut self.queue {
            Queue::Inline(slot @ Some(_)) => Some(slot),
            _ => None,
        }
    }

    /// Takes the oldest unread event.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Event, Events};
    /// let mut events: Events = [Event::Woken].into_iter().collect();
    /// assert!(matches!(events.pop(), Some(Event::Woken)));
    /// assert!(events.pop().is_none());
    /// ```
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        self.queue.pop_front()
    }

    /// Takes the unread events, oldest first, as the iterator is advanced.
    ///
    /// Events the iterator has not reached when it is dropped stay unread (and are dropped when
    /// the step returns, like any unread event).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Event, Events};
    /// let mut events: Events = [Event::Woken, Event::Woken].into_iter().collect();
    /// assert_eq!(events.drain().count(), 2);
    /// assert!(events.is_empty());
    /// ```
    pub fn drain(&mut self) -> EventDrain<'_> {
        EventDrain { events: self }
    }

    /// Looks at the unread events.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Event, Events};
    /// let events: Events = [Event::Woken].into_iter().collect();
    /// assert!(events.iter().all(|e| matches!(e, Event::Woken)));
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = &Event> + '_ {
        self.queue.iter()
    }

    /// Appends an event. The scheduler fills `Events` itself; this is for driving a process by
    /// hand — unit tests of a `Process`, or a custom driver.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::state_machine::{Event, Events};
    /// let mut events = Events::default();
    /// events.push(Event::Woken);
    /// assert_eq!(events.len(), 1);
    /// ```
    #[inline]
    pub fn push(&mut self, event: Event) {
        self.queue.push_back(event);
    }

    /// Queues the completion of the yield `tag` (the inline handlers' path: `queue.rs`).
    #[inline(always)]
    pub(crate) fn push_completion(&mut self, tag: Tag, result: Result<Payload, CommandError>) {
        self.queue.push_completion(tag, result);
    }

    /// Hands every event to `inbox` (empty) by exchanging buffers, if they are all messages
    /// and more than one: an `async fn` body's step files a batch of messages this way instead
    /// of moving each (`async_fn/state.rs`, `CxState::file_messages`). Returns how many.
    #[inline]
    pub(crate) fn give_messages(&mut self, inbox: &mut VecDeque<Event>) -> Option<usize> {
        self.queue
            .give_buffer_if_all(inbox, |event| matches!(event, Event::Message(_)))
    }

    /// Moves every event to the front of `queue`, ahead of its own.
    pub(crate) fn move_in_front_of(&mut self, queue: &mut Queue) {
        queue.prepend(&mut self.queue);
    }

    /// Gives an empty buffer to the thread's spare (`queue.rs`, "Buffers on a worker").
    #[inline]
    pub(crate) fn release_buffer(&mut self) {
        self.queue.release_buffer();
    }

    /// Moves up to `max` events (`max > 0`) from `source`, oldest first. Returns `true` if
    /// events are left in `source`.
    #[inline]
    pub(crate) fn take_from(&mut self, source: &mut Queue, max: usize) -> bool {
        source.move_into(&mut self.queue, max)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn tagged(tag: Tag) -> Event {
        Event::YieldComplete {
            tag,
            result: Ok(Payload::empty()),
        }
    }

    fn tag_of(event: &Event) -> Tag {
        match event {
            Event::YieldComplete { tag, .. } => *tag,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_partial_drain_leaves_the_rest_unread_in_order() {
        let mut events: Events = (1..=4).map(tagged).collect();
        {
            let mut drain = events.drain();
            assert_eq!(drain.len(), 4);
            assert_eq!(drain.next().as_ref().map(tag_of), Some(1));
            assert_eq!(drain.next().as_ref().map(tag_of), Some(2));
        }
        assert_eq!(events.iter().map(tag_of).collect::<Vec<_>>(), [3, 4]);
        assert_eq!(events.drain().count(), 2);
        assert!(events.is_empty());
    }
}
