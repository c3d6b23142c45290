//! Topic budgets (admission, overflow markers) and what a drained or closed mailbox keeps.
//!
//! A topic's budget entry exists only while the topic has messages queued or an overflow marker
//! waiting; the map and the event queue are released when the process closes, so a pooled cell
//! does not carry one process's flood into the next.

use crate::process::mailbox::{Admission, Drained, Generation, ProcessCell};
use crate::process::{CommandError, Payload};
use crate::process::{Event, Events, Message, Topic, TopicBudget};

/// What a reopened cell may keep: a handful of slots, never the high-water mark of a flood.
const SMALL: usize = 64;

fn budget(max_items: usize) -> TopicBudget {
    TopicBudget {
        max_items,
        max_bytes: usize::MAX,
    }
}

fn budgeted(topic: impl Into<Topic>, max_items: usize) -> Event {
    Event::Message(Message::new(topic, Payload::new(0u32)).with_budget(budget(max_items), 8))
}

/// Drains up to `max` events and returns how many messages and overflow markers came out.
fn drain(cell: &ProcessCell, max: usize) -> (usize, usize) {
    let mut events = Events::default();
    let _ = cell.drain_into(&mut events, max, None);
    events
        .drain()
        .fold((0, 0), |(messages, markers), event| match event {
            Event::Message(_) => (messages + 1, markers),
            Event::MailboxOverflow { .. } => (messages, markers + 1),
            other => panic!("unexpected {other:?}"),
        })
}

/// Closes the process and opens the cell for the next one, as the scheduler's table does.
fn reopen(cell: &ProcessCell) -> Generation {
    cell.close();
    let _ = cell.release();
    cell.open()
}

#[test]
fn every_topic_entry_goes_when_its_last_message_is_drained() {
    let total = if cfg!(miri) { 500 } else { 1_000_000 };
    let batch = if cfg!(miri) { 50 } else { 1_000 };
    let (cell, generation) = ProcessCell::new_open();
    let mut received = 0;
    for start in (0..total).step_by(batch) {
        for n in start..start + batch {
            // Every message on a topic of its own: the pattern that used to grow the map forever.
            let sent = cell.deliver(generation, budgeted(format!("topic-{n}"), 4));
            assert_eq!(sent, Admission::Accepted);
        }
        let (messages, markers) = drain(&cell, usize::MAX);
        received += messages;
        assert_eq!(markers, 0);
        assert_eq!(
            cell.mailbox.topic_entries().0,
            0,
            "drained topics keep no entry (after {received} messages)"
        );
    }
    assert_eq!(received, total, "every message delivered once");
    let (_, capacity) = cell.mailbox.topic_entries();
    assert!(
        capacity < 4 * batch,
        "while open, the map is sized by one batch, not the total: {capacity}"
    );
    let _ = reopen(&cell);
    let (len, capacity) = cell.mailbox.topic_entries();
    assert_eq!(len, 0);
    assert!(capacity <= SMALL, "reopened with capacity {capacity}");
}

#[test]
fn close_releases_the_entries_of_topics_still_queued() {
    let total = if cfg!(miri) { 100 } else { 10_000 };
    let (cell, generation) = ProcessCell::new_open();
    for n in 0..total {
        let _ = cell.deliver(generation, budgeted(format!("topic-{n}"), 1));
    }
    assert_eq!(cell.mailbox.topic_entries().0, total);
    cell.close();
    let (len, capacity) = cell.mailbox.topic_entries();
    assert_eq!(len, 0, "close drops the budgets with the queued messages");
    assert!(capacity <= SMALL, "closed with capacity {capacity}");
    assert!(cell.mailbox.event_capacity() <= SMALL);
    let _ = cell.release();
    let generation = cell.open();
    assert!(cell.mailbox.topic_entries().1 <= SMALL);
    // The next process's budgets start afresh.
    assert_eq!(
        cell.deliver(generation, budgeted("topic-0", 1)),
        Admission::Accepted
    );
    assert_eq!(cell.mailbox.topic_entries().0, 1);
}

#[test]
fn a_drained_flood_keeps_no_event_capacity_across_reopen() {
    let total = if cfg!(miri) { 500 } else { 100_000 };
    let (cell, generation) = ProcessCell::new_open();
    for tag in 0..total {
        let completion = Event::YieldComplete {
            tag,
            result: Err(CommandError::TimedOut),
        };
        assert_eq!(cell.deliver(generation, completion), Admission::Accepted);
    }
    // Drained in step-sized batches, as a worker does: the queue keeps its flood-sized buffer.
    let mut drained = 0;
    loop {
        let mut events = Events::default();
        let more = cell.drain_into(&mut events, 64, None);
        drained += events.len();
        if more == Drained::All {
            break;
        }
    }
    assert_eq!(drained, total as usize);
    let _ = reopen(&cell);
    let capacity = cell.mailbox.event_capacity();
    assert!(capacity <= SMALL, "reopened with capacity {capacity}");
}

#[test]
fn an_overflowed_topic_keeps_its_entry_until_the_marker_is_drained() {
    let (cell, generation) = ProcessCell::new_open();
    let send = |topic: &'static str| cell.deliver(generation, budgeted(topic, 2));
    assert_eq!(send("a"), Admission::Accepted);
    assert_eq!(send("a"), Admission::Accepted);
    assert_eq!(
        send("a"),
        Admission::OverBudget,
        "over budget: the marker is queued"
    );
    // Both messages leave, the marker stays: the entry must stay too, or the topic would take
    // new messages (and queue a second marker) before the process saw the first.
    assert_eq!(drain(&cell, 2), (2, 0));
    assert_eq!(cell.mailbox.topic_entries().0, 1);
    assert_eq!(send("a"), Admission::OverBudget, "still overflowed");
    assert_eq!(drain(&cell, usize::MAX), (0, 1), "exactly one marker");
    assert_eq!(
        cell.mailbox.topic_entries().0,
        0,
        "the marker took the entry"
    );
    assert_eq!(send("a"), Admission::Accepted, "the topic starts afresh");

    // A topic with messages still queued keeps its entry until the last one leaves.
    assert_eq!(send("b"), Admission::Accepted);
    assert_eq!(drain(&cell, 1), (1, 0), "the 'a' message");
    assert_eq!(drain(&cell, 1), (1, 0), "the first 'b' message");
    assert_eq!(cell.mailbox.topic_entries().0, 0);
    assert_eq!(send("b"), Admission::Accepted);
    assert_eq!(send("b"), Admission::Accepted);
    assert_eq!(drain(&cell, 1), (1, 0));
    assert_eq!(cell.mailbox.topic_entries().0, 1, "one 'b' still queued");
    assert_eq!(drain(&cell, 1), (1, 0));
    assert_eq!(cell.mailbox.topic_entries().0, 0);
}

/// A message on `topic` under a budget of 3 items and 1 000 bytes, declaring 100 bytes.
fn three_items(topic: &'static str, n: u32) -> Event {
    let budget = TopicBudget {
        max_items: 3,
        max_bytes: 1_000,
    };
    Event::Message(Message::new(topic, Payload::new(n)).with_budget(budget, 100))
}

/// Drains everything, naming each event.
fn kinds(cell: &ProcessCell) -> Vec<String> {
    let mut events = Events::default();
    let _ = cell.drain_into(&mut events, usize::MAX, None);
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
    let (cell, generation) = ProcessCell::new_open();
    let outcomes: Vec<Admission> = (0..6)
        .map(|n| cell.deliver(generation, three_items("a", n)))
        .collect();
    use Admission::*;
    assert_eq!(
        outcomes,
        [Accepted, Accepted, Accepted, OverBudget, OverBudget, OverBudget]
    );
    // Other topics and completions are unaffected.
    assert_eq!(cell.deliver(generation, three_items("b", 0)), Accepted);
    assert_eq!(
        cell.deliver(
            generation,
            Event::YieldComplete {
                tag: 9,
                result: Err(CommandError::TimedOut)
            }
        ),
        Accepted
    );
    assert_eq!(
        kinds(&cell),
        ["a:0", "a:1", "a:2", "overflow:a", "b:0", "done:9"],
        "exactly one marker, in order"
    );
    // The process received the marker: the topic starts afresh.
    assert_eq!(cell.deliver(generation, three_items("a", 7)), Accepted);
    assert_eq!(kinds(&cell), ["a:7"]);
}

#[test]
fn byte_budgets_count_declared_sizes() {
    let (cell, generation) = ProcessCell::new_open();
    let budget = TopicBudget {
        max_items: 100,
        max_bytes: 250,
    };
    let msg =
        |size| Event::Message(Message::new("t", Payload::new(0u32)).with_budget(budget, size));
    assert_eq!(cell.deliver(generation, msg(200)), Admission::Accepted);
    assert_eq!(cell.deliver(generation, msg(100)), Admission::OverBudget);
    assert_eq!(kinds(&cell), ["t:0", "overflow:t"]);
}
