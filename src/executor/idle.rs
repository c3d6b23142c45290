//! Who is searching, who is parked: the bookkeeping that keeps wake-ups cheap and never lost.
//!
//! One atomic word counts *searching* workers (looking for work to steal) and *unparked* workers
//! (not asleep). A mutex-protected list names the parked ones. Producers read the word to decide,
//! without a lock, whether anyone needs waking.
//!
//! # Protocol
//! 1. A worker that runs out of local and global work asks to search
//!    ([`Idle::transition_worker_to_searching`]); at most half the workers search at once, so a
//!    burst of idleness does not turn into a stampede of thieves.
//! 2. A producer that queued work where another worker could take it calls
//!    [`Idle::worker_to_notify`]: if someone is searching, that searcher will find the work; if
//!    everyone is awake, they will; otherwise one parked worker is woken **as a searcher**.
//! 3. A searcher that finds work leaves the searching state; if it was the last searcher it wakes
//!    another worker (step 2), so a burst of work is picked up one worker at a time.
//! 4. A worker with nothing to do parks ([`Idle::transition_worker_to_parked`]): it leaves the
//!    searching and unparked counts and joins the sleeper list in one critical section.
//! 5. After step 4 and before sleeping, the worker re-checks the global queue and its own inject
//!    queue; the *last searcher* to park re-checks every queue. If it finds work, it unparks
//!    itself ([`Idle::unpark_worker_by_id`]) and wakes one more if needed.
//!
//! # Why no wake-up is lost
//! A producer pushes, then (SeqCst fence) reads the word; a parking worker updates the word (SeqCst
//! RMW), then (SeqCst fence) re-checks the queues. By the fences, either the producer sees the
//! worker still unparked/searching — and then that worker's re-check sees the push — or the
//! producer sees the worker parked and wakes it. Work pushed to a *specific* worker's inject queues
//! (its woken or yielded lane) follows the same pattern: the producer fences, reads the word and
//! locks the sleeper list only if someone sleeps; the parker joins the list under that lock,
//! fences and re-checks both lanes. Either it sees the push, or the producer sees it parked (and then finds it on the list,
//! whose lock it cannot take before the parker has released it). Work pushed to the producer's
//! *own deque* (a spawn or wake on a worker thread) behind other queued work too: the producer
//! pushes, fences and reads the word; the last searcher to park fences after its update and
//! sweeps every deque (step 5). So either that sweep sees the task, or the producer sees no
//! searcher and wakes a parked worker. A *lone* task pushed to the producer's own queue is not
//! announced (`worker.rs`, `push_local`): it goes to the worker's next slot, which no sweep
//! looks at (`next_slot.rs`); its owner runs it when the current poll returns, and if the poll
//! is slow or blocks, the monitor's nudge moves it to the global injector and wakes a parked
//! worker for it one tick later (`monitor.rs`, "Nudge"). Nothing is lost; without the monitor,
//! such a task waits for the blocking poll.
//! Searchers are always woken with the searching count already raised, so
//! "someone is searching" is never a stale promise: a searcher always re-checks every queue before
//! it gives the role up (step 5).
//!
//! Checked on the real worker loop (`executor/tests/loom_park.rs`) by
//! `loom_task_pushed_while_the_only_worker_parks_is_run` (steps 2, 4, 5 with one worker),
//! `loom_wake_from_outside_reaches_a_parked_worker` (a wake from a foreign thread),
//! `loom_two_workers_spawn_from_outside_and_inside` (steps 1–5 with two workers) and
//! `loom_task_queued_behind_a_blocked_workers_task_runs_on_the_other_worker` (a push to the
//! producer's own deque behind another task) and
//! `loom_lone_task_behind_a_blocked_poll_runs_after_the_nudge` (a lone one, and the monitor's
//! nudge).

use crate::loom::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::loom::{lock, Mutex};

const UNPARKED_SHIFT: usize = 16;
const SEARCHING_MASK: usize = (1 << UNPARKED_SHIFT) - 1;
const UNPARKED_ONE: usize = 1 << UNPARKED_SHIFT;
// `Builder::build` refuses more threads than this counts (the assert in `Idle::new` is then
// never reached from user input).
const _: () = assert!(super::MAX_THREADS < SEARCHING_MASK);

pub(crate) struct Idle {
    /// `num_unparked << 16 | num_searching`.
    state: AtomicUsize,
    /// Indices of parked workers.
    sleepers: Mutex<Vec<usize>>,
    num_workers: usize,
}

impl Idle {
    pub(crate) fn new(num_workers: usize) -> Idle {
        assert!(num_workers < SEARCHING_MASK, "too many workers");
        Idle {
            // Workers start unparked and not searching.
            state: AtomicUsize::new(num_workers << UNPARKED_SHIFT),
            sleepers: Mutex::new(Vec::with_capacity(num_workers)),
            num_workers,
        }
    }

    /// Step 2: if a parked worker should wake to look for new work, claims it (already counted as
    /// unparked and searching) and returns its index. The caller unparks it.
    pub(crate) fn worker_to_notify(&self) -> Option<usize> {
        if !self.notify_should_wakeup() {
            return None;
        }
        let mut sleepers = lock(&self.sleepers);
        // Re-check under the lock: another producer may have woken a searcher meanwhile.
        if !self.notify_should_wakeup() {
            return None;
        }
        let worker = sleepers.pop()?;
        self.state.fetch_add(UNPARKED_ONE | 1, SeqCst);
        Some(worker)
    }

    /// Step 1: `true` if the caller may search (steal).
    pub(crate) fn transition_worker_to_searching(&self) -> bool {
        let state = self.state.load(SeqCst);
        if 2 * num_searching(state) >= self.num_workers.max(2) {
            return false;
        }
        // Racy by design (tokio does the same): the cap may be exceeded by one momentarily.
        self.state.fetch_add(1, SeqCst);
        true
    }

    /// Step 3: the caller stops searching. Returns `true` if it was the last searcher (it must
    /// then wake another worker if there is one to wake).
    pub(crate) fn transition_worker_from_searching(&self) -> bool {
        let prev = self.state.fetch_sub(1, SeqCst);
        debug_assert!(num_searching(prev) > 0);
        num_searching(prev) == 1
    }

    /// Step 4: the caller is about to sleep. Returns `true` if it was the last searcher (it must
    /// then re-check every queue, step 5).
    pub(crate) fn transition_worker_to_parked(&self, worker: usize, is_searching: bool) -> bool {
        let mut sleepers = lock(&self.sleepers);
        let dec = UNPARKED_ONE | usize::from(is_searching);
        let prev = self.state.fetch_sub(dec, SeqCst);
        sleepers.push(worker);
        is_searching && num_searching(prev) == 1
    }

    /// Takes `worker` off the sleeper list if it is there, counting it unparked — and searching
    /// if `as_searcher` — and returns `true`; `false` means someone already woke it.
    ///
    /// Used by a worker that re-checked the queues after step 4 and found work, or woke
    /// spuriously (`as_searcher: false`), and by a producer that pushed to that worker's own
    /// inject queue (`as_searcher: true`, so it re-checks everything before sleeping again).
    pub(crate) fn unpark_worker_by_id(&self, worker: usize, as_searcher: bool) -> bool {
        let mut sleepers = lock(&self.sleepers);
        match sleepers.iter().position(|&w| w == worker) {
            Some(i) => {
                sleepers.swap_remove(i);
                self.state
                    .fetch_add(UNPARKED_ONE | usize::from(as_searcher), SeqCst);
                true
            }
            None => false,
        }
    }

    /// `true` if `worker` is on the sleeper list.
    pub(crate) fn is_parked(&self, worker: usize) -> bool {
        lock(&self.sleepers).contains(&worker)
    }

    /// Shutdown: empties the sleeper list (every worker is about to be unparked).
    pub(crate) fn take_all_sleepers(&self) -> Vec<usize> {
        let mut sleepers = lock(&self.sleepers);
        let all = std::mem::take(&mut *sleepers);
        self.state.fetch_add(all.len() * UNPARKED_ONE, SeqCst);
        all
    }

    /// `true` if some worker is (or is about to be) parked.
    pub(crate) fn has_sleepers(&self) -> bool {
        num_unparked(self.state.load(SeqCst)) < self.num_workers
    }

    /// Configured workers not parked (the monitor sleeps only when this is 0, `monitor.rs`).
    #[cfg_attr(loom, allow(dead_code))] // the monitor thread does not exist under loom
    pub(crate) fn num_unparked(&self) -> usize {
        num_unparked(self.state.load(SeqCst))
    }

    fn notify_should_wakeup(&self) -> bool {
        let state = self.state.load(SeqCst);
        num_searching(state) == 0 && num_unparked(state) < self.num_workers
    }
}

fn num_searching(state: usize) -> usize {
    state & SEARCHING_MASK
}

fn num_unparked(state: usize) -> usize {
    state >> UNPARKED_SHIFT
}

impl std::fmt::Debug for Idle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.load(SeqCst);
        f.debug_struct("Idle")
            .field("searching", &num_searching(state))
            .field("unparked", &num_unparked(state))
            .field("workers", &self.num_workers)
            .finish()
    }
}
