//! What a supervisor is built from: child specs ([`ChildSpec`]), their restart types and
//! shutdown policies, the restart strategy, and the [`Start`] a child's factory spawns with.

use super::first_poll::{self, FirstPoll};
use crate::process::mailbox::{Incarnation, MailboxBound};
use crate::process::{BoxError, Payload, Pid, Process};
use crate::scheduler::links::Link;
use crate::scheduler::{ChildOptions, ProcessCx, SchedulerHandle, SpawnError};
use smallvec::SmallVec;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// When a child that ended is started again (OTP's restart types).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::{ChildSpec, Restart};
///
/// // Restarted after a failure, not after it finished normally.
/// let session = ChildSpec::new("session", |start| {
///     start.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })
/// })
/// .restart(Restart::Transient);
/// # let _ = session;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Restart {
    /// Always.
    #[default]
    Permanent,
    /// Only after an abnormal end: not after `Normal` or `Shutdown`. A child that ended
    /// cleanly keeps its spec (listed by `which_children` with no PID, its id taken), as OTP
    /// keeps a transient child's until `delete_child`: here
    /// [`terminate_child`](super::SupervisorRef::terminate_child) forgets it. A pool of
    /// one-shot children started with `start_child` should be `Temporary`, whose specs go
    /// with them; transient ones left to end pile up, and each start and exit scans the list.
    Transient,
    /// Never (and its spec is forgotten when it ends).
    Temporary,
}

/// How a supervisor stops a child (OTP's shutdown values).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::{ChildShutdown, ChildSpec};
/// use std::time::Duration;
///
/// // Given 100 ms to finish its work once asked to, then terminated.
/// let writer = ChildSpec::new("writer", |start| {
///     start.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })
/// })
/// .shutdown(ChildShutdown::Timeout(Duration::from_millis(100)));
/// # let _ = writer;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChildShutdown {
    /// Terminate at once (`Killed`).
    BrutalKill,
    /// Ask it to finish (its receives report the cancellation), then terminate it if it has
    /// not ended within this time.
    Timeout(Duration),
    /// Ask it to finish and wait as long as it takes: for children that are supervisors.
    Infinity,
}

impl Default for ChildShutdown {
    /// `Timeout(5 s)`, OTP's default for workers.
    fn default() -> ChildShutdown {
        ChildShutdown::Timeout(Duration::from_secs(5))
    }
}

/// Which children a supervisor restarts when one ends (OTP's strategies).
///
/// # Examples
///
/// ```
/// use procsched::supervision::{Strategy, Supervisor};
///
/// // The same as `Supervisor::rest_for_one()`.
/// let pipeline = Supervisor::new(Strategy::RestForOne);
/// # let _ = pipeline;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Strategy {
    /// Only the child that ended.
    #[default]
    OneForOne,
    /// All children: the others are stopped (in reverse start order), then all are started
    /// again in start order.
    OneForAll,
    /// The child that ended and those started after it: those are stopped in reverse start
    /// order, then all of them started again in start order.
    RestForOne,
}

/// Spawns a child, linked to its supervisor: what a [`ChildSpec`]'s factory is given. The
/// link is set up before the child's first step, so no end of the child can be missed.
///
/// The start is synchronous, as OTP's `start_link`: the supervisor starts the next child only
/// once this one has started — a state machine's `init` has returned (it runs inside the
/// spawn), an `async fn` body's first poll has returned (it reached its first `.await` that
/// waits, or finished).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::ChildSpec;
///
/// // The factory is called at every (re)start, with a `Start` to spawn the child through.
/// let worker = ChildSpec::new("worker", |start| {
///     start.spawn_fn(|cx: ProcessCx<u64>| async move {
///         let mut sum = 0;
///         while sum < 100 {
///             sum += cx.recv().await?;
///         }
///         Ok::<_, BoxError>(sum)
///     })
/// });
/// # let _ = worker;
/// ```
pub struct Start<'a> {
    sched: &'a SchedulerHandle,
    supervisor: Pid,
    /// The last body spawned through [`spawn_fn`](Self::spawn_fn), and what its first poll
    /// tells (`first_poll.rs`): the supervisor waits for it if the factory returns that PID.
    first_poll: Mutex<Option<(Pid, Arc<FirstPoll>)>>,
    /// Every process spawned through it (what the factory returns is checked against them).
    spawned: Mutex<SmallVec<[Pid; 1]>>,
}

impl<'a> Start<'a> {
    pub(super) fn new(sched: &'a SchedulerHandle, supervisor: Pid) -> Start<'a> {
        Start {
            sched,
            supervisor,
            first_poll: Mutex::new(None),
            spawned: Mutex::new(SmallVec::new()),
        }
    }

    /// What the first poll of `pid`, a body spawned through this start, tells (`None` for a
    /// state machine, or a PID spawned otherwise).
    /// The processes spawned through it.
    pub(super) fn spawned(&self) -> SmallVec<[Pid; 1]> {
        std::mem::take(&mut *self.spawned.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn record(&self, pid: Pid) -> Pid {
        self.spawned
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push(pid);
        pid
    }

    pub(super) fn first_poll_of(&self, pid: Pid) -> Option<Arc<FirstPoll>> {
        let last = self
            .first_poll
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take();
        last.filter(|(spawned, _)| *spawned == pid)
            .map(|(_, first_poll)| first_poll)
    }

    /// Spawns `process` (a state machine) linked to the supervisor.
    ///
    /// # Errors
    ///
    /// As [`SchedulerHandle::spawn`].
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn spawn<P: Process>(
        &self,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<Pid, SpawnError> {
        self.spawn_bounded(process, method, input, MailboxBound::Scheduler)
    }

    /// [`spawn`](Self::spawn) with `opts`: the child's own mailbox bound
    /// ([`ChildOptions::mailbox_capacity`], [`ChildOptions::unbounded_mailbox`]), for every
    /// instance the factory starts. Its link is its supervisor's: [`ChildOptions`] has no other
    /// to ask for; a child that needs another link makes it itself.
    ///
    /// # Errors
    ///
    /// As [`SchedulerHandle::spawn`].
    ///
    /// # Examples
    ///
    /// See [`spawn_fn_with`](Self::spawn_fn_with).
    pub fn spawn_with<P: Process>(
        &self,
        opts: ChildOptions,
        process: P,
        method: &str,
        input: Payload,
    ) -> Result<Pid, SpawnError> {
        self.spawn_bounded(process, method, input, opts.mailbox_bound())
    }

    fn spawn_bounded<P: Process>(
        &self,
        process: P,
        method: &str,
        input: Payload,
        mailbox: MailboxBound,
    ) -> Result<Pid, SpawnError> {
        let incarnation = Incarnation {
            kind: std::any::type_name::<P>(),
            mailbox,
            ..Incarnation::default()
        };
        let link = Some(Link::supervised_by(self.supervisor));
        self.sched
            .spawn_as(process, method, input, incarnation, link)
            .map(|handle| self.record(handle.pid()))
    }

    /// Spawns `body` (an `async fn`) linked to the supervisor.
    ///
    /// # Errors
    ///
    /// As [`SchedulerHandle::spawn_fn`].
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn spawn_fn<F, Fut, T, E, M>(&self, body: F) -> Result<Pid, SpawnError>
    where
        F: FnOnce(ProcessCx<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<BoxError>,
        M: Send + 'static,
    {
        self.spawn_fn_bounded(body, MailboxBound::Scheduler)
    }

    /// [`spawn_fn`](Self::spawn_fn) with `opts`: the child's own mailbox bound
    /// ([`ChildOptions::mailbox_capacity`], [`ChildOptions::unbounded_mailbox`]), for every
    /// instance the factory starts. Its link is its supervisor's: [`ChildOptions`] has no other
    /// to ask for; a child that needs another link makes it itself.
    ///
    /// # Errors
    ///
    /// As [`SchedulerHandle::spawn_fn`].
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::supervision::{ChildOptions, ChildSpec, Strategy, Supervisor};
    ///
    /// let sched = Scheduler::builder().workers(1).build()?; // unbounded by default
    /// let queue = ChildSpec::new("queue", |start| {
    ///     // Every instance holds at most 2 waiting jobs.
    ///     start.spawn_fn_with(ChildOptions::new().mailbox_capacity(2), |cx: ProcessCx<u64>| async move {
    ///         let _ = cx.cancelled().await;
    ///         Ok::<_, BoxError>(())
    ///     })
    /// })
    /// .register_as("queue");
    /// let sup = sched.block_on(Supervisor::new(Strategy::OneForOne).child(queue).start(sched.handle()))?;
    /// let jobs = sched.named::<u64>("queue").expect("started");
    /// jobs.send(1)?;
    /// jobs.send(2)?;
    /// assert!(jobs.send(3).unwrap_err().is_mailbox_full());
    /// # let _ = sup;
    /// # sched.shutdown(std::time::Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_fn_with<F, Fut, T, E, M>(
        &self,
        opts: ChildOptions,
        body: F,
    ) -> Result<Pid, SpawnError>
    where
        F: FnOnce(ProcessCx<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<BoxError>,
        M: Send + 'static,
    {
        self.spawn_fn_bounded(body, opts.mailbox_bound())
    }

    /// [`spawn_fn`](Self::spawn_fn), its mailbox bounded by `mailbox` (a sub-supervisor's is
    /// unbounded: `mailbox_capacity` bounds the user's processes, not the library's).
    pub(super) fn spawn_fn_bounded<F, Fut, T, E, M>(
        &self,
        body: F,
        mailbox: MailboxBound,
    ) -> Result<Pid, SpawnError>
    where
        F: FnOnce(ProcessCx<M>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Into<BoxError>,
        M: Send + 'static,
    {
        let link = Some(Link::supervised_by(self.supervisor));
        let first_poll = Arc::new(FirstPoll::default());
        let reporting = Arc::clone(&first_poll);
        // Named after the child's body, not the wrapper that reports its first poll.
        let kind = std::any::type_name::<F>();
        let body = move |cx| first_poll::reporting(body(cx), reporting);
        let pid = self.sched.spawn_fn_as(body, link, mailbox, kind)?.pid();
        *self
            .first_poll
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = Some((pid, first_poll));
        Ok(self.record(pid))
    }

    /// The scheduler.
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn scheduler(&self) -> &SchedulerHandle {
        self.sched
    }

    /// The supervisor the child is started for.
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn supervisor(&self) -> Pid {
        self.supervisor
    }
}

impl fmt::Debug for Start<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Start")
            .field("supervisor", &self.supervisor)
            .finish_non_exhaustive()
    }
}

/// Spawns one instance of a child.
pub(super) type Factory = dyn Fn(&Start<'_>) -> Result<Pid, SpawnError> + Send + Sync;

/// One child of a supervisor: an id, a factory that spawns an instance (a state machine or an
/// `async fn`, through [`Start`]), a restart type, a shutdown policy, and optionally a name the
/// supervisor registers for every instance.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::{ChildShutdown, ChildSpec, Restart};
/// use std::time::Duration;
///
/// let worker = ChildSpec::new("worker", |start| {
///     start.spawn_fn(|cx: ProcessCx<u64>| async move {
///         loop {
///             let job = cx.recv().await?;
///             if job == 0 {
///                 return Err::<(), BoxError>("a bad job".into()); // restarted: Permanent
///             }
///         }
///     })
/// })
/// .restart(Restart::Permanent)
/// .shutdown(ChildShutdown::Timeout(Duration::from_secs(1)))
/// .register_as("worker");
/// assert_eq!(worker.id(), "worker");
/// ```
#[derive(Clone)]
#[must_use = "a child spec does nothing until a supervisor takes it"]
pub struct ChildSpec {
    pub(super) id: Arc<str>,
    pub(super) factory: Arc<Factory>,
    pub(super) restart: Restart,
    pub(super) shutdown: ChildShutdown,
    pub(super) name: Option<Arc<str>>,
    /// The child is a supervisor: started synchronously (`run.rs`).
    pub(super) supervisor: bool,
}

impl ChildSpec {
    /// A permanent child, stopped with `ChildShutdown::default()`, whose instances `factory`
    /// spawns.
    ///
    /// The supervisor calls `factory` on its own process at every (re)start. An `Err` from it,
    /// a panic in it, or an `async fn` body that fails or panics in its first poll (a state
    /// machine's `init` fails inside the spawn, an `Err` from the factory) is a start that
    /// failed: [`SupervisorError::Start`](super::SupervisorError::Start)
    /// to whoever started the child, or, on a restart, another restart spent from the
    /// supervisor's intensity — never the supervisor's own end. A factory that fails for a
    /// reason of its own (a resource it could not get) says so with
    /// `Err(SpawnError::Init(InitError::failed(why)))`, as an `init` would.
    ///
    /// The factory spawns one instance through its [`Start`] and returns that PID (or a
    /// process it spawned otherwise and linked to [`Start::supervisor`], such as a nested
    /// supervisor started with [`Supervisor::spawn`](crate::supervision::Supervisor::spawn),
    /// which the supervisor then supervises as one spawned through `Start`: its end stops it
    /// even if it traps exits, and a scheduler shutdown leaves it to the supervisor's stop
    /// order): any other PID — another process's, or none — is refused, a failed start
    /// ([`SupervisorError::Start`](crate::supervision::SupervisorError::Start)), and what the
    /// factory did spawn through its `Start` is terminated. Spawn it last: a process the factory started through `Start` before it failed is linked to the
    /// supervisor (its exit signals reach it) but is none of its children — never restarted,
    /// never stopped by it.
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn new(
        id: impl Into<Arc<str>>,
        factory: impl Fn(&Start<'_>) -> Result<Pid, SpawnError> + Send + Sync + 'static,
    ) -> ChildSpec {
        ChildSpec {
            id: id.into(),
            factory: Arc::new(factory),
            restart: Restart::default(),
            shutdown: ChildShutdown::default(),
            name: None,
            supervisor: false,
        }
    }

    /// Marks the child as a supervisor (`Supervisor::into_child`).
    pub(super) fn marked_supervisor(mut self) -> ChildSpec {
        self.supervisor = true;
        self
    }

    /// Its restart type.
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn restart(mut self, restart: Restart) -> ChildSpec {
        self.restart = restart;
        self
    }

    /// How it is stopped.
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn shutdown(mut self, shutdown: ChildShutdown) -> ChildSpec {
        self.shutdown = shutdown;
        self
    }

    /// Registers every instance under `name` ([`SchedulerHandle::register`]), so callers reach
    /// the live one by name. The supervisor calls the factory only once no process holds the
    /// name, so a new instance never runs beside the previous one. A name another live process
    /// holds fails the start (OTP's `already_started`) before any instance is made: the start is
    /// an error (or, on a restart, another restart spent from the intensity). A name held by a
    /// process on its way out (terminated, asked to end by a linked process's exit, or
    /// finishing: the previous instance, a child a crashed sub-supervisor's exit is ending) is
    /// waited for, so one fault costs one restart — as long as it takes for a child stopped
    /// with [`ChildShutdown::Infinity`], else its `Timeout` or 5 seconds, whichever is longer;
    /// past that the start fails, and no instance was made. A plain `cancel` does not make a
    /// holder on its way out: a process may hear it and run on, as live as any.
    ///
    /// The name is registered as soon as the factory returns, in the supervisor's same step:
    /// callers find the new instance by name once its start returns, but the instance itself
    /// may run before that (a state machine's `init` always does), and finds the name free
    /// then. An instance that ended before its name could be registered has started: its end
    /// is handled by its [`Restart`] type, as any child's.
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn register_as(mut self, name: impl Into<Arc<str>>) -> ChildSpec {
        self.name = Some(name.into());
        self
    }

    /// Its id (unique among its supervisor's children).
    ///
    /// # Examples
    ///
    /// See [`ChildSpec`].
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSpec")
            .field("id", &self.id)
            .field("restart", &self.restart)
            .field("shutdown", &self.shutdown)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
