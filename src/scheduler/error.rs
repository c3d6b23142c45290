//! Errors of the scheduler: why a spawn ([`SpawnError`]) or a send ([`SendError`],
//! [`SendErrorKind`]) did not go through.

use crate::process::{CancelReason, InitError, Message, Pid};
use std::fmt;

/// Why [`Scheduler::spawn`](crate::Scheduler::spawn) did not start a process.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use std::time::Duration;
///
/// let sched = Scheduler::builder().workers(1).max_processes(1).build()?;
/// let waiter = || |cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) };
/// let first = sched.spawn_fn(waiter())?;
///
/// // At the limit a spawn is refused at once, not queued: the caller decides what to shed.
/// let refused = sched.spawn_fn(waiter()).unwrap_err();
/// assert!(refused.is_limit());
/// assert!(matches!(refused, SpawnError::Limit(1)));
///
/// first.addr().send(())?;
/// sched.block_on(first)?;
/// let _second = sched.spawn_fn(waiter())?;   // the first one's place is free once it has ended
/// sched.shutdown(Duration::from_secs(1));
/// assert!(sched.spawn_fn(waiter()).unwrap_err().is_shutting_down());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::error::SendErrorKind;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let worker = sched.spawn_fn(|cx: ProcessCx<String>| async move {
///     Ok::<_, BoxError>(cx.recv().await?)
/// })?;
/// let addr = worker.addr();
/// addr.send("first".to_string())?;
/// assert_eq!(sched.block_on(worker)?, "first");
///
/// // It has ended: the send is refused, and the message comes back to go elsewhere.
/// let err = addr.send("second".to_string()).unwrap_err();
/// assert_eq!(err.kind(), SendErrorKind::NotFound);
/// assert_eq!(err.pid(), addr.pid());
/// assert_eq!(err.into_message().as_deref(), Some("second"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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

impl<M: Send> std::error::Error for SendError<M> {
    /// A cancelled send's kind ([`SendErrorKind::Cancelled`]), so that the scheduler — which
    /// cannot name `M` to downcast to — finds the cancellation in a body's error's sources and
    /// ends it as cancelled; `None` for the other kinds.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self.kind {
            SendErrorKind::Cancelled(_) => Some(&self.kind),
            _ => None,
        }
    }
}

/// Why a message (or a terminate request) was not delivered: [`SendError::kind`].
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::error::SendErrorKind;
///
/// /// A full mailbox drains, so the message is worth sending again later; a process that is
/// /// gone, or going, will never read it.
/// fn worth_retrying<M>(err: &SendError<M>) -> bool {
///     match err.kind() {
///         SendErrorKind::MailboxFull => true,
///         SendErrorKind::NotFound | SendErrorKind::Closed => false,
///         _ => false,                          // kinds added later (`#[non_exhaustive]`)
///     }
/// }
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let worker = sched.spawn_fn(|_: ProcessCx<u32>| async { Ok::<_, BoxError>(()) })?;
/// let addr = worker.addr();
/// sched.block_on(worker)?;
/// let err = addr.send(7).unwrap_err();
/// assert_eq!(err.kind(), SendErrorKind::NotFound);
/// assert!(!worth_retrying(&err));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SendErrorKind {
    /// No live process has this PID (never spawned, or already finished).
    #[error("no live process")]
    NotFound,
    /// The process is finishing or shutting down and accepts no more messages: a send that
    /// races its end. Once it has ended, sends are [`NotFound`](Self::NotFound); a sender
    /// treats the two alike (the message will not be read).
    #[error("process is closed")]
    Closed,
    /// The message was refused: the process's mailbox is at capacity, or the message's topic
    /// is over its budget.
    #[error("mailbox full")]
    MailboxFull,
    /// The *sending* process was asked to finish (a shutdown, or
    /// [`cancel`](crate::SchedulerHandle::cancel): its supervisor stopping it) while its
    /// [`send_wait`](crate::Addr::send_wait) waited for room — or before it started, and
    /// nothing had told the body yet (as for an ask) — so the message was not sent: it is
    /// handed back, and `?` ends the body as cancelled, as a receive's or an ask's
    /// cancellation does. Also, during the scheduler's shutdown, a body's `send_wait` that the
    /// receiving process's end refused (it would be `NotFound` or `Closed`): which of the two
    /// heard the shutdown first is a race the sender's outcome does not depend on. Only a
    /// `send_wait` polled in a process's body reports it, and not one that started after the
    /// body was told of its cancellation (cleanup: it waits as any other).
    #[error("the sending process was cancelled ({0:?})")]
    Cancelled(CancelReason),
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
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let live = sched.spawn_fn(|cx: ProcessCx<u32>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// let done = sched.spawn_fn(|_: ProcessCx<u32>| async { Ok::<_, BoxError>(0) })?;
    /// let subscribers = [live.addr(), done.addr()];
    /// sched.block_on(done)?;
    ///
    /// // A broadcast: the errors name the subscribers to drop from the list.
    /// let gone: Vec<Pid> = subscribers
    ///     .iter()
    ///     .filter_map(|addr| addr.send(1).err())
    ///     .map(|err| err.pid())
    ///     .collect();
    /// assert_eq!(gone, [subscribers[1].pid()]);
    /// assert_eq!(sched.block_on(live)?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// `true` if no live process has the PID.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let job = sched.spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(()) })?;
    /// let pid = job.pid();
    /// sched.block_on(job)?;
    ///
    /// // An ended process's PID stays dead (PIDs are never reused): nothing will read this.
    /// let err = sched.send(pid, Message::new("late", Payload::empty())).unwrap_err();
    /// assert!(err.is_not_found());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_not_found(&self) -> bool {
        self.kind == SendErrorKind::NotFound
    }

    /// `true` if the process is finishing.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use procsched::error::InitError;
    /// use procsched::state_machine::{Events, Process, ProcessContext, StepOutput};
    /// use std::sync::mpsc;
    ///
    /// /// Finishes at once; its `close` posts one more message to itself.
    /// struct LastWord { me: Option<Addr<&'static str>>, refused: mpsc::Sender<bool> }
    ///
    /// impl Process for LastWord {
    ///     type Output = ();
    ///     fn init(&mut self, ctx: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
    ///         self.me = Some(ctx.scheduler().addr(ctx.pid()));
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, _: &mut Events, out: &mut StepOutput<()>) -> Result<(), BoxError> {
    ///         out.done(());
    ///         Ok(())
    ///     }
    ///     fn close(&mut self) {
    ///         // `close` runs after the mailbox has closed: finishing, not gone yet.
    ///         let err = self.me.as_ref().unwrap().send("one more").unwrap_err();
    ///         let _ = self.refused.send(err.is_closed());
    ///     }
    /// }
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let (tx, rx) = mpsc::channel();
    /// let handle = sched.spawn(LastWord { me: None, refused: tx }, "run", Payload::empty())?;
    /// sched.block_on(handle)?;
    /// assert!(rx.recv()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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

    /// `true` if the sending process was asked to finish while its
    /// [`send_wait`](crate::Addr::send_wait) waited ([`SendErrorKind::Cancelled`]): `?` ends its
    /// body as cancelled.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), BoxError> {
    /// let sched = Scheduler::builder().workers(1).mailbox_capacity(1).build()?;
    /// // Takes nothing: its one message of room stays full.
    /// let full = sched.spawn_fn(|cx: ProcessCx<u32>| async move {
    ///     let Err(why) = cx.cancelled().await;
    ///     Err::<(), _>(why)
    /// })?;
    /// full.addr().send(1)?;
    /// let to = full.addr();
    /// let (waiting, waits) = tokio::sync::oneshot::channel();
    /// let sender = sched.spawn_fn(move |_: ProcessCx| async move {
    ///     let mut sent = std::pin::pin!(to.send_wait(2));
    ///     // Polled once, to stand in the line, before saying so.
    ///     assert!(futures::poll!(sent.as_mut()).is_pending());
    ///     let _ = waiting.send(());
    ///     match sent.await {
    ///         Err(error) if error.is_cancelled() => {
    ///             assert_eq!(error.into_message(), Some(2)); // handed back
    ///             Ok::<_, BoxError>("cancelled")
    ///         }
    ///         other => Err(format!("{other:?}").into()),
    ///     }
    /// })?;
    /// waits.await?;
    /// sched.handle().cancel(sender.pid())?;
    /// assert_eq!(sender.await?, "cancelled");
    /// sched.shutdown_async(Duration::from_secs(1)).await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self.kind, SendErrorKind::Cancelled(_))
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

/// Why an ask got no answer.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use std::time::Duration;
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let silent = sched.spawn_fn(|cx: ProcessCx<Reply<u8>>| async move {
///     let _kept = cx.recv().await?; // keeps the port, never answers
///     let Err(why) = cx.cancelled().await;
///     Err::<(), _>(why)
/// })?;
/// let addr = silent.addr();
/// let asked = sched.block_on(addr.ask_within(Duration::from_millis(5), |reply| reply));
/// match asked {
///     Err(error) if error.is_timed_out() => {}
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AskError {
    /// The request was not delivered: no live process has the PID (`NotFound`), it is
    /// finishing (`Closed`), or its mailbox is full.
    #[error("the request was not delivered: {0}")]
    Undelivered(SendErrorKind),
    /// The reply port was dropped unanswered (by the process, or with its mailbox when it
    /// ended). An asker outside any process (tokio code, a plain thread) whose request was
    /// still unread when a shutdown forced its process gets this too: `Cancelled` is the
    /// *asking* process's cancel, and such an asker has none.
    #[error("the reply port was dropped unanswered (by the process, or unread with its mailbox when it ended)")]
    NoReply,
    /// No answer within the ask's timeout ([`Addr::ask_within`](crate::Addr::ask_within)).
    #[error("no answer within the ask's timeout")]
    TimedOut,
    /// The asking process was asked to finish while it waited: `?` ends its body as
    /// cancelled. Also, during the scheduler's shutdown, an ask from a body whose answerer
    /// the shutdown ended first (its port dropped, or the request undelivered): which of the
    /// two heard the shutdown first is a race the asker's outcome does not depend on.
    #[error("the asking process was cancelled ({0:?})")]
    Cancelled(CancelReason),
    /// The ask was polled outside the process that sent it (in another task, or another
    /// process's body).
    #[error("an ask was polled outside the process that sent it")]
    OutsideProcess,
    /// A process asked itself: it would wait for an answer only it can give, while it waits
    /// (OTP's `calling_self`). Refused at once; nothing was sent.
    #[error("a process asked itself: it cannot answer while it waits")]
    AskedItself,
}

impl AskError {
    /// `true` if no live process has the PID asked.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::error::{AskError, SendErrorKind};
    /// assert!(AskError::Undelivered(SendErrorKind::NotFound).is_not_found());
    /// ```
    pub fn is_not_found(&self) -> bool {
        matches!(self, AskError::Undelivered(SendErrorKind::NotFound))
    }

    /// `true` if the request was refused by a full mailbox (an ask does not wait for room
    /// unless made to: [`Ask::wait_for_room`](crate::body::Ask::wait_for_room)).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::error::{AskError, SendErrorKind};
    /// assert!(AskError::Undelivered(SendErrorKind::MailboxFull).is_mailbox_full());
    /// ```
    pub fn is_mailbox_full(&self) -> bool {
        matches!(self, AskError::Undelivered(SendErrorKind::MailboxFull))
    }

    /// `true` for [`AskError::TimedOut`].
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::error::AskError::TimedOut.is_timed_out());
    /// ```
    pub fn is_timed_out(&self) -> bool {
        matches!(self, AskError::TimedOut)
    }

    /// `true` for [`AskError::NoReply`].
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::error::AskError::NoReply.is_no_reply());
    /// ```
    pub fn is_no_reply(&self) -> bool {
        matches!(self, AskError::NoReply)
    }

    /// `true` for [`AskError::Cancelled`].
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::error::{AskError, CancelReason};
    /// assert!(AskError::Cancelled(CancelReason::Shutdown).is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self, AskError::Cancelled(_))
    }
}
