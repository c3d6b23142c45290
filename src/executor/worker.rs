//! A worker thread: find a task, run it, repeat; spin, then park, when there is none.
//!
//! # Finding work, in order
//! 1. Every [`GLOBAL_POLL_INTERVAL`]th tick: the global injector first, then the own inject
//!    queues, yielded lane before woken lane, so neither work from outside nor tasks that yielded
//!    are starved by a worker busy with its own local work or with a stream of wakes.
//! 2. News: the *woken* lane (tasks woken from outside that last ran here: a message to an idle
//!    process, a handler's completion), unless the previous task came from this step too. A
//!    task with news must not wait behind the local deque, which a busy worker keeps refilling
//!    (step 4 moves up to 17 yielded tasks into it at once): with the woken lane read only when
//!    the deque ran dry, a message round trip on a worker cycling 50 `Continue`-ing processes
//!    had a p50 of 19 µs in about half the runs instead of 12.4 (`docs/bench-process-history.md`,
//!    "News before local work"). Never twice in a row, so the deque gets at least every other
//!    tick however fast wakes arrive.
//! 3. The local queue: the next slot (the newest task woken or spawned by the last poll), then
//!    the deque, newest first (a freshly woken or spawned task runs while its data is
//!    cache-warm). Every [`MAX_LOCAL_STREAK`]th local pop takes the *oldest* local task instead, so
//!    two tasks waking each other forever cannot starve the rest of the deque.
//! 4. The own inject queues, then the global injector: one task plus up to 16 more moved into the
//!    local deque in one batch. The woken lane comes before the *yielded* lane (tasks that woke
//!    themselves while running here), for the reason of step 2. With both in one FIFO, a message
//!    round trip took 40–60 µs instead of 12.5 (`docs/bench-process-history.md`, "The
//!    round-trip latency's slow mode").
//! 5. Search (at most half of the workers at once, see `idle.rs`): visit the other workers in a
//!    random order — start `r % n`, stride a number coprime with `n`, one random number per search —
//!    stealing about half of a victim's deque (at most 32), or a batch of its inject queues
//!    (woken lane first).
//! 6. Nothing anywhere: spin (rounds 0..4, a growing busy-wait), yield the thread (rounds 4..16),
//!    then park (`idle.rs` steps 4–5).
//!
//! # Spare workers
//! A spare (`spare.rs`) runs the same loop with two differences (`monitor.rs`, "Retirement"):
//! before each task it checks whether it is surplus, and where a configured worker would search
//! under the idle protocol and park, it sweeps every queue once without joining the protocol and,
//! finding nothing, retires.
//!
//! # Around each poll
//! The worker publishes the poll's sequence number and the task's label for the monitor
//! (`monitor.rs`, "What each worker publishes"): two plain stores to its own cache line.

use super::metrics::WorkerCounters;
use super::monitor::Activity;
use super::queue::{Injector, Local};
use super::shared::{Notified, Remote, Shared, INJECT_BATCH, STEAL_BATCH};
use super::spare::{Expire, Retire};
use crate::loom::atomic::{fence, Ordering::*};
use crate::loom::{thread, Arc};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Ticks between forced checks of the global queue (tokio and Go use 61: prime, so it does not
/// resonate with periodic workloads).
pub(crate) const GLOBAL_POLL_INTERVAL: u32 = 61;
/// Local pops between two takes of the oldest local task.
pub(crate) const MAX_LOCAL_STREAK: u32 = 16;
/// Search rounds spent busy-waiting before yielding the thread.
const SPIN_ROUNDS: u32 = if cfg!(loom) { 0 } else { 4 };
/// Search rounds (spinning included) before parking.
const YIELD_ROUNDS: u32 = if cfg!(loom) { 1 } else { 16 };

crate::loom::thread_local_const! {
    /// The worker running on this thread, if any.
    static CURRENT: RefCell<Option<Rc<Core>>> = RefCell::new(None);
}

/// A worker's thread-local state.
pub(crate) struct Core {
    shared: Arc<Shared>,
    index: usize,
    local: Local<Notified>,
    tick: Cell<u32>,
    local_streak: Cell<u32>,
    /// The last task came from the news check (step 2): the next tick skips it.
    took_news: Cell<bool>,
    is_searching: Cell<bool>,
    rng: Cell<u64>,
    /// A spare worker slot (`spare.rs`).
    is_spare: bool,
    /// This worker's poll sequence number (the published copy is in its `Activity`).
    poll_seq: Cell<u64>,
    /// Nesting depth of `block_in_place` calls on this worker.
    blocking_depth: Cell<u32>,
    /// A spare whose keep-alive ran out: its thread ends and hands its deque back
    /// (`spare.rs`, "Keep-alive").
    expired: Cell<bool>,
    /// The executor's late context, entered (`late_context.rs`): dropped when the loop ends.
    late_context: RefCell<Option<Box<dyn std::any::Any>>>,
}

mod current;
pub(crate) use current::{
    current, current_index, current_shared, in_block_in_place, on_worker_thread, try_push_local,
    try_push_yielded, yield_requested, PushLocal,
};

/// Runs worker `index` on the current thread until shutdown.
pub(crate) fn run(shared: Arc<Shared>, index: usize, local: Local<Notified>) {
    /// Reports the exit even if the loop panics (it never runs user code outside `catch_unwind`,
    /// but a shutdown must not wait for a worker that is gone).
    struct ExitGuard(Arc<Shared>);
    impl Drop for ExitGuard {
        fn drop(&mut self) {
            self.0.worker_exited();
        }
    }
    let _exit = ExitGuard(shared.clone());

    let core = Rc::new(Core {
        is_spare: shared.monitor.spares.is_spare(index),
        poll_seq: Cell::new(shared.monitor.activity[index].seq.load(Relaxed)),
        shared,
        index,
        local,
        tick: Cell::new(0),
        local_streak: Cell::new(0),
        took_news: Cell::new(false),
        is_searching: Cell::new(false),
        rng: Cell::new(seed(index)),
        blocking_depth: Cell::new(0),
        expired: Cell::new(false),
        late_context: RefCell::new(None),
    });
    CURRENT.with(|current| *current.borrow_mut() = Some(core.clone()));
    tracing::trace!(worker = index, "worker started");
    core.run();
    // Left before anything else of the thread's: it was entered last.
    drop(core.late_context.borrow_mut().take());
    CURRENT.with(|current| current.borrow_mut().take());
    // Drop what is left in our deque: the tasks stay in the owned list, which shutdown cancels
    // (or, unowned, with their owner, who does).
    while core.local.pop().is_some() {}
    if core.is_spare {
        core.shared.monitor.spares.thread_ended();
    }
    if core.expired.get() {
        // Keep-alive step 2 (`spare.rs`): the deque's owner end goes back to the slot. The
        // thread-local was the only other reference.
        match Rc::try_unwrap(core) {
            Ok(core) => {
                let shared = core.shared.clone();
                shared.monitor.spares.exited(index, core.local);
            }
            Err(_) => tracing::error!(worker = index, "an expired spare's core is still shared"),
        }
    }
    tracing::trace!(worker = index, "worker stopped");
}

impl Core {
    fn run(&self) {
        while let Some(task) = self.next_task() {
            self.run_task(task);
        }
        self.leave_searching(false);
    }

    fn run_task(&self, task: Notified) {
        if self.late_context.borrow().is_none() {
            self.enter_late_context();
        }
        let affinity = &task.header().affinity;
        if affinity.load(Relaxed) != self.index {
            affinity.store(self.index, Relaxed);
        }
        self.counters().polls.incr();
        let activity = self.activity();
        let seq = self.poll_seq.get();
        // Orders the previous poll's end before this label store, for the monitor's re-read
        // (`Monitor::tick`); free on x86 (a compiler fence).
        fence(Release);
        activity.label.store(task.header().label, Relaxed);
        activity.seq.store(seq.wrapping_add(1), Release);
        task.run();
        activity.seq.store(seq.wrapping_add(2), Release);
        self.poll_seq.set(seq.wrapping_add(2));
    }

    /// Enters the executor's late context if one was set (`late_context.rs`).
    #[inline]
    fn enter_late_context(&self) {
        if let Some(context) = self.shared.late_context.get() {
            let entered = context.enter();
            *self.late_context.borrow_mut() = Some(entered);
        }
    }

    fn activity(&self) -> &Activity {
        &self.shared.monitor.activity[self.index]
    }

    /// The next task to run, or `None` at shutdown.
    fn next_task(&self) -> Option<Notified> {
        if self.shared.is_shutdown() {
            return None;
        }
        if self.is_spare && self.shared.monitor.is_surplus() && !self.retire(false) {
            return None;
        }
        let tick = self.tick.get().wrapping_add(1);
        self.tick.set(tick);
        if tick.is_multiple_of(GLOBAL_POLL_INTERVAL) {
            if let Some(task) = self
                .pop_global()
                .or_else(|| self.pop_yielded())
                .or_else(|| self.pop_woken())
            {
                return Some(task);
            }
        }
        if let Some(task) = self.pop_news() {
            return Some(task);
        }
        if let Some(task) = self.pop_local() {
            return Some(task);
        }
        self.pop_woken()
            .or_else(|| self.pop_yielded())
            .or_else(|| self.pop_global())
            .or_else(|| {
                if self.is_spare {
                    self.spare_search()
                } else {
                    self.search_or_park()
                }
            })
    }

    /// A spare's search: sweep every queue; nothing anywhere means retire (`monitor.rs`,
    /// retirement step 1, idle). `None` means shutdown.
    fn spare_search(&self) -> Option<Notified> {
        loop {
            if self.shared.is_shutdown() {
                return None;
            }
            if let Some(task) = self.steal_work().or_else(|| self.pop_global()) {
                return Some(task);
            }
            if !self.retire(true) {
                return None;
            }
        }
    }

    /// Retirement steps 2–5 (`monitor.rs`). Returns `false` at shutdown or when the spare's
    /// keep-alive ran out (its thread ends), `true` once the spare is active again (or was
    /// never retired).
    fn retire(&self, idle: bool) -> bool {
        let shared = &self.shared;
        // Step 2: hand the deque back.
        while let Some(task) = self.local.pop() {
            shared.push_global(task);
        }
        let spares = &shared.monitor.spares;
        // Step 3.
        match spares.retire(self.index, idle, || shared.monitor.needed()) {
            Retire::Stay => true,
            // Step 3b: a task pushed to the global injector while this spare lowered `active`
            // may have found it still counted (hand-off then returns early: `start.rs`), and
            // no worker to wake (the configured ones busy or inside `block_in_place`). The
            // pusher fences after its push, then reads `active`; this fence comes after
            // `active` was lowered, before the injector is read: one of the two sees the
            // other's write, and either the pusher activates a spare or this one comes back.
            // (A diff review stranded a task spawned inside `block_in_place` here.)
            Retire::Parked => self.back_for_work() || self.parked(),
        }
    }

    /// Retirement step 3b (above): `true` if this spare, just parked, is active again for a
    /// task in the global injector.
    fn back_for_work(&self) -> bool {
        fence(SeqCst);
        if self.shared.global_is_empty() {
            return false;
        }
        self.shared.monitor.spares.unretire(self.index);
        true
    }

    /// Retirement steps 4–5: parked until activated (`true`), or shutdown or the keep-alive's
    /// end (`false`).
    fn parked(&self) -> bool {
        let shared = &self.shared;
        let spares = &shared.monitor.spares;
        loop {
            // Step 4.
            let unparked = self.remote().parker.park_timeout(spares.keep_alive());
            if shared.is_shutdown() {
                return false;
            }
            if !spares.is_parked(self.index) {
                return true;
            }
            // Step 5: no activation within the keep-alive (a spurious return parks again).
            if !unparked {
                return match spares.expire(self.index) {
                    Expire::Stay => true,
                    Expire::Exit => {
                        self.expired.set(true);
                        false
                    }
                };
            }
        }
    }

    /// Step 2 of the module docs: the woken lane ahead of the local deque, never twice in a
    /// row. The emptiness check is two loads of lines only remote wakers write, so a worker
    /// with no news pays no cache miss for it.
    #[inline]
    fn pop_news(&self) -> Option<Notified> {
        if self.took_news.replace(false) || self.remote().woken.is_empty() {
            return None;
        }
        let task = self.pop_woken()?;
        self.took_news.set(true);
        Some(task)
    }

    fn pop_local(&self) -> Option<Notified> {
        let streak = self.local_streak.get() + 1;
        if streak >= MAX_LOCAL_STREAK {
            self.local_streak.set(0);
            if let Some(task) = self.remote().stealer.take() {
                return Some(task);
            }
        } else {
            self.local_streak.set(streak);
        }
        self.local.pop()
    }

    /// A batch of this worker's woken lane (wakes from outside).
    fn pop_woken(&self) -> Option<Notified> {
        self.pop_own(&self.remote().woken)
    }

    /// A batch of this worker's yielded lane.
    fn pop_yielded(&self) -> Option<Notified> {
        self.pop_own(&self.remote().inject)
    }

    /// A batch of one of this worker's inject lanes, counted as inject pops.
    fn pop_own(&self, lane: &Injector<Notified>) -> Option<Notified> {
        let counters = self.counters();
        let before = self.local.len();
        let task = lane.pop_batch_into(&self.local, INJECT_BATCH)?;
        counters.inject_batches.incr();
        counters
            .inject_pops
            .add(1 + self.local.len().saturating_sub(before) as u64);
        Some(task)
    }

    fn pop_global(&self) -> Option<Notified> {
        let counters = self.counters();
        let before = self.local.len();
        let task = self
            .shared
            .injector
            .pop_batch_into(&self.local, INJECT_BATCH)?;
        counters.inject_batches.incr();
        counters
            .global_pops
            .add(1 + self.local.len().saturating_sub(before) as u64);
        Some(task)
    }

    /// Steps 4 and 5 of the module docs. `None` means shutdown.
    fn search_or_park(&self) -> Option<Notified> {
        let mut round = 0;
        loop {
            if self.shared.is_shutdown() {
                return None;
            }
            if !self.is_searching.get() {
                self.is_searching
                    .set(self.shared.idle.transition_worker_to_searching());
            }
            let found = if self.is_searching.get() {
                self.steal_work()
            } else {
                None
            };
            if let Some(task) = found
                .or_else(|| self.pop_woken())
                .or_else(|| self.pop_yielded())
                .or_else(|| self.pop_global())
            {
                self.leave_searching(true);
                return Some(task);
            }
            self.counters().spins.incr();
            round += 1;
            if round < SPIN_ROUNDS {
                for _ in 0..(1 << round) {
                    std::hint::spin_loop();
                }
            } else if round < YIELD_ROUNDS {
                thread::yield_now();
            } else {
                self.park();
                round = 0;
            }
        }
    }

    /// One random sweep over the other workers (module docs, step 4).
    ///
    /// Spare slots are visited after the configured workers, in order, and only while some spare
    /// is active (a retired spare's deque is empty, and its inject queue is never used).
    fn steal_work(&self) -> Option<Notified> {
        let shared = &self.shared;
        let n = shared.num_workers();
        let r = self.next_random();
        let stride = shared.coprimes[(r / n) % shared.coprimes.len()];
        let mut victim = r % n;
        for _ in 0..n {
            if let Some(task) = self.steal_from(victim) {
                return Some(task);
            }
            victim = (victim + stride) % n;
        }
        if shared.monitor.spares.active() > 0 {
            for victim in n..shared.num_slots() {
                if let Some(task) = self.steal_from(victim) {
                    return Some(task);
                }
            }
        }
        None
    }

    fn steal_from(&self, victim: usize) -> Option<Notified> {
        if victim == self.index {
            return None;
        }
        let remote = &self.shared.remotes[victim];
        let before = self.local.len();
        let task = remote
            .stealer
            .steal_half_into(&self.local, STEAL_BATCH)
            .or_else(|| remote.woken.pop_batch_into(&self.local, INJECT_BATCH))
            .or_else(|| remote.inject.pop_batch_into(&self.local, INJECT_BATCH))?;
        let counters = self.counters();
        counters.steal_ops.incr();
        counters
            .stolen
            .add(1 + self.local.len().saturating_sub(before) as u64);
        Some(task)
    }

    /// Stops searching; if this was the last searcher and it found work, wakes another worker so a
    /// burst of work is picked up (`idle.rs`, step 3).
    fn leave_searching(&self, found_work: bool) {
        if self.is_searching.replace(false)
            && self.shared.idle.transition_worker_from_searching()
            && found_work
        {
            self.shared.notify_parked();
        }
    }

    /// Parks until woken (`idle.rs`, steps 4 and 5).
    fn park(&self) {
        let shared = &self.shared;
        let was_searching = self.is_searching.replace(false);
        let last_searcher = shared
            .idle
            .transition_worker_to_parked(self.index, was_searching);
        // Pairs with the producers' fence after a push (`shared.rs`).
        fence(SeqCst);
        let work_pending = !self.remote().woken.is_empty()
            || !self.remote().inject.is_empty()
            || !shared.injector.is_empty()
            || (last_searcher && shared.has_pending_work())
            || shared.is_shutdown();
        if work_pending {
            if !shared.idle.unpark_worker_by_id(self.index, false) {
                // Someone took us off the sleeper list meanwhile; consume their unpark token.
                self.remote().parker.park();
                // A producer claims a sleeper as a searcher (counted); shutdown empties the list
                // without counting anyone as searching (it sets its flag first, so we see it).
                self.is_searching.set(!shared.is_shutdown());
            }
            shared.monitor.on_worker_unparked();
            return;
        }
        let counters = self.counters();
        counters.parks.incr();
        tracing::trace!(worker = self.index, "parking");
        loop {
            self.remote().parker.park();
            if shared.is_shutdown() {
                break;
            }
            if !shared.idle.is_parked(self.index) {
                // Claimed by a producer: it counted us as unparked and searching.
                self.is_searching.set(true);
                break;
            }
        }
        counters.unparks.incr();
        shared.monitor.on_worker_unparked();
    }

    /// `block_in_place` entry (`monitor.rs`, "Hand-off" steps 1 and 2, for a worker that
    /// declares itself blocked). Nested calls only count (`None`). The caller takes steps 3 and
    /// 4 with the executor returned (`blocking.rs`).
    pub(crate) fn enter_blocking(&self) -> Option<&Arc<Shared>> {
        let depth = self.blocking_depth.get();
        self.blocking_depth.set(depth + 1);
        if depth > 0 {
            return None;
        }
        let shared = &self.shared;
        // Step 1.
        shared.monitor.enter_blocking(self.index);
        // Step 2: everything this worker queued, to the global injector.
        while let Some(task) = self.local.pop() {
            shared.push_global(task);
        }
        shared.hand_over_queues(self.index);
        Some(shared)
    }

    /// `block_in_place` exit: the worker counts as running again; a surplus spare retires at its
    /// next safe point.
    pub(crate) fn leave_blocking(&self) {
        let depth = self.blocking_depth.get() - 1;
        self.blocking_depth.set(depth);
        if depth == 0 {
            self.shared.monitor.leave_blocking(self.index);
        }
    }

    /// Pushes a task spawned or woken on this worker to its queue: its next slot (run next,
    /// popped with one CAS instead of the deque's fence and CAS: `next_slot.rs`; a task already
    /// there moves to the deque). If the queue already held work, wakes a parked worker if none
    /// is searching (`idle.rs`, step 2): there is more here than this worker takes next, and the
    /// older task, now in the deque, is a thief's to take.
    ///
    /// A *lone* task is not announced (tokio's rule for its LIFO slot): this worker pops it as
    /// soon as the current poll returns, which for a message hop or a completion is a few
    /// hundred nanoseconds. Announcing it woke the other workers to steal a strictly sequential
    /// chain: on a 1 000-process ring with two workers, 5–15 % of hops were stolen and each
    /// moved the chain across cores, 190–250 ns/hop against 100–140 without
    /// (`docs/bench-process-history.md`, "Lone wakes stay on their worker"). If the current
    /// poll blocks instead, the monitor moves it to the global injector and nudges a parked
    /// worker after one tick (`monitor.rs`, "Nudge"); a task pushed behind it is in the deque,
    /// which a searcher that parks sweeps (`idle.rs`, step 5).
    #[inline]
    pub(crate) fn push_local(&self, task: Notified) {
        if self.local.push(task) {
            // Pairs with the fence of a parking last searcher before it sweeps every deque
            // (`idle.rs`, "Why no wake-up is lost").
            fence(SeqCst);
            self.shared.notify_parked();
        }
    }

    fn remote(&self) -> &Remote {
        &self.shared.remotes[self.index]
    }

    fn counters(&self) -> &WorkerCounters {
        self.shared.metrics.worker(self.index)
    }

    /// xorshift64*: fast, and good enough to pick victims.
    fn next_random(&self) -> usize {
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as usize
    }
}

fn seed(index: usize) -> u64 {
    // Any non-zero value works; mixing in the index de-correlates the workers' victim orders.
    0x9E37_79B9_7F4A_7C15u64.wrapping_mul(index as u64 + 1) | 1
}
