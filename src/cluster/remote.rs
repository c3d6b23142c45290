//! Addressing a process on any node: [`RemoteAddr`] (send, acked send, ask), [`RemoteMonitor`],
//! and their errors.
//!
//! A `RemoteAddr` to a process of this very node takes the local path (no encoding, no wire);
//! to another node's, the message is encoded on the caller's thread (so encoding errors and
//! unregistered types are the caller's errors, at once) and queued for that node's writer.

use super::node::{NodeShared, PeerId, Pending};
use super::reply::AskTicket;
use super::wire::{Ack, Envelope, Item, Refusal, WireReason};
use super::NodePid;
use crate::process::async_fn::asking::CancelWatch;
use crate::process::exit::ExitReason;
use crate::process::InitError;
use crate::scheduler::{AskError, Monitor, Reply, SendErrorKind, SpawnError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::oneshot;

/// Why a remote operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// No live process has this PID on its node.
    #[error("no live process with this PID")]
    NotFound,
    /// The process is finishing.
    #[error("the process is finishing")]
    Closed,
    /// The process's mailbox is full.
    #[error("the process's mailbox is full")]
    MailboxFull,
    /// The PID is from another life (incarnation) of its node.
    #[error("the PID belongs to another life of its node")]
    NoProc,
    /// The node cannot be reached: unknown, declared down, or it died while this waited.
    #[error("the node cannot be reached")]
    NoConnection,
    /// No answer within the timeout.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// The process dropped the reply port unanswered.
    #[error("the process dropped the reply port without answering")]
    NoReply,
    /// The message type is not registered (here, or on the receiving node). (A spawnable name
    /// that is not is [`Spawn`](Self::Spawn)`(Init(UnknownMethod))`, as a local spawn says it.)
    #[error("`{0}` is not registered")]
    Unregistered(String),
    /// The message, argument or reply did not encode.
    #[error("encoding failed: {0}")]
    Encode(String),
    /// The receiving side could not decode what was sent (the nodes disagree on a type).
    #[error("decoding failed: {0}")]
    Decode(String),
    /// Asked from a process's body, that process was asked to finish while the ask waited
    /// (its source is [`AskError::Cancelled`], so `?` ends the body as cancelled, as a local
    /// ask's would).
    #[error("the asking process was cancelled")]
    Cancelled(#[source] AskError),
    /// The process declared another message type (`ProcessCx<M>`) than the one sent: a PID
    /// carries no type, so [`Node::addr`](super::Node::addr)'s `M` is the sender's word. The
    /// message was not delivered; the process is untouched.
    #[error("the process takes `{takes}`, not `{sent}`")]
    WrongType {
        /// The type the process declared.
        takes: String,
        /// The type sent.
        sent: String,
    },
    /// The message is larger than a frame may be (also: a remote spawn's argument, or the
    /// answer to an ask, as the answering node says it).
    #[error("{size} bytes over the frame limit of {limit}")]
    TooLarge {
        /// The encoded size.
        size: usize,
        /// The most a message may encode to: [`Cluster::max_frame`](super::Cluster::max_frame)
        /// less its frame's head and the item's envelope.
        limit: usize,
    },
    /// A remote spawn was refused: the same [`SpawnError`] a local spawn gives (an unknown
    /// name is `Init(UnknownMethod)`).
    #[error("the spawn failed: {0}")]
    Spawn(SpawnError),
    /// No node matches the placement.
    #[error("no node to place the process on: {0}")]
    NoNode(String),
    /// The awaited process ended without an output ([`RemoteHandle`](super::RemoteHandle)).
    #[error("the process ended: {0}")]
    Ended(ExitReason),
}

impl RemoteError {
    /// `true` for [`NoConnection`](Self::NoConnection).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::cluster::RemoteError::NoConnection.is_no_connection());
    /// ```
    pub fn is_no_connection(&self) -> bool {
        matches!(self, RemoteError::NoConnection)
    }

    /// `true` for [`NotFound`](Self::NotFound).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(procsched::cluster::RemoteError::NotFound.is_not_found());
    /// ```
    pub fn is_not_found(&self) -> bool {
        matches!(self, RemoteError::NotFound)
    }

    pub(crate) fn from_refusal(refusal: Refusal) -> RemoteError {
        match refusal {
            Refusal::NotFound => RemoteError::NotFound,
            Refusal::Closed => RemoteError::Closed,
            Refusal::MailboxFull => RemoteError::MailboxFull,
            Refusal::NoProc => RemoteError::NoProc,
            Refusal::NoConnection => RemoteError::NoConnection,
            Refusal::Unregistered(name) => RemoteError::Unregistered(name),
            Refusal::Decode(text) => RemoteError::Decode(text),
            Refusal::WrongType { takes, sent } => RemoteError::WrongType { takes, sent },
            Refusal::NoReply => RemoteError::NoReply,
            Refusal::SpawnInit(text) => {
                RemoteError::Spawn(SpawnError::Init(InitError::Failed(text.into())))
            }
            Refusal::SpawnPanicked(text) => RemoteError::Spawn(SpawnError::InitPanicked(text)),
            Refusal::ShuttingDown => RemoteError::Spawn(SpawnError::ShuttingDown),
            Refusal::Limit(limit) => RemoteError::Spawn(SpawnError::Limit(
                usize::try_from(limit).unwrap_or(usize::MAX),
            )),
            Refusal::TooLarge { size, limit } => RemoteError::TooLarge {
                size: usize::try_from(size).unwrap_or(usize::MAX),
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
            },
        }
    }

    fn from_kind(kind: SendErrorKind) -> RemoteError {
        match kind {
            SendErrorKind::NotFound => RemoteError::NotFound,
            SendErrorKind::Closed => RemoteError::Closed,
            _ => RemoteError::MailboxFull,
        }
    }
}

/// A failed [`RemoteAddr::send`]: why, and the message back when it never left this node.
pub struct RemoteSendError<M> {
    error: RemoteError,
    message: Option<M>,
}

impl<M> RemoteSendError<M> {
    /// Why the send failed.
    ///
    /// # Examples
    ///
    /// See [`RemoteAddr::send`].
    pub fn error(&self) -> &RemoteError {
        &self.error
    }

    /// The message, if it never left this node.
    ///
    /// # Examples
    ///
    /// See [`RemoteAddr::send`].
    pub fn into_message(self) -> Option<M> {
        self.message
    }
}

impl<M> fmt::Debug for RemoteSendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteSendError")
            .field("error", &self.error)
            .field("message_back", &self.message.is_some())
            .finish()
    }
}

impl<M> fmt::Display for RemoteSendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "send failed: {}", self.error)
    }
}

impl<M> std::error::Error for RemoteSendError<M> {}

/// The typed address of a process on any node ([`Node::addr`](super::Node::addr)): `Clone`,
/// `Send`, `Sync`, usable from any thread or process. `M` must be registered under the same
/// name on both nodes ([`Cluster::message`](super::Cluster::message)).
///
/// A PID carries no message type: `M` is what the caller says the process takes, and no
/// compiler checked it. So the process's node checks it: a message of another type than the
/// process's body declared (`ProcessCx<T>`) is refused with [`RemoteError::WrongType`] —
/// `send_acked` and `ask` hear it, a plain `send` is dropped there and counted
/// ([`NodeStats::rejected_items`](super::NodeStats)) — and never reaches the process, whose
/// receive would fail on it. A state machine, or a body of `ProcessCx<()>` or
/// `ProcessCx<Message>`, declared no one type and takes any registered one (its receive decides,
/// as locally). (Locally, [`SchedulerHandle::addr`](crate::SchedulerHandle::addr)`::<M>(pid)`
/// is not checked: there, keep the address its spawn returned.)
///
/// # Examples
///
/// ```no_run
/// use procsched::cluster::{Node, NodePid, RemoteAddr};
/// use procsched::prelude::*;
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// enum Counter { Add(u64), Get(Reply<u64>) }
///
/// # async fn demo(node: Node, pid: NodePid) -> Result<(), BoxError> {
/// let counter: RemoteAddr<Counter> = node.addr(pid);
/// // From a plain thread: sends never block, whether the process is here or remote.
/// let from_thread = counter.clone();
/// let sent = std::thread::spawn(move || from_thread.send(Counter::Add(1)).is_ok());
/// assert!(sent.join().unwrap());
/// // From tokio code: a typed ask, with a timeout.
/// let n = counter.ask_within(std::time::Duration::from_secs(1), Counter::Get).await?;
/// assert!(n >= 1);
/// # Ok(()) }
/// ```
pub struct RemoteAddr<M> {
    node: Arc<NodeShared>,
    pid: NodePid,
    _message: PhantomData<fn(M)>,
}

impl<M> Clone for RemoteAddr<M> {
    fn clone(&self) -> Self {
        RemoteAddr {
            node: self.node.clone(),
            pid: self.pid.clone(),
            _message: PhantomData,
        }
    }
}

/// Two addresses are equal when they name the same process (the same [`NodePid`]: node,
/// incarnation and local PID), whichever node made them: a set of subscribers, a map keyed by
/// address, works across nodes.
impl<M> PartialEq for RemoteAddr<M> {
    fn eq(&self, other: &Self) -> bool {
        self.pid == other.pid
    }
}

impl<M> Eq for RemoteAddr<M> {}

impl<M> std::hash::Hash for RemoteAddr<M> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.pid.hash(state);
    }
}

impl<M> fmt::Debug for RemoteAddr<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RemoteAddr").field(&self.pid).finish()
    }
}

/// Where a [`NodePid`] lives, seen from this node.
enum Route {
    Local(crate::process::Pid),
    Remote(PeerId),
}

impl<M: Serialize + Send + 'static> RemoteAddr<M> {
    pub(crate) fn new(node: Arc<NodeShared>, pid: NodePid) -> RemoteAddr<M> {
        RemoteAddr {
            node,
            pid,
            _message: PhantomData,
        }
    }

    /// The process's PID.
    ///
    /// # Examples
    ///
    /// See [`Node`](super::Node).
    pub fn pid(&self) -> &NodePid {
        &self.pid
    }

    fn route(&self) -> Result<Route, RemoteError> {
        if **self.pid.node_arc() == *self.node.me.name {
            if self.pid.incarnation() != self.node.me.incarnation {
                return Err(RemoteError::NoProc);
            }
            // As the receiving node checks a remote sender's (`Registry::message`).
            super::registry::check_takes::<M>(self.node.takes(self.pid.local()))
                .map_err(RemoteError::from_refusal)?;
            return Ok(Route::Local(self.pid.local()));
        }
        // Whether that node lives, at this incarnation, is checked once, when the item is
        // queued (`NodeShared::send_item`: `NoConnection` / `NoProc`).
        Ok(Route::Remote(PeerId {
            name: self.pid.node_arc().clone(),
            incarnation: self.pid.incarnation(),
        }))
    }

    /// Encodes `message` and queues it for the process, with `ack`, on `peer`'s data lane
    /// (`before` runs first, once the message has encoded: it registers what waits for the
    /// answer, so an answer can never arrive before its waiter).
    ///
    /// The body is encoded into a per-thread scratch buffer and copied once, into the frame
    /// (`outbound.rs`): no allocation per message once the buffer has grown.
    fn queue(
        &self,
        peer: &PeerId,
        message: &M,
        ack: Option<Ack>,
        before: impl FnOnce(),
    ) -> Result<(), RemoteError> {
        let Some(ty) = self.node.registry.name_of::<M>() else {
            return Err(RemoteError::Unregistered(
                std::any::type_name::<M>().to_owned(),
            ));
        };
        let envelope = Envelope::Message {
            to: self.pid.local().as_u64(),
            ty,
            ack,
        };
        // The body is encoded behind room for its frame's head and envelope: a big one is
        // published from this buffer as a frame of its own (`NodeShared::send_encoded`).
        let gap = self.node.gap(&envelope);
        super::scratch::with(|buffer| {
            buffer.resize(gap, 0);
            rmp_serde::encode::write_named(buffer, message)
                .map_err(|error| RemoteError::Encode(error.to_string()))?;
            // Over the frame limit, the lane refuses it (`TooLarge`, nothing queued).
            before();
            self.node
                .send_encoded(peer, &envelope, buffer, gap)
                .map_err(RemoteError::from_refusal)
        })
    }

    /// Sends `message`, at most once, without waiting: order is kept per sending node and
    /// receiving node. Errors known here come back at once with the message; a refusal on the
    /// receiving node is counted there ([`NodeStats::undelivered`](super::NodeStats)) — use
    /// [`send_acked`](Self::send_acked) to hear it.
    ///
    /// # Errors
    ///
    /// `NoConnection` (node unknown or down), `NoProc` (another life of the node),
    /// `Unregistered`, `Encode`, `TooLarge`; for a local process, as
    /// [`Addr::send`](crate::Addr::send), and `WrongType`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(node: procsched::cluster::Node, pid: procsched::cluster::NodePid) {
    /// let addr = node.addr::<u64>(pid);
    /// if let Err(error) = addr.send(5) {
    ///     eprintln!("not sent: {}", error.error());
    ///     let _five = error.into_message();
    /// }
    /// # }
    /// ```
    pub fn send(&self, message: M) -> Result<(), RemoteSendError<M>> {
        let back = |error, message| RemoteSendError {
            error,
            message: Some(message),
        };
        match self.route() {
            Err(error) => Err(back(error, message)),
            Ok(Route::Local(pid)) => {
                self.node
                    .sched
                    .addr::<M>(pid)
                    .send(message)
                    .map_err(|error| {
                        let kind = error.kind();
                        RemoteSendError {
                            error: RemoteError::from_kind(kind),
                            message: error.into_message(),
                        }
                    })
            }
            Ok(Route::Remote(peer)) => match self.queue(&peer, &message, None, || {}) {
                Ok(()) => Ok(()),
                Err(error) => Err(back(error, message)),
            },
        }
    }

    /// Sends `message` and waits until the receiving node says whether it was delivered (put
    /// in the process's mailbox).
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send), plus `NotFound` / `Closed` / `MailboxFull` / `WrongType` from
    /// the receiving node, `NoConnection` if it dies meanwhile, `TimedOut` past the request timeout.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(node: procsched::cluster::Node, pid: procsched::cluster::NodePid) {
    /// match node.addr::<u64>(pid).send_acked(5).await {
    ///     Ok(()) => {}
    ///     Err(error) if error.is_not_found() => { /* the process is gone */ }
    ///     Err(error) => eprintln!("{error}"),
    /// }
    /// # }
    /// ```
    pub async fn send_acked(&self, message: M) -> Result<(), RemoteError> {
        let peer = match self.route()? {
            Route::Local(pid) => {
                return self
                    .node
                    .sched
                    .addr::<M>(pid)
                    .send(message)
                    .map_err(|error| RemoteError::from_kind(error.kind()));
            }
            Route::Remote(peer) => peer,
        };
        let id = self.node.next_id();
        let (ack, acked) = oneshot::channel();
        let expect = || self.node.expect(id, peer.clone(), Pending::Ack(ack));
        if let Err(error) = self.queue(&peer, &message, Some(Ack::Always(id)), expect) {
            self.node.take_pending(id);
            return Err(error);
        }
        self.wait(id, acked).await
    }

    /// Asks the process: `request` builds the message around the [`Reply`] port the answer
    /// comes back through (as [`Addr::ask`](crate::Addr::ask)), with the node's request
    /// timeout. The reply type must be serializable; the message type registered.
    ///
    /// # Errors
    ///
    /// As [`send_acked`](Self::send_acked), plus `NoReply` (the port was dropped unanswered),
    /// `Decode` (the reply did not decode as `R`) and, asked from a process's body,
    /// `Cancelled` once that process is asked to finish (shutdown, `cancel`) while it waits: `?`
    /// then ends the body as cancelled, as for a local ask.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use procsched::prelude::*;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// enum Cart { Add(u64), Total(Reply<u64>) }
    ///
    /// # async fn demo(node: procsched::cluster::Node, pid: procsched::cluster::NodePid) -> Result<(), BoxError> {
    /// let cart = node.addr::<Cart>(pid);
    /// cart.send(Cart::Add(5))?;
    /// let total: u64 = cart.ask(Cart::Total).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ask<R>(&self, request: impl FnOnce(Reply<R>) -> M) -> Result<R, RemoteError>
    where
        R: Serialize + DeserializeOwned + Send + 'static,
    {
        self.ask_within(self.node.request_timeout, request).await
    }

    /// [`ask`](Self::ask) with its own timeout (a timer's: an answer that comes before the
    /// timer fires is taken, even for `Duration::ZERO`).
    ///
    /// # Errors
    ///
    /// As [`ask`](Self::ask).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use procsched::prelude::*;
    /// # #[derive(serde::Serialize, serde::Deserialize)] enum Cart { Total(Reply<u64>) }
    /// # async fn demo(node: procsched::cluster::Node, pid: procsched::cluster::NodePid) -> Result<(), BoxError> {
    /// let total = node.addr::<Cart>(pid).ask_within(std::time::Duration::from_millis(100), Cart::Total).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ask_within<R>(
        &self,
        timeout: Duration,
        request: impl FnOnce(Reply<R>) -> M,
    ) -> Result<R, RemoteError>
    where
        R: Serialize + DeserializeOwned + Send + 'static,
    {
        let peer = match self.route()? {
            Route::Local(pid) => {
                return self
                    .node
                    .sched
                    .addr::<M>(pid)
                    .ask_within(timeout, request)
                    .await
                    .map_err(|error| match error {
                        AskError::Undelivered(kind) => RemoteError::from_kind(kind),
                        AskError::TimedOut => RemoteError::TimedOut(timeout),
                        cancelled @ AskError::Cancelled(_) => RemoteError::Cancelled(cancelled),
                        _ => RemoteError::NoReply,
                    });
            }
            Route::Remote(peer) => peer,
        };
        let id = self.node.next_id();
        let message = request(Reply::remote(Box::new(AskTicket(id))));
        let (reply, replied) = oneshot::channel();
        let expect = || self.node.expect(id, peer.clone(), Pending::Ask(reply));
        let queued = self.queue(&peer, &message, Some(Ack::Refused(id)), expect);
        drop(message);
        if let Err(error) = queued {
            self.node.take_pending(id);
            return Err(error);
        }
        // From a body, the asking process's cancel ends the wait, as a local ask's does.
        let watch = CancelWatch::start();
        let mut waiting = std::pin::pin!(self.wait_for(id, replied, timeout));
        let answered = std::future::poll_fn(|cx| {
            if let Poll::Ready(answer) = waiting.as_mut().poll(cx) {
                return Poll::Ready(answer);
            }
            match watch.as_ref().and_then(CancelWatch::cancelled) {
                Some(reason) => {
                    Poll::Ready(Err(RemoteError::Cancelled(AskError::Cancelled(reason))))
                }
                None => Poll::Pending,
            }
        })
        .await;
        let bytes = match answered {
            Ok(bytes) => bytes,
            Err(error) => {
                // A late answer finds nothing to wake.
                self.node.take_pending(id);
                return Err(error);
            }
        };
        super::shared_bytes::within_frame(&bytes, || rmp_serde::from_slice(&bytes))
            .map_err(|error| RemoteError::Decode(error.to_string()))
    }

    async fn wait<T>(
        &self,
        id: u64,
        answer: oneshot::Receiver<Result<T, Refusal>>,
    ) -> Result<T, RemoteError> {
        self.wait_for(id, answer, self.node.request_timeout).await
    }

    async fn wait_for<T>(
        &self,
        id: u64,
        answer: oneshot::Receiver<Result<T, Refusal>>,
        timeout: Duration,
    ) -> Result<T, RemoteError> {
        wait_for(&self.node, id, answer, timeout).await
    }
}

/// Waits for the answer `id`, failing typed on timeout (the wait is forgotten then).
pub(crate) async fn wait_for<T>(
    node: &NodeShared,
    id: u64,
    answer: oneshot::Receiver<Result<T, Refusal>>,
    timeout: Duration,
) -> Result<T, RemoteError> {
    // Awaited anywhere (`runtime.rs`): the timer is made, in the first poll, in the node's
    // runtime.
    let answered = async { tokio::time::timeout(timeout, answer).await };
    match super::runtime::in_runtime(&node.runtime, answered).await {
        Ok(Ok(result)) => result.map_err(RemoteError::from_refusal),
        // The node stopped and dropped what it waited for.
        Ok(Err(_)) => Err(RemoteError::NoConnection),
        Err(_) => {
            node.take_pending(id);
            Err(RemoteError::TimedOut(timeout))
        }
    }
}

/// A process's end, as a [`RemoteMonitor`] reports it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RemoteDown {
    /// The monitored process.
    pub pid: NodePid,
    /// Why it ended: `NoConnection` if its node died or became unreachable, `NoProc` if it was
    /// already gone.
    pub reason: ExitReason,
}

/// A monitor on a process on any node ([`Node::monitor`](super::Node::monitor)): resolves to
/// exactly one [`RemoteDown`]. Dropping it first demonitors.
///
/// # Examples
///
/// ```no_run
/// use procsched::cluster::{Node, NodePid};
/// use std::time::Duration;
///
/// # async fn demo(node: Node, pid: NodePid) {
/// let monitor = node.monitor(pid);
/// // Watch for a while only: the timeout drops the monitor, which demonitors.
/// if let Ok(down) = tokio::time::timeout(Duration::from_secs(30), monitor).await {
///     eprintln!("{} ended: {}", down.pid, down.reason);
/// }
/// # }
/// ```
#[must_use = "a monitor reports only when awaited; dropping it demonitors"]
pub struct RemoteMonitor {
    pid: NodePid,
    state: Watching,
}

enum Watching {
    Local(Monitor),
    Remote {
        node: Arc<NodeShared>,
        peer: PeerId,
        id: u64,
        down: oneshot::Receiver<WireReason>,
    },
    Ready(Option<ExitReason>),
}

impl fmt::Debug for RemoteMonitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RemoteMonitor").field(&self.pid).finish()
    }
}

impl RemoteMonitor {
    pub(crate) fn new(node: &Arc<NodeShared>, pid: NodePid) -> RemoteMonitor {
        let ready = |reason| RemoteMonitor {
            pid: pid.clone(),
            state: Watching::Ready(Some(reason)),
        };
        if **pid.node_arc() == *node.me.name {
            if pid.incarnation() != node.me.incarnation {
                return ready(ExitReason::NoProc);
            }
            let monitor = node.sched.monitor(pid.local());
            return RemoteMonitor {
                pid,
                state: Watching::Local(monitor),
            };
        }
        match node.incarnation_of(pid.node()) {
            None => ready(ExitReason::NoConnection),
            Some(live) if live != pid.incarnation() => ready(ExitReason::NoProc),
            Some(_) => {
                let peer = PeerId {
                    name: pid.node_arc().clone(),
                    incarnation: pid.incarnation(),
                };
                let id = node.next_id();
                let (tx, down) = oneshot::channel();
                node.expect(id, peer.clone(), Pending::Monitor(tx));
                let target = pid.local().as_u64();
                if node.send_item(&peer, Item::Monitor { id, target }).is_err() {
                    node.take_pending(id);
                    return ready(ExitReason::NoConnection);
                }
                RemoteMonitor {
                    pid,
                    state: Watching::Remote {
                        node: node.clone(),
                        peer,
                        id,
                        down,
                    },
                }
            }
        }
    }

    /// The monitored process.
    ///
    /// # Examples
    ///
    /// See [`Node::monitor`](super::Node::monitor).
    pub fn pid(&self) -> &NodePid {
        &self.pid
    }
}

impl Future for RemoteMonitor {
    type Output = RemoteDown;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<RemoteDown> {
        let this = &mut *self;
        let reason = match &mut this.state {
            Watching::Local(monitor) => match Pin::new(monitor).poll(cx) {
                Poll::Ready(down) => down.reason,
                Poll::Pending => return Poll::Pending,
            },
            Watching::Remote { down, .. } => match Pin::new(down).poll(cx) {
                Poll::Ready(Ok(reason)) => reason.into_reason(),
                // The node stopped: nothing will report anymore.
                Poll::Ready(Err(_)) => ExitReason::NoConnection,
                Poll::Pending => return Poll::Pending,
            },
            Watching::Ready(reason) => reason.take().unwrap_or(ExitReason::NoConnection),
        };
        this.state = Watching::Ready(None);
        Poll::Ready(RemoteDown {
            pid: this.pid.clone(),
            reason,
        })
    }
}

impl Drop for RemoteMonitor {
    fn drop(&mut self) {
        if let Watching::Remote { node, peer, id, .. } = &self.state {
            if node.take_pending(*id).is_some() {
                let _ = node.send_item(peer, Item::Demonitor { id: *id });
            }
        }
    }
}
