//! Errors of the process layer.

use super::Pid;
use std::fmt;

/// A boxed error from user code (a failing `step`, `init` or handler).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a yield completed without a result. Delivered to the process in
/// [`Event::YieldComplete`](crate::Event::YieldComplete).
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
}

impl CommandError {
    /// A handler failure with `error` as its source.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = procsched::CommandError::failed("disk full");
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
    /// let e = procsched::InitError::unknown_method("nope");
    /// assert_eq!(e.to_string(), "unknown entry method `nope`");
    /// ```
    pub fn unknown_method(method: &str) -> InitError {
        InitError::UnknownMethod(method.to_owned())
    }

    /// `InitError::Failed` with `error` as its source.
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
    pub fn is_unknown_method(&self) -> bool {
        matches!(self, SpawnError::Init(InitError::UnknownMethod(_)))
    }
}

/// Why [`Scheduler::send`](crate::Scheduler::send) did not deliver a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// No live process has this PID (never spawned, or already finished).
    #[error("no live process {0}")]
    NotFound(Pid),
    /// The process is finishing or shutting down and accepts no more messages.
    #[error("process {0} is closed")]
    Closed(Pid),
    /// The message was dropped: the process's mailbox is at capacity, or the message's topic
    /// is over its budget.
    #[error("mailbox of process {0} is full: message dropped")]
    MailboxFull(Pid),
}

/// How a process ended without a result; what its [`ProcessHandle`](crate::ProcessHandle)
/// resolves to.
///
/// # Examples
///
/// ```
/// use procsched::{Events, Process, ProcessContext, InitError, Payload, Scheduler, StepOutput};
///
/// struct Fails;
/// impl Process for Fails {
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
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// `step` returned an error (see [`source`](std::error::Error::source)).
    pub fn is_failed(&self) -> bool {
        matches!(self.repr, Repr::Failed(_))
    }

    /// `step` or `close` panicked.
    pub fn is_panicked(&self) -> bool {
        matches!(self.repr, Repr::Panicked(_))
    }

    /// The process was terminated.
    pub fn is_terminated(&self) -> bool {
        matches!(self.repr, Repr::Terminated)
    }

    /// The process was cancelled because the scheduler shut down.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The panic message, for a panicked process.
    pub fn panic_message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Panicked(message) => Some(message),
            _ => None,
        }
    }

    /// The error `step` returned, for a failed process.
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
