//! What the cluster's operations fail with: [`ClusterError`] (a node's start), [`RemoteError`]
//! (a remote operation), and [`RemoteSendError`], which also hands the unsent message back.

use super::wire::Refusal;
use crate::process::exit::ExitReason;
use crate::process::InitError;
use crate::scheduler::{AskError, SendErrorKind, SpawnError};
use std::fmt;
use std::time::Duration;

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
    /// The PID is from an earlier life (incarnation) of its node: its process is gone. (A PID
    /// of a later life than the one this node knows is `NoConnection`: not reachable from
    /// here yet.)
    #[error("the PID belongs to an earlier life of its node")]
    NoProc,
    /// The node cannot be reached: unknown, declared down, or it died while this waited.
    #[error("the node cannot be reached")]
    NoConnection,
    /// No answer within the timeout.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// The reply port was dropped unanswered: by the process, or unread with its mailbox when
    /// it ended (a shutdown, say).
    #[error("the reply port was dropped unanswered (by the process, or unread with its mailbox when it ended)")]
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
    /// Asked from a process's body, that process was asked to finish while the ask waited —
    /// or, for a [`send_wait`](super::RemoteAddr::send_wait) to a process of this node, while
    /// it waited for room (its source is [`AskError::Cancelled`], so `?` ends the body as
    /// cancelled, as a local ask's or `send_wait`'s would).
    #[error("the asking process was cancelled")]
    Cancelled(#[source] AskError),
    /// A process asked itself through a [`RemoteAddr`](super::RemoteAddr) of its own PID:
    /// refused at once, nothing sent, as a local ask is ([`AskError::AskedItself`]).
    #[error("a process asked itself: it cannot answer while it waits")]
    AskedItself,
    /// The ask was polled outside the process that made it (in another task, or another
    /// process's body), as [`AskError::OutsideProcess`] says of a local one.
    #[error("an ask was polled outside the process that sent it")]
    OutsideProcess,
    /// The process declared another message type (`ProcessCx<M>`) than the one sent: a PID
    /// carries no type, so [`Node::addr`](super::Node::addr)'s `M` is the sender's word. The
    /// message was not delivered; the process is untouched.
    #[error("the process takes `{takes}`, not `{sent}`")]
    WrongType {
        /// The type the process declared.
        takes: String,
        /// The type sent; refused by a remote node, the type that node registered under the
        /// message's name, and the name (`Picky (sent as "picky")`): a name registered for
        /// different types on two nodes shows there.
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
    /// A fire-and-forget [`send`](super::RemoteAddr::send) found the lane to the process's
    /// node holding more than [`Cluster::max_backlog`](super::Cluster::max_backlog) bytes the
    /// network has not taken yet (a sender faster than the network, or a connection down):
    /// the message was not sent and comes back with the error.
    /// [`send_wait`](super::RemoteAddr::send_wait) waits for room instead.
    #[error("over {limit} bytes wait to be sent to that node: not sent")]
    Backlogged {
        /// The node's backlog limit, in bytes.
        limit: usize,
    },
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

    /// `true` for [`Backlogged`](Self::Backlogged): the message was not sent because the
    /// network is behind; [`RemoteAddr::send_wait`](super::RemoteAddr::send_wait) would wait.
    ///
    /// # Examples
    ///
    /// ```
    /// let error = procsched::cluster::RemoteError::Backlogged { limit: 1 << 20 };
    /// assert!(error.is_backlogged());
    /// ```
    pub fn is_backlogged(&self) -> bool {
        matches!(self, RemoteError::Backlogged { .. })
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
            Refusal::Backlogged { limit } => RemoteError::Backlogged {
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
            },
        }
    }

    /// A local ask's error, as a remote ask's (`timeout`: the ask's, for `TimedOut`).
    pub(crate) fn from_ask(error: AskError, timeout: Duration) -> RemoteError {
        match error {
            AskError::Undelivered(kind) => RemoteError::from_kind(kind),
            AskError::TimedOut => RemoteError::TimedOut(timeout),
            cancelled @ AskError::Cancelled(_) => RemoteError::Cancelled(cancelled),
            AskError::AskedItself => RemoteError::AskedItself,
            AskError::OutsideProcess => RemoteError::OutsideProcess,
            AskError::NoReply => RemoteError::NoReply,
        }
    }

    pub(crate) fn from_kind(kind: SendErrorKind) -> RemoteError {
        match kind {
            SendErrorKind::NotFound => RemoteError::NotFound,
            SendErrorKind::Closed => RemoteError::Closed,
            // A body's `send_wait` (or an ask waiting for room) ended by the body's cancel: as
            // locally, a cancellation (`?` ends the body cancelled), never `MailboxFull`.
            SendErrorKind::Cancelled(reason) => RemoteError::Cancelled(AskError::Cancelled(reason)),
            _ => RemoteError::MailboxFull,
        }
    }
}

/// A failed [`RemoteAddr::send`](super::RemoteAddr::send): why, and the message back when it never left this node.
pub struct RemoteSendError<M> {
    error: RemoteError,
    /// In a mutex (never contended: only `into_message` opens it) because a message is `Send`
    /// but not necessarily `Sync`, and the error must be `Sync` to convert into a
    /// [`BoxError`](crate::BoxError) with `?` — as `SendError`'s.
    message: std::sync::Mutex<Option<M>>,
}

impl<M> RemoteSendError<M> {
    /// A send refused for `error`, its message handed back if it never left this node.
    pub(super) fn new(error: RemoteError, message: Option<M>) -> RemoteSendError<M> {
        RemoteSendError {
            error,
            message: std::sync::Mutex::new(message),
        }
    }

    /// Why the send failed.
    ///
    /// # Examples
    ///
    /// See [`RemoteAddr::send`](super::RemoteAddr::send).
    pub fn error(&self) -> &RemoteError {
        &self.error
    }

    /// The message, if it never left this node.
    ///
    /// # Examples
    ///
    /// See [`RemoteAddr::send`](super::RemoteAddr::send).
    pub fn into_message(self) -> Option<M> {
        // Poisoned only by a panic while it was open, which `into_message` cannot cause.
        self.message
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<M> fmt::Debug for RemoteSendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteSendError")
            .field("error", &self.error)
            .field(
                "message_back",
                &self
                    .message
                    .lock()
                    .map_or(true, |message| message.is_some()),
            )
            .finish()
    }
}

impl<M> fmt::Display for RemoteSendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "send failed: {}", self.error)
    }
}

impl<M> std::error::Error for RemoteSendError<M> {}

/// Why a node could not start.
///
/// # Examples
///
/// ```no_run
/// use procsched::cluster::{Cluster, ClusterError, Node};
/// use procsched::prelude::*;
///
/// # async fn demo(sched: Scheduler) {
/// let cluster = Cluster::nats("nats://127.0.0.1:4222").name("orders-1");
/// match Node::start(sched.handle(), cluster).await {
///     Ok(node) => drop(node),
///     // Another live node holds the name: pick another, or wait for it to be declared down.
///     Err(ClusterError::NameTaken(name)) => eprintln!("`{name}` is in use"),
///     Err(ClusterError::Connect(why)) => eprintln!("no NATS server: {why}"),
///     Err(other) => eprintln!("{other}"),
/// }
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The [`Cluster`](super::Cluster) configuration is invalid.
    #[error("invalid cluster configuration: {0}")]
    Config(String),
    /// The NATS connection could not be made (refused at once; an address that does not
    /// answer, after async-nats's connection timeout).
    #[error("could not connect to NATS: {0}")]
    Connect(String),
    /// The node's subjects could not be subscribed.
    #[error("could not subscribe: {0}")]
    Subscribe(String),
    /// The membership bucket could not be opened, or the node's name not claimed in it.
    #[error("membership: {0}")]
    Membership(String),
    /// Another live node holds this node's name: its entry changed (a heartbeat) while this
    /// node waited, usually within a heartbeat or two. A node restarted under its old name
    /// waits for the dead one's entry — which does not change — to expire (three heartbeats
    /// after its last, and NATS may expire it a few heartbeats late), up to
    /// [`Cluster::join_timeout`](super::Cluster::join_timeout); an entry unchanged past that
    /// is held all the same.
    #[error("the node name `{0}` is taken by a live node")]
    NameTaken(String),
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_refused_send_of_a_message_that_is_not_sync_converts_into_a_box_error() {
        // `Cell` is `Send`, not `Sync`: the error is `Sync` all the same, so `?` takes it.
        fn is_sync<T: Sync>() {}
        is_sync::<RemoteSendError<Cell<u8>>>();
        let refused = RemoteSendError::new(RemoteError::NotFound, Some(Cell::new(7u8)));
        assert!(format!("{refused:?}").contains("message_back: true"));
        let boxed: crate::BoxError = Box::new(refused);
        assert_eq!(
            boxed.to_string(),
            "send failed: no live process with this PID"
        );
    }

    #[test]
    fn into_message_hands_the_message_back() {
        let refused = RemoteSendError::new(RemoteError::NoConnection, Some(Cell::new(7u8)));
        assert_eq!(refused.into_message().map(Cell::into_inner), Some(7));
        let gone = RemoteSendError::<u8>::new(RemoteError::NoConnection, None);
        assert_eq!(gone.into_message(), None);
    }
}
