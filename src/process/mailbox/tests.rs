//! Unit tests of the mailbox: generations, phases, capacity, batches.
use super::*;
use crate::process::Events;
use crate::process::{CommandError, Payload, ProcessState};

fn completion(tag: u64) -> Event {
    Event::YieldComplete {
        tag,
        result: Err(CommandError::TimedOut),
    }
}

#[test]
fn a_late_completion_from_a_previous_incarnation_is_rejected() {
    let (cell, old) = ProcessCell::new_open();
    assert_eq!(cell.deliver(old, completion(1)), Admission::Accepted);
    // The process finishes (its queued event is dropped) and the cell hosts the next one.
    cell.close();
    assert_eq!(cell.deliver(old, completion(2)), Admission::Closed);
    assert_eq!(cell.release().0, old);
    assert_eq!(cell.deliver(old, completion(2)), Admission::Gone);
    let new = cell.open();
    assert_ne!(old, new);
    assert_eq!(cell.deliver(old, completion(3)), Admission::Gone);
    assert_eq!(cell.deliver(new, completion(4)), Admission::Accepted);
    let mut events = Events::default();
    let _ = cell.drain_into(&mut events, 10, None);
    let tags: Vec<u64> = events
        .drain()
        .map(|e| match e {
            Event::YieldComplete { tag, .. } => tag,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(tags, [4]);
}

#[test]
fn a_closing_cell_refuses_and_drops_queued_events() {
    let (cell, generation) = ProcessCell::new_open();
    let msg = || Event::Message(crate::process::Message::new("t", Payload::new(1u8)));
    assert_eq!(cell.deliver(generation, msg()), Admission::Accepted);
    cell.close();
    assert!(!cell.mailbox.has_events());
    assert_eq!(cell.deliver(generation, msg()), Admission::Closed);
    assert_eq!(cell.deliver_current(msg()), Admission::Closed);
    assert_eq!(cell.request_terminate(generation), Admission::Closed);
    let _ = cell.release();
    assert_eq!(cell.deliver_current(msg()), Admission::Gone);
    assert_eq!(cell.state(generation), None);
}

#[test]
fn a_free_cell_hosts_nobody() {
    let cell = ProcessCell::new(usize::MAX);
    assert!(!cell.is_occupied());
    assert_eq!(cell.deliver(0, completion(1)), Admission::Gone);
    assert_eq!(cell.request_terminate(0), Admission::Gone);
    assert_eq!(cell.state(0), None);
    let generation = cell.open();
    assert_eq!(generation, 1);
    assert_eq!(cell.state(generation), Some(ProcessState::Ready));
    assert!(cell.is_occupied());
}

#[test]
fn capacity_drops_messages_but_never_completions() {
    let cell = ProcessCell::new(2);
    let generation = cell.open();
    let msg = |n: u32| Event::Message(crate::process::Message::new("m", Payload::new(n)));
    assert_eq!(cell.deliver(generation, msg(0)), Admission::Accepted);
    assert_eq!(cell.deliver(generation, msg(1)), Admission::Accepted);
    assert_eq!(cell.deliver(generation, msg(2)), Admission::Dropped);
    for tag in 0..5 {
        assert_eq!(
            cell.deliver(generation, completion(tag)),
            Admission::Accepted
        );
    }
    let mut events = Events::default();
    let _ = cell.drain_into(&mut events, usize::MAX, None);
    assert_eq!(events.len(), 7);
    assert_eq!(
        cell.deliver(generation, msg(3)),
        Admission::Accepted,
        "drained: room again"
    );
}

#[test]
fn batches_are_bounded() {
    let (cell, generation) = ProcessCell::new_open();
    for tag in 0..10 {
        let _ = cell.deliver(generation, completion(tag));
    }
    let mut events = Events::default();
    assert_eq!(cell.drain_into(&mut events, 4, None), Drained::More);
    assert_eq!(events.len(), 4);
    assert!(cell.mailbox.has_events());
}

#[test]
fn depth_and_high_water_count_every_kind_of_event_past_the_capacity() {
    // As `ProcessInfo::mailbox_depth` and `mailbox_high_water` document: only messages count
    // against the capacity; completions and an async body's wake-ups queue beside them.
    let cell = ProcessCell::new(2);
    let generation = cell.open();
    let msg = |n: u32| Event::Message(crate::process::Message::new("m", Payload::new(n)));
    for event in [Event::Woken, msg(0), msg(1), Event::Woken, completion(7)] {
        assert_eq!(cell.deliver(generation, event), Admission::Accepted);
    }
    assert_eq!(cell.deliver(generation, msg(2)), Admission::Dropped);
    // A wake-up queues behind the completion; one right behind it is not queued twice.
    for _ in 0..2 {
        assert_eq!(cell.deliver(generation, Event::Woken), Admission::Accepted);
    }
    assert_eq!(cell.info(None).unwrap().mailbox_depth, 6);
    let mut events = Events::default();
    let _ = cell.drain_into(&mut events, usize::MAX, None);
    assert_eq!(cell.info(None).unwrap().mailbox_depth, 0);
    assert_eq!(cell.survey().max_depth, 6, "past the capacity of 2");
}
