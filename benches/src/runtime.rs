//! The runtimes under test, one interface over all of them, and worker count.

use std::env;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, LazyLock};
use std::thread;
use std::time::Duration;

// ---------------------------------------------------------------------------
// Worker count
// ---------------------------------------------------------------------------

/// Worker threads per runtime when `PROCSCHED_BENCH_WORKERS` is unset.
///
/// Two matches the cores of the CI / developer machines; more workers than
/// cores would mostly measure the OS scheduler.
pub const DEFAULT_WORKERS: usize = 2;

/// Environment variable overriding [`DEFAULT_WORKERS`].
pub const WORKERS_ENV: &str = "PROCSCHED_BENCH_WORKERS";

/// Worker threads given to every runtime under test: [`DEFAULT_WORKERS`]
/// unless `PROCSCHED_BENCH_WORKERS` says otherwise.
///
/// A malformed override panics instead of silently falling back, because a
/// table labelled with the wrong worker count is worse than no table.
pub static WORKERS: LazyLock<usize> = LazyLock::new(|| match env::var(WORKERS_ENV) {
    Ok(raw) => match raw.trim().parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => panic!("{WORKERS_ENV}={raw:?} is not a positive integer"),
    },
    Err(env::VarError::NotPresent) => DEFAULT_WORKERS,
    Err(env::VarError::NotUnicode(raw)) => panic!("{WORKERS_ENV}={raw:?} is not valid UTF-8"),
});

// ---------------------------------------------------------------------------
// Runtimes
// ---------------------------------------------------------------------------

/// How long shutting a runtime down may take before we stop waiting for it.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

/// The runtimes a benchmark compares, in table-column order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RtKind {
    /// This crate's work-stealing executor.
    Procsched,
    /// tokio's multi-thread runtime, the main reference point.
    Tokio,
    /// `async_executor::Executor` driven by a pool of plain threads.
    AsyncExecutor,
}

impl RtKind {
    /// Every runtime, in the order benches run and tables show them.
    pub const ALL: [RtKind; 3] = [RtKind::Procsched, RtKind::Tokio, RtKind::AsyncExecutor];

    /// Name used as criterion function id and as table column header.
    pub fn name(self) -> &'static str {
        match self {
            RtKind::Procsched => "procsched",
            RtKind::Tokio => "tokio",
            RtKind::AsyncExecutor => "async-executor",
        }
    }

    /// Builds this runtime with `workers` worker threads.
    pub fn build(self, workers: usize) -> Rt {
        match self {
            RtKind::Procsched => Rt::Procsched(
                procsched::executor::Executor::builder()
                    .workers(workers)
                    .thread_name("bench-procsched")
                    .build()
                    .expect("failed to build the procsched executor"),
            ),
            RtKind::Tokio => Rt::Tokio(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(workers)
                    .thread_name("bench-tokio")
                    .enable_all()
                    .build()
                    .expect("failed to build the tokio runtime"),
            ),
            RtKind::AsyncExecutor => Rt::AsyncExecutor(AsyncExecutorPool::new(workers)),
        }
    }

    /// Yields once, using the yield primitive native to this runtime.
    ///
    /// Each runtime gets its own `yield_now` because they differ in where a
    /// yielded task is requeued (tokio, for instance, defers it behind other
    /// ready work), and that policy is part of what is being compared.
    pub async fn yield_now(self) {
        match self {
            RtKind::Procsched => procsched::executor::yield_now().await,
            RtKind::Tokio => tokio::task::yield_now().await,
            RtKind::AsyncExecutor => futures_lite::future::yield_now().await,
        }
    }
}

/// A running runtime under test.
///
/// Build it once per benchmark (outside `b.iter`) with [`RtKind::build`] and
/// end it with [`Rt::shutdown`].
pub enum Rt {
    /// procsched's executor.
    Procsched(procsched::executor::Executor),
    /// tokio's multi-thread runtime.
    Tokio(tokio::runtime::Runtime),
    /// `async-executor` on a pool of plain threads.
    AsyncExecutor(AsyncExecutorPool),
}

impl Rt {
    /// Which runtime this is.
    pub fn kind(&self) -> RtKind {
        match self {
            Rt::Procsched(_) => RtKind::Procsched,
            Rt::Tokio(_) => RtKind::Tokio,
            Rt::AsyncExecutor(_) => RtKind::AsyncExecutor,
        }
    }

    /// Name used as criterion function id and as table column header.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// A cheap, cloneable handle for spawning onto this runtime from inside
    /// its own tasks (or any other thread).
    pub fn spawner(&self) -> Spawner {
        match self {
            Rt::Procsched(ex) => Spawner::Procsched(ex.handle().clone()),
            Rt::Tokio(rt) => Spawner::Tokio(rt.handle().clone()),
            Rt::AsyncExecutor(pool) => Spawner::AsyncExecutor(Arc::clone(&pool.executor)),
        }
    }

    /// Spawns a detached task; signal its completion through a channel such
    /// as [`CountDown`] rather than a join handle.
    pub fn spawn<F>(&self, fut: F)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self {
            // Dropping a procsched or tokio JoinHandle detaches the task.
            Rt::Procsched(ex) => drop(ex.spawn(fut)),
            Rt::Tokio(rt) => drop(rt.spawn(fut)),
            // An async-executor `Task` cancels on drop, so detach explicitly.
            Rt::AsyncExecutor(pool) => pool.executor.spawn(fut).detach(),
        }
    }

    /// Runs `fut` to completion on the calling thread and returns its output.
    ///
    /// The calling thread does not become an extra worker on any runtime
    /// (for async-executor the future is driven by `futures_lite`'s
    /// `block_on`, not by `Executor::run`), so every runtime keeps exactly
    /// [`WORKERS`] threads running tasks.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        match self {
            Rt::Procsched(ex) => ex.block_on(fut),
            Rt::Tokio(rt) => rt.block_on(fut),
            Rt::AsyncExecutor(_) => futures_lite::future::block_on(fut),
        }
    }

    /// Stops the runtime and its worker threads.
    pub fn shutdown(self) {
        match self {
            Rt::Procsched(ex) => {
                // Benchmarks wait for all their tasks, so anything cancelled
                // or stuck here is a leak or a lost wake-up worth reporting.
                let report = ex.shutdown(SHUTDOWN_TIMEOUT);
                if report.cancelled > 0 || report.stuck_workers > 0 {
                    eprintln!("warning: procsched left work behind at shutdown: {report:?}");
                }
            }
            Rt::Tokio(rt) => rt.shutdown_timeout(SHUTDOWN_TIMEOUT),
            // Dropping the pool stops and joins its threads.
            Rt::AsyncExecutor(pool) => drop(pool),
        }
    }
}

impl fmt::Debug for Rt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Rt").field(&self.name()).finish()
    }
}

/// Spawns onto one runtime; `Clone + Send + Sync + 'static`, so tasks can
/// carry it and spawn further tasks.
///
/// tokio's own benchmarks call `tokio::spawn`, which finds the runtime
/// through a thread-local; carrying an explicit handle instead costs every
/// runtime the same reference-count traffic and works for all three.
#[derive(Clone)]
pub enum Spawner {
    /// Handle to a procsched executor.
    Procsched(procsched::executor::Handle),
    /// Handle to a tokio runtime.
    Tokio(tokio::runtime::Handle),
    /// The shared async-executor.
    AsyncExecutor(Arc<async_executor::Executor<'static>>),
}

impl Spawner {
    /// Spawns a detached task (see [`Rt::spawn`]).
    ///
    /// Called from one of the runtime's own worker threads this is the
    /// runtime's "local" spawn path (for those runtimes that have one).
    pub fn spawn<F>(&self, fut: F)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self {
            Spawner::Procsched(handle) => drop(handle.spawn(fut)),
            Spawner::Tokio(handle) => drop(handle.spawn(fut)),
            Spawner::AsyncExecutor(ex) => ex.spawn(fut).detach(),
        }
    }
}

impl fmt::Debug for Spawner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Spawner::Procsched(_) => RtKind::Procsched.name(),
            Spawner::Tokio(_) => RtKind::Tokio.name(),
            Spawner::AsyncExecutor(_) => RtKind::AsyncExecutor.name(),
        };
        f.debug_tuple("Spawner").field(&name).finish()
    }
}

/// An `async_executor::Executor` run by a fixed set of plain threads, the
/// usual way to give it multi-threaded, work-stealing execution.
pub struct AsyncExecutorPool {
    executor: Arc<async_executor::Executor<'static>>,
    /// One stop signal per thread: `Executor::run` returns when its future does.
    stop: Vec<futures::channel::oneshot::Sender<()>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl AsyncExecutorPool {
    fn new(workers: usize) -> Self {
        let executor = Arc::new(async_executor::Executor::new());
        let mut stop = Vec::with_capacity(workers);
        let mut threads = Vec::with_capacity(workers);
        for index in 0..workers {
            let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
            let executor = Arc::clone(&executor);
            let thread = thread::Builder::new()
                .name(format!("bench-async-executor-{index}"))
                .spawn(move || {
                    // `Err(Canceled)` means the sender was dropped without
                    // sending, which is just as much a request to stop.
                    let _stopped = futures_lite::future::block_on(executor.run(stop_rx));
                })
                .expect("failed to spawn an async-executor worker thread");
            stop.push(stop_tx);
            threads.push(thread);
        }
        AsyncExecutorPool {
            executor,
            stop,
            threads,
        }
    }
}

impl Drop for AsyncExecutorPool {
    fn drop(&mut self) {
        for stop in self.stop.drain(..) {
            // An error only means that worker has already exited.
            let _ = stop.send(());
        }
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                eprintln!("warning: an async-executor worker thread panicked");
            }
        }
    }
}

impl fmt::Debug for AsyncExecutorPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncExecutorPool")
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}
