//! A send that waits for room in a bounded mailbox ([`Addr::send_wait`]): tokio's bounded
//! `Sender::send(..).await`, where [`Addr::send`] — which never waits — hands a message to a
//! full mailbox back (`MailboxFull`). The waiting is the mailbox's (`process/mailbox/room.rs`,
//! protocol 12): the sender's waker is kept under the mailbox's lock, and woken by whatever
//! makes room or ends the process.

use super::addr::Addr;
use super::error::SendError;
use crate::process::mailbox::Ticket;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The future of [`Addr::send_wait`]: `Ok` once the message is in the mailbox.
///
/// Cancel safety: dropped before it resolves, the message was not sent (it is dropped with
/// the future).
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
}

impl<'a, M> SendWait<'a, M> {
    pub(super) fn new(addr: &'a Addr<M>, message: M) -> SendWait<'a, M> {
        SendWait {
            addr,
            message: Some(message),
            ticket: None,
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
        match sched
            .inner
            .post_typed_or_wait(pid, message, cx.waker(), &mut this.ticket)
        {
            Ok(None) => Poll::Ready(Ok(())),
            Ok(Some(waiting)) => {
                this.message = Some(waiting);
                Poll::Pending
            }
            Err((kind, refused)) => Poll::Ready(Err(SendError::new(kind, pid, Some(refused)))),
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
