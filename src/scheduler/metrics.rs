//! Scheduler metrics: the sharded counters the hot paths bump, and [`SchedulerMetrics`], the
//! snapshot users read.
//!
//! # Counters
//! Every counter lives in a *shard*, one cache line group per thread: the first [`EXCLUSIVE`]
//! threads to touch a scheduler's counters (its workers first of all: they step processes and
//! dispatch yields from the start) each claim a shard of their own and bump it with a relaxed
//! load and store, no read-modify-write, as the executor's per-worker counters do. Any further
//! thread shares the last shard, with relaxed `fetch_add`. A thread remembers its shard in a
//! thread-local keyed by the scheduler's id; a thread that moves between schedulers claims a
//! fresh shard each time it comes back (shards are never handed out twice), so correctness
//! never depends on the cache. A snapshot sums the shards: every counter is monotonic, but a
//! snapshot is not atomic across counters.
//!
//! Figures that belong to a process cell (steps and outstanding yields of the live process, the
//! mailbox high-water mark, handler errors and panics of async and blocking completions) are
//! kept in the cell (`process/stats.rs`) and gathered by the snapshot's scan of the table.
//!
//! These are statistics, never part of a protocol: std atomics, deliberately outside loom's
//! models (under loom every thread uses the shared shard).
//!
//! Steps and yields are counted per poll on the stack by the process future and added here once
//! per poll (`Host::polled`): one shard access per poll, however many steps it ran.
//!
//! # The longest recent step
//! Timing a step needs two clock reads (~35 ns each on the machine this was measured on: more
//! than a whole inline step). So one step in 64 of each process is timed, at a phase drawn
//! from its PID (`process/future.rs`, `SAMPLE_EVERY`): amortised, below one nanosecond per step,
//! and one-step processes are sampled one in 64 too. A process whose steps are slow shows up
//! within a few dozen of its steps; a single slow step is caught with probability 1/64.
//! "Recent" means the current and the previous window of [`STEP_WINDOW`].

use crate::executor::ExecutorMetrics;
use crate::process::stats::CellSurvey;
use crate::process::{Pid, ProcessState};
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `--cfg procsched_no_counters` compiles the hot paths' counting out, for the benchmark that
/// shows what it costs (`benches/examples/probe.rs`); never set in a normal build.
pub(crate) const COUNTING_OFF: bool = cfg!(procsched_no_counters);
/// Threads with a shard of their own, per scheduler; the rest share one.
const EXCLUSIVE: usize = if cfg!(loom) { 0 } else { 16 };
/// The window of the longest recent step.
pub(crate) const STEP_WINDOW: Duration = Duration::from_secs(60);

/// What the hot paths count, per shard.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Counter {
    Spawned,
    InitFailed,
    Steps,
    Done,
    Failed,
    Panicked,
    Terminated,
    Cancelled,
    Forced,
    Delivered,
    MailboxFull,
    Closed,
    NotFound,
    YieldInline,
    YieldAsync,
    YieldBlocking,
    YieldNoHandler,
    /// Inline handlers' errors and panics (async and blocking ones are counted by the cells).
    InlineErrors,
    InlinePanics,
}

const COUNTERS: usize = Counter::InlinePanics as usize + 1;

type Shard = [AtomicU64; COUNTERS];

/// Scheduler ids, for the thread-local shard cache (0: none).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

std::thread_local! {
    /// The shard this thread claimed, and the id of the scheduler it belongs to.
    static SHARD: Cell<(u64, usize)> = const { Cell::new((0, 0)) };
}

/// The sharded counters of one scheduler (module docs).
pub(crate) struct Counters {
    id: u64,
    /// Exclusive shards handed out so far.
    claimed: AtomicUsize,
    /// `EXCLUSIVE` exclusive shards, then the shared one.
    shards: Box<[CachePadded<Shard>]>,
    longest: Mutex<LongestStep>,
    epoch: Instant,
}

/// This thread's shard of one scheduler's counters.
#[derive(Clone, Copy)]
pub(crate) struct Local<'a> {
    shard: &'a Shard,
    exclusive: bool,
}

impl Local<'_> {
    /// Adds one to `counter`.
    #[inline]
    pub(crate) fn add(self, counter: Counter) {
        self.add_n(counter, 1);
    }

    /// Adds `n` to `counter`.
    #[inline]
    pub(crate) fn add_n(self, counter: Counter, n: u64) {
        if COUNTING_OFF {
            return;
        }
        let cell = &self.shard[counter as usize];
        if self.exclusive {
            cell.store(cell.load(Relaxed).wrapping_add(n), Relaxed);
        } else {
            cell.fetch_add(n, Relaxed);
        }
    }
}

impl Counters {
    pub(crate) fn new() -> Counters {
        Counters {
            id: NEXT_ID.fetch_add(1, Relaxed),
            claimed: AtomicUsize::new(0),
            shards: (0..=EXCLUSIVE)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
            longest: Mutex::new(LongestStep::default()),
            epoch: Instant::now(),
        }
    }

    /// This thread's shard.
    #[inline]
    pub(crate) fn local(&self) -> Local<'_> {
        let index = SHARD
            .try_with(|cached| {
                let (id, index) = cached.get();
                if id == self.id {
                    index
                } else {
                    let index = self.claim();
                    cached.set((self.id, index));
                    index
                }
            })
            .unwrap_or(EXCLUSIVE);
        Local {
            shard: &self.shards[index],
            exclusive: index < EXCLUSIVE,
        }
    }

    /// Adds one to `counter` in this thread's shard.
    #[inline]
    pub(crate) fn add(&self, counter: Counter) {
        self.local().add(counter);
    }

    #[cold]
    fn claim(&self) -> usize {
        if EXCLUSIVE == 0 {
            return EXCLUSIVE;
        }
        let index = self.claimed.fetch_add(1, Relaxed);
        if index < EXCLUSIVE {
            index
        } else {
            // Keep the count from wrapping however many threads come by.
            self.claimed.store(EXCLUSIVE, Relaxed);
            EXCLUSIVE
        }
    }

    /// A timed step of `pid` ended at `end` after `elapsed`.
    pub(crate) fn step_timed(&self, pid: Pid, elapsed: Duration, end: Instant) {
        if COUNTING_OFF {
            return;
        }
        let window = self.window_of(end);
        let mut longest = self
            .longest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        longest.roll(window);
        if longest.current.is_none_or(|c| elapsed > c.duration) {
            longest.current = Some(StepSample {
                pid,
                duration: elapsed,
            });
        }
    }

    fn window_of(&self, at: Instant) -> u64 {
        (at.saturating_duration_since(self.epoch).as_secs()) / STEP_WINDOW.as_secs()
    }

    fn longest_step(&self) -> Option<StepSample> {
        let window = self.window_of(Instant::now());
        let mut longest = self
            .longest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        longest.roll(window);
        match (longest.current, longest.previous) {
            (Some(a), Some(b)) => Some(if b.duration > a.duration { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    fn totals(&self) -> [u64; COUNTERS] {
        let mut totals = [0u64; COUNTERS];
        for shard in self.shards.iter() {
            for (total, cell) in totals.iter_mut().zip(shard.iter()) {
                *total = total.wrapping_add(cell.load(Relaxed));
            }
        }
        totals
    }

    /// The snapshot: these counters, the cells' survey, the executor's counters.
    pub(super) fn snapshot(
        &self,
        cells: impl Iterator<Item = CellSurvey>,
        executor: ExecutorMetrics,
    ) -> SchedulerMetrics {
        let t = self.totals();
        let get = |counter: Counter| t[counter as usize];
        let mut processes = ProcessCounts::default();
        let (mut high_water, mut errors, mut panics) = (0, 0, 0);
        for cell in cells {
            match cell.live {
                Some(ProcessState::Ready) => processes.ready += 1,
                Some(ProcessState::Running) => processes.running += 1,
                Some(ProcessState::Blocked) => processes.blocked += 1,
                Some(ProcessState::Idle) => processes.idle += 1,
                _ => {}
            }
            high_water = high_water.max(cell.max_depth);
            errors += cell.handler_errors;
            panics += cell.handler_panics;
        }
        SchedulerMetrics {
            processes,
            spawned: get(Counter::Spawned),
            init_failed: get(Counter::InitFailed),
            steps: get(Counter::Steps),
            finished: FinishCounts {
                done: get(Counter::Done),
                failed: get(Counter::Failed),
                panicked: get(Counter::Panicked),
                terminated: get(Counter::Terminated),
                cancelled: get(Counter::Cancelled),
                forced: get(Counter::Forced),
            },
            messages: MessageCounts {
                delivered: get(Counter::Delivered),
                mailbox_full: get(Counter::MailboxFull),
                closed: get(Counter::Closed),
                not_found: get(Counter::NotFound),
            },
            yields: YieldCounts {
                inline: get(Counter::YieldInline),
                asynchronous: get(Counter::YieldAsync),
                blocking: get(Counter::YieldBlocking),
                no_handler: get(Counter::YieldNoHandler),
            },
            handler_errors: get(Counter::InlineErrors) + errors,
            handler_panics: get(Counter::InlinePanics) + panics,
            mailbox_high_water: high_water,
            longest_step: self.longest_step(),
            executor,
        }
    }
}

/// The longest timed step of the current and the previous window.
#[derive(Default)]
struct LongestStep {
    window: u64,
    current: Option<StepSample>,
    previous: Option<StepSample>,
}

impl LongestStep {
    /// Moves to `window` (a later one, or the same).
    fn roll(&mut self, window: u64) {
        if window <= self.window {
            return;
        }
        self.previous = if window == self.window + 1 {
            self.current.take()
        } else {
            None
        };
        self.current = None;
        self.window = window;
    }
}

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counters")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A snapshot of a scheduler's metrics, from [`Scheduler::metrics`](crate::Scheduler::metrics).
///
/// Counters (`spawned`, `finished`, `messages`, ...) count since the scheduler was built and
/// never decrease; gauges (`processes`) are the state at the snapshot. Counters are kept per
/// worker with relaxed atomics and summed here: each value is exact once the work it counts has
/// happened, but a snapshot taken while processes run is not atomic across fields.
///
/// With the cargo feature `metrics`, `SchedulerMetrics::export` records it through the
/// [`metrics`](https://docs.rs/metrics) facade.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// let sched = Scheduler::builder().workers(2).build()?;
/// let handle = sched.spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(1) })?;
/// sched.block_on(handle)?;
/// let metrics = sched.metrics();
/// assert_eq!(metrics.spawned, 1);
/// assert_eq!(metrics.finished.done, 1);
/// assert_eq!(metrics.processes.total(), 0);
/// assert_eq!(metrics.executor.workers().len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerMetrics {
    /// Gauge: live processes by state (not counting processes inside `init`, or finishing).
    pub processes: ProcessCounts,
    /// Processes started: `spawn` returned a handle.
    pub spawned: u64,
    /// Spawns whose `init` failed or panicked (no process was started).
    pub init_failed: u64,
    /// Steps run, over all processes.
    pub steps: u64,
    /// Processes finished, by outcome.
    pub finished: FinishCounts,
    /// Messages sent (`send`), delivered or rejected by reason.
    pub messages: MessageCounts,
    /// Yields dispatched, by the kind of their handler.
    pub yields: YieldCounts,
    /// Handler completions that reported an error: [`CommandError::Failed`](crate::CommandError::Failed)
    /// or [`CommandError::TimedOut`](crate::CommandError::TimedOut).
    pub handler_errors: u64,
    /// Handlers that panicked ([`CommandError::Panicked`](crate::CommandError::Panicked)).
    pub handler_panics: u64,
    /// Most events (messages and completions) ever queued at once in one process's mailbox.
    pub mailbox_high_water: usize,
    /// The longest *sampled* step of the last one to two minutes, with its process: one step in
    /// 64 of each process is timed (timing every step would cost more than a step), so a
    /// process with repeatedly slow steps shows up quickly, a single slow step with
    /// probability 1/64.
    pub longest_step: Option<StepSample>,
    /// The executor's per-worker counters.
    pub executor: ExecutorMetrics,
}

/// Live processes by [`ProcessState`] (in [`SchedulerMetrics::processes`]).
///
/// # Examples
///
/// ```
/// let sched = procsched::Scheduler::builder().workers(1).build()?;
/// let processes = sched.metrics().processes;
/// assert_eq!((processes.ready, processes.idle, processes.total()), (0, 0, 0));
/// # Ok::<(), procsched::BuildError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessCounts {
    /// Queued, waiting for a worker.
    pub ready: usize,
    /// Being stepped.
    pub running: usize,
    /// Waiting for yield completions.
    pub blocked: usize,
    /// Waiting for messages.
    pub idle: usize,
}

impl ProcessCounts {
    /// Every live process counted: `ready + running + blocked + idle`.
    ///
    /// # Examples
    ///
    /// See [`ProcessCounts`].
    pub fn total(&self) -> usize {
        self.ready + self.running + self.blocked + self.idle
    }
}

/// Finished processes by outcome (in [`SchedulerMetrics::finished`]). Every process started is
/// counted in exactly one field once it has finished.
///
/// # Examples
///
/// ```
/// let sched = procsched::Scheduler::builder().workers(1).build()?;
/// let finished = sched.metrics().finished;
/// assert_eq!(finished.total(), finished.done + finished.failed + finished.panicked
///     + finished.terminated + finished.cancelled + finished.forced);
/// # Ok::<(), procsched::BuildError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FinishCounts {
    /// Finished with a result ([`Status::Done`](crate::Status::Done)).
    pub done: u64,
    /// A step returned an error.
    pub failed: u64,
    /// A step or `close` panicked (also during shutdown).
    pub panicked: u64,
    /// Stopped by [`terminate`](crate::SchedulerHandle::terminate).
    pub terminated: u64,
    /// Finished during a shutdown's grace period, after its
    /// [`Event::Cancel`](crate::Event::Cancel), other than by a panic: the
    /// [`ShutdownReport::graceful`](crate::ShutdownReport::graceful) ones.
    pub cancelled: u64,
    /// Stopped by shutdown after its grace period
    /// ([`ShutdownReport::forced`](crate::ShutdownReport::forced), and abandoned processes once
    /// their call returns), other than by a panic.
    pub forced: u64,
}

impl FinishCounts {
    /// Every finished process.
    ///
    /// # Examples
    ///
    /// See [`FinishCounts`].
    pub fn total(&self) -> u64 {
        self.done + self.failed + self.panicked + self.terminated + self.cancelled + self.forced
    }
}

/// Messages sent with [`send`](crate::SchedulerHandle::send), by what became of them (in
/// [`SchedulerMetrics::messages`]).
///
/// # Examples
///
/// ```
/// use procsched::{Message, Payload, Pid, Scheduler};
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let nobody = Pid::from_raw(1 << 26).unwrap();
/// assert!(sched.send(nobody, Message::new("hi", Payload::empty())).is_err());
/// let messages = sched.metrics().messages;
/// assert_eq!((messages.delivered, messages.not_found, messages.rejected()), (0, 1, 1));
/// # Ok::<(), procsched::BuildError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MessageCounts {
    /// Queued in the process's mailbox.
    pub delivered: u64,
    /// Rejected: the mailbox capacity or the topic budget was reached
    /// ([`SendErrorKind::MailboxFull`](crate::SendErrorKind::MailboxFull)).
    pub mailbox_full: u64,
    /// Rejected: the process was finishing ([`SendErrorKind::Closed`](crate::SendErrorKind::Closed)).
    pub closed: u64,
    /// Rejected: no live process has the PID ([`SendErrorKind::NotFound`](crate::SendErrorKind::NotFound)).
    pub not_found: u64,
}

impl MessageCounts {
    /// Every rejected message.
    ///
    /// # Examples
    ///
    /// See [`MessageCounts`].
    pub fn rejected(&self) -> u64 {
        self.mailbox_full + self.closed + self.not_found
    }
}

/// Yields dispatched, by the kind of handler they went to (in [`SchedulerMetrics::yields`]).
///
/// # Examples
///
/// ```
/// let sched = procsched::Scheduler::builder().workers(1).build()?;
/// let yields = sched.metrics().yields;
/// assert_eq!(yields.total(), yields.inline + yields.asynchronous + yields.blocking + yields.no_handler);
/// # Ok::<(), procsched::BuildError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct YieldCounts {
    /// Run by an inline handler, on the worker.
    pub inline: u64,
    /// Run by an async handler (on the workers, inside the handler runtime's context).
    pub asynchronous: u64,
    /// Run by a blocking handler (tokio's blocking pool).
    pub blocking: u64,
    /// No handler registered for the command's type: completed at once with
    /// [`CommandError::NoHandler`](crate::CommandError::NoHandler) (and a `warn` event).
    pub no_handler: u64,
}

impl YieldCounts {
    /// Every yield dispatched.
    ///
    /// # Examples
    ///
    /// See [`YieldCounts`].
    pub fn total(&self) -> u64 {
        self.inline + self.asynchronous + self.blocking + self.no_handler
    }
}

/// A timed step: which process, and how long it ran (in [`SchedulerMetrics::longest_step`]).
///
/// # Examples
///
/// ```
/// let sched = procsched::Scheduler::builder().workers(1).build()?;
/// if let Some(step) = sched.metrics().longest_step {
///     println!("{} stepped for {:?}", step.pid, step.duration);
/// }
/// # Ok::<(), procsched::BuildError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSample {
    /// The process.
    pub pid: Pid,
    /// How long its step ran.
    pub duration: Duration,
}

#[cfg(feature = "metrics")]
impl SchedulerMetrics {
    /// Records the snapshot through the [`metrics`](https://docs.rs/metrics) facade, into
    /// whatever recorder the application installed (a Prometheus exporter, StatsD, ...). Call
    /// it periodically (or before each scrape); counters are set to their absolute values,
    /// gauges to the snapshot's.
    ///
    /// | name | kind | labels |
    /// |---|---|---|
    /// | `procsched_processes` | gauge | `state`: ready, running, blocked, idle |
    /// | `procsched_spawned_total` | counter | |
    /// | `procsched_init_failed_total` | counter | |
    /// | `procsched_steps_total` | counter | |
    /// | `procsched_finished_total` | counter | `outcome`: done, failed, panicked, terminated, cancelled, forced |
    /// | `procsched_messages_total` | counter | `result`: delivered, mailbox_full, closed, not_found |
    /// | `procsched_yields_total` | counter | `handler`: inline, async, blocking, none |
    /// | `procsched_handler_errors_total` | counter | |
    /// | `procsched_handler_panics_total` | counter | |
    /// | `procsched_mailbox_high_water` | gauge | |
    /// | `procsched_longest_step_seconds` | gauge | (the process is in the snapshot: a `pid` label would grow a series per process) |
    /// | `procsched_worker_<counter>_total` | counter | `worker`: its index; one per [`WorkerMetrics`](crate::executor::WorkerMetrics) field |
    ///
    /// Requires the cargo feature `metrics`.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// // With no recorder installed, the facade discards the values.
    /// sched.metrics().export();
    /// # Ok::<(), procsched::BuildError>(())
    /// ```
    pub fn export(&self) {
        use metrics::{counter, describe_counter, describe_gauge, gauge};

        describe_gauge!("procsched_processes", "Live processes by state");
        for (state, n) in [
            ("ready", self.processes.ready),
            ("running", self.processes.running),
            ("blocked", self.processes.blocked),
            ("idle", self.processes.idle),
        ] {
            gauge!("procsched_processes", "state" => state).set(n as f64);
        }
        describe_counter!("procsched_spawned_total", "Processes started");
        counter!("procsched_spawned_total").absolute(self.spawned);
        describe_counter!("procsched_init_failed_total", "Spawns whose init failed");
        counter!("procsched_init_failed_total").absolute(self.init_failed);
        describe_counter!("procsched_steps_total", "Steps run");
        counter!("procsched_steps_total").absolute(self.steps);
        describe_counter!("procsched_finished_total", "Processes finished, by outcome");
        let f = &self.finished;
        for (outcome, n) in [
            ("done", f.done),
            ("failed", f.failed),
            ("panicked", f.panicked),
            ("terminated", f.terminated),
            ("cancelled", f.cancelled),
            ("forced", f.forced),
        ] {
            counter!("procsched_finished_total", "outcome" => outcome).absolute(n);
        }
        describe_counter!("procsched_messages_total", "Messages sent, by result");
        let m = &self.messages;
        for (result, n) in [
            ("delivered", m.delivered),
            ("mailbox_full", m.mailbox_full),
            ("closed", m.closed),
            ("not_found", m.not_found),
        ] {
            counter!("procsched_messages_total", "result" => result).absolute(n);
        }
        describe_counter!(
            "procsched_yields_total",
            "Yields dispatched, by handler kind"
        );
        let y = &self.yields;
        for (handler, n) in [
            ("inline", y.inline),
            ("async", y.asynchronous),
            ("blocking", y.blocking),
            ("none", y.no_handler),
        ] {
            counter!("procsched_yields_total", "handler" => handler).absolute(n);
        }
        describe_counter!("procsched_handler_errors_total", "Handler errors");
        counter!("procsched_handler_errors_total").absolute(self.handler_errors);
        describe_counter!("procsched_handler_panics_total", "Handler panics");
        counter!("procsched_handler_panics_total").absolute(self.handler_panics);
        describe_gauge!(
            "procsched_mailbox_high_water",
            "Most events ever queued in one mailbox"
        );
        gauge!("procsched_mailbox_high_water").set(self.mailbox_high_water as f64);
        if let Some(step) = self.longest_step {
            describe_gauge!(
                "procsched_longest_step_seconds",
                "Longest sampled step of the last minutes"
            );
            gauge!("procsched_longest_step_seconds").set(step.duration.as_secs_f64());
        }
        for (index, w) in self.executor.workers().iter().enumerate() {
            let worker = index.to_string();
            for (name, n) in [
                ("procsched_worker_polls_total", w.polls),
                ("procsched_worker_stolen_total", w.stolen),
                ("procsched_worker_steal_ops_total", w.steal_ops),
                ("procsched_worker_global_pops_total", w.global_pops),
                ("procsched_worker_inject_batches_total", w.inject_batches),
                ("procsched_worker_inject_pops_total", w.inject_pops),
                ("procsched_worker_parks_total", w.parks),
                ("procsched_worker_unparks_total", w.unparks),
                ("procsched_worker_spins_total", w.spins),
            ] {
                counter!(name, "worker" => worker.clone()).absolute(n);
            }
        }
    }
}
