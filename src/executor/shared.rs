//! State shared by all workers and handles of one executor, and its queues: where each runnable
//! task goes.
//!
//! # Where a runnable task goes
//! | event | queue | who is woken |
//! |---|---|---|
//! | spawn or wake on one of our worker threads, outside `block_in_place` | that worker's next slot (runs next, cache-warm; a task already there moves to the deque, LIFO: `next_slot.rs`) | a parked worker, if none is searching and the worker held other work; a lone task runs next on its worker, and if the poll before it blocks, the monitor hands it over and nudges a parked worker after one tick (`monitor.rs`, "Nudge") |
//! | spawn from outside | the global injector | a parked worker, if none is searching |
//! | wake from outside of a task that ran before | the *woken* lane of the worker it last ran on (affinity), which that worker takes before its yielded lane; the global injector if that worker is a spare or stuck (`monitor.rs`) | that worker if it sleeps, else any parked worker |
//! | a task woke itself while running (`yield_now`), on one of our configured workers | that worker's *yielded* lane (`inject`): behind its deque, its woken lane and the yields queued before it; stays on the worker (cache-warm) but can be stolen | a parked worker, if none is searching |
//! | a task woke itself while running, anywhere else (a spare, a stuck worker) | the global injector: behind all other ready work | a parked worker, if none is searching |
//! | spawn or wake inside `block_in_place` on one of our workers (which has handed off and pops nothing until it returns) | as from outside (rows 2 and 3; the blocked worker's own lanes count as stuck) | as from outside, and hand-off steps 3 and 4 start or wake a spare if every configured worker is busy (`schedule.rs`) |
//!
//! Everything that lands in a queue stays reachable by every worker: deques through their
//! stealers, inject queues and the injector directly. A next slot is its worker's own, but the
//! monitor moves its task to the injector when that worker's poll is slow or stuck. A busy or
//! stuck worker can never strand work.
//!
//! `schedule.rs` picks the row: only the worker loop (`worker.rs`, above this module) knows
//! whether the calling thread is one of our workers, and which. The queues and the wake-ups
//! are here.
//!
//! # Shutdown vs. a concurrent push
//! A push to a shared queue is followed by a SeqCst fence and a read of `shutdown`; shutdown sets
//! `shutdown`, fences, and later drains every shared queue. Either the pusher sees the flag (and
//! drains the queue itself), or shutdown's drain sees the push: a `Notified` can never be stranded
//! in a queue after shutdown, where it would keep its task (and, through the task, this `Shared`)
//! alive forever. Checked by `loom_shutdown_racing_with_a_spawn` (`executor/tests/loom_park.rs`).

use super::idle::Idle;
use super::late_context::LateContextSlot;
use super::metrics::{ExecutorMetrics, MetricsBatch};
use super::monitor::Monitor;
use super::owned::OwnedTasks;
use super::park::Parker;
use super::queue::{Injector, Stealer};
use super::task::{self, Task};
use super::threads::ThreadConfig;
use crate::loom::atomic::{fence, AtomicBool, Ordering::*};
use crate::loom::{lock, Arc, Condvar, Mutex};

pub(crate) type Notified = task::Notified<Arc<Shared>>;

/// How long shutdown waits, past its deadline, for workers that are not inside a poll to exit
/// (`Shared::wait_for_workers`). They only have to be scheduled: a parked worker unparked by
/// shutdown exits within microseconds on an idle machine, milliseconds on a loaded one. Short:
/// a scheduler's forced stop promises its bound "give or take the time the operating system
/// takes to run the threads involved" (`scheduler/shutdown.rs`), and this is that time.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_millis(50);

/// Tasks taken from the global queue (or an inject queue) per visit, including the one run now.
pub(crate) const INJECT_BATCH: usize = if cfg!(loom) { 2 } else { 1 + 16 };
/// Tasks stolen per steal, at most (crossbeam takes about half of the victim's deque).
pub(crate) const STEAL_BATCH: usize = if cfg!(loom) { 2 } else { 32 };

/// One worker's state that others reach.
pub(crate) struct Remote {
    /// The thieves' end of the worker's deque.
    pub(crate) stealer: Stealer<Notified>,
    /// Tasks that yielded while running on this worker (`yield_now`, a process's `Continue`).
    pub(crate) inject: Injector<Notified>,
    /// Tasks woken from outside that last ran on this worker: taken before `inject`, so that a
    /// task with news does not wait behind every task that merely yielded (worker.rs, "Finding
    /// work").
    pub(crate) woken: Injector<Notified>,
    pub(crate) parker: Parker,
}

/// Reports a contained panic of a task's destructor, given the task's label.
pub(crate) type DestructorPanicFn = dyn Fn(u64) + Send + Sync;

pub(crate) struct Shared {
    /// Every worker slot: the configured workers, then the spares (`spare.rs`).
    pub(crate) remotes: Box<[Remote]>,
    /// Configured workers: the first `workers` slots.
    workers: usize,
    pub(crate) injector: Injector<Notified>,
    pub(crate) idle: Idle,
    pub(crate) owned: OwnedTasks<Arc<Shared>>,
    pub(crate) metrics: MetricsBatch,
    /// The numbers in `1..=n` coprime with `n` (configured workers), for random victim order.
    pub(crate) coprimes: Box<[usize]>,
    pub(crate) monitor: Monitor<Notified>,
    /// How to start a worker thread (spares start on demand).
    pub(crate) threads: ThreadConfig,
    /// A context the workers enter once it is set (`late_context.rs`).
    pub(crate) late_context: LateContextSlot,
    /// Who reports a contained panic of a task's destructor, by the task's label
    /// (`Builder::on_destructor_panic`); `None`: a `tracing` warning naming the label.
    pub(crate) destructor_panic_observer: Option<std::sync::Arc<DestructorPanicFn>>,
    shutdown: AtomicBool,
    /// Workers that have not exited yet; shutdown waits on `exited` for it to reach zero.
    live_workers: Mutex<usize>,
    exited: Condvar,
}

impl Shared {
    /// `remotes` holds every slot; the first `workers` are the configured workers.
    pub(crate) fn new(
        remotes: Box<[Remote]>,
        workers: usize,
        monitor: Monitor<Notified>,
        threads: ThreadConfig,
        destructor_panic_observer: Option<std::sync::Arc<DestructorPanicFn>>,
    ) -> Shared {
        let n = workers;
        Shared {
            idle: Idle::new(n),
            owned: OwnedTasks::new(n * 16),
            metrics: MetricsBatch::new(n, remotes.len()),
            coprimes: (1..=n).filter(|&k| gcd(k, n) == 1).collect(),
            injector: Injector::new(),
            shutdown: AtomicBool::new(false),
            live_workers: Mutex::new(n),
            exited: Condvar::new(),
            remotes,
            workers,
            monitor,
            threads,
            late_context: LateContextSlot::default(),
            destructor_panic_observer,
        }
    }

    /// Configured workers.
    pub(crate) fn num_workers(&self) -> usize {
        self.workers
    }

    /// Worker slots: configured workers and spares.
    pub(crate) fn num_slots(&self) -> usize {
        self.remotes.len()
    }

    pub(crate) fn metrics_snapshot(&self) -> ExecutorMetrics {
        self.metrics
            .snapshot(self.monitor.snapshot(self.num_workers()))
    }

    /// Queues `task` on worker `index`'s inject queue (the caller runs on that worker) and wakes
    /// a parked worker if none is searching, so that others can steal it.
    pub(crate) fn push_own_inject(&self, index: usize, task: Notified) {
        let remote = &self.remotes[index];
        remote.inject.push(task);
        self.after_shared_push(|| self.drain(&remote.inject));
        self.notify_parked();
    }

    /// A wake from a thread that is not one of our workers (`schedule.rs`).
    #[inline]
    pub(crate) fn schedule_remote(&self, task: Notified) {
        let last = task.header().affinity.load(Relaxed);
        match self.remotes.get(last) {
            Some(remote) if last < self.workers && !self.monitor.is_stuck(last) => {
                remote.woken.push(task);
                self.after_shared_push(|| self.drain(&remote.woken));
                // Lock the sleeper list only if someone sleeps. Safe without the lock: the fence
                // in `after_shared_push` pairs with the one a parking worker issues between
                // joining the list and re-checking its inject lanes (`idle.rs`).
                if self.idle.has_sleepers() && self.idle.unpark_worker_by_id(last, true) {
                    self.unpark(last);
                } else {
                    self.notify_parked();
                }
            }
            _ => self.push_global(task),
        }
    }

    /// Queues `task` on the global injector and wakes a parked worker if none is searching.
    #[inline]
    pub(crate) fn push_global(&self, task: Notified) {
        self.injector.push(task);
        self.after_shared_push(|| self.drain(&self.injector));
        self.notify_parked();
    }

    /// The pusher's half of the shutdown handshake (module docs).
    fn after_shared_push(&self, drain: impl FnOnce()) {
        fence(SeqCst);
        if self.shutdown.load(Relaxed) {
            drain();
        }
    }

    /// Wakes a parked worker if no one is searching and someone sleeps (`Idle` step 2).
    pub(crate) fn notify_parked(&self) {
        if let Some(worker) = self.idle.worker_to_notify() {
            self.unpark(worker);
        }
    }

    #[inline]
    pub(crate) fn unpark(&self, worker: usize) {
        self.remotes[worker].parker.unpark();
    }

    /// Hand-off step 2 (`monitor.rs`): moves what worker `index` has queued (its deque, from the
    /// thieves' end, its next slot and its inject queues) to the global injector.
    pub(crate) fn hand_over_queues(&self, index: usize) {
        let remote = &self.remotes[index];
        let mut moved = false;
        while let Some(task) = remote
            .stealer
            .take()
            .or_else(|| remote.woken.pop())
            .or_else(|| remote.inject.pop())
        {
            self.injector.push(task);
            moved = true;
        }
        if moved {
            self.after_shared_push(|| self.drain(&self.injector));
            self.notify_parked();
        }
    }

    /// `true` if worker `index`'s deque, next slot or inject queues hold work (the monitor's
    /// nudge).
    pub(crate) fn has_queued_work(&self, index: usize) -> bool {
        let remote = &self.remotes[index];
        !remote.stealer.is_empty()
            || remote.stealer.next_is_full()
            || !remote.woken.is_empty()
            || !remote.inject.is_empty()
    }

    /// The nudge's hand-over (`monitor.rs`, "Nudge"): moves the task in worker `index`'s next
    /// slot, which no thief may take, to the global injector, where the worker the nudge wakes
    /// finds it.
    pub(crate) fn hand_over_next(&self, index: usize) {
        if let Some(task) = self.remotes[index].stealer.take_next() {
            self.injector.push(task);
            self.after_shared_push(|| self.drain(&self.injector));
        }
    }

    /// `true` if any shared queue or any deque holds work a thief could take (the last
    /// searcher's re-check). A next slot is its worker's own: that worker is inside a poll and
    /// runs the slot's task after it, or the monitor hands it over.
    /// `true` if the global injector holds no task.
    pub(crate) fn global_is_empty(&self) -> bool {
        self.injector.is_empty()
    }

    pub(crate) fn has_pending_work(&self) -> bool {
        !self.injector.is_empty()
            || self
                .remotes
                .iter()
                .any(|r| !r.woken.is_empty() || !r.inject.is_empty() || !r.stealer.is_empty())
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Acquire)
    }

    /// Shutdown step 1: no more spawns, no more polls; wake every worker so it exits.
    /// Returns `false` if shutdown had already begun.
    pub(crate) fn begin_shutdown(&self) -> bool {
        if self.shutdown.swap(true, SeqCst) {
            return false;
        }
        fence(SeqCst);
        self.monitor.wake();
        for worker in self.idle.take_all_sleepers() {
            self.unpark(worker);
        }
        // Workers that are awake see the flag at their next tick; unpark them too in case they
        // are between their last check and sleeping.
        for remote in self.remotes.iter() {
            remote.parker.unpark();
        }
        true
    }

    /// Shutdown step 2: waits until every worker but `own` has exited, or `deadline` passes.
    /// `own` is the worker running this shutdown from inside a poll: it cannot exit while it
    /// waits, and is not stuck. Past the deadline, a worker not inside a poll (parked, spinning,
    /// between two polls: it saw or will see the flag before its next poll) is waited for up to
    /// [`EXIT_GRACE`] more: it was only slow to be scheduled, and its thread is joined. Returns
    /// the workers, `own` excepted, still inside a poll: the stuck ones.
    pub(crate) fn wait_for_workers(
        &self,
        deadline: std::time::Instant,
        own: Option<usize>,
    ) -> usize {
        let floor = usize::from(own.is_some());
        let mut grace_end = None;
        let mut live = lock(&self.live_workers);
        while *live > floor {
            let now = std::time::Instant::now();
            let mut until = deadline;
            // Loom cannot model time (its `wait_timeout` never times out): wait for real there.
            if now >= deadline && !cfg!(loom) {
                let in_poll = (0..self.num_slots())
                    .filter(|&index| Some(index) != own && self.is_in_poll(index))
                    .count();
                let grace_end = *grace_end.get_or_insert(now + EXIT_GRACE);
                if *live - floor <= in_poll || now >= grace_end {
                    return in_poll;
                }
                until = grace_end;
            }
            live = match self
                .exited
                .wait_timeout(live, until.saturating_duration_since(now))
            {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        0
    }

    /// `true` if at most `floor` workers are still in their loop (the rest have left it).
    pub(crate) fn workers_left(&self, floor: usize) -> bool {
        *lock(&self.live_workers) <= floor
    }

    /// `true` if worker slot `index` is inside a poll (its published sequence is odd: `monitor.rs`,
    /// "What each worker publishes"). A snapshot: the poll may end, or, for a worker that last
    /// checked the shutdown flag before it was set, one more may begin.
    pub(crate) fn is_in_poll(&self, index: usize) -> bool {
        self.monitor.activity[index].seq.load(Acquire) % 2 == 1
    }

    /// A spare's thread is about to start (`spare.rs`).
    pub(crate) fn worker_started(&self) {
        *lock(&self.live_workers) += 1;
    }

    pub(crate) fn worker_exited(&self) {
        let mut live = lock(&self.live_workers);
        *live -= 1;
        // Every exit: past its deadline, shutdown waits for the workers not inside a poll,
        // whichever they are.
        self.exited.notify_all();
    }

    /// Shutdown step 3: drops every queued `Notified` and cancels every live task. Returns how many
    /// futures were dropped unfinished. Tasks a stuck worker is polling are cancelled by that worker
    /// when its poll returns.
    pub(crate) fn cancel_all(&self) -> usize {
        self.drain(&self.injector);
        for remote in self.remotes.iter() {
            self.drain(&remote.woken);
            self.drain(&remote.inject);
            while remote.stealer.take().is_some() {}
        }
        let tasks: Vec<Task<Arc<Shared>>> = self.owned.close_and_take_all();
        let mut cancelled = 0;
        for task in &tasks {
            if task.shutdown() {
                cancelled += 1;
            }
        }
        drop(tasks);
        cancelled
    }

    fn drain(&self, queue: &Injector<Notified>) {
        while queue.pop().is_some() {}
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("workers", &self.num_workers())
            .field("idle", &self.idle)
            .field("monitor", &self.monitor)
            .field("shutdown", &self.is_shutdown())
            .finish_non_exhaustive()
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
