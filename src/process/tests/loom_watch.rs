//! Loom models of links, monitors and trapped exits (`mailbox/watch.rs`, protocols 8 and 9, and
//! "Monitors a process holds").
//!
//! Run: `RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_`

use crate::loom::model::model;
use crate::loom::{thread, Arc};
use crate::process::exit::{Down, Exit, ExitReason, MonitorRef};
use crate::process::mailbox::{Drained, ExitDelivery, ProcessCell, Watch};
use crate::process::{Event, Events, Pid};

/// An open cell and the PID of its first incarnation, in slot `index`.
fn open_cell(index: usize) -> (Arc<ProcessCell>, Pid) {
    let cell = Arc::new(ProcessCell::new(usize::MAX));
    let pid = Pid::new(index, cell.open());
    (cell, pid)
}

/// What the cell's next drain finds: its events, and whether it was asked to end.
fn drain_all(cell: &ProcessCell) -> (Events, bool) {
    let mut events = Events::default();
    let drained = cell.drain_into(&mut events, 16, None);
    (events, drained == Drained::Terminate)
}

/// Protocol 8: a watch registered while the watched process ends — runs its `close`, is
/// released — is taken by the end or refused, never both and never neither.
#[test]
fn loom_a_watch_racing_the_end_is_signalled_exactly_once() {
    model(|| {
        let (target, pid) = open_cell(0);
        let watcher = Pid::new(1, 1);
        let registering = {
            let target = target.clone();
            thread::spawn(move || target.watch(pid.generation(), Watch::Link(watcher)).is_ok())
        };
        let _ = target.close();
        let (_, watches) = target.release();
        let registered = registering.join().unwrap();
        let taken = watches
            .iter()
            .filter(|watch| matches!(watch, Watch::Link(other) if *other == watcher))
            .count();
        assert_eq!(
            taken,
            usize::from(registered),
            "taken exactly when registered"
        );
    });
}

/// `SchedulerHandle::link` against the end of its target: the linker registers on itself,
/// then on the target (falling back to a `NoProc` signal to itself if refused), while the
/// target ends and signals whoever its end took. The linker — trapping, so the signal is an
/// event — hears of the target's end exactly once.
#[test]
fn loom_a_link_racing_the_targets_end_signals_the_linker_exactly_once() {
    model(|| {
        let (linker, a) = open_cell(0);
        let (target, b) = open_cell(1);
        assert!(linker.set_trap_exit(a.generation(), true));
        let linking = {
            let (linker, target) = (linker.clone(), target.clone());
            thread::spawn(move || {
                linker.watch(a.generation(), Watch::Link(b)).unwrap();
                if target.watch(b.generation(), Watch::Link(a)).is_err() {
                    linker.unwatch_link(a.generation(), b);
                    let _ = linker.deliver_exit(a.generation(), Exit::new(b, ExitReason::NoProc));
                }
            })
        };
        let _ = target.close();
        let (_, watches) = target.release();
        for watch in watches {
            if let Watch::Link(other) = watch {
                assert_eq!(other, a);
                let _ = linker.deliver_exit(a.generation(), Exit::new(b, ExitReason::Killed));
            }
        }
        linking.join().unwrap();
        let (events, ending) = drain_all(&linker);
        let exits = events
            .iter()
            .filter(|event| matches!(event, Event::Exit(exit) if exit.pid == b))
            .count();
        assert_eq!(exits, 1, "one signal per end");
        assert!(!ending, "a trapping linker survives");
    });
}

/// Protocol 9: an exit signal racing a toggle of the trap flag is handled wholly by one value:
/// queued as an `Exit` (trapping) or ending the process (not trapping), as its delivery says.
#[test]
fn loom_trap_exit_toggled_during_delivery_takes_the_signal_once() {
    model(|| {
        let (cell, pid) = open_cell(0);
        let from = Pid::new(1, 1);
        let toggling = {
            let cell = cell.clone();
            thread::spawn(move || assert!(cell.set_trap_exit(pid.generation(), true)))
        };
        let delivery = cell.deliver_exit(pid.generation(), Exit::new(from, ExitReason::Killed));
        toggling.join().unwrap();
        let (events, ending) = drain_all(&cell);
        let queued = events
            .iter()
            .filter(|event| matches!(event, Event::Exit(_)))
            .count();
        match delivery {
            ExitDelivery::Trapped => assert!(queued == 1 && !ending),
            ExitDelivery::Ending => {
                assert!(queued == 0 && ending);
                assert!(cell
                    .take_exit_reason()
                    .is_some_and(|reason| reason.is_killed()));
            }
            other => panic!("unexpected {other:?}"),
        }
    });
}

/// "Monitors a process holds": a `Down` racing its watcher's demonitor is never left for the
/// watcher to receive — refused, or queued and then removed — and the demonitor reports the
/// monitor as having been active either way.
#[test]
fn loom_a_demonitor_racing_the_targets_end_leaves_no_down_behind() {
    model(|| {
        let (watcher, pid) = open_cell(0);
        let target = Pid::new(1, 1);
        let monitor = MonitorRef::next(target);
        assert!(watcher.hold_monitor(pid.generation(), monitor));
        let ending = {
            let watcher = watcher.clone();
            thread::spawn(move || {
                watcher.deliver_down(
                    pid.generation(),
                    Down::new(monitor, target, ExitReason::Normal),
                )
            })
        };
        let active = watcher.forget_monitor(pid.generation(), monitor);
        let _ = ending.join().unwrap();
        assert!(active, "held, or its Down queued");
        let (events, _) = drain_all(&watcher);
        assert!(
            !events.iter().any(|event| matches!(event, Event::Down(_))),
            "a Down after the demonitor"
        );
    });
}

/// A supervised child that traps exits, whose supervisor ends during a shutdown
/// (`SchedulerHandle` side: `links.rs`, `exit_signal`; `shared.rs`, `begin_shutdown`): its
/// supervisor's exit signal — which removes the link, and with it the supervisor's claim to
/// stop it — asks it to finish, and races the shutdown's first pass, which visits the cell and
/// cancels it only if no supervisor claims it and no cancel was claimed for it. Both claim
/// under the cell's lock. The child is asked to finish exactly once: never left to a
/// supervisor that is gone, never twice.
#[test]
fn loom_a_trapping_child_whose_supervisor_ends_during_the_shutdowns_first_pass_is_cancelled_exactly_once(
) {
    use crate::loom::atomic::{AtomicUsize, Ordering::SeqCst};
    model(|| {
        let (child, pid) = open_cell(0);
        let supervisor = Pid::new(1, 1);
        assert!(child.set_supervised(pid.generation(), supervisor));
        child
            .watch(pid.generation(), Watch::Link(supervisor))
            .unwrap();
        assert!(child.set_trap_exit(pid.generation(), true));
        let cancels = Arc::new(AtomicUsize::new(0));
        let first_pass = {
            let (child, cancels) = (child.clone(), cancels.clone());
            thread::spawn(move || {
                if child.shutdown_target().is_some() {
                    cancels.fetch_add(1, SeqCst);
                }
            })
        };
        let exit = Exit::new(supervisor, ExitReason::Killed);
        let delivery = child.deliver_exit(pid.generation(), exit);
        assert_eq!(delivery, ExitDelivery::Stopped);
        first_pass.join().unwrap();
        assert_eq!(
            cancels.load(SeqCst),
            0,
            "asked by its supervisor's end only"
        );
        let (events, ending) = drain_all(&child);
        let asked = events
            .iter()
            .filter(|event| matches!(event, Event::Cancel { .. }))
            .count();
        assert!(asked == 1 && !ending, "one Cancel, not a termination");
        assert!(!events.iter().any(|event| matches!(event, Event::Exit(_))));
        assert!(child
            .take_exit_reason()
            .is_some_and(|reason| reason.is_killed()));
    });
}
