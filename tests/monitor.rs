//! The executor's monitor (`procsched::executor`): long polls are reported once, blocked workers
//! are replaced by spares while work waits, spares retire afterwards, and hand-offs never lose or
//! repeat a task.
//!
//! No timing assertions: deadlines are hang guards only (a test that would hang fails with a
//! message instead). Blocking is done with std channels the test releases.

use procsched::executor::{block_in_place, Executor, JoinHandle, LongPoll};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Generous bound for "this should happen": only a hang guard, never a timing assertion.
const HANG_GUARD: Duration = Duration::from_secs(60);

fn scaled(n: usize) -> usize {
    if cfg!(miri) {
        n.min(200)
    } else {
        n
    }
}

/// Awaits every handle on a helper thread, so the wait is hang-guarded.
fn join_all<T: Send + 'static>(handles: Vec<JoinHandle<T>>) -> Vec<T> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let results: Vec<T> = futures::executor::block_on(async move {
            let mut results = Vec::with_capacity(handles.len());
            for handle in handles {
                results.push(handle.await.expect("task completes"));
            }
            results
        });
        let _ = tx.send(results);
    });
    rx.recv_timeout(HANG_GUARD)
        .expect("hang guard: the tasks never completed")
}

/// Spins (yielding the thread) until `condition` holds; fails after [`HANG_GUARD`].
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_GUARD;
    while !condition() {
        assert!(Instant::now() < deadline, "hang guard: never saw {what}");
        thread::yield_now();
    }
}

/// A task that blocks its worker thread (a std channel receive, no `block_in_place`) until the
/// test releases it. Returns the task, a receiver that signals "inside the poll", and the release.
fn blocker(
    executor: &Executor,
    label: u64,
) -> (JoinHandle<()>, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let task = executor.handle().spawn_labelled(
        async move {
            entered_tx.send(()).unwrap();
            release_rx
                .recv_timeout(HANG_GUARD)
                .expect("hang guard: the test never released the blocker");
        },
        label,
    );
    (task, entered_rx, release_tx)
}

fn ordinary_tasks(executor: &Executor, n: usize) -> Vec<JoinHandle<usize>> {
    (0..n).map(|i| executor.spawn(async move { i })).collect()
}

fn settle(executor: &Executor, workers: usize) {
    wait_until(
        "the active worker count back at the configured number",
        || {
            let monitor = executor.metrics().monitor();
            monitor.active_workers == workers && monitor.stuck_workers == 0
        },
    );
}

#[test]
fn ordinary_tasks_complete_while_one_of_two_workers_is_blocked() {
    let executor = Executor::builder().workers(2).build().unwrap();
    let (blocked, entered, release) = blocker(&executor, 1);
    entered.recv_timeout(HANG_GUARD).unwrap();
    let n = scaled(10_000);
    let results = join_all(ordinary_tasks(&executor, n));
    assert_eq!(results, (0..n).collect::<Vec<_>>());
    release.send(()).unwrap();
    join_all(vec![blocked]);
}

#[test]
fn ordinary_tasks_complete_while_both_workers_are_blocked() {
    let executor = Executor::builder().workers(2).build().unwrap();
    let (first, first_entered, first_release) = blocker(&executor, 1);
    first_entered.recv_timeout(HANG_GUARD).unwrap();
    // The first blocks one worker, so the other one runs the second.
    let (second, second_entered, second_release) = blocker(&executor, 2);
    second_entered.recv_timeout(HANG_GUARD).unwrap();
    let n = scaled(10_000);
    let results = join_all(ordinary_tasks(&executor, n));
    assert_eq!(results, (0..n).collect::<Vec<_>>());
    let during = executor.metrics().monitor();
    assert!(during.spares_started >= 1, "{during:?}");
    // The ordinary tasks may all be done before the blocks pass the long-poll threshold (the
    // saturation rule hands off after one tick): hold both until they are reported.
    wait_until("both blocked polls reported as long polls", || {
        executor.metrics().monitor().long_polls >= 2
    });
    first_release.send(()).unwrap();
    second_release.send(()).unwrap();
    join_all(vec![first, second]);
    settle(&executor, 2);
    let after = executor.metrics().monitor();
    // Both blocks, and any ordinary poll the OS preempted past the threshold on a loaded machine.
    assert!(after.long_polls >= 2, "{after:?}");
    assert_eq!(after.spares_started, after.spares_retired, "{after:?}");
    assert_eq!(executor.shutdown(HANG_GUARD).cancelled, 0);
}

#[test]
fn a_long_poll_is_reported_once_with_its_label() {
    let reports = Arc::new(Mutex::new(Vec::<LongPoll>::new()));
    let seen = reports.clone();
    let executor = Executor::builder()
        .workers(2)
        .long_poll_threshold(Duration::from_millis(2))
        .on_long_poll(move |long_poll| seen.lock().unwrap().push(long_poll.clone()))
        .build()
        .unwrap();
    let (blocked, entered, release) = blocker(&executor, 4242);
    entered.recv_timeout(HANG_GUARD).unwrap();
    wait_until("the long poll reported", || {
        !reports.lock().unwrap().is_empty()
    });
    // Keep it stuck while the monitor samples it many more times: still one report.
    wait_until("the monitor observing the poll for 10 thresholds", || {
        executor.metrics().monitor().longest_poll_ns >= 20_000_000
    });
    release.send(()).unwrap();
    join_all(vec![blocked]);
    settle(&executor, 2);
    let reports = reports.lock().unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].label, Some(4242));
    let monitor = executor.metrics().monitor();
    assert_eq!(monitor.long_polls, 1);
    assert_eq!(monitor.longest_poll_label, Some(4242));
    assert!(monitor.longest_poll_ns >= reports[0].elapsed.as_nanos() as u64);
}

#[test]
fn block_in_place_hands_off_at_once_even_without_the_monitor() {
    let executor = Executor::builder()
        .workers(1)
        .monitor(false)
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel::<usize>();
    let handle = executor.handle().clone();
    // One task: spawns the sender into its own deque, then blocks until the sender has run.
    // Only the hand-off can run the sender: the one worker is blocked, no monitor ticks.
    let blocked = executor.spawn(async move {
        let sender = handle.spawn(async move { tx.send(5).unwrap() });
        let got = block_in_place(|| rx.recv_timeout(HANG_GUARD).expect("hang guard"));
        (got, sender)
    });
    let (got, sender) = join_all(vec![blocked]).pop().unwrap();
    assert_eq!(got, 5);
    join_all(vec![sender]);
    let monitor = executor.metrics().monitor();
    assert_eq!(monitor.long_polls, 0, "block_in_place is not a long poll");
    assert!(monitor.spares_started >= 1);
}

#[test]
fn block_in_place_off_a_worker_just_runs() {
    assert_eq!(block_in_place(|| 3), 3);
}

#[test]
fn with_nothing_blocked_the_worker_count_stays_at_the_configured_number() {
    // Whether a spare ever starts here depends on the OS (a worker preempted mid-poll for a
    // whole tick while the other is too looks stuck, and a hand-off then is harmless), so this
    // asserts what must hold either way: every spare started also retired, and the active count
    // is back at the configured number.
    let executor = Executor::builder()
        .workers(2)
        .long_poll_threshold(Duration::from_secs(60))
        .build()
        .unwrap();
    join_all(ordinary_tasks(&executor, scaled(10_000)));
    settle(&executor, 2);
    let monitor = executor.metrics().monitor();
    assert_eq!(
        monitor.spares_started, monitor.spares_retired,
        "{monitor:?}"
    );
    assert_eq!(
        monitor.long_polls, 0,
        "no poll here comes near the threshold"
    );
    assert_eq!(
        executor.metrics().spares().len(),
        2,
        "default: as many as workers"
    );
}

#[test]
fn max_spare_workers_zero_reports_but_does_not_hand_off() {
    let reports = Arc::new(AtomicUsize::new(0));
    let seen = reports.clone();
    let executor = Executor::builder()
        .workers(1)
        .max_spare_workers(0)
        .long_poll_threshold(Duration::from_millis(1))
        .on_long_poll(move |_| {
            seen.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap();
    let (blocked, entered, release) = blocker(&executor, 7);
    entered.recv_timeout(HANG_GUARD).unwrap();
    wait_until("the long poll reported", || reports.load(SeqCst) == 1);
    release.send(()).unwrap();
    join_all(vec![blocked]);
    assert_eq!(executor.metrics().monitor().spares_started, 0);
}

#[test]
fn a_blocked_spare_is_replaced_too_up_to_the_cap() {
    // 1 worker, 2 spares: three blockers in a row take the worker and both spares; the
    // ordinary tasks then wait for a release (the cap), and all complete after it.
    let executor = Executor::builder()
        .workers(1)
        .max_spare_workers(2)
        .long_poll_threshold(Duration::from_millis(1))
        .build()
        .unwrap();
    let mut blockers = Vec::new();
    for label in 1..=3 {
        let (task, entered, release) = blocker(&executor, label);
        entered.recv_timeout(HANG_GUARD).unwrap();
        blockers.push((task, release));
    }
    let tasks = ordinary_tasks(&executor, 100);
    for (_, release) in &blockers {
        release.send(()).unwrap();
    }
    assert_eq!(join_all(tasks).len(), 100);
    join_all(blockers.into_iter().map(|(task, _)| task).collect());
    settle(&executor, 1);
    let monitor = executor.metrics().monitor();
    assert!(monitor.spares_started >= 2, "{monitor:?}");
    assert_eq!(
        monitor.spares_started, monitor.spares_retired,
        "{monitor:?}"
    );
}

#[test]
fn every_thread_blocked_at_once_is_reported() {
    // 1 worker, 1 spare: two tasks inside `block_in_place` hold both — nothing else can run
    // until one returns — and the monitor counts the episode (`exhausted`), once, however
    // many ticks it lasts; a spare left is not one.
    let executor = Executor::builder()
        .workers(1)
        .max_spare_workers(1)
        .build()
        .unwrap();
    let mut held = Vec::new();
    for blocked in 1..=2u64 {
        let (entered_tx, entered) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let task = executor.spawn(async move {
            block_in_place(|| {
                entered_tx.send(()).unwrap();
                released.recv_timeout(HANG_GUARD).unwrap();
            })
        });
        entered.recv_timeout(HANG_GUARD).unwrap();
        held.push((task, release));
        if blocked == 1 {
            assert_eq!(executor.metrics().monitor().exhausted, 0, "a spare is left");
        }
    }
    wait_until("the episode counted", || {
        executor.metrics().monitor().exhausted == 1
    });
    for (_, release) in &held {
        release.send(()).unwrap();
    }
    join_all(held.into_iter().map(|(task, _)| task).collect());
    settle(&executor, 1);
    assert_eq!(executor.metrics().monitor().exhausted, 1);
}

#[test]
fn shutdown_with_active_and_parked_spares_leaks_nothing() {
    let executor = Executor::builder()
        .workers(1)
        .long_poll_threshold(Duration::from_millis(1))
        .build()
        .unwrap();
    let (blocked, entered, release) = blocker(&executor, 1);
    entered.recv_timeout(HANG_GUARD).unwrap();
    let pending: Vec<_> = (0..100)
        .map(|_| executor.spawn(std::future::pending::<()>()))
        .collect();
    join_all(ordinary_tasks(&executor, 100));
    release.send(()).unwrap();
    join_all(vec![blocked]);
    let report = executor.shutdown(HANG_GUARD);
    assert_eq!(report.cancelled, 100);
    assert_eq!(report.stuck_workers, 0);
    assert_eq!(executor.handle().live_tasks(), 0);
    drop(pending);
}

/// Many hand-offs and retirements (monitor-detected long polls, `block_in_place`, tasks
/// spawning tasks into deques that are then handed off) while every task counts its runs.
#[test]
fn every_task_runs_exactly_once_through_many_hand_offs() {
    let executor = Arc::new(
        Executor::builder()
            .workers(2)
            .max_spare_workers(2)
            .long_poll_threshold(Duration::from_millis(1))
            .build()
            .unwrap(),
    );
    let n = scaled(4_000);
    let runs: Arc<Vec<AtomicU8>> = Arc::new((0..2 * n).map(|_| AtomicU8::new(0)).collect());
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let runs = runs.clone();
        let handle = executor.handle().clone();
        // A cheap deterministic mix per task (splitmix64 of its index).
        let mut z = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let kind = (z ^ (z >> 31)) % 100;
        handles.push(executor.spawn(async move {
            runs[i].fetch_add(1, SeqCst);
            let child = {
                let runs = runs.clone();
                // Into this worker's deque: handed off if this task then blocks.
                handle.spawn(async move {
                    runs[n + i].fetch_add(1, SeqCst);
                })
            };
            match kind {
                // A long poll the monitor must notice (busy work, not a sleep).
                0..=1 => {
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_millis(2) {
                        std::hint::spin_loop();
                    }
                }
                // Declared blocking.
                2..=9 => block_in_place(|| {
                    for _ in 0..(kind * 10) {
                        thread::yield_now();
                    }
                }),
                _ => {}
            }
            child.await.unwrap();
        }));
    }
    join_all(handles);
    for (i, count) in runs.iter().enumerate() {
        assert_eq!(count.load(SeqCst), 1, "task {i} ran {count:?} times");
    }
    settle(&executor, 2);
    let monitor = executor.metrics().monitor();
    assert_eq!(
        monitor.spares_started, monitor.spares_retired,
        "{monitor:?}"
    );
    assert_eq!(executor.shutdown(HANG_GUARD).cancelled, 0);
}
