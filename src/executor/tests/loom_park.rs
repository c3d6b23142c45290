//! Loom models of the executor's park/unpark and shutdown protocols, on the real worker loop.
//!
//! Under loom the queues are loom mutexes, spinning is skipped (a worker parks after one empty
//! round) and batches shrink to 2, so the models stay small.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_`

use crate::executor::monitor::View;
use crate::executor::Executor;
use crate::loom::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::loom::model::{model, model_full_stack};
use crate::loom::{lock, Arc, Condvar, Mutex};
use std::time::Duration;

#[test]
fn loom_task_pushed_while_the_only_worker_parks_is_run() {
    model(|| {
        let executor = Executor::builder().workers(1).build().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = ran.clone();
        // The worker may be anywhere between "found nothing" and asleep when this lands.
        let join = executor.spawn(async move {
            counted.fetch_add(1, SeqCst);
        });
        executor.block_on(join).expect("the task ran");
        assert_eq!(ran.load(SeqCst), 1);
        assert_eq!(executor.shutdown(Duration::from_secs(1)).cancelled, 0);
    });
}

#[test]
fn loom_wake_from_outside_reaches_a_parked_worker() {
    model(|| {
        let executor = Executor::builder().workers(1).build().unwrap();
        let (tx, rx) = futures::channel::oneshot::channel::<u8>();
        let join = executor.spawn(async move { rx.await.unwrap() });
        // The task may or may not have been polled (and the worker parked) before this send.
        tx.send(7).unwrap();
        assert_eq!(executor.block_on(join).unwrap(), 7);
        drop(executor);
    });
}

#[test]
fn loom_two_workers_spawn_from_outside_and_inside() {
    model_full_stack(|| {
        let executor = Executor::builder().workers(2).build().unwrap();
        let handle = executor.handle().clone();
        let join = executor.spawn(async move { handle.spawn(async { 2 }).await.unwrap() + 1 });
        assert_eq!(executor.block_on(join).unwrap(), 3);
        drop(executor);
    });
}

/// `idle.rs`, "Why no wake-up is lost", the own-deque case: a task spawned into the deque of a
/// worker, behind another, while that worker's current task then blocks the thread, is run by
/// the other worker, whether that one is still searching or already parked when the push lands.
/// (A missed wake leaves both workers blocked: loom reports the deadlock.)
#[test]
fn loom_task_queued_behind_a_blocked_workers_task_runs_on_the_other_worker() {
    model_full_stack(|| {
        let executor = Executor::builder().workers(2).build().unwrap();
        let handle = executor.handle().clone();
        let ran = Arc::new(Flag::default());
        let join = executor.spawn(async move {
            // The first is lone (not announced); the second, behind it, wakes the other worker,
            // which steals the oldest — the one that sets the flag.
            let signal = ran.clone();
            drop(handle.spawn(async move { signal.set() }));
            drop(handle.spawn(async {}));
            // Blocks this worker thread until the first task has run elsewhere.
            ran.wait();
        });
        executor.block_on(join).expect("the blocking task finished");
        drop(executor);
    });
}

/// `monitor.rs`, "Nudge": a lone task spawned by a poll that then blocks is not announced and
/// sits in the worker's next slot, which no thief takes; one monitor tick that sees the poll
/// slow (a tick long) with work queued moves it to the global injector and wakes the other
/// worker if it parked. (Without the nudge, the other worker parks for good and loom reports
/// the deadlock.)
#[test]
fn loom_lone_task_behind_a_blocked_poll_runs_after_the_nudge() {
    model_full_stack(|| {
        let executor = Executor::builder().workers(2).build().unwrap();
        let shared = executor.handle().shared.clone();
        let handle = executor.handle().clone();
        let inside = Arc::new(Flag::default());
        let release = Arc::new(Flag::default());
        let child = Arc::new(Mutex::new(None));
        let blocked = {
            let (inside, release, child) = (inside.clone(), release.clone(), child.clone());
            executor.spawn(async move {
                *lock(&child) = Some(handle.spawn(async { 7 }));
                inside.set();
                release.wait();
            })
        };
        inside.wait();
        let child = lock(&child).take().expect("spawned before `inside`");
        let mut view = View::new(&shared.monitor, 0);
        shared.monitor.tick(&shared, &mut view, 0);
        // A tick later the poll is slow, with the lone task queued behind it.
        shared
            .monitor
            .tick(&shared, &mut view, shared.monitor.tick_ns());
        assert_eq!(executor.block_on(child).unwrap(), 7);
        release.set();
        executor.block_on(blocked).unwrap();
        drop(executor);
    });
}

#[test]
fn loom_shutdown_racing_with_a_spawn() {
    model(|| {
        let executor = Arc::new(Executor::builder().workers(1).build().unwrap());
        let spawner = {
            let executor = executor.clone();
            crate::loom::thread::spawn(move || executor.spawn(async { 1 }))
        };
        let report = executor.shutdown(Duration::from_secs(1));
        let join = spawner.join().unwrap();
        assert_ran_or_shut_down(&executor, join, report.cancelled);
    });
}

/// A task that yields on a worker goes to that worker's inject queue (`shared.rs`, the table):
/// the same shutdown handshake as any shared push, so a shutdown racing the yield either lets
/// the task finish or cancels it; it is never stranded in the queue.
#[test]
fn loom_shutdown_racing_with_a_yield_on_a_worker() {
    model(|| {
        let executor = Executor::builder().workers(1).build().unwrap();
        let join = executor.spawn(async {
            crate::executor::yield_now().await;
            1
        });
        let report = executor.shutdown(Duration::from_secs(1));
        assert_ran_or_shut_down(&executor, join, report.cancelled);
    });
}

/// A task woken from outside goes to the woken lane of the worker it last ran on (`shared.rs`,
/// the table): the same shutdown handshake as any shared push, so a shutdown racing the wake
/// either lets the task finish or cancels it; it is never stranded in the lane.
#[test]
fn loom_shutdown_racing_with_a_wake_from_outside() {
    model(|| {
        let executor = Arc::new(Executor::builder().workers(1).build().unwrap());
        let (tx, rx) = futures::channel::oneshot::channel::<i32>();
        let join = executor.spawn(async move { rx.await.unwrap_or(1) });
        let waker = crate::loom::thread::spawn(move || {
            let _ = tx.send(1);
        });
        let report = executor.shutdown(Duration::from_secs(1));
        waker.join().unwrap();
        assert_ran_or_shut_down(&executor, join, report.cancelled);
    });
}

/// A task woken from outside waits in its worker's woken lane, which the other worker steals
/// from: when the worker it last ran on is blocked in another task's poll, the woken task still
/// runs (a missed wake or an unstealable lane would leave both workers blocked: loom reports
/// the deadlock).
#[test]
fn loom_a_task_woken_from_outside_runs_on_the_other_worker_while_its_own_blocks() {
    model_full_stack(|| {
        let executor = Executor::builder().workers(2).build().unwrap();
        let handle = executor.handle().clone();
        let release = Arc::new(Flag::default());
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let (polled_tx, polled_rx) = futures::channel::oneshot::channel::<()>();
        let join = executor.spawn(async move {
            let wait = release.clone();
            // Runs next on this worker and blocks it until the woken task below has run.
            drop(handle.spawn(async move { wait.wait() }));
            let _ = polled_tx.send(());
            rx.await.unwrap();
            release.set();
        });
        // Wake the task from outside once it has been polled (it last ran on that worker).
        executor.block_on(polled_rx).unwrap();
        tx.send(()).unwrap();
        executor.block_on(join).expect("the woken task finished");
        drop(executor);
    });
}

/// A yielded task waits in its worker's inject queue, which the other worker steals from: when
/// the yielding worker's next task blocks the thread, the yielded task still runs (a missed
/// wake or a private list would leave both workers blocked: loom reports the deadlock).
#[test]
fn loom_a_yielded_task_runs_on_the_other_worker_while_its_own_blocks() {
    model_full_stack(|| {
        let executor = Executor::builder().workers(2).build().unwrap();
        let handle = executor.handle().clone();
        let resumed = Arc::new(Flag::default());
        let join = executor.spawn(async move {
            let wait = resumed.clone();
            // Pushed to this worker's deque: it runs next here, after the yield below.
            drop(handle.spawn(async move { wait.wait() }));
            crate::executor::yield_now().await;
            resumed.set();
        });
        executor.block_on(join).expect("the yielded task finished");
        drop(executor);
    });
}

/// A one-shot signal that blocks the waiting thread (a worker, in these models) until it is set.
#[derive(Default)]
struct Flag {
    set: Mutex<bool>,
    changed: Condvar,
}

impl Flag {
    fn set(&self) {
        *lock(&self.set) = true;
        self.changed.notify_one();
    }

    fn wait(&self) {
        let mut set = lock(&self.set);
        while !*set {
            set = self.changed.wait(set).unwrap();
        }
    }
}

/// `OwnedTasks::wake_all`: a task that checks a condition on every poll, registering no waker
/// for it, completes when another thread sets the condition and then wakes every owned task —
/// whether the task is idle, queued, or being polled (its poll may have read the condition
/// unset) when the wake lands. (A missed wake leaves the task idle for ever: `block_on` hangs and
/// loom reports the deadlock.)
#[test]
fn loom_a_condition_set_before_waking_every_owned_task_is_seen() {
    model(|| {
        let executor = Executor::builder().workers(1).build().unwrap();
        let gone = Arc::new(crate::loom::atomic::AtomicBool::new(false));
        let seen = gone.clone();
        let join = executor.spawn(std::future::poll_fn(move |_| {
            if seen.load(crate::loom::atomic::Ordering::Acquire) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        }));
        // The worker may be polling the task, or done with it (idle), or not yet at it.
        gone.store(true, crate::loom::atomic::Ordering::Release);
        executor.handle().wake_owned_tasks();
        executor.block_on(join).expect("the task saw the condition");
        drop(executor);
    });
}

/// A task racing a shutdown either returned 1 (and nothing was cancelled) or was cancelled by
/// the shutdown.
fn assert_ran_or_shut_down(
    executor: &Executor,
    join: crate::executor::JoinHandle<i32>,
    cancelled: usize,
) {
    match executor.block_on(join) {
        Ok(1) => assert_eq!(cancelled, 0),
        Ok(_) => unreachable!(),
        Err(e) => assert!(e.is_shutdown(), "{e:?}"),
    }
}
