//! The process table's free list: the indices of released slots, handed out again by claims.
//!
//! # Why batches
//! Spawning and finishing usually happen on different threads — a request thread or a parent
//! process spawns, the workers finish — so a list shared index by index makes every spawn and
//! every finish touch the same lines (the list head, and the released cell that links to the next
//! entry), last written by the other core. So each thread keeps a cache: the indices it released
//! and a batch it is claiming from, and trades them with the shared pool [`BATCH`] at a time under
//! a mutex: one lock, and one shared line, per `BATCH` spawns or finishes.
//!
//! # Protocol
//! 1. **Release** `index`: push it onto this thread's `released` batch; a full batch moves to the
//!    pool (one lock).
//! 2. **Claim**: pop from this thread's `claiming` batch; else from its own `released` batch (a
//!    thread that both finishes and spawns — a process tree on a worker — reuses its own slots,
//!    still hot in its cache, without the pool); else take a whole batch from the pool (one
//!    lock); else there is none, and the table hands out a fresh index.
//! 3. A thread's cache serves one pool at a time. Meeting another pool (the thread uses a
//!    second scheduler) or exiting, it gives everything it holds back to its pool first. So every
//!    released index sits in exactly one place — one thread's cache or the pool — until one claim
//!    takes it out: no index is handed out twice, none is lost.
//!
//! The price: up to `2 × BATCH − 1` free slots per thread are invisible to other threads, which
//! take fresh indices instead, so the table's high-water mark can exceed the live peak by that
//! much per thread that spawns or finishes processes.
//!
//! The loom model `loom_free_list_never_hands_a_slot_to_two_live_processes`
//! (`tests/loom_table.rs`) claims and releases on two threads with `BATCH = 1`, so every index
//! crosses the pool, and the threads' exit gives their caches back.

use crate::loom::{lock, Arc, Mutex};
use std::cell::RefCell;

/// Indices moved between a thread's cache and the pool at a time. One under loom, so every index
/// crosses the pool in the models.
const BATCH: usize = if cfg!(loom) { 1 } else { 32 };

/// Emptied batches the pool keeps for reuse ([`Batches::empty`]): enough for a few threads
/// trading batches, a bounded 4 KiB at most.
const MAX_EMPTY: usize = 32;

/// The free list of one process table.
pub(crate) struct FreeList {
    pool: Arc<Pool>,
}

/// What no thread caches: full batches (and whatever exiting threads gave back).
#[derive(Default)]
struct Pool {
    batches: Mutex<Batches>,
}

/// The pool's contents, under its one lock.
#[derive(Default)]
struct Batches {
    /// Batches of free indices.
    full: Vec<Vec<u32>>,
    /// Emptied batches, their capacity kept: a claim leaves its drained batch here and a release
    /// takes one for its next batch, under the lock each already takes. Without them, a thread
    /// that only releases (a worker finishing processes) allocated a batch every [`BATCH`]
    /// finishes, and a thread that only claims (a spawner outside the workers) freed them.
    empty: Vec<Vec<u32>>,
}

/// One thread's share (protocol steps 1–3).
struct Cache {
    /// The pool this cache serves, once the thread has used one.
    pool: Option<Arc<Pool>>,
    claiming: Vec<u32>,
    released: Vec<u32>,
}

impl Cache {
    const EMPTY: Cache = Cache {
        pool: None,
        claiming: Vec::new(),
        released: Vec::new(),
    };

    /// Step 3: serve `pool`, giving what belongs to another pool back to it first.
    fn serve(&mut self, pool: &Arc<Pool>) {
        if !self.pool.as_ref().is_some_and(|own| Arc::ptr_eq(own, pool)) {
            self.give_back();
            self.pool = Some(pool.clone());
        }
    }

    /// Step 3: everything back to the pool this cache serves.
    fn give_back(&mut self) {
        let Some(pool) = self.pool.take() else {
            return;
        };
        let (claiming, released) = (
            std::mem::take(&mut self.claiming),
            std::mem::take(&mut self.released),
        );
        let mut batches = lock(&pool.batches);
        batches
            .full
            .extend([claiming, released].into_iter().filter(|b| !b.is_empty()));
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.give_back();
    }
}

crate::loom::thread_local_const! {
    /// This thread's cache (module docs).
    static CACHE: RefCell<Cache> = RefCell::new(Cache::EMPTY);
}

impl FreeList {
    pub(crate) fn new() -> FreeList {
        FreeList {
            pool: Arc::new(Pool::default()),
        }
    }

    /// Step 2: a released index, if any is available to this thread.
    pub(crate) fn claim(&self) -> Option<usize> {
        let claimed = CACHE.try_with(|cache| {
            let mut cache = cache.borrow_mut();
            cache.serve(&self.pool);
            if let Some(index) = cache.claiming.pop().or_else(|| cache.released.pop()) {
                return Some(index);
            }
            let mut batches = lock(&self.pool.batches);
            let batch = batches.full.pop()?;
            let drained = std::mem::replace(&mut cache.claiming, batch);
            if drained.capacity() >= BATCH && batches.empty.len() < MAX_EMPTY {
                batches.empty.push(drained);
            }
            drop(batches);
            cache.claiming.pop()
        });
        match claimed {
            Ok(index) => index.map(|i| i as usize),
            // The thread is exiting and its cache is gone: straight from the pool.
            Err(_) => {
                let mut batches = lock(&self.pool.batches);
                let batch = batches.full.last_mut()?;
                let index = batch.pop();
                if batch.is_empty() {
                    batches.full.pop();
                }
                index.map(|i| i as usize)
            }
        }
    }

    /// Step 1: `index` is free.
    pub(crate) fn release(&self, index: usize) {
        let index = u32::try_from(index).expect("slot indices fit in 32 bits");
        let cached = CACHE.try_with(|cache| {
            let mut cache = cache.borrow_mut();
            cache.serve(&self.pool);
            cache.released.push(index);
            if cache.released.len() >= BATCH {
                let mut batches = lock(&self.pool.batches);
                let next = batches
                    .empty
                    .pop()
                    .unwrap_or_else(|| Vec::with_capacity(BATCH));
                let full = std::mem::replace(&mut cache.released, next);
                batches.full.push(full);
            }
        });
        if cached.is_err() {
            // The thread is exiting and its cache is gone: straight to the pool.
            lock(&self.pool.batches).full.push(vec![index]);
        }
    }

    /// Forgets every index in the pool: the table is going away (thread caches still holding
    /// some drop them with their last reference to the pool).
    pub(crate) fn clear(&self) {
        let mut batches = lock(&self.pool.batches);
        batches.full.clear();
        batches.empty.clear();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A spawner that only claims and a worker that only releases trade the same batches:
    /// the claimer's drained batch is the releaser's next one.
    #[test]
    fn drained_batches_are_reused_by_releases() {
        let list = FreeList::new();
        let releaser_batch = |list: &FreeList| {
            for index in 0..BATCH {
                list.release(index);
            }
        };
        let claim_all = |list: &FreeList| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    let claimed: Vec<_> = std::iter::from_fn(|| list.claim()).collect();
                    assert_eq!(claimed.len(), BATCH, "exactly the released batch");
                });
            })
        };
        // The claiming thread's cache goes back to the pool when it exits, so run two rounds
        // on one claiming thread: its second claim leaves the first batch's vector behind.
        releaser_batch(&list);
        releaser_batch(&list);
        std::thread::scope(|s| {
            s.spawn(|| {
                let claimed: Vec<_> = std::iter::from_fn(|| list.claim()).collect();
                assert_eq!(claimed.len(), 2 * BATCH, "both batches, each index once");
            });
        });
        let empties = lock(&list.pool.batches).empty.len();
        assert_eq!(empties, 1, "the first batch, drained, kept for reuse");
        releaser_batch(&list);
        assert_eq!(
            lock(&list.pool.batches).empty.len(),
            0,
            "the next full batch went out in the kept vector"
        );
        claim_all(&list);
    }
}
