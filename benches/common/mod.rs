//! Scaffolding shared by procsched's criterion benchmarks.
//!
//! Each bench target pulls this in with `mod common;` and compiles its own
//! copy, using only part of it; hence the module-wide `dead_code` allowance.
//!
//! Three pieces live here:
//! - [`Rt`] / [`Spawner`]: one interface over procsched, tokio's multi-thread
//!   runtime and an `async-executor` thread pool, all with [`WORKERS`] worker
//!   threads, so one workload body can be measured on every runtime.
//! - [`CountDown`]: completion signalling that costs the same on every
//!   runtime (an atomic counter plus a `std::sync::mpsc` wake-up), so the
//!   measurement never depends on a runtime's own join machinery.
//! - Report helpers that read criterion's saved estimates back and format
//!   them as a Markdown table.
#![allow(dead_code)]

use std::env;
use std::fmt;
use std::fs;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, LazyLock};
use std::thread;
use std::time::{Duration, SystemTime};

// ---------------------------------------------------------------------------
// Worker count
// ---------------------------------------------------------------------------

/// Worker threads per runtime when `PROCSCHED_BENCH_WORKERS` is unset.
///
/// Two matches the cores of the CI / developer machines; more workers than
/// cores would mostly measure the OS scheduler.
pub(crate) const DEFAULT_WORKERS: usize = 2;

/// Environment variable overriding [`DEFAULT_WORKERS`].
pub(crate) const WORKERS_ENV: &str = "PROCSCHED_BENCH_WORKERS";

/// Worker threads given to every runtime under test: [`DEFAULT_WORKERS`]
/// unless `PROCSCHED_BENCH_WORKERS` says otherwise.
///
/// A malformed override panics instead of silently falling back, because a
/// table labelled with the wrong worker count is worse than no table.
pub(crate) static WORKERS: LazyLock<usize> = LazyLock::new(|| match env::var(WORKERS_ENV) {
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
pub(crate) enum RtKind {
    /// This crate's work-stealing executor.
    Procsched,
    /// tokio's multi-thread runtime, the main reference point.
    Tokio,
    /// `async_executor::Executor` driven by a pool of plain threads.
    AsyncExecutor,
}

impl RtKind {
    /// Every runtime, in the order benches run and tables show them.
    pub(crate) const ALL: [RtKind; 3] = [RtKind::Procsched, RtKind::Tokio, RtKind::AsyncExecutor];

    /// Name used as criterion function id and as table column header.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RtKind::Procsched => "procsched",
            RtKind::Tokio => "tokio",
            RtKind::AsyncExecutor => "async-executor",
        }
    }

    /// Builds this runtime with `workers` worker threads.
    pub(crate) fn build(self, workers: usize) -> Rt {
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
    pub(crate) async fn yield_now(self) {
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
pub(crate) enum Rt {
    /// procsched's executor.
    Procsched(procsched::executor::Executor),
    /// tokio's multi-thread runtime.
    Tokio(tokio::runtime::Runtime),
    /// `async-executor` on a pool of plain threads.
    AsyncExecutor(AsyncExecutorPool),
}

impl Rt {
    /// Which runtime this is.
    pub(crate) fn kind(&self) -> RtKind {
        match self {
            Rt::Procsched(_) => RtKind::Procsched,
            Rt::Tokio(_) => RtKind::Tokio,
            Rt::AsyncExecutor(_) => RtKind::AsyncExecutor,
        }
    }

    /// Name used as criterion function id and as table column header.
    pub(crate) fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// A cheap, cloneable handle for spawning onto this runtime from inside
    /// its own tasks (or any other thread).
    pub(crate) fn spawner(&self) -> Spawner {
        match self {
            Rt::Procsched(ex) => Spawner::Procsched(ex.handle().clone()),
            Rt::Tokio(rt) => Spawner::Tokio(rt.handle().clone()),
            Rt::AsyncExecutor(pool) => Spawner::AsyncExecutor(Arc::clone(&pool.executor)),
        }
    }

    /// Spawns a detached task; signal its completion through a channel such
    /// as [`CountDown`] rather than a join handle.
    pub(crate) fn spawn<F>(&self, fut: F)
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
    pub(crate) fn block_on<F: Future>(&self, fut: F) -> F::Output {
        match self {
            Rt::Procsched(ex) => ex.block_on(fut),
            Rt::Tokio(rt) => rt.block_on(fut),
            Rt::AsyncExecutor(_) => futures_lite::future::block_on(fut),
        }
    }

    /// Stops the runtime and its worker threads.
    pub(crate) fn shutdown(self) {
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
pub(crate) enum Spawner {
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
    pub(crate) fn spawn<F>(&self, fut: F)
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
pub(crate) struct AsyncExecutorPool {
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

// ---------------------------------------------------------------------------
// Completion signalling
// ---------------------------------------------------------------------------

/// How long the bench thread waits for a workload before declaring it stuck.
///
/// Far above any sane iteration time; it turns a lost wake-up or a panicked
/// task (which never counts down) into a failure with a message instead of a
/// benchmark that hangs forever. It is a watchdog, not synchronisation.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Lets the bench thread block until `n` tasks have finished.
///
/// Tasks share a counter; the one that takes it to zero sends on a bounded
/// `std::sync::mpsc` channel the bench thread is blocked on. This is the
/// scheme of tokio's `rt_multi_threaded` benches and costs every runtime the
/// same, unlike join handles. One `CountDown` is reused across iterations.
pub(crate) struct CountDown {
    shared: Arc<CountDownShared>,
    done_rx: Receiver<()>,
    label: String,
}

struct CountDownShared {
    remaining: AtomicUsize,
    done_tx: SyncSender<()>,
}

/// The tasks' side of a [`CountDown`]; cheap to clone (one `Arc`).
#[derive(Clone)]
pub(crate) struct CountDownHandle(Arc<CountDownShared>);

impl CountDown {
    /// `label` (e.g. `"yield_many/tokio"`) names the workload in a stall panic.
    pub(crate) fn new(label: impl Into<String>) -> Self {
        // Capacity 1: exactly one signal per armed round, so sending never blocks.
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        CountDown {
            shared: Arc::new(CountDownShared {
                remaining: AtomicUsize::new(0),
                done_tx,
            }),
            done_rx,
            label: label.into(),
        }
    }

    /// Starts a round in which `n` (> 0) calls to
    /// [`CountDownHandle::count_down`] are expected.
    pub(crate) fn arm(&self, n: usize) -> CountDownHandle {
        assert!(n > 0, "a CountDown round needs at least one participant");
        let previous = self.shared.remaining.swap(n, Ordering::AcqRel);
        assert_eq!(previous, 0, "{}: previous round did not finish", self.label);
        CountDownHandle(Arc::clone(&self.shared))
    }

    /// Blocks until the armed round completes.
    ///
    /// # Panics
    /// If it takes longer than [`STALL_TIMEOUT`].
    pub(crate) fn wait(&self) {
        match self.done_rx.recv_timeout(STALL_TIMEOUT) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => panic!(
                "{}: {} of the tasks had not finished after {:?}; \
                 a lost wake-up, a deadlock, or a panicked task (see stderr)",
                self.label,
                self.shared.remaining.load(Ordering::Acquire),
                STALL_TIMEOUT,
            ),
            Err(RecvTimeoutError::Disconnected) => {
                unreachable!("CountDown owns a sender, so its channel cannot disconnect")
            }
        }
    }
}

impl fmt::Debug for CountDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDown")
            .field("label", &self.label)
            .field("remaining", &self.shared.remaining.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl CountDownHandle {
    /// Records one finished task; the last one of the round wakes the waiter.
    pub(crate) fn count_down(&self) {
        // AcqRel makes every participant's work happen-before the wake-up,
        // so the bench thread sees a fully finished round.
        if self.0.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Cannot be full (one send per round, drained by `wait`); an
            // error means the waiter is gone, so nobody is listening anyway.
            let _ = self.0.done_tx.try_send(());
        }
    }
}

impl fmt::Debug for CountDownHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountDownHandle").finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------
// Reading criterion's results back
// ---------------------------------------------------------------------------

/// Cargo's target directory: `$CARGO_TARGET_DIR` if set, otherwise the
/// nearest ancestor of the running bench executable named `target`
/// (benches run from `<target>/<profile>/deps/`).
pub(crate) fn target_dir() -> PathBuf {
    if let Some(dir) = env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let exe = env::current_exe().unwrap_or_default();
    exe.ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "target"))
        .map(Path::to_path_buf)
        // A renamed target dir: `<target>/<profile>/deps/<exe>`.
        .or_else(|| exe.ancestors().nth(3).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// Where criterion stores its results, resolved the way criterion does:
/// `$CRITERION_HOME`, else `<target>/criterion`.
pub(crate) fn criterion_dir() -> PathBuf {
    env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("criterion"))
}

/// Median time per iteration, in nanoseconds, of benchmark `group/function`
/// as saved by criterion, provided it was saved at or after `since`.
///
/// `None` if the benchmark did not run in this process (filtered out, test
/// or list mode, or `--baseline`/`--load-baseline` runs that save nothing):
/// an older file would silently mix stale numbers into a fresh table.
pub(crate) fn median_ns(group: &str, function: &str, since: SystemTime) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(function)
        .join("new")
        .join("estimates.json");
    let modified = fs::metadata(&path).and_then(|meta| meta.modified()).ok()?;
    if modified < since {
        return None;
    }
    let parsed = fs::read(&path)
        .map_err(|err| err.to_string())
        .and_then(|bytes| {
            serde_json::from_slice::<serde_json::Value>(&bytes).map_err(|err| err.to_string())
        });
    let estimate = parsed.as_ref().ok().and_then(|json| {
        json.pointer("/median/point_estimate")
            .and_then(serde_json::Value::as_f64)
    });
    if estimate.is_none() {
        eprintln!(
            "warning: no median.point_estimate in {} ({})",
            path.display(),
            parsed.err().unwrap_or_else(|| "field missing".to_owned()),
        );
    }
    estimate
}

/// Formats a duration given in nanoseconds with a unit that keeps 3-4
/// significant digits: `812 ns`, `12.40 µs`, `3.07 ms`, `1.25 s`.
pub(crate) fn format_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// Formats an optional measurement for a table cell (`—` when missing).
pub(crate) fn format_cell(ns: Option<f64>) -> String {
    ns.map_or_else(|| "—".to_owned(), format_ns)
}

/// `numerator / denominator` to two decimals, or `—` if either is missing.
pub(crate) fn format_ratio(numerator: Option<f64>, denominator: Option<f64>) -> String {
    match (numerator, denominator) {
        (Some(n), Some(d)) if d > 0.0 => format!("{:.2}", n / d),
        _ => "—".to_owned(),
    }
}

/// Prints `markdown` to stdout and writes it to `<target>/<file_name>`.
pub(crate) fn publish_report(file_name: &str, markdown: &str) {
    println!("\n{markdown}");
    let path = target_dir().join(file_name);
    match fs::write(&path, markdown) {
        Ok(()) => println!("(written to {})", path.display()),
        Err(err) => eprintln!("warning: could not write {}: {err}", path.display()),
    }
}

/// Formats a rate (or any count) with an SI prefix and 3-4 significant digits: `812`,
/// `12.40 k`, `3.07 M`, `1.25 G`.
pub(crate) fn format_si(value: f64) -> String {
    if value < 1e3 {
        format!("{value:.0}")
    } else if value < 1e6 {
        format!("{:.2} k", value / 1e3)
    } else if value < 1e9 {
        format!("{:.2} M", value / 1e6)
    } else {
        format!("{:.2} G", value / 1e9)
    }
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

/// A `kB` field of `/proc/self/status` (`VmHWM`, `VmRSS`, ...), in KiB; `None` where procfs
/// is unavailable (not Linux) or the field is missing.
pub(crate) fn proc_status_kib(field: &str) -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let value = line.strip_prefix(field)?.strip_prefix(':')?;
        value.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}
