//! Run queues: a thin, loom-swappable wrapper over crossbeam-deque.
//!
//! | type | producers | consumers | order |
//! |---|---|---|---|
//! | [`Local`] | its worker | its worker (LIFO `pop`); everyone via [`Stealer`] (oldest first) | LIFO for the owner |
//! | [`Injector`] | anyone | anyone, in batches | FIFO |
//!
//! crossbeam-deque uses core atomics directly, so loom cannot look inside it. Under `cfg(loom)`
//! each queue is a loom `Mutex<VecDeque>` with the same interface and the same batch semantics,
//! which lets the models explore every interleaving of the code *around* the queues.

#[cfg(not(loom))]
mod imp {
    use crossbeam_deque::Steal;

    /// The owner's end of a worker's deque.
    pub(crate) struct Local<T>(crossbeam_deque::Worker<T>);

    /// Everyone else's end of a worker's deque.
    pub(crate) struct Stealer<T>(crossbeam_deque::Stealer<T>);

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

    impl<T> Local<T> {
        pub(crate) fn new() -> Local<T> {
            Local(crossbeam_deque::Worker::new_lifo())
        }

        pub(crate) fn stealer(&self) -> Stealer<T> {
            Stealer(self.0.stealer())
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

    impl<T> Stealer<T> {
        /// The oldest task.
        pub(crate) fn steal(&self) -> Option<T> {
            retry(|| self.0.steal())
        }

        /// Moves about half of the queue, at most `limit` tasks, to `dest`, returning one of them.
        pub(crate) fn steal_half_into(&self, dest: &Local<T>, limit: usize) -> Option<T> {
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
        pub(crate) fn pop_batch_into(&self, dest: &Local<T>, limit: usize) -> Option<T> {
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

    pub(crate) struct Local<T>(Arc<Mutex<VecDeque<T>>>);
    pub(crate) struct Stealer<T>(Arc<Mutex<VecDeque<T>>>);
    pub(crate) struct Injector<T>(Mutex<VecDeque<T>>);

    /// Moves `take` tasks from the front of `src` to `dest`'s newest end, keeping their order,
    /// and returns the first (as crossbeam's `*_and_pop` does). `src` is unlocked before `dest`
    /// is locked, so two workers stealing from each other cannot deadlock.
    fn transfer<T>(
        mut src: crate::loom::MutexGuard<'_, VecDeque<T>>,
        dest: &Local<T>,
        take: usize,
    ) -> Option<T> {
        let first = src.pop_front()?;
        let rest: Vec<T> = (1..take).map_while(|_| src.pop_front()).collect();
        drop(src);
        lock(&dest.0).extend(rest);
        Some(first)
    }

    impl<T> Local<T> {
        pub(crate) fn new() -> Local<T> {
            Local(Arc::new(Mutex::new(VecDeque::new())))
        }
        pub(crate) fn stealer(&self) -> Stealer<T> {
            Stealer(self.0.clone())
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

    impl<T> Stealer<T> {
        pub(crate) fn steal(&self) -> Option<T> {
            lock(&self.0).pop_front()
        }
        pub(crate) fn steal_half_into(&self, dest: &Local<T>, limit: usize) -> Option<T> {
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
        pub(crate) fn pop_batch_into(&self, dest: &Local<T>, limit: usize) -> Option<T> {
            transfer(lock(&self.0), dest, limit)
        }
        pub(crate) fn is_empty(&self) -> bool {
            lock(&self.0).is_empty()
        }
    }
}

pub(crate) use imp::{Injector, Local, Stealer};

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn owner_pops_newest_thieves_take_oldest_half() {
        let local = Local::new();
        for i in 0..10 {
            local.push(i);
        }
        assert_eq!(local.pop(), Some(9));
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
        assert!(
            (4..=5).contains(&stolen.len()),
            "about half of 9: {stolen:?}"
        );
        assert_eq!(local.pop(), Some(8), "the owner keeps the newest");
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
