//! Cheap per-worker counters, and the snapshot users read.
//!
//! Each worker writes only its own counters (a relaxed load and store, no read-modify-write), on
//! its own cache line; anyone may read them at any time. Values are monotonic but a snapshot is not
//! atomic across counters.

use crate::loom::atomic::{AtomicU64, Ordering::Relaxed};
use crossbeam_utils::CachePadded;

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// The live counters of one worker.
        #[derive(Default)]
        pub(crate) struct WorkerCounters {
            $(pub(crate) $name: Counter,)*
        }

        impl WorkerCounters {
            pub(crate) fn snapshot(&self) -> WorkerMetrics {
                WorkerMetrics { $($name: self.$name.get(),)* }
            }
        }

        /// A snapshot of one worker's counters.
        #[non_exhaustive]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct WorkerMetrics {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl WorkerMetrics {
            fn add(&mut self, other: &WorkerMetrics) {
                $(self.$name += other.$name;)*
            }
        }
    };
}

counters! {
    /// Task polls (each `Notified` run counts once, including ones that only cancel).
    polls,
    /// Tasks taken from other workers (deques and inject queues).
    stolen,
    /// Successful steal operations (each moves one or more tasks).
    steal_ops,
    /// Tasks taken from the global queue.
    global_pops,
    /// Batch transfers from the global queue or the worker's own inject queue into its deque.
    inject_batches,
    /// Tasks taken from the worker's own inject queue (wake affinity).
    inject_pops,
    /// Times the worker went to sleep.
    parks,
    /// Times the worker was woken from sleep.
    unparks,
    /// Search rounds that found nothing (spinning or yielding before a park).
    spins,
}

/// A monotonic counter with a single writer.
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds one. Only the owning worker calls this, so a load and a store suffice.
    #[inline]
    pub(crate) fn incr(&self) {
        self.add(1);
    }

    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Counters for every worker, each on its own cache line.
pub(crate) struct MetricsBatch {
    workers: Box<[CachePadded<WorkerCounters>]>,
}

impl MetricsBatch {
    pub(crate) fn new(workers: usize) -> MetricsBatch {
        MetricsBatch {
            workers: (0..workers).map(|_| CachePadded::default()).collect(),
        }
    }

    pub(crate) fn worker(&self, index: usize) -> &WorkerCounters {
        &self.workers[index]
    }

    pub(crate) fn snapshot(&self) -> ExecutorMetrics {
        ExecutorMetrics {
            workers: self.workers.iter().map(|w| w.snapshot()).collect(),
        }
    }
}

/// A snapshot of every worker's counters, from [`Executor::metrics`](super::Executor::metrics).
///
/// # Examples
///
/// ```
/// use procsched::executor::Executor;
///
/// let executor = Executor::builder().workers(2).build().unwrap();
/// executor.block_on(executor.spawn(async {})).unwrap();
/// let metrics = executor.metrics();
/// assert_eq!(metrics.workers().len(), 2);
/// assert!(metrics.total().polls >= 1);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorMetrics {
    workers: Vec<WorkerMetrics>,
}

impl ExecutorMetrics {
    /// One entry per worker, by worker index.
    pub fn workers(&self) -> &[WorkerMetrics] {
        &self.workers
    }

    /// The sum over all workers.
    pub fn total(&self) -> WorkerMetrics {
        let mut total = WorkerMetrics::default();
        for worker in &self.workers {
            total.add(worker);
        }
        total
    }
}
