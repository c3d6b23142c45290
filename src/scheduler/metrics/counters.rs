//! The sharded counters the hot paths bump, and the snapshot that sums them.
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

use super::{
    ExitCounts, FinishCounts, MessageCounts, ProcessCounts, SchedulerMetrics, StepSample,
    YieldCounts,
};
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
    YieldAsk,
    /// Inline handlers' errors and panics (async and blocking ones are counted by the cells).
    InlineErrors,
    InlinePanics,
    /// Processes finished, by the [`ExitReason`](crate::supervision::ExitReason) their handle,
    /// links and monitors carry (`ExitCounts`).
    ExitNormal,
    ExitFailed,
    ExitPanicked,
    ExitKilled,
    ExitShutdown,
    ExitNoProc,
    ExitNoConnection,
    /// Destructor panics contained where no process cell records them (a refused spawn's
    /// process and input).
    DestructorPanics,
}

const COUNTERS: usize = Counter::DestructorPanics as usize + 1;

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
    pub(crate) fn snapshot(
        &self,
        cells: impl Iterator<Item = CellSurvey>,
        executor: ExecutorMetrics,
    ) -> SchedulerMetrics {
        let t = self.totals();
        let get = |counter: Counter| t[counter as usize];
        let mut processes = ProcessCounts::default();
        let (mut high_water, mut errors, mut panics, mut destructors) = (0, 0, 0, 0);
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
            destructors += cell.destructor_panics;
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
            exits: ExitCounts {
                normal: get(Counter::ExitNormal),
                failed: get(Counter::ExitFailed),
                panicked: get(Counter::ExitPanicked),
                killed: get(Counter::ExitKilled),
                shutdown: get(Counter::ExitShutdown),
                no_proc: get(Counter::ExitNoProc),
                no_connection: get(Counter::ExitNoConnection),
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
                asks: get(Counter::YieldAsk),
            },
            handler_errors: get(Counter::InlineErrors) + errors,
            handler_panics: get(Counter::InlinePanics) + panics,
            destructor_panics: get(Counter::DestructorPanics)
                + destructors
                + executor.destructor_panics(),
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
