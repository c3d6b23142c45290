//! Public-API tests of shutdown: the grace period, forcing, and the bounded return with every
//! process counted once — including processes stuck inside user code (abandoned) and spawns
//! racing with it.
//!
//! Deadlines appear only as hang guards and as the shutdown timeouts under test (which bound a
//! wait, never an assertion).

mod support;

use procsched::{
    error::InitError,
    metrics::ProcessState,
    state_machine::{Event, Process, ProcessContext},
    Payload, Scheduler,
};
use procsched::{
    error::SpawnError,
    state_machine::{Events, StepOutput},
    BoxError,
};
use std::future::Future;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;
use support::*;

// ---------------------------------------------------------------------------------------------
// shutdown
// ---------------------------------------------------------------------------------------------

/// Parks `Idle`; finishes on `Cancel` (if `graceful`) with `7u8`, ignores everything else.
fn cancellable(closes: &support::Counter, graceful: bool) -> FnProcess {
    FnProcess::new(closes, move |events, out| {
        for event in events.drain() {
            if let Event::Cancel { .. } = event {
                if graceful {
                    out.done(Payload::new(7u8));
                    return Ok(());
                }
            }
        }
        out.idle();
        Ok(())
    })
}

#[test]
fn shutdown_lets_idle_processes_finish_on_cancel() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let closes = support::counter();
    let handles: Vec<_> = (0..10)
        .map(|_| {
            sched
                .spawn(cancellable(&closes, true), "run", Payload::empty())
                .unwrap()
        })
        .collect();
    for handle in &handles {
        wait_for_state(sched.handle(), handle.pid(), ProcessState::Idle);
    }
    let report = sched.shutdown(HANG_GUARD);
    assert_eq!((report.graceful, report.forced), (10, 0));
    assert_eq!(
        count(&closes),
        10,
        "every close ran before shutdown returned"
    );
    for result in join_all(handles) {
        assert_eq!(result.unwrap().downcast::<u8>().unwrap(), 7);
    }
    assert_eq!(sched.live_processes(), 0);
}

#[test]
fn shutdown_forces_a_process_that_ignores_cancel() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let closes = support::counter();
    let stubborn = sched
        .spawn(cancellable(&closes, false), "run", Payload::empty())
        .unwrap();
    wait_for_state(sched.handle(), stubborn.pid(), ProcessState::Idle);
    let report = sched.shutdown(Duration::from_millis(200));
    // Forced — or abandoned, if a loaded machine held a worker inside its Cancel step.
    assert_eq!((report.graceful, report.forced + report.abandoned), (0, 1));
    assert!(sched.wait_for_abandoned(HANG_GUARD));
    assert_eq!(count(&closes), 1);
    assert_eq!(sched.shutdown(HANG_GUARD), report, "a second call agrees");
    let err = join(stubborn).unwrap_err();
    assert!(err.is_cancelled(), "{err:?}");
}

/// Ignores `Cancel` and keeps asking to run again; counts its steps, and its `close` as a
/// million of them; the [`DropCounter`] says when the process itself is gone.
struct Stubborn {
    steps: Counter,
    _dropped: DropCounter,
}

impl Process for Stubborn {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        events.drain().for_each(drop);
        self.steps.fetch_add(1, SeqCst);
        out.continue_();
        Ok(())
    }
    fn close(&mut self) {
        self.steps.fetch_add(1_000_000, SeqCst);
    }
}

#[test]
fn async_shutdown_inside_tokio_forces_a_stubborn_process_and_closes_it() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (steps, dropped) = (support::counter(), support::counter());
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let handle = sched
        .spawn(
            Stubborn {
                steps: steps.clone(),
                _dropped: DropCounter(dropped.clone()),
            },
            "run",
            Payload::empty(),
        )
        .unwrap();
    let report = runtime.block_on(sched.shutdown_async(Duration::from_millis(50)));
    // Forced — or abandoned, if a loaded machine held a worker inside its step past the stop.
    assert_eq!((report.graceful, report.forced + report.abandoned), (0, 1));
    assert!(sched.wait_for_abandoned(HANG_GUARD));
    let after = count(&steps);
    assert!(after >= 1_000_000, "close ran");
    assert!(sched.block_on(handle).unwrap_err().is_cancelled());
    // No step runs after shutdown returned: once the process is dropped none can, and its count
    // is still the one read then.
    wait_until("the stubborn process is dropped", || count(&dropped) == 1);
    assert_eq!(count(&steps), after);
}

#[test]
fn shutdown_mid_flight_stops_every_step_and_closes_every_process() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let closes: Vec<support::Counter> = (0..50).map(|_| support::counter()).collect();
    let steps = support::counter();
    let handles: Vec<_> = closes
        .iter()
        .map(|closes| {
            let steps = steps.clone();
            // Busy: always Continue, ignores Cancel.
            let busy = FnProcess::new(closes, move |_, out| {
                steps.fetch_add(1, SeqCst);
                out.continue_();
                Ok(())
            });
            sched.spawn(busy, "run", Payload::empty()).unwrap()
        })
        .collect();
    wait_until("every busy process stepping", || count(&steps) >= 500);
    let report = sched.shutdown(Duration::from_millis(100));
    // A step still running when the workers are stopped is abandoned (a worker descheduled for
    // longer than FORCED_STOP_WAIT on a loaded machine); every process is counted either way.
    assert_eq!(report.graceful, 0);
    assert_eq!(report.forced + report.abandoned, 50, "{report:?}");
    assert!(sched.wait_for_abandoned(HANG_GUARD));
    let after = count(&steps);
    for _ in 0..10_000 {
        thread::yield_now();
    }
    assert_eq!(
        count(&steps),
        after,
        "no step runs after the last one returned"
    );
    assert!(
        closes.iter().all(|c| count(c) == 1),
        "every close exactly once"
    );
    for result in join_all(handles) {
        assert!(result.unwrap_err().is_cancelled());
    }
    assert_eq!(sched.live_processes(), 0);
    assert_eq!(sched.handle().registered_processes(), 0);
}

#[test]
fn spawn_after_shutdown_fails_and_shutdown_is_idempotent_and_concurrent() {
    let sched = Arc::new(Scheduler::builder().workers(2).build().unwrap());
    let closes = support::counter();
    let graceful: Vec<_> = (0..5)
        .map(|_| {
            sched
                .spawn(cancellable(&closes, true), "run", Payload::empty())
                .unwrap()
        })
        .collect();
    for handle in &graceful {
        wait_for_state(sched.handle(), handle.pid(), ProcessState::Idle);
    }
    let barrier = Arc::new(Barrier::new(4));
    let reports: Vec<_> = (0..4)
        .map(|_| {
            let (sched, barrier) = (sched.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                sched.shutdown(HANG_GUARD)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert!(reports.iter().all(|r| *r == reports[0]), "{reports:?}");
    assert_eq!((reports[0].graceful, reports[0].forced), (5, 0));
    assert_eq!(
        sched.shutdown(HANG_GUARD),
        reports[0],
        "a later call agrees"
    );
    assert!(sched.handle().is_shutting_down());
    assert_eq!(count(&closes), 5);

    let err = sched
        .spawn(cancellable(&closes, true), "run", Payload::empty())
        .unwrap_err();
    assert!(matches!(err, SpawnError::ShuttingDown), "{err:?}");
    let handle = sched.handle().clone();
    let from_thread = thread::spawn(move || {
        handle
            .spawn(
                cancellable(&support::counter(), true),
                "run",
                Payload::empty(),
            )
            .map(|h| h.pid())
    });
    assert!(matches!(
        from_thread.join().unwrap(),
        Err(SpawnError::ShuttingDown)
    ));
    assert_eq!(sched.live_processes(), 0);
    for result in join_all(graceful) {
        assert_eq!(result.unwrap().downcast::<u8>().unwrap(), 7);
    }
    assert_eq!(count(&closes), 5, "a refused spawn never runs its process");
}

// ---------------------------------------------------------------------------------------------
// Stuck in user code at the deadline: abandoned, bounded, counted once
// ---------------------------------------------------------------------------------------------

#[test]
fn a_step_stuck_past_the_timeout_is_abandoned_and_shutdown_returns_without_it() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let closes = support::counter();
    let (gate, inside) = step_gate();
    let stuck = sched
        .spawn(
            FnProcess::new(&closes, move |_, out| {
                inside.wait();
                out.idle();
                Ok(())
            }),
            "run",
            Payload::empty(),
        )
        .unwrap();
    let graceful_closes = support::counter();
    let graceful: Vec<_> = (0..5)
        .map(|_| {
            sched
                .spawn(cancellable(&graceful_closes, true), "run", Payload::empty())
                .unwrap()
        })
        .collect();
    recv(&gate.entered);
    for handle in &graceful {
        wait_for_state(sched.handle(), handle.pid(), ProcessState::Idle);
    }

    // The stuck step holds its worker until the test releases it, which it does only after
    // shutdown returned: a shutdown that waited for the step would trip the hang guard.
    let (report_tx, report_rx) = mpsc::channel();
    let sched = Arc::new(sched);
    let shutting = {
        let sched = sched.clone();
        // Long enough for the five idle processes to finish on their Cancel on a loaded machine.
        thread::spawn(move || report_tx.send(sched.shutdown(Duration::from_secs(2))))
    };
    let report = recv(&report_rx);
    shutting.join().unwrap().unwrap();
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (5, 0, 1),
        "every process counted once: {report:?}"
    );
    assert!(!report.is_complete());
    assert_eq!(
        count(&closes),
        0,
        "the stuck process is still inside its step"
    );
    assert_eq!(count(&graceful_closes), 5);
    assert_eq!(sched.shutdown(HANG_GUARD), report, "a second call agrees");

    gate.release.send(()).unwrap();
    assert!(sched.wait_for_abandoned(HANG_GUARD));
    assert_eq!(count(&closes), 1, "closed once its step returned");
    assert!(join(stuck).unwrap_err().is_cancelled());
    assert_eq!(sched.live_processes(), 0);
    assert_eq!(sched.handle().registered_processes(), 0);
}

/// `init` blocks until the test releases it.
struct SlowInit {
    entered: mpsc::Sender<()>,
    release: mpsc::Receiver<()>,
    closes: Counter,
}

impl Process for SlowInit {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        self.entered.send(()).unwrap();
        self.release.recv_timeout(HANG_GUARD).unwrap();
        Ok(())
    }
    fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        out.idle();
        Ok(())
    }
    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
    }
}

#[test]
fn a_spawn_whose_init_outlives_shutdown_is_counted_abandoned_then_fails() {
    let sched = Arc::new(Scheduler::builder().workers(2).build().unwrap());
    let closes = support::counter();
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let spawner = {
        let (sched, closes) = (sched.clone(), closes.clone());
        thread::spawn(move || {
            let process = SlowInit {
                entered: entered_tx,
                release: release_rx,
                closes,
            };
            sched
                .spawn(process, "run", Payload::empty())
                .map(|h| h.pid())
        })
    };
    recv(&entered_rx);
    let report = sched.shutdown(Duration::from_millis(50));
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (0, 0, 1),
        "the spawn inside init is counted: {report:?}"
    );
    release_tx.send(()).unwrap();
    let spawned = spawner.join().unwrap();
    assert!(
        matches!(spawned, Err(SpawnError::ShuttingDown)),
        "a spawn that outlived shutdown must fail: {spawned:?}"
    );
    assert_eq!(count(&closes), 1, "its close ran, on the spawning thread");
    assert!(sched.wait_for_abandoned(HANG_GUARD));
    assert_eq!(sched.live_processes(), 0);
}

#[test]
fn spawns_racing_with_shutdown_either_fail_or_are_counted() {
    for round in 0..scaled(20) {
        let sched = Arc::new(Scheduler::builder().workers(2).build().unwrap());
        let (inits, closes) = (support::counter(), support::counter());
        let start = Arc::new(Barrier::new(5));
        let spawners = {
            let (inits, closes) = (inits.clone(), closes.clone());
            spawn_until_refused(&sched, 4, &start, move || Counted {
                inits: inits.clone(),
                closes: closes.clone(),
                finish_on_cancel: true,
            })
        };
        start.wait();
        let report = sched.shutdown(Duration::from_millis(round as u64 % 3));
        let accepted: Vec<_> = spawners
            .into_iter()
            .flat_map(|s| s.join().unwrap())
            .collect();
        assert!(sched.wait_for_abandoned(HANG_GUARD));
        // Every accepted spawn is counted; a spawn counted while still inside `init` may then
        // fail; nothing is counted that never ran `init`.
        assert!(
            accepted.len() <= report.total() && report.total() <= count(&inits),
            "round {round}: {} accepted, {} inits, {report:?}",
            accepted.len(),
            count(&inits)
        );
        assert_eq!(
            count(&closes),
            count(&inits),
            "every initialised process closed once"
        );
        for result in join_all(accepted) {
            if let Err(e) = result {
                assert!(e.is_cancelled(), "{e:?}");
            }
        }
        assert_eq!(sched.live_processes(), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Dropping a scheduler where waiting would stall the thread
// ---------------------------------------------------------------------------------------------

#[test]
fn dropping_a_scheduler_inside_a_process_close_does_not_wait_for_its_own_worker() {
    // The process owns its scheduler and drops it in `close`, on a worker of that scheduler.
    // With a drop timeout of an hour, a drop that waited for its workers would trip the guard.
    let slot: Arc<std::sync::Mutex<Option<Scheduler>>> = Arc::default();
    let sched = Scheduler::builder()
        .workers(1)
        .drop_timeout(Duration::from_secs(3600))
        .build()
        .unwrap();
    let (dropped_tx, dropped_rx) = mpsc::channel();
    let owner = {
        let slot = slot.clone();
        FnProcess::new(&support::counter(), |events, out| {
            match events.pop() {
                Some(Event::Message(_)) => out.done(Payload::empty()),
                _ => out.idle(),
            }
            Ok(())
        })
        .on_close(move || {
            drop(slot.lock().unwrap().take());
            let _ = dropped_tx.send(());
        })
    };
    let handle = sched.spawn(owner, "run", Payload::empty()).unwrap();
    let pid = handle.pid();
    let sender = sched.handle().clone();
    *slot.lock().unwrap() = Some(sched);
    sender
        .send(pid, procsched::Message::new("stop", Payload::empty()))
        .unwrap();
    recv(&dropped_rx);
    assert!(join(handle).is_ok());
}

#[test]
fn dropping_a_scheduler_inside_a_runtime_does_not_block_the_runtime_thread() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let closes = support::counter();
    let stubborn = cancellable(&closes, false);
    runtime.block_on(async {
        let sched = Scheduler::builder()
            .workers(1)
            .drop_timeout(Duration::from_secs(3600))
            .build()
            .unwrap();
        let handle = sched.spawn(stubborn, "run", Payload::empty()).unwrap();
        // A drop that waited for the stubborn process would hold this thread for an hour.
        drop(sched);
        assert!(!handle.is_finished());
    });
}

/// A process that awaits `shutdown_async` on its own scheduler: the grace period ends as soon as
/// every *other* process has finished (the caller cannot finish while it waits — a shutdown that
/// waited for it would trip the hang guard used as the timeout), the final stop does not wait
/// for the caller's worker, the report counts the caller `abandoned` (it is inside its step),
/// and its handle agrees: cancelled, although its body then returns `Ok`.
#[test]
fn a_process_awaiting_its_own_schedulers_shutdown_is_counted_abandoned_and_its_handle_agrees() {
    use procsched::prelude::*;
    let sched = Arc::new(Scheduler::builder().workers(2).build().unwrap());
    let others: Vec<_> = (0..3)
        .map(|_| {
            sched
                .spawn_fn(|cx: ProcessCx| async move {
                    let _ = cx.cancelled().await;
                    Ok::<_, BoxError>(())
                })
                .unwrap()
        })
        .collect();
    for other in &others {
        wait_for_state(sched.handle(), other.pid(), ProcessState::Idle);
    }
    let (report_tx, report_rx) = mpsc::channel();
    let caller = {
        let sched = sched.clone();
        sched
            .clone()
            .spawn_fn(move |_: ProcessCx| async move {
                let report = sched.shutdown_async(HANG_GUARD).await;
                report_tx.send(report).unwrap();
                Ok::<_, BoxError>("returned")
            })
            .unwrap()
    };
    let report = recv(&report_rx);
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (3, 0, 1),
        "{report:?}"
    );
    assert!(join_typed(caller).unwrap_err().is_cancelled());
    for other in others {
        join_typed(other).unwrap();
    }
    assert!(sched.wait_for_abandoned(HANG_GUARD));
    let finished = sched.metrics().finished;
    assert_eq!(
        (finished.cancelled, finished.forced),
        (3, 1),
        "{finished:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// concurrent calls
// ---------------------------------------------------------------------------------------------

/// A body that, once cancelled, cleans up until the test releases it; says when its cancel
/// came.
fn slow_cleaner(
    sched: &Scheduler,
) -> (
    procsched::ProcessHandle<&'static str, ()>,
    mpsc::Receiver<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (cancelled, cancel_seen) = mpsc::channel();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let handle = sched
        .spawn_fn(move |cx: procsched::ProcessCx<()>| async move {
            let _ = cx.cancelled().await;
            cancelled.send(()).unwrap();
            let _ = released.await;
            Ok::<_, BoxError>("cleaned up")
        })
        .unwrap();
    (handle, cancel_seen, release)
}

#[test]
fn a_concurrent_shutdown_with_a_shorter_timeout_keeps_to_the_first_calls() {
    // The first call grants a long grace period; a second one asks for none while the first
    // waits. Polled once, the second must not force the process (it did: `shutdown_async`
    // callers each kept to their own deadline); both get the first call's report.
    for second_is_async in [true, false] {
        let sched = Arc::new(Scheduler::builder().workers(2).build().unwrap());
        let (handle, cancel_seen, release) = slow_cleaner(&sched);
        let first = {
            let sched = sched.clone();
            thread::spawn(move || futures::executor::block_on(sched.shutdown_async(HANG_GUARD)))
        };
        recv(&cancel_seen); // the first call is in its grace period
        let second = if second_is_async {
            let mut second = Box::pin(sched.shutdown_async(Duration::ZERO));
            let waker = futures::task::noop_waker();
            let polled = second
                .as_mut()
                .poll(&mut std::task::Context::from_waker(&waker));
            assert!(polled.is_pending(), "the second call forced the stop");
            release.send(()).unwrap();
            futures::executor::block_on(second)
        } else {
            let sched_for_second = sched.clone();
            let second = thread::spawn(move || sched_for_second.shutdown(Duration::ZERO));
            release.send(()).unwrap();
            second.join().unwrap()
        };
        let first = first.join().unwrap();
        assert_eq!((first.graceful, first.forced), (1, 0), "{first:?}");
        assert_eq!(second, first);
        assert_eq!(sched.block_on(handle).unwrap(), "cleaned up");
    }
}

#[test]
fn a_shutdown_keeps_to_its_own_timeout_once_the_first_call_is_dropped() {
    // A first `shutdown_async` with a long timeout is in progress when a second call (no
    // grace) comes: the second keeps to the first's deadline. Then the first is dropped (a
    // `tokio::time::timeout` around it gave up): the second keeps to its own from then on and
    // forces the process that ignores its cancel. Before, it had copied the first's deadline
    // at its call and waited it out (an hour here: the hang guard).
    let sched = Arc::new(Scheduler::builder().workers(2).build().unwrap());
    let (cancelled, cancel_seen) = mpsc::channel();
    let stubborn = sched
        .spawn_fn(move |cx: procsched::ProcessCx<()>| async move {
            let _ = cx.cancelled().await;
            cancelled.send(()).unwrap();
            loop {
                let _ = cx.recv().await; // ignores the cancel: only a forced stop ends it
            }
            #[allow(unreachable_code)]
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut first = Box::pin(sched.shutdown_async(Duration::from_secs(3600)));
    assert!(first.as_mut().poll(&mut cx).is_pending());
    recv(&cancel_seen); // the grace period has begun
    let mut second = Box::pin(sched.shutdown_async(Duration::ZERO));
    assert!(
        second.as_mut().poll(&mut cx).is_pending(),
        "the second call keeps to the first's deadline while it is in progress"
    );
    drop(first);
    let (guard, expired) = futures::channel::oneshot::channel::<()>();
    thread::spawn(move || {
        thread::sleep(HANG_GUARD); // a hang guard, not a synchronisation
        let _ = guard.send(());
    });
    let report = match futures::executor::block_on(futures::future::select(second, expired)) {
        futures::future::Either::Left((report, _)) => report,
        futures::future::Either::Right(_) => {
            panic!("hang guard: the second call waited out the dropped first call's deadline")
        }
    };
    assert_eq!((report.graceful, report.forced), (0, 1), "{report:?}");
    assert!(sched.block_on(stubborn).unwrap_err().is_cancelled());
}
