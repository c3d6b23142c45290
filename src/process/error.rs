//! Errors of the process layer.

use super::{Message, Pid};
use std::fmt;

/// A boxed error from user code (a failing `step`, `init` or handler).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a yield completed without a result. Delivered to the process in
/// [`Event::YieldComplete`](crate::state_machine::Event::YieldComplete).
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

/// Why `init` refused to start a process; returned by `spawn` inside a [`SpawnError`].
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

/// Why [`Scheduler::spawn`](crate::Scheduler::spawn) did not start a process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// `init` returned an error (the process never ran; its `close` was called).
    #[error("process init failed: {0}")]
    Init(#[from] InitError),
    /// `init` panicked (the process never ran; its `close` was called).
    #[error("process init panicked: {0}")]
    InitPanicked(String),
    /// The scheduler is shutting down and admits no new processes.
    #[error("the scheduler is shutting down")]
    ShuttingDown,
    /// The scheduler already runs its maximum number of processes.
    #[error("process limit of {0} reached")]
    Limit(usize),
}

impl SpawnError {
    /// `true` if `init` rejected the entry method's name.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::error::{InitError, SpawnError};
    /// assert!(SpawnError::Init(InitError::unknown_method("walk")).is_unknown_method());
    /// ```
    pub fn is_unknown_method(&self) -> bool {
        matches!(self, SpawnError::Init(InitError::UnknownMethod(_)))
    }

    /// `true` if `init` failed or panicked (the process never ran; its `close` was called).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::error::SpawnError;
    /// assert!(SpawnError::InitPanicked("boom".into()).is_init());
    /// ```
    pub fn is_init(&self) -> bool {
        matches!(self, SpawnError::Init(_) | SpawnError::InitPanicked(_))
    }

    /// `true` if the scheduler is shutting down.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::error::SpawnError::ShuttingDown.is_shutting_down());
    /// ```
    pub fn is_shutting_down(&self) -> bool {
        matches!(self, SpawnError::ShuttingDown)
    }

    /// `true` if a process limit refused the spawn.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::error::SpawnError::Limit(10).is_limit());
    /// ```
    pub fn is_limit(&self) -> bool {
        matches!(self, SpawnError::Limit(_))
    }
}

/// Why a message was not delivered — by [`Addr::send`](crate::Addr::send) (then `M` is the
/// address's message type) or [`Scheduler::send`](crate::Scheduler::send) (an untyped
/// [`Message`]) — or [`terminate`](crate::Scheduler::terminate) did not reach a process. A
/// refused message is handed back, typed: [`into_message`](Self::into_message).
pub struct SendError<M = Message> {
    kind: SendErrorKind,
    pid: Pid,
    /// The undelivered message, for [`SendError::into_message`] (`None` for `terminate`).
    /// Boxed, so the error stays small and only a refused send pays the allocation; in a mutex
    /// (never contended: only `into_message` opens it) because a message is `Send` but not
    /// necessarily `Sync`, and the error must be `Sync` to convert into a [`BoxError`] with `?`.
    message: std::sync::Mutex<Option<Box<M>>>,
}

impl<M> fmt::Display for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.pid)
    }
}

impl<M: Send> std::error::Error for SendError<M> {}

/// Why a message (or a terminate request) was not delivered: [`SendError::kind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SendErrorKind {
    /// No live process has this PID (never spawned, or already finished).
    #[error("no live process")]
    NotFound,
    /// The process is finishing or shutting down and accepts no more messages.
    #[error("process is closed")]
    Closed,
    /// The message was refused: the process's mailbox is at capacity, or the message's topic
    /// is over its budget.
    #[error("mailbox full, message not delivered")]
    MailboxFull,
}

impl<M> SendError<M> {
    pub(crate) fn new(kind: SendErrorKind, pid: Pid, message: Option<M>) -> SendError<M> {
        SendError {
            kind,
            pid,
            message: std::sync::Mutex::new(message.map(Box::new)),
        }
    }

    /// Why it was not delivered.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{Message, Payload, Pid, Scheduler, error::SendErrorKind};
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let nobody = Pid::from_raw(1 << 26).unwrap();
    /// let err = sched.send(nobody, Message::new("hi", Payload::empty())).unwrap_err();
    /// assert_eq!(err.kind(), SendErrorKind::NotFound);
    /// assert_eq!(err.pid(), nobody);
    /// assert!(err.is_not_found());
    /// # Ok::<(), procsched::error::BuildError>(())
    /// ```
    pub fn kind(&self) -> SendErrorKind {
        self.kind
    }

    /// The PID it was addressed to.
    ///
    /// # Examples
    ///
    /// See [`kind`](Self::kind).
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// `true` if no live process has the PID.
    ///
    /// # Examples
    ///
    /// See [`kind`](Self::kind).
    pub fn is_not_found(&self) -> bool {
        self.kind == SendErrorKind::NotFound
    }

    /// `true` if the process is finishing.
    ///
    /// # Examples
    ///
    /// See [`kind`](Self::kind).
    pub fn is_closed(&self) -> bool {
        self.kind == SendErrorKind::Closed
    }

    /// `true` if the mailbox (or the topic's budget) refused the message.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{Message, Payload, Scheduler};
    ///
    /// let sched = Scheduler::builder().workers(1).mailbox_capacity(0).build()?;
    /// let handle = sched.spawn_fn(|cx: procsched::ProcessCx| async move {
    ///     let _ = cx.cancelled().await;
    ///     Ok::<_, procsched::BoxError>(())
    /// })?;
    /// let err = sched.send(handle.pid(), Message::new("n", Payload::new(1u8))).unwrap_err();
    /// assert!(err.is_mailbox_full());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_mailbox_full(&self) -> bool {
        self.kind == SendErrorKind::MailboxFull
    }

    /// The message that was not delivered, handed back (`None` for a refused `terminate`).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::{Message, Payload, Pid, Scheduler};
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let nobody = Pid::from_raw(1 << 26).unwrap();
    /// let err = sched.send(nobody, Message::new("hi", Payload::new(7u32))).unwrap_err();
    /// let message = err.into_message().expect("handed back");
    /// assert_eq!(message.payload.take::<u32>()?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_message(self) -> Option<M> {
        let message = self.message.into_inner().unwrap_or_else(|p| p.into_inner());
        message.map(|message| *message)
    }
}

impl<M> fmt::Debug for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendError")
            .field("kind", &self.kind)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
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
    Failed(BoxError),
    Panicked(String),
    Terminated,
    Cancelled,
}

impl ProcessError {
    pub(crate) fn failed(pid: Pid, error: BoxError) -> ProcessError {
        ProcessError {
            pid,
            repr: Repr::Failed(error),
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

    /// `step` returned an error (see [`source`](std::error::Error::source)).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|_: ProcessCx| async { Err::<(), _>("nope") })?;
    /// assert!(sched.block_on(handle).unwrap_err().is_failed());
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

    /// The process was terminated.
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

    /// The process was cancelled because the scheduler shut down.
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

    /// The error `step` returned, for a failed process.
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
    pub fn into_failure(self) -> Option<BoxError> {
        match self.repr {
            Repr::Failed(error) => Some(error),
            _ => None,
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
            Repr::Cancelled => write!(f, "process {pid} was cancelled by scheduler shutdown"),
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
        };
        write!(f, "ProcessError {{ pid: {}, {kind} }}", self.pid)
    }
}

impl std::error::Error for ProcessError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.repr {
            Repr::Failed(error) => Some(&**error),
            _ => None,
        }
    }
}

/// The message of a caught panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    crate::executor::panic_message(payload)
        .unwrap_or("non-string panic payload")
        .to_owned()
}
