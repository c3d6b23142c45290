//! Nodes that left the cluster, and their frames read after they left.
//!
//! Why: a node that leaves deletes its membership entry, and each peer declares it down on
//! reading the delete, once it has read the frames received before it (`inbound.rs`,
//! "Departures"). Its last frames still may come later — through the peer's own subscription,
//! not the membership watch: NATS orders one subscription's messages, not two subscriptions'
//! against each other, and across a NATS cluster's servers they take different routes.
//! A frame from a name that is not a peer is admitted (a node's first frame may come before its
//! heartbeat), so a late frame would bring the node back as a peer: what is sent to it would go
//! to a node that is gone, and asks wait for the sweep (`down_after`) instead of failing
//! `NoConnection` at once. A SIGKILLed node's late frames are dropped by the severance count
//! (`severance.rs`); a departure is not counted (nobody is left to tell), so it is remembered
//! here: the incarnation that left, per name. The same holds for an incarnation replaced by a
//! restart. A restarted node has a new incarnation: it is admitted as any node is.
//!
//! What a late frame still does: its messages are delivered — sent before their node left, as
//! they would have been had they been read first (at most once either way) — and an answer is
//! taken by whatever still waits for it (usually nothing: the departure failed what waited
//! on the node, `NoConnection`). An item that would open something with the node — a link, a
//! monitor, a spawn, a lookup — or act for it (a stop, an exit signal, already fired
//! `NoConnection`) is dropped: nobody is left at the other end.

use super::node::{NodeShared, PeerId};
use super::wire::Item;
use crate::loom::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The incarnation of each name that left, and until when it is remembered.
///
/// Bounded: a name keeps one entry, and an entry goes after `forget_after` (a frame later than
/// that is admitted as any unknown name's is, and swept if nothing follows) — not read past
/// then, and dropped at the next record. Locked inside the peers lock (a departure and its
/// removal are one step), never around it.
#[derive(Debug, Default)]
pub(crate) struct Departed {
    by_name: Mutex<HashMap<Arc<str>, (u64, Instant)>>,
}

impl Departed {
    /// `peer` left (or was replaced by another incarnation): remembered for `forget_after`.
    pub(crate) fn record(&self, peer: &PeerId, forget_after: Duration) {
        let now = Instant::now();
        let mut by_name = lock(&self.by_name);
        by_name.retain(|_, (_, until)| now < *until);
        let until = now
            .checked_add(forget_after)
            .unwrap_or(now + Duration::from_secs(86_400));
        by_name.insert(peer.name.clone(), (peer.incarnation, until));
    }

    /// `peer` is back: its entry was put again in the membership bucket (`peers.rs`).
    pub(crate) fn forget(&self, peer: &PeerId) {
        let mut by_name = lock(&self.by_name);
        if by_name
            .get(&peer.name)
            .is_some_and(|(incarnation, _)| *incarnation == peer.incarnation)
        {
            by_name.remove(&peer.name);
        }
    }

    /// Whether `peer` (this incarnation of its name) left, within the time it is remembered.
    pub(crate) fn contains(&self, peer: &PeerId) -> bool {
        lock(&self.by_name)
            .get(&peer.name)
            .is_some_and(|(incarnation, until)| {
                *incarnation == peer.incarnation && Instant::now() < *until
            })
    }
}

impl NodeShared {
    /// Node `name` deleted its membership entry (left; `left` is the incarnation that put it
    /// last, if known): declared down by the inbound task once it has read the frames already
    /// received (`inbound.rs`, "Departures") — here, if that task has ended (the node lost its
    /// name or stops), or if the incarnation is not known: a declaration without one takes
    /// down whichever incarnation is the peer, which by the time the inbound task reads it may
    /// be one the watch has seen join since.
    pub(crate) fn departed(&self, name: &str, left: Option<u64>) {
        self.stats.departure();
        if let Some(incarnation) = left {
            let name: Arc<str> = name.into();
            lock(&self.departing).insert((name.clone(), incarnation));
            if self.departures.send((name.clone(), incarnation)).is_ok()
                || !self.take_departure(&name, incarnation)
            {
                return;
            }
        }
        self.peer_down(name, left, "left the cluster");
    }

    /// Takes `name`'s departure at `incarnation` if it is still to be declared: `true` once,
    /// for whoever declares it (the inbound task reading it, or a frame of the name's next
    /// incarnation read before it, `inbound.rs`).
    pub(crate) fn take_departure(&self, name: &str, incarnation: u64) -> bool {
        lock(&self.departing).remove(&(Arc::<str>::from(name), incarnation))
    }
}

/// Whether `item`, read from a node that left, is still handled: a message, or an answer.
pub(crate) fn still_handled(item: &Item<'_>) -> bool {
    matches!(
        item,
        Item::Message { .. }
            | Item::Ack { .. }
            | Item::Reply { .. }
            | Item::Spawned { .. }
            | Item::Joined { .. }
            | Item::Down { .. }
            | Item::Located { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &str, incarnation: u64) -> PeerId {
        PeerId {
            name: name.into(),
            incarnation,
        }
    }

    #[test]
    fn a_departure_is_of_one_incarnation_and_forgotten_when_old() {
        let departed = Departed::default();
        departed.record(&peer("b", 1), Duration::MAX);
        assert!(departed.contains(&peer("b", 1)));
        assert!(!departed.contains(&peer("b", 2)), "a restart is not");
        assert!(!departed.contains(&peer("c", 1)));
        // Remembered for zero: not read, and dropped at the next record.
        departed.record(&peer("c", 1), Duration::ZERO);
        assert!(
            !departed.contains(&peer("c", 1)),
            "past its time, without another record"
        );
        departed.record(&peer("d", 1), Duration::MAX);
        assert!(departed.contains(&peer("b", 1)) && departed.contains(&peer("d", 1)));
    }
}
