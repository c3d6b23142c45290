//! A forced process whose `close` blocks cannot hang the shutdown: the forced stop runs the
//! `close` calls on closer threads (`scheduler/closers.rs`), waits for them for a bounded time,
//! counts a `close` still running then `abandoned`, and hands the closes queued behind a blocked
//! one to a fresh closer, so that every other process is still closed and its handle resolves.

mod support;

use procsched::metrics::ShutdownReport;
use procsched::state_machine::{Event, Events, Process, StepOutput};
use procsched::{BoxError, Payload, ProcessHandle, Scheduler};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;
use support::*;

/// Closed until [`open`](Gate::open)ed: a `close` waiting on it blocks until the test says so.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    fn wait(&self) {
        let (open, changed) = &*self.0;
        let mut open = open.lock().unwrap();
        while !*open {
            open = changed.wait(open).unwrap();
        }
    }

    fn open(&self) {
        let (open, changed) = &*self.0;
        *open.lock().unwrap() = true;
        changed.notify_all();
    }
}

/// Idle until its `Cancel` — then done if `finish_on_cancel`, else left to the forced stop —
/// and its `close` counts itself and blocks on the gate.
struct StuckClose {
    gate: Gate,
    closes: Counter,
    finish_on_cancel: bool,
}

impl Process for StuckClose {
    type Output = Payload;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        let cancelled = events.drain().any(|e| matches!(e, Event::Cancel { .. }));
        if cancelled && self.finish_on_cancel {
            out.done(Payload::empty());
        } else {
            out.idle();
        }
        Ok(())
    }
    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
        self.gate.wait();
    }
}

/// A scheduler with `stuck` processes whose `close` blocks on a gate, spawned first (so the
/// forced stop reaches them first), then `ordinary` ones that ignore their `Cancel` and close at
/// once (forced behind the blocked closes).
struct Shape {
    sched: Arc<Scheduler>,
    gate: Gate,
    stuck_closes: Counter,
    ordinary_closes: Counter,
    stuck: Vec<ProcessHandle>,
    ordinary: Vec<ProcessHandle>,
}

impl Shape {
    fn new(workers: usize, monitor: bool, stuck: usize, finish_on_cancel: bool) -> Shape {
        let sched = Arc::new(
            Scheduler::builder()
                .workers(workers)
                .monitor(monitor)
                .build()
                .unwrap(),
        );
        let (gate, stuck_closes, ordinary_closes) = (Gate::default(), counter(), counter());
        let stuck = (0..stuck)
            .map(|_| {
                let process = StuckClose {
                    gate: gate.clone(),
                    closes: stuck_closes.clone(),
                    finish_on_cancel,
                };
                sched.spawn(process, "run", Payload::empty()).unwrap()
            })
            .collect();
        let inits = counter();
        let ordinary = (0..ORDINARY)
            .map(|_| {
                let process = Counted {
                    inits: inits.clone(),
                    closes: ordinary_closes.clone(),
                    finish_on_cancel: false,
                };
                sched.spawn(process, "run", Payload::empty()).unwrap()
            })
            .collect();
        Shape {
            sched,
            gate,
            stuck_closes,
            ordinary_closes,
            stuck,
            ordinary,
        }
    }

    /// Shuts the scheduler down on a thread of its own, so that a hang fails the test.
    fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        let (tx, rx) = mpsc::channel();
        let sched = self.sched.clone();
        std::thread::spawn(move || {
            let _ = tx.send(sched.shutdown(timeout));
        });
        rx.recv_timeout(HANG_GUARD)
            .expect("hang guard: shutdown never returned (a forced `close` blocked it)")
    }

    /// The ordinary processes queued behind the blocked closes are closed, once each, and their
    /// handles resolve — while the blocked closes still block.
    fn ordinary_closed_behind_the_blocked_ones(&mut self) {
        wait_until("every ordinary process closed", || {
            count(&self.ordinary_closes) == ORDINARY
        });
        for handle in self.ordinary.drain(..) {
            assert!(join_typed(handle).unwrap_err().is_cancelled());
        }
        assert_eq!(count(&self.ordinary_closes), ORDINARY, "closed once each");
    }

    /// Released, the blocked closes return: each ran once, and every handle resolves.
    fn release_the_blocked_closes(self, waited: impl FnOnce(&Scheduler) -> bool) {
        let stuck = self.stuck.len();
        self.gate.open();
        assert!(waited(&self.sched), "wait_for_abandoned covered the closes");
        assert_eq!(
            count(&self.stuck_closes),
            stuck,
            "each blocked close ran once"
        );
        assert_eq!(count(&self.ordinary_closes), ORDINARY);
        for handle in self.stuck {
            assert!(join_typed(handle).unwrap_err().is_cancelled());
        }
        assert_eq!(self.sched.live_processes(), 0);
        assert_eq!(self.sched.handle().registered_processes(), 0);
    }
}

/// Ordinary processes per shape.
const ORDINARY: usize = 10;

fn blocking_wait(sched: &Scheduler) -> bool {
    sched.wait_for_abandoned(HANG_GUARD)
}

/// Asserts the report of a shape with `stuck` blocked closes: every process counted once, each
/// blocked one `abandoned` (the ordinary ones are `forced`, or `abandoned` too if a loaded
/// machine kept their closer from reaching them in time).
fn assert_blocked_closes_abandoned(report: ShutdownReport, stuck: usize) {
    assert_eq!(report.total(), stuck + ORDINARY, "{report:?}");
    assert_eq!(report.graceful, 0, "{report:?}");
    assert!(report.abandoned >= stuck, "{report:?}");
    assert!(!report.is_complete());
}

#[test]
fn three_forced_closes_that_block_on_two_workers_do_not_hang_the_shutdown() {
    let mut shape = Shape::new(2, true, 3, false);
    let report = shape.shutdown(Duration::from_millis(50));
    assert_blocked_closes_abandoned(report, 3);
    shape.ordinary_closed_behind_the_blocked_ones();
    shape.release_the_blocked_closes(blocking_wait);
}

#[test]
fn one_forced_close_that_blocks_on_one_worker_without_a_monitor_does_not_hang_the_shutdown() {
    let mut shape = Shape::new(1, false, 1, false);
    let report = shape.shutdown(Duration::from_millis(50));
    assert_blocked_closes_abandoned(report, 1);
    shape.ordinary_closed_behind_the_blocked_ones();
    shape.release_the_blocked_closes(|sched| {
        futures::executor::block_on(sched.wait_for_abandoned_async());
        true
    });
}

/// The processes end on their `Cancel` and block in `close`: on the workers (and the monitor's
/// spares) for those that got a step, on the closers for those still queued at the deadline.
#[test]
fn closes_that_block_on_workers_and_on_closers_do_not_hang_the_shutdown() {
    let mut shape = Shape::new(2, true, 5, true);
    let report = shape.shutdown(Duration::from_millis(50));
    assert_blocked_closes_abandoned(report, 5);
    shape.ordinary_closed_behind_the_blocked_ones();
    shape.release_the_blocked_closes(blocking_wait);
}

/// Dropping the scheduler (a bounded shutdown with its `drop_timeout`) returns as well.
#[test]
fn dropping_a_scheduler_whose_forced_close_blocks_returns() {
    let shape = Shape::new(1, false, 1, false);
    let Shape {
        sched,
        gate,
        stuck_closes,
        ordinary_closes,
        stuck,
        ordinary,
    } = shape;
    let sched = Arc::into_inner(sched).expect("the only reference");
    let (dropped_tx, dropped_rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(sched);
        let _ = dropped_tx.send(());
    });
    dropped_rx
        .recv_timeout(HANG_GUARD)
        .expect("hang guard: the drop never returned (a forced `close` blocked it)");
    wait_until("every ordinary process closed", || {
        count(&ordinary_closes) == ORDINARY
    });
    for handle in ordinary {
        assert!(join_typed(handle).unwrap_err().is_cancelled());
    }
    gate.open();
    for handle in stuck {
        assert!(join_typed(handle).unwrap_err().is_cancelled());
    }
    assert_eq!(count(&stuck_closes), 1);
    assert_eq!(count(&ordinary_closes), ORDINARY);
}

/// Calls `shutdown` in its `close` (a forced process that shuts the application down with it)
/// and hands the nested call's report over.
struct ShutdownInClose {
    sched: Arc<Scheduler>,
    report: mpsc::Sender<ShutdownReport>,
}

impl Process for ShutdownInClose {
    type Output = Payload;
    fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        out.idle(); // ignores its Cancel
        Ok(())
    }
    fn close(&mut self) {
        let _ = self
            .report
            .send(self.sched.shutdown(Duration::from_millis(100)));
    }
}

#[test]
fn a_shutdown_from_a_forced_close_returns_the_report_so_far() {
    let sched = Arc::new(Scheduler::builder().workers(1).build().unwrap());
    let (nested_tx, nested_rx) = mpsc::channel();
    let process = ShutdownInClose {
        sched: sched.clone(),
        report: nested_tx,
    };
    let handle = sched.spawn(process, "run", Payload::empty()).unwrap();
    let (outer_tx, outer_rx) = mpsc::channel();
    let outer_sched = sched.clone();
    std::thread::spawn(move || {
        let _ = outer_tx.send(outer_sched.shutdown(Duration::from_millis(20)));
    });
    let outer = outer_rx
        .recv_timeout(HANG_GUARD)
        .expect("hang guard: the outer shutdown never returned");
    let nested = nested_rx
        .recv_timeout(HANG_GUARD)
        .expect("hang guard: the nested shutdown never returned");
    // Its own process was not closed yet when the nested call returned.
    assert!(!nested.is_complete(), "{nested:?}");
    assert_eq!(outer.total(), 1, "{outer:?}");
    assert_eq!(
        sched.shutdown(Duration::ZERO),
        outer,
        "the first report stays"
    );
    assert!(join_typed(handle).unwrap_err().is_cancelled());
}

/// A step that reads its events and waits for more, its `Cancel` included: only the forced stop
/// ends such a process.
fn deaf_to_cancel(events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
    events.drain().for_each(drop);
    out.idle();
    Ok(())
}

/// The runtime a scheduler built inside it adopts (a current-thread one it would not).
fn a_multi_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// Ignores its `Cancel`, so the forced stop closes it; its `close` reports whether tokio works
/// there, as it would on a worker.
struct TokioInClose(mpsc::Sender<bool>);

impl Process for TokioInClose {
    type Output = Payload;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        deaf_to_cancel(events, out)
    }
    fn close(&mut self) {
        let spawned = std::panic::catch_unwind(|| drop(tokio::spawn(async {}))).is_ok();
        let _ = self.0.send(spawned);
    }
}

/// Forced closes run on closer threads inside the processes' tokio runtime, as on a worker: a
/// state machine's `close` and an async body's drop guard can use tokio there (on a closer
/// without it, `tokio::spawn` panicked "no reactor running" and the cleanup was lost).
#[test]
fn forced_closes_and_drop_guards_run_inside_the_processes_tokio_runtime() {
    let runtime = a_multi_thread_runtime();
    let (tx, rx) = mpsc::channel();
    let report = runtime.block_on(async {
        let sched = Scheduler::builder().workers(1).build().unwrap();
        let _forced = sched
            .spawn(TokioInClose(tx.clone()), "run", Payload::empty())
            .unwrap();
        struct Guard(mpsc::Sender<bool>);
        impl Drop for Guard {
            fn drop(&mut self) {
                let spawned = std::panic::catch_unwind(|| drop(tokio::spawn(async {}))).is_ok();
                let _ = self.0.send(spawned);
            }
        }
        let guard = Guard(tx.clone());
        let _forced_too = sched
            .spawn_fn(move |cx: procsched::ProcessCx| async move {
                let _guard = guard;
                // Deaf to its cancel: only the forced stop ends it.
                std::future::pending::<()>().await;
                let _ = cx;
                Ok::<_, BoxError>(())
            })
            .unwrap();
        sched.shutdown_async(Duration::from_millis(20)).await
    });
    drop(tx);
    assert_eq!(report.forced, 2, "{report:?}");
    let seen: Vec<bool> = rx.iter().collect();
    assert_eq!(
        seen,
        [true, true],
        "tokio in the close and in the drop guard"
    );
}

/// Waits in its forced `close` for another scheduler's process: a blocking call, which a closer
/// thread may make though it is inside the processes' tokio runtime (it drives none of it).
struct BlocksInClose {
    other: Arc<Scheduler>,
    outcome: mpsc::Sender<Result<u64, String>>,
}

impl Process for BlocksInClose {
    type Output = Payload;
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        deaf_to_cancel(events, out)
    }
    fn close(&mut self) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let answer = self
                .other
                .spawn_fn(|_: procsched::ProcessCx| async { Ok::<_, BoxError>(42u64) })
                .unwrap();
            self.other.block_on(answer).map_err(|e| e.to_string())
        }))
        .unwrap_or_else(|_| Err("block_on panicked in a forced close".to_owned()));
        let _ = self.outcome.send(outcome);
    }
}

#[test]
fn a_forced_close_may_block_on_another_scheduler_inside_the_processes_runtime() {
    let runtime = a_multi_thread_runtime();
    let other = Arc::new(Scheduler::builder().workers(1).build().unwrap());
    let (tx, rx) = mpsc::channel();
    let report = runtime.block_on(async {
        let sched = Scheduler::builder().workers(1).build().unwrap();
        let _forced = sched
            .spawn(
                BlocksInClose {
                    other: other.clone(),
                    outcome: tx,
                },
                "run",
                Payload::empty(),
            )
            .unwrap();
        sched.shutdown_async(Duration::from_millis(20)).await
    });
    assert_eq!(report.total(), 1, "{report:?}");
    assert_eq!(rx.recv_timeout(HANG_GUARD).unwrap(), Ok(42));
}
