//! A toy scheduler for task-level tests: one loom-aware `Mutex<VecDeque>` run queue, run by hand.

use super::super::{JoinHandle, Notified, Schedule, Task};
use crate::loom::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use crate::loom::{lock, Arc, Mutex};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub(in crate::executor) struct Toy {
    pub(in crate::executor) queue: Mutex<VecDeque<Notified<Arc<Toy>>>>,
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

pub(in crate::executor) fn spawn<F>(toy: &Arc<Toy>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (task, notified, join) = super::super::new(future, toy.clone());
    lock(&toy.owned).push(task);
    toy.schedule(notified);
    join
}

impl Toy {
    pub(in crate::executor) fn run_one(&self) -> bool {
        let next = lock(&self.queue).pop_front();
        match next {
            Some(task) => {
                task.run();
                true
            }
            None => false,
        }
    }

    pub(in crate::executor) fn run_all(&self) {
        while self.run_one() {}
    }

    /// How many `Notified`s wait in the queue.
    pub(in crate::executor) fn queue_len(&self) -> usize {
        lock(&self.queue).len()
    }

    /// Wakes every live task as the owned-task list's broadcast does (`Task::wake_by_broadcast`).
    pub(in crate::executor) fn wake_all(&self) {
        for task in lock(&self.owned).iter() {
            task.wake_by_broadcast();
        }
    }

    /// Drops every queued `Notified` and cancels every live task, so the model ends without leaks.
    pub(in crate::executor) fn shutdown(&self) {
        lock(&self.queue).clear();
        let owned = std::mem::take(&mut *lock(&self.owned));
        for task in &owned {
            let _ = task.shutdown();
        }
    }
}

/// A future that is ready once `event` is set; counts polls and checks they never overlap.
pub(in crate::executor) struct Probe {
    shared: Arc<ProbeShared>,
}

#[derive(Default)]
pub(in crate::executor) struct ProbeShared {
    pub(in crate::executor) event: AtomicBool,
    pub(in crate::executor) polls: AtomicUsize,
    pub(in crate::executor) in_poll: AtomicBool,
    pub(in crate::executor) waker: Mutex<Option<Waker>>,
    pub(in crate::executor) drops: AtomicUsize,
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

pub(in crate::executor) fn probe() -> (Probe, Arc<ProbeShared>) {
    let shared = Arc::new(ProbeShared::default());
    (
        Probe {
            shared: shared.clone(),
        },
        shared,
    )
}

pub(in crate::executor) fn take_waker(probe: &ProbeShared) -> Waker {
    lock(&probe.waker).take().expect("polled once")
}
