//! A send that waits for room in a bounded mailbox ([`Addr::send_wait`]): tokio's bounded
//! `Sender::send(..).await`, where [`Addr::send`] — which never waits — hands a message to a
//! full mailbox back (`MailboxFull`). The waiting is the mailbox's (`process/mailbox/room.rs`,
//! protocol 12): the sender's waker is kept under the mailbox's lock, and woken by whatever
//! makes room or ends the process.
//!
//! From a process's body the wait is one the body's cancellation ends, as a receive's or an
//! ask's: the sender gives its place in the line up (protocol 12's step 4, as a dropped one
//! does) and fails [`SendErrorKind::Cancelled`], the message handed back — so that a
//! supervisor stopping a producer behind a full mailbox, or a shutdown, does not wait for its
//! timeout. As an ask, a send that starts after the cancel arrived and before anything told
//! the body tells it and sends nothing, and one that starts after the body was told is cleanup
//! and waits. The cancellation is watched as a remote ask watches it ([`CancelWatch`]): the
//! cancel re-polls a body that awaits the send itself, and wakes one that a combinator polls
//! with a waker of its own (`FuturesUnordered`). Outside a body nothing is watched.

use super::addr::Addr;
use super::error::{SendError, SendErrorKind};
use crate::process::async_fn::asking::CancelWatch;
use crate::process::mailbox::Ticket;
use crate::process::CancelReason;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// The future of [`Addr::send_wait`]: `Ok` once the message is in the mailbox.
///
/// Cancel safety: dropped before it resolves, the message was not sent (it is dropped with
/// the future). Awaited in a process's body, it ends when that process is asked to finish
/// while it waits, or was asked before it started and nothing told the body yet
/// ([`SendErrorKind::Cancelled`], the message handed back, not sent: `?` ends the body as
/// cancelled).
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::body::SendWait;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), BoxError> {
/// let sched = Scheduler::builder().workers(1).mailbox_capacity(1).build()?;
/// let sink = sched.spawn_fn(|cx: ProcessCx<u64>| async move {
///     let mut sum = 0;
///     for _ in 0..100 {
///         sum += cx.recv().await?;
///     }
///     Ok::<_, BoxError>(sum)
/// })?;
/// let addr = sink.addr();
/// for n in 0..100 {
///     let sent: SendWait<'_, u64> = addr.send_wait(n);
///     sent.await?; // waits while the one-message mailbox is full
/// }
/// assert_eq!(sink.await?, 4950);
/// # Ok(())
/// # }
/// ```
#[must_use = "a send_wait sends nothing unless awaited"]
pub struct SendWait<'a, M> {
    addr: &'a Addr<M>,
    message: Option<M>,
    /// Its place in the mailbox's line of waiting senders, once it waited
    /// (`process/mailbox/room.rs`).
    ticket: Option<Ticket>,
    /// Whose cancellation ends the wait: set at the first poll.
    watch: Watch,
}

/// The cancellation a [`SendWait`] hears.
#[derive(Debug, Clone, Copy)]
enum Watch {
    /// Not polled yet.
    Unstarted,
    /// Polled outside any process's body (tokio code, another executor): nothing to hear.
    Outside,
    /// Polled in a process's body: that process's.
    Body(CancelWatch),
}

impl<'a, M> SendWait<'a, M> {
    pub(super) fn new(addr: &'a Addr<M>, message: M) -> SendWait<'a, M> {
        SendWait {
            addr,
            message: Some(message),
            ticket: None,
            watch: Watch::Unstarted,
        }
    }

    /// The first poll: starts the watch of the body it is polled in, if any. `Err` if that
    /// body's process was asked to finish and nothing has told the body yet: this send tells
    /// it, and sends nothing — as an ask starting then does (`asking::start`), so that a body
    /// that only sends hears its cancel even when it finds room.
    #[inline]
    fn start(&mut self) -> Result<(), CancelReason> {
        if let Watch::Unstarted = self.watch {
            self.watch = CancelWatch::start()?.map_or(Watch::Outside, Watch::Body);
        }
        Ok(())
    }

    /// The body's cancellation, if it ends this wait, polled with `waker` (kept to be woken by
    /// the cancel when it is not the body's own).
    #[cold]
    fn cancelled(&self, waker: &Waker) -> Option<CancelReason> {
        match self.watch {
            Watch::Body(watch) => watch.cancelled(waker),
            Watch::Unstarted | Watch::Outside => None,
        }
    }

    /// A refusal of `kind`, as the sender's body hears it: during the shutdown of the scheduler
    /// of the process sent to — its own — a refusal because that process ended (or is ending)
    /// is the body's cancellation, as for an ask (`ask.rs`, `in_shutdown`): every process was
    /// asked to finish, and which of the two heard it first is a race whose outcome must not
    /// decide how the sender ends. Not for a send started after the body was told (cleanup).
    #[cold]
    fn refusal(&self, kind: SendErrorKind) -> SendErrorKind {
        let sched = self.addr.scheduler();
        match (kind, self.watch) {
            (SendErrorKind::NotFound | SendErrorKind::Closed, Watch::Body(watch))
                if watch.hears_shutdown_of(sched.inner.host_id) && sched.is_shutting_down() =>
            {
                SendErrorKind::Cancelled(CancelReason::Shutdown)
            }
            _ => kind,
        }
    }
}

// The message is moved out and back by value, never pinned.
impl<M> Unpin for SendWait<'_, M> {}

impl<M: Send + 'static> Future for SendWait<'_, M> {
    type Output = Result<(), SendError<M>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let message = this
            .message
            .take()
            .expect("a send_wait polled after it resolved");
        let (pid, sched) = (this.addr.pid(), this.addr.scheduler());
        if let Err(reason) = this.start() {
            let kind = SendErrorKind::Cancelled(reason);
            return Poll::Ready(Err(SendError::new(kind, pid, Some(message))));
        }
        match sched
            .inner
            .post_typed_or_wait(pid, message, cx.waker(), &mut this.ticket)
        {
            Ok(None) => Poll::Ready(Ok(())),
            Ok(Some(waiting)) => match this.cancelled(cx.waker()) {
                None => {
                    this.message = Some(waiting);
                    Poll::Pending
                }
                Some(reason) => {
                    // Given up: room made for it goes to the next in line (`room.rs`, step 4).
                    if let Some(ticket) = this.ticket.take() {
                        sched.inner.give_up_room(pid, ticket);
                    }
                    let kind = SendErrorKind::Cancelled(reason);
                    Poll::Ready(Err(SendError::new(kind, pid, Some(waiting))))
                }
            },
            Err((kind, refused)) => {
                let kind = this.refusal(kind);
                Poll::Ready(Err(SendError::new(kind, pid, Some(refused))))
            }
        }
    }
}

impl<M> Drop for SendWait<'_, M> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            // Given up while waiting: room made for it goes to the next in line.
            let (pid, sched) = (self.addr.pid(), self.addr.scheduler());
            sched.inner.give_up_room(pid, ticket);
        }
    }
}

impl<M> fmt::Debug for SendWait<'_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendWait")
            .field("to", &self.addr)
            .field("sent", &self.message.is_none())
            .finish()
    }
}
