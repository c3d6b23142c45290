//! Errors of the scheduler: why a spawn ([`SpawnError`]) or a send ([`SendError`],
//! [`SendErrorKind`]) did not go through.

use crate::process::{InitError, Message, Pid};
use std::fmt;

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
    /// necessarily `Sync`, and the error must be `Sync` to convert into a
    /// [`BoxError`](crate::BoxError) with `?`.
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
