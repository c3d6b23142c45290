//! The forced stop cancels process tasks through their cells (`scheduler/tasks.rs`): processes
//! parked on a waker nobody fires, spawns racing the forced stop, and processes finishing while
//! it runs are each closed once and counted once.

mod support;

use procsched::metrics::ProcessState;
use procsched::state_machine::{Events, Process, StepOutput};
use procsched::{BoxError, Payload, ProcessCx, ProcessHandle, Scheduler};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Barrier};
use std::time::Duration;
use support::*;

/// Counts its drops.
struct DropCount(Counter);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A body parked on a waker nobody fires: it counts its start in `started`, holds a
/// [`DropCount`] of `drops`, and ignores its Cancel.
fn spawn_parked_forever(
    sched: &Scheduler,
    started: &Counter,
    drops: &Counter,
) -> ProcessHandle<()> {
    let (started, guard) = (started.clone(), DropCount(drops.clone()));
    sched
        .spawn_fn(move |_cx: ProcessCx| async move {
            let _guard = guard;
            started.fetch_add(1, SeqCst);
            // Ignores its Cancel: nothing will ever wake this await.
            std::future::pending::<()>().await;
            Ok::<(), BoxError>(())
        })
        .unwrap()
}

#[test]
fn a_forced_shutdown_drops_processes_parked_on_a_waker_nobody_fires_and_closes_each_once() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (started, drops) = (support::counter(), support::counter());
    let handles: Vec<_> = (0..20)
        .map(|_| spawn_parked_forever(&sched, &started, &drops))
        .collect();
    wait_until("every body parked", || count(&started) == 20);
    let report = sched.shutdown(Duration::from_millis(50));
    // Forced — or abandoned, if a loaded machine held a worker inside a poll.
    assert_eq!(report.graceful, 0);
    assert_eq!(report.forced + report.abandoned, 20, "{report:?}");
    assert!(sched.wait_for_abandoned(HANG_GUARD));
    assert_eq!(count(&drops), 20, "every parked body dropped, once");
    for handle in handles {
        let err = join_typed(handle).unwrap_err();
        assert!(err.is_cancelled(), "{err:?}");
    }
    assert_eq!(sched.live_processes(), 0);
    assert_eq!(sched.handle().registered_processes(), 0);
}

#[test]
fn spawns_racing_with_a_forced_shutdown_are_cancelled_and_closed_once() {
    for round in 0..scaled(20) {
        let sched = Arc::new(Scheduler::builder().workers(2).build().unwrap());
        let (inits, closes) = (support::counter(), support::counter());
        let start = Arc::new(Barrier::new(3));
        let spawners = {
            let (inits, closes) = (inits.clone(), closes.clone());
            // Ignores its `Cancel`: only the forced stop ends it.
            spawn_until_refused(&sched, 2, &start, move || Counted {
                inits: inits.clone(),
                closes: closes.clone(),
                finish_on_cancel: false,
            })
        };
        start.wait();
        // A zero or tiny grace period: the forced stop meets spawns still in flight.
        let report = sched.shutdown(Duration::from_micros(round as u64 % 4 * 100));
        let accepted: Vec<_> = spawners
            .into_iter()
            .flat_map(|s| s.join().unwrap())
            .collect();
        assert!(sched.wait_for_abandoned(HANG_GUARD));
        assert_eq!(report.graceful, 0, "round {round}: {report:?}");
        assert!(
            accepted.len() <= report.total() && report.total() <= count(&inits),
            "round {round}: {} accepted, {} inits, {report:?}",
            accepted.len(),
            count(&inits)
        );
        assert_eq!(
            count(&closes),
            count(&inits),
            "round {round}: every initialised process closed once"
        );
        for result in join_all(accepted) {
            assert!(result.unwrap_err().is_cancelled());
        }
        assert_eq!(sched.live_processes(), 0);
        assert_eq!(sched.handle().registered_processes(), 0);
    }
}

#[test]
fn processes_finishing_while_the_forced_stop_runs_are_closed_once_and_counted_once() {
    for round in 0..scaled(10) {
        let sched = Scheduler::builder().workers(2).build().unwrap();
        let closes: Vec<support::Counter> = (0..200).map(|_| support::counter()).collect();
        let handles: Vec<_> = closes
            .iter()
            .enumerate()
            .map(|(i, closes)| {
                // Finishes on its own after a few steps (0 to 49), ignoring Cancel.
                let mut left = (i * 7 + round) % 50;
                let finisher = FnProcess::new(closes, move |events, out| {
                    events.drain().for_each(drop);
                    if left == 0 {
                        out.done(Payload::empty());
                    } else {
                        left -= 1;
                        out.continue_();
                    }
                    Ok(())
                });
                sched.spawn(finisher, "run", Payload::empty()).unwrap()
            })
            .collect();
        let report = sched.shutdown(Duration::ZERO);
        assert!(sched.wait_for_abandoned(HANG_GUARD));
        assert!(
            closes.iter().all(|c| count(c) == 1),
            "round {round}: every close exactly once"
        );
        let cancelled = join_all(handles)
            .into_iter()
            .filter(|result| match result {
                Ok(_) => false,
                Err(e) => {
                    assert!(e.is_cancelled(), "{e:?}");
                    true
                }
            })
            .count();
        // Finished before shutdown (not counted), or counted once; the handles agree with the
        // report: exactly the forced and the abandoned ones (whatever their last step did)
        // report cancellation.
        assert!(report.total() <= 200, "round {round}: {report:?}");
        assert_eq!(
            cancelled,
            report.forced + report.abandoned,
            "round {round}: {cancelled} cancelled, {report:?}"
        );
        assert_eq!(sched.live_processes(), 0);
        assert_eq!(sched.handle().registered_processes(), 0);
    }
}

/// Ignores its `Cancel`, idles; its `close` panics.
struct ClosePanics {
    steps: Counter,
}

impl Process for ClosePanics {
    type Output = u64;

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        events.drain().for_each(drop);
        self.steps.fetch_add(1, SeqCst);
        out.idle();
        Ok(())
    }

    fn close(&mut self) {
        panic!("{EXPECTED_PANIC}: close");
    }
}

#[test]
fn a_forced_stop_whose_close_panics_is_panicked_to_its_handle_monitors_and_metrics() {
    support::quiet_panics();
    for round in 0..scaled(20) {
        let sched = Scheduler::builder().workers(1).build().unwrap();
        let steps = support::counter();
        let handle = sched
            .spawn(
                ClosePanics {
                    steps: steps.clone(),
                },
                "run",
                Payload::empty(),
            )
            .unwrap();
        let pid = handle.pid();
        let monitor = sched.monitor(pid);
        wait_until("the first step", || count(&steps) > 0);
        wait_for_state(sched.handle(), pid, ProcessState::Idle);
        let report = sched.shutdown(Duration::from_millis(20));
        assert!(sched.wait_for_abandoned(HANG_GUARD));
        // Forced — or abandoned, if a loaded machine held the worker inside a poll.
        assert_eq!(report.graceful, 0, "round {round}: {report:?}");
        assert_eq!(
            report.forced + report.abandoned,
            1,
            "round {round}: {report:?}"
        );
        let err = join_typed(handle).unwrap_err();
        assert!(err.is_panicked(), "round {round}: handle {err:?}");
        assert!(err.exit_reason().is_panicked(), "round {round}: {err:?}");
        let down = futures::executor::block_on(monitor);
        assert_eq!(
            down.reason.name(),
            err.exit_reason().name(),
            "round {round}: the Down and the handle agree"
        );
        let metrics = sched.metrics();
        assert_eq!(
            (metrics.finished.panicked, metrics.finished.forced),
            (1, 0),
            "round {round}: {:?}",
            metrics.finished
        );
        assert_eq!(
            metrics.exits.panicked, 1,
            "round {round}: {:?}",
            metrics.exits
        );
        assert_eq!(
            metrics.exits.total(),
            1,
            "round {round}: {:?}",
            metrics.exits
        );
    }
}

/// Ignores everything, its `Cancel` included: forced at the deadline; counts its closes.
struct Stubborn(Counter);

impl Process for Stubborn {
    type Output = Payload;

    fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        out.idle();
        Ok(())
    }

    fn close(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// The forced stop walks the table in pieces, bounded by its deadline (`scheduler/tasks.rs`,
/// step 4; `closers.rs`), and the seal reads a count instead of visiting the cells: with more
/// processes than a short forced stop can close, each is still counted once — `forced` if
/// closed in time, else `abandoned` and closed after `shutdown` returned — and every handle
/// resolves cancelled. (The time `shutdown` takes is the release probe's to measure:
/// `examples/shutdown_many.rs`.)
#[test]
fn a_forced_stop_of_more_processes_than_it_can_close_in_time_counts_and_closes_each_once() {
    let processes = scaled(20_000);
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (started, closes, drops) = (support::counter(), support::counter(), support::counter());
    let mut bodies = Vec::with_capacity(processes / 2);
    let mut machines = Vec::with_capacity(processes / 2);
    for _ in 0..processes / 2 {
        bodies.push(spawn_parked_forever(&sched, &started, &drops));
        machines.push(
            sched
                .spawn(Stubborn(closes.clone()), "run", Payload::empty())
                .unwrap(),
        );
    }
    wait_until("every body parked", || count(&started) == processes / 2);
    let report = sched.shutdown(Duration::ZERO);
    assert_eq!(report.graceful, 0, "{report:?}");
    assert_eq!(report.total(), processes, "each counted once: {report:?}");
    assert!(sched.wait_for_abandoned(HANG_GUARD), "the rest are closed");
    assert_eq!(count(&drops), processes / 2, "every body dropped once");
    assert_eq!(
        count(&closes),
        processes / 2,
        "every state machine closed once"
    );
    for handle in bodies {
        assert!(join_typed(handle).unwrap_err().is_cancelled());
    }
    for handle in machines {
        assert!(join_typed(handle).unwrap_err().is_cancelled());
    }
    let finished = sched.metrics().finished;
    assert_eq!(finished.forced as usize, processes, "{finished:?}");
    assert_eq!(sched.live_processes(), 0);
}
