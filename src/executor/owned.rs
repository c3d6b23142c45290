//! The owned-task list: every live task of an executor, so shutdown can cancel them all.
//!
//! A task parked on a waker nobody will ever fire is referenced only by that waker; without this
//! list, shutdown could not drop its future and it would leak. The list is sharded (a slab per
//! shard behind its own mutex), and a task's shard comes from a hash of its address, so binds and
//! releases spread evenly over many shards whatever thread spawns or completes them. (Sharding by
//! spawning worker was measured to contend badly: with stealing, the other worker completes half
//! the tasks and fights the spawner for the same lock — 37% of `spawn_many_local` in mutexes.)
//! The critical sections are a few instructions and never run user code.
//!
//! # Protocol
//! 1. `bind` stores the task's `Task` reference in a free slot and records the slot in the task
//!    header; it fails once the list is closed (spawn after shutdown).
//! 2. `release` (task completion) takes the reference back out, if the slot still holds this task.
//! 3. `close_and_take_all` (shutdown) marks every shard closed and takes every reference out, in one
//!    critical section per shard; a concurrent `release` then finds its slot empty and does nothing.
//!
//! A task never bound (an unowned task, `unowned.rs`, or one refused at spawn) keeps the header's
//! initial `owner_slot`, [`UNBOUND`]: its `release` returns at once, without a lock.

use super::task::{Schedule, Task};
use crate::loom::atomic::Ordering::Relaxed;
use crate::loom::{lock, Mutex};
use crossbeam_utils::CachePadded;

/// The `owner_slot` of a task not in the list: the header's initial value (`task/raw.rs`).
pub(crate) const UNBOUND: usize = usize::MAX;

pub(crate) struct OwnedTasks<S: 'static> {
    shards: Box<[CachePadded<Mutex<Shard<S>>>]>,
}

struct Shard<S: 'static> {
    slots: Vec<Option<Task<S>>>,
    free: Vec<usize>,
    closed: bool,
}

impl<S: Schedule> OwnedTasks<S> {
    /// `shards` is rounded up to a power of two.
    pub(crate) fn new(shards: usize) -> OwnedTasks<S> {
        let shards = shards.max(1).next_power_of_two();
        OwnedTasks {
            shards: (0..shards)
                .map(|_| {
                    CachePadded::new(Mutex::new(Shard {
                        slots: Vec::new(),
                        free: Vec::new(),
                        closed: false,
                    }))
                })
                .collect(),
        }
    }

    /// Step 1.
    pub(crate) fn bind(&self, task: Task<S>) -> Result<(), Task<S>> {
        let address = task.header() as *const _ as usize;
        // Fibonacci hashing of the address: its low bits are alignment, its high bits shared.
        let hash = (address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        // Loom replays executions and needs them deterministic: addresses are not.
        let shard_index = if cfg!(loom) {
            0
        } else {
            hash as usize & (self.shards.len() - 1)
        };
        let mut shard = lock(&self.shards[shard_index]);
        if shard.closed {
            return Err(task);
        }
        let slot = match shard.free.pop() {
            Some(slot) => slot,
            None => {
                shard.slots.push(None);
                shard.slots.len() - 1
            }
        };
        // Relaxed: `release` reads it on whichever thread completes the task, which received the
        // task through a queue (release/acquire), after this store.
        task.header()
            .owner_slot
            .store(slot * self.shards.len() + shard_index, Relaxed);
        shard.slots[slot] = Some(task);
        Ok(())
    }

    /// Step 2.
    #[inline]
    pub(crate) fn release(&self, task: &Task<S>) -> Option<Task<S>> {
        let id = task.header().owner_slot.load(Relaxed);
        if id == UNBOUND {
            // Never bound: an unowned task, or one refused at spawn.
            return None;
        }
        self.release_bound(task, id)
    }

    #[inline(never)]
    fn release_bound(&self, task: &Task<S>, id: usize) -> Option<Task<S>> {
        let (slot, shard_index) = (id / self.shards.len(), id % self.shards.len());
        let mut shard = lock(self.shards.get(shard_index)?);
        let entry = shard.slots.get_mut(slot)?;
        if !entry.as_ref().is_some_and(|t| t.ptr_eq(task)) {
            return None;
        }
        let owned = entry.take();
        shard.free.push(slot);
        owned
    }

    /// Step 3.
    pub(crate) fn close_and_take_all(&self) -> Vec<Task<S>> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = lock(shard);
            shard.closed = true;
            all.extend(shard.slots.drain(..).flatten());
            shard.free.clear();
        }
        all
    }

    /// Wakes every task in the list (`Task::wake_by_broadcast`): idle ones are queued, running
    /// ones polled once more. Returns how many tasks the list held.
    ///
    /// For a condition that tasks check on every poll but register no waker for (the scheduler's
    /// tokio bridge: "the handler runtime is gone"). The condition's writer sets it first, then
    /// calls this; a task whose poll read it unset is then either idle, and queued here, or
    /// running, and marked `NOTIFIED` by this wake, so it is polled again: each wake is a write
    /// (an RMW) of the task's state word after the condition's, and the poll that follows begins
    /// with an RMW of that word, so it reads the condition set (task `state.rs`, "Broadcast
    /// wake"). A task spawned after this call sees it at
    /// its first poll; one spawned during it is bound (step 1) before its first poll, so either
    /// this call wakes it or its first poll starts after the write. Checked by
    /// `loom_a_condition_set_before_waking_every_owned_task_is_seen`.
    ///
    /// The shard lock is held while the wakes queue their tasks: queueing runs no user code and
    /// never takes a shard lock (the list's own reference keeps every task alive through it).
    pub(crate) fn wake_all(&self) -> usize {
        let mut woken = 0;
        for shard in self.shards.iter() {
            let shard = lock(shard);
            for task in shard.slots.iter().flatten() {
                task.wake_by_broadcast();
                woken += 1;
            }
        }
        woken
    }

    /// Number of live tasks (takes every shard's lock; for diagnostics and tests).
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let shard = lock(s);
                shard.slots.len() - shard.free.len()
            })
            .sum()
    }
}
