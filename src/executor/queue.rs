//! Run queues: a thin, loom-swappable wrapper over crossbeam-deque.
//!
//! | type | producers | consumers | order |
//! |---|---|---|---|
//! | [`Local`] | its worker | its worker (`pop`: the next slot, then the deque's newest); thieves via [`Stealer`] (the deque's oldest half, never the slot); a hand-over of the whole queue via [`Stealer::take`] (the deque, then the slot) | newest first for the owner |
//! | [`Injector`] | anyone | anyone, in batches | FIFO |
//!
//! crossbeam-deque uses core atomics directly, so loom cannot look inside it. Under `cfg(loom)`
//! each deque and injector is a loom `Mutex<VecDeque>` with the same interface and the same batch
//! semantics, which lets the models explore every interleaving of the code *around* the queues.
//! A worker's next slot (`next_slot.rs`, protocol 11) is built on the crate's atomics: the models
//! run the real one.

#[cfg(not(loom))]
mod imp {
    use crossbeam_deque::Steal;

    /// The owner's end of a worker's deque.
    pub(crate) struct Deque<T>(crossbeam_deque::Worker<T>);

    /// Everyone else's end of a worker's deque.
    pub(crate) struct DequeStealer<T>(crossbeam_deque::Stealer<T>);

    /// A multi-producer, multi-consumer FIFO queue.
    pub(crate) struct Injector<T>(crossbeam_deque::Injector<T>);

    fn retry<T>(mut f: impl FnMut() -> Steal<T>) -> Option<T> {
        loop {
            match f() {
                Steal::Success(task) => return Some(task),
                Steal::Empty => return None,
                Steal::Retry => std::hint::spin_loop(),
            }
        }
    }

    impl<T> Deque<T> {
        pub(crate) fn new() -> Deque<T> {
            Deque(crossbeam_deque::Worker::new_lifo())
        }

        pub(crate) fn stealer(&self) -> DequeStealer<T> {
            DequeStealer(self.0.stealer())
        }

        pub(crate) fn push(&self, task: T) {
            self.0.push(task);
        }

        /// The newest task.
        pub(crate) fn pop(&self) -> Option<T> {
            self.0.pop()
        }

        pub(crate) fn len(&self) -> usize {
            self.0.len()
        }
    }

    impl<T> DequeStealer<T> {
        /// The oldest task.
        pub(crate) fn steal(&self) -> Option<T> {
            retry(|| self.0.steal())
        }

        /// Moves about half of the queue, at most `limit` tasks, to `dest`, returning one of them.
        pub(crate) fn steal_half_into(&self, dest: &Deque<T>, limit: usize) -> Option<T> {
            retry(|| self.0.steal_batch_with_limit_and_pop(&dest.0, limit))
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }

    impl<T> Injector<T> {
        pub(crate) fn new() -> Injector<T> {
            Injector(crossbeam_deque::Injector::new())
        }

        pub(crate) fn push(&self, task: T) {
            self.0.push(task);
        }

        pub(crate) fn pop(&self) -> Option<T> {
            retry(|| self.0.steal())
        }

        /// Takes the oldest task plus up to `limit - 1` more into `dest`.
        pub(crate) fn pop_batch_into(&self, dest: &Deque<T>, limit: usize) -> Option<T> {
            retry(|| self.0.steal_batch_with_limit_and_pop(&dest.0, limit))
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }
}

#[cfg(loom)]
mod imp {
    use crate::loom::{lock, Arc, Mutex};
    use std::collections::VecDeque;

    pub(crate) struct Deque<T>(Arc<Mutex<VecDeque<T>>>);
    pub(crate) struct DequeStealer<T>(Arc<Mutex<VecDeque<T>>>);
    pub(crate) struct Injector<T>(Mutex<VecDeque<T>>);

    /// Moves `take` tasks from the front of `src` to `dest`'s newest end, keeping their order,
    /// and returns the first (as crossbeam's `*_and_pop` does). `src` is unlocked before `dest`
    /// is locked, so two workers stealing from each other cannot deadlock.
    fn transfer<T>(
        mut src: crate::loom::MutexGuard<'_, VecDeque<T>>,
        dest: &Deque<T>,
        take: usize,
    ) -> Option<T> {
        let first = src.pop_front()?;
        let rest: Vec<T> = (1..take).map_while(|_| src.pop_front()).collect();
        drop(src);
        lock(&dest.0).extend(rest);
        Some(first)
    }

    impl<T> Deque<T> {
        pub(crate) fn new() -> Deque<T> {
            Deque(Arc::new(Mutex::new(VecDeque::new())))
        }
        pub(crate) fn stealer(&self) -> DequeStealer<T> {
            DequeStealer(self.0.clone())
        }
        pub(crate) fn push(&self, task: T) {
            lock(&self.0).push_back(task);
        }
        pub(crate) fn pop(&self) -> Option<T> {
            lock(&self.0).pop_back()
        }
        pub(crate) fn len(&self) -> usize {
            lock(&self.0).len()
        }
    }

    impl<T> DequeStealer<T> {
        pub(crate) fn steal(&self) -> Option<T> {
            lock(&self.0).pop_front()
        }
        pub(crate) fn steal_half_into(&self, dest: &Deque<T>, limit: usize) -> Option<T> {
            // Never called with `dest` == `self` (a worker does not steal from itself).
            let src = lock(&self.0);
            let take = src.len().div_ceil(2).min(limit);
            transfer(src, dest, take)
        }
        pub(crate) fn is_empty(&self) -> bool {
            lock(&self.0).is_empty()
        }
    }

    impl<T> Injector<T> {
        pub(crate) fn new() -> Injector<T> {
            Injector(Mutex::new(VecDeque::new()))
        }
        pub(crate) fn push(&self, task: T) {
            lock(&self.0).push_back(task);
        }
        pub(crate) fn pop(&self) -> Option<T> {
            lock(&self.0).pop_front()
        }
        pub(crate) fn pop_batch_into(&self, dest: &Deque<T>, limit: usize) -> Option<T> {
            transfer(lock(&self.0), dest, limit)
        }
        pub(crate) fn is_empty(&self) -> bool {
            lock(&self.0).is_empty()
        }
    }
}

use super::next_slot::NextSlot;
use crate::loom::Arc;
use imp::{Deque, DequeStealer};

/// The owner's end of a worker's queue: its next slot (`next_slot.rs`), then its deque.
pub(crate) struct Local<T> {
    next: Arc<NextSlot<T>>,
    deque: Deque<T>,
}

/// Everyone else's end of a worker's queue. Thieves reach only the deque; the slot is taken
/// only by whoever hands the worker's queue over (the monitor's hand-off and nudge, shutdown),
/// or by the owner itself (`next_slot.rs`, "Who may take the slot").
pub(crate) struct Stealer<T> {
    next: Arc<NextSlot<T>>,
    deque: DequeStealer<T>,
}

/// A multi-producer, multi-consumer FIFO queue.
pub(crate) struct Injector<T>(imp::Injector<T>);

impl<T> Local<T> {
    pub(crate) fn new() -> Local<T> {
        Local {
            next: Arc::new(NextSlot::new()),
            deque: Deque::new(),
        }
    }

    pub(crate) fn stealer(&self) -> Stealer<T> {
        Stealer {
            next: self.next.clone(),
            deque: self.deque.stealer(),
        }
    }

    /// Into the next slot; a task already there moves to the deque, where thieves can take it
    /// (tokio's rule for its LIFO slot): the newest task runs next, and of two tasks pushed by
    /// one poll the older is stealable — by a searcher the second push wakes
    /// (`worker.rs`, `push_local`) — if that poll then blocks. Returns `true` if the queue held
    /// a task before (read from the slot's own pop, not a second look at its state).
    #[inline]
    pub(crate) fn push(&self, task: T) -> bool {
        let had_work = match self.next.pop() {
            Some(previous) => {
                self.deque.push(previous);
                true
            }
            None => self.deque.len() != 0,
        };
        if let Err(task) = self.next.push(task) {
            // A hand-over is emptying the slot (`TAKING`).
            self.deque.push(task);
        }
        had_work
    }

    /// The slot's task, else the deque's newest.
    #[inline]
    pub(crate) fn pop(&self) -> Option<T> {
        self.next.pop().or_else(|| self.deque.pop())
    }

    pub(crate) fn len(&self) -> usize {
        self.deque.len() + usize::from(self.next.is_full())
    }
}

impl<T> Stealer<T> {
    /// The deque's oldest task, else the slot's: for the owner (its fairness pop) and for a
    /// hand-over of the whole queue — never for a thief.
    pub(crate) fn take(&self) -> Option<T> {
        self.deque.steal().or_else(|| self.next.steal())
    }

    /// The slot's task, handed over by the monitor's nudge.
    pub(crate) fn take_next(&self) -> Option<T> {
        self.next.steal()
    }

    /// A thief's steal: moves about half of the deque, at most `limit` tasks, to `dest`'s deque,
    /// returning one of them. Never the slot.
    pub(crate) fn steal_half_into(&self, dest: &Local<T>, limit: usize) -> Option<T> {
        self.deque.steal_half_into(&dest.deque, limit)
    }

    /// `true` if the deque holds nothing a thief could take (the slot is not looked at).
    pub(crate) fn is_empty(&self) -> bool {
        self.deque.is_empty()
    }

    /// `true` if the slot holds a task.
    pub(crate) fn next_is_full(&self) -> bool {
        self.next.is_full()
    }
}

impl<T> Injector<T> {
    pub(crate) fn new() -> Injector<T> {
        Injector(imp::Injector::new())
    }

    pub(crate) fn push(&self, task: T) {
        self.0.push(task);
    }

    pub(crate) fn pop(&self) -> Option<T> {
        self.0.pop()
    }

    /// Takes the oldest task plus up to `limit - 1` more into `dest`'s deque.
    pub(crate) fn pop_batch_into(&self, dest: &Local<T>, limit: usize) -> Option<T> {
        self.0.pop_batch_into(&dest.deque, limit)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn owner_pops_newest_thieves_take_oldest_half() {
        let local = Local::new();
        for i in 0..10 {
            local.push(i);
        }
        assert_eq!(local.pop(), Some(9), "the slot's task: the newest");
        assert_eq!(local.pop(), Some(8));
        let thief = Local::new();
        let first = local.stealer().steal_half_into(&thief, 32).unwrap();
        let mut stolen = vec![first];
        while let Some(task) = thief.pop() {
            stolen.push(task);
        }
        stolen.sort();
        assert_eq!(
            stolen,
            (0..stolen.len() as i32).collect::<Vec<_>>(),
            "the oldest"
        );
        assert_eq!(stolen.len(), 4, "half of the deque's 8: {stolen:?}");
        assert_eq!(local.pop(), Some(7), "the owner keeps the newest");
    }

    #[test]
    fn thieves_never_take_the_slot_a_hand_over_does() {
        let local = Local::new();
        local.push(1);
        let stealer = local.stealer();
        assert!(stealer.is_empty(), "nothing a thief may take");
        assert!(stealer.next_is_full());
        assert_eq!(stealer.steal_half_into(&Local::new(), 32), None);
        local.push(2);
        assert!(!stealer.is_empty(), "the older task moved to the deque");
        assert_eq!(stealer.take(), Some(1), "the deque first");
        assert_eq!(stealer.take(), Some(2), "then the slot");
        assert_eq!(stealer.take(), None);
        local.push(3);
        assert_eq!(stealer.take_next(), Some(3));
        assert_eq!(local.pop(), None);
    }

    #[test]
    fn injector_batches_are_bounded() {
        let injector = Injector::new();
        for i in 0..100 {
            injector.push(i);
        }
        let dest = Local::new();
        assert_eq!(injector.pop_batch_into(&dest, 17), Some(0));
        assert!(dest.len() <= 16);
        assert!(!injector.is_empty());
    }
}
