//! The monitor: notices polls that run too long, reports them, and hands a stuck worker's work
//! to a spare worker so the configured parallelism keeps running (Go's sysmon, for futures).
//!
//! Rust futures cannot be preempted: a poll that blocks its thread (a blocking receive, a long
//! computation) holds its worker until it returns. The monitor cannot end such a poll; it makes
//! sure the *rest* of the work does not wait for it.
//!
//! # What each worker publishes (the hot path)
//! Per worker slot, on its own cache line ([`Activity`]): a poll sequence number, odd while the
//! worker is inside a poll, and the label of the task it polls. At poll start the worker stores the
//! label (relaxed), then `seq + 1` (release); at poll end `seq + 2` (release). No clock read, no
//! read-modify-write, no shared cache line: two plain stores per poll.
//!
//! # Detection
//! Every tick (`threshold / 4`, between 1 and 10 ms) the monitor samples each slot's sequence. A slot
//! whose odd sequence has not changed since the monitor first saw it, `threshold` or more ago, is
//! in a *long poll* (precision: one tick; the reported `elapsed` is a lower bound). Each long poll
//! is reported once (the [`LongPoll`] observer; default: a `tracing` warning) and counted, and the
//! longest is remembered with its label ([`MonitorMetrics`]). A worker
//! inside [`block_in_place`](super::block_in_place) declared itself blocked: it is *stuck* at
//! once, and not reported as a long poll.
//!
//! A worker is *stuck* (replaced by a spare, below) if it is in a long poll, inside
//! `block_in_place`, or — Go's sysmon retakes a processor after one tick in a syscall when other
//! work waits — in the same poll for a tick or more (*slow*) while every configured worker is slow,
//! long or blocking: the executor is saturated by polls of at least a tick, and queued work would
//! otherwise wait up to the threshold. Slow polls are not reported. When nothing is saturated, no
//! spare starts before the threshold.
//!
//! # Hand-off (monitor tick, or `block_in_place` entry)
//! `needed = min(stuck workers, max_spare)`: the number of spares that restores the configured
//! parallelism.
//! 1. Mark the stuck worker (a flag on its own cache line, `flags`): wakes from outside that
//!    would go to its woken lane (affinity) go to the global injector instead.
//! 2. Move what it had queued to the global injector: its inject queues and its deque (thieves'
//!    end) by the monitor; `block_in_place` pops its own deque. Each task is taken out of one
//!    queue by one atomic pop and pushed to the injector with the producers' protocol
//!    (`Shared::push_global`: fence, shutdown check, `notify_parked`). A worker's next slot
//!    (`next_slot.rs`), which no thief takes, is taken here through the same stealer, after its
//!    deque: unlike tokio's LIFO slot, nothing a worker holds is out of the hand-off's reach.
//! 3. If no runnable work waits anywhere (`Shared::has_pending_work`), stop: nothing to hand off.
//!    (The next tick looks again while the worker is stuck.)
//! 4. While fewer than `needed` spares are active: under the pool lock, take a parked spare
//!    (count it active, unpark it) or start a new spare thread (count it live and active); see
//!    `spare.rs`. The code of steps 3 and 4 is in `start.rs`.
//!
//! An active spare runs the ordinary worker loop on its own deque and steals from everyone,
//! including the stuck worker's deque and inject queues. It never joins the idle protocol's
//! counts or sleeper list (`idle.rs`): producers neither count nor wake it, and the protocol's
//! promises are made by the configured workers alone, as before. A spare is only ever *extra*
//! consumption.
//!
//! # Nudge (monitor tick)
//! A task spawned or woken on a worker that has nothing else queued is not announced to the
//! other workers: the worker runs it as soon as its current poll returns (`worker.rs`,
//! `push_local`). When that poll is *slow* (a tick or more) and the worker has work queued, the
//! tick moves the task in its next slot (if any: no thief takes it) to the global injector
//! (`Shared::hand_over_next`, with the producers' protocol) and wakes one parked worker if none
//! is searching (`Shared::notify_parked`), which takes that task or steals the deque's work like
//! any searcher. So a process woken by a step that then blocks waits one to two ticks
//! (2.5–5 ms with the default threshold: a poll is seen slow by the second sample that finds it
//! running; a monitor woken from its idle sleep takes its first sample at once), not for the
//! blocking step; a long poll's hand-off
//! follows at the threshold as always. Checked by
//! `loom_lone_task_behind_a_blocked_poll_runs_after_the_nudge` (`executor/tests/loom_park.rs`).
//!
//! # Preemption request (monitor tick)
//! Go's sysmon flags a goroutine that has run for 10 ms, and the goroutine yields at its next
//! check. A future cannot be stopped mid-poll, but one that loops over units of work within a
//! poll (a process stepping message after message) can look between two units: each tick, the
//! monitor stores the sequence of every poll it found slow or long (a tick or more) in the
//! slot's `preempt` word, and [`yield_requested`](super::worker::yield_requested) on that
//! worker reads `true` while the poll it names runs — a later poll has another sequence, so the
//! request expires by itself and the worker never writes the word. The process future requeues
//! (as on a spent step budget) at the first step boundary after the request: a process whose
//! steps each take a while (CPU work per message) no longer holds its worker for its whole
//! budget — 64 steps of up to 64 messages — while processes queued behind it wait.
//! A hint, not a protocol: a request read late costs one more step, one read early (a stale
//! sequence can only name an older poll, never a later one) cannot happen, and the reader needs
//! nothing else the monitor wrote; so it needs no ordering and no loom model.
//!
//! # Retirement (an active spare, at a safe point: between two polls)
//! 1. The spare sees `active spares > needed` (surplus: a stuck poll returned, the monitor's next
//!    tick recounted), or it found no work in its deque, the injector or any other queue (idle).
//! 2. It hands its deque back: pops every task and pushes it to the global injector with the
//!    producers' protocol (as in hand-off step 2). Only its own thread pushes to its deque, and
//!    its inject queue is never used (wakes of tasks that last ran on a spare go to the global
//!    injector), so after this step the spare holds no task.
//! 3. Under the pool lock, it re-checks (surplus, or idle) and joins the parked list, decreasing
//!    `active` in the same critical section; if an activation raced in and it is needed after
//!    all, it keeps running (back to the loop, nothing lost: its deque is empty).
//!    3b. Then, after a `SeqCst` fence, it looks at the global injector: a task pushed there
//!    while it lowered `active` may have seen it still counted, and no worker to wake (hand-off
//!    returns early with enough spares active: `start.rs`). The pusher fences after its push,
//!    then reads `active`: one of the two sees the other, and either the pusher activates a
//!    spare, or this one leaves the parked list and runs on (`Spares::unretire`).
//! 4. It parks until an activation removes it from the parked list (spurious returns re-check
//!    the list) or shutdown.
//! 5. Parked unused for the keep-alive (`spare.rs`, "Keep-alive": 10 s by default), it leaves
//!    the parked list under the pool lock — unless an activation took it first, then it runs
//!    on — and its thread ends, handing its (empty) deque back to the pool for the slot's next
//!    thread. So the thread count returns to the configured workers after a burst of blocking.
//!
//! # Why no task is lost or run twice
//! A runnable task is a `Notified` that lives in exactly one queue or one worker's hand, and the
//! task state word lets only its holder poll it (`task/state.rs`). Hand-off and retirement only
//! *move* `Notified`s: each is taken out of a queue by one atomic pop (crossbeam's deque and
//! injector hand every item to exactly one taker; under loom, a mutex does) and pushed to the
//! injector — never copied, never dropped. A stuck worker keeps the one task it polls; when that
//! poll returns, the worker finishes the poll protocol as always and carries on with its
//! (possibly emptied) queues. No task is lost because every push in these protocols is a
//! producer's push: the idle protocol (`idle.rs`) guarantees some configured worker or searcher
//! sees it, and while every configured worker is stuck the monitor's next tick (step 3–4) starts
//! a spare, which sweeps every queue before it parks again (retirement step 1, idle).
//!
//! Checked (`executor/tests/loom_monitor.rs`) by
//! `loom_stuck_worker_returns_as_its_replacement_starts` (hand-off steps 1–4 from a manual tick,
//! racing with the stuck poll's return and retirement R1–R4),
//! `loom_retirement_while_tasks_are_stolen` (`block_in_place` hand-off, then retirement step 2
//! racing with the returning worker's steals) and
//! `loom_a_spare_expiring_as_it_is_activated_runs_once` (step 5 racing an activation); and,
//! with many hand-offs on real threads, by the
//! randomized `every_task_runs_exactly_once_through_many_hand_offs` (`tests/monitor.rs`).
//!
//! # Sleeping when idle
//! The monitor thread ticks only while work exists. After a tick that found every configured
//! worker parked (`Idle`'s unparked count 0), no spare active and nothing stuck, it sets
//! `sleeping` (SeqCst), re-checks the unparked count (SeqCst) and, still zero, waits without a
//! timeout. A worker that leaves the sleeper list (the idle→busy edge; per park, never per poll)
//! reads `sleeping` (SeqCst) after the unparked count was raised, and if set, wakes the monitor.
//! By the SeqCst order, either the monitor's re-check sees the raised count or the worker sees
//! the flag. Shutdown wakes it through the same lock, after setting its own flag.
//!
//! # Below the shared state
//! The monitor's state is part of the state all workers share (`shared.rs`), so this module
//! cannot name that state: the tick and the monitor thread reach the executor through
//! [`MonitorHost`], which `start.rs` implements, together with hand-off steps 3 and 4 (a spare
//! runs the worker loop, `worker.rs`, which sits above the shared state).

use super::metrics::MonitorMetrics;
use super::spare::Spares;
use crate::loom::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};
use crate::loom::{lock, Condvar, Mutex};
use crossbeam_utils::CachePadded;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// Default threshold past which a poll is a long poll (Go's sysmon uses 10 ms).
pub const DEFAULT_LONG_POLL_THRESHOLD: Duration = Duration::from_millis(10);
/// The shortest monitor tick.
const MIN_TICK: Duration = Duration::from_millis(1);
/// The longest monitor tick: a worker inside `block_in_place` is handed off within one tick
/// whatever the threshold.
const MAX_TICK: Duration = Duration::from_millis(10);

/// `flags` bit: the monitor sees the worker in a long poll (written by the monitor only).
const LONG: u8 = 1 << 0;
/// `flags` bit: the worker is inside `block_in_place` (written by that worker only).
const BLOCKING: u8 = 1 << 1;

/// One long poll, as the monitor reports it (once per poll) to the builder's
/// [`on_long_poll`](super::Builder::on_long_poll) observer.
///
/// # Examples
///
/// ```
/// use procsched::executor::{Executor, LongPoll};
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let (tx, rx) = mpsc::channel::<LongPoll>();
/// let tx = std::sync::Mutex::new(tx);
/// let executor = Executor::builder()
///     .workers(1)
///     .long_poll_threshold(Duration::from_millis(5))
///     .on_long_poll(move |long_poll| drop(tx.lock().unwrap().send(long_poll.clone())))
///     .build()?;
/// let (release_tx, release_rx) = mpsc::channel::<()>();
/// let task = executor.handle().spawn_labelled(async move { release_rx.recv().unwrap() }, 42);
/// let long_poll = rx.recv().unwrap(); // reported while the task still blocks
/// assert_eq!(long_poll.label, Some(42));
/// release_tx.send(()).unwrap();
/// executor.block_on(task).unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongPoll {
    /// The worker slot running the poll (configured workers first, then spares).
    pub worker: usize,
    /// The task's label ([`Handle::spawn_labelled`](super::Handle::spawn_labelled)), if any.
    pub label: Option<u64>,
    /// How long the poll had run when detected (a lower bound, precise to one tick).
    pub elapsed: Duration,
}

/// The long-poll observer.
pub(crate) type ObserverFn = dyn Fn(&LongPoll) + Send + Sync;

/// The monitor's settings, from the builder.
#[derive(Clone)]
pub(crate) struct MonitorConfig {
    /// `false`: no monitor thread (no detection, no hand-off on a long poll); `block_in_place`
    /// still hands off.
    pub(crate) enabled: bool,
    pub(crate) threshold: Duration,
    pub(crate) observer: Option<std::sync::Arc<ObserverFn>>,
}

impl MonitorConfig {
    pub(crate) fn tick(&self) -> Duration {
        (self.threshold / 4).clamp(MIN_TICK, MAX_TICK)
    }
}

impl fmt::Debug for MonitorConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MonitorConfig")
            .field("enabled", &self.enabled)
            .field("threshold", &self.threshold)
            .field("observer", &self.observer.as_ref().map(|_| ".."))
            .finish()
    }
}

/// What one worker publishes for the monitor (module docs, "What each worker publishes").
#[derive(Default)]
pub(crate) struct Activity {
    /// Polls started and finished, times two: odd while inside a poll.
    pub(crate) seq: AtomicU64,
    /// The label of the task polled (or last polled).
    pub(crate) label: AtomicU64,
    /// The sequence of the poll the monitor asked to yield (module docs, "Preemption request");
    /// written by the monitor only.
    pub(crate) preempt: AtomicU64,
}

impl Activity {
    /// `true` if the monitor asked the poll now running in this slot to yield (called by the
    /// slot's worker, whose own store `seq` is).
    pub(crate) fn yield_requested(&self) -> bool {
        let seq = self.seq.load(Relaxed);
        seq % 2 == 1 && self.preempt.load(Relaxed) == seq
    }
}

/// What the monitor needs from the executor it watches (module docs, "Below the shared state").
pub(crate) trait MonitorHost {
    /// Hand-off step 2: moves what worker `index` has queued to the global injector.
    fn hand_over_queues(&self, index: usize);

    /// `true` if worker `index` has work queued (the nudge).
    fn has_queued_work(&self, index: usize) -> bool;

    /// Moves the task in worker `index`'s next slot, which no thief takes, to the global
    /// injector (the nudge).
    fn hand_over_next(&self, index: usize);

    /// Wakes a parked worker if none is searching and someone sleeps (the nudge).
    fn notify_parked(&self);

    /// Hand-off steps 3 and 4 (`start.rs`).
    fn hand_off(&self);

    /// `true` once shutdown has begun.
    fn is_shutdown(&self) -> bool;

    /// Configured workers not parked ("Sleeping when idle").
    fn num_unparked(&self) -> usize;
}

/// The monitor's state; `T` is the task type of the spare pool's deques (`spare.rs`).
pub(crate) struct Monitor<T> {
    pub(crate) config: MonitorConfig,
    threshold_ns: u64,
    tick_ns: u64,
    /// Per slot, written by its worker at every poll.
    pub(crate) activity: Box<[CachePadded<Activity>]>,
    /// Per slot, `LONG | BLOCKING`, rarely written; read by producers routing a wake.
    flags: Box<[CachePadded<AtomicU8>]>,
    /// Workers in a long poll, as of the last tick.
    stuck_long: AtomicUsize,
    /// Workers inside `block_in_place`.
    blocking: AtomicUsize,
    pub(crate) spares: Spares<T>,
    long_polls: AtomicU64,
    longest_ns: AtomicU64,
    longest_label: AtomicU64,
    /// Times every thread — the workers and the spares at their cap — was found held at once
    /// (`MonitorMetrics::exhausted`).
    exhausted: AtomicU64,
    sleeping: AtomicBool,
    wake: Mutex<bool>,
    wake_cv: Condvar,
}

/// How often, at most, the monitor warns that every thread is held
/// ([`Monitor::check_exhausted`]; every episode is counted).
const EXHAUSTED_WARN_EVERY_NS: u64 = 10_000_000_000;

/// The monitor's private memory of each slot between ticks.
pub(crate) struct View {
    slots: Vec<Seen>,
    /// Every slot was held (in a long poll or inside `block_in_place`) at the last tick: the
    /// episode was counted ([`Monitor::check_exhausted`]).
    exhausted: bool,
    /// When the last such episode was warned of (monitor clock, ns), if one was.
    warned_at: Option<u64>,
}

#[derive(Clone, Copy)]
struct Seen {
    seq: u64,
    /// When the monitor first saw `seq` (monitor clock, ns).
    since: u64,
    reported: bool,
    label: u64,
    /// The monitor set the slot's `LONG` flag.
    stuck: bool,
    class: Class,
}

/// Where a slot was at the last tick.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    /// Between polls, or in a poll younger than one tick.
    Running,
    /// In the same poll for at least one tick, less than the threshold.
    Slow,
    /// In the same poll for at least the threshold: a long poll.
    Long,
    /// Inside `block_in_place`.
    Blocking,
}

impl View {
    pub(crate) fn new<T>(monitor: &Monitor<T>, now: u64) -> View {
        View {
            slots: monitor
                .activity
                .iter()
                .map(|a| Seen {
                    seq: a.seq.load(Acquire),
                    since: now,
                    reported: false,
                    label: 0,
                    stuck: false,
                    class: Class::Running,
                })
                .collect(),
            exhausted: false,
            warned_at: None,
        }
    }
}

impl<T> Monitor<T> {
    pub(crate) fn new(config: MonitorConfig, slots: usize, spares: Spares<T>) -> Monitor<T> {
        Monitor {
            threshold_ns: u64::try_from(config.threshold.as_nanos()).unwrap_or(u64::MAX),
            tick_ns: u64::try_from(config.tick().as_nanos()).unwrap_or(u64::MAX),
            config,
            activity: (0..slots).map(|_| CachePadded::default()).collect(),
            flags: (0..slots).map(|_| CachePadded::default()).collect(),
            stuck_long: AtomicUsize::new(0),
            blocking: AtomicUsize::new(0),
            spares,
            long_polls: AtomicU64::new(0),
            longest_ns: AtomicU64::new(0),
            longest_label: AtomicU64::new(0),
            exhausted: AtomicU64::new(0),
            sleeping: AtomicBool::new(false),
            wake: Mutex::new(false),
            wake_cv: Condvar::new(),
        }
    }

    /// Spares that restore the configured parallelism: one per stuck worker, at most `max`.
    pub(crate) fn needed(&self) -> usize {
        (self.stuck_long.load(Acquire) + self.blocking.load(Acquire)).min(self.spares.max())
    }

    /// Retirement step 1 (surplus): more spares active than needed.
    pub(crate) fn is_surplus(&self) -> bool {
        self.spares.active() > self.needed()
    }

    /// The monitor's tick in nanoseconds: a poll this long is slow (loom models drive ticks).
    #[cfg(loom)]
    pub(crate) fn tick_ns(&self) -> u64 {
        self.tick_ns
    }

    /// Hand-off step 1's flag: `true` if wakes for `worker` should avoid its woken lane.
    pub(crate) fn is_stuck(&self, worker: usize) -> bool {
        self.flags[worker].load(Relaxed) != 0
    }

    /// One tick of the monitor (module docs, "Detection" and "Hand-off"); `now` is the monitor's
    /// clock in nanoseconds (a manual one under loom).
    pub(crate) fn tick(&self, shared: &impl MonitorHost, view: &mut View, now: u64) {
        // Pass 1: where each slot is, and report new long polls.
        let mut saturated = true;
        for (index, seen) in view.slots.iter_mut().enumerate() {
            let activity = &self.activity[index];
            let seq = activity.seq.load(Acquire);
            let blocking = self.flags[index].load(Acquire) & BLOCKING != 0;
            if seq != seen.seq {
                // The poll seen last time, if any, has ended.
                *seen = Seen {
                    seq,
                    since: now,
                    reported: false,
                    label: 0,
                    stuck: seen.stuck,
                    class: Class::Running,
                };
            }
            let elapsed = now.saturating_sub(seen.since);
            seen.class = if blocking {
                Class::Blocking
            } else if seq.is_multiple_of(2) {
                Class::Running
            } else if elapsed >= self.threshold_ns {
                Class::Long
            } else if elapsed >= self.tick_ns {
                Class::Slow
            } else {
                Class::Running
            };
            if matches!(seen.class, Class::Slow | Class::Long)
                && activity.preempt.load(Relaxed) != seq
            {
                activity.preempt.store(seq, Relaxed);
            }
            // A configured worker (the first slots) between polls or in a short one.
            if !self.spares.is_spare(index) && seen.class == Class::Running {
                saturated = false;
            }
            if seen.class == Class::Long {
                if !seen.reported {
                    let label = activity.label.load(Relaxed);
                    // Pairs with the worker's release fence before it stores a new label: if the
                    // label read is a later poll's, this re-read sees that poll's sequence.
                    fence(Acquire);
                    if activity.seq.load(Relaxed) == seq {
                        seen.reported = true;
                        seen.label = label;
                        self.report(index, label, elapsed);
                    }
                }
                if seen.reported && elapsed > self.longest_ns.load(Relaxed) {
                    // The monitor is the only writer of these two.
                    self.longest_ns.store(elapsed, Relaxed);
                    self.longest_label.store(seen.label, Relaxed);
                }
            }
        }
        // Pass 2: who is stuck; hand-off steps 1 and 2; the nudge.
        let mut stuck = 0;
        let mut held = 0;
        let mut nudge = false;
        for (index, seen) in view.slots.iter_mut().enumerate() {
            let is_stuck = match seen.class {
                Class::Long => true,
                Class::Slow => saturated,
                Class::Running | Class::Blocking => false,
            };
            if is_stuck != seen.stuck {
                seen.stuck = is_stuck;
                if is_stuck {
                    self.flags[index].fetch_or(LONG, Release);
                } else {
                    self.flags[index].fetch_and(!LONG, Release);
                }
            }
            if is_stuck || seen.class == Class::Blocking {
                shared.hand_over_queues(index);
            } else if seen.class == Class::Slow && shared.has_queued_work(index) {
                shared.hand_over_next(index);
                nudge = true;
            }
            stuck += usize::from(is_stuck);
            // A long poll or `block_in_place`: not a slow poll of a saturated executor, which
            // may end at its next tick (CPU-bound work; more threads would not help it).
            held += usize::from(matches!(seen.class, Class::Long | Class::Blocking));
        }
        self.check_exhausted(view, held, now);
        if nudge {
            shared.notify_parked();
        }
        self.stuck_long.store(stuck, Release);
        shared.hand_off();
    }

    /// Counts, once per episode, a tick that found all `held` — every configured worker and
    /// every spare the cap allows in a long poll or inside `block_in_place`: no thread is left
    /// to run anything else until one returns, and if they wait for work queued behind them (a
    /// `block_in_place` that waits for a task it spawned, more of them at once than threads),
    /// none ever will. A black-box review deadlocked 200 such waiters on 2 workers and 2 spares,
    /// and nothing said so. Warned of at most once per [`EXHAUSTED_WARN_EVERY_NS`] (10 s).
    fn check_exhausted(&self, view: &mut View, held: usize, now: u64) {
        let exhausted = held == view.slots.len();
        if exhausted && !view.exhausted {
            self.exhausted.fetch_add(1, Relaxed);
            let quiet = view
                .warned_at
                .is_some_and(|at| now.saturating_sub(at) < EXHAUSTED_WARN_EVERY_NS);
            if !quiet {
                view.warned_at = Some(now);
                tracing::warn!(
                    threads = held,
                    spares = self.spares.max(),
                    "every worker thread is blocked (in `block_in_place` or a long poll) and \
                     the spare workers are at their cap: queued work waits until one returns, \
                     and for ever if they wait for it; raise `max_spare_workers`"
                );
            }
        }
        view.exhausted = exhausted;
    }

    fn report(&self, worker: usize, label: u64, elapsed: u64) {
        self.long_polls.fetch_add(1, Relaxed);
        let long_poll = LongPoll {
            worker,
            label: (label != 0).then_some(label),
            elapsed: Duration::from_nanos(elapsed),
        };
        let observed = catch_unwind(AssertUnwindSafe(|| match &self.config.observer {
            Some(observer) => observer(&long_poll),
            None => tracing::warn!(
                worker,
                label = long_poll.label,
                elapsed_ms = long_poll.elapsed.as_secs_f64() * 1e3,
                "long poll: a task has been running for longer than the threshold; \
                 use `block_in_place` around blocking code"
            ),
        }));
        if observed.is_err() {
            tracing::error!("the long-poll observer panicked");
        }
    }

    /// `block_in_place` entry (module docs, hand-off step 1 for a worker that declares itself
    /// blocked). Only the worker itself sets and clears its `BLOCKING` bit.
    pub(crate) fn enter_blocking(&self, worker: usize) {
        self.flags[worker].fetch_or(BLOCKING, SeqCst);
        self.blocking.fetch_add(1, SeqCst);
    }

    pub(crate) fn leave_blocking(&self, worker: usize) {
        self.blocking.fetch_sub(1, SeqCst);
        self.flags[worker].fetch_and(!BLOCKING, SeqCst);
    }

    pub(crate) fn snapshot(&self, configured: usize) -> MonitorMetrics {
        let label = self.longest_label.load(Relaxed);
        MonitorMetrics {
            long_polls: self.long_polls.load(Relaxed),
            longest_poll_ns: self.longest_ns.load(Relaxed),
            longest_poll_label: (label != 0).then_some(label),
            spares_started: self.spares.started(),
            spares_retired: self.spares.retired(),
            spare_threads: self.spares.threads(),
            spare_threads_ended: self.spares.expired(),
            active_workers: configured + self.spares.active(),
            stuck_workers: self.stuck_long.load(Relaxed) + self.blocking.load(Relaxed),
            exhausted: self.exhausted.load(Relaxed),
        }
    }

    /// `true` if the monitor may sleep without a timeout ("Sleeping when idle").
    #[cfg_attr(loom, allow(dead_code))] // the monitor thread does not exist under loom
    fn is_quiet(&self, shared: &impl MonitorHost) -> bool {
        shared.num_unparked() == 0
            && self.spares.active() == 0
            && self.blocking.load(SeqCst) == 0
            && self.stuck_long.load(Relaxed) == 0
    }

    /// A worker left the sleeper list: wake the monitor if it sleeps ("Sleeping when idle").
    pub(crate) fn on_worker_unparked(&self) {
        if self.config.enabled && self.sleeping.load(SeqCst) {
            self.wake();
        }
    }

    /// Wakes the monitor thread (idle→busy edge, or shutdown).
    pub(crate) fn wake(&self) {
        *lock(&self.wake) = true;
        self.wake_cv.notify_one();
    }

    /// Waits for a wake, or `timeout`; `false` once shutdown began.
    #[cfg(not(loom))]
    fn wait(&self, shared: &impl MonitorHost, timeout: Option<Duration>) -> bool {
        let mut woken = lock(&self.wake);
        match timeout {
            None => {
                while !*woken && !shared.is_shutdown() {
                    woken = match self.wake_cv.wait(woken) {
                        Ok(guard) => guard,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                }
            }
            Some(timeout) => {
                if !*woken && !shared.is_shutdown() {
                    woken = match self.wake_cv.wait_timeout(woken, timeout) {
                        Ok((guard, _)) => guard,
                        Err(poisoned) => poisoned.into_inner().0,
                    };
                }
            }
        }
        *woken = false;
        !shared.is_shutdown()
    }
}

/// The monitor thread's loop: tick while work exists, sleep while the executor is idle, stop at
/// shutdown.
#[cfg(not(loom))]
pub(crate) fn run<T>(monitor: &Monitor<T>, shared: &impl MonitorHost) {
    let origin = std::time::Instant::now();
    let clock = || u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let tick = monitor.config.tick();
    let mut view = View::new(monitor, clock());
    tracing::trace!(?tick, "monitor started");
    while monitor.wait(shared, Some(tick)) {
        monitor.tick(shared, &mut view, clock());
        if monitor.is_quiet(shared) {
            monitor.sleeping.store(true, SeqCst);
            let quiet = monitor.is_quiet(shared);
            if quiet {
                tracing::trace!("monitor sleeping: executor idle");
                if !monitor.wait(shared, None) {
                    break;
                }
                // Woken by work: sample at once, so that a poll already running is seen slow a
                // tick from now (the nudge), not two — the first sample only starts its clock.
                monitor.sleeping.store(false, SeqCst);
                monitor.tick(shared, &mut view, clock());
            }
            monitor.sleeping.store(false, SeqCst);
        }
    }
    tracing::trace!("monitor stopped");
}

impl<T> fmt::Debug for Monitor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Monitor")
            .field("config", &self.config)
            .field("spares", &self.spares)
            .finish_non_exhaustive()
    }
}
