//! Fault injection: user values whose destructors panic, in every place a user value can wait
//! inside the scheduler, with their process ended every way. For every case: the program does
//! not abort, the process's outcome is what happened to it (a destructor's panic is counted,
//! never an outcome), every destructor runs exactly once, and the panics are counted in the
//! metrics (`SchedulerMetrics::destructor_panics`).
//!
//! | place | how a value gets there |
//! |---|---|
//! | mailbox (locked queue) | messages sent while the process's step runs |
//! | intake queue | more messages past the backlog that installs the lock-free path |
//! | inbox (async fn) | messages that arrive while the body awaits a call |
//! | kept completion (async fn) | the reply of a call the body sent and is not awaiting now |
//! | step yields | commands of a step that fails, panics, or finishes `Done` |
//! | unread output | the result of a process whose handle was dropped |
//! | handler future | an async handler's future, aborted when its process ends |
//! | unread step events | messages drained into a step that does not read them |
//!
//! A destructor panicking during another panic's unwind aborts the process, so each case with a
//! process ended every way runs in a child process (this test binary, re-run with one case
//! selected): the parent survives an abort and reports it as the case's failure. Unread step
//! events, where nothing else panics, are checked in the test binary itself.

mod support;

use procsched::prelude::*;
use procsched::{
    error::InitError,
    state_machine::{Event, Events, Process, ProcessContext, Status},
    Message, Payload,
};
use procsched::{metrics::ProcessState, state_machine::StepOutput};
use std::process::Command as ChildCommand;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;
use support::*;

/// The environment variable that selects a case in a child process.
const CASE: &str = "PROCSCHED_DESTRUCTOR_CASE";

/// A value whose destructor counts itself, then panics.
struct Grenade(Counter);

impl Drop for Grenade {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("{EXPECTED_PANIC}: a destructor");
    }
}

/// How the process ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Done,
    /// `Done`, with the process's handle dropped first: its output is never read.
    DoneUnread,
    Failed,
    Panicked,
    Terminated,
    /// Shutdown's grace period passes: the process is forced.
    Forced,
    /// The scheduler is dropped: a shutdown with the drop timeout, then forced.
    Dropped,
}

const ENDS: [End; 7] = [
    End::Done,
    End::DoneUnread,
    End::Failed,
    End::Panicked,
    End::Terminated,
    End::Forced,
    End::Dropped,
];

/// Runs `case` in a child process and fails if the child did not pass (an abort included).
fn in_child(case: &str) {
    let exe = std::env::current_exe().expect("the test binary");
    let output = ChildCommand::new(exe)
        .args(["--exact", "child_case", "--nocapture", "--test-threads=1"])
        .env(CASE, case)
        .output()
        .expect("the child runs");
    assert!(
        output.status.success(),
        "case {case} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("1 passed"),
        "case {case} did not run:\n{stdout}"
    );
}

/// The child's side: runs the case the parent selected (nothing when run as a plain test).
#[test]
fn child_case() {
    let Ok(case) = std::env::var(CASE) else {
        return;
    };
    quiet_panics();
    let (kind, end) = case.split_once(':').expect("kind:end");
    let end = ENDS
        .into_iter()
        .find(|e| format!("{e:?}") == end)
        .expect("a known end");
    match kind {
        "async_fn" => async_fn_case(end),
        "state_machine" => state_machine_case(end),
        "queued" => queued_case(end),
        other => panic!("unknown case kind {other}"),
    }
}

#[test]
fn an_async_fn_bodys_inbox_kept_completion_and_handler_future_end_every_way() {
    for end in ENDS {
        in_child(&format!("async_fn:{end:?}"));
    }
}

#[test]
fn a_state_machines_mailbox_intake_yields_and_output_end_every_way() {
    for end in [
        End::Done,
        End::DoneUnread,
        End::Failed,
        End::Panicked,
        End::Terminated,
    ] {
        in_child(&format!("state_machine:{end:?}"));
    }
}

#[test]
fn a_queued_process_never_polled_is_forced_or_dropped_with_its_mailbox_and_intake() {
    for end in [End::Forced, End::Dropped, End::Terminated] {
        in_child(&format!("queued:{end:?}"));
    }
}

/// An async handler that holds a grenade until released, and forgets it when it completes:
/// the grenade goes off only if the handler's future is dropped unfinished (aborted).
struct Hold(Arc<tokio::sync::Notify>, Grenade);
procsched::command!(Hold => ());

/// An async handler that replies with a grenade when released.
struct Late(tokio::sync::oneshot::Receiver<()>, Counter);
procsched::command!(Late => Grenade);

/// Checks `result` against the way the process ended.
fn check_outcome<T>(end: End, result: Result<T, ProcessError>) {
    match (end, result) {
        (End::Done, Ok(value)) => std::mem::forget(value),
        (End::Failed, Err(e)) => assert!(e.is_failed(), "{e:?}"),
        (End::Panicked, Err(e)) => assert!(e.is_panicked(), "{e:?}"),
        (End::Terminated, Err(e)) => assert!(e.is_terminated(), "{e:?}"),
        (End::Forced | End::Dropped, Err(e)) => assert!(e.is_cancelled(), "{e:?}"),
        (end, Ok(_)) => panic!("{end:?}: the handle resolved Ok"),
        (end, Err(e)) => panic!("{end:?}: {e:?}"),
    }
}

/// Ends a live process `pid` of `sched` the way `end` says, for the ends the test drives from
/// outside (`Terminated`, `Forced`, `Dropped`); returns the scheduler unless it was dropped.
fn end_from_outside(sched: Scheduler, pid: Pid, end: End) -> Option<Scheduler> {
    match end {
        End::Terminated => {
            sched.terminate(pid).unwrap();
            wait_until("the process finished", || sched.state(pid).is_none());
        }
        End::Forced => {
            let report = sched.shutdown(Duration::from_millis(20));
            assert_eq!(report.forced, 1, "{report:?}");
        }
        End::Dropped => {
            drop(sched);
            return None;
        }
        other => unreachable!("{other:?} is the process's own doing"),
    }
    Some(sched)
}

/// Checks that `expected` grenades went off, each once, and — while the scheduler lives — that
/// its metrics counted every panic (an aborted handler's future may be dropped a moment after
/// its process finished: both are awaited, hang-guarded).
fn check_grenades(grenades: &Counter, expected: usize, sched: Option<&Scheduler>) {
    wait_until("every grenade went off", || count(grenades) >= expected);
    assert_eq!(count(grenades), expected, "each destructor ran once");
    if let Some(sched) = sched {
        wait_until("every panic counted", || {
            sched.metrics().destructor_panics >= expected as u64
        });
        assert_eq!(sched.metrics().destructor_panics, expected as u64);
    }
}

/// The async-fn body: sends a call whose reply it will not await (its completion is *kept*),
/// then awaits `Hold` while grenade messages fill its *inbox*; the `Hold` handler's future
/// holds a grenade. Ends per `end`.
fn async_fn_case(end: End) {
    let grenades = counter();
    let sched = Scheduler::builder()
        .workers(2)
        .async_handler(|Hold(notify, grenade): Hold| async move {
            notify.notified().await;
            std::mem::forget(grenade);
            Ok::<_, BoxError>(())
        })
        .async_handler(|Late(release, grenades): Late| async move {
            let _ = release.await;
            Ok::<_, BoxError>(Grenade(grenades))
        })
        .build()
        .unwrap();
    let notify = Arc::new(tokio::sync::Notify::new());
    let (release_late, late_released) = tokio::sync::oneshot::channel();
    let body = {
        let (notify, grenades) = (notify.clone(), grenades.clone());
        move |cx: ProcessCx| async move {
            let mut late = cx.call(Late(late_released, grenades.clone()));
            assert!(futures::poll!(&mut late).is_pending(), "sent, not replied");
            cx.call(Hold(notify, Grenade(grenades))).await?;
            drop(late);
            match end {
                End::Done | End::DoneUnread => Ok(7u8),
                End::Failed => Err(BoxError::from("failed on purpose")),
                End::Panicked => panic!("{EXPECTED_PANIC}: the body"),
                other => unreachable!("{other:?} comes from outside"),
            }
        }
    };
    let handle = sched.spawn_fn(body).unwrap();
    let pid = handle.pid();
    wait_for_state(sched.handle(), pid, ProcessState::Blocked);
    for _ in 0..2 {
        let message = Message::new("g", Payload::new(Grenade(grenades.clone())));
        sched.send(pid, message).unwrap();
    }
    release_late.send(()).unwrap();
    // Everything has reached the body: two messages in its inbox, the reply kept.
    wait_until("the body took its mail", || {
        sched
            .process_info(pid)
            .is_some_and(|info| info.mailbox_depth == 0 && info.outstanding_yields == 1)
            && sched.state(pid) == Some(ProcessState::Blocked)
    });
    assert_eq!(count(&grenades), 0, "nothing dropped yet");
    // Inbox (2) and kept reply (1); the handler's grenade too if it is aborted.
    let aborted = matches!(end, End::Terminated | End::Forced | End::Dropped);
    let expected = 3 + usize::from(aborted);
    let sched = match end {
        End::Done | End::Failed | End::Panicked => {
            notify.notify_one();
            check_outcome(end, join_typed(handle));
            Some(sched)
        }
        End::DoneUnread => {
            drop(handle);
            notify.notify_one();
            wait_until("the process finished", || sched.state(pid).is_none());
            Some(sched)
        }
        _ => {
            let sched = end_from_outside(sched, pid, end);
            check_outcome(end, join_typed(handle));
            sched
        }
    };
    check_grenades(&grenades, expected, sched.as_ref());
}

/// A state machine whose first step blocks until the test has filled its mailbox: a few
/// grenades on the locked path, then enough to install the intake queue and more through it.
/// The step then ends per the order it is released with, yielding grenade commands (dropped
/// with a `Done`, a failure or a panic; dispatched to no handler otherwise).
struct Holder {
    inside: StepGateInside,
    how: mpsc::Receiver<End>,
    grenades: Counter,
    stepped: bool,
}

/// Messages the state machine's mailbox gets: past the backlog that installs the intake queue.
const QUEUED: usize = 12;

impl Process for Holder {
    type Output = Grenade;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<Grenade>) -> Result<(), BoxError> {
        if self.stepped {
            out.idle();
            return Ok(());
        }
        self.stepped = true;
        self.inside.wait();
        let end = recv(&self.how);
        for tag in 0..2 {
            out.yield_command(tag, Grenade(self.grenades.clone()));
        }
        match end {
            End::Done | End::DoneUnread => out.done(Grenade(self.grenades.clone())),
            End::Failed => return Err("failed on purpose".into()),
            End::Panicked => panic!("{EXPECTED_PANIC}: the step"),
            _ => out.idle(),
        }
        Ok(())
    }
}

fn state_machine_case(end: End) {
    let grenades = counter();
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (gate, inside) = step_gate();
    let (how_tx, how) = mpsc::channel();
    let holder = Holder {
        inside,
        how,
        grenades: grenades.clone(),
        stepped: false,
    };
    let handle = sched.spawn(holder, "run", Payload::empty()).unwrap();
    let pid = handle.pid();
    recv(&gate.entered);
    for _ in 0..QUEUED {
        let message = Message::new("g", Payload::new(Grenade(grenades.clone())));
        sched.send(pid, message).unwrap();
    }
    if end == End::Terminated {
        sched.terminate(pid).unwrap();
    }
    how_tx.send(end).unwrap();
    // The queued messages (dropped by `close`, unread), the two yields (dropped by the end, or
    // by dispatch to no handler), and a `Done`'s output (read by the test, or unread).
    let expected = QUEUED + 2 + usize::from(end == End::DoneUnread);
    let handle = if end == End::DoneUnread {
        drop(handle);
        None
    } else {
        Some(handle)
    };
    gate.release.send(()).unwrap();
    if let Some(handle) = handle {
        check_outcome(end, join_typed(handle));
    } else {
        wait_until("the process finished", || sched.state(pid).is_none());
    }
    check_grenades(&grenades, expected, Some(&sched));
}

/// A process queued behind a worker that a step blocks (one worker, no monitor): it never
/// runs, and is forced, dropped with its scheduler, or terminated with grenades in its mailbox
/// and intake queue.
fn queued_case(end: End) {
    let grenades = counter();
    let closes = counter();
    let sched = Scheduler::builder()
        .workers(1)
        .monitor(false)
        .build()
        .unwrap();
    let (gate, blocker) = block_the_worker(&sched, &closes);
    let never = FnProcess::new(&closes, |_, out| {
        out.set_status(Status::Idle);
        Ok(())
    });
    let handle = sched.spawn(never, "run", Payload::empty()).unwrap();
    let pid = handle.pid();
    for _ in 0..QUEUED {
        let message = Message::new("g", Payload::new(Grenade(grenades.clone())));
        sched.send(pid, message).unwrap();
    }
    let expected = QUEUED;
    match end {
        End::Terminated => {
            sched.terminate(pid).unwrap();
            gate.release.send(()).unwrap();
            check_outcome(end, join(handle));
            join(blocker).unwrap();
            check_grenades(&grenades, expected, Some(&sched));
        }
        End::Forced | End::Dropped => {
            // The blocker is abandoned (inside its step) and released once shutdown is done;
            // the queued process is forced, its mailbox and intake queue dropped.
            let sched = thread::spawn(move || end_from_outside(sched, pid, end))
                .join()
                .unwrap();
            assert_eq!(
                count(&grenades),
                expected,
                "dropped by the forced stop, once each"
            );
            check_outcome(end, join(handle));
            gate.release.send(()).unwrap();
            let _ = join(blocker);
            check_grenades(&grenades, expected, sched.as_ref());
        }
        other => unreachable!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Unread step events (in this binary)
// ---------------------------------------------------------------------------------------------

#[test]
fn panicking_payload_destructors_are_contained() {
    /// Never takes its events: it only looks for "done", and leaves every payload to the
    /// scheduler, which drops unread events after each step (and queued ones at close).
    struct Ignorer;
    impl Process for Ignorer {
        type Output = Payload;
        fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
            Ok(())
        }
        fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
            let done = events
                .iter()
                .any(|e| matches!(e, Event::Message(m) if m.topic == "done"));
            if done {
                out.done(Payload::empty());
            } else {
                out.idle();
            }
            Ok(())
        }
    }
    quiet_panics();
    let drops = counter();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    // A bystander: idle until its one message, then done.
    let bystander = sched
        .spawn(
            FnProcess::new(&counter(), echo_step()),
            "run",
            Payload::empty(),
        )
        .unwrap();
    wait_for_state(sched.handle(), bystander.pid(), ProcessState::Idle);
    let ignorer = sched.spawn(Ignorer, "run", Payload::empty()).unwrap();
    for _ in 0..10 {
        let grenade = Payload::new(Grenade(drops.clone()));
        let _ = sched.send(ignorer.pid(), Message::new("g", grenade));
    }
    sched
        .send(ignorer.pid(), Message::new("done", Payload::empty()))
        .unwrap();
    sched
        .block_on(ignorer)
        .expect("the ignorer finishes normally");
    // The scheduler is healthy: another process still works.
    sched
        .send(bystander.pid(), Message::new("stop", Payload::empty()))
        .unwrap();
    sched.block_on(bystander).unwrap();
    assert_eq!(count(&drops), 10, "every unread payload was dropped, once");
}

#[test]
fn a_refused_asks_request_is_dropped_contained_and_counted() {
    // The request of an ask that is not delivered (its process has ended) is dropped inside
    // the scheduler: contained, and counted like any other.
    quiet_panics();
    let drops = counter();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let gone = sched
        .spawn_fn(|_: ProcessCx<(Grenade, Reply<u8>)>| async { Ok::<_, BoxError>(()) })
        .unwrap();
    let addr = gone.addr();
    sched.block_on(gone).unwrap();
    let refused = sched.block_on(addr.ask(|reply| (Grenade(drops.clone()), reply)));
    assert!(refused.unwrap_err().is_not_found());
    assert_eq!(drops.load(SeqCst), 1, "dropped once");
    assert_eq!(sched.metrics().destructor_panics, 1, "and counted");
}

#[test]
fn a_message_a_receive_cannot_convert_is_dropped_contained_and_counted() {
    // Sent untyped to a body that receives `u64`s: `recv` reports the mismatch and drops the
    // message inside the scheduler, on its process's account.
    quiet_panics();
    let drops = counter();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let reader = sched
        .spawn_fn(|cx: ProcessCx<u64>| async move {
            let mismatch = cx.recv().await.unwrap_err();
            assert!(matches!(mismatch, RecvError::TypeMismatch(_)), "{mismatch}");
            Ok::<_, BoxError>(cx.recv().await?)
        })
        .unwrap();
    let grenade = Message::new("g", Payload::new(Grenade(drops.clone())));
    sched.send(reader.pid(), grenade).unwrap();
    reader.addr().send(7).unwrap();
    assert_eq!(sched.block_on(reader).unwrap(), 7, "the body read on");
    assert_eq!(drops.load(SeqCst), 1, "dropped once");
    assert_eq!(sched.metrics().destructor_panics, 1, "and counted");
}
