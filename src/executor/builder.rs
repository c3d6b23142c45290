//! [`Builder`]: an executor's settings, and starting its threads.

use super::monitor::{LongPoll, Monitor, MonitorConfig, DEFAULT_LONG_POLL_THRESHOLD};
use super::shared::{self, DestructorPanicFn, Remote, Shared};
use super::spare::{Spares, DEFAULT_SPARE_KEEP_ALIVE};
use super::start;
use super::threads::{ThreadConfig, WorkerContext};
use super::{
    park, queue, Executor, DEFAULT_STACK_SIZE, DROP_SHUTDOWN_TIMEOUT, MAX_THREADS, MIN_STACK_SIZE,
};
use crate::loom::{thread, Arc};
use std::time::Duration;

/// Configures and starts an [`Executor`].
///
/// # Examples
///
/// ```
/// use procsched::executor::Executor;
///
/// let executor = Executor::builder().workers(4).thread_name("my-app").build()?;
/// assert_eq!(executor.handle().num_workers(), 4);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    workers: usize,
    thread_name: String,
    stack_size: usize,
    worker_context: Option<WorkerContext>,
    monitor: MonitorConfig,
    /// `None`: as many as `workers`.
    max_spare_workers: Option<usize>,
    spare_keep_alive: Duration,
    destructor_panic_observer: DestructorPanicObserver,
}

/// [`Builder::on_destructor_panic`]'s observer, if one was set (`Debug` for the builder's).
#[derive(Clone, Default)]
struct DestructorPanicObserver(Option<std::sync::Arc<DestructorPanicFn>>);

impl std::fmt::Debug for DestructorPanicObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Some(..)" } else { "None" })
    }
}

impl Builder {
    pub(super) fn new() -> Builder {
        Builder {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            thread_name: "procsched-worker".to_owned(),
            stack_size: DEFAULT_STACK_SIZE,
            worker_context: None,
            monitor: MonitorConfig {
                enabled: true,
                threshold: DEFAULT_LONG_POLL_THRESHOLD,
                observer: None,
            },
            max_spare_workers: None,
            spare_keep_alive: DEFAULT_SPARE_KEEP_ALIVE,
            destructor_panic_observer: DestructorPanicObserver::default(),
        }
    }

    /// Calls `observer` with the task's label (see [`Handle::spawn_labelled`](super::Handle::spawn_labelled))
    /// whenever a task's destructor panicked after its outcome (its output unread, its future
    /// dropped) and the panic was contained, instead of the default `tracing` warning naming
    /// the label: for a layer above that knows what its labels name (the scheduler: PIDs).
    pub(crate) fn on_destructor_panic(
        &mut self,
        observer: impl Fn(u64) + Send + Sync + 'static,
    ) -> &mut Self {
        self.destructor_panic_observer =
            DestructorPanicObserver(Some(std::sync::Arc::new(observer)));
        self
    }

    /// Runs the monitor thread (default: `true`): it reports polls longer than
    /// [`long_poll_threshold`](Self::long_poll_threshold) and starts spare workers to run the
    /// work a stuck worker holds up. Off, a blocking poll stalls the work queued behind it until
    /// it returns; [`block_in_place`](super::block_in_place) still hands off (once, when called).
    ///
    /// The monitor costs nothing per poll beyond two plain stores, ticks every
    /// `threshold / 4` (between 1 and 10 ms) while workers are busy and sleeps while all are
    /// idle.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().monitor(false).build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn monitor(&mut self, enabled: bool) -> &mut Self {
        self.monitor.enabled = enabled;
        self
    }

    /// How long a poll may run before the monitor reports it and hands its worker's queue to a
    /// spare (default [`DEFAULT_LONG_POLL_THRESHOLD`], at least 1 ms). Detection is precise to
    /// one monitor tick (`threshold / 4`, between 1 and 10 ms).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let executor = procsched::executor::Executor::builder()
    ///     .long_poll_threshold(Duration::from_millis(50))
    ///     .build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn long_poll_threshold(&mut self, threshold: Duration) -> &mut Self {
        self.monitor.threshold = threshold.max(Duration::from_millis(1));
        self
    }

    /// Most spare workers running at once in place of stuck ones (default: as many as
    /// [`workers`](Self::workers)). Spare threads start on first need and then sleep between
    /// uses; 0 disables hand-off (long polls are still reported).
    ///
    /// The cap is what keeps blocking polls from growing threads without bound, and it is
    /// also where they stop being handed off: with as many polls blocked at once as workers
    /// and spares together, the rest of the work waits for one to return. A program whose
    /// blocking steps can outnumber its workers — including a step still running after a
    /// terminate, beside its replacement — sets a cap that covers them: `block_in_place` calls
    /// that wait for tasks they spawned deadlock once they hold every thread (the monitor warns,
    /// and counts it in [`MonitorMetrics::exhausted`](super::MonitorMetrics::exhausted)). On a machine with
    /// fewer cores than workers and spares, a worker the OS has taken off its core mid-poll
    /// looks stuck too, so spares may stay up while the load lasts.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder()
    ///     .workers(2)
    ///     .max_spare_workers(8)
    ///     .build()?;
    /// assert_eq!(executor.metrics().spares().len(), 8);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn max_spare_workers(&mut self, max: usize) -> &mut Self {
        self.max_spare_workers = Some(max);
        self
    }

    /// How long a spare worker's thread stays, parked, after it retired, before it ends
    /// (default [`DEFAULT_SPARE_KEEP_ALIVE`], 10 s, as tokio's blocking pool): after a burst of
    /// blocking polls the process goes back to its configured threads. A spare needed again
    /// within the keep-alive is woken, not started anew.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let executor = procsched::executor::Executor::builder()
    ///     .spare_keep_alive(Duration::from_secs(1))
    ///     .build()?;
    /// assert_eq!(executor.metrics().monitor().spare_threads, 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spare_keep_alive(&mut self, keep_alive: Duration) -> &mut Self {
        self.spare_keep_alive = keep_alive;
        self
    }

    /// Calls `observer` (on the monitor thread) once for every long poll, instead of the
    /// default `tracing` warning. It should return quickly: the monitor waits for it.
    ///
    /// # Examples
    ///
    /// See [`LongPoll`].
    pub fn on_long_poll(
        &mut self,
        observer: impl Fn(&LongPoll) + Send + Sync + 'static,
    ) -> &mut Self {
        self.monitor.observer = Some(std::sync::Arc::new(observer));
        self
    }

    /// Number of worker threads (at least 1). Default: the available parallelism.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(2).build()?;
    /// assert_eq!(executor.handle().num_workers(), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn workers(&mut self, workers: usize) -> &mut Self {
        self.workers = workers.max(1);
        self
    }

    /// Worker thread name prefix; workers are named `<prefix>-<index>`. A name with a NUL
    /// byte makes [`build`](Builder::build) fail with `InvalidInput` (an OS thread name is a C
    /// string).
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).thread_name("app").build()?;
    /// let name = executor.spawn(async { std::thread::current().name().map(str::to_owned) });
    /// assert_eq!(executor.block_on(name).unwrap().as_deref(), Some("app-0"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.thread_name = name.into();
        self
    }

    /// Stack size of every worker thread, spares included, in bytes (default
    /// [`DEFAULT_STACK_SIZE`], 8 MiB).
    ///
    /// Processes run on these stacks: a state machine's `step`, an async fn body's poll, the
    /// handlers that run inline. An unoptimised build copies a value on the stack at every layer
    /// it crosses, so a large message or output (64 KiB held by value) can take a few MiB where
    /// a release build takes one copy; std's 2 MiB default for spawned threads overflowed there.
    /// The size is reserved address space: only the pages a thread touches are resident.
    ///
    /// Below [`MIN_STACK_SIZE`] (256 KiB: a worker's own loop, a panic's unwinding and its
    /// report), [`build`](Self::build) fails with [`std::io::ErrorKind::InvalidInput`] rather
    /// than start threads that would overflow, which aborts the program.
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder()
    ///     .thread_stack_size(32 << 20)
    ///     .build()?;
    /// let deep = executor.spawn(async { [7u8; 1 << 20].iter().map(|&b| b as u32).sum::<u32>() });
    /// assert_eq!(executor.block_on(deep).unwrap(), 7 << 20);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn thread_stack_size(&mut self, bytes: usize) -> &mut Self {
        self.stack_size = bytes;
        self
    }

    /// Runs every worker's loop inside `context`, which must call the closure it is given
    /// exactly once: to enter, for the thread's whole life, a context its tasks rely on — a tokio
    /// runtime (`handle.enter()`), a tracing span, a thread-local.
    ///
    /// A panic in `context` is contained and reported (`tracing` error): if the context had not
    /// called the closure yet, the worker then runs without it; if it had, the thread just ends.
    /// A context that returns without calling it also gets its worker run without the context.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::executor::Executor;
    ///
    /// let runtime = tokio::runtime::Runtime::new()?;
    /// let handle = runtime.handle().clone();
    /// let executor = Executor::builder()
    ///     .workers(1)
    ///     .worker_context(move |run| {
    ///         let _inside = handle.enter();
    ///         run()
    ///     })
    ///     .build()?;
    /// // Tasks can use tokio timers and I/O directly.
    /// let slept = executor.spawn(async {
    ///     tokio::time::sleep(std::time::Duration::from_millis(1)).await
    /// });
    /// executor.block_on(slept).unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn worker_context(
        &mut self,
        context: impl Fn(&mut dyn FnMut()) + Send + Sync + 'static,
    ) -> &mut Self {
        self.worker_context = Some(WorkerContext(std::sync::Arc::new(context)));
        self
    }

    /// Starts the worker threads.
    ///
    /// # Errors
    ///
    /// Fails if the operating system refuses to start a thread (the workers already started are
    /// stopped again), or if the workers and spare workers asked for are more than
    /// [`MAX_THREADS`] together (`InvalidInput`), the stack is below [`MIN_STACK_SIZE`] or the
    /// thread name holds a NUL byte (`InvalidInput`), or their queues do not fit in memory
    /// (`OutOfMemory`).
    ///
    /// # Examples
    ///
    /// ```
    /// let executor = procsched::executor::Executor::builder().workers(1).build()?;
    /// assert_eq!(executor.block_on(executor.spawn(async { 7 })).unwrap(), 7);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn build(&mut self) -> std::io::Result<Executor> {
        if self.stack_size < MIN_STACK_SIZE {
            // A thread that overflows its stack aborts the whole program: refused here, where
            // the caller can still act on it, rather than at the first poll.
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "a worker stack of {} bytes is below the least a worker runs on ({MIN_STACK_SIZE} bytes)",
                    self.stack_size
                ),
            ));
        }
        if self.thread_name.contains('\0') {
            // std panics on it when the first thread is named: refused here instead, like any
            // other bad setting.
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the worker thread name {:?} contains a NUL byte",
                    self.thread_name
                ),
            ));
        }
        let workers = self.workers;
        let max_spare = self.max_spare_workers.unwrap_or(workers);
        // Bad input is an error, not an overflow's panic: the slots are counted, then their
        // memory reserved before any is touched.
        let slots = workers
            .checked_add(max_spare)
            .filter(|&slots| slots <= MAX_THREADS)
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{workers} workers and {max_spare} spare workers: more than \
                         {MAX_THREADS} threads"
                    ),
                )
            })?;
        let mut locals: Vec<queue::Local<shared::Notified>> = Vec::new();
        locals.try_reserve_exact(slots).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("{slots} worker queues do not fit in memory"),
            )
        })?;
        locals.extend((0..slots).map(|_| queue::Local::new()));
        let remotes = locals
            .iter()
            .map(|local| Remote {
                stealer: local.stealer(),
                inject: queue::Injector::new(),
                woken: queue::Injector::new(),
                parker: park::Parker::new(),
            })
            .collect();
        let spares = Spares::new(workers, locals.split_off(workers), self.spare_keep_alive);
        let monitor = Monitor::new(self.monitor.clone(), slots, spares);
        let config = ThreadConfig {
            name: self.thread_name.clone(),
            stack_size: self.stack_size,
            context: self.worker_context.clone(),
        };
        let observer = self.destructor_panic_observer.0.clone();
        let shared = Arc::new(Shared::new(remotes, workers, monitor, config, observer));
        let mut threads = Vec::with_capacity(workers);
        for (index, local) in locals.into_iter().enumerate() {
            match start::spawn_worker(&shared, index, local) {
                Ok(thread) => threads.push((index, thread)),
                Err(error) => {
                    // Workers that never started must still count as exited.
                    for _ in index..workers {
                        shared.worker_exited();
                    }
                    let executor = Executor::from_parts(shared, threads, None);
                    let _ = executor.shutdown(DROP_SHUTDOWN_TIMEOUT);
                    return Err(error);
                }
            }
        }
        let monitor_thread = match self.start_monitor(&shared) {
            Ok(thread) => thread,
            Err(error) => {
                let executor = Executor::from_parts(shared, threads, None);
                let _ = executor.shutdown(DROP_SHUTDOWN_TIMEOUT);
                return Err(error);
            }
        };
        tracing::debug!(workers, max_spare, "executor started");
        Ok(Executor::from_parts(shared, threads, monitor_thread))
    }

    /// Starts the monitor thread, if enabled. Under loom there is none: models drive
    /// `Monitor::tick` with a manual clock.
    fn start_monitor(
        &self,
        shared: &Arc<Shared>,
    ) -> std::io::Result<Option<thread::JoinHandle<()>>> {
        #[cfg(loom)]
        {
            let _ = shared;
            Ok(None)
        }
        #[cfg(not(loom))]
        {
            if !self.monitor.enabled {
                return Ok(None);
            }
            let shared = shared.clone();
            thread::Builder::new()
                .name(format!("{}-monitor", self.thread_name))
                .spawn(move || super::monitor::run(&shared.monitor, &shared))
                .map(Some)
        }
    }
}
