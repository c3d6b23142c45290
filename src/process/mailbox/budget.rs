//! Topic budgets and the mailbox's capacity: admission of a message under the lock, and what
//! a drained message gives back (`Message::with_budget`; the overflow marker).

use super::{Admission, Inner, Mailbox};
use crate::loom::atomic::Ordering::Relaxed;
use crate::process::{Event, Message, Topic};
use std::collections::HashMap;

impl Mailbox {
    /// Most queued messages of the current incarnation (`usize::MAX`: unbounded). Under the
    /// lock, or after a gate load that saw the incarnation open (see the field).
    #[inline(always)]
    pub(super) fn capacity(&self) -> usize {
        self.capacity.load(Relaxed)
    }
}

/// The budgeted topics' usage.
pub(super) type TopicMap = HashMap<Topic, TopicUsage>;

/// Per-topic usage of a budgeted topic. Invariant: `items > 0 || overflowed` (an entry with
/// neither is removed at once, see [`Inner::release_budget`]).
#[derive(Debug, Default)]
pub(super) struct TopicUsage {
    items: usize,
    bytes: usize,
    /// The budget overflowed and the marker is queued: drop the topic's traffic until the
    /// process receives the marker.
    overflowed: bool,
}

impl Inner {
    /// Capacity and topic-budget admission of a message (the lock is held). A refusal that
    /// overflows the topic's budget comes with the overflow marker, for the caller to queue
    /// where this message would have gone.
    pub(super) fn admit(
        &mut self,
        message: &Message,
        capacity: usize,
    ) -> (Admission, Option<Event>) {
        if self.queued_messages + self.unread as usize >= capacity {
            return (Admission::Dropped, None);
        }
        let Some(&(budget, size)) = message.budget.as_deref() else {
            return (Admission::Accepted, None);
        };
        let usage = self
            .topics
            .get_or_insert_with(Box::default)
            .entry(message.topic.clone())
            .or_default();
        if usage.overflowed {
            return (Admission::OverBudget, None);
        }
        // Checked: sizes are the senders' declarations, and a sum past `usize::MAX` fits no
        // budget (a `max_bytes` of `usize::MAX` says "no byte limit", not "wrap around").
        let items = usage
            .items
            .checked_add(1)
            .filter(|&n| n <= budget.max_items);
        let bytes = usage
            .bytes
            .checked_add(size)
            .filter(|&n| n <= budget.max_bytes);
        let (Some(items), Some(bytes)) = (items, bytes) else {
            usage.overflowed = true;
            let marker = Event::MailboxOverflow {
                topic: message.topic.clone(),
            };
            return (Admission::OverBudget, Some(marker));
        };
        usage.items = items;
        usage.bytes = bytes;
        (Admission::Accepted, None)
    }

    /// An event left the mailbox for a step. `bounded`: the mailbox counts its messages
    /// against a capacity (an unbounded one does not keep the count exact: its lock-free path
    /// queues messages uncounted).
    pub(super) fn release(&mut self, event: &Event, bounded: bool) {
        match event {
            Event::Message(message) => {
                if bounded {
                    self.queued_messages -= 1;
                }
                if let Some(&(_, size)) = message.budget.as_deref() {
                    self.release_budget(&message.topic, size);
                }
            }
            Event::MailboxOverflow { topic } => {
                // The process has the marker: the topic starts afresh.
                self.remove_topic(topic);
            }
            _ => {}
        }
    }

    /// A budgeted message of `topic` left the mailbox: give back its usage, and drop the entry
    /// once the topic has nothing queued — unless it overflowed, in which case the entry (and
    /// its `overflowed` flag, which keeps dropping the topic's traffic) stays until the marker
    /// leaves too.
    fn release_budget(&mut self, topic: &Topic, size: usize) {
        let Some(usage) = self
            .topics
            .as_mut()
            .and_then(|topics| topics.get_mut(topic))
        else {
            debug_assert!(false, "a queued budgeted message has an entry");
            return;
        };
        usage.items = usage.items.saturating_sub(1);
        usage.bytes = usage.bytes.saturating_sub(size);
        if usage.items == 0 && !usage.overflowed {
            // A second lookup, only on the budgeted path and once per topic's last message:
            // std's map has no way to remove through the `get_mut` reference.
            self.remove_topic(topic);
        }
    }

    /// Removes `topic`'s entry, and the map with its last entry.
    fn remove_topic(&mut self, topic: &Topic) {
        if let Some(topics) = &mut self.topics {
            topics.remove(topic);
            if topics.is_empty() {
                self.topics = None;
            }
        }
    }
}
