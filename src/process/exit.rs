//! Why a process ended, as its links and monitors hear it: [`ExitReason`], and the two signals
//! that carry it, [`Exit`] (a linked process ended) and [`Down`] (a monitored process ended).
//!
//! Erlang/OTP's semantics: one reason per end, shared by handles
//! ([`ProcessError::exit_reason`](crate::error::ProcessError::exit_reason)), links, monitors and
//! metrics. `Normal` never kills a linked process; every other reason does, unless it traps
//! exits.

use super::Pid;
use std::error::Error;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Why a process ended.
///
/// # Examples
///
/// ```
/// use procsched::supervision::ExitReason;
///
/// assert!(ExitReason::Normal.is_normal());
/// assert!(!ExitReason::Killed.is_normal());
/// let failed = ExitReason::failed("disk full");
/// assert!(failed.is_abnormal());
/// assert_eq!(failed.to_string(), "failed: disk full");
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum ExitReason {
    /// It finished (`Done`, an `async fn` body's `Ok`) without being asked to.
    Normal,
    /// A step (or the body) returned this error.
    Failed(Arc<dyn Error + Send + Sync>),
    /// A step, `init` or `close` panicked, with this message.
    Panicked(Arc<str>),
    /// It was terminated (`terminate`, a supervisor's brutal kill).
    Killed,
    /// It was asked to finish and did — a shutdown, a
    /// [`cancel`](crate::SchedulerHandle::cancel), its supervisor stopping it — whether it
    /// then returned its cancellation or ended well (`Done`, `Ok`).
    Shutdown,
    /// It was already gone when the link or monitor was set up.
    NoProc,
    /// Its node could not be reached (a process on another node).
    NoConnection,
}

impl ExitReason {
    /// A `Failed` reason with `error`.
    ///
    /// # Examples
    ///
    /// ```
    /// let reason = procsched::supervision::ExitReason::failed("bad input");
    /// assert!(reason.is_failed());
    /// ```
    pub fn failed(error: impl Into<Box<dyn Error + Send + Sync>>) -> ExitReason {
        ExitReason::Failed(Arc::from(error.into()))
    }

    /// `true` for `Normal`: the one reason that never kills a linked process.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::supervision::ExitReason::Normal.is_normal());
    /// ```
    pub fn is_normal(&self) -> bool {
        matches!(self, ExitReason::Normal)
    }

    /// `true` for every reason but `Normal`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::supervision::ExitReason::Shutdown.is_abnormal());
    /// ```
    pub fn is_abnormal(&self) -> bool {
        !self.is_normal()
    }

    /// `true` for `Normal` and `Shutdown`: what a *transient* child is not restarted after
    /// (OTP's rule).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::supervision::ExitReason;
    /// assert!(ExitReason::Shutdown.is_clean() && !ExitReason::Killed.is_clean());
    /// ```
    pub fn is_clean(&self) -> bool {
        matches!(self, ExitReason::Normal | ExitReason::Shutdown)
    }

    /// `true` for `Failed`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::supervision::ExitReason::failed("x").is_failed());
    /// ```
    pub fn is_failed(&self) -> bool {
        matches!(self, ExitReason::Failed(_))
    }

    /// `true` for `Panicked`.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::supervision::ExitReason;
    /// assert!(ExitReason::Panicked("boom".into()).is_panicked());
    /// ```
    pub fn is_panicked(&self) -> bool {
        matches!(self, ExitReason::Panicked(_))
    }

    /// `true` for `Killed`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::supervision::ExitReason::Killed.is_killed());
    /// ```
    pub fn is_killed(&self) -> bool {
        matches!(self, ExitReason::Killed)
    }

    /// `true` for `Shutdown`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::supervision::ExitReason::Shutdown.is_shutdown());
    /// ```
    pub fn is_shutdown(&self) -> bool {
        matches!(self, ExitReason::Shutdown)
    }

    /// `true` for `NoProc`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::supervision::ExitReason::NoProc.is_no_proc());
    /// ```
    pub fn is_no_proc(&self) -> bool {
        matches!(self, ExitReason::NoProc)
    }

    /// `true` for `NoConnection`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::supervision::ExitReason::NoConnection.is_no_connection());
    /// ```
    pub fn is_no_connection(&self) -> bool {
        matches!(self, ExitReason::NoConnection)
    }

    /// A short name: `normal`, `failed`, `panicked`, `killed`, `shutdown`, `noproc`,
    /// `noconnection` (for logs and metrics labels).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(procsched::supervision::ExitReason::Killed.name(), "killed");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            ExitReason::Normal => "normal",
            ExitReason::Failed(_) => "failed",
            ExitReason::Panicked(_) => "panicked",
            ExitReason::Killed => "killed",
            ExitReason::Shutdown => "shutdown",
            ExitReason::NoProc => "noproc",
            ExitReason::NoConnection => "noconnection",
        }
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitReason::Failed(error) => write!(f, "failed: {error}"),
            ExitReason::Panicked(message) => write!(f, "panicked: {message}"),
            other => f.write_str(other.name()),
        }
    }
}

impl fmt::Debug for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitReason::Failed(error) => f.debug_tuple("Failed").field(&error.to_string()).finish(),
            ExitReason::Panicked(message) => f.debug_tuple("Panicked").field(message).finish(),
            ExitReason::Normal => f.write_str("Normal"),
            ExitReason::Killed => f.write_str("Killed"),
            ExitReason::Shutdown => f.write_str("Shutdown"),
            ExitReason::NoProc => f.write_str("NoProc"),
            ExitReason::NoConnection => f.write_str("NoConnection"),
        }
    }
}

/// Two reasons are equal when they are the same kind with the same text (errors compare by
/// their message).
impl PartialEq for ExitReason {
    fn eq(&self, other: &ExitReason) -> bool {
        match (self, other) {
            (ExitReason::Failed(a), ExitReason::Failed(b)) => a.to_string() == b.to_string(),
            (ExitReason::Panicked(a), ExitReason::Panicked(b)) => a == b,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

impl Eq for ExitReason {}

/// A linked process ended: what a process that traps exits receives instead of ending too
/// ([`Event::Exit`](crate::state_machine::Event::Exit), or
/// [`ProcessCx::recv_signal`](crate::ProcessCx::recv_signal) in an `async fn` body).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::Signal;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let parent = sched.spawn_fn(|cx: ProcessCx| async move {
///     cx.trap_exit(true); // hear a linked process's end instead of ending with it
///     let child = cx.spawn_link(|_: ProcessCx| async { Err::<(), BoxError>("crashed".into()) })?;
///     match cx.recv_signal().await? {
///         Signal::Exit(exit) => Ok::<_, BoxError>((exit.pid == child, exit.node.is_none())),
///         other => Err(format!("{other:?}").into()),
///     }
/// })?;
/// assert_eq!(sched.block_on(parent)?, (true, true));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exit {
    /// The linked process that ended (on its own node, if [`node`](Self::node) is set).
    pub pid: Pid,
    /// Why.
    pub reason: ExitReason,
    /// The node of a process linked across nodes (feature `cluster`); `None` for a process of
    /// this scheduler.
    pub node: Option<ExitNode>,
}

/// The node of a linked or monitored process on another node: its name and incarnation (with
/// [`Exit::pid`] or [`Down::pid`], a `cluster::NodePid`).
///
/// # Examples
///
/// ```
/// use procsched::supervision::{Down, ExitNode};
///
/// // A `Down` from across nodes says which node; one from this scheduler says none.
/// fn node_of(down: &Down) -> Option<&ExitNode> {
///     down.node.as_ref()
/// }
/// # let _ = node_of;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ExitNode {
    /// The node's name.
    pub name: Arc<str>,
    /// The node's incarnation.
    pub incarnation: u64,
}

impl Exit {
    pub(crate) fn new(pid: Pid, reason: ExitReason) -> Exit {
        Exit {
            pid,
            reason,
            node: None,
        }
    }

    /// An exit signal from process `pid` of another node.
    #[cfg(feature = "cluster")]
    pub(crate) fn remote(pid: Pid, reason: ExitReason, name: Arc<str>, incarnation: u64) -> Exit {
        Exit {
            pid,
            reason,
            node: Some(ExitNode { name, incarnation }),
        }
    }
}

/// A monitored process ended (or was already gone: `NoProc`): delivered exactly once per
/// monitor ([`Event::Down`](crate::state_machine::Event::Down), or
/// [`ProcessCx::recv_signal`](crate::ProcessCx::recv_signal)).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::supervision::Signal;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let watcher = sched.spawn_fn(|cx: ProcessCx| async move {
///     let watched = cx.spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(()) })?.pid();
///     let monitor = cx.monitor(watched);
///     match cx.recv_signal().await? {
///         Signal::Down(down) => Ok::<_, BoxError>(down.monitor == monitor && down.pid == watched),
///         other => Err(format!("{other:?}").into()),
///     }
/// })?;
/// assert!(sched.block_on(watcher)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Down {
    /// The monitor this answers.
    pub monitor: MonitorRef,
    /// The monitored process (on its own node, if [`node`](Self::node) is set).
    pub pid: Pid,
    /// Why it ended.
    pub reason: ExitReason,
    /// The node of a process monitored across nodes (feature `cluster`:
    /// `cluster::Node::monitor_from`); `None` for a process of this scheduler.
    pub node: Option<ExitNode>,
}

impl Down {
    pub(crate) fn new(monitor: MonitorRef, pid: Pid, reason: ExitReason) -> Down {
        Down {
            monitor,
            pid,
            reason,
            node: None,
        }
    }

    /// The end of process `pid` of another node.
    #[cfg(feature = "cluster")]
    pub(crate) fn remote(
        monitor: MonitorRef,
        pid: Pid,
        reason: ExitReason,
        name: Arc<str>,
        incarnation: u64,
    ) -> Down {
        Down {
            monitor,
            pid,
            reason,
            node: Some(ExitNode { name, incarnation }),
        }
    }
}

/// Names one monitor: unique for the program's life (never reused).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let target = sched.spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
/// let watcher = sched.spawn_fn(move |cx: ProcessCx<()>| async move {
///     let monitor = cx.monitor(target.pid());
///     target.addr().send(())?;                        // lets it finish
///     let down = cx.recv_down().await?;
///     Ok::<_, BoxError>(down.monitor == monitor && down.reason.is_normal())
/// })?;
/// assert!(sched.block_on(watcher)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MonitorRef {
    id: u64,
    target: Pid,
}

/// The bit of a [`MonitorRef`]'s id that marks a *held* monitor: one whose `Down` another layer
/// delivers (the cluster's monitors of processes on other nodes), so that a demonitor tells that
/// layer (`scheduler/held_monitors.rs`). Ids never reach it by counting.
const HELD: u64 = 1 << 63;

impl MonitorRef {
    /// A new, never used reference to a monitor of `target`.
    pub(crate) fn next(target: Pid) -> MonitorRef {
        // Plain std: an identity, not part of any protocol a loom model explores.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        MonitorRef {
            id: NEXT.fetch_add(1, Relaxed),
            target,
        }
    }

    /// A new reference to a held monitor of `target` (see [`HELD`]): `target` is another
    /// node's PID.
    #[cfg(feature = "cluster")]
    pub(crate) fn next_held(target: Pid) -> MonitorRef {
        let mut monitor = MonitorRef::next(target);
        monitor.id |= HELD;
        monitor
    }

    /// `true` for a held monitor (see [`HELD`]).
    pub(crate) fn is_held(&self) -> bool {
        self.id & HELD != 0
    }

    /// The monitored process.
    ///
    /// # Examples
    ///
    /// ```
    /// let sched = procsched::Scheduler::builder().workers(1).build()?;
    /// let gone = procsched::Pid::from_raw(1 << 26).unwrap();
    /// assert_eq!(sched.monitor(gone).reference().target(), gone);
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn target(&self) -> Pid {
        self.target
    }
}

impl fmt::Display for MonitorRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#Ref<{}.{}>", self.target, self.id & !HELD)
    }
}

/// What a process hears of the processes it links to and monitors: what
/// [`ProcessCx::recv_signal`](crate::ProcessCx::recv_signal) resolves to. `#[non_exhaustive]`:
/// a `match` needs a `_` arm (a later version may add a kind of signal).
///
/// # Examples
///
/// See [`ProcessCx::recv_signal`](crate::ProcessCx::recv_signal), and [`Exit`] and [`Down`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signal {
    /// A linked process ended (this process traps exits).
    Exit(Exit),
    /// A monitored process ended.
    Down(Down),
}

/// An exit reason is an error too: a body (or step) that returns one — `Err(reason.into())` —
/// ends with exactly that reason (`Shutdown` ends it as cancelled). A supervisor that gives up
/// ends this way, and so can a trapping process that wants to end with a linked process's
/// reason.
impl Error for ExitReason {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ExitReason::Failed(error) => Some(&**error),
            _ => None,
        }
    }
}
