//! Loom models of the mailbox's lock-free path (`mailbox/intake.rs`, protocol 7): a lock-free
//! send against the worker's park, against the cell's close and reuse, and one sender's order
//! across the lock-free and the locked path. The intake queue is the real one (`blocks.rs`, two
//! slots per block under loom), so the models explore its protocol and the one around it together.
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_`

use super::support::{drain, Polled};
use crate::loom::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::loom::model::model;
use crate::loom::{thread, Arc};
use crate::process::mailbox::intake::INTAKE_INSTALL_DEPTH;
use crate::process::mailbox::{Admission, Drained, Generation, ProcessCell};
use crate::process::state::{ParkAs, TakeNotified, TransitionToParked};
use crate::process::Payload;
use crate::process::{Event, Events, Message, TopicBudget};

/// A backlog of [`INTAKE_INSTALL_DEPTH`] messages installs the intake queue; drained, the
/// mailbox is empty again. (Before the model's threads start: no interleavings to explore.)
fn install_intake(cell: &ProcessCell, generation: Generation) {
    for n in 0..INTAKE_INSTALL_DEPTH as u64 {
        cell.deliver_message(generation, Message::new("n", Payload::new(n)))
            .unwrap();
    }
    assert_eq!(drain(cell, None), (Drained::All, INTAKE_INSTALL_DEPTH));
    assert_eq!(cell.mailbox.intake_len(), Some(0));
}

fn numbers(events: &mut Events) -> Vec<u64> {
    events
        .drain()
        .map(|event| match event {
            Event::Message(m) => m.payload.take::<u64>().unwrap(),
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

/// A sender thread delivering one message lock-free to the process `polled` hosts.
fn send_one(polled: &Arc<Polled>) -> thread::JoinHandle<()> {
    let polled = polled.clone();
    thread::spawn(move || {
        let message = Message::new("n", Payload::new(7u64));
        polled
            .cell
            .deliver_message(polled.generation, message)
            .unwrap();
    })
}

/// The worker's end of a poll, as the process future does it: parks, draining whenever the
/// park fails — unless the last drain stopped at an unwritten slot, where it does not park but
/// polls again later (a re-queue: modelled as a yield, then a drain). `seen` is what the poll
/// drained before, `last` what its last drain reported; returns what it drained in all.
fn park_draining(polled: &Polled, mut seen: usize, mut last: Drained) -> usize {
    loop {
        if last == Drained::Unwritten {
            thread::yield_now();
            let (drained, n) = drain(&polled.cell, None);
            (last, seen) = (drained, seen + n);
            continue;
        }
        match polled.cell.state.transition_to_parked(ParkAs::Idle) {
            TransitionToParked::Parked => return seen,
            TransitionToParked::Notified => {
                let (drained, n) = drain(&polled.cell, None);
                (last, seen) = (drained, seen + n);
            }
        }
    }
}

/// The one message was either drained by the poll (`seen`), or woke the parked process once
/// and waits in its mailbox — never stranded in the intake queue of a parked process.
fn assert_delivered_once(polled: &Polled, seen: usize) {
    if seen == 0 {
        assert_eq!(
            polled.wakes(),
            1,
            "a parked process with a message was not woken"
        );
        assert!(polled.cell.state.load().is_ready());
        assert_eq!(drain(&polled.cell, None), (Drained::All, 1));
    } else {
        assert_eq!(seen, 1);
        assert!(polled.wakes() <= 1);
        assert_eq!(drain(&polled.cell, None), (Drained::All, 0));
    }
}

/// Protocol 7 step 3: a message pushed without the lock while the worker drains and parks is
/// either drained by this poll (the park fails, or the drain saw it) or wakes the parked process
/// exactly once — never stranded in the intake queue of a parked process.
#[test]
fn loom_lock_free_send_racing_a_park() {
    model(|| {
        let polled = Arc::new(Polled::new());
        install_intake(&polled.cell, polled.generation);
        let sender = send_one(&polled);
        let (drained, seen) = polled.drain_registering();
        let seen = park_draining(&polled, seen, drained);
        sender.join().unwrap();
        assert_delivered_once(&polled, seen);
    });
}

/// Protocol 7, "No wake is lost", when the sender writes nothing: the poll is already flagged
/// when the sender's step 3 reads the state word, and the worker is clearing that flag to drain.
/// The worker's drain sees the message (its emptiness check is a CAS of the queue's tail), or
/// the sender sees the flag cleared and sets it again, so the park that follows fails, or wakes.
#[test]
fn loom_lock_free_send_finding_the_poll_flagged() {
    model(|| {
        let polled = Arc::new(Polled::new());
        install_intake(&polled.cell, polled.generation);
        let _ = polled.drain_registering();
        // Something arrived earlier in this poll (the backlog that installed the intake
        // queue did too): `NOTIFIED` is set.
        let _ = polled.cell.state.transition_on_event();
        assert!(polled.cell.state.load().is_notified());
        let sender = send_one(&polled);
        let (mut seen, mut last) = (0, Drained::All);
        if polled.cell.state.take_notified() == TakeNotified::Notified {
            (last, seen) = drain(&polled.cell, None);
        }
        let seen = park_draining(&polled, seen, last);
        sender.join().unwrap();
        assert_delivered_once(&polled, seen);
    });
}

/// Protocol 7 steps 4 and 5: a lock-free send bound to a finishing process, racing close → release →
/// open, is refused, or accepted and dropped — by `close`, or by its own sender when it finds
/// the process gone after its push — before the send returns: never left in the queue for a
/// next process to find; it never reaches the next process, and its payload is dropped exactly
/// once.
#[test]
fn loom_lock_free_send_racing_close_and_reuse() {
    struct Counted(std::sync::Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    model(|| {
        let cell = Arc::new(ProcessCell::new(usize::MAX));
        let old = cell.open();
        install_intake(&cell, old);
        let drops = std::sync::Arc::new(AtomicUsize::new(0));
        let sender = {
            let cell = cell.clone();
            let payload = Payload::new(Counted(drops.clone()));
            thread::spawn(
                move || match cell.deliver_message(old, Message::new("late", payload)) {
                    Ok(()) => Admission::Accepted,
                    Err((refused, message)) => {
                        drop(message);
                        refused
                    }
                },
            )
        };
        cell.close();
        assert_eq!(cell.release().0, old);
        let new = cell.open();
        let admission = sender.join().unwrap();
        assert!(matches!(
            admission,
            Admission::Accepted | Admission::Closed | Admission::Gone
        ));
        assert_eq!(
            drops.load(SeqCst),
            1,
            "dropped once, whatever the path, by the time both are done"
        );
        let mut events = Events::default();
        let _ = cell.drain_into(&mut events, 8, None);
        assert!(events.is_empty(), "a message to {old} reached {new}");
    });
}

/// Protocol 7, "Each sender's messages stay in order": one sender's messages through the intake
/// queue, then the locked path (a budgeted one), then the intake queue again, against a worker
/// draining one at a time, arrive in the order sent.
#[test]
fn loom_one_senders_messages_keep_their_order_across_both_paths() {
    model(|| {
        let cell = Arc::new(ProcessCell::new(usize::MAX));
        let generation = cell.open();
        install_intake(&cell, generation);
        let sender = {
            let cell = cell.clone();
            thread::spawn(move || {
                let budget = TopicBudget {
                    max_items: 8,
                    max_bytes: usize::MAX,
                };
                for n in 1..=3u64 {
                    let mut message = Message::new("n", Payload::new(n));
                    if n == 2 {
                        message = message.with_budget(budget, 1);
                    }
                    cell.deliver_message(generation, message).unwrap();
                }
            })
        };
        let mut events = Events::default();
        let _ = cell.drain_into(&mut events, 1, None);
        let _ = cell.drain_into(&mut events, 1, None);
        sender.join().unwrap();
        let _ = cell.drain_into(&mut events, 8, None);
        assert_eq!(numbers(&mut events), [1, 2, 3]);
    });
}

/// Protocol 7, "Each sender's messages stay in order", past a slot a sender claimed and has not
/// written: sender A pushes one message lock-free (loom may preempt it between its claim and its
/// write); sender B pushes one lock-free, one locked (budgeted) and one lock-free again; the
/// worker drains meanwhile. No consumer waits for A's write under the lock (a wait would be a
/// spin loop loom cannot bound: the model would not finish), every message arrives once, B's in
/// the order sent, and the last drain ends any diversion.
#[test]
fn loom_a_locked_push_behind_an_unwritten_slot_never_waits_and_keeps_the_order() {
    // Outside the model (std, not loom): some explored execution diverted a locked push.
    let diverted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen_diverted = diverted.clone();
    model(move || {
        let cell = Arc::new(ProcessCell::new(usize::MAX));
        let generation = cell.open();
        install_intake(&cell, generation);
        let sender_a = {
            let cell = cell.clone();
            thread::spawn(move || {
                cell.deliver_message(generation, Message::new("a", Payload::new(100u64)))
                    .unwrap();
            })
        };
        let sender_b = {
            let cell = cell.clone();
            thread::spawn(move || {
                let budget = TopicBudget {
                    max_items: 8,
                    max_bytes: usize::MAX,
                };
                for n in 1..=3u64 {
                    let mut message = Message::new("b", Payload::new(n));
                    if n == 2 {
                        message = message.with_budget(budget, 1);
                    }
                    cell.deliver_message(generation, message).unwrap();
                }
            })
        };
        let mut events = Events::default();
        let _ = cell.drain_into(&mut events, 8, None);
        if cell.mailbox.is_diverted() {
            seen_diverted.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        sender_a.join().unwrap();
        sender_b.join().unwrap();
        let _ = cell.drain_into(&mut events, 8, None);
        let got = numbers(&mut events);
        let from_b: Vec<u64> = got.iter().copied().filter(|&n| n < 100).collect();
        assert_eq!(from_b, [1, 2, 3], "B's messages in the order sent: {got:?}");
        assert_eq!(got.len(), 4, "every message once: {got:?}");
        assert!(!cell.mailbox.is_diverted());
    });
    assert!(
        diverted.load(std::sync::atomic::Ordering::Relaxed),
        "no execution diverted a locked push: the model misses its point"
    );
}
