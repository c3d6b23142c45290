//! The mailbox's lock-free path (`mailbox/intake.rs`): when the intake queue is installed, what
//! takes it, the order of one sender's messages across both paths, stale events, and what the
//! queue keeps.

use crate::loom::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::process::mailbox::blocks::BLOCK_CAP;
use crate::process::mailbox::drain::SETTLE_AT_MOST;
use crate::process::mailbox::intake::{Stamped, INTAKE_INSTALL_DEPTH};
use crate::process::mailbox::{Admission, Drained, Generation, Incarnation, ProcessCell};
use crate::process::Payload;
use crate::process::{CommandError, Event, Events, Message, Pid, TopicBudget};
use std::sync::Arc;

fn message(n: u64) -> Message {
    Message::new("n", Payload::new(n))
}

fn send(cell: &ProcessCell, generation: Generation, n: u64) {
    cell.deliver_message(generation, message(n))
        .expect("the mailbox accepts the message");
}

/// The numbers of the drained messages, and completion tags as `1000 + tag`.
fn drain_numbers(cell: &ProcessCell, max: usize) -> (Drained, Vec<u64>) {
    let mut events = Events::default();
    let drained = cell.drain_into(&mut events, max, None);
    let numbers = events
        .drain()
        .map(|event| match event {
            Event::Message(m) => m.payload.take::<u64>().unwrap(),
            Event::YieldComplete { tag, .. } => 1000 + tag,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    (drained, numbers)
}

/// Drains batch after batch of `max` until the mailbox is empty.
fn drain_all(cell: &ProcessCell, max: usize) -> Vec<u64> {
    let mut all = Vec::new();
    loop {
        let (drained, numbers) = drain_numbers(cell, max);
        assert!(numbers.len() <= max);
        all.extend(numbers);
        if drained == Drained::All {
            return all;
        }
    }
}

/// Counts its drops: a payload that must be dropped exactly once.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn counted(drops: &Arc<AtomicUsize>) -> Event {
    Event::Message(counted_message(drops))
}

fn counted_message(drops: &Arc<AtomicUsize>) -> Message {
    Message::new("c", Payload::new(Counted(drops.clone())))
}

#[test]
fn a_lone_message_takes_the_locked_path_and_installs_nothing() {
    let (cell, generation) = ProcessCell::new_open();
    send(&cell, generation, 1);
    assert_eq!(cell.mailbox.intake_len(), None);
    assert_eq!(drain_all(&cell, 8), [1]);
    send(&cell, generation, 2);
    assert_eq!(
        cell.mailbox.intake_len(),
        None,
        "one at a time is no backlog"
    );
}

/// A backlog of [`INTAKE_INSTALL_DEPTH`] messages installs the intake queue; drained, the
/// mailbox is empty again.
fn install_intake(cell: &ProcessCell, generation: Generation) {
    for n in 0..INTAKE_INSTALL_DEPTH as u64 {
        send(cell, generation, n);
    }
    assert_eq!(cell.mailbox.intake_len(), Some(0));
    assert_eq!(drain_all(cell, 64).len(), INTAKE_INSTALL_DEPTH);
}

#[test]
fn a_lasting_backlog_installs_the_intake_queue_and_later_messages_take_it_in_order() {
    let (cell, generation) = ProcessCell::new_open();
    let depth = INTAKE_INSTALL_DEPTH as u64;
    for n in 0..depth - 1 {
        send(&cell, generation, n);
    }
    assert_eq!(
        cell.mailbox.intake_len(),
        None,
        "a short backlog installs nothing"
    );
    send(&cell, generation, depth - 1);
    assert_eq!(cell.mailbox.intake_len(), Some(0), "this one installed it");
    send(&cell, generation, depth);
    send(&cell, generation, depth + 1);
    assert_eq!(cell.mailbox.intake_len(), Some(2));
    assert_eq!(cell.info(None).unwrap().mailbox_depth, depth as usize + 2);
    assert_eq!(drain_all(&cell, 3), (0..depth + 2).collect::<Vec<_>>());
    assert_eq!(cell.survey().max_depth, depth as usize + 2);
}

#[test]
fn one_senders_messages_keep_their_order_across_both_paths() {
    let (cell, generation) = ProcessCell::new_open();
    install_intake(&cell, generation);
    send(&cell, generation, 0);
    send(&cell, generation, 1);
    let budget = TopicBudget {
        max_items: 100,
        max_bytes: usize::MAX,
    };
    for n in 2..40 {
        if n % 5 == 0 {
            // Budgeted: the locked path, behind the intake queue's messages.
            cell.deliver_message(generation, message(n).with_budget(budget, 1))
                .unwrap();
        } else if n % 7 == 0 {
            let completion = Event::YieldComplete {
                tag: n,
                result: Err(CommandError::Cancelled),
            };
            assert_eq!(cell.deliver(generation, completion), Admission::Accepted);
        } else {
            send(&cell, generation, n);
        }
    }
    let expected: Vec<u64> = (0..40)
        .map(|n| {
            if n % 7 == 0 && n % 5 != 0 && n >= 2 {
                1000 + n
            } else {
                n
            }
        })
        .collect();
    assert_eq!(drain_all(&cell, 4), expected);
}

#[test]
fn a_flood_across_several_blocks_stays_lock_free_and_in_order() {
    let (cell, generation) = ProcessCell::new_open();
    let total = BLOCK_CAP as u64 * 3 + 5;
    for n in 0..total {
        send(&cell, generation, n);
    }
    // All but the backlog that installed the intake queue went through it.
    assert_eq!(
        cell.mailbox.intake_len(),
        Some(total as usize - INTAKE_INSTALL_DEPTH)
    );
    assert_eq!(cell.info(None).unwrap().mailbox_depth, total as usize);
    assert_eq!(drain_all(&cell, 7), (0..total).collect::<Vec<_>>());
    // Interleaved sends and drains: still one order.
    let mut seen = Vec::new();
    for n in 0..total {
        send(&cell, generation, n);
        if n % 11 == 0 {
            seen.extend(drain_numbers(&cell, 5).1);
        }
    }
    seen.extend(drain_all(&cell, 5));
    assert_eq!(seen, (0..total).collect::<Vec<_>>());
}

#[test]
fn a_bounded_mailbox_never_installs_an_intake_queue() {
    let cell = ProcessCell::new(4);
    let generation = cell.open();
    for n in 0..4 {
        send(&cell, generation, n);
    }
    let refused = cell.deliver_message(generation, message(4)).unwrap_err();
    assert_eq!(refused.0, Admission::Dropped);
    assert_eq!(cell.mailbox.intake_len(), None);
    assert_eq!(drain_all(&cell, 8), [0, 1, 2, 3]);
}

#[test]
fn a_bounded_incarnation_after_one_with_an_intake_queue_counts_every_message() {
    // The capacity is the incarnation's: a cell that hosted an unbounded process (a
    // supervisor) keeps its intake queue, and the bounded process it hosts next must still
    // count every message, whichever send path it takes.
    let (cell, unbounded) = ProcessCell::new_open();
    install_intake(&cell, unbounded);
    cell.close();
    let _ = cell.release();
    let generation = cell.open_as(Incarnation::default(), 2, 0);
    assert!(cell.is_bounded());
    send(&cell, generation, 0);
    cell.deliver_unbudgeted(generation, || message(1)).unwrap();
    let refused = cell.deliver_message(generation, message(2)).unwrap_err();
    assert_eq!(refused.0, Admission::Dropped);
    let refused = cell
        .deliver_unbudgeted(generation, || message(3))
        .unwrap_err();
    assert_eq!(refused.0, Admission::Dropped);
    assert_eq!(
        cell.mailbox.intake_len(),
        Some(0),
        "nothing took the intake queue"
    );
    assert_eq!(drain_all(&cell, 8), [0, 1]);
    send(&cell, generation, 4);
    cell.close();
    let _ = cell.release();
    let next = cell.open_as(Incarnation::default(), usize::MAX, 0);
    assert!(!cell.is_bounded(), "and the next may be unbounded again");
    cell.deliver_unbudgeted(next, || message(5)).unwrap();
    assert_eq!(
        cell.mailbox.intake_len(),
        Some(1),
        "unbounded: the lock-free path"
    );
    assert_eq!(drain_all(&cell, 8), [5]);
}

#[test]
fn close_drops_the_intake_messages_once_and_the_next_process_starts_empty() {
    let (cell, generation) = ProcessCell::new_open();
    let drops = Arc::new(AtomicUsize::new(0));
    install_intake(&cell, generation);
    for _ in 0..3 {
        cell.deliver(generation, counted(&drops));
    }
    // Those went through the locked path (`deliver` takes it for every event); now the intake
    // queue:
    for _ in 0..3 {
        let Event::Message(m) = counted(&drops) else {
            unreachable!()
        };
        cell.deliver_message(generation, m).unwrap();
    }
    assert_eq!(cell.mailbox.intake_len(), Some(3));
    cell.close();
    assert_eq!(drops.load(SeqCst), 6);
    assert_eq!(cell.release().0, generation);
    let next = cell.open();
    assert_eq!(
        cell.mailbox.intake_len(),
        Some(0),
        "the intake queue stays with the cell"
    );
    assert!(drain_all(&cell, 8).is_empty());
    send(&cell, next, 7);
    assert_eq!(drain_all(&cell, 8), [7]);
    assert_eq!(drops.load(SeqCst), 6);
}

#[test]
fn a_message_a_late_sender_pushed_after_close_never_reaches_the_next_process() {
    let (cell, old) = ProcessCell::new_open();
    let drops = Arc::new(AtomicUsize::new(0));
    install_intake(&cell, old);
    cell.close();
    // A sender that read the open gate just before `close` pushes now.
    assert!(cell.mailbox.push_to_intake(old, counted(&drops)).is_ok());
    assert_eq!(cell.release().0, old);
    let new = cell.open();
    send(&cell, new, 5);
    // The next process's drain finds it stale and drops it, once.
    assert_eq!(drain_all(&cell, 8), [5]);
    assert_eq!(drops.load(SeqCst), 1);
    // A stale event met by a locked push is dropped too.
    assert!(cell.mailbox.push_to_intake(old, counted(&drops)).is_ok());
    let completion = Event::YieldComplete {
        tag: 3,
        result: Err(CommandError::Cancelled),
    };
    assert_eq!(cell.deliver(new, completion), Admission::Accepted);
    assert_eq!(drops.load(SeqCst), 2);
    assert_eq!(drain_all(&cell, 8), [1003]);
}

#[test]
fn dropping_the_cell_drops_what_its_intake_queue_holds() {
    let drops = Arc::new(AtomicUsize::new(0));
    {
        let (cell, generation) = ProcessCell::new_open();
        install_intake(&cell, generation);
        cell.close();
        assert!(cell
            .mailbox
            .push_to_intake(generation, counted(&drops))
            .is_ok());
        assert_eq!(drops.load(SeqCst), 0);
    }
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn refusals_are_the_same_with_an_intake_queue_installed() {
    let (cell, old) = ProcessCell::new_open();
    install_intake(&cell, old);
    cell.close();
    assert_eq!(
        cell.deliver_message(old, message(2)).unwrap_err().0,
        Admission::Closed
    );
    assert_eq!(cell.release().0, old);
    assert_eq!(
        cell.deliver_message(old, message(3)).unwrap_err().0,
        Admission::Gone
    );
    let new = cell.open();
    assert_eq!(
        cell.deliver_message(old, message(4)).unwrap_err().0,
        Admission::Gone
    );
    assert_eq!(cell.mailbox.intake_len(), Some(0));
    send(&cell, new, 9);
    assert_eq!(drain_all(&cell, 8), [9]);
}

/// A sender preempted between its claim and its write: the drain takes what is before its slot
/// and stops there without waiting; a locked push behind it starts a diversion (later senders
/// take the lock and queue behind it); once the slot is written, the next drain takes the rest
/// in the order sent and ends the diversion.
#[test]
fn an_unwritten_slot_stops_the_drain_and_diverts_later_locked_pushes_without_waiting() {
    let (cell, generation) = ProcessCell::new_open();
    install_intake(&cell, generation);
    send(&cell, generation, 0);
    let claim = cell.mailbox.claim_intake_slot().expect("installed");
    send(&cell, generation, 2);
    assert_eq!(
        drain_numbers(&cell, 8),
        (Drained::Unwritten, vec![0]),
        "stops at the slot"
    );
    // A completion (always locked) meets the unwritten slot: it goes behind, no waiting.
    let completion = Event::YieldComplete {
        tag: 3,
        result: Err(CommandError::Cancelled),
    };
    assert_eq!(cell.deliver(generation, completion), Admission::Accepted);
    assert!(cell.mailbox.is_diverted());
    // Diverted: this one takes the lock too, and queues behind the completion.
    send(&cell, generation, 4);
    assert_eq!(cell.mailbox.intake_len(), Some(2), "the claimed slot and 2");
    assert_eq!(cell.info(None).unwrap().mailbox_depth, 4);
    assert_eq!(
        drain_numbers(&cell, 8),
        (Drained::Unwritten, vec![]),
        "still stopped"
    );
    claim.write(Stamped::new(generation, message(1)));
    assert_eq!(drain_all(&cell, 2), [1, 2, 1003, 4]);
    assert!(!cell.mailbox.is_diverted(), "the drain ended the diversion");
    send(&cell, generation, 5);
    assert_eq!(cell.mailbox.intake_len(), Some(1), "lock-free again");
    assert_eq!(drain_all(&cell, 8), [5]);
}

/// A locked push into a long backlog moves at most `SETTLE_AT_MOST` of it under the lock and
/// goes behind the rest (a diversion): one push never pays for the whole backlog, and the
/// order holds — later senders queue behind the push until the drain reaches it.
#[test]
fn a_locked_push_into_a_long_backlog_moves_a_bounded_part_and_keeps_the_order() {
    let (cell, generation) = ProcessCell::new_open();
    install_intake(&cell, generation);
    let backlog = SETTLE_AT_MOST as u64 * 3 + 7;
    for n in 0..backlog {
        send(&cell, generation, n);
    }
    assert_eq!(cell.mailbox.intake_len(), Some(backlog as usize));
    let completion = Event::YieldComplete {
        tag: backlog,
        result: Err(CommandError::Cancelled),
    };
    assert_eq!(cell.deliver(generation, completion), Admission::Accepted);
    assert_eq!(
        cell.mailbox.intake_len(),
        Some(backlog as usize - SETTLE_AT_MOST),
        "one push moved no more than its bound"
    );
    assert!(cell.mailbox.is_diverted(), "the push went behind the rest");
    // Diverted: a message sent now takes the lock and queues behind the completion; another
    // locked push moves the next part.
    send(&cell, generation, backlog + 1);
    assert_eq!(
        cell.mailbox.intake_len(),
        Some(backlog as usize - 2 * SETTLE_AT_MOST)
    );
    let mut expected: Vec<u64> = (0..backlog).collect();
    expected.extend([1000 + backlog, backlog + 1]);
    assert_eq!(drain_all(&cell, 64), expected);
    assert!(!cell.mailbox.is_diverted(), "the drain ended the diversion");
    send(&cell, generation, 0);
    assert_eq!(cell.mailbox.intake_len(), Some(1), "lock-free again");
    assert_eq!(drain_all(&cell, 8), [0]);
}

/// A locked push that finds the slot written since moves the intake queue and the diverted
/// events into the locked queue, in order, and ends the diversion itself.
#[test]
fn a_locked_push_ends_a_diversion_once_the_slot_is_written() {
    let (cell, generation) = ProcessCell::new_open();
    install_intake(&cell, generation);
    let claim = cell.mailbox.claim_intake_slot().expect("installed");
    send(&cell, generation, 1);
    let budget = TopicBudget {
        max_items: 100,
        max_bytes: usize::MAX,
    };
    cell.deliver_message(generation, message(2).with_budget(budget, 1))
        .unwrap();
    assert!(cell.mailbox.is_diverted());
    claim.write(Stamped::new(generation, message(0)));
    cell.deliver_message(generation, message(3).with_budget(budget, 1))
        .unwrap();
    assert!(!cell.mailbox.is_diverted());
    assert_eq!(cell.mailbox.intake_len(), Some(0));
    assert_eq!(drain_all(&cell, 8), [0, 1, 2, 3]);
    assert_eq!(
        cell.mailbox.topic_entries().0,
        0,
        "the budget was given back"
    );
}

/// `close` during a diversion drops what it holds once and ends it; it waits for a slot a
/// sender claimed and has not written (the sender, here on another thread, writes next), so
/// that what it holds goes with the process too; the next process starts clean.
#[test]
fn close_during_a_diversion_drops_everything_once_and_the_next_process_starts_clean() {
    /// The claimed slot, handed to the thread that writes it.
    struct Claimed<'a>(crate::process::mailbox::blocks::Claim<'a, Stamped>);
    // SAFETY: a claim is written once, by whichever thread holds it; its block outlives the
    // scope (the cell does).
    unsafe impl Send for Claimed<'_> {}

    let (cell, old) = ProcessCell::new_open();
    install_intake(&cell, old);
    let drops = Arc::new(AtomicUsize::new(0));
    let claim = Claimed(cell.mailbox.claim_intake_slot().expect("installed"));
    cell.mailbox.push_to_intake(old, counted(&drops)).unwrap();
    assert_eq!(cell.deliver(old, counted(&drops)), Admission::Accepted);
    assert!(cell.mailbox.is_diverted());
    std::thread::scope(|scope| {
        let late = counted_message(&drops);
        scope.spawn(move || {
            let claim = claim;
            claim.0.write(Stamped::new(old, late));
        });
        let _ = cell.close();
    });
    assert_eq!(
        drops.load(SeqCst),
        3,
        "the diverted event, the one behind the slot and the slot's, all by close"
    );
    assert!(!cell.mailbox.is_diverted());
    let _ = cell.release();
    let new = cell.open();
    send(&cell, new, 7);
    assert_eq!(drain_all(&cell, 8), [7]);
    assert_eq!(drops.load(SeqCst), 3);
}

/// A sender that read the gate open just before `close` and pushes after it took the intake
/// queue's contents finds the process gone when it looks again, and drops its message before
/// its send returns — it does not wait in the queue for a next process (a `Reply` inside would
/// leave its asker waiting). With a next process open by then, that process's messages stay.
#[test]
fn a_push_that_lands_after_close_is_dropped_by_its_own_sender() {
    let (cell, old) = ProcessCell::new_open();
    install_intake(&cell, old);
    let drops = Arc::new(AtomicUsize::new(0));
    let _ = cell.close();
    cell.push_late(old, counted_message(&drops));
    assert_eq!(drops.load(SeqCst), 1, "closing");
    let _ = cell.release();
    cell.push_late(old, counted_message(&drops));
    assert_eq!(drops.load(SeqCst), 2, "released");
    let new = cell.open();
    send(&cell, new, 7);
    cell.push_late(old, counted_message(&drops));
    assert_eq!(drops.load(SeqCst), 3, "the next process open");
    send(&cell, new, 8);
    assert_eq!(drain_all(&cell, 8), [7, 8]);
}

/// The intake queue keeps a typed send's message in its payload alone (`Stamped`); every other
/// message keeps its sender and topic beside it. Both come out as they went in.
#[test]
fn messages_keep_their_sender_and_topic_through_the_intake_queue() {
    let (cell, generation) = ProcessCell::new_open();
    install_intake(&cell, generation);
    let typed = crate::process::typed::into_message(7u64);
    let sender = Pid::new(3, 1);
    let sent = [
        typed,
        Message::new("n", Payload::new(8u64)),
        Message::new(String::from("owned"), Payload::new(9u64)),
        Message::new(std::any::type_name::<u64>(), Payload::new(10u64)).with_from(sender),
    ];
    for message in sent {
        cell.deliver_message(generation, message).unwrap();
    }
    assert_eq!(
        cell.mailbox.intake_len(),
        Some(4),
        "all four took the intake"
    );
    let mut events = Events::default();
    assert_eq!(cell.drain_into(&mut events, 64, None), Drained::All);
    let received: Vec<_> = events
        .drain()
        .map(|event| match event {
            Event::Message(m) => (
                m.from,
                m.topic.into_owned(),
                m.payload.take::<u64>().unwrap(),
            ),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        received,
        [
            (None, "u64".to_owned(), 7),
            (None, "n".to_owned(), 8),
            (None, "owned".to_owned(), 9),
            (Some(sender), "u64".to_owned(), 10),
        ]
    );
}
