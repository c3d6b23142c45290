//! Supervisors: processes that start children from specs and restart them by a policy
//! (Erlang/OTP's `supervisor`).
//!
//! A supervisor is an ordinary `async fn` process that traps exits and links every child it
//! starts (so supervisors nest into trees). When a child ends, its restart type says whether it
//! comes back, the strategy which of its siblings come back with it, and the restart intensity
//! whether the supervisor gives up: past `max_restarts` restarts within `within`, it stops every
//! child in reverse start order and ends with [`ExitReason::Shutdown`], which its own supervisor
//! sees. A restarted child is a new process with a new PID; a child spec's name
//! ([`ChildSpec::register_as`]) is registered for every instance, so callers reach the live
//! one by name.
//!
//! Starts are synchronous, as OTP's `start_link` (which returns once the child's `init/1`
//! has): children start in order, at the first start, at a restart (`OneForAll`,
//! `RestForOne`: in start order) and by [`SupervisorRef::start_child`], each only once the one
//! before it has *started* — a state machine's `init` has returned, an `async fn` body's first
//! poll has returned (it reached its first `.await` that waits, or finished). What a child does
//! before its first await (trap exits, register a name, link, monitor) is done before its
//! younger sibling runs. A body that fails or panics in its first poll has failed its start, as a
//! state machine whose `init` fails. The supervisor awaits the first poll (its worker runs
//! others meanwhile), bounded by the child's [`ChildShutdown`]: `Infinity` waits as long as it
//! takes (OTP's `start_link` waits for `init` without a timeout), otherwise its `Timeout` or 5
//! seconds, whichever is longer (the wait includes the child's wait for a worker): a body that
//! never returns from its first poll (a blocking loop) fails its start and is terminated,
//! instead of holding the supervisor for ever.
//!
//! A supervisor's end stops its children even when they trap exits, as OTP's behaviours end on
//! their parent's `EXIT`. A supervisor that ends in order (past its intensity, cancelled, in a
//! shutdown, stopped by its own supervisor) first stops each child by its [`ChildShutdown`]:
//! they end `Shutdown` (or `Killed`, past a timeout). One that is terminated reaches its
//! children through their links: its exit signal reaches a child that traps exits as a cancel
//! it cannot trap (its receives report the cancellation, a state machine gets
//! `Event::Cancel`: its cleanup runs, as `terminate/2`), and a body that ends on that
//! cancellation (`?` on the receive that reports it) ends with the supervisor's exit reason;
//! a child that does not trap exits ends at once, with that reason. Exit signals from any
//! other linked process stay trappable.
//!
//! A child's stop is cooperative, whether it traps exits or not (OTP kills a child that does
//! not at once): [`ChildShutdown::Timeout`] and [`ChildShutdown::Infinity`] cancel it, and a
//! child inside an await other than a receive (a tokio timer, a database call) hears that at
//! its next receive — or, past the timeout, is terminated (`Killed`). Each such child delays a
//! `OneForAll` or `RestForOne` restart of its siblings by its timeout. Give it
//! [`ChildShutdown::BrutalKill`], or race its long awaits against
//! [`cx.cancelled()`](crate::ProcessCx::cancelled).
//!
//! The default intensity is 3 restarts within 5 seconds (Elixir's; OTP's is 1 in 5 s, which a
//! pool of sessions crashing independently outgrows at once).
//!
//! `run.rs` is the supervisor's body; `spec.rs` what it is built from; `first_poll.rs` how an
//! `async fn` child's start is reported.

mod first_poll;
mod run;
mod spec;

pub use spec::{ChildShutdown, ChildSpec, Restart, Start, Strategy};

use super::{Addr, AskError, ProcessHandle, Reply, SchedulerHandle};
use crate::process::exit::ExitReason;
use crate::process::mailbox::MailboxBound;
use crate::process::{MessageType, Pid};
use crate::scheduler::{SendErrorKind, SpawnError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The default restart intensity: at most this many restarts…
pub const DEFAULT_MAX_RESTARTS: u32 = 3;
/// …within this window.
pub const DEFAULT_RESTART_WINDOW: Duration = Duration::from_secs(5);

/// A supervisor to start: its strategy, intensity and children.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::{ChildSpec, Supervisor};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), BoxError> {
/// let sched = Scheduler::builder().workers(2).build()?;
/// let echo = ChildSpec::new("echo", |start| {
///     start.spawn_fn(|cx: ProcessCx<(u64, Reply<u64>)>| async move {
///         loop {
///             let (n, reply) = cx.recv().await?;
///             let _ = reply.send(n);
///         }
///         #[allow(unreachable_code)]
///         Ok::<(), BoxError>(())
///     })
/// })
/// .register_as("echo");
/// let supervisor = Supervisor::one_for_one().child(echo).start(sched.handle()).await?;
/// let first = sched.handle().whereis("echo").expect("registered at start");
/// sched.terminate(first)?;                                   // killed: the supervisor restarts it
/// let children = supervisor.which_children().await?;
/// # let _ = children;
/// let addr = loop {
///     match sched.handle().whereis("echo") {
///         Some(pid) if pid != first => break sched.handle().addr::<(u64, Reply<u64>)>(pid),
///         _ => tokio::task::yield_now().await,
///     }
/// };
/// assert_eq!(addr.ask(|reply| (7, reply)).await?, 7);
/// assert_eq!(supervisor.restarts().await?, 1);
/// # sched.shutdown_async(std::time::Duration::from_secs(5)).await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a supervisor does nothing until it is started (`start`, `spawn`) or nested as a child"]
pub struct Supervisor {
    pub(super) strategy: Strategy,
    pub(super) max_restarts: u32,
    pub(super) within: Duration,
    pub(super) children: Vec<ChildSpec>,
}

impl Supervisor {
    /// A supervisor with `strategy` and no children yet.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::supervision::{Strategy, Supervisor};
    /// let supervisor = Supervisor::new(Strategy::RestForOne);
    /// # drop(supervisor);
    /// ```
    pub fn new(strategy: Strategy) -> Supervisor {
        Supervisor {
            strategy,
            max_restarts: DEFAULT_MAX_RESTARTS,
            within: DEFAULT_RESTART_WINDOW,
            children: Vec::new(),
        }
    }

    /// `Supervisor::new(Strategy::OneForOne)`.
    ///
    /// # Examples
    ///
    /// See [`Supervisor`].
    pub fn one_for_one() -> Supervisor {
        Supervisor::new(Strategy::OneForOne)
    }

    /// `Supervisor::new(Strategy::OneForAll)`.
    ///
    /// # Examples
    ///
    /// ```
    /// let supervisor = procsched::supervision::Supervisor::one_for_all();
    /// # drop(supervisor);
    /// ```
    pub fn one_for_all() -> Supervisor {
        Supervisor::new(Strategy::OneForAll)
    }

    /// `Supervisor::new(Strategy::RestForOne)`.
    ///
    /// # Examples
    ///
    /// ```
    /// let supervisor = procsched::supervision::Supervisor::rest_for_one();
    /// # drop(supervisor);
    /// ```
    pub fn rest_for_one() -> Supervisor {
        Supervisor::new(Strategy::RestForOne)
    }

    /// The restart intensity: at most `max_restarts` within `within` (default
    /// [`DEFAULT_MAX_RESTARTS`] in [`DEFAULT_RESTART_WINDOW`]). A zero `within` with a
    /// non-zero `max_restarts` would never count two restarts together, so such a supervisor
    /// does not start ([`SupervisorError::ZeroRestartWindow`]; OTP's `invalid_period`);
    /// `max_restarts(0, _)` never restarts, whatever the window.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let supervisor = procsched::supervision::Supervisor::one_for_one()
    ///     .max_restarts(10, Duration::from_secs(1));
    /// # drop(supervisor);
    /// ```
    pub fn max_restarts(mut self, max_restarts: u32, within: Duration) -> Supervisor {
        self.max_restarts = max_restarts;
        self.within = within;
        self
    }

    /// Adds a child, started after the ones added before it. Its id must be unique among the
    /// supervisor's children: a supervisor given two children of one id does not start
    /// ([`SupervisorError::DuplicateId`] from [`start`](Self::start); as OTP's
    /// `duplicate_child_name`).
    ///
    /// # Examples
    ///
    /// See [`Supervisor`].
    pub fn child(mut self, spec: ChildSpec) -> Supervisor {
        self.children.push(spec);
        self
    }

    /// Starts the supervisor as a process of `sched`; it starts its children, in order, in
    /// its first step (see [`start`](Self::start) to wait for them).
    ///
    /// # Errors
    ///
    /// As [`SchedulerHandle::spawn_fn`].
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::supervision::Supervisor;
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// let supervisor = Supervisor::one_for_one().spawn(sched.handle())?;
    /// # let _ = supervisor;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn(self, sched: &SchedulerHandle) -> Result<SupervisorRef, SpawnError> {
        let handle = self.spawn_process(sched, None)?;
        Ok(SupervisorRef {
            addr: handle.addr(),
        })
    }

    /// The supervisor's process. Its mailbox is unbounded whatever `mailbox_capacity` says:
    /// that bounds the user's processes, while a supervisor's holds only its API's requests
    /// (each awaited by its caller) and its own retries — refusing those would make a live
    /// supervisor look ended (OTP's supervisors have no bound either).
    fn spawn_process(
        self,
        sched: &SchedulerHandle,
        started: Option<Arc<AtomicBool>>,
    ) -> Result<ProcessHandle<(), Request>, SpawnError> {
        sched.spawn_fn_as(
            move |cx| run::supervise(cx, self, None, started),
            None,
            MailboxBound::Unbounded,
            "procsched::supervision::Supervisor",
        )
    }

    /// Starts the supervisor and waits until its children have started (OTP's
    /// `start_link`, without the link). Once they have, this returns the supervisor whatever
    /// happens next: a child that crashes right after its start is the running supervisor's to
    /// handle, even if that ends it (past its restart intensity) before this returns.
    ///
    /// # Errors
    ///
    /// [`SupervisorError::DuplicateId`], before anything starts, if two children have one id,
    /// and [`SupervisorError::ZeroRestartWindow`] if [`max_restarts`](Self::max_restarts) was
    /// given a zero window;
    /// [`SupervisorError::Start`] if the supervisor could not be spawned or one of its
    /// children could not be started (the supervisor then stops those it started, and ends) —
    /// except during a scheduler shutdown, which refuses every spawn: then the children not
    /// started are kept as not running until the supervisor is stopped, and this returns the
    /// supervisor, or `Start` if it has ended on the shutdown's cancel already;
    /// [`SupervisorError::Unreachable`], at once, if the wait itself failed (the caller, a
    /// process, was asked to finish): the supervisor, which no one holds then, is stopped.
    ///
    /// # Examples
    ///
    /// See [`Supervisor`].
    pub async fn start(self, sched: &SchedulerHandle) -> Result<SupervisorRef, SupervisorError> {
        // Set by the supervisor once every child started: its answer to `started` may never
        // come even so — an exit queued meanwhile may end it first (past its restart
        // intensity) — and then it did start, as OTP's `start_link` returns `{ok, Pid}` once
        // `init` has, whatever happens next.
        if let Some(refused) = self.refusal() {
            return Err(refused);
        }
        let started = Arc::new(AtomicBool::new(false));
        let handle = self
            .spawn_process(sched, Some(started.clone()))
            .map_err(|error| SupervisorError::Start(error.to_string()))?;
        let supervisor = SupervisorRef {
            addr: handle.addr(),
        };
        if let Err(error) = supervisor.started().await {
            let ended = matches!(
                error,
                AskError::NoReply
                    | AskError::Undelivered(SendErrorKind::NotFound | SendErrorKind::Closed)
            );
            if ended && started.load(Ordering::Acquire) {
                return Ok(supervisor);
            }
            if !ended {
                // Not its end (the caller, a process, was asked to finish while it waited; or
                // the request was refused): the supervisor it started has no owner, so it is
                // stopped — and not waited for, as it may be alive and idle.
                let _ = sched.cancel(handle.pid());
                return Err(SupervisorError::Unreachable(error.to_string()));
            }
            // It ended: its exit reason names the child and why it could not start.
            let why = match handle.await {
                Err(ended) => match ended.exit_reason() {
                    ExitReason::Failed(why) => why.to_string(),
                    other => format!("the supervisor ended: {other}"),
                },
                Ok(()) => "the supervisor ended".to_owned(),
            };
            return Err(SupervisorError::Start(why));
        }
        Ok(supervisor)
    }

    /// Why this supervisor cannot start, if it cannot: a zero restart window that would
    /// count restarts, or an id given to two of the children (the first such).
    pub(super) fn refusal(&self) -> Option<SupervisorError> {
        if self.within.is_zero() && self.max_restarts > 0 {
            return Some(SupervisorError::ZeroRestartWindow);
        }
        let mut seen = std::collections::HashSet::new();
        self.children
            .iter()
            .find(|spec| !seen.insert(&spec.id))
            .map(|spec| SupervisorError::DuplicateId(spec.id.clone()))
    }

    /// This supervisor as a child of another (a subtree): a permanent child that is stopped
    /// with `ChildShutdown::Infinity`.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::supervision::Supervisor;
    /// let tree = Supervisor::one_for_one().child(Supervisor::one_for_all().into_child("pool"));
    /// # drop(tree);
    /// ```
    pub fn into_child(self, id: impl Into<Arc<str>>) -> ChildSpec {
        ChildSpec::new(id, move |start: &Start<'_>| {
            let supervisor = self.clone();
            let parent = start.supervisor();
            // Unbounded, as a root supervisor's (`spawn_process`).
            start.spawn_fn_bounded(
                move |cx| run::supervise(cx, supervisor, Some(parent), None),
                MailboxBound::Unbounded,
            )
        })
        .shutdown(ChildShutdown::Infinity)
        .marked_supervisor()
    }
}

/// [`SupervisorError::Start`]'s text: its cause behind a preamble, unless the cause names the
/// child already (a supervisor's failed start: "child `db` could not be started: …").
fn start_failure(why: &str) -> std::borrow::Cow<'_, str> {
    if why.starts_with(run::NAMED_CHILD_NOT_STARTED) {
        why.into()
    } else {
        format!("the child could not be started: {why}").into()
    }
}

/// What a supervisor is asked by its [`SupervisorRef`].
pub(crate) enum Request {
    StartChild(ChildSpec, Reply<Result<Pid, SupervisorError>>),
    TerminateChild(Arc<str>, Reply<Result<(), SupervisorError>>),
    WhichChildren(Reply<Vec<ChildInfo>>),
    Restarts(Reply<u64>),
    /// Answered once the children have started (every request is).
    Started(Reply<()>),
    /// The supervisor's own: try again the restart of this child, which failed.
    Restart(Arc<str>),
}

/// A running supervisor: add and remove children, look at them.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::Supervisor;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), BoxError> {
/// let sched = Scheduler::builder().workers(1).build()?;
/// let pool = Supervisor::one_for_one().spawn(sched.handle())?;
/// // Any number of clones reach the same supervisor; its PID can be linked to or monitored.
/// let also = pool.clone();
/// assert_eq!(also.pid(), pool.pid());
/// assert!(pool.which_children().await?.is_empty());
/// # sched.shutdown_async(std::time::Duration::from_secs(5)).await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SupervisorRef {
    addr: Addr<Request>,
}

/// One child, as [`SupervisorRef::which_children`] reports it.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::{ChildSpec, Restart, Supervisor};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), BoxError> {
/// let sched = Scheduler::builder().workers(1).build()?;
/// let sup = Supervisor::one_for_one()
///     .child(ChildSpec::new("cache", |start| {
///         start.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })
///     }))
///     .start(sched.handle())
///     .await?;
/// let children = sup.which_children().await?;
/// assert_eq!(&*children[0].id, "cache");
/// assert!(children[0].pid.is_some());
/// assert_eq!(children[0].restart, Restart::Permanent);
/// # sched.shutdown_async(std::time::Duration::from_secs(5)).await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildInfo {
    /// Its spec's id.
    pub id: Arc<str>,
    /// The running instance, if any.
    pub pid: Option<Pid>,
    /// Its restart type.
    pub restart: Restart,
}

/// Why a request to a supervisor failed.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::{Supervisor, SupervisorError};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), BoxError> {
/// let sched = Scheduler::builder().workers(1).build()?;
/// let pool = Supervisor::one_for_one().spawn(sched.handle())?;
/// let missing = pool.terminate_child("nobody").await;
/// assert!(matches!(missing, Err(SupervisorError::NoChild(id)) if &*id == "nobody"));
/// # sched.shutdown_async(std::time::Duration::from_secs(5)).await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SupervisorError {
    /// A child with this id exists already.
    #[error("a child with id `{0}` exists already")]
    DuplicateId(Arc<str>),
    /// No child has this id.
    #[error("no child with id `{0}`")]
    NoChild(Arc<str>),
    /// [`Supervisor::max_restarts`] was given a zero window and a non-zero count: no two
    /// restarts would ever fall within it, so the supervisor would never give up (OTP refuses
    /// such a period too: `invalid_period`).
    #[error("a restart window of zero: the supervisor would never give up")]
    ZeroRestartWindow,
    /// The child could not be started.
    #[error("{}", start_failure(.0))]
    Start(String),
    /// The request got no answer, for the reason in the message: the supervisor has ended
    /// (or the PID is not a supervisor's), or the ask failed on the caller's side — a process
    /// asking was asked to finish while it waited. (A supervisor's mailbox is unbounded:
    /// `mailbox_capacity` never refuses its requests.)
    #[error("the supervisor did not answer: {0}")]
    Unreachable(String),
}

impl SupervisorRef {
    /// The supervisor running as `pid` (a sub-supervisor, found in its parent's
    /// [`which_children`](Self::which_children)). Requests to a process that is not a
    /// supervisor fail with [`SupervisorError::Unreachable`].
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::supervision::{Supervisor, SupervisorRef};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// let root = Supervisor::one_for_one()
    ///     .child(Supervisor::one_for_one().into_child("pool"))
    ///     .start(sched.handle())
    ///     .await?;
    /// let pool = root.which_children().await?[0].pid.expect("running");
    /// let pool = SupervisorRef::from_pid(sched.handle(), pool);
    /// assert!(pool.which_children().await?.is_empty());
    /// # sched.shutdown_async(std::time::Duration::from_secs(5)).await;
    /// # Ok(()) }
    /// ```
    pub fn from_pid(sched: &SchedulerHandle, pid: Pid) -> SupervisorRef {
        SupervisorRef {
            addr: sched.addr(pid),
        }
    }

    /// The supervisor's PID (link to it, monitor it, terminate it).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::supervision::Supervisor;
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// let supervisor = Supervisor::one_for_one().spawn(sched.handle())?;
    /// assert!(sched.state(supervisor.pid()).is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pid(&self) -> Pid {
        self.addr.pid()
    }

    /// Starts a child from `spec` (a dynamic child: a pool's session), after the others.
    ///
    /// # Errors
    ///
    /// [`SupervisorError::DuplicateId`], [`SupervisorError::Start`] (the spawn failed),
    /// [`SupervisorError::Unreachable`].
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::supervision::{ChildSpec, Restart, Supervisor};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), BoxError> {
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let pool = Supervisor::one_for_one().spawn(sched.handle())?;
    /// let session = ChildSpec::new("session-1", |start| {
    ///     start.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })
    /// })
    /// .restart(Restart::Temporary);
    /// let pid = pool.start_child(session).await?;
    /// assert_eq!(pool.which_children().await?[0].pid, Some(pid));
    /// pool.terminate_child("session-1").await?;
    /// assert!(pool.which_children().await?.is_empty());
    /// # sched.shutdown_async(std::time::Duration::from_secs(5)).await;
    /// # Ok(()) }
    /// ```
    pub async fn start_child(&self, spec: ChildSpec) -> Result<Pid, SupervisorError> {
        self.ask(|reply| Request::StartChild(spec, reply)).await?
    }

    /// Stops the child `id` by its shutdown policy and forgets its spec — also the spec of a
    /// child no longer running (a `Transient` one that ended cleanly: OTP's `delete_child`).
    ///
    /// # Errors
    ///
    /// [`SupervisorError::NoChild`], [`SupervisorError::Unreachable`].
    ///
    /// # Examples
    ///
    /// See [`start_child`](Self::start_child).
    pub async fn terminate_child(&self, id: &str) -> Result<(), SupervisorError> {
        let id: Arc<str> = id.into();
        self.ask(|reply| Request::TerminateChild(id, reply)).await?
    }

    /// The children, in start order.
    ///
    /// # Errors
    ///
    /// [`SupervisorError::Unreachable`].
    ///
    /// # Examples
    ///
    /// See [`start_child`](Self::start_child).
    pub async fn which_children(&self) -> Result<Vec<ChildInfo>, SupervisorError> {
        self.ask(Request::WhichChildren).await
    }

    /// Resolves once the supervisor has started its children (every request is answered after
    /// that).
    pub(super) async fn started(&self) -> Result<(), crate::scheduler::AskError> {
        self.addr.ask(Request::Started).await
    }

    /// How many restarts the supervisor has made.
    ///
    /// # Errors
    ///
    /// [`SupervisorError::Unreachable`].
    ///
    /// # Examples
    ///
    /// See [`Supervisor`].
    pub async fn restarts(&self) -> Result<u64, SupervisorError> {
        self.ask(Request::Restarts).await
    }

    /// Asks the supervisor; `Unreachable` if it has ended, or at once if the PID is another
    /// kind of process (whose body might keep the request and never answer).
    async fn ask<R: Send + 'static>(
        &self,
        request: impl FnOnce(Reply<R>) -> Request,
    ) -> Result<R, SupervisorError> {
        let pid = self.addr.pid();
        let takes = self.addr.scheduler().takes(pid);
        if let Some(takes) = takes {
            if takes.map(MessageType::id) != MessageType::of::<Request>().map(MessageType::id) {
                return Err(SupervisorError::Unreachable(format!(
                    "{pid} is not a supervisor"
                )));
            }
        }
        self.addr
            .ask(request)
            .await
            .map_err(|error| SupervisorError::Unreachable(error.to_string()))
    }
}

/// The reason a supervisor that gave up ends with.
pub(super) fn gave_up() -> ExitReason {
    ExitReason::Shutdown
}
