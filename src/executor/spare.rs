//! The spare-worker pool: extra worker threads that hold a run queue only while configured
//! workers are stuck (`monitor.rs` has the protocols, "Hand-off" and "Retirement").
//!
//! Spares occupy worker slots `first..first + max` (after the configured workers): their deques
//! and counters exist from the start, their threads are started on first use. A spare is in
//! exactly one of four places, each change made under the pool lock together with the
//! `active` count:
//!
//! | place | meaning | leaves it by |
//! |---|---|---|
//! | `unstarted` (holds its deque's owner end) | no thread | [`Spares::activate`]: thread started, active |
//! | active (in no list) | runs the worker loop | [`Spares::retire`]: parked |
//! | `parked` | its thread sleeps on its parker | [`Spares::activate`]: active, unparked; or [`Spares::expire`]: exiting |
//! | exiting (in no list) | its thread leaves the loop, idle for the keep-alive | [`Spares::exited`]: `unstarted`, its deque handed back |
//!
//! Producers never see spares: they are not on the idle sleeper list and not in its counts
//! (`idle.rs`), so `notify_parked` neither counts nor wakes them; only an activation does.
//!
//! # Keep-alive (retirement step R5, `monitor.rs`)
//! A parked spare that no activation wakes within the keep-alive ([`DEFAULT_SPARE_KEEP_ALIVE`],
//! 10 s as tokio's blocking pool; `Builder::spare_keep_alive`) ends its thread, so that after
//! a burst of blocking the process goes back to its configured threads:
//! 1. its park times out; under the pool lock, if it is still in `parked` (no activation took
//!    it meanwhile — one that did made it active, and it runs on), it leaves `parked`: exiting;
//! 2. its thread leaves the worker loop (its deque is empty: it was handed back before it
//!    parked) and, under the pool lock, puts its deque's owner end back in `unstarted`, where
//!    the next activation of the slot starts a new thread with it.
//!
//! An activation never takes an exiting spare (it is in no list), so one slot never has two
//! threads in its loop; it may find no spare to take while one exits and try again at the
//! monitor's next tick. Checked by `loom_a_spare_expiring_as_it_is_activated_runs_once`
//! (`executor/tests/loom_monitor.rs`).
//!
//! # Below the shared state
//! The pool is part of the state all workers share (`shared.rs`, through the monitor), so it
//! cannot name that state: it is generic over the task type `T` its deques hold, and an
//! activation reaches the executor through [`SpareHost`], which `start.rs` implements.

use super::queue::Local;
use crate::loom::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use crate::loom::{lock, thread, Mutex};
use std::time::Duration;

/// How long a retired spare's thread sleeps unused before it ends (module docs, "Keep-alive").
pub const DEFAULT_SPARE_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// What [`Spares::activate`] needs from the executor: waking a parked spare, counting a new
/// spare's thread live (shutdown waits for it) and starting it.
pub(crate) trait SpareHost<T> {
    /// Unparks worker slot `index`.
    fn unpark(&self, index: usize);

    /// A spare's thread is about to start: count it live.
    fn worker_started(&self);

    /// A worker's thread is gone (here: a spare's thread that could not start).
    fn worker_exited(&self);

    /// Starts the thread of worker slot `index`, which runs the worker loop on `local`.
    fn start(&self, index: usize, local: Local<T>) -> std::io::Result<thread::JoinHandle<()>>;
}

/// The spare-worker pool; `T` is the task type the spares' deques hold.
pub(crate) struct Spares<T> {
    /// Slot index of the first spare (the number of configured workers).
    first: usize,
    /// Spare slots.
    max: usize,
    /// Spares holding a run queue: started or woken, not retired. Changed under `pool`'s lock.
    active: AtomicUsize,
    pool: Mutex<Pool<T>>,
    /// How long a parked spare waits for an activation before its thread ends.
    keep_alive: Duration,
    started: AtomicU64,
    retired: AtomicU64,
    /// Spare threads running (active, parked or exiting): started and not yet ended.
    threads: AtomicUsize,
    /// Spare threads ended by their keep-alive.
    expired: AtomicU64,
}

struct Pool<T> {
    parked: Vec<usize>,
    unstarted: Vec<(usize, Local<T>)>,
    /// The thread of each slot started so far, by slot; shutdown joins them. A slot's handle is
    /// replaced (the old thread detached: it has left the loop) when a new thread starts there.
    handles: Vec<(usize, thread::JoinHandle<()>)>,
    /// Shutdown began: no more activations.
    closed: bool,
}

/// What [`Spares::expire`] decided.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Expire {
    /// An activation took the spare meanwhile: it runs on, active.
    Stay,
    /// No longer parked: its thread ends (and hands its deque back: [`Spares::exited`]).
    Exit,
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

impl<T> Spares<T> {
    pub(crate) fn new(first: usize, locals: Vec<Local<T>>, keep_alive: Duration) -> Spares<T> {
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
                handles: Vec::new(),
                closed: false,
            }),
            keep_alive,
            started: AtomicU64::new(0),
            retired: AtomicU64::new(0),
            threads: AtomicUsize::new(0),
            expired: AtomicU64::new(0),
        }
    }

    /// Spare threads ended by their keep-alive so far.
    pub(crate) fn expired(&self) -> u64 {
        self.expired.load(Relaxed)
    }

    /// How long a parked spare waits to be activated before its thread ends.
    pub(crate) fn keep_alive(&self) -> Duration {
        self.keep_alive
    }

    /// Spare threads running now.
    pub(crate) fn threads(&self) -> usize {
        self.threads.load(Relaxed)
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
    pub(crate) fn activate(&self, host: &impl SpareHost<T>, needed: usize) -> bool {
        let mut pool = lock(&self.pool);
        if pool.closed || self.active.load(Relaxed) >= needed.min(self.max) {
            return false;
        }
        if let Some(index) = pool.parked.pop() {
            self.active.fetch_add(1, SeqCst);
            drop(pool);
            self.started.fetch_add(1, Relaxed);
            tracing::debug!(worker = index, "waking a spare worker");
            host.unpark(index);
            return true;
        }
        let Some((index, local)) = pool.unstarted.pop() else {
            return false;
        };
        // Counted live before its thread exists, so a shutdown waits for it (under the lock:
        // shutdown closes the pool under it too, so no thread starts unseen by shutdown).
        host.worker_started();
        self.active.fetch_add(1, SeqCst);
        match host.start(index, local) {
            Ok(thread) => {
                self.threads.fetch_add(1, Relaxed);
                // The slot's previous thread (if any) has left the loop: detached, not joined
                // under the lock.
                let previous = match pool.handles.iter().position(|(slot, _)| *slot == index) {
                    Some(at) => Some(std::mem::replace(&mut pool.handles[at].1, thread)),
                    None => {
                        pool.handles.push((index, thread));
                        None
                    }
                };
                drop(pool);
                drop(previous);
                self.started.fetch_add(1, Relaxed);
                tracing::debug!(worker = index, "started a spare worker");
                true
            }
            Err(error) => {
                // The slot's deque went with the closure (it was empty): the slot stays unused.
                self.active.fetch_sub(1, SeqCst);
                drop(pool);
                host.worker_exited();
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

    /// Retirement step R3b (`monitor.rs`): spare `index`, just parked, saw a task in the global
    /// injector that a hand-off may have left to it. It leaves the parked list and is active
    /// again — unless an activation took it first, which made it active already.
    pub(crate) fn unretire(&self, index: usize) {
        let mut pool = lock(&self.pool);
        if let Some(at) = pool.parked.iter().position(|&parked| parked == index) {
            pool.parked.swap_remove(at);
            self.active.fetch_add(1, SeqCst);
            drop(pool);
            // As an activation of a parked spare is counted: `started - retired == active`.
            self.started.fetch_add(1, Relaxed);
            tracing::trace!(worker = index, "spare worker back: work came as it retired");
        }
    }

    /// `true` while spare `index` is in the parked list (R4: a wake-up that finds it gone was
    /// an activation).
    pub(crate) fn is_parked(&self, index: usize) -> bool {
        lock(&self.pool).parked.contains(&index)
    }

    /// Keep-alive step 1 (module docs): spare `index`'s park timed out. It leaves the parked list
    /// and exits, unless an activation took it meanwhile.
    pub(crate) fn expire(&self, index: usize) -> Expire {
        let mut pool = lock(&self.pool);
        match pool.parked.iter().position(|&parked| parked == index) {
            Some(at) => {
                pool.parked.swap_remove(at);
                self.expired.fetch_add(1, Relaxed);
                Expire::Exit
            }
            None => Expire::Stay,
        }
    }

    /// Keep-alive step 2: the exiting spare `index` left the loop; its deque (empty) goes back
    /// to `unstarted`, for the slot's next thread.
    pub(crate) fn exited(&self, index: usize, local: Local<T>) {
        let mut pool = lock(&self.pool);
        if !pool.closed {
            pool.unstarted.push((index, local));
        }
        drop(pool);
        tracing::debug!(worker = index, "a spare worker's thread ended (keep-alive)");
    }

    /// A spare's thread left the worker loop for good (keep-alive or shutdown).
    pub(crate) fn thread_ended(&self) {
        self.threads.fetch_sub(1, Relaxed);
    }

    /// Shutdown: no more activations; returns the threads started so far, to join, with their
    /// slots.
    pub(crate) fn close(&self) -> Vec<(usize, thread::JoinHandle<()>)> {
        let mut pool = lock(&self.pool);
        pool.closed = true;
        std::mem::take(&mut pool.handles)
    }
}

impl<T> std::fmt::Debug for Spares<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spares")
            .field("max", &self.max)
            .field("active", &self.active())
            .finish_non_exhaustive()
    }
}
