//! [`SchedulerBuilder`]: settings, which tokio runtime handlers use, and `build` (handler
//! registration: `handlers.rs`).

use super::facade::Scheduler;
use super::shared::{Inner, Settings};
use crate::dispatch::HandlerSet;
use crate::executor::{self, Executor};
use crate::loom::Arc;
use std::fmt;
use std::time::Duration;

/// Default most events moved into one step.
pub const DEFAULT_MAX_BATCH: usize = 64;
/// Default most steps in one poll before a process is re-queued on its worker
/// ([`SchedulerBuilder::step_budget`](crate::config::SchedulerBuilder::step_budget) says where).
pub const DEFAULT_STEP_BUDGET: usize = 64;
/// How long dropping a [`Scheduler`] lets cancelled processes finish before forcing them.
pub const DEFAULT_DROP_TIMEOUT: Duration = Duration::from_millis(250);

/// Why [`SchedulerBuilder::build`] failed.
///
/// # Examples
///
/// ```
/// use procsched::{BoxError, Scheduler, error::BuildError};
///
/// struct Ping;
/// procsched::command!(Ping => ());
/// let err = Scheduler::builder()
///     .inline_handler(|Ping: Ping| Ok::<_, BoxError>(()))
///     .inline_handler(|Ping: Ping| Ok::<_, BoxError>(()))
///     .build()
///     .unwrap_err();
/// assert!(matches!(err, BuildError::DuplicateHandler(_)));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// Two handlers were registered for the same command type.
    #[error("two handlers registered for command type `{0}`")]
    DuplicateHandler(&'static str),
    /// A worker thread or the tokio runtime could not be started.
    #[error("could not start the scheduler: {0}")]
    Io(#[from] std::io::Error),
}

/// Configures and starts a [`Scheduler`].
///
/// `build` can be called again: every scheduler it starts gets the same settings and handlers.
///
/// # Examples
///
/// ```
/// use procsched::{BoxError, Scheduler};
///
/// struct Lookup(u32);
/// struct Fetch(String);
/// procsched::command!(Lookup => u32, Fetch => usize);
///
/// let mut builder = Scheduler::builder();
/// builder
///     .workers(2)
///     .inline_handler(|Lookup(key): Lookup| Ok::<_, BoxError>(key * 2))
///     .async_handler(|Fetch(url): Fetch| async move { Ok::<_, BoxError>(url.len()) });
/// let first = builder.build()?;
/// let second = builder.build()?; // same handlers
/// # Ok::<(), procsched::error::BuildError>(())
/// ```
pub struct SchedulerBuilder {
    executor: executor::Builder,
    /// The handlers registered so far (`handlers.rs`).
    pub(super) handlers: HandlerSet,
    /// The first command type registered twice: `build` reports it (and keeps failing until a
    /// new builder is made, since the registration cannot be undone).
    pub(super) duplicate: Option<&'static str>,
    runtime: Option<tokio::runtime::Handle>,
    max_batch: usize,
    step_budget: usize,
    max_processes: usize,
    mailbox_capacity: usize,
    drop_timeout: Duration,
    spin_waits: bool,
}

impl SchedulerBuilder {
    pub(super) fn new() -> SchedulerBuilder {
        SchedulerBuilder {
            executor: Executor::builder(),
            handlers: HandlerSet::default(),
            duplicate: None,
            runtime: None,
            max_batch: DEFAULT_MAX_BATCH,
            step_budget: DEFAULT_STEP_BUDGET,
            max_processes: usize::MAX,
            mailbox_capacity: usize::MAX,
            drop_timeout: DEFAULT_DROP_TIMEOUT,
            spin_waits: true,
        }
    }

    /// Number of worker threads (default: the available parallelism; 0 counts as 1).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(2).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn workers(&mut self, workers: usize) -> &mut Self {
        self.executor.workers(workers);
        self
    }

    /// Worker thread name prefix.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().thread_name("orders").build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.executor.thread_name(name);
        self
    }

    /// Stack size of every worker thread, in bytes (default
    /// [`executor::DEFAULT_STACK_SIZE`], 8 MiB): steps and
    /// bodies run on these stacks. See [`executor::Builder::thread_stack_size`]: below
    /// [`executor::MIN_STACK_SIZE`] (256 KiB), `build` fails with [`BuildError::Io`] of kind
    /// `InvalidInput`.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().thread_stack_size(16 << 20).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn thread_stack_size(&mut self, bytes: usize) -> &mut Self {
        self.executor.thread_stack_size(bytes);
        self
    }

    /// Runs the executor's monitor (default: `true`): it reports a step running longer than
    /// [`long_poll_threshold`](Self::long_poll_threshold) (a `tracing` warning with the PID) and
    /// starts spare workers so other processes keep running while a step blocks. See
    /// [`executor::Builder::monitor`].
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().monitor(false).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn monitor(&mut self, enabled: bool) -> &mut Self {
        self.executor.monitor(enabled);
        self
    }

    /// How long one poll of a process (its steps until it yields) may run before the monitor
    /// reports it and hands its worker's queue to a spare (default
    /// [`executor::DEFAULT_LONG_POLL_THRESHOLD`]). See [`executor::Builder::long_poll_threshold`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let sched = procsched::Scheduler::builder()
    ///     .long_poll_threshold(Duration::from_millis(50))
    ///     .build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn long_poll_threshold(&mut self, threshold: Duration) -> &mut Self {
        self.executor.long_poll_threshold(threshold);
        self
    }

    /// Most spare workers running at once in place of stuck ones (default: as many as
    /// `workers`). See [`executor::Builder::max_spare_workers`].
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().max_spare_workers(4).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn max_spare_workers(&mut self, max: usize) -> &mut Self {
        self.executor.max_spare_workers(max);
        self
    }

    /// How long a spare worker's thread stays parked, unused, before it ends (default
    /// [`executor::DEFAULT_SPARE_KEEP_ALIVE`], 10 s): after a burst of blocking steps the
    /// process goes back to its configured threads. See [`executor::Builder::spare_keep_alive`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let sched = procsched::Scheduler::builder()
    ///     .spare_keep_alive(Duration::from_secs(1))
    ///     .build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn spare_keep_alive(&mut self, keep_alive: Duration) -> &mut Self {
        self.executor.spare_keep_alive(keep_alive);
        self
    }

    /// The tokio runtime handlers use: async handlers run inside its context (its timers, I/O
    /// and `tokio::spawn`; a waiting one is polled on the scheduler's workers and woken by the
    /// runtime's drivers), blocking handlers on its blocking pool.
    ///
    /// Default: the multi-thread runtime `build` is called from, if any. Otherwise — outside
    /// any runtime, or inside a *current-thread* one (the default of `#[tokio::test]`), which is
    /// not adopted because its timers, I/O and tasks make progress only while its own
    /// `Runtime::block_on` runs — a small multi-thread runtime the scheduler owns: started by
    /// `build` if an async or blocking handler is registered, else when a process first needs
    /// one (`spawn_fn`, [`Scheduler::block_on`] outside any runtime).
    ///
    /// A current-thread runtime given here is used as given: async handlers' timers and I/O,
    /// blocking handlers, and the tokio timers and I/O of `async fn` bodies (which run inside its
    /// context) then make progress only while some thread is inside that runtime's
    /// `Runtime::block_on` — a `#[tokio::test]` body awaiting a handle or `shutdown_async`, say.
    /// [`Scheduler::block_on`] called outside it cannot drive it, nor can it tell whether
    /// another thread does: it waits for as long as nobody drives that runtime. It is also the
    /// way to have bodies' tokio timers follow a test's paused clock
    /// (`#[tokio::test(start_paused = true)]`): given `Handle::current()` there, a body's
    /// `tokio::time::sleep` advances with that clock; a scheduler left to its own runtime sleeps
    /// in real time. tokio advances a paused clock whenever its own threads are idle, whatever
    /// the workers do: a tokio deadline on procsched's work (`call_within`,
    /// `yield_command_within`, a body's `tokio::time::timeout`) can pass before work that takes
    /// no tokio time is done, and a longer timer registered from a worker can fire before a
    /// shorter one registered just after (README, "Quick start from tokio"); `ask_within` keeps
    /// real time.
    ///
    /// The scheduler may outlive a runtime it adopted (this one, or the one `build` was called
    /// in): a `static` scheduler shared by several `#[tokio::test]`s, each on a runtime of its
    /// own, say. A spawn or [`Scheduler::block_on`] called from outside that runtime then finds
    /// it shut down, and from then on the processes run in a small runtime of the scheduler's
    /// own, as if none had been given; handlers stay on the one that shut down (they complete
    /// `Cancelled`), and processes alive when it died meet it in their next tokio call. Tests
    /// that share a scheduler in parallel should give it a runtime that outlives them all (a
    /// `static` one).
    ///
    /// # Examples
    ///
    /// ```
    /// let runtime = tokio::runtime::Runtime::new()?;
    /// let sched = procsched::Scheduler::builder()
    ///     .tokio_handle(runtime.handle().clone())
    ///     .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tokio_handle(&mut self, handle: tokio::runtime::Handle) -> &mut Self {
        self.runtime = Some(handle);
        self
    }

    /// Most events delivered to one step (default [`DEFAULT_MAX_BATCH`]); the rest wait for the
    /// next steps, so one flooded process cannot monopolise a worker.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().max_batch(16).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn max_batch(&mut self, max_batch: usize) -> &mut Self {
        self.max_batch = max_batch.max(1);
        self
    }

    /// Whether a wait from outside the scheduler may spin for a few microseconds before its
    /// thread parks (default `true`): the first poll of an [`ask`](crate::Addr::ask) from tokio
    /// code or a thread looks for the answer, and a [`ProcessHandle`](crate::ProcessHandle)'s
    /// first poll for the process's end, for up to 20 µs (yielding the core after 2), one such
    /// wait at a time per scheduler, backing off where spins miss — never on a worker's thread
    /// or a single core. An ask loop in a tokio task then costs about a microsecond an ask
    /// instead of two thread wake-ups (13–26 µs on a 2-core VM). A join of many waits from one
    /// task (`join_all` of more than 30 asks, a `FuturesUnordered`) does not spin: its futures
    /// have wakers of their own, and each one's first poll comes right after the last's. A
    /// small join polled with its task's waker (`join!`, a `join_all` of at most 30) spins at
    /// each ask, each spin waiting for its answer before the next request is sent: turn
    /// spinning off if that is your shape.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().spin_waits(false).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn spin_waits(&mut self, enabled: bool) -> &mut Self {
        self.spin_waits = enabled;
        self
    }

    /// Most steps in one poll (default [`DEFAULT_STEP_BUDGET`]; 0 counts as 1) before the
    /// process is re-queued as a `Continue` re-queues it: on its worker, behind that worker's
    /// local queue, the processes woken there from outside and the ones re-queued before it.
    /// The global queue (processes spawned from outside the workers) comes first only every
    /// 61st poll, or when the worker has nothing of its own: on one worker, with local processes
    /// re-queuing themselves, a process spawned from outside waits up to 61 polls.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().step_budget(8).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn step_budget(&mut self, step_budget: usize) -> &mut Self {
        self.step_budget = step_budget.max(1);
        self
    }

    /// Most live processes; `spawn` beyond it fails with
    /// [`SpawnError::Limit`](crate::error::SpawnError::Limit). Default: no limit beyond the process
    /// table's, 2^26 (about 67 million) live processes.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().max_processes(10_000).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn max_processes(&mut self, max_processes: usize) -> &mut Self {
        self.max_processes = max_processes;
        self
    }

    /// Most messages waiting in one process's mailbox (default: unbounded). Past it, `send`
    /// refuses the message (handing it back) with [`SendErrorKind::MailboxFull`](crate::error::SendErrorKind::MailboxFull).
    /// Messages an `async fn` body's steps filed in its inbox count until the body receives
    /// them, so a body busy with something else pushes back on its senders
    /// ([`Process::unread_messages`](crate::state_machine::Process::unread_messages)).
    /// Yield completions and `Cancel` are never counted or dropped. A capacity of 0 refuses
    /// every message (a process that only yields and is cancelled; `Addr::send_wait` too, at
    /// once). It bounds the user's
    /// processes, not the library's: a [`Supervisor`](crate::supervision::Supervisor)'s
    /// mailbox, which holds only its API's requests, is unbounded (its children are not). One
    /// process can have a bound of its own instead ([`SpawnOptions`](crate::SpawnOptions)).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().mailbox_capacity(1_024).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn mailbox_capacity(&mut self, capacity: usize) -> &mut Self {
        self.mailbox_capacity = capacity;
        self
    }

    /// How long dropping the scheduler lets cancelled processes finish (default
    /// [`DEFAULT_DROP_TIMEOUT`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let sched = procsched::Scheduler::builder().drop_timeout(Duration::from_secs(1)).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn drop_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.drop_timeout = timeout;
        self
    }

    /// Starts a scheduler. The builder is left as it was: building again starts another
    /// scheduler with the same settings and handlers.
    ///
    /// # Errors
    ///
    /// [`BuildError::DuplicateHandler`] if two handlers share a command type;
    /// [`BuildError::Io`] if a thread could not be started, or the workers and spare workers
    /// asked for are more than [`executor::MAX_THREADS`] together (`InvalidInput`) or cannot
    /// be had (`OutOfMemory`).
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn build(&mut self) -> Result<Scheduler, BuildError> {
        if let Some(name) = self.duplicate {
            return Err(BuildError::DuplicateHandler(name));
        }
        let handlers = self.handlers.clone();
        let mut owned_runtime = None;
        // An ambient current-thread runtime is not adopted: its drivers run only inside its own
        // `block_on`, which a scheduler cannot count on (`Scheduler::block_on` from sync code,
        // or the runtime left idle, would hang every timer and I/O). Such a scheduler uses a
        // runtime of its own, as it does outside tokio.
        let ambient = tokio::runtime::Handle::try_current().ok().filter(|handle| {
            handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::CurrentThread
        });
        let runtime = match self.runtime.clone().or(ambient) {
            Some(handle) => Some(handle),
            None if handlers.needs_runtime() => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("procsched-io")
                    .enable_all()
                    .build()?;
                let handle = runtime.handle().clone();
                owned_runtime = Some(runtime);
                Some(handle)
            }
            None => None,
        };
        let mut executor = self.executor.clone();
        // Process tasks are labelled with their PID (`SchedulerHandle::spawn`); the report names
        // the process's type too, read from the table through a weak link set once `Inner` exists.
        let table_link: std::sync::Arc<InnerLink> = std::sync::Arc::default();
        let link = table_link.clone();
        executor.on_long_poll(move |long_poll| {
            let pid = long_poll.label.and_then(crate::process::Pid::from_raw);
            let kind = pid.and_then(|pid| link.kind_of(pid));
            tracing::warn!(
                pid = pid.map(tracing::field::display),
                kind,
                worker = long_poll.worker,
                elapsed_ms = long_poll.elapsed.as_secs_f64() * 1e3,
                "long poll: a process step (or one of its waiting async handlers) has been \
                 running for longer than the threshold; use `procsched::executor::block_in_place` around \
                 blocking code"
            );
        });
        // A process's result whose handle was dropped, or its handler's future, is dropped by
        // the executor, which knows the task's label — the PID — but not that it is one.
        executor.on_destructor_panic(|label| {
            let pid = crate::process::Pid::from_raw(label);
            tracing::warn!(
                pid = pid.map(tracing::field::display),
                "a destructor panicked after its task's outcome (a process's result whose handle \
                 was dropped, or one of its handlers' futures); the panic was contained"
            );
        });
        if let Some(runtime) = runtime.clone() {
            // Processes (an async-fn body awaiting a tokio timer, a step calling `tokio::spawn`)
            // find the handler runtime as their tokio context.
            executor.worker_context(move |run| {
                let _inside = runtime.enter();
                run()
            });
        }
        let executor = executor.build()?;
        let inner = Arc::new(Inner::new(
            executor.handle().clone(),
            handlers,
            runtime,
            Settings {
                mailbox_capacity: self.mailbox_capacity,
                max_batch: self.max_batch,
                step_budget: self.step_budget,
                max_processes: self.max_processes,
                spin_waits: self.spin_waits,
                adopted_runtime: owned_runtime.is_none(),
            },
        ));
        table_link.set(&inner);
        super::hosts::register(&inner);
        Ok(Scheduler::from_parts(
            inner,
            executor,
            owned_runtime,
            self.drop_timeout,
        ))
    }
}

/// How the long-poll observer (made before the scheduler's state) finds a process's type: a weak
/// link to that state, set once it exists. (Not under loom, whose `Arc` has no `Weak`.)
#[derive(Default)]
struct InnerLink {
    #[cfg(not(loom))]
    inner: std::sync::OnceLock<std::sync::Weak<Inner>>,
}

impl InnerLink {
    fn set(&self, inner: &Arc<Inner>) {
        #[cfg(not(loom))]
        let _ = self.inner.set(Arc::downgrade(inner));
        #[cfg(loom)]
        let _ = inner;
    }

    /// The type of process `pid`, if it still runs.
    fn kind_of(&self, pid: crate::process::Pid) -> Option<&'static str> {
        #[cfg(not(loom))]
        {
            let inner = self.inner.get()?.upgrade()?;
            Some(super::SchedulerHandle { inner }.process_info(pid)?.kind)
        }
        #[cfg(loom)]
        {
            let _ = pid;
            None
        }
    }
}

impl fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("executor", &self.executor)
            .field("max_batch", &self.max_batch)
            .field("step_budget", &self.step_budget)
            .field("max_processes", &self.max_processes)
            .field("mailbox_capacity", &self.mailbox_capacity)
            .field("drop_timeout", &self.drop_timeout)
            .field("spin_waits", &self.spin_waits)
            .finish_non_exhaustive()
    }
}
