//! A worker's *next* slot: the one task its owner runs next, in front of its deque, which no
//! thief takes but the monitor can still hand over.
//!
//! # Why
//! A message hop wakes one process on the sender's worker, and that worker runs it as soon as
//! the current poll returns (`worker.rs`, `push_local`). Through crossbeam's deque the pop of
//! that lone task is a `SeqCst` fence plus a CAS of the deque's front (the thieves' end: the
//! last task is contested), a sixth of a ring hop's atomics (`docs/bench-messages.md`). Tokio's
//! LIFO slot costs nothing there because no other thread may look at it; ours cannot be quite
//! that private, or a task woken by a poll that then blocks would wait for that poll: the monitor
//! hands a slow or stuck worker's queued work to the others (`monitor.rs`, "Nudge",
//! "Hand-off"). So the slot is shared, but the owner's side writes with plain stores and takes
//! with one CAS.
//!
//! # Who may take the slot
//! The owner (its pops, its fairness take, `block_in_place`, a spare's retirement), and whoever
//! hands the worker's whole queue over: the monitor's nudge and hand-off, shutdown's drain. Not
//! thieves, and a parking searcher's sweep does not look at it. Two processes asking each other
//! (or a ring's token) live in this slot, one after the other; a searching worker that took it
//! moved the pair across cores, which made `ask_between` bimodal when thieves could
//! (`docs/bench-messages.md`). Nothing is stranded by it: only the owner fills the slot, from its
//! own thread inside a poll, and it looks at the slot before it may park; while that poll runs,
//! the monitor's nudge (a slow poll) or hand-off (a stuck one) moves the slot's task to the
//! global injector with the producers' protocol, where every worker finds it.
//!
//! # Protocol 11: the next slot
//! | state | meaning | who leaves it |
//! |---|---|---|
//! | `EMPTY` | no task; only the owner writes the value | the owner (push) |
//! | `FULL` | a task, published by the owner's `Release` store | the owner (pop: CAS → `EMPTY`) or one hand-over (CAS → `TAKING`) |
//! | `TAKING` | a hand-over is reading the task out | that hand-over (`Release` store → `EMPTY`) |
//!
//! 1. **Push (owner)**: reads the state (`Acquire`). `EMPTY`: writes the task, then stores
//!    `FULL` (`Release`). Otherwise the slot is taken (or being emptied by a hand-over): the task
//!    goes to the deque instead (the caller's).
//! 2. **Pop (owner)**: `FULL` → `EMPTY` by CAS (`Acquire`), then reads the task.
//! 3. **Hand-over (any thread)**: `FULL` → `TAKING` by CAS (`Acquire`), reads the task, stores
//!    `EMPTY` (`Release`).
//!
//! Each task is taken once: a pushed task leaves the slot only by a CAS from `FULL`, and of the
//! CASes that read one `FULL` only one succeeds. No read of the value races a write: only the
//! owner writes it, and only in `EMPTY`, which it reads (`Acquire`) after the last hand-over's
//! `Release` store (so after that hand-over's read); a pop reads the owner's own write, a
//! hand-over reads it after the `Acquire` CAS that saw its `Release` `FULL`. Checked by
//! `loom_next_slot_hands_each_task_to_one_taker` (below), and under every executor model, which
//! run on the real slot (`queue.rs`); the nudge's hand-over by
//! `loom_lone_task_behind_a_blocked_poll_runs_after_the_nudge` (`executor/tests/loom_park.rs`).

use crate::loom::atomic::{AtomicU8, Ordering::*};
use crate::loom::UnsafeCell;
use std::mem::MaybeUninit;

const EMPTY: u8 = 0;
const FULL: u8 = 1;
const TAKING: u8 = 2;

/// One task's slot (module docs).
pub(crate) struct NextSlot<T> {
    state: AtomicU8,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value is handed from the owner to one taker at a time (protocol 11), like a
// queue's item: shareable when `T` may be sent.
unsafe impl<T: Send> Sync for NextSlot<T> {}
// SAFETY: owning the slot owns at most one `T`.
unsafe impl<T: Send> Send for NextSlot<T> {}

impl<T> NextSlot<T> {
    pub(crate) fn new() -> NextSlot<T> {
        NextSlot {
            state: AtomicU8::new(EMPTY),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Protocol 11, step 1 — the owner only. Hands `task` back if the slot is not empty.
    #[inline]
    pub(crate) fn push(&self, task: T) -> Result<(), T> {
        if self.state.load(Acquire) != EMPTY {
            return Err(task);
        }
        // SAFETY: `EMPTY`, and only the owner (this thread) leaves it: no one reads the value
        // until the store below, and the last hand-over's read happened before its `EMPTY` store,
        // which the load above synchronized with.
        self.value.with_mut(|value| unsafe { (*value).write(task) });
        self.state.store(FULL, Release);
        Ok(())
    }

    /// Protocol 11, step 2 — the owner only.
    #[inline]
    pub(crate) fn pop(&self) -> Option<T> {
        if self.state.load(Relaxed) != FULL
            || self
                .state
                .compare_exchange(FULL, EMPTY, Acquire, Relaxed)
                .is_err()
        {
            return None;
        }
        // SAFETY: this CAS took the value out of `FULL`, so it is initialized and no one else
        // reads it; only the owner (this thread) writes it, in a later push.
        Some(
            self.value
                .with(|value| unsafe { (*value).assume_init_read() }),
        )
    }

    /// Protocol 11, step 3 — a hand-over, from any thread (never a thief: module docs).
    #[inline]
    pub(crate) fn steal(&self) -> Option<T> {
        if self.state.load(Relaxed) != FULL
            || self
                .state
                .compare_exchange(FULL, TAKING, Acquire, Relaxed)
                .is_err()
        {
            return None;
        }
        // SAFETY: this CAS read the owner's `Release` store of `FULL`, which followed its write:
        // the value is initialized, and in `TAKING` no one else reads or writes it.
        let task = self
            .value
            .with(|value| unsafe { (*value).assume_init_read() });
        self.state.store(EMPTY, Release);
        Some(task)
    }

    /// `true` if a task waits in the slot.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.state.load(Acquire) == FULL
    }
}

impl<T> Drop for NextSlot<T> {
    fn drop(&mut self) {
        if self.state.load(Relaxed) == FULL {
            // SAFETY: `&mut self`: no one else holds the slot, and `FULL` means initialized.
            self.value
                .with_mut(|value| unsafe { (*value).assume_init_drop() });
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_task_in_and_out_and_a_full_slot_refuses() {
        let slot = NextSlot::new();
        assert!(!slot.is_full());
        slot.push(String::from("a")).unwrap();
        assert!(slot.is_full());
        assert_eq!(slot.push(String::from("b")), Err(String::from("b")));
        assert_eq!(slot.pop().as_deref(), Some("a"));
        assert_eq!(slot.pop(), None);
        slot.push(String::from("c")).unwrap();
        assert_eq!(slot.steal().as_deref(), Some("c"));
        assert_eq!(slot.steal(), None);
        slot.push(String::from("dropped with the slot")).unwrap();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::loom::model::model;
    use crate::loom::{thread, Arc};

    /// Protocol 11: the owner pushes two tasks (the second after popping or losing the first)
    /// while a hand-over takes: every task is taken exactly once, and loom's cell checks that no
    /// read of the value races a write.
    #[test]
    fn loom_next_slot_hands_each_task_to_one_taker() {
        model(|| {
            let slot = Arc::new(NextSlot::new());
            let hand_over = {
                let slot = slot.clone();
                thread::spawn(move || {
                    let mut stolen = Vec::new();
                    for _ in 0..2 {
                        stolen.extend(slot.steal());
                    }
                    stolen
                })
            };
            let mut taken = Vec::new();
            let mut refused = Vec::new();
            for task in [1u32, 2] {
                if let Err(task) = slot.push(task) {
                    refused.push(task);
                }
                taken.extend(slot.pop());
            }
            taken.extend(hand_over.join().unwrap());
            taken.extend(refused);
            taken.extend(slot.pop());
            taken.sort_unstable();
            assert_eq!(taken, [1, 2]);
        });
    }
}
