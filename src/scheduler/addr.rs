//! Typed addresses: [`Addr<M>`] sends `M`s to one process, checked by the compiler.
//!
//! A typed message travels as an ordinary [`Message`](crate::Message): its payload is the `M` (stored inline up
//! to four words, so a `u64` or a small enum costs no allocation), its topic the type's name.
//! So typed and untyped senders share one mailbox, one order and one set of rules (capacity,
//! budgets), and a typed send costs what an untyped one does. The receiving end reads the
//! payload back as an `M` ([`ProcessCx::recv`](crate::ProcessCx::recv)); the address's type is
//! what guarantees it is one. `Addr<Message>` is the untyped address: it sends `Message`s as
//! they are (topic, sender, budget and all).
//!
//! An address holds its scheduler's handle: a send is one inlined path from the typed value to
//! the mailbox (the message is built where it is stored, not on the stack and then copied:
//! copies of a just-written message stall on store forwarding).

use super::error::SendError;
use super::handle::SchedulerHandle;
use super::send_wait::SendWait;
use crate::process::Pid;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

/// The address of a process that receives messages of type `M`: `send` (and `ask`) check the
/// type at compile time.
///
/// `Clone + Send + Sync` (whatever `M` is: only `M: Send` is needed to send one), 16 bytes, a
/// reference count to clone; usable from anywhere — tokio code, plain threads, other
/// processes' bodies and steps. Two addresses are equal when they name the same process.
/// Get one from the process's handle ([`ProcessHandle::addr`](crate::ProcessHandle::addr)),
/// from inside it ([`ProcessCx::addr`](crate::ProcessCx::addr)), or from a PID
/// ([`SchedulerHandle::addr`](crate::SchedulerHandle::addr)).
///
/// An address does not keep its process alive, and dropping the last one does not stop it
/// (as an Erlang PID, unlike kameo's `ActorRef`): a process runs until its body returns or its
/// state machine is done, or it is cancelled or terminated — or its scheduler shuts down.
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
    sched: SchedulerHandle,
    /// `fn(M)`: an address only consumes `M`s; it is `Send + Sync` whatever `M` is.
    _sends: PhantomData<fn(M)>,
}

impl<M> Addr<M> {
    pub(crate) fn new(pid: Pid, sched: SchedulerHandle) -> Addr<M> {
        Addr {
            pid,
            sched,
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

    /// The scheduler the process runs on.
    pub(crate) fn scheduler(&self) -> &SchedulerHandle {
        &self.sched
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
        Addr::new(self.pid, self.sched.clone())
    }
}

impl<M: Send + 'static> Addr<M> {
    /// Sends `message` to the process, waking it if it waits. Never blocks.
    ///
    /// # Errors
    ///
    /// A [`SendError`] that hands the message back, typed, of kind
    /// [`NotFound`](crate::error::SendErrorKind::NotFound) (the process finished, or never was),
    /// [`Closed`](crate::error::SendErrorKind::Closed) (it is finishing) or
    /// [`MailboxFull`](crate::error::SendErrorKind::MailboxFull) (the mailbox's capacity).
    ///
    /// # Examples
    ///
    /// See [`Addr`].
    #[inline]
    pub fn send(&self, message: M) -> Result<(), SendError<M>> {
        self.sched
            .inner
            .post_typed(self.pid, message)
            .map_err(|(kind, refused)| SendError::new(kind, self.pid, Some(refused)))
    }

    /// Sends `message`, waiting while the process's mailbox is full (its
    /// [`mailbox_capacity`](crate::config::SchedulerBuilder::mailbox_capacity)): tokio's bounded
    /// `Sender::send(..).await`, where [`send`](Self::send) hands the message back at once.
    /// Resolves as soon as the message is in the mailbox; to an unbounded mailbox, at its first
    /// poll. Waiting senders stand in line: room for `n` messages wakes the first `n`, as tokio's
    /// bounded channel hands out its permits (a waiter that gives up passes its turn on). Unlike
    /// tokio's, a sender that is not waiting yet — a plain `send`, or a `send_wait` at its first
    /// poll — tries before joining the line, so it may take room before a woken waiter gets to
    /// it; that waiter keeps the front of the line for the next room. (Strict order for new
    /// senders too measured 3.4× slower with 10 tokio senders behind a 256-message mailbox.)
    /// A process ending wakes them all, to fail typed. Awaitable
    /// from tokio code, other executors and process bodies; a
    /// process awaiting room in its own full mailbox waits for ever, as a tokio task sending
    /// on its own full channel does — until it is cancelled: in a body, the wait ends when the
    /// body's own process is asked to finish (a shutdown, [`cancel`](crate::SchedulerHandle::cancel),
    /// its supervisor stopping it), as a receive or an ask does, also when a combinator polls
    /// it with a waker of its own (`FuturesUnordered`); it gives its place in the line up.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send), never `MailboxFull` for the capacity: `NotFound` (the process
    /// finished, also while the send waited) or `Closed` (it is finishing), the message handed
    /// back. In a process's body, [`Cancelled`](crate::error::SendErrorKind::Cancelled) (the
    /// message handed back, not sent; `?` ends the body as cancelled) if the body's process was
    /// asked to finish while the send waited, or before it started and nothing had told the
    /// body yet — as for an ask; a send started after the body was told (by a receive, an ask,
    /// `cancelled()` or a send) is cleanup, and waits. During the scheduler's shutdown, a
    /// body's send that the receiving process's end refused is `Cancelled` too (which of the
    /// two heard the shutdown first is a race). Under a capacity of 0 (`mailbox_capacity(0)`), which refuses every message, it is
    /// `MailboxFull` at once: no room will ever be made. A [`Message`](crate::Message) past its topic budget
    /// ([`Message::with_budget`](crate::Message::with_budget)) is `MailboxFull` at once, as for
    /// `send`: a budget drops what is past it, it does not make senders wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), BoxError> {
    /// let sched = Scheduler::builder().workers(1).mailbox_capacity(4).build()?;
    /// let worker = sched.spawn_fn(|cx: ProcessCx<u64>| async move {
    ///     let mut done = 0;
    ///     while done < 1_000 {
    ///         cx.recv().await?;
    ///         done += 1;
    ///     }
    ///     Ok::<_, BoxError>(done)
    /// })?;
    /// let jobs = worker.addr();
    /// for job in 0..1_000 {
    ///     jobs.send_wait(job).await?; // backpressure: never `MailboxFull`
    /// }
    /// assert_eq!(worker.await?, 1_000);
    /// # Ok(())
    /// # }
    /// ```
    pub fn send_wait(&self, message: M) -> SendWait<'_, M> {
        SendWait::new(self, message)
    }
}

impl<M> Clone for Addr<M> {
    fn clone(&self) -> Self {
        Addr::new(self.pid, self.sched.clone())
    }
}

impl<M> PartialEq for Addr<M> {
    fn eq(&self, other: &Self) -> bool {
        self.pid == other.pid && self.sched.inner.host_id == other.sched.inner.host_id
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::process::Message;

    #[test]
    fn short_type_names() {
        assert_eq!(short_type_name::<Message>(), "Message");
        assert_eq!(short_type_name::<u64>(), "u64");
        assert!(short_type_name::<Option<u8>>().contains("Option"));
    }
}
