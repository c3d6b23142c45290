//! The spare-worker pool: extra worker threads that hold a run queue only while configured
//! workers are stuck (`monitor.rs` has the protocols, "Hand-off" and "Retirement").
//!
//! Spares occupy worker slots `first..first + max` (after the configured workers): their deques
//! and counters exist from the start, their threads are started on first use. A spare is in
//! exactly one of three places, each change made under the pool lock together with the
//! `active` count:
//!
//! | place | meaning | leaves it by |
//! |---|---|---|
//! | `unstarted` (holds its deque's owner end) | no thread yet | [`Spares::activate`]: thread started, active |
//! | active (in no list) | runs the worker loop | [`Spares::retire`]: parked |
//! | `parked` | its thread sleeps on its parker | [`Spares::activate`]: active, unparked |
//!
//! Producers never see spares: they are not on the idle sleeper list and not in its counts
//! (`idle.rs`), so `notify_parked` neither counts nor wakes them; only an activation does.

use super::queue::Local;
use super::shared::{Notified, Shared};
use crate::loom::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use crate::loom::{lock, thread, Arc, Mutex};

pub(crate) struct Spares {
    /// Slot index of the first spare (the number of configured workers).
    first: usize,
    /// Spare slots.
    max: usize,
    /// Spares holding a run queue: started or woken, not retired. Changed under `pool`'s lock.
    active: AtomicUsize,
    pool: Mutex<Pool>,
    started: AtomicU64,
    retired: AtomicU64,
}

struct Pool {
    parked: Vec<usize>,
    unstarted: Vec<(usize, Local<Notified>)>,
    /// Threads of the spares started so far; shutdown joins them.
    threads: Vec<thread::JoinHandle<()>>,
    /// Shutdown began: no more activations.
    closed: bool,
}

/// What [`Spares::retire`] decided.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Retire {
    /// Still needed (an activation raced with the decision): keep running.
    Stay,
    /// Now in the parked list: park until activated or shut down.
    Parked,
}

impl Spares {
    pub(crate) fn new(first: usize, locals: Vec<Local<Notified>>) -> Spares {
        let max = locals.len();
        Spares {
            first,
            max,
            active: AtomicUsize::new(0),
            pool: Mutex::new(Pool {
                parked: Vec::with_capacity(max),
                // Reversed, so that `pop` starts the lowest slot first.
                unstarted: locals
                    .into_iter()
                    .enumerate()
                    .map(|(i, local)| (first + i, local))
                    .rev()
                    .collect(),
                threads: Vec::new(),
                closed: false,
            }),
            started: AtomicU64::new(0),
            retired: AtomicU64::new(0),
        }
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    pub(crate) fn is_spare(&self, index: usize) -> bool {
        index >= self.first
    }

    pub(crate) fn active(&self) -> usize {
        self.active.load(Acquire)
    }

    pub(crate) fn started(&self) -> u64 {
        self.started.load(Relaxed)
    }

    pub(crate) fn retired(&self) -> u64 {
        self.retired.load(Relaxed)
    }

    /// Hand-off step H4: if fewer than `needed` spares are active, wakes a parked spare or
    /// starts a new one. Returns `true` if one was activated.
    pub(crate) fn activate(&self, shared: &Arc<Shared>, needed: usize) -> bool {
        let mut pool = lock(&self.pool);
        if pool.closed || self.active.load(Relaxed) >= needed.min(self.max) {
            return false;
        }
        if let Some(index) = pool.parked.pop() {
            self.active.fetch_add(1, SeqCst);
            drop(pool);
            self.started.fetch_add(1, Relaxed);
            tracing::debug!(worker = index, "waking a spare worker");
            shared.unpark(index);
            return true;
        }
        let Some((index, local)) = pool.unstarted.pop() else {
            return false;
        };
        // Counted live before its thread exists, so a shutdown waits for it (under the lock:
        // shutdown closes the pool under it too, so no thread starts unseen by shutdown).
        shared.worker_started();
        self.active.fetch_add(1, SeqCst);
        match shared.threads.spawn(shared.clone(), index, local) {
            Ok(thread) => {
                pool.threads.push(thread);
                drop(pool);
                self.started.fetch_add(1, Relaxed);
                tracing::debug!(worker = index, "started a spare worker");
                true
            }
            Err(error) => {
                // The slot's deque went with the closure (it was empty): the slot stays unused.
                self.active.fetch_sub(1, SeqCst);
                drop(pool);
                shared.worker_exited();
                tracing::warn!(%error, worker = index, "could not start a spare worker");
                false
            }
        }
    }

    /// Retirement step R3: joins the parked list if the spare is idle (`idle`) or surplus (more
    /// active spares than `needed()` says). The caller has handed its deque back (R2).
    pub(crate) fn retire(&self, index: usize, idle: bool, needed: impl Fn() -> usize) -> Retire {
        let mut pool = lock(&self.pool);
        if !idle && self.active.load(Relaxed) <= needed() {
            return Retire::Stay;
        }
        self.active.fetch_sub(1, SeqCst);
        pool.parked.push(index);
        drop(pool);
        self.retired.fetch_add(1, Relaxed);
        tracing::trace!(worker = index, idle, "spare worker retired");
        Retire::Parked
    }

    /// `true` while spare `index` is in the parked list (R4: a wake-up that finds it gone was
    /// an activation).
    pub(crate) fn is_parked(&self, index: usize) -> bool {
        lock(&self.pool).parked.contains(&index)
    }

    /// Shutdown: no more activations; returns the threads started so far, to join.
    pub(crate) fn close(&self) -> Vec<thread::JoinHandle<()>> {
        let mut pool = lock(&self.pool);
        pool.closed = true;
        std::mem::take(&mut pool.threads)
    }
}

impl std::fmt::Debug for Spares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spares")
            .field("max", &self.max)
            .field("active", &self.active())
            .finish_non_exhaustive()
    }
}
