//! A node that lost its name: while it was cut off from NATS for longer than its membership
//! entry lives, another node claimed the name (a restart elsewhere, a second copy started by a
//! deployment). The name now belongs to the other node's incarnation; every peer knows it and
//! rejects this one's frames as a stale identity, so this node would wait on them for ever.
//!
//! It finds out in two ways: its heartbeat's claim of the name again fails because the name is
//! held by another incarnation (`membership::heartbeat`), or its watch of the bucket reads its
//! own name's entry at another incarnation (`membership::watch`). Either way it is *evicted*:
//! every peer is declared down here at once (the node-down path of `peers.rs`: monitors resolve
//! `Down(NoConnection)`, links fire `NoConnection`, what waits fails `NoConnection`), it stops
//! heartbeating and unsubscribes (the subjects are the other node's now), and it takes no peer
//! again: every later remote operation fails `NoConnection` at once (also on a PID of the new
//! holder, which names this node's name at another incarnation). Its local processes run on.
//! A node that wants back in starts again under a name of its own (a new [`Node::start`]).

use super::node::{NodeShared, Pending};
use super::{Node, RemoteError};
use crate::loom::lock;
use crate::process::exit::ExitReason;
use std::sync::atomic::Ordering::SeqCst;

impl NodeShared {
    /// This node's name is held by another incarnation (`holder`, if known): declares every
    /// peer down, fails whatever still waits, and wakes the inbound task to unsubscribe. Once.
    pub(crate) fn evict(&self, holder: Option<u64>, why: &str) {
        // Set before the peers are declared down: `add_peer` reads it under the peers lock, so
        // no peer is added after `all_down` read their names.
        if self.evicted.swap(true, SeqCst) {
            return;
        }
        tracing::warn!(
            node = %self.me.name,
            incarnation = self.me.incarnation,
            holder,
            why,
            "this node lost its name to another incarnation: every peer is declared down, \
             remote operations fail `NoConnection` from now on"
        );
        self.all_down("this node lost its name to another incarnation");
        // What was registered on a peer no longer known (a race with its removal) fails too:
        // nothing will ever answer this node again.
        let pending: Vec<Pending> = lock(&self.pending)
            .drain()
            .map(|(_, (_, pending))| pending)
            .collect();
        for pending in pending {
            super::peers::fail_no_connection(pending);
        }
        for (_, monitor) in lock(&self.served).drain() {
            monitor.abort();
        }
        self.on_evicted.notify_one();
    }

    /// `true` once this node lost its name ([`evict`](Self::evict)).
    pub(crate) fn is_evicted(&self) -> bool {
        self.evicted.load(SeqCst)
    }

    /// `true` once this node is out of the cluster: it lost its name, or it left
    /// ([`Node::leave`]) while a clone of it is still in use. Either way it knows no node:
    /// an operation that needs one (a placement by load or by name, a `whereis` elsewhere)
    /// fails `NoConnection` at once, as sends and asks to other nodes do.
    pub(crate) fn is_detached(&self) -> bool {
        self.is_evicted() || self.stopped.load(std::sync::atomic::Ordering::Acquire)
    }

    /// What an operation on a PID of incarnation `incarnation` of this node's name (not this
    /// one's) fails with: `NoProc` for an earlier life's; `NoConnection` for a later one's — a
    /// node that took the name after this one lost it, whose processes this node cannot reach,
    /// whether or not it has read its eviction yet ([`NodeShared::other_life`]).
    pub(crate) fn other_life_error(&self, incarnation: u64) -> RemoteError {
        match NodeShared::other_life(self.me.incarnation, incarnation) {
            super::wire::Refusal::NoProc => RemoteError::NoProc,
            _ => RemoteError::NoConnection,
        }
    }

    /// [`other_life_error`](Self::other_life_error) as a link's or monitor's exit reason.
    pub(crate) fn other_life_reason(&self, incarnation: u64) -> ExitReason {
        NodeShared::other_life_exit(self.me.incarnation, incarnation)
    }
}

impl Node {
    /// `true` once this node has lost its name: it was cut off from NATS for longer than its
    /// membership entry lives (three heartbeats), and another node claimed the name meanwhile
    /// (as [`ClusterError::NameTaken`](super::ClusterError::NameTaken) refuses a second live
    /// node at start). It learns so at its first heartbeat once its connection is back, or when
    /// its watch of the membership reads the other's entry, whichever comes first; it then
    /// declares every peer down (its monitors of their processes resolve `Down(NoConnection)`,
    /// its links to them fire `NoConnection`, its asks, acked sends and spawns fail
    /// `NoConnection`), stops heartbeating, and every later remote operation fails
    /// `NoConnection` at once — on a PID of the name's new holder too (a node's other
    /// incarnations are otherwise its previous lives: `NoProc`). Its local processes keep running; to rejoin, start a node
    /// again under a free name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(node: procsched::cluster::Node) {
    /// if node.is_evicted() {
    ///     eprintln!("{} is another node's name now: this one is on its own", node.name());
    /// }
    /// # }
    /// ```
    pub fn is_evicted(&self) -> bool {
        self.shared.is_evicted()
    }
}
