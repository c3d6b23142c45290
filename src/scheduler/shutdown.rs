//! The shutdown driver: graceful, then forced, then the report (steps 2–5 of "Protocol: spawn
//! vs. shutdown", module docs of `scheduler`), blocking or awaited, for the API of
//! [`Scheduler`](crate::Scheduler) and its `Drop`; and the waits for abandoned processes after it.

use super::blocking;
use super::closers;
use super::deadline::Deadline;
use super::lifecycle::ShutdownReport;
use super::shared::Inner;
use super::tasks;
use crate::executor::Executor;
use crate::loom::{lock, Arc, Condvar, Mutex, MutexGuard};
use crate::process::async_fn::current_owner;
use crate::process::context::HostId;
use crate::process::wake_foreign;
use std::cell::RefCell;
use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// How long shutdown waits, after its timeout, for workers to leave the poll they are in; the
/// `close` calls of the processes it forces (they run on threads of their own) then get the rest
/// of `2 × FORCED_STOP_WAIT` after the timeout. A process still inside user code then (a step or
/// a `close` that blocks or loops), or whose forced `close` has not run yet (too many to close
/// in time), is *abandoned*: counted in [`ShutdownReport::abandoned`], and closed when its call
/// returns, or its turn comes. So [`Scheduler::shutdown`](crate::Scheduler::shutdown) returns
/// within `timeout + 2 × FORCED_STOP_WAIT`, whatever the number of processes — give or take
/// the time the operating system takes to run the threads involved: a black-box review saw up
/// to 11 ms more on two cores loaded with 250 000 processes and five threads spawning.
pub const FORCED_STOP_WAIT: Duration = Duration::from_millis(50);

/// What the forced stop keeps, of its `2 × FORCED_STOP_WAIT`, for its own work after the
/// closes' wait (the seal, the watcher's start, the report's traces): the wait ends this much
/// earlier, so that `shutdown` returns within its bound.
const REPORT_MARGIN: Duration = Duration::from_millis(2);

/// A scheduler's threads and their shutdown: run once, its report kept for every later call.
///
/// One caller *claims* the stop and runs it with no lock held: the forced stop runs user code —
/// drops on its thread, and process drops and `close`s on its closer threads (`closers.rs`) —
/// and that code may call `shutdown` again (a drop guard that shuts the application down with
/// its process). Such a re-entrant call, on the thread that holds the claim or on one of its
/// closers, returns the report so far at once ([`STOPPING`]); every other caller waits,
/// blocking on `stopped` or awaiting a waker, for the claimant's report.
pub(super) struct Shutdown {
    /// `None` only once `Drop` handed it to a background shutdown.
    engine: Option<Engine>,
    state: Mutex<Stop>,
    /// Signalled when the claimant publishes its report (or gives the claim up).
    stopped: Condvar,
    drop_timeout: Duration,
}

/// Who stops the scheduler, and the result.
#[derive(Default)]
struct Stop {
    /// The first stop's report, kept for every later call.
    report: Option<ShutdownReport>,
    /// A caller has claimed the stop and not published its report yet.
    claimed: bool,
    /// `shutdown_async` callers waiting for the claimant's report.
    waiters: Vec<Waker>,
    /// The calls in progress, first call first, each with its own deadline (each holds a
    /// [`Grant`]): the first one's is the deadline in force.
    grants: Vec<(u64, Instant)>,
    /// The next grant's id.
    next_grant: u64,
}

/// A shutdown call in progress: while it lasts, later calls keep to its deadline rather than
/// their own, so that a concurrent call with a shorter timeout (a signal handler's, a library's)
/// cannot cut short the grace period the first call gave ("concurrent callers get the first
/// call's report"). A call dropped before it resolves (`shutdown_async` under a timeout) gives
/// its deadline up: the next call in progress's own is in force from then on — read again by
/// the waits, which its drop wakes — so the call that finishes the shutdown keeps to its own.
/// (A review saw a `shutdown(300 ms)` made while a dropped `shutdown_async(10 s)` was in
/// progress wait the 10 s: the first version copied the deadline once, at the call.)
struct Grant<'a> {
    shutdown: &'a Shutdown,
    inner: &'a Inner,
    id: u64,
    /// The call's own deadline.
    own: Instant,
}

impl Grant<'_> {
    /// The deadline this call keeps to now: the first call in progress's.
    fn deadline(&self) -> Instant {
        lock(&self.shutdown.state)
            .grants
            .first()
            .map_or(self.own, |&(_, first)| first)
    }
}

impl Drop for Grant<'_> {
    fn drop(&mut self) {
        let moved = {
            let mut state = lock(&self.shutdown.state);
            let was_first = state.grants.first().is_some_and(|(id, _)| *id == self.id);
            state.grants.retain(|(id, _)| *id != self.id);
            was_first && !state.grants.is_empty()
        };
        if moved {
            // After the unlock: the waits take the state lock to read the deadline again.
            self.inner.lifecycle.nudge();
        }
    }
}

crate::loom::thread_local_const! {
    /// The schedulers whose stop this thread is running (a stack: a process of one may shut
    /// down another in its `close`).
    static STOPPING: RefCell<Vec<HostId>> = RefCell::new(Vec::new());
}

/// `true` if this thread is running `host`'s stop: a `shutdown` called now comes from user
/// code that stop runs, and must not wait for it.
pub(super) fn stopping_here(host: HostId) -> bool {
    STOPPING.with(|stack| stack.borrow().contains(&host))
}

/// Marks a thread as running `host`'s stop — the claimant's, and each closer of its forced stop
/// (`closers.rs`) — for as long as it lives: a `shutdown` called there returns the report so far.
pub(super) struct StoppingHere {
    host: HostId,
    marked: bool,
}

impl StoppingHere {
    pub(super) fn mark(host: HostId) -> StoppingHere {
        STOPPING.with(|stack| stack.borrow_mut().push(host));
        StoppingHere { host, marked: true }
    }

    fn unmark(&mut self) {
        if !std::mem::replace(&mut self.marked, false) {
            return;
        }
        STOPPING.with(|stack| {
            let mut stack = stack.borrow_mut();
            if let Some(at) = stack.iter().rposition(|host| *host == self.host) {
                stack.remove(at);
            }
        });
    }
}

impl Drop for StoppingHere {
    fn drop(&mut self) {
        self.unmark();
    }
}

/// The claim on a scheduler's stop, held by the thread running it. Dropped — even by a panic
/// unwinding out of the stop — it publishes the report, or gives the claim up for the next
/// caller, and wakes the waiters.
struct Claim<'a> {
    shutdown: &'a Shutdown,
    /// Unmarks this thread when the claim is dropped, before the waiters are woken.
    stopping: StoppingHere,
    report: Option<ShutdownReport>,
}

impl<'a> Claim<'a> {
    /// Marks this thread as running `host`'s stop; `state` must show the claim taken.
    fn new(shutdown: &'a Shutdown, host: HostId) -> Claim<'a> {
        Claim {
            shutdown,
            stopping: StoppingHere::mark(host),
            report: None,
        }
    }

    fn publish(mut self, report: ShutdownReport) -> ShutdownReport {
        self.report = Some(report);
        report
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.stopping.unmark();
        let waiters = {
            let mut state = lock(&self.shutdown.state);
            state.claimed = false;
            if state.report.is_none() {
                state.report = self.report;
            }
            std::mem::take(&mut state.waiters)
        };
        self.shutdown.stopped.notify_all();
        // Not ours (`foreign_wake.rs`): a waiter's panicking waker must not unwind into the
        // shutdown that is handing out its report, nor keep the next waiter from its wake.
        for waiter in waiters {
            wake_foreign("a task awaiting a shutdown's report", waiter);
        }
    }
}

/// What the scheduler owns beyond the shared state: the threads.
struct Engine {
    executor: Executor,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Engine {
    /// Shutdown steps 2–5 (module docs of `scheduler`), after step 1, to the deadline in force
    /// (read again when woken: `Grant`).
    fn stop(&self, inner: &Arc<Inner>, deadline: impl Fn() -> Instant) -> ShutdownReport {
        inner.lifecycle.wait_idle_until(&deadline);
        self.force(inner, deadline())
    }

    /// Shutdown steps 3–5, after the grace period that ended at `deadline`: done by
    /// `deadline + 2 × FORCED_STOP_WAIT` whatever the number of processes. The workers get
    /// `FORCED_STOP_WAIT` at most to leave their polls, the closes what is left until
    /// [`REPORT_MARGIN`] before the end (so a late start — a step 1 or 2 that overran its deadline
    /// by a piece, a thread the OS ran late — shortens the closes' wait instead of the bound), and
    /// the steps that visit every process are done in pieces within those waits (the table walk,
    /// by the closers) or not at all (the seal reads a count).
    fn force(&self, inner: &Arc<Inner>, deadline: Instant) -> ShutdownReport {
        let closes_deadline = deadline + 2 * FORCED_STOP_WAIT - REPORT_MARGIN;
        let live = inner.lifecycle.live();
        if live > 0 {
            tracing::info!(
                live,
                "scheduler shutdown: grace period over, forcing the rest"
            );
        }
        inner.lifecycle.begin_forcing();
        let stopped = self.executor.shutdown(FORCED_STOP_WAIT);
        // Process tasks are not in the executor's owned list: cancel them through their cells,
        // their `close` calls on closer threads, so that one that blocks cannot hang us; the
        // cells are walked by the closers too, a piece at a time (`tasks.rs`, step 4).
        let closed = closers::close_all(
            inner.host_id,
            inner.process_runtime_if_any(),
            Vec::new(),
            Some(tasks::walk_all(inner.clone())),
            closes_deadline,
        );
        tracing::debug!(
            cancelled = closed.dropped,
            unfinished = closed.unfinished,
            unwalked = closed.unwalked,
            "scheduler shutdown: process tasks cancelled"
        );
        // A count, not a walk of the cells: the seal holds the tally lock every finish takes.
        let report = inner.lifecycle.seal(|| inner.table.occupied());
        if report.abandoned > 0 {
            tracing::warn!(
                abandoned = report.abandoned,
                stuck_workers = stopped.stuck_workers,
                unfinished_closes = closed.unfinished,
                unwalked = closed.unwalked,
                "shutdown gave up on processes still inside user code; each is closed when its call returns"
            );
        }
        tracing::info!(
            graceful = report.graceful,
            forced = report.forced,
            abandoned = report.abandoned,
            "scheduler shut down"
        );
        report
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Never blocks, and is allowed inside an async context (a plain drop is not).
            runtime.shutdown_background();
        }
    }
}

impl Shutdown {
    pub(super) fn new(
        executor: Executor,
        runtime: Option<tokio::runtime::Runtime>,
        drop_timeout: Duration,
    ) -> Shutdown {
        Shutdown {
            engine: Some(Engine { executor, runtime }),
            state: Mutex::new(Stop::default()),
            stopped: Condvar::new(),
            drop_timeout,
        }
    }

    fn engine(&self) -> &Engine {
        self.engine
            .as_ref()
            .expect("the engine is taken only by Drop")
    }

    /// The workers (for [`Scheduler::block_on`](crate::Scheduler::block_on)).
    pub(super) fn executor(&self) -> &Executor {
        &self.engine().executor
    }

    /// The [`Grant`] of a call with `timeout`, and the deadline it keeps to now: the first call
    /// in progress's, else its own.
    fn grant<'a>(&'a self, inner: &'a Inner, timeout: Duration) -> (Instant, Grant<'a>) {
        let own = crate::deadline::after(timeout);
        let mut state = lock(&self.state);
        let id = state.next_grant;
        state.next_grant += 1;
        state.grants.push((id, own));
        let in_force = state.grants[0].1;
        let grant = Grant {
            shutdown: self,
            inner,
            id,
            own,
        };
        (in_force, grant)
    }

    /// [`Scheduler::shutdown`](crate::Scheduler::shutdown), once the caller may block.
    pub(super) fn shutdown(&self, inner: &Arc<Inner>, timeout: Duration) -> ShutdownReport {
        let (deadline, grant) = self.grant(inner, timeout);
        inner.begin_shutdown(deadline);
        if stopping_here(inner.host_id) {
            return so_far(inner);
        }
        let mut state = lock(&self.state);
        loop {
            if let Some(report) = state.report {
                return report;
            }
            if !state.claimed {
                break;
            }
            state = wait(&self.stopped, state);
        }
        state.claimed = true;
        drop(state);
        let claim = Claim::new(self, inner.host_id);
        claim.publish(self.engine().stop(inner, || grant.deadline()))
    }

    /// [`Scheduler::shutdown_async`](crate::Scheduler::shutdown_async).
    pub(super) async fn shutdown_async(
        &self,
        inner: &Arc<Inner>,
        timeout: Duration,
    ) -> ShutdownReport {
        let (deadline, grant) = self.grant(inner, timeout);
        inner.begin_shutdown(deadline);
        if stopping_here(inner.host_id) {
            return so_far(inner);
        }
        if let Some(report) = lock(&self.state).report {
            return report;
        }
        // Awaited inside one of our own processes, the caller cannot finish while it waits: the
        // grace period waits for every *other* process (method docs).
        let floor = usize::from(called_from_own_process(inner));
        let mut all_finished = pin!(idle(inner, floor));
        loop {
            let in_force = grant.deadline();
            let mut passed = Deadline::new(in_force);
            let moved = std::future::poll_fn(|cx| {
                if all_finished.as_mut().poll(cx).is_ready()
                    || Pin::new(&mut passed).poll(cx).is_ready()
                {
                    return Poll::Ready(false);
                }
                // Read after the idle wait registered: a grant given up from now on wakes it.
                if grant.deadline() != in_force {
                    return Poll::Ready(true);
                }
                Poll::Pending
            })
            .await;
            if !moved {
                break;
            }
        }
        // The report if another caller made it (or is making it), else the claim on the stop.
        let claimed = std::future::poll_fn(|cx| {
            let mut state = lock(&self.state);
            if let Some(report) = state.report {
                return Poll::Ready(Err(report));
            }
            if state.claimed {
                if !state.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    state.waiters.push(cx.waker().clone());
                }
                return Poll::Pending;
            }
            state.claimed = true;
            Poll::Ready(Ok(()))
        })
        .await;
        if let Err(report) = claimed {
            return report;
        }
        let claim = Claim::new(self, inner.host_id);
        claim.publish(self.engine().force(inner, grant.deadline()))
    }

    /// The `Drop` of [`Scheduler`](crate::Scheduler): a blocking shutdown with the drop timeout,
    /// or — inside an async context or on a worker — `Cancel` to every process and the rest in
    /// the background.
    pub(super) fn on_drop(&mut self, inner: &Arc<Inner>) {
        let Some(engine) = self.engine.take() else {
            return;
        };
        // `&mut self`: no other caller can hold a claim on the stop now.
        if lock(&self.state).report.is_some() {
            // Already shut down; dropping the engine does not block. The runtime the scheduler
            // built goes with it, not with the last handle (`lazy_runtime.rs`).
            inner.shut_down_own_runtime();
            return;
        }
        let inner = inner.clone();
        let deadline = crate::deadline::after(self.drop_timeout);
        inner.begin_shutdown(deadline);
        if blocking::async_context().is_none() {
            engine.stop(&inner, || deadline);
            inner.shut_down_own_runtime();
            return;
        }
        // Inside an async context or on a worker (a process's `close` dropped its scheduler):
        // waiting here would stall the very thread the processes may need. Every process has its
        // `Cancel`; the rest of the shutdown runs in the background.
        // The engine is handed over through a slot, so that it is still here if the thread
        // cannot start: process tasks are cancelled only by the scheduler's forced stop
        // (`tasks.rs`), not by dropping the executor.
        let slot = Arc::new(Mutex::new(Some(engine)));
        let started = {
            let (slot, inner) = (slot.clone(), inner.clone());
            std::thread::Builder::new()
                .name("procsched-shutdown".to_owned())
                .spawn(move || {
                    let engine = lock(&slot).take();
                    if let Some(engine) = engine {
                        engine.stop(&inner, || deadline);
                    }
                    inner.shut_down_own_runtime();
                })
        };
        if let Err(error) = started {
            tracing::warn!(%error, "could not start a shutdown thread; forcing the shutdown in place");
            let engine = lock(&slot).take();
            if let Some(engine) = engine {
                engine.force(&inner, deadline);
            }
            inner.shut_down_own_runtime();
        }
    }
}

/// [`Scheduler::wait_for_abandoned`](crate::Scheduler::wait_for_abandoned), once the caller may
/// block.
pub(super) fn wait_for_abandoned(inner: &Inner, timeout: Duration) -> bool {
    let lifecycle = &inner.lifecycle;
    if !lifecycle.is_shutting_down() {
        return lifecycle.live() == 0;
    }
    lifecycle.wait_idle(crate::deadline::after(timeout))
}

/// [`Scheduler::wait_for_abandoned_async`](crate::Scheduler::wait_for_abandoned_async).
pub(super) async fn wait_for_abandoned_async(inner: &Inner) {
    if !inner.lifecycle.is_shutting_down() {
        // Finishes signal only during shutdown; until then, poll the count at a gentle pace.
        while inner.lifecycle.live() > 0 {
            Deadline::new(Instant::now() + Duration::from_millis(1)).await;
        }
        return;
    }
    idle(inner, 0).await;
}

/// Resolves when at most `floor` processes are live (signalled during shutdown).
fn idle(inner: &Inner, floor: usize) -> impl Future<Output = ()> + '_ {
    std::future::poll_fn(move |cx| inner.lifecycle.poll_idle(cx, floor))
}

/// What a re-entrant `shutdown` returns (method docs of
/// [`Scheduler::shutdown`](crate::Scheduler::shutdown)): the processes counted so far, and every
/// process not closed yet as abandoned — the caller's own among them, so it is never complete.
fn so_far(inner: &Inner) -> ShutdownReport {
    inner.lifecycle.so_far()
}

/// Waits on `condvar`, ignoring poisoning (as [`lock`] does).
fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    match condvar.wait(guard) {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// `true` if the caller is the body of one of this scheduler's own processes, polled now.
fn called_from_own_process(inner: &Inner) -> bool {
    current_owner().is_some_and(|owner| owner.host == inner.host_id)
}
