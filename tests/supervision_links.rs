//! Public-API tests of links and trapped exits (Erlang/OTP semantics, `src/supervision.rs`):
//! a `Normal` exit does not propagate; any other reason ends the linked process with the same
//! reason — `Killed` included — unless it traps exits, and then it arrives as an `Exit` event
//! (async bodies and state machines); linking to a dead process signals `NoProc` at once;
//! `unlink` removes both directions; links work both ways; a linked child that fails in its
//! very first step is never missed.
//!
//! Where a test must know how a process's end was signalled, it waits for a monitor's `Down`
//! and then checks that nothing else arrives: an end signals its monitors, then its links, in
//! one pass (`src/scheduler/links.rs`, `ended`), so a wrong exit signal would follow the `Down`.
//! Deadlines appear only as hang guards.

mod supervision_common;
mod support;

use futures::future::{BoxFuture, FutureExt};
use procsched::prelude::*;
use procsched::state_machine::{Event, Events, Process, StepOutput};
use procsched::supervision::{Exit, ExitReason, NotRunning, Signal};
use supervision_common::*;
use support::{join_typed, quiet_panics};

/// Spawns two puppets, links them (`link(a, b)`), ends one of them with `end`, and returns how
/// each ended: `(a, b)`.
fn linked_pair(
    sched: &Scheduler,
    end: impl FnOnce(&SchedulerHandle, &ProcessHandle<(), Cmd>, &ProcessHandle<(), Cmd>),
) -> (Result<(), ProcessError>, Result<(), ProcessError>) {
    let a = spawn_puppet(sched.handle());
    let b = spawn_puppet(sched.handle());
    sched.handle().link(a.pid(), b.pid()).unwrap();
    end(sched.handle(), &a, &b);
    (join_typed(a), join_typed(b))
}

/// A state machine that finishes with the first `Exit` event it receives.
struct ExitCatcher;

impl Process for ExitCatcher {
    type Output = Payload;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        for event in events.drain() {
            if let Event::Exit(exit) = event {
                out.done(Payload::new(exit));
                return Ok(());
            }
        }
        out.idle();
        Ok(())
    }
}

/// A state machine that fails in its first step.
struct FailsAtOnce;

impl Process for FailsAtOnce {
    type Output = ();
    fn step(&mut self, _: &mut Events, _: &mut StepOutput<()>) -> Result<(), BoxError> {
        Err("failed in its first step".into())
    }
}

#[test]
fn a_normal_exit_does_not_propagate_to_a_linked_process() {
    let sched = scheduler(2);
    let probe = Probe::spawn(sched.handle());
    let target = spawn_puppet(sched.handle());
    assert_eq!(probe.order(Order::Link(target.pid())), Heard::Done);
    let monitor = probe.monitor(target.pid());
    target.addr().send(Cmd::Finish).unwrap();
    join_typed(target).unwrap();
    // The probe does not trap: had the `Normal` exit ended it, it would not hear the Down.
    match probe.next() {
        Heard::Signal(Signal::Down(down)) => {
            assert_eq!(down.monitor, monitor);
            assert!(down.reason.is_normal(), "{down:?}");
        }
        other => panic!("expected the Down, heard {other:?}"),
    }
    probe.assert_hears_nothing_else(1);
    probe.tell(Order::Finish);
    join_typed(probe.handle).expect("the probe survived and finished normally");
}

/// A state machine that waits, and finishes well (`Done`) on its `Cancel`, as `Event::Cancel`
/// asks.
struct DoneOnCancel;

impl Process for DoneOnCancel {
    type Output = u8;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u8>) -> Result<(), BoxError> {
        if events
            .drain()
            .any(|event| matches!(event, Event::Cancel { .. }))
        {
            out.done(7);
        } else {
            out.idle();
        }
        Ok(())
    }
}

#[test]
fn a_process_that_ends_well_on_its_cancel_ends_shutdown_which_its_links_hear() {
    // Asked to finish, it did: `Shutdown` (OTP's `shutdown`), not `Normal` — a linked process
    // that does not trap exits ends with it, whether the process is a state machine that
    // reached `Done` or a body that returned `Ok`, as for a body's `?` on its cancel. Its
    // handle keeps its output.
    let sched = scheduler(2);
    let machine = sched.spawn(DoneOnCancel, "run", Payload::empty()).unwrap();
    let body = sched
        .spawn_fn(|cx: ProcessCx<()>| async move {
            let _ = cx.cancelled().await;
            Ok::<_, BoxError>(7u8)
        })
        .unwrap();
    let ends: [(Pid, BoxFuture<'static, Result<u8, ProcessError>>); 2] =
        [(machine.pid(), machine.boxed()), (body.pid(), body.boxed())];
    for (pid, handle) in ends {
        let linked = spawn_puppet(sched.handle());
        sched.handle().link(pid, linked.pid()).unwrap();
        let down = sched.monitor(pid);
        sched.cancel(pid).unwrap();
        assert_eq!(
            sched.block_on(handle).unwrap(),
            7,
            "its output, on its handle"
        );
        assert!(sched.block_on(down).reason.is_shutdown());
        let linked = join_typed(linked).unwrap_err();
        assert!(linked.is_exited(), "{linked:?}");
        assert!(linked.exit_reason().is_shutdown(), "{linked:?}");
    }
    let exits = sched.metrics().exits;
    assert_eq!((exits.shutdown, exits.normal), (4, 0), "{exits:?}");
}

/// A state machine whose first step waits for the test's go, then finishes (`Done`) on its
/// own.
struct FinishesWhenReleased(std::sync::mpsc::Receiver<()>, std::sync::mpsc::Sender<()>);

impl Process for FinishesWhenReleased {
    type Output = u8;
    fn step(&mut self, _: &mut Events, out: &mut StepOutput<u8>) -> Result<(), BoxError> {
        self.1.send(())?;
        self.0.recv()?;
        out.done(1);
        Ok(())
    }
}

#[test]
fn a_process_that_ends_on_its_own_before_reading_its_cancel_ends_normal() {
    // The cancel queues while its last step runs: it never heard it, and ended on its own —
    // `Normal`, as an OTP process that exits `normal` before it handles the `EXIT`. A linked
    // process lives on.
    let sched = scheduler(2);
    let (release, released) = std::sync::mpsc::channel();
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let machine = sched
        .spawn(
            FinishesWhenReleased(released, entered_tx),
            "run",
            Payload::empty(),
        )
        .unwrap();
    let linked = spawn_puppet(sched.handle());
    sched.handle().link(machine.pid(), linked.pid()).unwrap();
    let down = sched.monitor(machine.pid());
    entered.recv_timeout(support::HANG_GUARD).unwrap();
    sched.cancel(machine.pid()).unwrap(); // queued behind the running step
    release.send(()).unwrap();
    assert_eq!(sched.block_on(machine).unwrap(), 1);
    assert!(sched.block_on(down).reason.is_normal());
    linked.addr().send(Cmd::Finish).unwrap();
    join_typed(linked).expect("the linked process lived on and finished");
}

#[test]
fn a_failed_exit_ends_the_linked_process_with_the_same_reason() {
    let sched = scheduler(2);
    let (a, b) = linked_pair(&sched, |_, _, b| {
        b.addr().send(Cmd::Fail("disk full")).unwrap()
    });
    let b = b.unwrap_err();
    assert!(b.is_failed());
    let a = a.unwrap_err();
    assert!(a.is_exited(), "{a:?}");
    assert_eq!(a.exit_reason(), ExitReason::failed("disk full"));
    assert_eq!(a.exit_reason(), b.exit_reason());
}

#[test]
fn a_panicked_exit_ends_the_linked_process_with_the_same_reason() {
    quiet_panics();
    let sched = scheduler(2);
    let (a, b) = linked_pair(&sched, |_, _, b| b.addr().send(Cmd::Panic).unwrap());
    let b = b.unwrap_err();
    assert!(b.is_panicked());
    let a = a.unwrap_err();
    assert!(a.is_exited(), "{a:?}");
    assert_eq!(a.exit_reason(), ExitReason::Panicked(PANIC.into()));
    assert_eq!(a.exit_reason(), b.exit_reason());
}

#[test]
fn killed_propagates_as_killed_to_a_process_that_does_not_trap() {
    let sched = scheduler(2);
    let (a, b) = linked_pair(&sched, |sched, _, b| sched.terminate(b.pid()).unwrap());
    assert!(b.unwrap_err().is_terminated());
    let a = a.unwrap_err();
    assert!(a.is_exited(), "{a:?}");
    assert!(a.exit_reason().is_killed(), "{a:?}");
}

#[test]
fn killed_is_received_as_an_exit_by_a_trapping_process_which_survives() {
    let sched = scheduler(2);
    let probe = Probe::spawn(sched.handle());
    let target = spawn_puppet(sched.handle());
    let target_pid = target.pid();
    assert_eq!(probe.order(Order::TrapExit(true)), Heard::Done);
    assert_eq!(probe.order(Order::Link(target_pid)), Heard::Done);
    sched.terminate(target_pid).unwrap();
    assert!(join_typed(target).unwrap_err().is_terminated());
    match probe.next() {
        Heard::Signal(Signal::Exit(exit)) => {
            assert_eq!(exit.pid, target_pid);
            assert!(exit.reason.is_killed(), "{exit:?}");
        }
        other => panic!("expected the Exit, heard {other:?}"),
    }
    probe.assert_hears_nothing_else(1);
    probe.tell(Order::Finish);
    join_typed(probe.handle).expect("the trapping probe survived the Killed signal");
}

#[test]
fn a_trapping_async_body_receives_exit_with_pid_and_reason_from_recv_exit_and_recv_signal() {
    let sched = scheduler(2);
    let body = sched
        .spawn_fn(|cx: ProcessCx<()>| async move {
            cx.trap_exit(true);
            let first =
                cx.spawn_link(|_: ProcessCx| async { Err::<(), BoxError>("first".into()) })?;
            let exit = cx.recv_exit().await?;
            let first_seen = (exit.pid == first, exit.reason);
            let second = cx.spawn_link(|cx: ProcessCx<()>| async move {
                cx.recv().await?;
                Err::<(), BoxError>("second".into())
            })?;
            cx.scheduler().addr::<()>(second).send(())?;
            let second_seen = match cx.recv_signal().await? {
                Signal::Exit(exit) => (exit.pid == second, exit.reason),
                Signal::Down(down) => return Err(format!("unexpected {down:?}").into()),
                other => return Err(format!("unexpected {other:?}").into()),
            };
            Ok::<_, BoxError>((first_seen, second_seen))
        })
        .unwrap();
    let (first, second) = join_typed(body).expect("the trapping body survived both exits");
    assert_eq!(first, (true, ExitReason::failed("first")));
    assert_eq!(second, (true, ExitReason::failed("second")));
}

#[test]
fn a_trapping_state_machine_receives_exit_as_an_event_in_its_step() {
    let sched = scheduler(2);
    let catcher = sched.spawn(ExitCatcher, "run", Payload::empty()).unwrap();
    sched.handle().set_trap_exit(catcher.pid(), true).unwrap();
    let target = spawn_puppet(sched.handle());
    let target_pid = target.pid();
    sched.handle().link(catcher.pid(), target_pid).unwrap();
    target.addr().send(Cmd::Fail("bad input")).unwrap();
    assert!(join_typed(target).unwrap_err().is_failed());
    let exit = join_typed(catcher)
        .expect("the trapping state machine survived and finished")
        .downcast::<Exit>()
        .unwrap();
    assert_eq!(exit.pid, target_pid);
    assert_eq!(exit.reason, ExitReason::failed("bad input"));
}

#[test]
fn set_trap_exit_on_a_process_that_has_ended_is_not_running() {
    let sched = scheduler(1);
    let gone = spawn_puppet(sched.handle());
    let pid = gone.pid();
    gone.addr().send(Cmd::Finish).unwrap();
    join_typed(gone).unwrap();
    assert_eq!(
        sched.handle().set_trap_exit(pid, true),
        Err(NotRunning(pid))
    );
}

#[test]
fn linking_to_a_dead_process_delivers_noproc_at_once_to_a_trapping_process() {
    let sched = scheduler(2);
    let dead = spawn_puppet(sched.handle());
    let dead_pid = dead.pid();
    dead.addr().send(Cmd::Finish).unwrap();
    join_typed(dead).unwrap();
    let probe = Probe::spawn(sched.handle());
    assert_eq!(probe.order(Order::TrapExit(true)), Heard::Done);
    assert_eq!(probe.order(Order::Link(dead_pid)), Heard::Done);
    // Nothing else happens in between: the signal came with the link itself.
    match probe.next() {
        Heard::Signal(Signal::Exit(exit)) => {
            assert_eq!(exit.pid, dead_pid);
            assert!(exit.reason.is_no_proc(), "{exit:?}");
        }
        other => panic!("expected the NoProc Exit, heard {other:?}"),
    }
    probe.assert_hears_nothing_else(1);
    probe.tell(Order::Finish);
    join_typed(probe.handle).unwrap();
}

#[test]
fn linking_to_a_dead_process_ends_a_process_that_does_not_trap_with_noproc() {
    let sched = scheduler(2);
    let dead = spawn_puppet(sched.handle());
    let dead_pid = dead.pid();
    dead.addr().send(Cmd::Finish).unwrap();
    join_typed(dead).unwrap();
    let live = spawn_puppet(sched.handle());
    sched.handle().link(live.pid(), dead_pid).unwrap();
    let ended = join_typed(live).unwrap_err();
    assert!(ended.is_exited(), "{ended:?}");
    assert!(ended.exit_reason().is_no_proc(), "{ended:?}");
    // Linking *from* a dead process is refused: it is not running.
    assert_eq!(
        sched.handle().link(dead_pid, dead_pid),
        Err(NotRunning(dead_pid))
    );
}

#[test]
fn unlink_removes_both_directions_of_a_link() {
    let sched = scheduler(2);
    // Direction 1: the other side ends. Unlinked from inside the survivor (`ProcessCx::unlink`).
    let probe = Probe::spawn(sched.handle());
    let other = spawn_puppet(sched.handle());
    assert_eq!(probe.order(Order::Link(other.pid())), Heard::Done);
    let monitor = probe.monitor(other.pid());
    assert_eq!(probe.order(Order::Unlink(other.pid())), Heard::Done);
    other.addr().send(Cmd::Fail("unlinked")).unwrap();
    assert!(join_typed(other).unwrap_err().is_failed());
    match probe.next() {
        Heard::Signal(Signal::Down(down)) => assert_eq!(down.monitor, monitor),
        heard => panic!("expected the Down, heard {heard:?}"),
    }
    probe.assert_hears_nothing_else(1);
    probe.tell(Order::Finish);
    join_typed(probe.handle).expect("no exit signal reached the unlinking side");

    // Direction 2: the side that called `unlink` ends (arguments in the other order).
    let a = spawn_puppet(sched.handle());
    let b = spawn_puppet(sched.handle());
    sched.handle().link(a.pid(), b.pid()).unwrap();
    let a_down = sched.monitor(a.pid());
    sched.handle().unlink(b.pid(), a.pid());
    a.addr().send(Cmd::Fail("unlinked too")).unwrap();
    assert!(join_typed(a).unwrap_err().is_failed());
    assert!(run(a_down).reason.is_failed());
    b.addr().send(Cmd::Finish).unwrap();
    join_typed(b).expect("no exit signal reached the other side");
}

#[test]
fn links_are_bidirectional_either_side_abnormal_end_reaches_the_other() {
    let sched = scheduler(2);
    // The first argument of `link` ends: the second hears it.
    let (a, b) = linked_pair(&sched, |_, a, _| {
        a.addr().send(Cmd::Fail("a failed")).unwrap()
    });
    assert!(a.unwrap_err().is_failed());
    let b = b.unwrap_err();
    assert!(b.is_exited(), "{b:?}");
    assert_eq!(b.exit_reason(), ExitReason::failed("a failed"));
    // The second argument ends: the first hears it.
    let (a, b) = linked_pair(&sched, |_, _, b| {
        b.addr().send(Cmd::Fail("b failed")).unwrap()
    });
    assert!(b.unwrap_err().is_failed());
    let a = a.unwrap_err();
    assert!(a.is_exited(), "{a:?}");
    assert_eq!(a.exit_reason(), ExitReason::failed("b failed"));
}

#[test]
fn a_spawn_link_child_failing_in_its_first_step_is_always_seen_by_its_trapping_parent() {
    const CHILDREN: usize = 300;
    let sched = scheduler(2);
    let parent = sched
        .spawn_fn(|cx: ProcessCx<()>| async move {
            cx.trap_exit(true);
            let mut seen = 0;
            for _ in 0..CHILDREN {
                let child = cx.spawn_link(|_: ProcessCx| async {
                    Err::<(), BoxError>("failed at once".into())
                })?;
                let exit = cx.recv_exit().await?;
                if exit.pid == child && exit.reason == ExitReason::failed("failed at once") {
                    seen += 1;
                }
            }
            Ok::<_, BoxError>(seen)
        })
        .unwrap();
    assert_eq!(join_typed(parent).unwrap(), CHILDREN);
}

#[test]
fn a_linked_child_failing_in_its_first_step_always_ends_its_parent_spawn_linked_and_spawn_fn_linked(
) {
    const ROUNDS: usize = 200;
    let sched = scheduler(2);
    for round in 0..ROUNDS {
        let parent = spawn_puppet(sched.handle());
        let child_pid = if round % 2 == 0 {
            let child = sched
                .handle()
                .spawn_linked(parent.pid(), FailsAtOnce, "run", Payload::empty())
                .unwrap();
            let pid = child.pid();
            assert!(join_typed(child).unwrap_err().is_failed());
            pid
        } else {
            let child = sched
                .handle()
                .spawn_fn_linked(parent.pid(), |_: ProcessCx| async {
                    Err::<(), BoxError>("failed in its first step".into())
                })
                .unwrap();
            let pid = child.pid();
            assert!(join_typed(child).unwrap_err().is_failed());
            pid
        };
        let ended = join_typed(parent).unwrap_err();
        assert!(
            ended.is_exited(),
            "round {round}: {ended:?} (child {child_pid})"
        );
        assert!(ended.exit_reason().is_failed(), "round {round}: {ended:?}");
    }
}

#[test]
fn a_child_spawned_linked_to_a_dead_parent_gets_noproc() {
    let sched = scheduler(2);
    let parent = spawn_puppet(sched.handle());
    let parent_pid = parent.pid();
    parent.addr().send(Cmd::Finish).unwrap();
    join_typed(parent).unwrap();
    let child = sched.handle().spawn_fn_linked(parent_pid, puppet).unwrap();
    let ended = join_typed(child).unwrap_err();
    assert!(ended.is_exited(), "{ended:?}");
    assert!(ended.exit_reason().is_no_proc(), "{ended:?}");
}

#[test]
fn a_process_whose_last_step_ends_it_while_a_linked_exit_arrives_reports_one_reason_to_all() {
    // A linked process's exit that arrives while a step runs asks the process to end at the
    // step's boundary; a step that returns first has ended the process on its own. Its
    // handle has the output, and its monitors must hear the same end: `Normal`, not the
    // linked reason (a supervisor would restart a transient child that returned `Ok`).
    let sched = scheduler(2);
    let crasher = sched
        .spawn_fn(|cx: ProcessCx<()>| async move {
            cx.recv().await?;
            Err::<(), BoxError>("crashed".into())
        })
        .unwrap();
    let crasher_pid = crasher.pid();
    let (linked_tx, linked) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel::<()>();
    let linker = sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.link(crasher_pid);
            linked_tx.send(()).unwrap();
            // One step from the link to the end: the exit arrives while it runs.
            go_rx.recv_timeout(support::HANG_GUARD).unwrap();
            Ok::<u32, BoxError>(1)
        })
        .unwrap();
    let linker_down = sched.monitor(linker.pid());
    linked.recv_timeout(support::HANG_GUARD).unwrap();
    crasher.addr().send(()).unwrap();
    assert!(join_typed(crasher).unwrap_err().is_failed());
    // Its slot is free once its end took its watches; the link's exit signal follows at once
    // (usually before this returns, so the linker is asked to end while its step runs). Either
    // way, the linker's handle and its monitor must tell the same end.
    support::wait_until("the crasher is gone", || {
        sched.handle().state(crasher_pid).is_none()
    });
    go.send(()).unwrap();
    assert_eq!(join_typed(linker).unwrap(), 1);
    let down = run(linker_down);
    assert!(down.reason.is_normal(), "{down:?}");
}
