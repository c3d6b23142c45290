//! A node's counters: traffic, and everything rejected or lost — never silent.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The counters, updated by the node's tasks.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    frames_out: AtomicU64,
    items_out: AtomicU64,
    bytes_out: AtomicU64,
    frames_in: AtomicU64,
    items_in: AtomicU64,
    bytes_in: AtomicU64,
    rejected_frames: AtomicU64,
    rejected_items: AtomicU64,
    undelivered: AtomicU64,
    publish_errors: AtomicU64,
    slow_consumers: AtomicU64,
    peers_down: AtomicU64,
    departures: AtomicU64,
    unreached: AtomicU64,
    stale_frames: AtomicU64,
    orphans_stopped: AtomicU64,
    backlogged: AtomicU64,
    late_answers: AtomicU64,
}

impl Stats {
    pub(crate) fn sent(&self, items: usize, bytes: usize) {
        self.frames_out.fetch_add(1, Relaxed);
        self.items_out.fetch_add(items as u64, Relaxed);
        self.bytes_out.fetch_add(bytes as u64, Relaxed);
    }

    /// Frames published so far.
    pub(crate) fn frames_out(&self) -> u64 {
        self.frames_out.load(Relaxed)
    }

    pub(crate) fn received(&self, items: usize, bytes: usize) {
        self.frames_in.fetch_add(1, Relaxed);
        self.items_in.fetch_add(items as u64, Relaxed);
        self.bytes_in.fetch_add(bytes as u64, Relaxed);
    }

    /// A frame rejected whole after it was decoded (its bytes were counted then).
    pub(crate) fn rejected_frame(&self) {
        self.rejected_frames.fetch_add(1, Relaxed);
    }

    /// A frame of `bytes` rejected whole before it decoded: its bytes count as received too.
    pub(crate) fn undecodable_frame(&self, bytes: usize) {
        self.rejected_frames.fetch_add(1, Relaxed);
        self.bytes_in.fetch_add(bytes as u64, Relaxed);
    }

    pub(crate) fn rejected_item(&self) {
        self.rejected_items.fetch_add(1, Relaxed);
    }

    pub(crate) fn undelivered(&self) {
        self.undelivered.fetch_add(1, Relaxed);
    }

    pub(crate) fn publish_error(&self) {
        self.publish_errors.fetch_add(1, Relaxed);
    }

    pub(crate) fn slow_consumer(&self) {
        self.slow_consumers.fetch_add(1, Relaxed);
    }

    pub(crate) fn slow_consumers(&self) -> u64 {
        self.slow_consumers.load(Relaxed)
    }

    pub(crate) fn peer_down(&self) {
        self.peers_down.fetch_add(1, Relaxed);
    }

    pub(crate) fn departure(&self) {
        self.departures.fetch_add(1, Relaxed);
    }

    pub(crate) fn unreached(&self) {
        self.unreached.fetch_add(1, Relaxed);
    }

    pub(crate) fn stale_frame(&self) {
        self.stale_frames.fetch_add(1, Relaxed);
    }

    pub(crate) fn orphan_stopped(&self) {
        self.orphans_stopped.fetch_add(1, Relaxed);
    }

    pub(crate) fn backlogged(&self) {
        self.backlogged.fetch_add(1, Relaxed);
    }

    pub(crate) fn late_answer(&self) {
        self.late_answers.fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> NodeStats {
        NodeStats {
            frames_out: self.frames_out.load(Relaxed),
            items_out: self.items_out.load(Relaxed),
            bytes_out: self.bytes_out.load(Relaxed),
            frames_in: self.frames_in.load(Relaxed),
            items_in: self.items_in.load(Relaxed),
            bytes_in: self.bytes_in.load(Relaxed),
            rejected_frames: self.rejected_frames.load(Relaxed),
            rejected_items: self.rejected_items.load(Relaxed),
            undelivered: self.undelivered.load(Relaxed),
            publish_errors: self.publish_errors.load(Relaxed),
            slow_consumers: self.slow_consumers.load(Relaxed),
            peers_down: self.peers_down.load(Relaxed),
            departures: self.departures.load(Relaxed),
            unreached: self.unreached.load(Relaxed),
            stale_frames: self.stale_frames.load(Relaxed),
            orphans_stopped: self.orphans_stopped.load(Relaxed),
            monitors_served: 0,
            backlogged: self.backlogged.load(Relaxed),
            backlog_bytes: 0,
            waits: 0,
            late_answers: self.late_answers.load(Relaxed),
        }
    }
}

/// A snapshot of a node's counters ([`Node::stats`](super::Node::stats)).
///
/// # Examples
///
/// ```
/// let stats = procsched::cluster::NodeStats::default();
/// assert_eq!(stats.rejected_frames, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStats {
    /// Frames published (each batches one or more items).
    pub frames_out: u64,
    /// Items sent (messages, answers, control requests).
    pub items_out: u64,
    /// Bytes published.
    pub bytes_out: u64,
    /// Frames received and decoded.
    pub frames_in: u64,
    /// Items received.
    pub items_in: u64,
    /// Bytes received (rejected frames included).
    pub bytes_in: u64,
    /// Frames rejected whole: malformed, oversized, of another version or codec, or from a
    /// node claiming an identity that is not its own.
    pub rejected_frames: u64,
    /// Items rejected: an unregistered message type or spawnable name, bytes that do not decode,
    /// an answer (reply, ack, spawn result, `Down`…) from a node its request did not go to.
    pub rejected_items: u64,
    /// Messages received for a process that could not take them (gone, finishing, full).
    pub undelivered: u64,
    /// Publishes that failed (the frame is lost; acked sends and asks in it time out or fail
    /// when the node is declared down).
    pub publish_errors: u64,
    /// NATS slow-consumer events: frames the client dropped because this node did not read
    /// its subscription fast enough (`ConnectOptions::subscription_capacity`). Each burst of
    /// them declares every peer down (`NoConnection`; counted in `peers_down`): a dropped frame
    /// may have carried a signal its waiters would otherwise wait for forever. A node the
    /// *server* cuts off as a slow consumer (past the server's `max_pending`) is not counted
    /// here: it is disconnected, and its peers declare it down as for any lost connection.
    pub slow_consumers: u64,
    /// Nodes declared down.
    pub peers_down: u64,
    /// Deletes of membership entries read: nodes that left ([`Node::leave`]), or entries
    /// deleted from outside. A departed node is declared down once the frames received from
    /// it before are read.
    ///
    /// [`Node::leave`]: super::Node::leave
    pub departures: u64,
    /// Frames that met no responder: the receiving node's subscription was gone (its process
    /// died, or its connection dropped), so NATS answered the frame's reply subject with "no
    /// responders". Each declares that node down at once — unless this node first saw it less
    /// than a heartbeat ago (interest spreads between the servers of a NATS cluster
    /// asynchronously, so a node just joined may not be reachable from every server yet).
    pub unreached: u64,
    /// Frames dropped because they were sent in a session with their node that one side had
    /// ended: before their sender heard that this node declared it down, or from before it
    /// declared this node down (the other side's links, monitors and waits were already
    /// failed; see [`Node::disconnect`](super::Node::disconnect)).
    pub stale_frames: u64,
    /// Processes another node spawned for this one's `spawn_on` after it had given up on the
    /// answer (timed out, or its future dropped), which this node then terminated: nobody
    /// held their PIDs, and a retry would have run a second instance. Also processes this node
    /// spawned for another whose answer could not be sent (this node was leaving, or the
    /// spawner was declared down meanwhile): terminated here for the same reason.
    pub orphans_stopped: u64,
    /// Monitors that processes of other nodes hold on this node's processes, now (a gauge):
    /// each ends with its `Down`, a demonitor, or its watcher's node going down.
    pub monitors_served: u64,
    /// Fire-and-forget sends refused because the lane to their node held more than
    /// [`Cluster::max_backlog`](super::Cluster::max_backlog) bytes unsent
    /// ([`RemoteError::Backlogged`](super::RemoteError::Backlogged)).
    pub backlogged: u64,
    /// The bytes encoded for other nodes that async-nats has not taken yet, over every lane,
    /// now (a gauge): near the limit times the peers, the network is not keeping up.
    pub backlog_bytes: u64,
    /// This node's requests waiting for another node's answer, now (a gauge): acked sends,
    /// asks, remote spawns and joins, monitors of remote processes, `whereis`. Each ends with
    /// its answer, its timeout, its future's drop, or its node going down.
    pub waits: u64,
    /// Answers that came for a wait no longer held: its waiter had timed out, dropped its
    /// future or been cancelled, or (a `Down`) demonitored. Dropped, as they must be; many of
    /// them say the timeouts are shorter than the answers take.
    pub late_answers: u64,
}
