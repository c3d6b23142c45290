//! The node: its connection, its peers (the other nodes it knows alive) with their outbound
//! queues, and what it waits for from them (asks, acks, spawns, monitors).
//!
//! # Peers and outbound lanes
//! A peer is a node seen in the membership bucket (or heard from directly), at one incarnation.
//! Each peer has one FIFO lane for both its subjects, data (messages) and control (everything
//! else): a sender encodes its item into the lane's open frame, and the lane's writer task (or
//! the sender itself, on a quiet lane) publishes the frames in order (`outbound.rs`): so the
//! order of one node's messages and signals (links, monitors, exits, `Down`) to another is the
//! order they were sent in, as OTP orders signals between two processes.
//!
//! # A peer's death
//! When a peer is declared down (no heartbeat for `down_after`, its entry deleted, a new
//! incarnation seen), [`NodeShared::peer_down`] removes it and fails everything that waits on
//! it: asks, acked sends and spawns with `NoConnection`, monitors with `Down(NoConnection)`;
//! monitors it held here are dropped. Nothing waits on a dead peer past that bound.

use super::outbound::{self, Admission, Outbound, PushError};
use super::registry::Registry;
use super::severance::{self, Session, Severances};
use super::stats::Stats;
use super::wire::{self, Item, Refusal, WireReason};
use crate::loom::lock;
use crate::process::{MessageType, Pid};
use crate::scheduler::SchedulerHandle;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A node at one incarnation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PeerId {
    pub(crate) name: Arc<str>,
    pub(crate) incarnation: u64,
}

/// What a node publishes in its heartbeat: its life and its load.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Load {
    pub(crate) incarnation: u64,
    /// Live processes.
    pub(crate) live: u64,
    /// Processes ready to run (queued).
    pub(crate) runnable: u64,
    /// Its scheduler is shutting down: it spawns nothing more, so it is no placement target
    /// (absent from a node that predates it: not shutting down).
    #[serde(default)]
    pub(crate) shutting_down: bool,
}

impl Load {
    /// The placement score: lower is less loaded.
    pub(crate) fn score(&self) -> u64 {
        self.live.saturating_add(self.runnable.saturating_mul(4))
    }
}

/// A live peer.
pub(crate) struct Peer {
    pub(crate) id: PeerId,
    pub(crate) load: Load,
    pub(crate) last_seen: Instant,
    /// When this node added it (a frame that meets no responder sooner is not a death:
    /// `peer_unreached`).
    pub(crate) since: Instant,
    /// Whether its membership entry has been read. A peer first heard from in a frame is not,
    /// until its heartbeat arrives: its load is unknown, and its name may be forged by any
    /// client of the server, so placement and [`Node::nodes`](super::Node::nodes) leave it out.
    pub(crate) member: bool,
    /// The times it declared this node down, as far as this node has acted on it, and the
    /// times this node declared it down when it was added: the counts of `severance.rs`, in
    /// the head of every frame to it.
    pub(crate) severed_us: u64,
    pub(crate) severed_it: u64,
    /// Heartbeats in a row that said a count below `severed_us` (see `add_peer`).
    pub(crate) lower_reports: u8,
    pub(crate) out: Outbound,
}

/// What this node waits for from a peer.
pub(crate) enum Pending {
    /// An ask: its reply's encoding (a slice of the frame it came in).
    Ask(oneshot::Sender<Result<bytes::Bytes, Refusal>>),
    /// An acked send.
    Ack(oneshot::Sender<Result<(), Refusal>>),
    /// A spawn: the new process's raw PID.
    Spawn(oneshot::Sender<Result<u64, Refusal>>),
    /// A monitor: its target's end.
    Monitor(oneshot::Sender<WireReason>),
    /// A joined spawn: its outcome.
    Join(oneshot::Sender<Result<Vec<u8>, WireReason>>),
    /// A name lookup: the named process's raw PID, if any.
    Whereis(oneshot::Sender<Result<Option<u64>, Refusal>>),
}

/// The state a node's tasks and handles share.
pub(crate) struct NodeShared {
    pub(crate) me: PeerId,
    pub(crate) sched: SchedulerHandle,
    /// The runtime the node started in, where every task of the node runs — also those its
    /// synchronous methods start (a link end, a process's monitor), whichever thread calls them:
    /// a state machine's step, a plain thread, with or without a tokio context of its own.
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) client: async_nats::Client,
    pub(crate) registry: Registry,
    pub(crate) prefix: String,
    pub(crate) heartbeat: Duration,
    pub(crate) down_after: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) max_frame: usize,
    /// The most a lane to one peer holds unsent before it refuses a fire-and-forget message
    /// ([`Cluster::max_backlog`](super::Cluster::max_backlog)).
    pub(crate) max_backlog: usize,
    /// The deepest value this node decodes (`nesting.rs`).
    pub(crate) max_nesting: usize,
    pub(crate) replicas: usize,
    /// The secret in the reply subject of this node's frames (`unreached.rs`).
    pub(crate) unreached: super::unreached::Secret,
    pub(crate) peers: RwLock<HashMap<Arc<str>, Peer>>,
    /// How many times this node declared each peer down (`severance.rs`). Locked inside
    /// `peers` (a declaration and its count are one step), never around it.
    pub(crate) severances: Severances,
    /// The incarnations that left (`departed.rs`). Locked inside `peers`, never around it.
    pub(crate) departed: super::departed::Departed,
    pub(crate) pending: Mutex<HashMap<u64, (PeerId, Pending)>>,
    /// Monitors other nodes hold on this node's processes: dropped (demonitored) on
    /// `Demonitor` or when their holder dies.
    pub(crate) served: Mutex<HashMap<(PeerId, u64), tokio::task::AbortHandle>>,
    /// This node's ends of links across nodes (`links.rs`).
    pub(crate) links: Mutex<HashMap<super::links::LinkKey, tokio::task::AbortHandle>>,
    pub(crate) next_id: AtomicU64,
    pub(crate) stats: Arc<Stats>,
    /// Warnings about other nodes' input, rate-limited (`warn_budget.rs`).
    pub(crate) warn_budget: super::warn_budget::WarnBudget,
    /// "node down" lines, rate-limited apart from the input warnings: a flood of fake
    /// membership entries, once declared down, would otherwise write one line each.
    pub(crate) down_budget: super::warn_budget::WarnBudget,
    pub(crate) stopped: AtomicBool,
    /// Set once another incarnation holds this node's name (`eviction.rs`); `on_evicted` then
    /// wakes the inbound task, which unsubscribes.
    pub(crate) evicted: AtomicBool,
    pub(crate) on_evicted: tokio::sync::Notify,
    /// To the inbound task: the nodes whose membership entry was deleted, declared down once
    /// their frames already received are read (`inbound.rs`, "Departures").
    pub(crate) departures: tokio::sync::mpsc::UnboundedSender<super::inbound::Departure>,
    /// The departures handed to the inbound task and not yet declared (`departed.rs`).
    pub(crate) departing: Mutex<std::collections::HashSet<(Arc<str>, u64)>>,
    /// This node's load at its last heartbeat, plus the processes placed here since
    /// ([`count_placed`](Self::count_placed)): what placement compares (measuring it surveys
    /// every process, once per heartbeat, not once per spawn).
    pub(crate) last_load: Mutex<Load>,
    /// The message type each local process messages were checked against declared, by raw
    /// PID ([`takes`](Self::takes)).
    pub(crate) takes: Mutex<HashMap<u64, Option<MessageType>>>,
}

impl std::fmt::Debug for NodeShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeShared")
            .field("me", &self.me)
            .finish_non_exhaustive()
    }
}

impl NodeShared {
    /// The subject of node `name`'s data (`control: false`) or control queue.
    pub(crate) fn subject(&self, name: &str, control: bool) -> String {
        let kind = if control { "ctl" } else { "data" };
        format!("{}.node.{name}.{kind}", self.prefix)
    }

    /// The reply subject of every frame to `peer`: NATS answers it with "no responders" when
    /// `peer`'s subscription is gone, and this node's own subscription (`<prefix>.node.<me>.*`)
    /// reads the answer (`inbound::run`, [`unreached`](super::unreached) says why it holds a
    /// secret).
    pub(crate) fn unreached_subject(&self, peer: &PeerId) -> String {
        self.unreached.subject(&self.prefix, &self.me.name, peer)
    }

    /// A frame to `peer` met no responder: its subscription is gone, so it is declared down at
    /// once (the "a request that meets no responder is an immediate death signal") —
    /// unless this node added it less than a heartbeat ago: a node's subscription reaches the
    /// other servers of a NATS cluster asynchronously, and may trail its membership entry.
    pub(crate) fn peer_unreached(&self, peer: &PeerId) {
        self.stats.unreached();
        let settled = self
            .peers
            .read()
            .expect("peers lock")
            .get(&peer.name)
            .map(|known| {
                known.id.incarnation == peer.incarnation && known.since.elapsed() >= self.heartbeat
            });
        match settled {
            Some(true) => {
                self.sever(
                    &peer.name,
                    Some(peer.incarnation),
                    "a frame met no responder: its subscription is gone",
                );
            }
            Some(false) => tracing::debug!(
                node = %peer.name,
                incarnation = peer.incarnation,
                "a frame met no responder within a heartbeat of the node joining: not a death yet"
            ),
            None => {}
        }
    }

    /// A fresh id for something this node waits for.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed)
    }

    /// `f` of the peer `id`, if it is known alive at that incarnation.
    pub(crate) fn with_peer<R>(&self, id: &PeerId, f: impl FnOnce(&Peer) -> R) -> Option<R> {
        self.peers
            .read()
            .expect("peers lock")
            .get(&id.name)
            .filter(|known| known.id.incarnation == id.incarnation)
            .map(f)
    }

    /// `true` if `peer` is known alive at its incarnation.
    pub(crate) fn is_live(&self, peer: &PeerId) -> bool {
        self.with_peer(peer, |_| ()).is_some()
    }

    /// The incarnation of live node `name`, if its membership entry has been read (a name known
    /// only from frames may be forged by any client: never a placement target).
    pub(crate) fn member_incarnation(&self, name: &str) -> Option<u64> {
        self.peers
            .read()
            .expect("peers lock")
            .get(name)
            .filter(|peer| peer.member)
            .map(|peer| peer.id.incarnation)
    }

    /// What a frame from `origin` with `severed` and `seen` in its head (`severance.rs`) is
    /// to this node: `None` if `origin` is not live here at that incarnation.
    pub(crate) fn session_of(&self, origin: &PeerId, severed: u64, seen: u64) -> Option<Session> {
        let peers = self.peers.read().expect("peers lock");
        let peer = peers.get(&origin.name)?;
        (peer.id.incarnation == origin.incarnation)
            .then(|| severance::judge(severed, seen, peer.severed_us, peer.severed_it))
    }

    /// Why a PID of incarnation `incarnation` is not reached through the node's live
    /// incarnation `live`: an older life's PID names a process that is gone (`NoProc`); a newer
    /// life's — one this node has not read from the membership bucket yet (it lags up to a
    /// heartbeat; a PID can come sooner, inside a message from a third node) — is not
    /// reachable from here yet (`NoConnection`), not gone. Incarnations order by their node's
    /// start (`start.rs`, `fresh_incarnation`); one that cannot be a start time yet (drawn at
    /// random by an earlier release, whose values mostly read far in the future) orders
    /// nothing, and is an old life's.
    pub(crate) fn other_life(live: u64, incarnation: u64) -> Refusal {
        if incarnation > live && super::start::could_have_started(incarnation) {
            Refusal::NoConnection
        } else {
            Refusal::NoProc
        }
    }

    /// [`other_life`](Self::other_life) as the exit reason a link or monitor hears.
    pub(crate) fn other_life_exit(live: u64, incarnation: u64) -> crate::process::ExitReason {
        match NodeShared::other_life(live, incarnation) {
            Refusal::NoProc => crate::process::ExitReason::NoProc,
            _ => crate::process::ExitReason::NoConnection,
        }
    }

    /// The incarnation of live node `name`.
    pub(crate) fn incarnation_of(&self, name: &str) -> Option<u64> {
        self.peers
            .read()
            .expect("peers lock")
            .get(name)
            .map(|peer| peer.id.incarnation)
    }

    /// Queues `item` for `to`'s data or control subject (by the item's kind). `Err` with the
    /// refusal when `to` is not live at that incarnation (`NoProc` for an older life of a live
    /// node, else `NoConnection`: [`other_life`](Self::other_life)).
    /// An item that does not encode (a control item with an unencodable text: a bug, not a
    /// network condition) is refused as `Decode`, counted and traced.
    /// Never refused for the lane's backlog ([`Admission::Always`]).
    pub(crate) fn send_item(&self, to: &PeerId, item: Item<'_>) -> Result<(), Refusal> {
        self.push_to(to, |out, _| {
            out.push(self, &item, outbound::item_size(&item), Admission::Always)
        })
    }

    /// Queues an answer to what `to` asked of this node (an ack, a lookup's or a monitor's
    /// answer): as [`send_item`](Self::send_item), except that a name known only from frames
    /// — no membership entry: any client can pose as one — gets answers only while its lane
    /// holds less than a frame's worth ([`Cluster::max_frame`](super::Cluster::max_frame)):
    /// past that they are refused (`Backlogged`, counted). A node's own requests are always
    /// answered. A hostile review's made-up node drew 210 MiB of queued answers with 200 000
    /// lookups a second.
    pub(crate) fn send_answer(&self, to: &PeerId, item: Item<'_>) -> Result<(), Refusal> {
        self.push_to(to, |out, member| {
            if !member && out.backlog() >= self.max_frame {
                return Err(PushError::Backlogged {
                    limit: self.max_frame,
                });
            }
            out.push(self, &item, outbound::item_size(&item), Admission::Always)
        })
    }

    /// Queues the item of `envelope` whose body is encoded in `buffer` behind
    /// [`gap`](Self::gap) bytes (`Outbound::push_encoded`: a big body goes out as a frame of
    /// its own, with no copy), if `to` is live; refusals as [`send_item`](Self::send_item),
    /// and `Backlogged` for an [`Admission::Bounded`] item the lane has no room for.
    pub(crate) fn send_encoded(
        &self,
        to: &PeerId,
        envelope: &wire::Envelope<'_>,
        buffer: &mut Vec<u8>,
        gap: usize,
        admission: Admission,
    ) -> Result<(), Refusal> {
        self.push_to(to, |out, _| {
            out.push_encoded(self, envelope, buffer, gap, admission)
        })
    }

    /// Resolves once the lane to `to` has room under its backlog limit (or closed): see
    /// `Outbound::room`. `Err` as [`send_item`](Self::send_item) if `to` is not live.
    pub(crate) fn room_to(
        &self,
        to: &PeerId,
    ) -> Result<impl std::future::Future<Output = ()> + Send + 'static, Refusal> {
        let peers = self.peers.read().expect("peers lock");
        let Some(peer) = peers.get(&to.name) else {
            return Err(Refusal::NoConnection);
        };
        if peer.id.incarnation != to.incarnation {
            return Err(NodeShared::other_life(peer.id.incarnation, to.incarnation));
        }
        Ok(peer.out.room())
    }

    /// The bytes queued on every lane and not yet handed to async-nats.
    pub(crate) fn backlog(&self) -> usize {
        let peers = self.peers.read().expect("peers lock");
        peers.values().map(|peer| peer.out.backlog()).sum()
    }

    /// Runs `push` on the lane to `to`, if it is live, telling it whether `to` has a membership
    /// entry.
    fn push_to(
        &self,
        to: &PeerId,
        push: impl FnOnce(&Outbound, bool) -> Result<(), PushError>,
    ) -> Result<(), Refusal> {
        let peers = self.peers.read().expect("peers lock");
        let Some(peer) = peers.get(&to.name) else {
            return Err(Refusal::NoConnection);
        };
        if peer.id.incarnation != to.incarnation {
            return Err(NodeShared::other_life(peer.id.incarnation, to.incarnation));
        }
        push(&peer.out, peer.member).map_err(|error| match error {
            PushError::Encode(error) => {
                self.stats.publish_error();
                tracing::error!(node = %to.name, %error, "an item did not encode: not sent");
                Refusal::Decode(format!("did not encode: {error}"))
            }
            PushError::Closed => Refusal::NoConnection,
            PushError::Backlogged { limit } => {
                self.stats.backlogged();
                tracing::debug!(node = %to.name, limit, "the lane's backlog is full: a send refused");
                Refusal::Backlogged {
                    limit: limit as u64,
                }
            }
            PushError::TooLarge { size, limit } => {
                tracing::warn!(node = %to.name, size, limit, "an item over the frame limit: not sent");
                Refusal::TooLarge {
                    size: size as u64,
                    limit: limit as u64,
                }
            }
        })
    }

    /// The bytes to leave in front of a body encoded for [`send_encoded`](Self::send_encoded)
    /// with `envelope`: a frame's head from this node and the envelope.
    pub(crate) fn gap(&self, envelope: &wire::Envelope<'_>) -> usize {
        wire::frame_head_len(&self.me.name) + envelope.len()
    }

    /// Queues a control item for `to`, if it is live.
    pub(crate) fn send_control(&self, to: &PeerId, item: Item<'_>) -> Result<(), Refusal> {
        self.send_item(to, item)
    }

    /// Registers what this node waits for from `peer` under `id`.
    pub(crate) fn expect(&self, id: u64, peer: PeerId, pending: Pending) {
        lock(&self.pending).insert(id, (peer, pending));
    }

    /// Takes what waits under `id`, whoever it waits on: this side gives up on it (a timeout,
    /// a dropped future, a peer declared down).
    pub(crate) fn forget_pending(&self, id: u64) -> Option<Pending> {
        lock(&self.pending).remove(&id).map(|(_, pending)| pending)
    }

    /// An answer (`what`) that arrived and did not decode here (`why`: the nodes disagree on
    /// its type, or it is nested deeper than `max_nesting`): counted and traced as a rejected
    /// item, as a message that does not decode is; the asker gets `Decode`.
    pub(crate) fn undecodable_answer(&self, what: &str, why: String) -> super::RemoteError {
        self.stats.rejected_item();
        if let Some(suppressed) = self.warn_budget.take() {
            tracing::warn!(suppressed, error = %why, "{what} did not decode: rejected");
        }
        super::RemoteError::Decode(why)
    }

    /// Takes what waits under `id`, if `from` is the node it waits on: an answer (an ack, a
    /// reply, a `Down`…) comes only from the node its request went to. One from any other
    /// client is rejected (counted, traced) and leaves the wait as it was — ids are a counter,
    /// easy to guess. One for a wait no longer held is counted late (`NodeStats::late_answers`).
    pub(crate) fn take_pending(&self, id: u64, from: &PeerId) -> Option<Pending> {
        let expected = {
            let mut pending = lock(&self.pending);
            match pending.get(&id) {
                Some((peer, _)) if peer == from => {
                    return pending.remove(&id).map(|(_, pending)| pending)
                }
                Some((peer, _)) => peer.name.clone(),
                None => {
                    drop(pending);
                    self.stats.late_answer();
                    tracing::debug!(from = %from.name, id, "an answer for a wait no longer held");
                    return None;
                }
            }
        };
        self.stats.rejected_item();
        if let Some(suppressed) = self.warn_budget.take() {
            tracing::warn!(
                suppressed,
                from = %from.name,
                %expected,
                id,
                "an answer from a node the request did not go to: rejected"
            );
        }
        None
    }

    /// The member with the lowest load, this node included (`None` for this node). A node
    /// whose scheduler is shutting down is no candidate (this one: any other is better).
    pub(crate) fn least_loaded(&self, mine: Load) -> Option<PeerId> {
        let peers = self.peers.read().expect("peers lock");
        let quiet = self.quiet_after();
        let best = peers
            .values()
            .filter(|peer| peer.member && !peer.load.shutting_down)
            .min_by_key(|peer| (quiet(peer), peer.load.score()))?;
        let better = !quiet(best) && best.load.score() < mine.score();
        (mine.shutting_down || better).then(|| best.id.clone())
    }

    /// Whether a peer has been silent for two heartbeats: paused, overloaded or dying, but not
    /// yet declared down (`down_after`). Placement prefers any peer that is not, and this node
    /// over one that is: a spawn sent there would wait, and fail `NoConnection` if it dies.
    fn quiet_after(&self) -> impl Fn(&Peer) -> bool {
        let (now, after) = (Instant::now(), self.heartbeat * 2);
        move |peer| now.saturating_duration_since(peer.last_seen) > after
    }

    /// The least loaded live member among `names` (`Ok(None)` for this node, if `mine` — its
    /// load — is given and lowest); `Err` if none is live.
    pub(crate) fn least_loaded_of(
        &self,
        names: &[String],
        mine: Option<Load>,
    ) -> Result<Option<PeerId>, ()> {
        let peers = self.peers.read().expect("peers lock");
        let quiet = self.quiet_after();
        let best = peers
            .values()
            .filter(|peer| {
                peer.member
                    && !peer.load.shutting_down
                    && names.iter().any(|name| **name == *peer.id.name)
            })
            .min_by_key(|peer| (quiet(peer), peer.load.score()));
        match (best, mine) {
            (Some(best), Some(mine))
                if !mine.shutting_down && (quiet(best) || best.load.score() >= mine.score()) =>
            {
                Ok(None)
            }
            (Some(best), _) => Ok(Some(best.id.clone())),
            (None, Some(_)) => Ok(None),
            (None, None) => Err(()),
        }
    }

    /// Counts a process just placed on `target` (`None`: this node) toward its load, until
    /// that node's next heartbeat says what it runs: a burst of `LeastLoaded` spawns then
    /// spreads over the nodes instead of all going to the one that was least loaded at the
    /// last heartbeats. (A heartbeat measured before the spawn arrived undercounts it until the
    /// next one: at most one heartbeat's worth of skew.)
    pub(crate) fn count_placed(&self, target: Option<&PeerId>) {
        match target {
            None => {
                let mut mine = lock(&self.last_load);
                mine.live = mine.live.saturating_add(1);
            }
            Some(target) => {
                let mut peers = self.peers.write().expect("peers lock");
                if let Some(peer) = peers
                    .get_mut(&target.name)
                    .filter(|peer| peer.id.incarnation == target.incarnation)
                {
                    peer.load.live = peer.load.live.saturating_add(1);
                }
            }
        }
    }

    /// This node's load at its last heartbeat, and what was placed on it since; shutting down
    /// as soon as its scheduler is.
    pub(crate) fn cached_load(&self) -> Load {
        let mut load = *lock(&self.last_load);
        load.shutting_down |= self.sched.is_shutting_down();
        load
    }

    /// The message type live local process `pid` declared (`Some(None)`: none; `None`: no
    /// live process), for the check of what other nodes send it (`registry::check_takes`).
    ///
    /// Cached: asked of the process's cell, it takes the mailbox lock, which the process's
    /// worker holds while it drains — on every message of a stream to one process, a lock the
    /// inbound task and the worker fought over (64 B sends lost 9–24 % of their throughput).
    /// An entry never goes stale: a PID names one incarnation, whose type never changes (a dead
    /// one's send fails `NotFound` after the check). Bounded: cleared when full.
    pub(crate) fn takes(&self, pid: Pid) -> Option<Option<MessageType>> {
        const MOST: usize = 4096;
        if let Some(&known) = lock(&self.takes).get(&pid.as_u64()) {
            return Some(known);
        }
        let found = self.sched.takes(pid)?;
        let mut cache = lock(&self.takes);
        if cache.len() >= MOST {
            cache.clear();
        }
        cache.insert(pid.as_u64(), found);
        Some(found)
    }

    /// This node's load now (surveys every process: once per heartbeat).
    pub(crate) fn load(&self) -> Load {
        let metrics = self.sched.metrics();
        Load {
            incarnation: self.me.incarnation,
            live: self.sched.live_processes() as u64,
            runnable: metrics.processes.ready as u64,
            shutting_down: self.sched.is_shutting_down(),
        }
    }

    /// The [`NodePid`](super::NodePid) of local process `pid`.
    pub(crate) fn node_pid(&self, pid: Pid) -> super::NodePid {
        super::NodePid::new(self.me.name.clone(), self.me.incarnation, pid)
    }
}
