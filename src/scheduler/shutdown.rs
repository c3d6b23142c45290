//! The shutdown driver: graceful, then forced, then the report (steps 2–5 of "Protocol: spawn
//! vs. shutdown", module docs of `scheduler`), blocking or awaited, for the API of
//! [`Scheduler`](crate::Scheduler) and its `Drop`; and the waits for abandoned processes after it.

use super::blocking;
use super::deadline::Deadline;
use super::lifecycle::ShutdownReport;
use super::shared::Inner;
use super::tasks;
use crate::executor::Executor;
use crate::loom::{lock, Arc, Mutex};
use crate::process::async_fn::current_owner;
use futures::future::select;
use std::future::Future;
use std::pin::pin;
use std::time::{Duration, Instant};

/// How long shutdown waits, after its timeout, for workers to leave the poll they are in. A
/// process still inside user code then (a step that blocks or loops) is *abandoned*: counted in
/// [`ShutdownReport::abandoned`], and closed when its call returns. So
/// [`Scheduler::shutdown`](crate::Scheduler::shutdown) returns within
/// `timeout + FORCED_STOP_WAIT`, plus the time the `close` of each forced process takes (they
/// run on the calling thread).
pub const FORCED_STOP_WAIT: Duration = Duration::from_millis(50);

/// A scheduler's threads and their shutdown: run once, its report kept for every later call.
pub(super) struct Shutdown {
    /// `None` only once `Drop` handed it to a background shutdown.
    engine: Option<Engine>,
    report: Mutex<Option<ShutdownReport>>,
    drop_timeout: Duration,
}

/// What the scheduler owns beyond the shared state: the threads.
struct Engine {
    executor: Executor,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Engine {
    /// Shutdown steps 2–5 (module docs of `scheduler`), after step 1.
    fn stop(&self, inner: &Inner, deadline: Instant) -> ShutdownReport {
        inner.lifecycle.wait_idle(deadline);
        self.force(inner)
    }

    /// Shutdown steps 3–5.
    fn force(&self, inner: &Inner) -> ShutdownReport {
        let live = inner.lifecycle.live();
        if live > 0 {
            tracing::info!(
                live,
                "scheduler shutdown: grace period over, forcing the rest"
            );
        }
        inner.lifecycle.begin_forcing();
        let stopped = self.executor.shutdown(FORCED_STOP_WAIT);
        // Process tasks are not in the executor's owned list: cancel them through their cells.
        let cancelled = tasks::cancel_all(inner.table.cells());
        tracing::debug!(cancelled, "scheduler shutdown: process tasks cancelled");
        let report = inner.lifecycle.seal(|| inner.table.len());
        if report.abandoned > 0 {
            tracing::warn!(
                abandoned = report.abandoned,
                stuck_workers = stopped.stuck_workers,
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
            report: Mutex::new(None),
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

    /// [`Scheduler::shutdown`](crate::Scheduler::shutdown), once the caller may block.
    pub(super) fn shutdown(&self, inner: &Inner, timeout: Duration) -> ShutdownReport {
        let deadline = crate::deadline::after(timeout);
        inner.begin_shutdown();
        let mut done = lock(&self.report);
        if let Some(report) = *done {
            return report;
        }
        let report = self.engine().stop(inner, deadline);
        *done = Some(report);
        report
    }

    /// [`Scheduler::shutdown_async`](crate::Scheduler::shutdown_async).
    pub(super) async fn shutdown_async(&self, inner: &Inner, timeout: Duration) -> ShutdownReport {
        let deadline = crate::deadline::after(timeout);
        inner.begin_shutdown();
        if let Some(report) = *lock(&self.report) {
            return report;
        }
        // Awaited inside one of our own processes, the caller cannot finish while it waits: the
        // grace period waits for every *other* process (method docs).
        let floor = usize::from(called_from_own_process(inner));
        let all_finished = pin!(idle(inner, floor));
        let _ = select(all_finished, Deadline::new(deadline)).await;
        let mut done = lock(&self.report);
        if let Some(report) = *done {
            return report;
        }
        let report = self.engine().force(inner);
        *done = Some(report);
        report
    }

    /// The `Drop` of [`Scheduler`](crate::Scheduler): a blocking shutdown with the drop timeout,
    /// or — inside an async context or on a worker — `Cancel` to every process and the rest in
    /// the background.
    pub(super) fn on_drop(&mut self, inner: &Arc<Inner>) {
        let Some(engine) = self.engine.take() else {
            return;
        };
        if lock(&self.report).is_some() {
            return; // already shut down; dropping the engine does not block
        }
        let inner = inner.clone();
        let deadline = crate::deadline::after(self.drop_timeout);
        inner.begin_shutdown();
        if blocking::async_context().is_none() {
            engine.stop(&inner, deadline);
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
                        engine.stop(&inner, deadline);
                    }
                })
        };
        if let Err(error) = started {
            tracing::warn!(%error, "could not start a shutdown thread; forcing the shutdown in place");
            let engine = lock(&slot).take();
            if let Some(engine) = engine {
                engine.force(&inner);
            }
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

/// `true` if the caller is the body of one of this scheduler's own processes, polled now.
fn called_from_own_process(inner: &Inner) -> bool {
    current_owner().is_some_and(|owner| owner.host == inner.host_id)
}
