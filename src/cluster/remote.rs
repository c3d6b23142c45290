//! Addressing a process on any node: [`RemoteAddr`] (send, acked send, ask); its errors are
//! `error.rs`'s, a monitor is `remote_monitor.rs`.
//!
//! A `RemoteAddr` to a process of this very node takes the local path (no encoding, no wire);
//! to another node's, the message is encoded on the caller's thread (so encoding errors and
//! unregistered types are the caller's errors, at once) and queued for that node's writer.

use super::decoding::{self, DecodeScope};
use super::error::{RemoteError, RemoteSendError};
use super::node::{NodeShared, PeerId, Pending};
use super::outbound::Admission;
use super::reply::AskTicket;
use super::wire::{Ack, Envelope, Refusal};
use super::NodePid;
use crate::process::async_fn::asking::CancelWatch;
use crate::scheduler::{AskError, Reply};
use futures::FutureExt;
use serde::de::DeserializeOwned;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::sync::oneshot;

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
/// An address travels: it is `Serialize` and `Deserialize` (as its [`NodePid`]), so a message,
/// an ask's answer, a spawn's argument or a process's output may carry one (a reply-to, a
/// subscriber, the next member of a ring), and the node that receives it decodes an address
/// that sends through that node. Decoded anywhere else (no node decoding), it fails with a
/// serde error: decode a [`NodePid`] there and call [`Node::addr`](super::Node::addr).
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

/// An address crosses nodes as its [`NodePid`]: inside a message, an ask's answer, a spawn's
/// argument or a process's output, it decodes on the receiving node as an address through that
/// node (see the type's docs).
impl<M> Serialize for RemoteAddr<M> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.pid.serialize(serializer)
    }
}

/// Decodes only where a node decodes (a message, an answer, a spawn's argument or an output it
/// received): elsewhere there is no node to address through, and decoding fails (decode the
/// [`NodePid`] instead and call [`Node::addr`](super::Node::addr)).
impl<'de, M: Serialize + Send + 'static> Deserialize<'de> for RemoteAddr<M> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RemoteAddr<M>, D::Error> {
        let pid = NodePid::deserialize(deserializer)?;
        match decoding::decoding_node() {
            Some(node) => Ok(RemoteAddr::new(node, pid)),
            None => Err(D::Error::custom(format!(
                "the address of {pid} is decoded only by a node (inside a message, an answer, a \
                 spawn's argument or an output it received)"
            ))),
        }
    }
}

/// Where a [`NodePid`] lives, seen from this node.
pub(super) enum Route {
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

    /// The node this address sends through.
    pub(super) fn node(&self) -> &Arc<NodeShared> {
        &self.node
    }

    pub(super) fn route(&self) -> Result<Route, RemoteError> {
        if **self.pid.node_arc() == *self.node.me.name {
            if self.pid.incarnation() != self.node.me.incarnation {
                return Err(self.node.other_life_error(self.pid.incarnation()));
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
    /// answer, so an answer can never arrive before its waiter). `admission`: whether the
    /// lane's backlog may refuse it (`outbound.rs`, "Backlog").
    ///
    /// The body is encoded into a per-thread scratch buffer and copied once, into the frame
    /// (`outbound.rs`): no allocation per message once the buffer has grown.
    pub(super) fn queue(
        &self,
        peer: &PeerId,
        message: &M,
        ack: Option<Ack>,
        admission: Admission,
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
                .send_encoded(peer, &envelope, buffer, gap, admission)
                .map_err(RemoteError::from_refusal)
        })
    }

    /// Sends the request `request` builds around a remote [`Reply`] port to `peer`, its answer
    /// expected under a new id: the id and where the answer comes (nothing is left pending if
    /// it could not be queued). `request` and the message's drop are user code.
    pub(super) fn send_ask<R>(
        &self,
        peer: &PeerId,
        request: impl FnOnce(Reply<R>) -> M,
    ) -> Result<(u64, oneshot::Receiver<Result<bytes::Bytes, Refusal>>), RemoteError>
    where
        R: Serialize + DeserializeOwned + Send + 'static,
    {
        let id = self.node.next_id();
        let message = request(Reply::remote(Box::new(AskTicket(id))));
        let (reply, replied) = oneshot::channel();
        let expect = || self.node.expect(id, peer.clone(), Pending::Ask(reply));
        let queued = self.queue(
            peer,
            &message,
            Some(Ack::Refused(id)),
            Admission::Always,
            expect,
        );
        drop(message);
        if let Err(error) = queued {
            self.node.forget_pending(id);
            return Err(error);
        }
        Ok((id, replied))
    }

    /// Sends `message`, at most once, without waiting: order is kept per sending node and
    /// receiving node. Errors known here come back at once with the message; a refusal on the
    /// receiving node is counted there ([`NodeStats::undelivered`](super::NodeStats)) — use
    /// [`send_acked`](Self::send_acked) to hear it.
    ///
    /// # Errors
    ///
    /// `NoConnection` (node unknown or down, or a later life of it this node has not read yet),
    /// `NoProc` (an earlier life of the node),
    /// `Unregistered`, `Encode`, `TooLarge`, `Backlogged` (the lane to that node holds more
    /// than [`Cluster::max_backlog`](super::Cluster::max_backlog) unsent: the network is
    /// behind; [`send_wait`](Self::send_wait) waits instead); for a local process, as
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
        let back = |error, message| RemoteSendError::new(error, Some(message));
        match self.route() {
            Err(error) => Err(back(error, message)),
            Ok(Route::Local(pid)) => {
                self.node
                    .sched
                    .addr::<M>(pid)
                    .send(message)
                    .map_err(|error| {
                        let kind = error.kind();
                        RemoteSendError::new(RemoteError::from_kind(kind), error.into_message())
                    })
            }
            Ok(Route::Remote(peer)) => {
                match self.queue(&peer, &message, None, Admission::Bounded, || {}) {
                    Ok(()) => Ok(()),
                    Err(error) => Err(back(error, message)),
                }
            }
        }
    }

    /// Sends `message` as [`send`](Self::send) does, but where `send` would be refused
    /// because the lane to the process's node is backlogged
    /// ([`Cluster::max_backlog`](super::Cluster::max_backlog)), waits until the network has
    /// taken enough of it: backpressure for a sender that may outrun the network, as a bounded
    /// local mailbox's [`Addr::send_wait`](crate::Addr::send_wait) gives. Senders that waited
    /// together may pass the limit by their messages. A process of this node is sent to as
    /// [`Addr::send_wait`](crate::Addr::send_wait) sends (waiting for room in a bounded
    /// mailbox).
    ///
    /// Cancel-safe: dropped while it waits, the message was not sent (it is dropped with the
    /// future).
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send), never `Backlogged`; `NoConnection` if the node is declared
    /// down (or this one leaves) while it waits; from a process's body, `Cancelled` (the
    /// message handed back) if its process is asked to finish while it waits, as a local
    /// `send_wait`'s wait ends.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(node: procsched::cluster::Node, pid: procsched::cluster::NodePid) {
    /// let addr = node.addr::<u64>(pid);
    /// for n in 0..1_000_000 {
    ///     // Never `Backlogged`: waits while the network is behind.
    ///     addr.send_wait(n).await.expect("sent");
    /// }
    /// # }
    /// ```
    pub async fn send_wait(&self, message: M) -> Result<(), RemoteSendError<M>> {
        let back = |error, message| RemoteSendError::new(error, Some(message));
        let peer = match self.route() {
            Err(error) => return Err(back(error, message)),
            Ok(Route::Local(pid)) => {
                return self
                    .node
                    .sched
                    .addr::<M>(pid)
                    .send_wait(message)
                    .await
                    .map_err(|error| {
                        let kind = error.kind();
                        RemoteSendError::new(RemoteError::from_kind(kind), error.into_message())
                    });
            }
            Ok(Route::Remote(peer)) => peer,
        };
        match self.node.room_to(&peer) {
            Ok(room) => {
                if let Err(reason) = wait_for_room(room).await {
                    let cancelled = RemoteError::Cancelled(AskError::Cancelled(reason));
                    return Err(back(cancelled, message));
                }
            }
            Err(refusal) => return Err(back(RemoteError::from_refusal(refusal), message)),
        }
        match self.queue(&peer, &message, None, Admission::Always, || {}) {
            Ok(()) => Ok(()),
            Err(error) => Err(back(error, message)),
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
    /// The message leaves at once: a `TimedOut`, or this future dropped before it resolves,
    /// loses the receiving node's answer, not the message, which may have been delivered (as
    /// any request over a network whose reply is lost; `send_wait`'s "dropped, not sent" does
    /// not hold here). Retry only what may arrive twice.
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
        if let Err(error) = self.queue(
            &peer,
            &message,
            Some(Ack::Always(id)),
            Admission::Always,
            expect,
        ) {
            self.node.forget_pending(id);
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
    /// then ends the body as cancelled, as for a local ask; `AskedItself` if that process asked
    /// its own PID (refused at once, as a local ask is).
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
    /// timer fires is taken; `Duration::ZERO` has fired at the first poll, before any answer
    /// can come, so it always fails `TimedOut`).
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
                    .map_err(|error| RemoteError::from_ask(error, timeout));
            }
            Route::Remote(peer) => peer,
        };
        // From a body, the asking process's cancel ends the wait, as a local ask's does; one
        // that arrived before and was not told yet fails the ask before it is sent.
        let watch = CancelWatch::start()
            .map_err(|reason| RemoteError::Cancelled(AskError::Cancelled(reason)))?;
        let (id, replied) = self.send_ask(&peer, request)?;
        let answered = unless_cancelled(self.wait_for(id, replied, timeout), watch.as_ref())
            .await
            .unwrap_or_else(|reason| Err(RemoteError::Cancelled(AskError::Cancelled(reason))));
        // A wait that ended without its answer was forgotten (`wait_for`).
        let bytes = answered?;
        super::shared_bytes::within_frame(&bytes, || {
            DecodeScope::node(&self.node).decode_msgpack(&bytes)
        })
        .map_err(|error| self.node.undecodable_answer("an ask's answer", error))
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

/// Waits for the answer `id`, failing typed on timeout. The wait is forgotten unless its
/// answer came: on a timeout, and when this future is dropped before it resolves (a `select!`
/// that took another branch, a caller's own timeout, a body's cancel) — otherwise each such
/// wait's entry stayed in the node's table until the peer went down.
pub(crate) async fn wait_for<T>(
    node: &NodeShared,
    id: u64,
    answer: oneshot::Receiver<Result<T, Refusal>>,
    timeout: Duration,
) -> Result<T, RemoteError> {
    let mut forget = ForgetUnlessAnswered { node, id: Some(id) };
    // Awaited anywhere (`runtime.rs`): the timer is made, in the first poll, in the node's
    // runtime. Outside tokio's cooperative budget, as a local ask's answer is read
    // (`scheduler/ask.rs`): in a join of many, a budgeted poll past the task's 128th re-woke
    // its future, and every tick re-polled the whole join.
    let answered =
        async { tokio::task::unconstrained(tokio::time::timeout(timeout, answer)).await };
    match super::runtime::in_runtime(&node.runtime, answered).await {
        Ok(Ok(result)) => {
            // Taken from the table by the answer's delivery: nothing to forget.
            forget.id = None;
            result.map_err(RemoteError::from_refusal)
        }
        // The node stopped and dropped what it waited for.
        Ok(Err(_)) => Err(RemoteError::NoConnection),
        Err(_) => Err(RemoteError::TimedOut(timeout)),
    }
}

/// Forgets the wait `id` when dropped, unless its answer came (`id` taken): a late answer
/// then finds nothing to wake, and the entry does not outlive its waiter.
struct ForgetUnlessAnswered<'a> {
    node: &'a NodeShared,
    id: Option<u64>,
}

impl Drop for ForgetUnlessAnswered<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.node.forget_pending(id);
        }
    }
}

/// Waits for `room` on a lane; from a body, the sending process's cancel ends the wait
/// (`Err`: its reason), as it ends a local `send_wait`'s. Watched only once the lane is found
/// full: a send with room at once goes, as a local one does, whatever the body was told.
async fn wait_for_room(room: impl Future<Output = ()>) -> Result<(), crate::error::CancelReason> {
    let mut room = std::pin::pin!(room);
    if room.as_mut().now_or_never().is_some() {
        return Ok(());
    }
    let watch = CancelWatch::start()?;
    unless_cancelled(room, watch.as_ref()).await
}

/// `future`'s output, unless `watch` (a body's: `None` off a body) sees its process asked to
/// finish first (`Err`: the reason).
async fn unless_cancelled<T>(
    future: impl Future<Output = T>,
    watch: Option<&CancelWatch>,
) -> Result<T, crate::error::CancelReason> {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        match watch.and_then(|watch| watch.cancelled(cx.waker())) {
            Some(reason) => Poll::Ready(Err(reason)),
            None => Poll::Pending,
        }
    })
    .await
}
