//! Loom models of the mailbox's cell lifecycle (`mailbox/mod.rs`): generations against stale
//! producers, and `close` against a concurrent delivery.
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_`

use super::support::{drain, Polled};
use crate::loom::model::model;
use crate::loom::{thread, Arc};
use crate::process::mailbox::{Admission, Drained, Generation, ProcessCell, Ticket};
use crate::process::state::{ParkAs, TransitionToParked};
use crate::process::{CommandError, Event, Events, Pid};
use std::task::Waker;

/// An open cell and the PID of its first incarnation.
fn open_cell() -> (Arc<ProcessCell>, Pid) {
    let cell = Arc::new(ProcessCell::new(usize::MAX));
    let pid = Pid::new(0, cell.open());
    (cell, pid)
}

/// `mailbox/mod.rs`, "generations guard them": a completion bound to a finished incarnation never
/// reaches the cell's next process, wherever it lands in close → release → open.
#[test]
fn loom_stale_completion_racing_with_the_cells_reuse() {
    model(|| {
        let (cell, old) = open_cell();
        let late = {
            let cell = cell.clone();
            thread::spawn(move || {
                cell.deliver(
                    old.generation(),
                    Event::YieldComplete {
                        tag: 1,
                        result: Err(CommandError::Cancelled),
                    },
                )
            })
        };
        // The process finishes and the cell hosts the next one.
        cell.close();
        assert_eq!(cell.release().0, old.generation());
        let new = cell.open();
        let outcome = late.join().unwrap();
        let mut events = Events::default();
        let _ = cell.drain_into(&mut events, 8, None);
        // Whenever it landed — in the old incarnation (and was dropped at close), while closing,
        // or after — it never reaches the new one.
        assert!(
            events.is_empty(),
            "a stale completion reached the next process"
        );
        assert!(matches!(
            outcome,
            Admission::Accepted | Admission::Closed | Admission::Gone
        ));
        assert_ne!(old.generation(), new);
    });
}

/// `state.rs` protocol 6 and `mailbox/mod.rs`'s `Closing` phase: a delivery racing `close` of a
/// parked process is refused, or accepted and dropped by `close`; either way the word ends
/// `Complete`, nothing stays queued for the cell's next process, and a refused event wakes
/// nobody.
#[test]
fn loom_close_racing_an_event() {
    model(|| {
        let polled = Arc::new(Polled::new());
        assert_eq!(polled.drain_registering(), (Drained::All, 0));
        let parked = polled.cell.state.transition_to_parked(ParkAs::Idle);
        assert_eq!(parked, TransitionToParked::Parked);
        let producer = {
            let polled = polled.clone();
            thread::spawn(move || {
                let completion = Event::YieldComplete {
                    tag: 1,
                    result: Err(CommandError::Cancelled),
                };
                polled.cell.deliver(polled.generation, completion)
            })
        };
        polled.cell.close();
        let admission = producer.join().unwrap();
        match admission {
            Admission::Accepted => assert!(polled.wakes() <= 1),
            Admission::Closed => assert_eq!(polled.wakes(), 0, "refused: no wake"),
            other => panic!("{other:?}"),
        }
        assert!(polled.cell.state.load().is_complete());
        assert_eq!(drain(&polled.cell, None), (Drained::All, 0));
        // The cell hosts its next process, which starts with an empty mailbox.
        assert_eq!(polled.cell.release().0, polled.generation);
        let next = polled.cell.open();
        assert_ne!(next, polled.generation);
        assert!(polled.cell.state.load().is_ready());
        assert_eq!(drain(&polled.cell, None), (Drained::All, 0));
    });
}

/// A thread that delivers the answer to ask `tag` of the process `pid` in `cell`; joined, it
/// says whether the answer was queued (the answerer's `Reply::send` would be `Ok`).
fn answer_from_another_thread(
    cell: &Arc<ProcessCell>,
    pid: Pid,
    tag: u64,
) -> thread::JoinHandle<bool> {
    let cell = cell.clone();
    thread::spawn(move || {
        let answer = Event::YieldComplete {
            tag,
            result: Err(CommandError::Cancelled),
        };
        cell.deliver_or_return(pid.generation(), answer).is_ok()
    })
}

/// `mailbox/abandoned.rs`: an ask's answer racing the asking body giving up on it. Decided
/// under the lock, exactly one of: the answer was queued first (the answerer's `Ok`; the body
/// finds it queued and records nothing), or the body gave up first (the answer is refused and
/// handed back, and the record leaves with it). Never both, never neither, and nothing is left
/// recorded either way: a port delivers once.
#[test]
fn loom_an_answer_racing_its_asks_abandonment_is_refused_or_queued_never_both() {
    model(|| {
        let (cell, pid) = open_cell();
        let answerer = answer_from_another_thread(&cell, pid, 7);
        cell.abandon_ask(pid.generation(), 7);
        let delivered = answerer.join().unwrap();
        let mut events = Events::default();
        let _ = cell.drain_into(&mut events, 8, None);
        assert_eq!(events.len(), usize::from(delivered), "queued iff delivered");
        // Nothing stays recorded: a later answer with that tag (none can come: a port delivers
        // once) would be queued, and the asker counts as waiting again.
        assert!(cell.awaits_answer(pid.generation(), 7));
    });
}

/// `mailbox/abandoned.rs`: an answer racing its ask's timeout. Decided under the lock,
/// exactly one of: the answer was queued first (its `Reply::send` was `Ok`) and the timeout
/// finds it — the ask takes it — or the timeout came first and the answer is refused (handed
/// back). Never delivered and then dropped unread.
#[test]
fn loom_an_answer_racing_its_asks_timeout_is_taken_or_refused_never_lost() {
    model(|| {
        let (cell, pid) = open_cell();
        let answerer = answer_from_another_thread(&cell, pid, 7);
        let taken = cell.time_out_ask(pid.generation(), 7);
        let delivered = answerer.join().unwrap();
        assert_eq!(
            taken, delivered,
            "the ask takes exactly the answers sent Ok"
        );
        let mut events = Events::default();
        let _ = cell.drain_into(&mut events, 8, None);
        assert_eq!(events.len(), usize::from(delivered), "queued iff delivered");
        assert!(cell.awaits_answer(pid.generation(), 7));
    });
}

/// `mailbox/room.rs`, protocol 12: a sender refused by a full bounded mailbox racing the drain
/// that makes room. Decided under the lock, exactly one of: it finds the room (its wait is
/// refused, and its retry is delivered), or its waker is kept and the drain takes and wakes
/// it. Never kept past the room: no lost wake, so no sender waits for ever beside room.
#[test]
fn loom_a_sender_waiting_for_room_is_woken_by_the_drain_that_makes_it() {
    use super::support::WakeCounter;
    use crate::process::{Message, Payload};
    model(|| {
        let cell = Arc::new(ProcessCell::new(1));
        let generation = cell.open();
        let message = |n: u64| Message::new("n", Payload::new(n));
        assert!(cell.deliver_message(generation, message(1)).is_ok());
        let wakes = std::sync::Arc::new(WakeCounter::new());
        let waker = futures::task::waker(wakes.clone());
        let sender = {
            let cell = cell.clone();
            thread::spawn(move || match cell.deliver_message(generation, message(2)) {
                Ok(()) => "delivered",
                Err((Admission::Dropped, refused)) => {
                    if cell.wait_for_room(generation, &waker, &mut None) {
                        "waits"
                    } else {
                        assert!(cell.deliver_message(generation, refused).is_ok());
                        "delivered after its wait was refused"
                    }
                }
                Err((other, _)) => panic!("{other:?}"),
            })
        };
        assert_eq!(drain(&cell, None), (Drained::All, 1), "the first message");
        let outcome = sender.join().unwrap();
        match outcome {
            "waits" => assert_eq!(wakes.count(), 1, "the drain woke it"),
            _ => assert_eq!(wakes.count(), 0),
        }
    });
}

/// A sender waiting in a mailbox's line for room: the wakes of its waker, the waker, and its
/// place in the line.
struct InLine {
    wakes: std::sync::Arc<super::support::WakeCounter>,
    waker: Waker,
    ticket: Ticket,
}

/// A cell hosting a process whose one-message mailbox is full (message 1, unread), and two
/// senders waiting in its line for room: the first, then the second.
fn two_in_line_behind_a_full_mailbox() -> (Arc<ProcessCell>, Generation, InLine, InLine) {
    use super::support::WakeCounter;
    use crate::process::{Message, Payload};
    let cell = Arc::new(ProcessCell::new(1));
    let generation = cell.open();
    assert!(cell
        .deliver_message(generation, Message::new("n", Payload::new(1u64)))
        .is_ok());
    let in_line = || {
        let wakes = std::sync::Arc::new(WakeCounter::new());
        let waker = futures::task::waker(wakes.clone());
        let mut ticket = None;
        assert!(cell.wait_for_room(generation, &waker, &mut ticket));
        InLine {
            wakes,
            waker,
            ticket: ticket.expect("in line"),
        }
    };
    let first = in_line();
    let second = in_line();
    (cell, generation, first, second)
}

/// `mailbox/room.rs`, protocol 12 step 4: two senders wait behind a full one-message mailbox;
/// a drain makes room for one, and the first in line gives up as that happens. Whichever comes
/// first, the room reaches the second: woken by the drain (the first had left the line), or by
/// the first, passing on the room it was woken for. Never both in line and room unused.
#[test]
fn loom_a_woken_sender_that_gives_up_passes_the_room_on() {
    model(|| {
        let (cell, generation, first, second) = two_in_line_behind_a_full_mailbox();
        let quitter = {
            let cell = cell.clone();
            let ticket = first.ticket;
            thread::spawn(move || cell.leave_room_line(generation, ticket))
        };
        assert_eq!(drain(&cell, None), (Drained::All, 1), "the first message");
        quitter.join().unwrap();
        assert_eq!(
            second.wakes.count(),
            1,
            "the room reached the second in line"
        );
        assert!(first.wakes.count() <= 1);
    });
}

/// `mailbox/room.rs`, protocol 12 step 4, as a `send_wait` whose body hears its cancel gives
/// up: two senders wait behind a full one-message mailbox; the first is polled again (for its
/// cancel: `still_in_line`, the poll's first look) while a drain makes room for one. Still in
/// line, it gives up; woken, it tries, and the room is its own. Whichever comes first, room
/// made is used or reaches the second in line: a waiter leaving on its cancel never strands
/// the one behind it.
#[test]
fn loom_a_sender_that_gives_up_on_its_cancel_while_polled_passes_the_room_on() {
    use crate::process::{Message, Payload};
    model(|| {
        let (cell, generation, first, second) = two_in_line_behind_a_full_mailbox();
        let message = |n: u64| Message::new("n", Payload::new(n));
        let cancelled = {
            let cell = cell.clone();
            let (ticket, first_waker) = (first.ticket, first.waker);
            thread::spawn(move || {
                let outcome = if cell.still_in_line(generation, ticket, &first_waker) {
                    // Its body's cancel, heard while it waits: it gives up.
                    "gave up"
                } else {
                    // Woken by the drain: delivery comes before the cancel, on its room.
                    assert!(cell.deliver_message(generation, message(2)).is_ok());
                    "delivered"
                };
                cell.leave_room_line(generation, ticket);
                outcome
            })
        };
        assert_eq!(drain(&cell, None), (Drained::All, 1), "the first message");
        match cancelled.join().unwrap() {
            "gave up" => assert_eq!(second.wakes.count(), 1, "the room reached the second"),
            _ => assert_eq!(
                second.wakes.count(),
                0,
                "the room was the first's, and used"
            ),
        }
        assert!(first.wakes.count() <= 1);
    });
}
