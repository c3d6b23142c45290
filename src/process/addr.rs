//! Typed addresses: [`Addr<M>`] sends `M`s to one process, checked by the compiler.
//!
//! A typed message travels as an ordinary [`Message`]: its payload is the `M` (stored inline up
//! to four words, so a `u64` or a small enum costs no allocation), its topic the type's name.
//! So typed and untyped senders share one mailbox, one order and one set of rules (capacity,
//! budgets), and a typed send costs what an untyped one does. The receiving end reads the
//! payload back as an `M` ([`ProcessCx::recv`](crate::ProcessCx::recv)); the address's type is
//! what guarantees it is one. `Addr<Message>` is the untyped address: it sends `Message`s as
//! they are (topic, sender, budget and all).
//!
//! An address reaches its scheduler through [`Mailroom`], the one thing the process layer needs
//! of it here: deliver a message to a PID.

use super::context::HostId;
use super::{Message, Payload, Pid, SendError, SendErrorKind, TypeMismatch};
use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
// Plain std: an address is handed to user code anywhere, outside every loom model.
use std::sync::Arc;

/// Delivers messages for the processes of one host (the scheduler).
pub(crate) trait Mailroom: Send + Sync + 'static {
    /// Delivers `message` to `pid`, or hands it back with why not.
    #[allow(clippy::result_large_err)] // the refused message comes back by value, as `send`'s
    fn post(&self, pid: Pid, message: Message) -> Result<(), (SendErrorKind, Message)>;

    /// Whose processes these are (`Addr`'s identity).
    fn host_id(&self) -> HostId;
}

/// The address of a process that receives messages of type `M`: `send` (and `ask`) check the
/// type at compile time.
///
/// `Clone + Send + Sync` (whatever `M` is: only `M: Send` is needed to send one), 24 bytes, a
/// reference count to clone; usable from anywhere — tokio code, plain threads, other
/// processes' bodies and steps. Two addresses are equal when they name the same process.
/// Get one from the process's handle ([`ProcessHandle::addr`](crate::ProcessHandle::addr)),
/// from inside it ([`ProcessCx::addr`](crate::ProcessCx::addr)), or from a PID
/// ([`SchedulerHandle::addr`](crate::SchedulerHandle::addr)).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// #[derive(Debug)]
/// struct Amount(u64);
///
/// let sched = Scheduler::builder().workers(2).build()?;
/// let session = sched.spawn_fn(|cx: ProcessCx<Amount>| async move {
///     let mut sum = 0;
///     for _ in 0..3 {
///         sum += cx.recv().await?.0; // an `Amount`
///     }
///     Ok::<_, BoxError>(sum)
/// })?;
/// let addr: Addr<Amount> = session.addr();
/// for n in [1, 2, 3] {
///     addr.send(Amount(n))?;
/// }
/// assert_eq!(sched.block_on(session)?, 6);
/// // Finished: the message comes back, typed.
/// let refused = addr.send(Amount(4)).unwrap_err();
/// assert!(refused.is_not_found());
/// assert_eq!(refused.into_message().map(|a| a.0), Some(4));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Addr<M> {
    pid: Pid,
    mailroom: Arc<dyn Mailroom>,
    /// `fn(M)`: an address only consumes `M`s; it is `Send + Sync` whatever `M` is.
    _sends: PhantomData<fn(M)>,
}

impl<M> Addr<M> {
    pub(crate) fn new(pid: Pid, mailroom: Arc<dyn Mailroom>) -> Addr<M> {
        Addr {
            pid,
            mailroom,
            _sends: PhantomData,
        }
    }

    /// The process's PID.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx<u8>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
    /// assert_eq!(handle.addr().pid(), handle.pid());
    /// handle.addr().send(1)?;
    /// # sched.block_on(handle)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The same process, addressed with another message type `N`: for a process that reads
    /// several types (an untyped `ProcessCx<Message>` body, a state machine reading payloads).
    /// The compiler cannot check that the process reads `N`; a body that receives something
    /// else gets a `RecvError::TypeMismatch` for it.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let handle = sched.spawn_fn(|cx: ProcessCx| async move {
    ///     let message = cx.recv().await?;           // a whole `Message`
    ///     Ok::<_, BoxError>(message.payload.take::<u32>()?)
    /// })?;
    /// handle.addr().retyped::<u32>().send(7)?;
    /// assert_eq!(sched.block_on(handle)?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retyped<N>(&self) -> Addr<N> {
        Addr::new(self.pid, self.mailroom.clone())
    }
}

impl<M: Send + 'static> Addr<M> {
    /// Sends `message` to the process, waking it if it waits. Never blocks.
    ///
    /// # Errors
    ///
    /// A [`SendError`] that hands the message back, typed, of kind
    /// [`NotFound`](SendErrorKind::NotFound) (the process finished, or never was),
    /// [`Closed`](SendErrorKind::Closed) (it is finishing) or
    /// [`MailboxFull`](SendErrorKind::MailboxFull) (the mailbox's capacity).
    ///
    /// # Examples
    ///
    /// See [`Addr`].
    #[inline]
    pub fn send(&self, message: M) -> Result<(), SendError<M>> {
        match self.mailroom.post(self.pid, into_message(message)) {
            Ok(()) => Ok(()),
            Err((kind, refused)) => Err(SendError::new(kind, self.pid, from_message(refused).ok())),
        }
    }
}

impl<M> Clone for Addr<M> {
    fn clone(&self) -> Self {
        Addr::new(self.pid, self.mailroom.clone())
    }
}

impl<M> PartialEq for Addr<M> {
    fn eq(&self, other: &Self) -> bool {
        self.pid == other.pid && self.mailroom.host_id() == other.mailroom.host_id()
    }
}

impl<M> Eq for Addr<M> {}

impl<M> Hash for Addr<M> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.pid.hash(state);
    }
}

impl<M> fmt::Debug for Addr<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Addr<{}>({})", short_type_name::<M>(), self.pid)
    }
}

/// `M`'s name without its module path (`Addr<Amount>(<3.1>)` in logs, not the whole path).
fn short_type_name<M>() -> &'static str {
    let name = std::any::type_name::<M>();
    match name.find('<') {
        // Generic: keep it whole rather than cut inside the parameters.
        Some(_) => name,
        None => name.rsplit("::").next().unwrap_or(name),
    }
}

/// The message a typed send carries: `M` itself if it is a [`Message`], otherwise a message
/// whose payload is the `M` and whose topic is its type's name.
#[inline]
pub(crate) fn into_message<M: Send + 'static>(message: M) -> Message {
    let mut slot = Some(message);
    // A constant test once monomorphised: the untyped case compiles to the message itself.
    if let Some(message) = (&mut slot as &mut dyn Any).downcast_mut::<Option<Message>>() {
        return message.take().expect("just filled");
    }
    let message = slot.take().expect("still there");
    Message::new(std::any::type_name::<M>(), Payload::new(message))
}

/// The `M` a typed message carries (the inverse of [`into_message`]): the message itself if
/// `M` is [`Message`], otherwise its payload, which must be an `M`.
#[inline]
pub(crate) fn from_message<M: 'static>(message: Message) -> Result<M, TypeMismatch> {
    let mut slot = Some(message);
    if let Some(itself) = (&mut slot as &mut dyn Any).downcast_mut::<Option<M>>() {
        return Ok(itself.take().expect("just filled"));
    }
    let message = slot.take().expect("still there");
    message.payload.take::<M>()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_typed_message_round_trips_and_a_message_stays_itself() {
        let message = into_message(7u64);
        assert_eq!(message.topic, "u64");
        assert_eq!(from_message::<u64>(message).unwrap(), 7);
        let untyped = Message::new("topic", Payload::new(1u8));
        let same = into_message(untyped);
        assert_eq!(same.topic, "topic");
        let back: Message = from_message(same).unwrap();
        assert_eq!(back.payload.take::<u8>().unwrap(), 1);
        assert!(from_message::<u32>(into_message(1u64)).is_err());
    }

    #[test]
    fn short_type_names() {
        assert_eq!(short_type_name::<Message>(), "Message");
        assert_eq!(short_type_name::<u64>(), "u64");
        assert!(short_type_name::<Option<u8>>().contains("Option"));
    }
}
