//! Messages a process leaves unread, whose destructors take long (here: block until the test
//! opens a gate), are dropped only once the process's outcome is published: its handle resolves,
//! the metrics and a shutdown's report count it as it ended, while those destructors wait
//! (`process/contain.rs`, "After the outcome"). Each case opens the gate only after it has seen
//! the handle resolve (or the report): before the fix, the handle waited for the destructors,
//! which waited for the gate — the gate's hang guard then fails the case instead.
//!
//! Cases: an `async fn` body that returns with messages in its inbox, or in its mailbox; a
//! state machine that finishes `Done` with messages unread in its step and its mailbox; a body
//! terminated with messages unread; a body that returns on a shutdown's `Cancel`, counted
//! `graceful`, with messages unread.

mod support;

use procsched::prelude::*;
use procsched::state_machine::{Events, Process, StepOutput};
use procsched::{Message, Payload};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use support::*;

/// How long a destructor waits for the gate at most: a hang guard, which fails the case (the
/// destructor then counts itself `early`).
const GATE_GUARD: Duration = Duration::from_secs(10);

/// Shut until the test opens it.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }

    /// Waits for the gate to open; `false` if the guard ran out first.
    fn pass(&self) -> bool {
        let (open, opened) = &*self.0;
        let guard = open.lock().unwrap();
        let (guard, _) = opened
            .wait_timeout_while(guard, GATE_GUARD, |open| !*open)
            .unwrap();
        *guard
    }
}

/// A message whose destructor waits at the gate, then counts itself dropped — or `early`, if
/// the gate never opened (the handle waited for it).
struct Slow {
    gate: Gate,
    dropped: Counter,
    early: Counter,
}

impl Drop for Slow {
    fn drop(&mut self) {
        if !self.gate.pass() {
            self.early.fetch_add(1, SeqCst);
        }
        self.dropped.fetch_add(1, SeqCst);
    }
}

/// The gate and the counters of one case.
struct Case {
    gate: Gate,
    dropped: Counter,
    early: Counter,
}

impl Case {
    fn new() -> Case {
        Case {
            gate: Gate::default(),
            dropped: counter(),
            early: counter(),
        }
    }

    fn slow(&self) -> Slow {
        Slow {
            gate: self.gate.clone(),
            dropped: self.dropped.clone(),
            early: self.early.clone(),
        }
    }

    /// The outcome is out: open the gate, and every message is dropped once, none of them
    /// before (none waited out its guard).
    fn open_and_check(&self, messages: usize) {
        assert_eq!(
            count(&self.dropped),
            0,
            "dropped before the outcome was out"
        );
        self.gate.open();
        wait_until("every unread message dropped", || {
            count(&self.dropped) == messages
        });
        assert_eq!(count(&self.early), 0, "a destructor waited out its guard");
    }
}

const MESSAGES: usize = 3;

/// Sends `body` [`MESSAGES`] slow messages of `case` and waits until `process_info` shows them
/// all held unread (`place`: where the body holds them).
fn send_held_unread(sched: &Scheduler, body: &ProcessHandle<u64, Slow>, case: &Case, place: &str) {
    for _ in 0..MESSAGES {
        assert!(body.addr().send(case.slow()).is_ok());
    }
    wait_until(&format!("the messages in the body's {place}"), || {
        sched
            .process_info(body.pid())
            .is_some_and(|info| info.unread_messages == MESSAGES)
    });
}

/// A two-worker scheduler with a body holding [`MESSAGES`] slow messages of `case` unread in
/// its inbox; once cancelled, the body returns `output`.
fn body_holding_unread_inbox(case: &Case, output: u64) -> (Scheduler, ProcessHandle<u64, Slow>) {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let body = sched
        .spawn_fn(move |cx: ProcessCx<Slow>| async move {
            // Files every message in the inbox (a state of its own, unread), then returns.
            let _ = cx.cancelled().await;
            Ok::<u64, BoxError>(output)
        })
        .unwrap();
    // The body's steps move them into its inbox; `process_info` shows them held unread.
    send_held_unread(&sched, &body, case, "inbox");
    (sched, body)
}

#[test]
fn a_body_that_returns_resolves_its_handle_before_its_unread_inbox_is_dropped() {
    let case = Case::new();
    let (sched, body) = body_holding_unread_inbox(&case, 42);
    sched.cancel(body.pid()).unwrap();
    assert_eq!(join_typed(body).unwrap(), 42);
    wait_until("the finish counted", || {
        sched.metrics().finished.cancelled == 1
    });
    case.open_and_check(MESSAGES);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_body_that_returns_resolves_its_handle_before_its_unread_mailbox_is_dropped() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let case = Case::new();
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let body = sched
        .spawn_fn(move |_cx: ProcessCx<Slow>| async move {
            // Never reads its mailbox: blocks its worker until the messages are in it.
            procsched::executor::block_in_place(|| wait.recv_timeout(HANG_GUARD))?;
            Ok::<u64, BoxError>(7)
        })
        .unwrap();
    for _ in 0..MESSAGES {
        assert!(body.addr().send(case.slow()).is_ok());
    }
    go.send(()).unwrap();
    assert_eq!(join_typed(body).unwrap(), 7);
    wait_until("the finish counted", || sched.metrics().finished.done == 1);
    case.open_and_check(MESSAGES);
    sched.shutdown(HANG_GUARD);
}

/// Idle until a step gets an event; that step waits until the test says so, then finishes
/// `Done` without reading its events: the message drained into it stays unread, as do those
/// sent meanwhile, still in the mailbox.
struct DoneWhenTold(std::sync::mpsc::Receiver<()>);

impl Process for DoneWhenTold {
    type Output = Payload;

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if events.is_empty() {
            out.idle();
            return Ok(());
        }
        procsched::executor::block_in_place(|| self.0.recv_timeout(HANG_GUARD))?;
        out.done(Payload::new(5u32));
        Ok(())
    }
}

#[test]
fn a_state_machine_done_resolves_its_handle_before_its_unread_messages_are_dropped() {
    // One event a step: the first message is the `Done` step's, unread; the others wait in the
    // mailbox.
    let sched = Scheduler::builder()
        .workers(2)
        .max_batch(1)
        .build()
        .unwrap();
    let case = Case::new();
    let (go, told) = std::sync::mpsc::channel();
    let machine = sched
        .spawn(DoneWhenTold(told), "run", Payload::empty())
        .unwrap();
    for _ in 0..MESSAGES {
        let message = Message::new("slow", Payload::new(case.slow()));
        assert!(sched.send(machine.pid(), message).is_ok());
    }
    go.send(()).unwrap();
    let output = join_typed(machine).unwrap();
    assert_eq!(output.take::<u32>().unwrap(), 5);
    wait_until("the finish counted", || sched.metrics().finished.done == 1);
    case.open_and_check(MESSAGES);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_terminated_body_resolves_its_handle_before_its_unread_messages_are_dropped() {
    let case = Case::new();
    let (sched, body) = body_holding_unread_inbox(&case, 1);
    sched.terminate(body.pid()).unwrap();
    let ended = join_typed(body).unwrap_err();
    assert!(ended.is_terminated(), "{ended:?}");
    wait_until("the finish counted", || {
        sched.metrics().finished.terminated == 1
    });
    case.open_and_check(MESSAGES);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_body_that_returns_on_a_shutdowns_cancel_is_graceful_whatever_its_unread_messages_take() {
    let case = Case::new();
    let (sched, body) = body_holding_unread_inbox(&case, 42);
    // A grace period the destructors, blocked until after the report, would overrun if they
    // came before the finish was counted.
    let report = sched.shutdown(Duration::from_millis(200));
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (1, 0, 0),
        "{report:?}"
    );
    let finished = sched.metrics().finished;
    assert_eq!(
        (finished.cancelled, finished.forced),
        (1, 0),
        "{finished:?}"
    );
    // Asked to finish, it did: `Shutdown` to its links, its output to its handle.
    assert_eq!(sched.metrics().exits.shutdown, 1);
    case.open_and_check(MESSAGES);
    assert_eq!(join_typed(body).unwrap(), 42);
}

/// A process forced at shutdown (its body ignores the cancel) is a stop whatever its unread
/// messages' destructors take: they are dropped before its end is counted, so
/// `wait_for_abandoned` waits for them — they are user code the process left behind.
#[test]
fn wait_for_abandoned_waits_for_the_unread_messages_of_a_forced_process() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let case = Case::new();
    let body = sched
        .spawn_fn(move |_: ProcessCx<Slow>| async move {
            std::future::pending::<()>().await;
            Ok::<u64, BoxError>(0)
        })
        .unwrap();
    send_held_unread(&sched, &body, &case, "mailbox");
    let report = sched.shutdown(Duration::ZERO);
    assert_eq!(report.graceful, 0, "{report:?}");
    assert!(
        !sched.wait_for_abandoned(Duration::from_millis(20)),
        "not done while a destructor of its unread messages waits at the gate"
    );
    case.gate.open();
    assert!(sched.wait_for_abandoned(HANG_GUARD), "hang guard");
    assert_eq!(count(&case.dropped), MESSAGES, "every message dropped once");
    assert_eq!(count(&case.early), 0, "a destructor waited out its guard");
    assert!(join_typed(body).unwrap_err().is_cancelled());
}
