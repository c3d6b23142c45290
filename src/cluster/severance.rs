//! A node declared down by one side only, and how the other side learns it.
//!
//! Why: OTP's nodes share one connection, so a `nodedown` is seen at both of its ends. Nodes
//! here meet through NATS, and each declares a peer down on its own evidence — a frame that
//! met no responder, heartbeats gone silent, [`Node::disconnect`](super::Node::disconnect).
//! The peer may be alive and unaware (it was only reconnecting to a restarted server): left
//! alone, it would keep links whose other ends have already fired `NoConnection`, serve
//! monitors that have already resolved `Down(NoConnection)`, wait for `Down`s its watcher's
//! node no longer owes, and run on a supervised child that its supervisor has restarted
//! elsewhere — run twice.
//!
//! How: each node counts, per peer incarnation, the times it declared that peer down
//! ([`Severances`]) and says so twice — in the head of every frame to it (`severed`), and in
//! its heartbeat, for a peer it sends nothing to. A node that hears a count above the one it
//! last acted on declares the sender down in turn (its links fire, its monitors resolve, what
//! it waits for fails, all with `NoConnection`) without counting it, so two nodes never echo,
//! and takes the sender back as a fresh peer. Every frame also carries the count its sender has
//! acted on (`seen`): a frame whose `seen` is below the receiver's own count was sent before
//! its sender learned — in the session the receiver ended — and is dropped, as is one whose
//! `severed` is below what the receiver acted on (sent before a later declaration). Its items
//! would name links and monitors already fired, or make new ones the sender is about to drop.

use super::node::PeerId;
use crate::loom::lock;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many times this node declared each peer (one incarnation per name) down.
///
/// Bounded: only members are counted (a name known only from frames — any client's — never
/// is), a name keeps one entry, and an entry whose node is no longer a peer goes after
/// [`forget_after`] (ten `down_after`s, and at least [`MIN_FORGET_AFTER`]): a node cut off that
/// long has declared this one down too (it read no heartbeat of it), so it needs no telling;
/// were it told nothing it still holds a count, its heartbeats show the drop
/// (`NodeShared::heartbeat_count` lowers what it acted on). Members are whoever wrote an entry
/// in the bucket, though: what a heartbeat carries of the nodes that are no peers is bounded in
/// bytes too ([`Severances::report`]).
///
/// The entry is also what drops the frames that node sent before it learned: those still on
/// their way when it comes back — held in a stalled connection's buffers (a link that went
/// silent without closing), sent when it flows again — would otherwise be delivered after the
/// `Down` this node gave their sender's processes (as long as the entry lives: a stall
/// longer than [`MIN_FORGET_AFTER`], which the NATS client's default pings prevent, would
/// deliver them). A black-box review stalled a link for 25 s
/// at the default `down_after` (2 s): 303 messages of the ended session were delivered 23 s
/// after their sender's `Down`, when the entry had been forgotten at 20 s. Hence the floor: the
/// NATS client's pings (every 60 s by default, two unanswered end the connection) close a
/// stalled connection within about three minutes, and with it what its sockets held.
#[derive(Debug, Default)]
pub(crate) struct Severances {
    by_name: Mutex<HashMap<Arc<str>, Entry>>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    incarnation: u64,
    count: u64,
    /// When the last declaration was counted.
    at: Instant,
}

/// An entry of a node no longer a peer is forgotten after this many `down_after`s, and
/// [`MIN_FORGET_AFTER`] at least ([`forget_after`]).
pub(crate) const FORGET_AFTER: u32 = 10;

/// The least time an entry of a node no longer a peer is kept ([`Severances`]: longer than a
/// stalled connection lasts under the NATS client's default pings).
pub(crate) const MIN_FORGET_AFTER: Duration = Duration::from_secs(600);

/// How long an entry of a node no longer a peer is kept, for a node that declares peers down
/// after `down_after` (the same for a departed node's, `departed.rs`).
pub(crate) fn forget_after(down_after: Duration) -> Duration {
    down_after
        .saturating_mul(FORGET_AFTER)
        .max(MIN_FORGET_AFTER)
}

/// How many bytes of a heartbeat the counts of nodes that are no peers may take
/// ([`Severances::report`]): a few hundred at typical name lengths, well under NATS's smallest
/// usual payload limits.
pub(crate) const MAX_OTHERS_BYTES: usize = 16 * 1024;

/// What a heartbeat says of this node's declarations ([`Severances::report`]).
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) severed: Vec<Severed>,
    /// Some counts of nodes that are no peers were left out: such a node that finds none of
    /// its own must not read zero.
    pub(crate) truncated: bool,
}

impl Severances {
    /// The times this node declared `peer` down.
    pub(crate) fn count(&self, peer: &PeerId) -> u64 {
        match lock(&self.by_name).get(&peer.name) {
            Some(entry) if entry.incarnation == peer.incarnation => entry.count,
            _ => 0,
        }
    }

    /// This node declares `peer` down once more. A name keeps one entry: another incarnation
    /// of it starts from zero (the earlier life is dead; its peers will never hear from it).
    pub(crate) fn record(&self, peer: &PeerId) {
        let mut by_name = lock(&self.by_name);
        let at = Instant::now();
        let entry = by_name.entry(peer.name.clone()).or_insert(Entry {
            incarnation: peer.incarnation,
            count: 0,
            at,
        });
        if entry.incarnation != peer.incarnation {
            entry.incarnation = peer.incarnation;
            entry.count = 0;
        }
        entry.count += 1;
        entry.at = at;
    }

    /// The counts, for the heartbeat: every current peer's, then the others' latest first
    /// within [`MAX_OTHERS_BYTES`]; `true` with them if some were left out. First forgets those
    /// of nodes not in `peers` counted longer than `forget_after` ago.
    ///
    /// Bounded because the members are whoever wrote an entry in the bucket: a black-box review
    /// put 30 000 fake entries there, each was declared down for its silence (and so is no peer
    /// any more), and every real node's heartbeat grew past NATS's payload limit (1.16 MB): no
    /// node could heartbeat, nor claim its name again, until the counts were forgotten. A
    /// current peer's count is never left out: every peer reads every heartbeat, and one that
    /// finds its count missing from a complete list reads zero and lowers what it acted on.
    pub(crate) fn report(&self, peers: &[Arc<str>], forget_after: Duration) -> Report {
        let peers: HashSet<&str> = peers.iter().map(|peer| &**peer).collect();
        let mut by_name = lock(&self.by_name);
        by_name.retain(|name, entry| peers.contains(&**name) || entry.at.elapsed() < forget_after);
        let severed = |(name, entry): (&Arc<str>, &Entry)| Severed {
            node: name.to_string(),
            incarnation: entry.incarnation,
            count: entry.count,
        };
        let (current, mut others): (Vec<_>, Vec<_>) = by_name
            .iter()
            .partition(|(name, _)| peers.contains(&***name));
        others.sort_unstable_by_key(|(_, entry)| std::cmp::Reverse(entry.at));
        let mut counts: Vec<Severed> = current.into_iter().map(severed).collect();
        let mut budget = MAX_OTHERS_BYTES;
        let mut truncated = false;
        for other in others {
            // A name's bytes and the entry's integers and field names, about 32.
            let size = other.0.len() + 32;
            if size > budget {
                truncated = true;
                break;
            }
            budget -= size;
            counts.push(severed(other));
        }
        Report {
            severed: counts,
            truncated,
        }
    }

    /// How many nodes have an entry.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.by_name).len()
    }
}

/// One count in a heartbeat: this node declared `node` at `incarnation` down `count` times.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Severed {
    pub(crate) node: String,
    pub(crate) incarnation: u64,
    pub(crate) count: u64,
}

/// The count a heartbeat's `severed` holds for node `me`, zero if none.
#[cfg(test)]
pub(crate) fn reported_for(me: &PeerId, severed: &[Severed]) -> u64 {
    reported(me, severed).unwrap_or(0)
}

/// The count a heartbeat's `severed` holds for node `me`, if it holds one.
pub(crate) fn reported(me: &PeerId, severed: &[Severed]) -> Option<u64> {
    severed
        .iter()
        .find(|entry| *entry.node == *me.name && entry.incarnation == me.incarnation)
        .map(|entry| entry.count)
}

/// What a frame's counts say of the session it was sent in, against what the receiver knows
/// of its sender: the sender's count acted on (`acted`), and the receiver's own (`ours`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Session {
    /// The session both sides are in.
    Current,
    /// Sent in a session one side has ended: dropped.
    Stale,
    /// The sender declared this node down since the receiver last acted: the receiver declares
    /// the sender down in turn, then reads the frame as the new session's first.
    Severed,
}

/// Judges a frame whose head says `severed` (the sender's count for the receiver) and `seen`
/// (the receiver's count the sender has acted on).
pub(crate) fn judge(severed: u64, seen: u64, acted: u64, ours: u64) -> Session {
    if seen < ours || severed < acted {
        Session::Stale
    } else if severed > acted {
        Session::Severed
    } else {
        Session::Current
    }
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
    fn counts_are_per_incarnation_and_another_life_starts_from_zero() {
        let severances = Severances::default();
        assert_eq!(severances.count(&peer("b", 1)), 0);
        severances.record(&peer("b", 1));
        severances.record(&peer("b", 1));
        assert_eq!(severances.count(&peer("b", 1)), 2);
        assert_eq!(severances.count(&peer("b", 2)), 0, "another life");
        severances.record(&peer("b", 2));
        assert_eq!(severances.count(&peer("b", 2)), 1);
        assert_eq!(severances.count(&peer("b", 1)), 0, "one entry per name");
        let report = severances.report(&[], Duration::MAX).severed;
        assert_eq!(reported_for(&peer("b", 2), &report), 1);
        assert_eq!(reported_for(&peer("b", 1), &report), 0);
        assert_eq!(reported_for(&peer("c", 2), &report), 0);
    }

    #[test]
    fn a_heartbeat_reports_every_peers_count_and_the_latest_others_within_a_budget() {
        // Members are whoever wrote an entry in the bucket: a flood of fake ones, each
        // declared down (no peer any more), must not grow the heartbeat past NATS's payload
        // limit — nor crowd out a live peer's count, which it would then read as zero.
        let severances = Severances::default();
        severances.record(&peer("b", 7));
        for n in 0..10_000 {
            severances.record(&peer(&format!("ghost-{n}"), 1));
        }
        let report = severances.report(&["b".into()], Duration::MAX);
        assert!(report.truncated);
        assert_eq!(
            reported_for(&peer("b", 7), &report.severed),
            1,
            "the peer's, always"
        );
        assert!(report.severed.len() < 1_000, "{}", report.severed.len());
        assert_eq!(
            reported(&peer("ghost-9999", 1), &report.severed),
            Some(1),
            "the latest others"
        );
        assert_eq!(reported(&peer("ghost-0", 1), &report.severed), None);
        let few = Severances::default();
        few.record(&peer("c", 1));
        assert!(
            !few.report(&[], Duration::MAX).truncated,
            "nothing left out"
        );
    }

    #[test]
    fn an_entry_is_forgotten_only_once_its_node_is_no_peer_and_it_is_old() {
        let severances = Severances::default();
        severances.record(&peer("b", 1));
        severances.record(&peer("c", 1));
        let peers: [Arc<str>; 1] = ["b".into()];
        assert_eq!(severances.report(&peers, Duration::MAX).severed.len(), 2);
        // Zero: every entry is old. "b" is a peer: kept; "c" is not: forgotten.
        let report = severances.report(&peers, Duration::ZERO).severed;
        assert_eq!(report.len(), 1);
        assert_eq!(reported_for(&peer("b", 1), &report), 1);
        assert_eq!(severances.len(), 1);
    }

    #[test]
    fn a_frame_from_an_ended_session_is_stale_and_a_higher_count_severs() {
        assert_eq!(judge(0, 0, 0, 0), Session::Current);
        assert_eq!(judge(2, 1, 2, 1), Session::Current);
        // Its sender had not yet heard that the receiver declared it down.
        assert_eq!(judge(0, 0, 0, 1), Session::Stale);
        // Sent before the declaration the receiver already acted on.
        assert_eq!(judge(1, 0, 2, 0), Session::Stale);
        assert_eq!(judge(1, 0, 0, 0), Session::Severed);
        assert_eq!(judge(3, 1, 1, 1), Session::Severed);
    }
}
