//! Public-API tests of `procsched::executor`.
//!
//! Every test asserts outcomes (counts, errors, metrics). Deadlines appear only as hang guards:
//! a test that would hang fails with a message instead.

use futures::channel::oneshot;
use procsched::executor::{yield_now, Executor, JoinError};
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Duration;

/// Generous bound for "this should happen": only a hang guard, never a timing assertion.
const HANG_GUARD: Duration = Duration::from_secs(60);

fn executor(workers: usize) -> Executor {
    Executor::builder()
        .workers(workers)
        .thread_name("test")
        .build()
        .expect("executor starts")
}

fn scaled(n: usize) -> usize {
    if cfg!(miri) {
        n.min(200)
    } else {
        n
    }
}

/// Counts its own drops.
struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn hundred_thousand_tasks_from_outside_and_inside_complete_exactly_once() {
    let executor = executor(2);
    let n = scaled(100_000);
    let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..2 * n).map(|_| AtomicUsize::new(0)).collect());
    let (done_tx, done_rx) = mpsc::channel();

    // Half from this thread.
    for i in 0..n {
        let runs = runs.clone();
        let done_tx = done_tx.clone();
        drop(executor.spawn(async move {
            runs[i].fetch_add(1, Relaxed);
            done_tx.send(()).unwrap();
        }));
    }
    // Half from inside a task.
    let handle = executor.handle().clone();
    let spawner_runs = runs.clone();
    drop(executor.spawn(async move {
        for i in n..2 * n {
            let runs = spawner_runs.clone();
            let done_tx = done_tx.clone();
            drop(handle.spawn(async move {
                runs[i].fetch_add(1, Relaxed);
                done_tx.send(()).unwrap();
            }));
        }
    }));
    for _ in 0..2 * n {
        done_rx.recv_timeout(HANG_GUARD).expect("a task never ran");
    }
    assert!(
        runs.iter().all(|r| r.load(Relaxed) == 1),
        "every task ran exactly once"
    );
    let total = executor.metrics().total();
    assert!(
        total.polls > 2 * n as u64,
        "the spawner task was polled too"
    );
    assert_eq!(executor.shutdown(HANG_GUARD).cancelled, 0);
}

/// A future that completes once a flag is set, registering its waker in a shared slot.
struct Flag {
    inner: Arc<(AtomicBool, Mutex<Option<Waker>>)>,
    polls: Arc<AtomicUsize>,
}

impl Future for Flag {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.polls.fetch_add(1, SeqCst);
        *self.inner.1.lock().unwrap() = Some(cx.waker().clone());
        if self.inner.0.load(SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn wakes_from_a_foreign_thread() {
    let executor = executor(2);
    for _ in 0..scaled(1_000) {
        let inner = Arc::new((AtomicBool::new(false), Mutex::new(None::<Waker>)));
        let polls = Arc::new(AtomicUsize::new(0));
        let task = executor.spawn(Flag {
            inner: inner.clone(),
            polls: polls.clone(),
        });
        // Wake from another thread, racing with the first poll.
        let waker_thread = thread::spawn(move || {
            inner.0.store(true, SeqCst);
            if let Some(waker) = inner.1.lock().unwrap().take() {
                waker.wake();
            }
        });
        executor.block_on(task).expect("woken task completes");
        waker_thread.join().unwrap();
        assert!(
            polls.load(SeqCst) <= 2,
            "one poll, plus at most one after the wake"
        );
    }
}

#[test]
fn wakes_from_tokio_tasks_and_join_handles_awaited_inside_tokio() {
    let executor = executor(2);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let n = scaled(1_000);
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (tx, rx) = tokio::sync::oneshot::channel::<usize>();
            // The tokio task completes the oneshot: the wake comes from a tokio worker.
            runtime.spawn(async move {
                tokio::task::yield_now().await;
                let _ = tx.send(i);
            });
            executor.spawn(async move { rx.await.expect("sender lives") * 2 })
        })
        .collect();
    let sum = runtime.block_on(async move {
        let mut sum = 0;
        for handle in handles {
            sum += handle.await.expect("task completes");
        }
        sum
    });
    assert_eq!(sum, (0..n).map(|i| i * 2).sum::<usize>());
}

#[test]
fn self_wakes_with_yield_now() {
    let executor = executor(2);
    let polls = Arc::new(AtomicUsize::new(0));
    let counted = polls.clone();
    let task = executor.spawn(async move {
        for _ in 0..100 {
            counted.fetch_add(1, SeqCst);
            yield_now().await;
        }
        7
    });
    assert_eq!(executor.block_on(task).unwrap(), 7);
    assert_eq!(polls.load(SeqCst), 100);
}

#[test]
fn abort_cancels_a_pending_task_and_drops_its_future() {
    let executor = executor(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropCounter(drops.clone());
    let task = executor.spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    });
    task.abort();
    task.abort(); // idempotent
    let err = executor.block_on(task).unwrap_err();
    assert!(err.is_cancelled(), "{err:?}");
    assert_eq!(drops.load(SeqCst), 1);
}

#[test]
fn abort_while_running_takes_effect_after_the_poll() {
    let executor = executor(2);
    for _ in 0..scaled(200) {
        let (in_poll_tx, in_poll_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let polls = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let (task_polls, guard) = (polls.clone(), DropCounter(drops.clone()));
        let task = executor.spawn(async move {
            let _guard = guard;
            futures::future::poll_fn(move |cx| {
                task_polls.fetch_add(1, SeqCst);
                in_poll_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                // Ask to run again: an abort that landed during this poll must win.
                cx.waker().wake_by_ref();
                Poll::<()>::Pending
            })
            .await;
        });
        in_poll_rx.recv_timeout(HANG_GUARD).unwrap();
        task.abort();
        release_tx.send(()).unwrap();
        let err = executor.block_on(task).unwrap_err();
        assert!(err.is_cancelled(), "{err:?}");
        assert_eq!(polls.load(SeqCst), 1, "never polled after the abort");
        assert_eq!(drops.load(SeqCst), 1);
    }
}

#[test]
fn detached_tasks_run_to_completion_and_drop_their_output() {
    let executor = executor(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let n = scaled(1_000);
    for _ in 0..n {
        let drops = drops.clone();
        let tx = tx.clone();
        drop(executor.spawn(async move {
            yield_now().await;
            tx.send(()).unwrap();
            DropCounter(drops)
        }));
    }
    for _ in 0..n {
        rx.recv_timeout(HANG_GUARD).unwrap();
    }
    executor.shutdown(HANG_GUARD);
    assert_eq!(drops.load(SeqCst), n, "every detached output was dropped");
}

#[test]
fn a_panic_becomes_a_join_error_and_the_worker_keeps_running() {
    let executor = executor(1);
    let task = executor.spawn(async {
        yield_now().await;
        panic!("task {} exploded", 3);
    });
    let err: JoinError = executor.block_on(task).unwrap_err();
    assert!(err.is_panic());
    assert_eq!(err.panic_message(), Some("task 3 exploded"));
    // The single worker survived.
    for i in 0..10 {
        assert_eq!(
            executor.block_on(executor.spawn(async move { i })).unwrap(),
            i
        );
    }
}

#[test]
fn a_panicking_destructor_is_reported_not_propagated() {
    struct PanicOnDrop;
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            panic!("drop panicked");
        }
    }
    let executor = executor(1);
    let task = executor.spawn(async {
        let _bomb = PanicOnDrop;
        1
    });
    let err = executor.block_on(task).unwrap_err();
    assert_eq!(err.panic_message(), Some("drop panicked"));
    assert_eq!(executor.block_on(executor.spawn(async { 2 })).unwrap(), 2);
}

#[test]
fn spawn_after_shutdown_is_a_join_error_and_the_future_is_dropped() {
    let executor = executor(2);
    executor.shutdown(HANG_GUARD);
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropCounter(drops.clone());
    let task = executor.spawn(async move {
        let _guard = guard;
    });
    let err = executor.block_on(task).unwrap_err();
    assert!(err.is_shutdown(), "{err:?}");
    assert_eq!(drops.load(SeqCst), 1);
    // Also through a cloned handle, after the executor itself is gone.
    let handle = executor.handle().clone();
    drop(executor);
    let err = futures::executor::block_on(handle.spawn(async {})).unwrap_err();
    assert!(err.is_shutdown());
}

#[test]
fn shutdown_mid_flight_drops_every_future() {
    for _ in 0..scaled(20) {
        let executor = executor(2);
        let drops = Arc::new(AtomicUsize::new(0));
        let n = scaled(1_000);
        let mut handles = Vec::new();
        for i in 0..n {
            let guard = DropCounter(drops.clone());
            handles.push(executor.spawn(async move {
                let _guard = guard;
                // A mix: some finish, some yield a while, some wait forever.
                match i % 3 {
                    0 => {}
                    1 => {
                        for _ in 0..10 {
                            yield_now().await;
                        }
                    }
                    _ => std::future::pending::<()>().await,
                }
            }));
        }
        let report = executor.shutdown(HANG_GUARD);
        assert_eq!(report.stuck_workers, 0);
        assert_eq!(drops.load(SeqCst), n, "every future's destructor ran");
        let mut finished = 0;
        let mut shut_down = 0;
        for handle in handles {
            match executor.block_on(handle) {
                Ok(()) => finished += 1,
                Err(e) if e.is_shutdown() => shut_down += 1,
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        assert_eq!(finished + shut_down, n);
        assert_eq!(shut_down, report.cancelled);
        assert!(shut_down >= n / 3, "the pending third was cancelled");
    }
}

#[test]
fn dropping_the_executor_cancels_tasks_that_wait_on_each_other() {
    // A cycle: each task holds the other's wake source, so only shutdown can free them.
    let drops = Arc::new(AtomicUsize::new(0));
    {
        let executor = executor(2);
        let (tx_a, rx_a) = oneshot::channel::<()>();
        let (tx_b, rx_b) = oneshot::channel::<()>();
        let (ga, gb) = (DropCounter(drops.clone()), DropCounter(drops.clone()));
        drop(executor.spawn(async move {
            let _keep = (tx_b, ga);
            let _ = rx_a.await;
        }));
        drop(executor.spawn(async move {
            let _keep = (tx_a, gb);
            let _ = rx_b.await;
        }));
    }
    assert_eq!(drops.load(SeqCst), 2);
}

#[test]
fn tasks_spawned_on_one_worker_are_stolen_by_another() {
    // Without the monitor: it would hand the blocked worker's deque to a spare after the
    // long-poll threshold, and this test is about stealing.
    let executor = Executor::builder()
        .workers(2)
        .thread_name("test")
        .monitor(false)
        .build()
        .expect("executor starts");
    let n = scaled(1_000);
    let threads = Arc::new(Mutex::new(HashSet::new()));
    let (done_tx, done_rx) = mpsc::channel();
    let handle = executor.handle().clone();
    let spawner_threads = threads.clone();
    drop(executor.spawn(async move {
        spawner_threads
            .lock()
            .unwrap()
            .insert(thread::current().id());
        for _ in 0..n {
            let threads = spawner_threads.clone();
            let done_tx = done_tx.clone();
            drop(handle.spawn(async move {
                threads.lock().unwrap().insert(thread::current().id());
                done_tx.send(()).unwrap();
            }));
        }
        // Block this worker until every child ran: they can only run by being stolen.
        let (all_tx, all_rx) = mpsc::channel::<()>();
        drop(handle.spawn(async move {
            drop(all_tx);
        }));
        let _ = all_rx.recv_timeout(HANG_GUARD);
    }));
    for _ in 0..n {
        done_rx
            .recv_timeout(HANG_GUARD)
            .expect("children run on the other worker");
    }
    assert_eq!(threads.lock().unwrap().len(), 2, "both workers ran tasks");
    let total = executor.metrics().total();
    assert!(total.stolen >= n as u64, "stolen {} < {n}", total.stolen);
    assert!(total.steal_ops >= 1);
}

#[test]
fn a_task_that_yields_forever_does_not_starve_local_or_global_work() {
    let executor = executor(1);
    let stop = Arc::new(AtomicBool::new(false));
    let spinner_stop = stop.clone();
    let spinner = executor.spawn(async move {
        let mut yields = 0u64;
        while !spinner_stop.load(SeqCst) {
            yield_now().await;
            yields += 1;
        }
        yields
    });
    // Global work: spawned from outside while the spinner runs.
    let n = scaled(200);
    let (tx, rx) = mpsc::channel();
    for _ in 0..n {
        let tx = tx.clone();
        drop(executor.spawn(async move { tx.send(()).unwrap() }));
    }
    // Local work: spawned from inside a task on the only worker.
    let handle = executor.handle().clone();
    drop(executor.spawn(async move {
        for _ in 0..n {
            let tx = tx.clone();
            drop(handle.spawn(async move {
                // Wake each other locally too: a local wake chain.
                yield_now().await;
                tx.send(()).unwrap();
            }));
        }
    }));
    for _ in 0..2 * n {
        rx.recv_timeout(HANG_GUARD)
            .expect("work starved by a yielding task");
    }
    stop.store(true, SeqCst);
    assert!(executor.block_on(spinner).unwrap() > 0);
}

#[test]
fn two_tasks_waking_each_other_do_not_starve_the_local_deque() {
    // On one worker, A and B ping-pong forever through local wakes (LIFO); a third local task
    // spawned before them must still run.
    let executor = executor(1);
    let stop = Arc::new(AtomicBool::new(false));
    let (victim_tx, victim_rx) = mpsc::channel();
    let handle = executor.handle().clone();
    let stop_pp = stop.clone();
    drop(executor.spawn(async move {
        drop(handle.spawn(async move { victim_tx.send(()).unwrap() }));
        let (mut to_b, mut from_a) = futures::channel::mpsc::channel::<()>(1);
        let (mut to_a, mut from_b) = futures::channel::mpsc::channel::<()>(1);
        use futures::{SinkExt, StreamExt};
        let stop_b = stop_pp.clone();
        drop(handle.spawn(async move {
            while let Some(()) = from_a.next().await {
                if stop_b.load(SeqCst) || to_a.send(()).await.is_err() {
                    break;
                }
            }
        }));
        drop(handle.spawn(async move {
            while !stop_pp.load(SeqCst) {
                if to_b.send(()).await.is_err() || from_b.next().await.is_none() {
                    break;
                }
            }
        }));
    }));
    victim_rx
        .recv_timeout(HANG_GUARD)
        .expect("the oldest local task starved");
    stop.store(true, SeqCst);
}

#[test]
fn join_handle_reports_finished_and_works_across_executors() {
    let a = executor(1);
    let b = executor(1);
    let inner = a.spawn(async { 21 });
    let outer = b.spawn(async move { inner.await.unwrap() * 2 });
    assert_eq!(b.block_on(outer).unwrap(), 42);
    let quick = a.spawn(async {});
    a.block_on(async {
        while !quick.is_finished() {
            yield_now().await;
        }
    });
    assert!(quick.is_finished());
}

#[test]
fn many_threads_spawn_and_await_concurrently() {
    let executor = Arc::new(executor(2));
    let threads = 4;
    let per_thread = scaled(5_000);
    let barrier = Arc::new(Barrier::new(threads));
    let joins: Vec<_> = (0..threads)
        .map(|t| {
            let executor = executor.clone();
            let barrier = barrier.clone();
            thread::spawn(move || {
                barrier.wait();
                let handles: Vec<_> = (0..per_thread)
                    .map(|i| executor.spawn(async move { t * per_thread + i }))
                    .collect();
                futures::executor::block_on(async {
                    let mut sum = 0;
                    for h in handles {
                        sum += h.await.unwrap();
                    }
                    sum
                })
            })
        })
        .collect();
    let total: usize = joins.into_iter().map(|j| j.join().unwrap()).sum();
    let n = threads * per_thread;
    assert_eq!(total, n * (n - 1) / 2);
    assert_eq!(executor.handle().live_tasks(), 0);
}

#[test]
fn shutdown_is_idempotent_and_concurrent_callers_agree() {
    let executor = Arc::new(executor(2));
    for _ in 0..10 {
        drop(executor.spawn(std::future::pending::<()>()));
    }
    let reports: Vec<_> = (0..4)
        .map(|_| {
            let executor = executor.clone();
            thread::spawn(move || executor.shutdown(HANG_GUARD))
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert!(reports.iter().all(|r| *r == reports[0]));
    assert_eq!(reports[0].cancelled, 10);
}

#[test]
fn worker_counts_that_cannot_be_met_are_errors_not_panics() {
    let too_many = Executor::builder().workers(usize::MAX).build();
    assert!(too_many.is_err());
    let spares = Executor::builder()
        .workers(1)
        .max_spare_workers(usize::MAX)
        .build();
    assert_eq!(
        spares.err().map(|error| error.kind()),
        Some(std::io::ErrorKind::InvalidInput)
    );
    let sched = procsched::Scheduler::builder()
        .workers(usize::MAX / 2)
        .build();
    assert!(matches!(sched, Err(procsched::error::BuildError::Io(_))));
    // Past the idle set's count, and spares no cap would start: refused before anything is
    // reserved (they had panicked, and reserved gigabytes).
    use procsched::executor::MAX_THREADS;
    for (workers, spares) in [(100_000, 0), (2, 10_000_000), (MAX_THREADS, 1)] {
        let refused = Executor::builder()
            .workers(workers)
            .max_spare_workers(spares)
            .build();
        assert_eq!(
            refused.err().map(|error| error.kind()),
            Some(std::io::ErrorKind::InvalidInput),
            "{workers} + {spares}"
        );
    }
    let at_the_cap = Executor::builder()
        .workers(1)
        .max_spare_workers(MAX_THREADS - 1)
        .build()
        .unwrap();
    assert_eq!(
        at_the_cap.block_on(at_the_cap.spawn(async { 7 })).unwrap(),
        7
    );
}
