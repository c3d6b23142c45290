//! Cheap per-worker counters, the monitor's figures, and the snapshot users read.
//!
//! Each worker writes only its own counters (a relaxed load and store, no read-modify-write), on
//! its own cache line; anyone may read them at any time. Values are monotonic but a snapshot is not
//! atomic across counters. Spare workers (`monitor.rs`) have counters of their own, listed apart
//! from the configured workers' and included in [`ExecutorMetrics::total`]. The monitor's figures
//! ([`MonitorMetrics`]) are written off the hot path: by the monitor thread, and by a spare when
//! it starts or retires.

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
        ///
        /// # Examples
        ///
        /// ```
        /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
        /// let polled = executor.spawn(async { 6 * 7 });
        /// assert_eq!(executor.block_on(polled).unwrap(), 42);
        /// let worker = executor.metrics().workers()[0];
        /// let copy = worker; // a plain snapshot: copy it, compare it
        /// assert_eq!(copy, worker);
        /// # Ok::<(), std::io::Error>(())
        /// ```
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
    /// Batch transfers from the global queue or the worker's own inject queues into its deque.
    inject_batches,
    /// Tasks taken from the worker's own inject queues (woken and yielded lanes).
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

/// Counters for every worker slot (configured workers first, then spares), each on its own
/// cache line.
pub(crate) struct MetricsBatch {
    workers: Box<[CachePadded<WorkerCounters>]>,
    /// Configured workers: the first `configured` slots.
    configured: usize,
    /// Panics of task destructors (a future, an unread output) contained by the tasks' harness:
    /// any thread adds, so an RMW; off every hot path (a panic was just caught).
    destructor_panics: AtomicU64,
}

impl MetricsBatch {
    pub(crate) fn new(configured: usize, slots: usize) -> MetricsBatch {
        MetricsBatch {
            workers: (0..slots).map(|_| CachePadded::default()).collect(),
            configured,
            destructor_panics: AtomicU64::new(0),
        }
    }

    pub(crate) fn worker(&self, index: usize) -> &WorkerCounters {
        &self.workers[index]
    }

    /// A task's destructor panicked and was contained.
    pub(crate) fn destructor_panicked(&self) {
        self.destructor_panics.fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self, monitor: MonitorMetrics) -> ExecutorMetrics {
        let mut workers: Vec<WorkerMetrics> = self.workers.iter().map(|w| w.snapshot()).collect();
        let spares = workers.split_off(self.configured);
        ExecutorMetrics {
            workers,
            spares,
            monitor,
            destructor_panics: self.destructor_panics.load(Relaxed),
        }
    }
}

/// What the monitor saw and did (`executor/monitor.rs`): long polls, and the spare workers it
/// started while workers were stuck.
///
/// # Examples
///
/// ```
/// use procsched::executor::Executor;
///
/// let executor = Executor::builder().workers(2).build()?;
/// executor.block_on(executor.spawn(async {})).unwrap();
/// let monitor = executor.metrics().monitor();
/// assert_eq!(monitor.long_polls, 0);
/// assert_eq!(monitor.active_workers, 2);
/// # Ok::<(), std::io::Error>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MonitorMetrics {
    /// Polls that ran longer than the long-poll threshold (each counted once, when detected).
    pub long_polls: u64,
    /// The longest poll the monitor observed, in nanoseconds (a lower bound: precise to one
    /// monitor tick). 0 if no poll ran past the threshold.
    pub longest_poll_ns: u64,
    /// The label of the task that made the longest poll (`None`: unlabelled, or no long poll).
    /// For a scheduler's processes, the PID (`Pid::from_raw`).
    pub longest_poll_label: Option<u64>,
    /// Times a spare worker was started or woken to replace a stuck one.
    pub spares_started: u64,
    /// Times a spare worker retired (gave its queue back and parked again).
    pub spares_retired: u64,
    /// Spare worker threads alive now (active or parked): a parked one ends after the
    /// keep-alive ([`Builder::spare_keep_alive`](super::Builder::spare_keep_alive)), so this
    /// returns to 0 after a burst of blocking.
    pub spare_threads: usize,
    /// Spare worker threads ended by their keep-alive so far.
    pub spare_threads_ended: u64,
    /// Worker threads holding a run queue now: the configured workers plus the active spares
    /// (stuck workers included). Settles back to the configured count once nothing is stuck.
    pub active_workers: usize,
    /// Worker threads — configured workers and active spares — stuck now: inside
    /// `block_in_place`, in a long poll, or in a poll longer than a monitor tick while every
    /// configured worker is busy (the monitor then hands their queues off as for a long poll).
    /// As of the monitor's last tick (up to a tick behind), and frozen once shutdown stops it.
    pub stuck_workers: usize,
    /// Times the monitor found every thread it may run — the configured workers and the spares
    /// up to [`Builder::max_spare_workers`](super::Builder::max_spare_workers) — inside
    /// `block_in_place` or in a long poll at once, each episode counted once (and warned of, at
    /// most every 10 s): queued work then waits until one returns, for ever if they wait for it
    /// (more `block_in_place` calls waiting for tasks they spawned than threads). Polls that
    /// are merely slow while every worker is busy (CPU-bound work) are not counted.
    pub exhausted: u64,
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
    spares: Vec<WorkerMetrics>,
    monitor: MonitorMetrics,
    destructor_panics: u64,
}

impl ExecutorMetrics {
    /// Destructors of tasks' futures or unread outputs that panicked after the task had an
    /// outcome (a dropped `JoinHandle`'s output, a panicking task's future): each was contained
    /// and traced (`warn`, with the task's label), and changed nothing a `JoinHandle` reports.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// assert_eq!(executor.metrics().destructor_panics(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn destructor_panics(&self) -> u64 {
        self.destructor_panics
    }

    /// One entry per configured worker, by worker index.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(2).build()?;
    /// assert_eq!(executor.metrics().workers().len(), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn workers(&self) -> &[WorkerMetrics] {
        &self.workers
    }

    /// One entry per spare worker slot (started or not), by spare index.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::executor::Executor;
    ///
    /// let executor = Executor::builder().workers(2).max_spare_workers(3).build()?;
    /// assert_eq!(executor.metrics().spares().len(), 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spares(&self) -> &[WorkerMetrics] {
        &self.spares
    }

    /// The monitor's figures.
    ///
    /// # Examples
    ///
    /// See [`MonitorMetrics`].
    pub fn monitor(&self) -> MonitorMetrics {
        self.monitor
    }

    /// The sum over all workers, spares included.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(2).build()?;
    /// executor.block_on(executor.spawn(async {})).unwrap();
    /// let metrics = executor.metrics();
    /// assert_eq!(metrics.total().polls, metrics.workers().iter().map(|w| w.polls).sum::<u64>() + metrics.spares().iter().map(|w| w.polls).sum::<u64>());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn total(&self) -> WorkerMetrics {
        let mut total = WorkerMetrics::default();
        for worker in self.workers.iter().chain(&self.spares) {
            total.add(worker);
        }
        total
    }
}
