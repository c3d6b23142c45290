//! Public-API tests for the raw executor review's findings: spawns and wakes from inside
//! `block_in_place`, a panicking worker context, what shutdown reports as stuck,
//! `Executor::block_on` inside `block_in_place`, and a thread name the OS cannot take.
//!
//! Every test asserts outcomes through channels and counters. Deadlines appear only as hang
//! guards: a test that would hang fails with a message instead.

use procsched::executor::{block_in_place, Executor, Handle};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Generous bound for "this should happen": only a hang guard, never a timing assertion.
const HANG_GUARD: Duration = Duration::from_secs(30);

fn executor(workers: usize, monitor: bool) -> Executor {
    Executor::builder()
        .workers(workers)
        .monitor(monitor)
        .thread_name("review")
        .build()
        .expect("executor starts")
}

/// Every combination the block_in_place tests run in: with the monitor off nothing but the
/// spawn or wake itself may get the task run; with one worker there is no idle worker to wake.
const SETUPS: [(usize, bool); 4] = [(1, false), (2, false), (1, true), (2, true)];

/// Waits (hang guard only) until every worker counted a park it has not woken from.
fn wait_until_all_parked(executor: &Executor) {
    let start = Instant::now();
    while !executor
        .metrics()
        .workers()
        .iter()
        .all(|worker| worker.parks > worker.unparks)
    {
        assert!(
            start.elapsed() < HANG_GUARD,
            "hang guard: workers never parked"
        );
        std::thread::yield_now();
    }
}

// ---- Finding 1: spawns and wakes from inside `block_in_place` ----

#[test]
fn a_task_spawned_inside_block_in_place_runs_while_the_closure_waits_for_it() {
    for (workers, monitor) in SETUPS {
        let executor = executor(workers, monitor);
        let waiter = executor.spawn(async {
            block_in_place(|| {
                let (tx, rx) = mpsc::channel();
                let handle = Handle::try_current().expect("on a worker");
                drop(handle.spawn(async move { tx.send(5).unwrap() }));
                rx.recv_timeout(HANG_GUARD)
            })
        });
        let got = executor.block_on(waiter).unwrap();
        assert_eq!(
            got,
            Ok(5),
            "{workers} workers, monitor {monitor}: the spawned task never ran"
        );
    }
}

#[test]
fn a_task_woken_inside_block_in_place_runs_while_the_closure_waits_for_it() {
    for (workers, monitor) in SETUPS {
        let executor = executor(workers, monitor);
        let (value_tx, value_rx) = futures::channel::oneshot::channel::<u32>();
        let (doubled_tx, doubled_rx) = mpsc::channel::<u32>();
        let handle = executor.handle().clone();
        // The server spawns the client from inside its own poll: the client lands in the
        // server's worker's next slot, so it runs there only once the server is idle, waiting
        // on its channel. The client's send then wakes an idle task that last ran on the very
        // worker that is now blocked.
        let server = executor.spawn(async move {
            let client = handle.spawn(async move {
                block_in_place(move || {
                    value_tx.send(21).unwrap();
                    doubled_rx.recv_timeout(HANG_GUARD)
                })
            });
            let value = value_rx.await.unwrap();
            doubled_tx.send(value * 2).unwrap();
            client.await.unwrap()
        });
        let got = executor.block_on(server).unwrap();
        assert_eq!(
            got,
            Ok(42),
            "{workers} workers, monitor {monitor}: the woken task never ran"
        );
    }
}

#[test]
fn a_task_spawned_inside_block_in_place_is_not_stranded_by_a_spare_retiring() {
    // One worker, no monitor: the closure's spawn goes to the global injector, and the spare
    // the hand-off started is the only thread that can run it. A diff review found the spawn
    // could land while that spare, having found nothing, was retiring: hand-off saw it still
    // active and did nothing, and the spare parked — the closure waited forever (round 0–6 of
    // 2 000). Many short rounds, each hang-guarded.
    for round in 0..500 {
        let executor = Arc::new(executor(1, false));
        let inside = executor.clone();
        let task = executor.spawn(async move {
            block_in_place(|| inside.block_on(inside.spawn(async { 5 })).unwrap())
        });
        let (tx, rx) = mpsc::channel();
        drop(executor.spawn(async move { tx.send(task.await).unwrap() }));
        let got = rx
            .recv_timeout(HANG_GUARD)
            .unwrap_or_else(|_| panic!("hang guard: round {round}, the spawned task never ran"));
        assert_eq!(got.unwrap(), 5);
    }
}

// ---- Finding 2: a panicking worker context ----

#[test]
fn a_worker_context_that_panics_before_running_the_worker_still_gets_it_run() {
    let entered = Arc::new(AtomicUsize::new(0));
    let counted = entered.clone();
    let executor = Executor::builder()
        .workers(2)
        .worker_context(move |_run| {
            counted.fetch_add(1, SeqCst);
            panic!("worker context fails before running the worker");
        })
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    for i in 0..10 {
        let tx = tx.clone();
        drop(executor.spawn(async move { tx.send(i).unwrap() }));
    }
    let mut ran: Vec<i32> = (0..10)
        .map(|_| rx.recv_timeout(HANG_GUARD).expect("a task never ran"))
        .collect();
    ran.sort_unstable();
    assert_eq!(ran, (0..10).collect::<Vec<_>>());
    let report = executor.shutdown(HANG_GUARD);
    assert_eq!(report.stuck_workers, 0);
    assert_eq!(entered.load(SeqCst), 2, "each worker's context was entered");
}

#[test]
fn a_worker_context_that_panics_after_the_worker_ran_ends_its_thread_quietly() {
    let left = Arc::new(AtomicUsize::new(0));
    let counted = left.clone();
    let executor = Executor::builder()
        .workers(2)
        .worker_context(move |run| {
            run();
            counted.fetch_add(1, SeqCst);
            panic!("worker context fails after the worker ran");
        })
        .build()
        .unwrap();
    assert_eq!(executor.block_on(executor.spawn(async { 7 })).unwrap(), 7);
    let report = executor.shutdown(HANG_GUARD);
    assert_eq!(report.stuck_workers, 0);
    // Shutdown joined both threads: their contexts' tails ran (and panicked, contained).
    assert_eq!(left.load(SeqCst), 2);
}

// ---- Finding 3: what shutdown counts as stuck ----

#[test]
fn shutdown_with_no_time_on_an_idle_executor_reports_no_stuck_worker_and_joins_them() {
    for round in 0..200 {
        let left = Arc::new(AtomicUsize::new(0));
        let counted = left.clone();
        let executor = Executor::builder()
            .workers(2)
            .worker_context(move |run| {
                run();
                counted.fetch_add(1, SeqCst);
            })
            .build()
            .unwrap();
        executor.block_on(executor.spawn(async {})).unwrap();
        // Idle means asleep: the worker that ran the task may still be completing it (inside
        // its poll) when `block_on` returns.
        wait_until_all_parked(&executor);
        let report = executor.shutdown(Duration::ZERO);
        assert_eq!(report.stuck_workers, 0, "round {round}");
        // Joined: each worker thread left its context before shutdown returned.
        assert_eq!(left.load(SeqCst), 2, "round {round}");
    }
}

#[test]
fn shutdown_from_inside_a_task_does_not_count_the_calling_worker() {
    for workers in [1, 2] {
        let executor = Arc::new(executor(workers, true));
        let inside = executor.clone();
        let (report_tx, report_rx) = mpsc::channel();
        drop(executor.spawn(async move {
            report_tx.send(inside.shutdown(HANG_GUARD)).unwrap();
        }));
        let report = report_rx
            .recv_timeout(HANG_GUARD)
            .expect("shutdown from inside a task returned");
        assert_eq!(report.stuck_workers, 0, "{workers} workers");
        // Later calls return the first report.
        assert_eq!(executor.shutdown(Duration::ZERO), report);
    }
}

#[test]
fn shutdown_counts_a_worker_blocked_inside_a_poll_and_only_that_one() {
    let executor = executor(2, true);
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let blocked = executor.spawn(async move {
        entered_tx.send(()).unwrap();
        let _ = release_rx.recv_timeout(HANG_GUARD);
    });
    entered_rx
        .recv_timeout(HANG_GUARD)
        .expect("the task started");
    let report = executor.shutdown(Duration::ZERO);
    assert_eq!(report.stuck_workers, 1);
    release_tx.send(()).unwrap();
    // The poll went on to its end: the task finished inside it.
    executor.block_on(blocked).unwrap();
}

// ---- Finding 4: `Executor::block_on` inside `block_in_place` ----

#[test]
fn block_on_inside_block_in_place_runs_the_future() {
    for (workers, monitor) in SETUPS {
        let executor = Arc::new(executor(workers, monitor));
        let inside = executor.clone();
        let task = executor.spawn(async move {
            block_in_place(|| inside.block_on(inside.spawn(async { 5 })).unwrap())
        });
        let (tx, rx) = mpsc::channel();
        drop(executor.spawn(async move { tx.send(task.await).unwrap() }));
        let got = rx.recv_timeout(HANG_GUARD).expect("hang guard");
        assert_eq!(got.unwrap(), 5, "{workers} workers, monitor {monitor}");
    }
}

#[test]
fn block_on_on_a_worker_outside_block_in_place_still_panics() {
    let executor = Arc::new(executor(1, true));
    let inside = executor.clone();
    let task = executor.spawn(async move { inside.block_on(async { 1 }) });
    let error = executor.block_on(task).unwrap_err();
    assert!(error.is_panic());
    assert!(error
        .panic_message()
        .is_some_and(|message| message.contains("block_in_place")));
}

#[test]
fn block_on_inside_block_on_panics() {
    let executor = executor(1, true);
    let nested = catch_unwind(AssertUnwindSafe(|| {
        executor.block_on(async { executor.block_on(async { 1 }) })
    }));
    assert!(nested.is_err());
}

// ---- Finding 5: a thread name the OS cannot take ----

#[test]
fn a_thread_name_with_a_nul_byte_is_refused_as_invalid_input() {
    let built = catch_unwind(|| Executor::builder().thread_name("a\0b").build().map(drop))
        .expect("build returns an error instead of panicking");
    assert_eq!(
        built.err().map(|error| error.kind()),
        Some(std::io::ErrorKind::InvalidInput)
    );
}
