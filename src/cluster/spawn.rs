//! Spawning on any node by registered name ([`Node::spawn_on`]) where a [`Placement`] says, and
//! awaiting what was spawned there ([`RemoteHandle`]).

use super::decoding::DecodeScope;
use super::node::{NodeShared, PeerId, Pending};
use super::registry::JoinFuture;
use super::wire::{self, Item, WireReason};
use super::{Node, NodePid, RemoteError};
use crate::process::{InitError, Pid};
use crate::scheduler::SpawnError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::oneshot;

/// Where [`Node::spawn_on`] starts a process.
///
/// # Examples
///
/// ```no_run
/// use procsched::cluster::{Node, Placement};
///
/// # async fn demo(node: Node) -> Result<(), procsched::BoxError> {
/// // Sessions go to the least loaded of the nodes that serve this region.
/// let region = Placement::AnyOf(vec!["eu-1".into(), "eu-2".into()]);
/// let session = node.spawn_on(region, "session", "alice".to_string()).await?;
/// // Its audit trail stays next to this node's own processes.
/// let audit = node.spawn_on(Placement::Local, "audit", session.clone()).await?;
/// assert_eq!(audit.node(), node.name());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// On this node.
    Local,
    /// On the node of this name, once its membership entry has been read (`NoNode` before: a
    /// name known only from frames may be any client's forgery).
    Node(String),
    /// On the node with the least load (live processes and runnable queue, from the
    /// heartbeats, plus the processes this node placed on each since: a burst spreads),
    /// this one included; a tie goes to this node. A node whose scheduler is shutting down
    /// (its heartbeat says so; this one, as soon as its shutdown starts) is passed over: it
    /// would refuse the spawn (`ShuttingDown`). A node silent for two heartbeats (paused,
    /// overloaded, dying, but not yet declared down) is chosen only if no other is live, and
    /// never over this one. A node out of the cluster (it lost its name, or left) knows no
    /// load: `NoConnection`.
    LeastLoaded,
    /// On the least loaded of the live nodes named (this one may be among them), loads
    /// counted as for `LeastLoaded`: what this node placed since the last heartbeats counts,
    /// and a node shutting down is passed over (this one too, for another named one), and a
    /// node silent for two heartbeats is chosen only if no other named one is live.
    ///
    /// Load is a count, not room: a node at its `max_processes` may be picked, and its refusal
    /// (`RemoteError::Spawn(SpawnError::Limit)`) comes back as it is — the spawn is not tried
    /// on another node (retry with a `Placement::Node` of your choosing).
    AnyOf(Vec<String>),
}

/// How a spawn's outcome will be known, when it was asked for.
enum Joining {
    Local(JoinFuture),
    Remote {
        node: Arc<NodeShared>,
        id: u64,
        outcome: oneshot::Receiver<Result<Vec<u8>, WireReason>>,
    },
}

impl Node {
    /// Spawns the body registered as `name` ([`Cluster::spawnable`](super::Cluster::spawnable),
    /// or a state machine's [`Cluster::spawnable_process`](super::Cluster::spawnable_process))
    /// with `args`, where `placement` says, and returns its PID.
    ///
    /// # Errors
    ///
    /// [`RemoteError::Spawn`] with the same [`SpawnError`] a local
    /// spawn gives (an unregistered name is `Init(UnknownMethod)`; an argument the registered
    /// body's type does not decode from is `Init(Failed)`, as an `init` rejecting its input),
    /// `NoNode` for an unknown node, `NoConnection` / `TimedOut` if the node does not answer
    /// (`NoConnection` at once once this node has lost its name, [`Node::is_evicted`], or left,
    /// [`Node::leave`], for a clone still in use: a node out of the cluster places locally
    /// only by [`Placement::Local`] or its own name).
    ///
    /// A spawn given up on — `TimedOut`, or this future dropped before it resolved — may still
    /// have started the process on the far node: when that node's answer arrives, this node
    /// terminates it (counted in [`NodeStats::orphans_stopped`](super::NodeStats::orphans_stopped)), so a
    /// retry does not leave a first instance running that nobody can address. An answer lost
    /// on the way (NATS delivers at most once) leaves that instance running.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use procsched::cluster::{Node, Placement, RemoteError};
    /// use procsched::prelude::*;
    ///
    /// # async fn demo(node: Node) -> Result<(), BoxError> {
    /// // On a named node; `checkout` must be registered there with `Cluster::spawnable`.
    /// let pid = node.spawn_on(Placement::Node("orders-2".into()), "checkout", 42u64).await?;
    /// node.addr::<u64>(pid).send(7)?;
    ///
    /// // The refusals a local spawn gives come back typed.
    /// match node.spawn_on(Placement::LeastLoaded, "no-such-body", ()).await {
    ///     Err(RemoteError::Spawn(SpawnError::Init(_))) => {} // not registered there
    ///     Err(RemoteError::NoConnection | RemoteError::TimedOut(_)) => {} // the node is gone
    ///     Err(other) => return Err(other.into()),
    ///     Ok(_) => unreachable!("nobody registered it"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn spawn_on<A: Serialize>(
        &self,
        placement: Placement,
        name: &str,
        args: A,
    ) -> Result<NodePid, RemoteError> {
        let args = encode_args(&args)?;
        self.spawn_encoded(placement, name, args).await
    }

    /// [`spawn_on`](Self::spawn_on), returning a handle that resolves to the process's output
    /// (decoded as `T`, the registered body's output type) or to why it ended without one
    /// ([`RemoteError::Ended`] with its exit reason; `NoConnection` if its node dies first).
    ///
    /// # Errors
    ///
    /// As [`spawn_on`](Self::spawn_on).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use procsched::cluster::{Node, Placement};
    /// # async fn demo(node: Node) -> Result<(), procsched::BoxError> {
    /// let handle = node.spawn_on_with_handle::<u64, _>(Placement::LeastLoaded, "checkout", 42u64).await?;
    /// println!("{} runs it", handle.pid());
    /// let total: u64 = handle.await?;
    /// # Ok(()) }
    /// ```
    pub async fn spawn_on_with_handle<T: DeserializeOwned, A: Serialize>(
        &self,
        placement: Placement,
        name: &str,
        args: A,
    ) -> Result<RemoteHandle<T>, RemoteError> {
        let args = encode_args(&args)?;
        let (pid, joining) = self.spawn_joining(placement, name, args, true).await?;
        let joining = joining.ok_or_else(|| RemoteError::Decode("no outcome to join".into()))?;
        Ok(RemoteHandle {
            node: self.shared.clone(),
            pid,
            joining: Some(joining),
            _output: PhantomData,
        })
    }

    /// [`spawn_on`](Self::spawn_on) with the argument encoded already.
    pub(crate) async fn spawn_encoded(
        &self,
        placement: Placement,
        name: &str,
        args: Vec<u8>,
    ) -> Result<NodePid, RemoteError> {
        Ok(self.spawn_joining(placement, name, args, false).await?.0)
    }

    async fn spawn_joining(
        &self,
        placement: Placement,
        name: &str,
        args: Vec<u8>,
        join: bool,
    ) -> Result<(NodePid, Option<Joining>), RemoteError> {
        let node = &self.shared;
        let target = place(node, placement)?;
        node.count_placed(target.as_ref());
        let Some(peer) = target else {
            let (pid, outcome) = node
                .registry
                .spawn(&node.sched, name, &args, DecodeScope::node(node))
                .map_err(spawn_refused)?;
            return Ok((node.node_pid(pid), join.then(|| Joining::Local(outcome))));
        };
        let id = node.next_id();
        let (tx, spawned) = oneshot::channel();
        node.expect(id, peer.clone(), Pending::Spawn(tx));
        let joining = join.then(|| {
            let join_id = node.next_id();
            let (tx, outcome) = oneshot::channel();
            node.expect(join_id, peer.clone(), Pending::Join(tx));
            (join_id, outcome)
        });
        let item = Item::Spawn {
            id,
            name: name.to_owned(),
            args,
            join: joining.as_ref().map(|(join_id, _)| *join_id),
        };
        let mut spawning = Spawning {
            node,
            peer: &peer,
            id,
            join_id: joining.as_ref().map(|(join_id, _)| *join_id),
            answer: spawned,
            settled: false,
        };
        if let Err(refusal) = node.send_item(&peer, item) {
            return Err(RemoteError::from_refusal(refusal));
        }
        let raw = match spawning.wait(node.request_timeout).await {
            Ok(raw) => raw,
            Err(RemoteError::Unregistered(name)) => {
                return Err(spawn_refused(wire::Refusal::Unregistered(name)))
            }
            Err(other) => return Err(other),
        };
        drop(spawning);
        let pid = Pid::from_raw(raw)
            .ok_or_else(|| RemoteError::Decode("a spawn answered PID 0".to_owned()))?;
        let joining = joining.map(|(id, outcome)| Joining::Remote {
            node: node.clone(),
            id,
            outcome,
        });
        Ok((NodePid::new(peer.name, peer.incarnation, pid), joining))
    }
}

/// A spawn sent to another node, until its answer is taken. Given up on before that — timed
/// out, or the `spawn_on` future dropped — it forgets the wait and closes its answer's
/// channel, and an answer that had already come names a process nobody will hold: it is
/// terminated (`inbound.rs`, `stop_orphan`, which also handles an answer that comes later).
/// Whichever side sees the answer stops the orphan, once: the answer either reaches this
/// channel before it is closed (read here) or finds it closed or its wait forgotten (there).
struct Spawning<'a> {
    node: &'a NodeShared,
    peer: &'a PeerId,
    id: u64,
    /// The wait for the spawned process's outcome (`spawn_on_with_handle`), forgotten with it.
    join_id: Option<u64>,
    answer: oneshot::Receiver<Result<u64, wire::Refusal>>,
    /// The answer was taken (or the node dropped the wait): nothing to undo.
    settled: bool,
}

impl Spawning<'_> {
    /// The spawned process's raw PID, or why not.
    async fn wait(&mut self, timeout: std::time::Duration) -> Result<u64, RemoteError> {
        // Awaited anywhere (`runtime.rs`): the timer is made, in the first poll, in the node's
        // runtime.
        let answer = &mut self.answer;
        let answered = async { tokio::time::timeout(timeout, answer).await };
        let answered = super::runtime::in_runtime(&self.node.runtime, answered).await;
        match answered {
            Ok(Ok(result)) => {
                self.settled = true;
                result.map_err(RemoteError::from_refusal)
            }
            // The node stopped and dropped what it waited for.
            Ok(Err(_)) => {
                self.settled = true;
                Err(RemoteError::NoConnection)
            }
            // Not settled: the drop below undoes the spawn.
            Err(_) => Err(RemoteError::TimedOut(timeout)),
        }
    }
}

impl Drop for Spawning<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        self.node.forget_pending(self.id);
        if let Some(join_id) = self.join_id {
            self.node.forget_pending(join_id);
        }
        // After `close`, a send fails (the inbound side then stops the orphan); one made
        // before it is read here.
        self.answer.close();
        if let Ok(Ok(orphan)) = self.answer.try_recv() {
            super::inbound::stop_orphan(self.node, self.peer, orphan);
        }
    }
}

/// The node `placement` picks: `None` for this one.
fn place(node: &NodeShared, placement: Placement) -> Result<Option<PeerId>, RemoteError> {
    Ok(match placement {
        Placement::Local => None,
        Placement::Node(target) if *target == *node.me.name => None,
        Placement::Node(target) => match node.member_incarnation(&target) {
            Some(incarnation) => Some(PeerId {
                name: target.as_str().into(),
                incarnation,
            }),
            // A node that lost its name, or left, knows no node (`eviction.rs`).
            None if node.is_detached() => return Err(RemoteError::NoConnection),
            None => {
                return Err(RemoteError::NoNode(format!(
                    "no live node `{target}` (a node is a target once its membership entry is read)"
                )))
            }
        },
        // Out of the cluster, a node knows no load but its own, and a PID it would hand out
        // names a life its peers declared down.
        Placement::LeastLoaded if node.is_detached() => return Err(RemoteError::NoConnection),
        Placement::LeastLoaded => node.least_loaded(node.cached_load()),
        Placement::AnyOf(names) => {
            let mine = names
                .iter()
                .any(|name| **name == *node.me.name)
                .then(|| node.cached_load());
            node.least_loaded_of(&names, mine)
                .map_err(|()| match node.is_detached() {
                    true => RemoteError::NoConnection,
                    false => RemoteError::NoNode(format!("no live node among {names:?}")),
                })?
        }
    })
}

/// A spawn's refusal as a local spawn would say it: an unregistered name is
/// `Init(UnknownMethod)`, an argument the body cannot take `Init(Failed)` (its input rejected).
fn spawn_refused(refusal: wire::Refusal) -> RemoteError {
    match refusal {
        wire::Refusal::Unregistered(name) => {
            RemoteError::Spawn(SpawnError::Init(InitError::UnknownMethod(name)))
        }
        wire::Refusal::Decode(why) => RemoteError::from_refusal(wire::Refusal::SpawnInit(why)),
        other => RemoteError::from_refusal(other),
    }
}

fn encode_args<A: Serialize>(args: &A) -> Result<Vec<u8>, RemoteError> {
    rmp_serde::to_vec_named(args).map_err(|error| RemoteError::Encode(error.to_string()))
}

/// A process spawned on any node, awaited for its output ([`Node::spawn_on_with_handle`]).
/// Dropping it does not stop the process.
///
/// # Examples
///
/// ```no_run
/// use procsched::cluster::{Node, Placement, RemoteError};
/// use procsched::prelude::*;
///
/// # async fn demo(node: Node) -> Result<(), BoxError> {
/// let handle = node
///     .spawn_on_with_handle::<u64, _>(Placement::LeastLoaded, "checkout", 42u64)
///     .await?;
/// let pid = handle.pid().clone(); // to message or monitor it meanwhile
/// match handle.await {
///     Ok(total) => assert!(total >= 42),
///     // It failed, panicked or was killed: the reason, as a local handle would give it.
///     Err(RemoteError::Ended(reason)) => eprintln!("{pid} ended: {reason}"),
///     // Its node died or left before it finished.
///     Err(RemoteError::NoConnection) => eprintln!("{pid}'s node is gone"),
///     Err(other) => return Err(other.into()),
/// }
/// # Ok(()) }
/// ```
#[must_use = "a handle reports the process's outcome only when awaited"]
pub struct RemoteHandle<T> {
    /// The node whose caller awaits: the output decodes there (addresses inside it).
    node: Arc<NodeShared>,
    pid: NodePid,
    joining: Option<Joining>,
    _output: PhantomData<fn() -> T>,
}

impl<T> RemoteHandle<T> {
    /// The process's PID.
    ///
    /// # Examples
    ///
    /// See [`Node::spawn_on_with_handle`].
    pub fn pid(&self) -> &NodePid {
        &self.pid
    }
}

impl<T> fmt::Debug for RemoteHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RemoteHandle").field(&self.pid).finish()
    }
}

impl<T: DeserializeOwned> Future for RemoteHandle<T> {
    type Output = Result<T, RemoteError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let outcome = match self.joining.as_mut() {
            Some(Joining::Local(outcome)) => match outcome.as_mut().poll(cx) {
                Poll::Ready(outcome) => outcome,
                Poll::Pending => return Poll::Pending,
            },
            Some(Joining::Remote { outcome, .. }) => match Pin::new(outcome).poll(cx) {
                Poll::Ready(Ok(outcome)) => outcome,
                Poll::Ready(Err(_)) => Err(WireReason::NoConnection),
                Poll::Pending => return Poll::Pending,
            },
            None => Err(WireReason::NoConnection),
        };
        self.joining = None;
        Poll::Ready(match outcome {
            Ok(bytes) => DecodeScope::node(&self.node)
                .decode_msgpack(&bytes)
                .map_err(|error| {
                    self.node
                        .undecodable_answer("a remote process's output", error)
                }),
            Err(WireReason::NoConnection) => Err(RemoteError::NoConnection),
            Err(reason) => Err(RemoteError::Ended(reason.into_reason())),
        })
    }
}

impl<T> Drop for RemoteHandle<T> {
    fn drop(&mut self) {
        if let Some(Joining::Remote { node, id, .. }) = &self.joining {
            node.forget_pending(*id);
        }
    }
}
