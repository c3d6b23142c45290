//! The sentinel slot: one sentinel exists while any handler waits, and none otherwise.
//!
//! The bridge (`bridge.rs`) needs a sentinel task on the handler runtime only while some async
//! handler waits on the scheduler's executor; a sentinel that lived as long as the scheduler
//! would be a tokio task that never ends (it would show in the runtime's `num_alive_tasks`, and
//! keep the scheduler's executor reachable from the runtime after the scheduler is gone). So
//! the slot counts the waiting handlers and keeps a sentinel exactly while the count is above
//! zero.
//!
//! # Protocol
//! 1. A handler starts waiting: `pending.fetch_add(1)`. The one that moved it from 0 takes the
//!    lock and, unless the slot holds a live sentinel, makes one.
//! 2. A handler stops waiting: `pending.fetch_sub(1)`. The one that moved it to 0 takes the lock
//!    and, if `pending` is *still* 0, empties the slot (dropping a sentinel disarms it).
//!
//! Only the two edges take the lock, so a burst of waiting handlers pays one atomic add and one
//! subtraction each, and one sentinel. Nothing is left unguarded: under the lock, step 2 empties
//! the slot only while the count reads 0, and a handler that raised it from 0 afterwards takes
//! the lock after (it has not made its sentinel yet, or it would hold the lock now) and makes
//! one; a step 2 that finds the count raised again leaves the sentinel to the handler that
//! raised it. And no sentinel outlives its handlers: the last step 2 of a burst either empties
//! the slot or found the count raised by a handler whose own step 2 comes later. Checked by
//! `loom_a_handler_starting_to_wait_as_the_last_one_finishes_keeps_a_sentinel` and
//! `loom_the_last_two_handlers_finishing_leave_no_sentinel`.

use crate::loom::atomic::{AtomicUsize, Ordering::*};
use crate::loom::{lock, Mutex};

/// Keeps a sentinel `S` while handlers wait (module docs).
pub(crate) struct SentinelSlot<S> {
    pending: AtomicUsize,
    sentinel: Mutex<Option<S>>,
}

impl<S> SentinelSlot<S> {
    pub(crate) fn new() -> Self {
        SentinelSlot {
            pending: AtomicUsize::new(0),
            sentinel: Mutex::new(None),
        }
    }

    /// Step 1: a handler starts waiting. `make` makes a sentinel; `is_live` tells whether one
    /// made earlier is still there (a runtime that shut down dropped it).
    pub(crate) fn enter(&self, make: impl FnOnce() -> S, is_live: impl FnOnce(&S) -> bool) {
        if self.pending.fetch_add(1, AcqRel) == 0 {
            let mut slot = lock(&self.sentinel);
            if !slot.as_ref().is_some_and(is_live) {
                *slot = Some(make());
            }
        }
    }

    /// Step 2: a handler stops waiting (it completed, or was dropped).
    pub(crate) fn exit(&self) {
        if self.pending.fetch_sub(1, AcqRel) == 1 {
            let mut slot = lock(&self.sentinel);
            if self.pending.load(Acquire) == 0 {
                // Dropped after the lock is released: dropping a sentinel may wake its task.
                let gone = slot.take();
                drop(slot);
                drop(gone);
            }
        }
    }

    /// Handlers waiting now (for tests and diagnostics).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Acquire)
    }

    /// Whether the slot holds a sentinel (for tests).
    #[cfg(test)]
    pub(crate) fn has_sentinel(&self) -> bool {
        lock(&self.sentinel).is_some()
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::*;
    use crate::loom::model::model;
    use crate::loom::{thread, Arc};

    #[test]
    fn loom_a_handler_starting_to_wait_as_the_last_one_finishes_keeps_a_sentinel() {
        model(|| {
            let slot = Arc::new(SentinelSlot::<u8>::new());
            slot.enter(|| 1, |_| true);
            let finishing = {
                let slot = slot.clone();
                thread::spawn(move || slot.exit())
            };
            slot.enter(|| 2, |_| true);
            finishing.join().unwrap();
            assert_eq!(slot.pending(), 1);
            assert!(slot.has_sentinel(), "a waiting handler has a sentinel");
            slot.exit();
            assert!(!slot.has_sentinel(), "no handler waits: no sentinel");
        });
    }

    #[test]
    fn loom_the_last_two_handlers_finishing_leave_no_sentinel() {
        model(|| {
            let slot = Arc::new(SentinelSlot::<u8>::new());
            slot.enter(|| 1, |_| true);
            slot.enter(|| 2, |_| true);
            let finishing = {
                let slot = slot.clone();
                thread::spawn(move || slot.exit())
            };
            slot.exit();
            finishing.join().unwrap();
            assert_eq!(slot.pending(), 0);
            assert!(!slot.has_sentinel());
        });
    }
}

#[cfg(all(test, not(loom)))]
mod unit_tests {
    use super::*;

    #[test]
    fn a_sentinel_exists_exactly_while_handlers_wait() {
        let slot = SentinelSlot::<u32>::new();
        slot.enter(|| 1, |_| true);
        slot.enter(|| unreachable!("one sentinel per burst"), |_| true);
        assert_eq!((slot.pending(), slot.has_sentinel()), (2, true));
        slot.exit();
        assert!(slot.has_sentinel(), "a handler still waits");
        slot.exit();
        assert_eq!((slot.pending(), slot.has_sentinel()), (0, false));
    }

    #[test]
    fn a_dead_sentinel_is_replaced_by_the_next_burst_and_a_live_one_kept() {
        let slot = SentinelSlot::<u32>::new();
        // The count leaves 0 with a sentinel still in the slot only when a step 2 lost the race
        // (module docs); set that up directly.
        *lock(&slot.sentinel) = Some(1);
        slot.enter(|| 2, |&sentinel| sentinel != 1);
        assert_eq!(
            *lock(&slot.sentinel),
            Some(2),
            "sentinel 1 was dead: replaced"
        );
        slot.exit();
        *lock(&slot.sentinel) = Some(3);
        slot.enter(|| unreachable!("sentinel 3 is live"), |_| true);
        assert_eq!(*lock(&slot.sentinel), Some(3));
        slot.exit();
        assert!(!slot.has_sentinel());
    }
}
