//! Errors of the process layer.

use super::exit::ExitReason;
use super::Pid;
use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// A boxed error from user code (a failing `step`, `init` or handler).
///
/// # Examples
///
/// ```
/// use procsched::BoxError;
///
/// fn parse(text: &str) -> Result<u64, BoxError> {
///     Ok(text.trim().parse::<u64>()?) // any `Error + Send + Sync` converts with `?`
/// }
/// assert_eq!(parse(" 42 ").unwrap(), 42);
/// assert!(parse("x").is_err());
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a yield completed without a result. Delivered to the process in
/// [`Event::YieldComplete`](crate::state_machine::Event::YieldComplete).
///
/// # Examples
///
/// ```
/// use procsched::error::CommandError;
///
/// // How a step reads a completion that carries no result.
/// fn describe(error: &CommandError) -> &'static str {
///     if error.is_timed_out() {
///         "no result within the yield's timeout"
///     } else if error.is_no_handler() {
///         "nothing handles this command type"
///     } else {
///         "the handler failed"
///     }
/// }
/// assert_eq!(describe(&CommandError::TimedOut), "no result within the yield's timeout");
/// assert_eq!(describe(&CommandError::failed("disk full")), "the handler failed");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// No handler is registered for the command's type.
    #[error("no handler registered for command type `{0}`")]
    NoHandler(&'static str),
    /// The handler panicked.
    #[error("command handler panicked: {0}")]
    Panicked(String),
    /// The command did not complete within its deadline.
    #[error("command timed out")]
    TimedOut,
    /// The command had a deadline, but the tokio runtime its handler runs on has no timers.
    #[error(
        "deadline needs a tokio runtime with timers: build it with `enable_time()` / `enable_all()`"
    )]
    NoTimer,
    /// The handler's task was dropped before completing (its runtime shut down).
    #[error("command was cancelled before it completed")]
    Cancelled,
    /// An ask's reply port was dropped unanswered (by the asked process, or with its mailbox
    /// when it ended): the completion of a state machine's
    /// [`AskCommand`](crate::state_machine::AskCommand).
    #[error("the reply port was dropped unanswered (by the asked process, or unread with its mailbox when it ended)")]
    NoReply,
    /// The handler reported an error.
    #[error("command failed: {0}")]
    Failed(#[source] BoxError),
    /// The call was polled outside its own process — in another task, or in another process's
    /// body — so it was never sent (or its reply cannot be reached from there): the other
    /// process's state is untouched. Await a call in the body of the process that made it.
    #[error("a procsched call was polled outside its own process")]
    OutsideProcess,
}

impl CommandError {
    /// `true` for [`CommandError::TimedOut`].
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::error::CommandError::TimedOut.is_timed_out());
    /// ```
    pub fn is_timed_out(&self) -> bool {
        matches!(self, CommandError::TimedOut)
    }

    /// `true` for [`CommandError::Cancelled`].
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::error::CommandError::Cancelled.is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self, CommandError::Cancelled)
    }

    /// `true` for [`CommandError::NoReply`].
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::error::CommandError::NoReply.is_no_reply());
    /// ```
    pub fn is_no_reply(&self) -> bool {
        matches!(self, CommandError::NoReply)
    }

    /// `true` for [`CommandError::Panicked`].
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::error::CommandError::Panicked("boom".into()).is_panicked());
    /// ```
    pub fn is_panicked(&self) -> bool {
        matches!(self, CommandError::Panicked(_))
    }

    /// `true` for [`CommandError::NoHandler`].
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::error::CommandError::NoHandler("Ping").is_no_handler());
    /// ```
    pub fn is_no_handler(&self) -> bool {
        matches!(self, CommandError::NoHandler(_))
    }

    /// `true` for [`CommandError::Failed`] (the handler's own error).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::error::CommandError::failed("disk full").is_failed());
    /// ```
    pub fn is_failed(&self) -> bool {
        matches!(self, CommandError::Failed(_))
    }

    /// A handler failure with `error` as its source.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = procsched::error::CommandError::failed("disk full");
    /// assert_eq!(e.to_string(), "command failed: disk full");
    /// ```
    pub fn failed(error: impl Into<BoxError>) -> CommandError {
        CommandError::Failed(error.into())
    }
}

/// Why `init` refused to start a process; returned by `spawn` inside a [`SpawnError`](crate::error::SpawnError).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::state_machine::{Events, InitError, Process, ProcessContext, StepOutput};
///
/// struct Greeter;
///
/// impl Process for Greeter {
///     type Output = ();
///     fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
///         match method {
///             "greet" => Ok(()),
///             other => Err(InitError::UnknownMethod(other.to_owned())),
///         }
///     }
///     fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
///         out.done(());
///         Ok(())
///     }
/// }
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let refused = sched.spawn(Greeter, "wave", Payload::empty());
/// assert!(matches!(refused, Err(SpawnError::Init(InitError::UnknownMethod(_)))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// The process type has no entry point with this name.
    #[error("unknown entry method `{0}`")]
    UnknownMethod(String),
    /// The entry point rejected its input (or any other failure).
    #[error("{0}")]
    Failed(#[source] BoxError),
}

impl InitError {
    /// `InitError::UnknownMethod` for `method`.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = procsched::error::InitError::unknown_method("nope");
    /// assert_eq!(e.to_string(), "unknown entry method `nope`");
    /// ```
    pub fn unknown_method(method: &str) -> InitError {
        InitError::UnknownMethod(method.to_owned())
    }

    /// `InitError::Failed` with `error` as its source.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = procsched::error::InitError::failed("bad input");
    /// assert_eq!(e.to_string(), "bad input");
    /// ```
    pub fn failed(error: impl Into<BoxError>) -> InitError {
        InitError::Failed(error.into())
    }
}

/// How a process ended without a result; what its [`ProcessHandle`](crate::ProcessHandle)
/// resolves to.
///
/// # Examples
///
/// ```
/// use procsched::{Payload, Scheduler, state_machine::{Events, Process, ProcessContext, StepOutput}, error::InitError};
///
/// struct Fails;
/// impl Process for Fails {
///     type Output = Payload;
///     fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
///         Ok(())
///     }
///     fn step(&mut self, _: &mut Events, _: &mut StepOutput) -> Result<(), procsched::BoxError> {
///         Err("out of cheese".into())
///     }
/// }
///
/// let sched = Scheduler::builder().workers(1).build().unwrap();
/// let handle = sched.spawn(Fails, "run", Payload::empty()).unwrap();
/// let pid = handle.pid();
/// let err = sched.block_on(handle).unwrap_err();
/// assert!(err.is_failed());
/// assert_eq!(err.pid(), pid);
/// assert_eq!(err.to_string(), format!("process {pid} failed: out of cheese"));
/// ```
pub struct ProcessError {
    pid: Pid,
    repr: Repr,
}

enum Repr {
    /// Shared with the exit reason its links and monitors get (`ExitReason::Failed`).
    Failed(Arc<dyn Error + Send + Sync>),
    Panicked(String),
    Terminated,
    Cancelled,
    /// Ended by a linked process's exit signal, with its reason.
    Exited(ExitReason),
}

impl ProcessError {
    pub(crate) fn failed(pid: Pid, error: BoxError) -> ProcessError {
        ProcessError {
            pid,
            repr: Repr::Failed(Arc::from(error)),
        }
    }
    pub(crate) fn exited(pid: Pid, reason: ExitReason) -> ProcessError {
        ProcessError {
            pid,
            repr: Repr::Exited(reason),
        }
    }
    pub(crate) fn panicked(pid: Pid, message: String) -> ProcessError {
        ProcessError {
            pid,
            repr: Repr::Panicked(message),
        }
    }
    pub(crate) fn terminated(pid: Pid) -> ProcessError {
        ProcessError {
            pid,
            repr: Repr::Terminated,
        }
    }
    pub(crate) fn cancelled(pid: Pid) -> ProcessError {
        ProcessError {
            pid,
            repr: Repr::Cancelled,
        }
    }
    /// Ended on its cancellation; `exit` if its supervisor's end asked it to finish (it traps
    /// exits: `mailbox/watch.rs`, `deliver_exit`): then it ends with that reason, as OTP's
    /// behaviours end with their parent's.
    pub(crate) fn cancelled_by(pid: Pid, exit: Option<ExitReason>) -> ProcessError {
        match exit {
            Some(reason) => ProcessError::exited(pid, reason),
            None => ProcessError::cancelled(pid),
        }
    }

    /// The process this error is about.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|_: ProcessCx| async { Err::<(), _>("nope") })?;
    /// let pid = handle.pid();
    /// assert_eq!(sched.block_on(handle).unwrap_err().pid(), pid);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// `step` returned an error (see [`source`](std::error::Error::source)). That includes an
    /// [`ExitReason`] returned as the error, even `Normal` or `Killed` — the handle has no
    /// output to give — whose reason [`exit_reason`](Self::exit_reason) reports, as links and
    /// monitors hear it (only `Shutdown` reads as cancelled: [`is_cancelled`](Self::is_cancelled)).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::supervision::ExitReason;
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|_: ProcessCx| async { Err::<(), _>("nope") })?;
    /// assert!(sched.block_on(handle).unwrap_err().is_failed());
    /// let normal = sched.spawn_fn(|_: ProcessCx| async { Err::<(), BoxError>(ExitReason::Normal.into()) })?;
    /// let error = sched.block_on(normal).unwrap_err();
    /// assert!(error.is_failed() && error.exit_reason().is_normal());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_failed(&self) -> bool {
        matches!(self.repr, Repr::Failed(_))
    }

    /// `step` or `close` panicked.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// # std::panic::set_hook(Box::new(|_| {}));
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|_: ProcessCx| async { if true { panic!("oops") } Ok::<(), BoxError>(()) })?;
    /// assert!(sched.block_on(handle).unwrap_err().is_panicked());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_panicked(&self) -> bool {
        matches!(self.repr, Repr::Panicked(_))
    }

    /// The process was terminated
    /// ([`SchedulerHandle::terminate`](crate::SchedulerHandle::terminate)).
    ///
    /// A process ended by a linked process's exit signal reads [`is_exited`](Self::is_exited)
    /// instead, though the metrics count both under `finished.terminated` (the metrics count
    /// how processes were stopped; the handle says by what).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx<u8>| async move { cx.recv().await.map_err(BoxError::from) })?;
    /// sched.terminate(handle.pid())?;
    /// assert!(sched.block_on(handle).unwrap_err().is_terminated());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_terminated(&self) -> bool {
        matches!(self.repr, Repr::Terminated)
    }

    /// The process ended cancelled (exit reason `Shutdown`): it was asked to finish — by a
    /// shutdown, [`cancel`](crate::SchedulerHandle::cancel), a supervisor's stop — and ended on
    /// that (a body that propagated `RecvError::Cancelled` with `?`, a shutdown's forced end);
    /// or it ended with an error that is a cancellation, asked or not (a body returning
    /// `ExitReason::Shutdown`, as OTP's `exit(shutdown)`, or an error whose `source` chain
    /// holds one).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use std::time::Duration;
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// // Ignores its Cancel: forced at the deadline.
    /// let handle = sched.spawn_fn(|cx: ProcessCx<u8>| async move { loop { let _ = cx.recv().await; } #[allow(unreachable_code)] Ok::<(), BoxError>(()) })?;
    /// sched.shutdown(Duration::from_millis(20));
    /// assert!(sched.block_on(handle).unwrap_err().is_cancelled());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The panic message, for a panicked process.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// # std::panic::set_hook(Box::new(|_| {}));
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|_: ProcessCx| async { if true { panic!("oops") } Ok::<(), BoxError>(()) })?;
    /// assert_eq!(sched.block_on(handle).unwrap_err().panic_message(), Some("oops"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn panic_message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Panicked(message) => Some(message),
            _ => None,
        }
    }

    /// The process ended because a linked process ended with this (abnormal) reason, and it
    /// did not trap exits (see [`SchedulerHandle::link`](crate::SchedulerHandle::link)) — or,
    /// a supervisor's child that traps exits, its supervisor ended, and the cancel that asked
    /// it to finish ended it (OTP's behaviours exit with their parent's reason).
    ///
    /// # Examples
    ///
    /// See [`SchedulerHandle::link`](crate::SchedulerHandle::link).
    pub fn is_exited(&self) -> bool {
        matches!(self.repr, Repr::Exited(_))
    }

    /// The error `step` returned, for a failed process, shared with the exit reason its links
    /// and monitors got: `downcast_ref` it to your error type.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|_: ProcessCx| async { Err::<(), _>(std::fmt::Error) })?;
    /// let error = sched.block_on(handle).unwrap_err();
    /// assert!(error.failure().is_some_and(|failure| failure.is::<std::fmt::Error>()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn failure(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        match &self.repr {
            Repr::Failed(error) => Some(&**error),
            _ => None,
        }
    }

    /// The [`CommandError`] a failed process propagated — a call's, anywhere in its error's
    /// `source` chain (its first 64 links) — to tell "a handler panicked" or "a call timed
    /// out" from a handle without matching on text.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// struct Audit;
    /// procsched::command!(Audit => ());
    ///
    /// let sched = Scheduler::builder()
    ///     .workers(1)
    ///     .inline_handler(|_: Audit| -> Result<(), BoxError> { panic!("the audit log is full") })
    ///     .build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move { Ok::<_, BoxError>(cx.call(Audit).await?) })?;
    /// let error = sched.block_on(handle).unwrap_err();
    /// assert!(error.command_error().is_some_and(|call| call.is_panicked()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn command_error(&self) -> Option<&CommandError> {
        let mut next: Option<&(dyn Error + 'static)> = Some(self.failure()?);
        for _ in 0..64 {
            let error = next?;
            if let Some(call) = error.downcast_ref::<CommandError>() {
                return Some(call);
            }
            next = error.source();
        }
        None
    }

    /// The error `step` returned, for a failed process (shared: see
    /// [`failure`](Self::failure) to downcast it).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|_: ProcessCx| async { Err::<(), _>("nope") })?;
    /// let source = sched.block_on(handle).unwrap_err().into_failure().unwrap();
    /// assert_eq!(source.to_string(), "nope");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_failure(self) -> Option<Arc<dyn Error + Send + Sync>> {
        match self.repr {
            Repr::Failed(error) => Some(error),
            _ => None,
        }
    }

    /// Why the process ended, as its links and monitors heard it: `Failed` (with the same
    /// error), `Panicked`, `Killed` (terminated), `Shutdown` (cancelled), or the linked
    /// process's reason. A body that returns an [`ExitReason`] as its error ends with that
    /// reason.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx<u8>| async move { cx.recv().await.map_err(BoxError::from) })?;
    /// sched.terminate(handle.pid())?;
    /// assert!(sched.block_on(handle).unwrap_err().exit_reason().is_killed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn exit_reason(&self) -> ExitReason {
        match &self.repr {
            Repr::Failed(error) => match error.downcast_ref::<ExitReason>() {
                Some(reason) => reason.clone(),
                None => ExitReason::Failed(Arc::clone(error)),
            },
            Repr::Panicked(message) => ExitReason::Panicked(message.as_str().into()),
            Repr::Terminated => ExitReason::Killed,
            Repr::Cancelled => ExitReason::Shutdown,
            Repr::Exited(reason) => reason.clone(),
        }
    }
}

impl fmt::Display for ProcessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pid = self.pid;
        match &self.repr {
            Repr::Failed(error) => write!(f, "process {pid} failed: {error}"),
            Repr::Panicked(message) => write!(f, "process {pid} panicked: {message}"),
            Repr::Terminated => write!(f, "process {pid} was terminated"),
            Repr::Cancelled => write!(f, "process {pid} was cancelled"),
            Repr::Exited(reason) => {
                write!(f, "process {pid} ended with a linked process ({reason})")
            }
        }
    }
}

impl fmt::Debug for ProcessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.repr {
            Repr::Failed(error) => format!("Failed({error:?})"),
            Repr::Panicked(message) => format!("Panicked({message:?})"),
            Repr::Terminated => "Terminated".to_owned(),
            Repr::Cancelled => "Cancelled".to_owned(),
            Repr::Exited(reason) => format!("Exited({reason:?})"),
        };
        write!(f, "ProcessError {{ pid: {}, {kind} }}", self.pid)
    }
}

impl std::error::Error for ProcessError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.repr {
            Repr::Failed(error) => Some(&**error),
            Repr::Exited(reason) => Some(reason),
            _ => None,
        }
    }
}

/// What a process whose `close` panicked is reported as having panicked with: the panic's
/// message and, if it was already ending with an error, that error. The panic replaces the
/// outcome (as an OTP `terminate/2` that crashes replaces the exit reason), but must not hide
/// why the process was ending — often the fault the `close` tripped over.
pub(crate) fn close_panic_message(message: &str, ending: Option<&ExitReason>) -> String {
    match ending {
        Some(reason) => format!("in close: {message} (closing after it ended {reason})"),
        None => format!("in close: {message}"),
    }
}

/// The message of a caught panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    crate::executor::panic_message(payload)
        .unwrap_or("non-string panic payload")
        .to_owned()
}

/// [`panic_message`] of a caught panic whose payload is done with: the payload is a user value,
/// dropped contained (`contain.rs`) — its destructor may panic too, and must not unwind into the
/// scheduler nor change the outcome the message reports.
pub(crate) fn take_panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    let message = panic_message(&*payload);
    super::drop_contained(payload);
    message
}
