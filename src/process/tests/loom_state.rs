//! Loom models of the process state word's protocols (`state.rs`), on the word and the mailbox
//! alone: the worker's side of a poll is written out by hand, so each model is small enough for
//! two preemptions. The same protocols run end to end on the executor in `loom_process.rs`.
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_`

use super::support::{drain, Polled};
use crate::loom::model::model;
use crate::loom::{thread, Arc};
use crate::process::mailbox::{Admission, Drained};
use crate::process::state::{ParkAs, TakeNotified, TransitionToParked};
use crate::process::{CommandError, Event};

/// How the worker's side of a poll ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// Parked, having drained this many events.
    Parked(usize),
    /// A drain reported the terminate request.
    Terminated,
}

/// The worker's side of protocol 2, from a poll's start (`Running`): the first drain (which
/// registers the waker), `inline_steps` steps fed only by inline completions (each drains only if
/// `take_notified` says something arrived), then the park, draining again whenever it finds the
/// flag. Mirrors `ProcessFuture::poll_steps`.
fn step_and_park(polled: &Polled, inline_steps: usize) -> Ended {
    let mut seen = 0;
    for step in 0..=inline_steps {
        let drained = if step == 0 {
            polled.drain_registering()
        } else if polled.cell.state.take_notified() == TakeNotified::Notified {
            drain(&polled.cell, None)
        } else {
            continue;
        };
        match drained {
            (Drained::Terminate, _) => return Ended::Terminated,
            (_, n) => seen += n,
        }
    }
    loop {
        match polled.cell.state.transition_to_parked(ParkAs::Blocked) {
            TransitionToParked::Parked => return Ended::Parked(seen),
            TransitionToParked::Notified => match drain(&polled.cell, None) {
                (Drained::Terminate, _) => return Ended::Terminated,
                (_, n) => seen += n,
            },
        }
    }
}

fn completion() -> Event {
    Event::YieldComplete {
        tag: 1,
        result: Err(CommandError::TimedOut),
    }
}

/// `state.rs` protocol 2: an event racing the poll's drains, inline steps and park is seen by a drain of
/// this poll, or wakes the parked process exactly once — never neither, never both.
#[test]
fn loom_event_racing_inline_steps_and_a_park() {
    model(|| {
        let polled = Arc::new(Polled::new());
        let producer = {
            let polled = polled.clone();
            thread::spawn(move || polled.cell.deliver(polled.generation, completion()))
        };
        let ended = step_and_park(&polled, 1);
        assert_eq!(producer.join().unwrap(), Admission::Accepted);
        match ended {
            Ended::Parked(1) => {
                assert_eq!(polled.wakes(), 0, "seen by this poll: no wake");
                assert!(polled.cell.state.load().is_parked());
            }
            Ended::Parked(0) => {
                assert_eq!(polled.wakes(), 1, "missed by this poll: woken once");
                assert!(polled.cell.state.load().is_ready());
                // The woken poll finds it.
                polled.cell.state.transition_to_running();
                assert_eq!(polled.drain_registering(), (Drained::All, 1));
            }
            other => panic!("{other:?}"),
        }
    });
}

/// `state.rs` protocol 3: a terminate request racing a park is seen by a drain of this poll, or
/// wakes the parked process, whose next drain sees it.
#[test]
fn loom_terminate_request_racing_a_park() {
    model(|| {
        let polled = Arc::new(Polled::new());
        let terminator = {
            let polled = polled.clone();
            thread::spawn(move || polled.cell.request_terminate(polled.generation))
        };
        let ended = step_and_park(&polled, 0);
        assert_eq!(terminator.join().unwrap(), Admission::Accepted);
        match ended {
            Ended::Terminated => assert_eq!(polled.wakes(), 0),
            Ended::Parked(0) => {
                assert_eq!(polled.wakes(), 1, "parked first: the request wakes it");
                polled.cell.state.transition_to_running();
                assert_eq!(polled.drain_registering().0, Drained::Terminate);
            }
            other => panic!("{other:?}"),
        }
    });
}

/// `state.rs` protocol 4: an event racing a requeue never wakes the process (its own wake
/// queues the one poll due) and is never lost: this poll drained it, or the next one does.
#[test]
fn loom_requeue_racing_an_event() {
    model(|| {
        let polled = Arc::new(Polled::new());
        let producer = {
            let polled = polled.clone();
            thread::spawn(move || polled.cell.deliver(polled.generation, completion()))
        };
        // The poll's first drain, then a step that returned `Continue` (or spent the budget).
        let (_, seen) = polled.drain_registering();
        polled.cell.state.transition_to_requeued();
        assert_eq!(producer.join().unwrap(), Admission::Accepted);
        assert_eq!(
            polled.wakes(),
            0,
            "a requeued process is not woken by producers"
        );
        assert!(polled.cell.state.load().is_ready());
        // The next poll.
        polled.cell.state.transition_to_running();
        let (_, next) = polled.drain_registering();
        assert_eq!(seen + next, 1, "the event is seen exactly once");
    });
}
