//! Registered names across nodes ([`Node::whereis`], [`Node::named`]): the way to reach a
//! service another node started itself, whose PID nobody handed over.
//!
//! Names stay per node, as in OTP (`{Name, Node} ! Msg`, `rpc:call(Node, erlang, whereis,
//! [Name])`): a process registers on its own scheduler (`cx.register`,
//! `SchedulerHandle::register`), and another node asks that node which process holds the
//! name, one control request and its answer over the lane both already use. There is no
//! cluster-wide registry to keep consistent through partitions (OTP's `global`): a node that
//! wants a name to be unique across the cluster places its holder on one node.
//!
//! A name is visible once registered: a body's own `cx.register` runs when the body first runs,
//! after `spawn_fn` returned; a name other nodes must find at once is registered by the spawner
//! (`SchedulerHandle::register(name, pid)`).
//!
//! A lookup answers for that moment. A supervisor restarting a named child registers the new
//! PID under the same name, and the old PID then fails `NotFound`: look the name up again.

use super::node::{PeerId, Pending};
use super::wire::Item;
use super::{remote, Node, NodePid, RemoteAddr, RemoteError};
use crate::process::Pid;
use serde::Serialize;
use tokio::sync::oneshot;

impl Node {
    /// The PID of the process registered as `name` on node `node` (this one or another),
    /// `None` if no live process there holds the name.
    ///
    /// # Errors
    ///
    /// `NoNode` if no live node is called `node`; `NoConnection` if it dies (or is declared
    /// down) before it answers, or at once once this node has lost its name
    /// ([`Node::is_evicted`]: for a lookup on this node too, as its name is another node's) or
    /// left ([`Node::leave`], for a clone still in use: it still answers for its own
    /// processes, which run on); `TooLarge` if the request, `name` and all, would not fit in a
    /// frame ([`Cluster::max_frame`](super::Cluster::max_frame)); `TimedOut` after
    /// [`Cluster::request_timeout`](super::Cluster::request_timeout).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use procsched::cluster::{Node, RemoteError};
    /// use procsched::prelude::*;
    ///
    /// # async fn demo(node: Node) -> Result<(), BoxError> {
    /// // Node `stock-1` runs a process it registered as "inventory" (`cx.register`).
    /// match node.whereis("stock-1", "inventory").await? {
    ///     Some(pid) => node.addr::<u64>(pid).send(3)?,
    ///     None => eprintln!("stock-1 runs no inventory process now"),
    /// }
    /// // A node that is not (or no longer) in the cluster.
    /// assert!(matches!(node.whereis("gone-1", "inventory").await, Err(RemoteError::NoNode(_))));
    /// # Ok(()) }
    /// ```
    pub async fn whereis(&self, node: &str, name: &str) -> Result<Option<NodePid>, RemoteError> {
        let shared = &self.shared;
        // A node that lost its name knows no node (`eviction.rs`), its own included: that name
        // is another node's now. One that left answers for its own processes, which run on.
        if shared.is_evicted() {
            return Err(RemoteError::NoConnection);
        }
        if node == &*shared.me.name {
            return Ok(shared.sched.whereis(name).map(|pid| shared.node_pid(pid)));
        }
        let peer = match shared.incarnation_of(node) {
            Some(incarnation) => PeerId {
                name: node.into(),
                incarnation,
            },
            // A node that left knows no other node.
            None if shared.is_detached() => return Err(RemoteError::NoConnection),
            None => return Err(RemoteError::NoNode(format!("no live node `{node}`"))),
        };
        let id = shared.next_id();
        let (tx, located) = oneshot::channel();
        shared.expect(id, peer.clone(), Pending::Whereis(tx));
        let item = Item::Whereis {
            id,
            name: name.into(),
        };
        if let Err(refusal) = shared.send_item(&peer, item) {
            shared.forget_pending(id);
            return Err(RemoteError::from_refusal(refusal));
        }
        let raw = remote::wait_for(shared, id, located, shared.request_timeout).await?;
        match raw.map(Pid::from_raw) {
            None => Ok(None),
            Some(Some(pid)) => Ok(Some(NodePid::new(peer.name, peer.incarnation, pid))),
            Some(None) => Err(RemoteError::Decode(format!(
                "node `{node}` answered PID 0 for `{name}`"
            ))),
        }
    }

    /// The typed address of the process registered as `name` on node `node`, resolved now
    /// ([`whereis`](Self::whereis), then [`addr`](Self::addr)).
    ///
    /// Names are not typed: `M` is what the caller says the process receives, and it must be
    /// registered under the same name on both nodes
    /// ([`Cluster::message`](super::Cluster::message)). A message of another type than the
    /// named process declared is refused, [`RemoteError::WrongType`] (see
    /// [`RemoteAddr`]).
    ///
    /// # Errors
    ///
    /// As [`whereis`](Self::whereis).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use procsched::cluster::Node;
    /// use procsched::prelude::*;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// enum Stock { Reserve(u64), Count(Reply<u64>) }
    ///
    /// # async fn demo(node: Node) -> Result<(), BoxError> {
    /// let inventory = node
    ///     .named::<Stock>("stock-1", "inventory")
    ///     .await?
    ///     .ok_or("stock-1 runs no inventory process")?;
    /// inventory.send(Stock::Reserve(2))?;
    /// let left = inventory.ask(Stock::Count).await?;
    /// # let _ = left; Ok(()) }
    /// ```
    pub async fn named<M: Serialize + Send + 'static>(
        &self,
        node: &str,
        name: &str,
    ) -> Result<Option<RemoteAddr<M>>, RemoteError> {
        Ok(self.whereis(node, name).await?.map(|pid| self.addr(pid)))
    }
}
