//! Public-API tests of monitors (Erlang/OTP semantics, `src/supervision.rs`): one way, one
//! shot — exactly one `Down { monitor, pid, reason }` when the target ends, `NoProc` at once for
//! a target already gone, none after a demonitor (even one already queued), several monitors
//! of one target independent of each other; monitors from outside any process
//! (`SchedulerHandle::monitor`); and the `Down`'s reason is the target handle's `exit_reason()`
//! for every kind of end.
//!
//! "Exactly one" and "none" are checked without waiting for nothing: after the event, the
//! watcher is sent a message, and the next thing it receives must be that message (signals are
//! received before messages, so a stray `Down` would come first). Where a test must know a
//! target's end has been fully signalled, it awaits a monitor registered after the one under
//! test (an end signals its watches in registration order). Deadlines are hang guards only.

mod supervision_common;
mod support;

use procsched::prelude::*;
use procsched::supervision::{Down, ExitReason, Incoming, MonitorRef, Signal};
use std::collections::BTreeSet;
use std::sync::mpsc;
use supervision_common::*;
use support::{join_typed, quiet_panics};

/// The next thing `probe` heard, which must be a `Down`.
#[track_caller]
fn next_down(probe: &Probe) -> Down {
    match probe.next() {
        Heard::Signal(Signal::Down(down)) => down,
        other => panic!("expected a Down, heard {other:?}"),
    }
}

/// A puppet that has already ended (normally).
fn ended_puppet(sched: &Scheduler) -> Pid {
    let gone = spawn_puppet(sched.handle());
    let pid = gone.pid();
    gone.addr().send(Cmd::Finish).unwrap();
    join_typed(gone).unwrap();
    pid
}

#[test]
fn a_monitor_delivers_exactly_one_down_when_its_target_exits() {
    let sched = scheduler(2);
    let probe = Probe::spawn(sched.handle());
    let target = spawn_puppet(sched.handle());
    let target_pid = target.pid();
    let monitor = probe.monitor(target_pid);
    assert_eq!(monitor.target(), target_pid);
    target.addr().send(Cmd::Fail("crashed")).unwrap();
    assert!(join_typed(target).unwrap_err().is_failed());
    let down = next_down(&probe);
    assert_eq!(down.monitor, monitor);
    assert_eq!(down.pid, target_pid);
    assert_eq!(down.reason, ExitReason::failed("crashed"));
    probe.assert_hears_nothing_else(1);
    probe.tell(Order::Finish);
    join_typed(probe.handle).expect("a monitor never ends its watcher");
}

#[test]
fn monitoring_a_dead_target_delivers_noproc_at_once() {
    let sched = scheduler(2);
    let dead = ended_puppet(&sched);
    let never_issued = Pid::from_raw(1 << 26).unwrap();
    let probe = Probe::spawn(sched.handle());
    for gone in [dead, never_issued] {
        let monitor = probe.monitor(gone);
        // Nothing else happens in between: the Down came with the monitor itself.
        let down = next_down(&probe);
        assert_eq!((down.monitor, down.pid), (monitor, gone));
        assert!(down.reason.is_no_proc(), "{down:?}");
        // From outside: resolves at once, too.
        let outside = sched.monitor(gone);
        let reference = outside.reference();
        let down = run(outside);
        assert_eq!((down.monitor, down.pid), (reference, gone));
        assert!(down.reason.is_no_proc(), "{down:?}");
    }
    probe.assert_hears_nothing_else(1);
    probe.tell(Order::Finish);
    join_typed(probe.handle).unwrap();
}

#[test]
fn demonitor_guarantees_no_down_is_delivered_afterwards() {
    let sched = scheduler(2);
    let probe = Probe::spawn(sched.handle());
    let target = spawn_puppet(sched.handle());
    let monitor = probe.monitor(target.pid());
    assert_eq!(
        probe.order(Order::Demonitor(monitor)),
        Heard::Demonitored(true),
        "the monitor was active"
    );
    // Registered after the demonitored one: once it fires, the target's end has been signalled.
    let after = sched.monitor(target.pid());
    target.addr().send(Cmd::Fail("crashed")).unwrap();
    assert!(run(after).reason.is_failed());
    probe.assert_hears_nothing_else(1);
    assert_eq!(
        probe.order(Order::Demonitor(monitor)),
        Heard::Demonitored(false),
        "a second demonitor finds nothing"
    );
    probe.tell(Order::Finish);
    join_typed(probe.handle).unwrap();
    let _ = join_typed(target);
}

#[test]
fn a_demonitor_of_a_monitor_someone_else_holds_changes_nothing() {
    let sched = scheduler(2);
    let probe = Probe::spawn(sched.handle());
    let stranger = Probe::spawn(sched.handle());
    let target = spawn_puppet(sched.handle());
    let held = probe.monitor(target.pid());
    let outside = sched.monitor(target.pid());
    for monitor in [held, outside.reference()] {
        assert_eq!(
            stranger.order(Order::Demonitor(monitor)),
            Heard::Demonitored(false),
            "the stranger holds no such monitor"
        );
        assert!(!sched.handle().demonitor_from(stranger.pid(), monitor));
    }
    // Both monitors still stand: each hears the target's one end.
    target.addr().send(Cmd::Fail("crashed")).unwrap();
    assert!(
        run(outside).reason.is_failed(),
        "the outside monitor was kept"
    );
    let down = next_down(&probe);
    assert_eq!(down.monitor, held);
    assert!(down.reason.is_failed(), "{down:?}");
    probe.assert_hears_nothing_else(1);
    stranger.assert_hears_nothing_else(1);
    for probe in [probe, stranger] {
        probe.tell(Order::Finish);
        join_typed(probe.handle).unwrap();
    }
    let _ = join_typed(target);
}

#[test]
fn demonitor_removes_a_down_already_queued_but_not_yet_received() {
    let sched = scheduler(2);
    let target = spawn_puppet(sched.handle());
    let target_pid = target.pid();
    let (ready_tx, ready_rx) = mpsc::channel::<MonitorRef>();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let watcher = sched
        .spawn_fn(move |cx: ProcessCx<u32>| async move {
            let monitor = cx.monitor(target_pid);
            ready_tx.send(monitor)?;
            // Not receiving: the target ends meanwhile, and its Down waits in the mailbox.
            go_rx.await?;
            let was_active = cx.demonitor(monitor);
            let next = match cx.recv_any().await? {
                Incoming::Message(n) => Ok(n),
                Incoming::Signal(signal) => Err(signal),
                other => return Err(format!("unexpected {other:?}").into()),
            };
            Ok::<_, BoxError>((was_active, next))
        })
        .unwrap();
    let monitor = ready_rx.recv_timeout(GUARD).expect("hang guard");
    let after = sched.monitor(target_pid);
    target.addr().send(Cmd::Finish).unwrap();
    // The watcher's Down was delivered before this one: it is queued, not received.
    assert!(run(after).reason.is_normal());
    watcher.addr().send(7).unwrap();
    go_tx.send(()).unwrap();
    let (was_active, next) = join_typed(watcher).unwrap();
    assert!(was_active, "{monitor}: the queued Down counts as active");
    assert_eq!(next, Ok(7), "the queued Down was removed by the demonitor");
    join_typed(target).unwrap();
}

#[test]
fn many_monitors_on_one_target_are_independent() {
    let sched = scheduler(2);
    let probe = Probe::spawn(sched.handle());
    let target = spawn_puppet(sched.handle());
    let target_pid = target.pid();
    let refs: Vec<MonitorRef> = (0..3).map(|_| probe.monitor(target_pid)).collect();
    assert_eq!(
        refs.iter().collect::<BTreeSet<_>>().len(),
        3,
        "distinct references"
    );
    assert_eq!(
        probe.order(Order::Demonitor(refs[1])),
        Heard::Demonitored(true)
    );
    target.addr().send(Cmd::Finish).unwrap();
    join_typed(target).unwrap();
    let downs = [next_down(&probe), next_down(&probe)];
    let heard: BTreeSet<MonitorRef> = downs.iter().map(|down| down.monitor).collect();
    assert_eq!(heard, BTreeSet::from([refs[0], refs[2]]));
    for down in &downs {
        assert_eq!(down.pid, target_pid);
        assert!(down.reason.is_normal(), "{down:?}");
    }
    probe.assert_hears_nothing_else(1);
    probe.tell(Order::Finish);
    join_typed(probe.handle).unwrap();
}

#[test]
fn a_target_s_downs_come_in_the_order_its_monitors_were_made_after_demonitors_among_them() {
    let sched = scheduler(2);
    let target = spawn_puppet(sched.handle());
    let target_pid = target.pid();
    let (ready_tx, ready) = mpsc::channel();
    let watcher = sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            let made: Vec<MonitorRef> = (0..2_000).map(|_| cx.monitor(target_pid)).collect();
            // Every third goes, from the middle as from the ends.
            let kept: Vec<MonitorRef> = made
                .into_iter()
                .enumerate()
                .filter_map(|(at, monitor)| {
                    (at % 3 != 1 || !cx.demonitor(monitor)).then_some(monitor)
                })
                .collect();
            ready_tx.send(()).unwrap();
            let mut heard = Vec::with_capacity(kept.len());
            for _ in 0..kept.len() {
                heard.push(cx.recv_down().await?.monitor);
            }
            Ok::<_, BoxError>((kept, heard))
        })
        .unwrap();
    ready.recv_timeout(GUARD).unwrap();
    target.addr().send(Cmd::Finish).unwrap();
    join_typed(target).unwrap();
    let (kept, heard) = join_typed(watcher).unwrap();
    assert_eq!(kept.len(), 1_333);
    assert_eq!(
        heard, kept,
        "every kept monitor's Down, once, in the order they were made"
    );
}

#[test]
fn an_outside_monitor_resolves_to_the_one_down_of_its_target() {
    let sched = scheduler(2);
    let target = spawn_puppet(sched.handle());
    let target_pid = target.pid();
    let monitor = sched.monitor(target_pid);
    let reference = monitor.reference();
    assert_eq!(reference.target(), target_pid);
    target.addr().send(Cmd::Fail("crashed")).unwrap();
    let down = run(monitor);
    assert_eq!((down.monitor, down.pid), (reference, target_pid));
    assert_eq!(down.reason, ExitReason::failed("crashed"));
    let _ = join_typed(target);
}

#[test]
fn an_outside_monitor_demonitors_while_active_and_not_once_fired() {
    let sched = scheduler(2);
    let target = spawn_puppet(sched.handle());
    let target_pid = target.pid();
    let demonitored = sched.monitor(target_pid);
    let dropped = sched.monitor(target_pid);
    let fired = sched.monitor(target_pid);
    let last = sched.monitor(target_pid);
    assert!(demonitored.demonitor(), "active: it had not fired");
    drop(dropped);
    target.addr().send(Cmd::Finish).unwrap();
    // Registered last: once it fires, `fired` has fired too.
    assert!(run(last).reason.is_normal());
    assert!(!fired.demonitor(), "it had fired already");
    assert!(
        !sched.monitor(target_pid).demonitor(),
        "a NoProc monitor fires at once"
    );
    join_typed(target).unwrap();
}

/// One way a process ends, caused from outside.
#[derive(Debug, Clone, Copy)]
enum End {
    Done,
    Failed,
    Panicked,
    Terminated,
    Cancelled,
}

#[test]
fn the_down_reason_matches_the_handle_exit_reason_for_every_kind_of_end() {
    quiet_panics();
    let sched = scheduler(2);
    let probe = Probe::spawn(sched.handle());
    for end in [
        End::Done,
        End::Failed,
        End::Panicked,
        End::Terminated,
        End::Cancelled,
    ] {
        let target = spawn_puppet(sched.handle());
        let pid = target.pid();
        let outside = sched.monitor(pid);
        let inside = probe.monitor(pid);
        match end {
            End::Done => target.addr().send(Cmd::Finish).unwrap(),
            End::Failed => target.addr().send(Cmd::Fail("failed")).unwrap(),
            End::Panicked => target.addr().send(Cmd::Panic).unwrap(),
            End::Terminated => sched.terminate(pid).unwrap(),
            End::Cancelled => sched.handle().cancel(pid).unwrap(),
        }
        let from_handle = match join_typed(target) {
            Ok(()) => ExitReason::Normal,
            Err(error) => error.exit_reason(),
        };
        let expected_kind = match end {
            End::Done => from_handle.is_normal(),
            End::Failed => from_handle == ExitReason::failed("failed"),
            End::Panicked => from_handle == ExitReason::Panicked(PANIC.into()),
            End::Terminated => from_handle.is_killed(),
            End::Cancelled => from_handle.is_shutdown(),
        };
        assert!(expected_kind, "{end:?} ended with {from_handle:?}");
        let outside = run(outside);
        assert_eq!(
            (outside.pid, &outside.reason),
            (pid, &from_handle),
            "{end:?}"
        );
        let inside_down = next_down(&probe);
        assert_eq!(inside_down.monitor, inside, "{end:?}");
        assert_eq!(inside_down.reason, from_handle, "{end:?}");
    }
    probe.assert_hears_nothing_else(1);
    probe.tell(Order::Finish);
    join_typed(probe.handle).unwrap();
}

#[test]
fn an_outside_monitor_dropped_after_a_poll_does_not_wake_its_task() {
    // A `select!` loop that makes a new monitor each round and drops the loser must not be
    // woken by the drop itself: one spurious poll per round.
    struct Counting(std::sync::atomic::AtomicUsize);
    impl futures::task::ArcWake for Counting {
        fn wake_by_ref(this: &std::sync::Arc<Self>) {
            this.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let sched = scheduler(1);
    let target = spawn_puppet(sched.handle());
    let wakes = std::sync::Arc::new(Counting(Default::default()));
    let waker = futures::task::waker(wakes.clone());
    let mut monitor = Box::pin(sched.monitor(target.pid()));
    let polled = std::future::Future::poll(
        monitor.as_mut(),
        &mut std::task::Context::from_waker(&waker),
    );
    assert!(polled.is_pending(), "the target lives");
    drop(monitor);
    assert_eq!(wakes.0.load(std::sync::atomic::Ordering::SeqCst), 0);
    target.addr().send(Cmd::Finish).unwrap();
    run(target).unwrap();
}
