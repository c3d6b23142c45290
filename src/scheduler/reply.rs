//! The reply port an ask's request carries ([`Reply<R>`]): where its answer goes — the asking
//! process's mailbox (a call completion), a oneshot channel, or another node — and what its
//! drop unanswered does (fails the ask at once). The ask itself, the future that sends the
//! request and waits, is `ask.rs`.

use crate::process::context::ProcessWake;
use crate::process::foreign_wake;
use crate::process::Tag;
use crate::process::{CommandError, Event, Payload};
use std::fmt;
use tokio::sync::oneshot;

/// The port a request carries for its answer: [`send`](Self::send) it the reply, once.
/// Dropping it unanswered fails the ask with [`AskError::NoReply`](super::AskError::NoReply) at once.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
///
/// enum Account { Deposit(u64), Balance(Reply<u64>) }
///
/// let sched = Scheduler::builder().workers(1).build()?;
/// let account = sched.spawn_fn(|cx: ProcessCx<Account>| async move {
///     let mut balance = 0;
///     loop {
///         match cx.recv().await? {
///             Account::Deposit(n) => balance += n,
///             Account::Balance(reply) => { let _ = reply.send(balance); }
///         }
///     }
///     #[allow(unreachable_code)]
///     Ok::<(), BoxError>(())
/// })?;
/// let addr = account.addr();
/// addr.send(Account::Deposit(42))?;
/// assert_eq!(sched.block_on(addr.ask(Account::Balance))?, 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "an ask waits for this port: answer it with `send` (dropping it fails the ask)"]
pub struct Reply<R> {
    pub(super) to: ReplyTo<R>,
}

/// Where the answer goes. Two variants, so that the process one's `Arc` gives the enum its tag
/// for free: a port is three words, and a request carrying it with a word of its own — `(u64,
/// Reply<u64>)` — fits a [`Payload`] inline (four words) instead of being boxed, a `malloc`
/// and a `free` per ask (checked below).
pub(super) enum ReplyTo<R> {
    /// The asker is a process: the answer is the completion of its call `tag`.
    Process { asker: ProcessWake, tag: Tag },
    /// The asker is elsewhere; `None` once answered (or dropped).
    Elsewhere(Option<Elsewhere<R>>),
}

/// An asker that is not a process of this node.
pub(super) enum Elsewhere<R> {
    /// The asker is outside any process.
    Channel(oneshot::Sender<R>),
    /// The asker is on another node (or this is the asking node's placeholder that crosses
    /// the wire in its place): the cluster layer carries the answer. Boxed twice, so that it
    /// is one word like the channel (a cross-node ask pays one more allocation, next to a
    /// network round trip).
    #[cfg(feature = "cluster")]
    Remote(Box<Box<dyn RemoteAnswer<R>>>),
}

/// A port taken out of its [`Reply`] to be answered or dropped.
enum Port<R> {
    Process {
        asker: ProcessWake,
        tag: Tag,
    },
    Channel(oneshot::Sender<R>),
    #[cfg(feature = "cluster")]
    Remote(Box<dyn RemoteAnswer<R>>),
}

// The point of the layout above: a port and a word fit a payload inline.
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Reply<u64>>() <= 3 * std::mem::size_of::<usize>());

impl<R> Reply<R> {
    /// The port, leaving the reply answered.
    fn take(&mut self) -> Option<Port<R>> {
        match std::mem::replace(&mut self.to, ReplyTo::Elsewhere(None)) {
            ReplyTo::Process { asker, tag } => Some(Port::Process { asker, tag }),
            ReplyTo::Elsewhere(None) => None,
            ReplyTo::Elsewhere(Some(Elsewhere::Channel(sender))) => Some(Port::Channel(sender)),
            #[cfg(feature = "cluster")]
            ReplyTo::Elsewhere(Some(Elsewhere::Remote(remote))) => Some(Port::Remote(*remote)),
        }
    }
}

/// A port that answers on a tokio `oneshot` channel: what a test (a
/// [`Harness`](crate::testing::Harness) stepping a process that serves asks) or a bridge to
/// other code hands a process in a request, and awaits the receiver of. Dropped unanswered,
/// the receiver sees the channel closed.
///
/// # Examples
///
/// ```
/// use procsched::prelude::*;
/// use procsched::state_machine::Status;
/// use procsched::testing::Harness;
///
/// enum Account { Balance(Reply<u64>) }
///
/// let mut harness = Harness::for_fn(|cx: ProcessCx<Account>| async move {
///     let Account::Balance(reply) = cx.recv().await?;
///     let _ = reply.send(42);
///     Ok::<_, BoxError>(())
/// });
/// harness.init("run", Payload::empty())?;
/// let (port, mut answer) = tokio::sync::oneshot::channel();
/// harness.send(Message::new("balance", Payload::new(Account::Balance(port.into()))));
/// assert!(matches!(harness.step()?.status, Status::Done(())));
/// assert_eq!(answer.try_recv(), Ok(42));
/// # Ok::<(), BoxError>(())
/// ```
impl<R> From<oneshot::Sender<R>> for Reply<R> {
    fn from(sender: oneshot::Sender<R>) -> Reply<R> {
        Reply {
            to: ReplyTo::Elsewhere(Some(Elsewhere::Channel(sender))),
        }
    }
}

/// Where the answer of an ask that crosses nodes goes: the narrow door through which the
/// cluster layer (above this one) plugs into [`Reply`].
#[cfg(feature = "cluster")]
pub(crate) trait RemoteAnswer<R>: Send + Sync {
    /// The ask's id on the wire, if this port is the asking node's placeholder (what the
    /// port serializes as).
    fn wire_id(&self) -> Option<u64>;
    /// Sends `value` to the asking node; hands it back if it cannot be sent.
    fn answer(self: Box<Self>, value: R) -> Result<(), R>;
    /// The port was dropped unanswered: the asker fails with `NoReply`.
    fn unanswered(self: Box<Self>);
    /// The asking node is known gone.
    fn is_closed(&self) -> bool;
}

#[cfg(feature = "cluster")]
impl<R> Reply<R> {
    /// A port whose answer goes through `remote`.
    pub(crate) fn remote(remote: Box<dyn RemoteAnswer<R>>) -> Reply<R> {
        Reply {
            to: ReplyTo::Elsewhere(Some(Elsewhere::Remote(Box::new(remote)))),
        }
    }

    /// The wire id of an asking node's placeholder port.
    pub(crate) fn wire_id(&self) -> Option<u64> {
        match &self.to {
            ReplyTo::Elsewhere(Some(Elsewhere::Remote(remote))) => remote.wire_id(),
            _ => None,
        }
    }
}

impl<R: Send + 'static> Reply<R> {
    /// Answers the ask with `value`, waking the asker.
    ///
    /// # Errors
    ///
    /// `value`, handed back, if the asker no longer waits (it timed out, dropped its ask, or
    /// ended). An answer that reached the asker before it gave up was delivered (`Ok`), and
    /// is dropped unread. An asker on another node (`cluster`): `Ok` once the answer is on its
    /// way — whether the asker still waits is known on its node, which drops an answer it no
    /// longer waits for; `Err` only if its node is known gone here.
    ///
    /// # Examples
    ///
    /// See [`Reply`].
    pub fn send(mut self, value: R) -> Result<(), R> {
        match self.take() {
            Some(Port::Process { asker, tag }) => {
                let answer = Event::YieldComplete {
                    tag,
                    result: Ok(Payload::new(value)),
                };
                asker.deliver(answer).map_err(|refused| match refused {
                    Event::YieldComplete {
                        result: Ok(payload),
                        ..
                    } => payload.take::<R>().expect("our own answer"),
                    _ => unreachable!("a refused answer comes back as itself"),
                })
            }
            // The asker's task is woken here, on the answerer's thread (perhaps a body's):
            // its waker's panic is contained (`foreign_wake.rs`). The answer is stored before
            // the wake, so it was delivered.
            Some(Port::Channel(sender)) => {
                foreign_wake("an asker", move || sender.send(value)).unwrap_or(Ok(()))
            }
            #[cfg(feature = "cluster")]
            Some(Port::Remote(remote)) => remote.answer(value),
            None => Err(value),
        }
    }

    /// `true` if an answer can no longer reach the asker: asked from outside a process, its
    /// ask was dropped (it timed out, say); asked from a process, that process has ended or
    /// stopped waiting (its ask timed out, was dropped, or was cut short by its cancel). Asked
    /// from another node (`cluster`): `false` unless that node is known gone here (its asker
    /// giving up is known only there).
    ///
    /// # Examples
    ///
    /// ```
    /// use procsched::prelude::*;
    /// use std::time::Duration;
    ///
    /// enum Request { Slow(Reply<u8>), Check(Reply<bool>) }
    ///
    /// let sched = Scheduler::builder().workers(1).build()?;
    /// let server = sched.spawn_fn(|cx: ProcessCx<Request>| async move {
    ///     let Request::Slow(slow) = cx.recv().await? else { unreachable!() };
    ///     let Request::Check(check) = cx.recv().await? else { unreachable!() };
    ///     let _ = check.send(slow.is_closed());
    ///     Ok::<_, BoxError>(())
    /// })?;
    /// let gave_up = sched.block_on(server.addr().ask_within(Duration::from_millis(1), Request::Slow));
    /// assert!(gave_up.unwrap_err().is_timed_out());
    /// assert!(sched.block_on(server.addr().ask(Request::Check))?, "the first asker is gone");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_closed(&self) -> bool {
        match &self.to {
            ReplyTo::Elsewhere(Some(Elsewhere::Channel(sender))) => sender.is_closed(),
            ReplyTo::Process { asker, tag } => !asker.awaits_answer(*tag),
            #[cfg(feature = "cluster")]
            ReplyTo::Elsewhere(Some(Elsewhere::Remote(remote))) => remote.is_closed(),
            ReplyTo::Elsewhere(None) => true,
        }
    }
}

impl<R> Drop for Reply<R> {
    fn drop(&mut self) {
        // Unanswered: the asker learns it now (a dropped channel sender tells its receiver).
        match self.take() {
            Some(Port::Process { asker, tag }) => {
                let no_reply = Event::YieldComplete {
                    tag,
                    result: Err(CommandError::NoReply),
                };
                let _ = asker.deliver(no_reply);
            }
            #[cfg(feature = "cluster")]
            Some(Port::Remote(remote)) => remote.unanswered(),
            _ => {}
        }
    }
}

impl<R> fmt::Debug for Reply<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let to = match &self.to {
            ReplyTo::Process { .. } => "a process",
            ReplyTo::Elsewhere(Some(Elsewhere::Channel(_))) => "a channel",
            #[cfg(feature = "cluster")]
            ReplyTo::Elsewhere(Some(Elsewhere::Remote(_))) => "another node",
            ReplyTo::Elsewhere(None) => "nobody (answered)",
        };
        f.debug_struct("Reply")
            .field("reply", &std::any::type_name::<R>())
            .field("to", &to)
            .finish()
    }
}
