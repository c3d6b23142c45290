//! Admission, the shutdown phases, and the accounting that counts every process once.
//!
//! The protocol (spawn vs. shutdown, and why no process is counted twice or never) is written as
//! numbered steps in the [module docs of `scheduler`](super); this file holds its state:
//!
//! | field | written by | read by |
//! |---|---|---|
//! | `live` | spawn (admission), every finish and failed spawn | shutdown's waits |
//! | `shutting_down` | shutdown step 1 (once; never unset) | spawn, every finish |
//! | `forcing` | shutdown step 3 (once; never unset) | every step (stop), every finish (count) |
//! | `tally` | finishes during shutdown; the seal | the seal, spawns during shutdown |

use super::error::SpawnError;
use crate::loom::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};
use crate::loom::{lock, Condvar, Mutex, MutexGuard};
use crate::process::wake_foreign;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// What [`Scheduler::shutdown`](crate::Scheduler::shutdown) did: every process live during
/// shutdown is counted exactly once, in one of the three fields.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let sched = procsched::Scheduler::builder().workers(1).build()?;
/// let report = sched.shutdown(Duration::from_millis(100));
/// assert_eq!(report.total(), 0);
/// assert!(report.is_complete());
/// # Ok::<(), procsched::error::BuildError>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShutdownReport {
    /// Processes that finished on their own during the grace period (after their `Cancel`).
    pub graceful: usize,
    /// Processes still live at the timeout and not inside user code: stopped before their next
    /// step, their `close` run before `shutdown` returned — and those inside a step at the
    /// timeout that returned from it within the wait for the workers. Their handles report
    /// [`ProcessError::is_cancelled`](crate::error::ProcessError::is_cancelled), unless that
    /// last step panicked: then `is_panicked`, as the metrics count it (`finished.panicked`).
    pub forced: usize,
    /// Processes still inside user code (`init`, a `step` or `close`) when shutdown gave up
    /// waiting ([`FORCED_STOP_WAIT`](crate::config::FORCED_STOP_WAIT) after the timeout for the
    /// workers, and up to twice that after it for the forced processes' `close` calls) — a forced
    /// process whose `close` had not run yet among them (with many processes, most of them). Rust cannot preempt them: each is stopped when
    /// its call returns — its `close` runs then, on the thread that ran it, and its handle
    /// reports cancellation (a spawn still in `init` fails with
    /// [`SpawnError::ShuttingDown`]). [`Scheduler::wait_for_abandoned`](crate::Scheduler::wait_for_abandoned)
    /// waits for them.
    pub abandoned: usize,
}

impl ShutdownReport {
    /// Every process counted: `graceful + forced + abandoned`. Each once — including a
    /// process whose spawn was still inside `init` when the shutdown came: it is counted
    /// `abandoned` though its `spawn` returned [`SpawnError::ShuttingDown`], so the total can
    /// exceed the handles the spawning code holds.
    ///
    /// # Examples
    ///
    /// ```
    /// let report = procsched::metrics::ShutdownReport::default();
    /// assert_eq!(report.total(), 0);
    /// ```
    pub fn total(&self) -> usize {
        self.graceful + self.forced + self.abandoned
    }

    /// `true` if no process was abandoned: every `close` had run when shutdown returned.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::metrics::ShutdownReport::default().is_complete());
    /// ```
    pub fn is_complete(&self) -> bool {
        self.abandoned == 0
    }
}

/// Why a process (or an admitted spawn) leaves `live`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leave {
    /// A process finished (its `close` ran): counted if shutdown is under way and not sealed.
    Finished,
    /// A spawn failed after admission (`init` failed, no free slot, or shutdown sealed): it never
    /// became a process, so it is not counted (the seal may have counted it as abandoned while it
    /// was still inside `init`).
    Refused,
}

/// Where a finish landed in shutdown's accounting ([`Lifecycle::leave_tallied`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tallied {
    /// No shutdown had begun (or the leave was a refused spawn): not counted.
    Untallied,
    /// Counted `graceful`.
    Graceful,
    /// Counted `forced`.
    Forced,
    /// After the seal: the process was counted `abandoned`.
    Sealed,
}

pub(crate) struct Lifecycle {
    /// Admitted processes (and admissions in progress) not yet finished.
    live: AtomicUsize,
    shutting_down: AtomicBool,
    /// The grace period is over: processes stop before their next step.
    forcing: AtomicBool,
    tally: Mutex<Tally>,
    /// Signalled (under `tally`) when `live` reaches zero during shutdown.
    idle: Condvar,
    max_processes: usize,
}

/// Counts of shutdown; touched only once shutdown has begun, under its lock.
#[derive(Default)]
struct Tally {
    graceful: usize,
    forced: usize,
    /// The report is out: later finishes were counted as abandoned by the seal.
    sealed: bool,
    /// Async waiters for `live == 0`.
    waiters: Vec<Waker>,
}

impl Lifecycle {
    pub(crate) fn new(max_processes: usize) -> Lifecycle {
        Lifecycle {
            live: AtomicUsize::new(0),
            shutting_down: AtomicBool::new(false),
            forcing: AtomicBool::new(false),
            tally: Mutex::new(Tally::default()),
            idle: Condvar::new(),
            max_processes,
        }
    }

    /// Spawn steps 1–2: reserve a place in `live`, unless shutdown has begun or the limit is
    /// reached. Reserving first means concurrent spawns can never overshoot the limit.
    pub(crate) fn admit(&self) -> Result<(), SpawnError> {
        // Step 1: only an early exit; the decision is step 2's.
        if self.shutting_down.load(Relaxed) {
            return Err(SpawnError::ShuttingDown);
        }
        let live_before = self.live.fetch_add(1, AcqRel);
        // Step 2: the Dekker pair with `begin_shutdown`. SeqCst accesses without the fence would
        // do in the C++ model, but loom models them as AcqRel and then finds a spawn that
        // shutdown misses; the fence keeps the proof checkable.
        fence(SeqCst);
        if self.shutting_down.load(Relaxed) {
            self.leave(Leave::Refused, || {});
            return Err(SpawnError::ShuttingDown);
        }
        if live_before >= self.max_processes {
            self.leave(Leave::Refused, || {});
            return Err(SpawnError::Limit(self.max_processes));
        }
        Ok(())
    }

    /// Spawn step 4: `true` if the report is out, so a spawn that just finished `init` must fail.
    /// Takes the tally lock (only during shutdown): the seal sets the flag and scans the cells
    /// in one critical section, so a spawn whose open cell the scan missed sees the flag here.
    pub(crate) fn is_sealed(&self) -> bool {
        self.shutting_down.load(Acquire) && lock(&self.tally).sealed
    }

    /// `true` once shutdown has begun.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Acquire)
    }

    /// `true` once the grace period is over.
    #[inline]
    pub(crate) fn is_forcing(&self) -> bool {
        self.forcing.load(Relaxed)
    }

    /// Admitted processes not yet finished.
    pub(crate) fn live(&self) -> usize {
        self.live.load(Acquire)
    }

    /// [`live`](Self::live) as a user reads it: never above the limit. A spawn refused at the
    /// limit reserves its place and gives it back (steps 1–2 of [`admit`](Self::admit)), so the
    /// counter itself may read a few over while refused spawns race; no process is admitted
    /// past the limit.
    pub(crate) fn admitted(&self) -> usize {
        self.live().min(self.max_processes)
    }

    /// Shutdown step 1 (the flag and its fence; the caller then cancels every cell). Returns
    /// `false` if shutdown had begun already.
    pub(crate) fn begin_shutdown(&self) -> bool {
        if self.shutting_down.swap(true, SeqCst) {
            return false;
        }
        // Pairs with admission's fence (spawn step 2), with the fence after a cell is created
        // (`Table::create_cell`), and with the last finisher's fence in `leave`.
        fence(SeqCst);
        true
    }

    /// Shutdown step 3.
    pub(crate) fn begin_forcing(&self) {
        self.forcing.store(true, SeqCst);
    }

    /// Shutdown step 5: the report, final. `occupied` counts the cells still hosting a process;
    /// it runs under the tally lock, so no finish can count its process in between.
    pub(crate) fn seal(&self, occupied: impl FnOnce() -> usize) -> ShutdownReport {
        let mut tally = lock(&self.tally);
        tally.sealed = true;
        ShutdownReport {
            graceful: tally.graceful,
            forced: tally.forced,
            abandoned: occupied(),
        }
    }

    /// The report as it stands before the seal, for a `shutdown` called from user code the
    /// forced stop runs: the finishes counted so far, and every process still live as
    /// abandoned (it is not closed yet when that call returns).
    pub(crate) fn so_far(&self) -> ShutdownReport {
        let tally = lock(&self.tally);
        ShutdownReport {
            graceful: tally.graceful,
            forced: tally.forced,
            abandoned: self.live.load(Acquire),
        }
    }

    /// A process finished, or an admitted spawn failed: count it (during shutdown), run `release`
    /// (which frees its cell) and leave `live`, waking the waiters if it was the last.
    pub(crate) fn leave(&self, why: Leave, release: impl FnOnce()) {
        self.leave_tallied(why, |_| release());
    }

    /// [`leave`](Self::leave), telling `release` how the finish was counted — in the same
    /// critical section, so the scheduler's metrics agree with the [`ShutdownReport`].
    pub(crate) fn leave_tallied(&self, why: Leave, release: impl FnOnce(Tallied)) {
        if !self.shutting_down.load(Acquire) {
            release(Tallied::Untallied);
            if self.live.fetch_sub(1, AcqRel) <= 2 {
                // The last one out (or the last but the one a shutdown awaited inside a process
                // waits for, `wait_idle`'s `floor`): pairs with `begin_shutdown`'s fence. Either
                // the waiter sees `live` at its floor, or we see its flag and notify under its
                // lock.
                fence(SeqCst);
                if self.shutting_down.load(Relaxed) {
                    Self::notify_idle(&self.idle, lock(&self.tally));
                }
            }
            return;
        }
        let mut tally = lock(&self.tally);
        let tallied = if why == Leave::Refused {
            Tallied::Untallied
        } else if tally.sealed {
            Tallied::Sealed
        } else if self.forcing.load(Acquire) {
            tally.forced += 1;
            Tallied::Forced
        } else {
            tally.graceful += 1;
            Tallied::Graceful
        };
        release(tallied);
        if self.live.fetch_sub(1, AcqRel) <= 2 {
            Self::notify_idle(&self.idle, tally);
        }
    }

    /// Wakes every waiter for `live == 0`, blocking and async, to look again at what it waits
    /// with: a shutdown's deadline moved (`shutdown.rs`, `Grant`).
    pub(crate) fn nudge(&self) {
        Self::notify_idle(&self.idle, lock(&self.tally));
    }

    fn notify_idle(idle: &Condvar, mut tally: MutexGuard<'_, Tally>) {
        idle.notify_all();
        let waiters = std::mem::take(&mut tally.waiters);
        // After the unlock, each contained (`foreign_wake.rs`): a shutdown's waiter is a task
        // procsched does not own, woken here from the finish of the last process, which must
        // complete whatever its waker does.
        drop(tally);
        for waiter in waiters {
            wake_foreign("a task awaiting a shutdown", waiter);
        }
    }

    /// Waits until no process is live or `deadline` passes; `true` if none is. Meaningful once
    /// shutdown has begun (only then do finishes signal).
    pub(crate) fn wait_idle(&self, deadline: Instant) -> bool {
        self.wait_idle_until(|| deadline)
    }

    /// [`wait_idle`](Self::wait_idle) for a deadline that may move: read again at each wake-up
    /// ([`nudge`](Self::nudge) wakes the waiters when it has moved).
    pub(crate) fn wait_idle_until(&self, deadline: impl Fn() -> Instant) -> bool {
        let mut tally = lock(&self.tally);
        loop {
            if self.live.load(Acquire) == 0 {
                return true;
            }
            let deadline = deadline();
            let now = Instant::now();
            // Loom cannot model time (its `wait_timeout` never times out): wait for real there.
            if now >= deadline && !cfg!(loom) {
                return false;
            }
            tally = match self.idle.wait_timeout(tally, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Async [`wait_idle`](Self::wait_idle), without a deadline, until at most `floor` (0 or 1)
    /// processes are live: 1 for a shutdown awaited inside one of the scheduler's own processes,
    /// which cannot finish while it waits.
    pub(crate) fn poll_idle(&self, cx: &mut Context<'_>, floor: usize) -> Poll<()> {
        debug_assert!(floor <= 1, "finishes signal down to one live process");
        let mut tally = lock(&self.tally);
        if self.live.load(Acquire) <= floor {
            return Poll::Ready(());
        }
        if !tally.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            tally.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("live", &self.live.load(Relaxed))
            .field("shutting_down", &self.shutting_down.load(Relaxed))
            .field("forcing", &self.forcing.load(Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_refused_spawns_reservation_never_shows_above_the_limit() {
        let lifecycle = Lifecycle::new(2);
        lifecycle.admit().unwrap();
        lifecycle.admit().unwrap();
        // A third spawn between its reservation and its refusal (`admit`, steps 1–2).
        lifecycle.live.fetch_add(1, AcqRel);
        assert_eq!(lifecycle.live(), 3);
        assert_eq!(
            lifecycle.admitted(),
            2,
            "what a user reads stays at the limit"
        );
        lifecycle.live.fetch_sub(1, AcqRel);
        assert!(matches!(lifecycle.admit(), Err(SpawnError::Limit(2))));
        assert_eq!(lifecycle.admitted(), 2);
    }
}
