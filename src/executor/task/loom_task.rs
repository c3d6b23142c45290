//! Loom models of the task state protocol, against a toy scheduler (a loom `Mutex<VecDeque>`).
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_`

use super::{JoinHandle, Notified, Schedule, Task};
use crate::loom::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use crate::loom::{lock, thread, Arc, Mutex};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct Toy {
    queue: Mutex<VecDeque<Notified<Arc<Toy>>>>,
    owned: Mutex<Vec<Task<Arc<Toy>>>>,
}

impl Schedule for Arc<Toy> {
    fn schedule(&self, task: Notified<Self>) {
        lock(&self.queue).push_back(task);
    }
    fn yield_now(&self, task: Notified<Self>) {
        lock(&self.queue).push_back(task);
    }
    fn release(&self, task: &Task<Self>) -> Option<Task<Self>> {
        let mut owned = lock(&self.owned);
        let i = owned.iter().position(|t| t.ptr_eq(task))?;
        Some(owned.swap_remove(i))
    }
    fn is_shutdown(&self) -> bool {
        false
    }
}

fn spawn<F>(toy: &Arc<Toy>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (task, notified, join) = super::new(future, toy.clone());
    lock(&toy.owned).push(task);
    toy.schedule(notified);
    join
}

impl Toy {
    fn run_one(&self) -> bool {
        let next = lock(&self.queue).pop_front();
        match next {
            Some(task) => {
                task.run();
                true
            }
            None => false,
        }
    }

    fn run_all(&self) {
        while self.run_one() {}
    }

    /// Drops every queued `Notified` and cancels every live task, so the model ends without leaks.
    fn shutdown(&self) {
        lock(&self.queue).clear();
        let owned = std::mem::take(&mut *lock(&self.owned));
        for task in &owned {
            let _ = task.shutdown();
        }
    }
}

/// A future that is ready once `event` is set; counts polls and checks they never overlap.
struct Probe {
    shared: Arc<ProbeShared>,
}

#[derive(Default)]
struct ProbeShared {
    event: AtomicBool,
    polls: AtomicUsize,
    in_poll: AtomicBool,
    waker: Mutex<Option<Waker>>,
    drops: AtomicUsize,
}

impl Future for Probe {
    type Output = usize;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        let s = &self.shared;
        assert!(!s.in_poll.swap(true, SeqCst), "two concurrent polls");
        let polls = s.polls.fetch_add(1, SeqCst) + 1;
        *lock(&s.waker) = Some(cx.waker().clone());
        let ready = s.event.load(SeqCst);
        s.in_poll.store(false, SeqCst);
        if ready {
            Poll::Ready(polls)
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.shared.drops.fetch_add(1, SeqCst);
    }
}

fn probe() -> (Probe, Arc<ProbeShared>) {
    let shared = Arc::new(ProbeShared::default());
    (
        Probe {
            shared: shared.clone(),
        },
        shared,
    )
}

fn take_waker(probe: &ProbeShared) -> Waker {
    lock(&probe.waker).take().expect("polled once")
}

#[test]
fn loom_wake_while_running_causes_exactly_one_more_poll() {
    loom::model(|| {
        let toy = Arc::new(Toy::default());
        let (future, probe) = probe();
        let join = spawn(&toy, future);
        toy.run_all(); // poll 1: Pending, waker stored
        let waker = take_waker(&probe);
        // Queue it again, so a worker polls it while the waker fires.
        waker.wake_by_ref();

        let worker = {
            let toy = toy.clone();
            thread::spawn(move || toy.run_all())
        };
        probe.event.store(true, SeqCst);
        waker.wake();
        worker.join().unwrap();
        toy.run_all();

        // The event set before the wake was seen by a poll that started after it.
        let polls = loom::future::block_on(join).expect("completes");
        assert!(polls == 2 || polls == 3, "polls = {polls}");
        assert_eq!(probe.polls.load(SeqCst), polls, "no poll after completion");
        assert!(lock(&toy.queue).is_empty());
    });
}

#[test]
fn loom_wake_racing_with_completion() {
    loom::model(|| {
        let toy = Arc::new(Toy::default());
        let (future, probe) = probe();
        let join = spawn(&toy, future);
        toy.run_all();
        let waker = take_waker(&probe);
        probe.event.store(true, SeqCst);
        waker.wake_by_ref();

        let worker = {
            let toy = toy.clone();
            thread::spawn(move || toy.run_all())
        };
        // Fires while the final poll runs, or after completion.
        waker.wake();
        worker.join().unwrap();
        toy.run_all();
        assert_eq!(loom::future::block_on(join).unwrap(), 2);
        assert_eq!(probe.drops.load(SeqCst), 1);
    });
}

#[test]
fn loom_join_handle_drop_racing_with_completion() {
    loom::model(|| {
        let toy = Arc::new(Toy::default());
        let output_drops = Arc::new(AtomicUsize::new(0));
        struct Output(Arc<AtomicUsize>);
        impl Drop for Output {
            fn drop(&mut self) {
                self.0.fetch_add(1, SeqCst);
            }
        }
        let out = Output(output_drops.clone());
        let join = spawn(&toy, async move { out });

        let worker = {
            let toy = toy.clone();
            thread::spawn(move || toy.run_all())
        };
        drop(join);
        worker.join().unwrap();
        assert_eq!(output_drops.load(SeqCst), 1, "output dropped exactly once");
    });
}

#[test]
fn loom_join_handle_waker_registration_racing_with_completion() {
    loom::model(|| {
        let toy = Arc::new(Toy::default());
        let (future, probe) = probe();
        probe.event.store(true, SeqCst);
        let mut join = spawn(&toy, future);

        let worker = {
            let toy = toy.clone();
            thread::spawn(move || toy.run_all())
        };
        // Polls the handle (registering its waker) while the task completes; loom's block_on
        // parks until that waker fires, so a lost join wake-up is a deadlock loom reports.
        let out = loom::future::block_on(&mut join);
        worker.join().unwrap();
        assert_eq!(out.unwrap(), 1);
    });
}

#[test]
fn loom_abort_racing_with_a_poll() {
    loom::model(|| {
        let toy = Arc::new(Toy::default());
        let (future, probe) = probe();
        let join = spawn(&toy, future);
        toy.run_all();
        take_waker(&probe).wake(); // queued again

        let worker = {
            let toy = toy.clone();
            thread::spawn(move || toy.run_all())
        };
        join.abort();
        worker.join().unwrap();
        toy.run_all();

        let err = loom::future::block_on(join).unwrap_err();
        assert!(err.is_cancelled());
        assert_eq!(probe.drops.load(SeqCst), 1, "future dropped exactly once");
        assert!(probe.polls.load(SeqCst) <= 2);
        toy.shutdown();
    });
}

#[test]
fn loom_shutdown_racing_with_a_wake() {
    loom::model(|| {
        let toy = Arc::new(Toy::default());
        let (future, probe) = probe();
        let join = spawn(&toy, future);
        toy.run_all();
        let waker = take_waker(&probe);

        let waking = thread::spawn(move || waker.wake());
        toy.shutdown();
        waking.join().unwrap();
        // Whatever the wake queued finds the task complete and just drops its reference.
        toy.run_all();
        assert!(loom::future::block_on(join).unwrap_err().is_cancelled());
        assert_eq!(probe.drops.load(SeqCst), 1);
    });
}
