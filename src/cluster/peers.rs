//! A node's peers come and go: added from a heartbeat or a first frame, refreshed by each
//! heartbeat, taken back after the other side declared this node down (`severance.rs`), and
//! declared down — which fails everything that waits on them (`node.rs`, "A peer's death").

use super::node::{Load, NodeShared, Peer, PeerId, Pending};
use super::outbound;
use super::wire::{self, Refusal, WireReason};
use crate::loom::lock;
use crate::process::foreign_wake;
use futures::FutureExt;
use std::sync::Arc;
use std::time::Instant;

impl NodeShared {
    /// Adds or refreshes peer `id` with `load`, read from its membership entry, where it says
    /// it declared this node down `severed_us` times (`severance.rs`). A new incarnation of a
    /// known name replaces the old one, which is declared down first.
    pub(crate) fn peer_seen(self: &Arc<Self>, id: PeerId, load: Load, severed_us: u64) {
        self.add_peer(id, Some(load), severed_us);
    }

    /// How many of `id`'s declarations of this node down this node has acted on (0 for a node
    /// that is no peer at that incarnation).
    pub(crate) fn acted_on(&self, id: &PeerId) -> u64 {
        self.with_peer(id, |peer| peer.severed_us).unwrap_or(0)
    }

    /// Adds peer `id`, first heard from in a frame that says it declared this node down
    /// `severed_us` times, if it is not known: admitted for what it sends (its heartbeat may
    /// trail its first frame), left out of placement until its membership entry is read, and
    /// swept like any peer if none follows. `false` if it is not a peer: it left
    /// (`departed.rs`), or this node lost its name.
    pub(crate) fn peer_heard(self: &Arc<Self>, id: PeerId, severed_us: u64) -> bool {
        self.add_peer(id, None, severed_us)
    }

    /// [`peer_seen`](Self::peer_seen) (`load` given) or [`peer_heard`](Self::peer_heard). A
    /// known peer that says it declared this node down more often than this node has acted on
    /// is declared down here too, and taken back ([`resync`](Self::resync)). An incarnation
    /// that left is not taken again (`departed.rs`). `true` if `id` is a peer now.
    fn add_peer(self: &Arc<Self>, id: PeerId, load: Option<Load>, severed_us: u64) -> bool {
        if id.name == self.me.name {
            return false;
        }
        let now = Instant::now();
        let old_incarnation = {
            let mut peers = self.peers.write().expect("peers lock");
            // A node that lost its name takes no peer again (`eviction.rs`).
            if self.is_evicted() {
                return false;
            }
            match peers.get_mut(&id.name) {
                Some(peer) if peer.id.incarnation == id.incarnation => {
                    if severed_us > peer.severed_us {
                        None
                    } else {
                        if let Some(load) = load {
                            peer.load = load;
                            peer.last_seen = now;
                            peer.member = true;
                            self.heartbeat_count(peer, severed_us);
                        }
                        return true;
                    }
                }
                Some(peer) => Some(peer.id.incarnation),
                // Its late frames (`departed.rs`). Not its entry put again in the membership
                // bucket, which only a live node writes (a leaving node stops its heartbeat
                // before it deletes its entry): the node re-claimed its name after an outside
                // delete, and is taken back, forgotten as departed.
                None if load.is_none() && self.departed.contains(&id) => {
                    tracing::debug!(
                        node = %id.name,
                        incarnation = id.incarnation,
                        "heard from a node that left: not taken back"
                    );
                    return false;
                }
                None => {
                    if load.is_some() {
                        self.departed.forget(&id);
                    }
                    let severed_it = self.severances.count(&id);
                    let to = wire::Session {
                        incarnation: id.incarnation,
                        severed: severed_it,
                        seen: severed_us,
                    };
                    let out = outbound::start(self, &id, to);
                    tracing::info!(
                        node = %id.name,
                        incarnation = id.incarnation,
                        member = load.is_some(),
                        "node joined"
                    );
                    peers.insert(
                        id.name.clone(),
                        Peer {
                            load: load.unwrap_or(Load {
                                incarnation: id.incarnation,
                                ..Load::default()
                            }),
                            id,
                            last_seen: now,
                            since: now,
                            member: load.is_some(),
                            severed_us,
                            severed_it,
                            lower_reports: 0,
                            out,
                        },
                    );
                    return true;
                }
            }
        };
        match old_incarnation {
            // Another incarnation of a known node: the old one is dead.
            Some(old) => {
                self.peer_down(&id.name, Some(old), "restarted with a new incarnation");
                self.add_peer(id, load, severed_us)
            }
            None => self.resync(id, load, severed_us),
        }
    }

    /// Peer `peer`'s heartbeat says it declared this node down `severed_us` times, no more than
    /// this node acted on. Counts never go down: a heartbeat below what a frame said, twice in
    /// a row, means that frame was not the node's (any client can write a frame in a live
    /// node's name) — or that the node forgot its count (`severance.rs`) — and the node's own
    /// count is taken, or every frame of the node would be dropped as stale for ever. Twice:
    /// one heartbeat written before the node's declaration may be read after the frame that
    /// told of it.
    fn heartbeat_count(&self, peer: &mut Peer, severed_us: u64) {
        if severed_us >= peer.severed_us {
            peer.lower_reports = 0;
            return;
        }
        peer.lower_reports += 1;
        if peer.lower_reports >= 2 {
            self.stats.rejected_item();
            if let Some(suppressed) = self.warn_budget.take() {
                tracing::warn!(
                    suppressed,
                    node = %peer.id.name,
                    acted = peer.severed_us,
                    heartbeat = severed_us,
                    "a frame told of a declaration its node's heartbeats never made (a forged \
                     frame, or heartbeats read late behind a slow link): the heartbeats' count \
                     is taken"
                );
            }
            peer.severed_us = severed_us;
            peer.lower_reports = 0;
        }
    }

    /// Peer `id` says it declared this node down `severed_us` times, more than this node has
    /// acted on: this node declares it down too — its links fire, its monitors resolve, what
    /// waits on it fails, all `NoConnection` — without counting it (`severance.rs`: two nodes
    /// never echo), then takes it back as a fresh peer, as OTP's nodes reconnect after a
    /// `nodedown`. `load`: the peer's membership entry, if this news came with it (else the
    /// peer keeps what was known of it).
    fn resync(self: &Arc<Self>, id: PeerId, load: Option<Load>, severed_us: u64) -> bool {
        let removed = {
            let mut peers = self.peers.write().expect("peers lock");
            match peers.get(&id.name) {
                Some(peer)
                    if peer.id.incarnation == id.incarnation && peer.severed_us < severed_us =>
                {
                    peers.remove(&id.name)
                }
                _ => None,
            }
        };
        let load = match removed {
            Some(peer) => {
                let known = peer.member.then_some(peer.load);
                self.peer_gone(peer, "it declared this node down: the session is over");
                load.or(known)
            }
            // Another path acted first.
            None => load,
        };
        self.add_peer(id, load, severed_us)
    }

    /// Declares node `name` down (at `incarnation`, or whichever is known) because it is gone:
    /// it left, restarted, or this node stops. Removes it and fails everything that waits on
    /// it; that incarnation is never taken back (`departed.rs`).
    pub(crate) fn peer_down(&self, name: &str, incarnation: Option<u64>, why: &str) {
        // Only a known incarnation is remembered as departed: with `None` the one removed may
        // be a newer one than what left (learned from its frames before the delete was read),
        // and remembering it would shut a live node out.
        let departed = incarnation.is_some();
        if let Some(peer) = self.remove_peer(name, incarnation, Count::No, departed) {
            self.peer_gone(peer, why);
        }
    }

    /// Declares node `name` down (at `incarnation`, or whichever is known) on this node's own
    /// evidence — silent heartbeats, a frame that met no responder, [`Node::disconnect`] —
    /// while it may be alive: as [`peer_down`](Self::peer_down), and the declaration is
    /// counted, so that the node hears of it when it comes back (`severance.rs`). `true` if it
    /// was live.
    ///
    /// [`Node::disconnect`]: super::Node::disconnect
    pub(crate) fn sever(&self, name: &str, incarnation: Option<u64>, why: &str) -> bool {
        self.sever_as(name, incarnation, why, Count::Members)
    }

    /// [`sever`](Self::sever), counted as `count` says.
    pub(crate) fn sever_as(
        &self,
        name: &str,
        incarnation: Option<u64>,
        why: &str,
        count: Count,
    ) -> bool {
        match self.remove_peer(name, incarnation, count, false) {
            Some(peer) => {
                self.peer_gone(peer, why);
                true
            }
            None => false,
        }
    }

    /// Removes peer `name` (at `incarnation`, or whichever is known), counting the removal as
    /// `count` says, and remembering it `departed` if so, in the same step: a peer taken back
    /// concurrently gets the new count in its lane's head, and a frame read concurrently from a
    /// peer that left does not bring it back.
    fn remove_peer(
        &self,
        name: &str,
        incarnation: Option<u64>,
        count: Count,
        departed: bool,
    ) -> Option<Peer> {
        let mut peers = self.peers.write().expect("peers lock");
        match peers.get(name) {
            Some(peer) if incarnation.is_none_or(|inc| inc == peer.id.incarnation) => {
                let counted = match count {
                    Count::No => false,
                    // A name known only from frames may be any client's: not counted when
                    // this node declares it down on its own evidence.
                    Count::Members => peer.member,
                    Count::Always => true,
                };
                if counted {
                    self.severances.record(&peer.id);
                }
                if departed {
                    let forget_after = super::severance::forget_after(self.down_after);
                    self.departed.record(&peer.id, forget_after);
                }
                peers.remove(name)
            }
            _ => None,
        }
    }

    /// Fails everything that waits on `peer`, removed: asks, acked sends and spawns with
    /// `NoConnection`, monitors with `Down(NoConnection)`, links with `NoConnection`; monitors
    /// it held here are dropped.
    fn peer_gone(&self, peer: Peer, why: &str) {
        self.stats.peer_down();
        // Counted always (`NodeStats::peers_down`); logged at most `warn_budget::PER_WINDOW`
        // times a second, the first line after a gap saying how many were left out.
        if let Some(suppressed) = self.down_budget.take() {
            tracing::warn!(
                suppressed,
                node = %peer.id.name,
                incarnation = peer.id.incarnation,
                why,
                "node down"
            );
        }
        peer.out.close();
        let failed: Vec<Pending> = {
            let mut pending = lock(&self.pending);
            let ids: Vec<u64> = pending
                .iter()
                .filter(|(_, (waits_on, _))| *waits_on == peer.id)
                .map(|(id, _)| *id)
                .collect();
            ids.into_iter()
                .filter_map(|id| pending.remove(&id).map(|(_, pending)| pending))
                .collect()
        };
        for pending in failed {
            fail_no_connection(pending);
        }
        let served: Vec<tokio::task::AbortHandle> = {
            let mut served = lock(&self.served);
            let keys: Vec<(PeerId, u64)> = served
                .keys()
                .filter(|(holder, _)| *holder == peer.id)
                .cloned()
                .collect();
            keys.into_iter()
                .filter_map(|key| served.remove(&key))
                .collect()
        };
        for monitor in served {
            monitor.abort();
        }
        super::links::peer_down(self, &peer.id);
    }

    /// The names of the peers now.
    pub(crate) fn peer_names(&self) -> Vec<Arc<str>> {
        self.peers
            .read()
            .expect("peers lock")
            .keys()
            .cloned()
            .collect()
    }

    /// Closes every peer's lane (nothing more is sent to it) and resolves once each lane's
    /// writer has handed what it held to async-nats: the last frames of a node that leaves.
    pub(crate) fn close_lanes(&self) -> impl std::future::Future<Output = ()> + 'static {
        let drains: Vec<_> = self
            .peers
            .read()
            .expect("peers lock")
            .values()
            .map(|peer| peer.out.close_and_drain())
            .collect();
        futures::future::join_all(drains).map(|_| ())
    }

    /// Declares every peer down (this node stops).
    pub(crate) fn all_down(&self, why: &str) {
        for name in self.peer_names() {
            self.peer_down(&name, None, why);
        }
    }
}

/// Which declarations of a peer's death are counted for it to hear of (`severance.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    /// It is gone (left, restarted), or this node stops: nobody to tell.
    No,
    /// On this node's evidence (silence, no responder): a member only.
    Members,
    /// On a user's word (`Node::disconnect`).
    Always,
}

/// What [`foreign_wake`] names when a node completes a task awaiting another node's answer
/// (a remote ask, acked send, spawn, monitor, handle, lookup): that task's waker is not ours,
/// and its panic must not end the node's task that completes it.
pub(crate) const WAITER: &str = "a task awaiting another node";

/// Fails what waited on a peer that died.
pub(crate) fn fail_no_connection(pending: Pending) {
    match pending {
        Pending::Ask(reply) => {
            let _ = foreign_wake(WAITER, || reply.send(Err(Refusal::NoConnection)));
        }
        Pending::Ack(ack) => {
            let _ = foreign_wake(WAITER, || ack.send(Err(Refusal::NoConnection)));
        }
        Pending::Spawn(spawned) => {
            let _ = foreign_wake(WAITER, || spawned.send(Err(Refusal::NoConnection)));
        }
        Pending::Monitor(down) => {
            let _ = foreign_wake(WAITER, || down.send(WireReason::NoConnection));
        }
        Pending::Join(joined) => {
            let _ = foreign_wake(WAITER, || joined.send(Err(WireReason::NoConnection)));
        }
        Pending::Whereis(located) => {
            let _ = foreign_wake(WAITER, || located.send(Err(Refusal::NoConnection)));
        }
    }
}
