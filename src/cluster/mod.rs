//! Nodes joined through NATS (cargo feature `cluster`): processes on other machines addressed,
//! messaged, asked, spawned and monitored with the same typed API as local ones.
//!
//! A [`Node`] is a scheduler joined to a cluster: it connects to NATS (the `async-nats`
//! client), claims its name in a JetStream key-value bucket and keeps it alive with heartbeats,
//! and exchanges frames with the other nodes on two subjects per node (data and control —
//! never a subscription per process).
//!
//! ```no_run
//! use procsched::cluster::{Cluster, Node, Placement};
//! use procsched::prelude::*;
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! enum Cart { Add(u64), Total(Reply<u64>) }
//!
//! async fn cart(cx: ProcessCx<Cart>, start: u64) -> Result<(), BoxError> {
//!     let mut total = start;
//!     loop {
//!         match cx.recv().await? {
//!             Cart::Add(n) => total += n,
//!             Cart::Total(reply) => { let _ = reply.send(total); }
//!         }
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), BoxError> {
//!     let sched = Scheduler::builder().build()?;
//!     let node = Node::start(
//!         sched.handle(),
//!         Cluster::nats("nats://127.0.0.1:4222")
//!             .name("orders-1")
//!             .message::<Cart>("cart")            // types other nodes may send here, by name
//!             .spawnable("cart", cart),           // bodies other nodes may spawn here
//!     )
//!     .await?;
//!     let pid = node.spawn_on(Placement::LeastLoaded, "cart", 10u64).await?;   // a NodePid
//!     let cart = node.addr::<Cart>(pid.clone());  // the same methods for a local or a remote PID
//!     cart.send(Cart::Add(5))?;                   // at most once, batched, order kept per node pair
//!     assert_eq!(cart.ask(Cart::Total).await?, 15);
//!     let _down = node.monitor(pid);              // Down(NoConnection) if its node dies
//!     Ok(())
//! }
//! ```
//!
//! # Semantics
//! - **PIDs** ([`NodePid`]) name their node and its incarnation (its docs give the layout and
//!   the string form). A PID from a node's previous life fails `NoProc` at once.
//! - **Wire**: MessagePack frames with a version and codec byte; a message type
//!   opts in by deriving `Serialize`/`Deserialize` and being registered by name on both nodes.
//!   Frames batch every message queued for a node while the last publish was in flight. A
//!   `bytes::Bytes` field marked [`shared_bytes`] is decoded as a slice of its frame (no copy). Order
//!   is kept per sending → receiving node, across both subjects: messages and signals (links,
//!   monitors, exits, `Down`, replies) arrive in the order they were sent, as in OTP — a
//!   process's last message arrives before its `Down`, and a monitor set before the message
//!   that stops its target sees the real exit.
//! - **Delivery**: at most once for [`RemoteAddr::send`]; [`RemoteAddr::send_acked`] reports
//!   the receiving node's `NotFound` / `MailboxFull` / `Closed`, or `NoConnection`; asks time
//!   out typed. A PID carries no message type, so the process's node checks [`Node::addr`]'s
//!   `M` against the type its body declared: another is refused
//!   ([`RemoteError::WrongType`]), never delivered to a receive that would fail on it.
//! - **Membership**: a node claims its name once ([`ClusterError::NameTaken`]
//!   while another live node holds it) and heartbeats its load, which placement compares
//!   ([`Placement::LeastLoaded`], [`Placement::AnyOf`]), adding each process this node placed
//!   since the last heartbeats, so that a burst of spawns spreads; a node known only from its
//!   frames, not yet from a heartbeat, is never chosen. A node silent for `down_after` (default 2 s) is
//!   declared down, and so is, at once, a node that a frame *meets no responder* at (its
//!   subscription is gone: the process died or its connection dropped;
//!   `NodeStats::unreached`): its monitors get `Down(NoConnection)`, its links fire
//!   `NoConnection`, pending asks, acked sends and spawns fail with `NoConnection`. A node that
//!   loses its NATS connection keeps running its processes and reconnects (async-nats retries
//!   forever by default).
//! - **Names** ([`Node::whereis`], [`Node::named`]): a process registered on its own node is
//!   looked up from any node by the node's name and its own, as OTP's `{Name, Node}`; there is
//!   no cluster-wide registry. A name is visible once registered: a body's own
//!   `cx.register` runs when it first runs, after `spawn_fn` returned, so a name others must
//!   find at once is registered by the spawner (`SchedulerHandle::register(name, pid)`).
//! - **Spawn refusals** are the local ones: [`RemoteError::Spawn`] carries the far node's
//!   [`SpawnError`](crate::error::SpawnError) (`Limit`, `ShuttingDown`, `Init` — an unregistered
//!   name is `UnknownMethod`, an argument the body cannot decode `Failed`).
//! - **Security**: [`Cluster::connect_options`] passes `async-nats`'s credentials, tokens, NKeys
//!   and TLS (client certificates included) through; NATS accounts and permissions are what
//!   keep a client that is no node from forging frames.
//! - **Bad input**: a malformed, oversized, unregistered or foreign frame is
//!   rejected, counted ([`NodeStats`]) and traced; nothing panics and the subscription lives.
//!   A node spawns only what it registered. A registered type's own code that panics on a
//!   node's task (a message's `Deserialize`, a joined output's `Serialize`) fails that one item
//!   typed (`RemoteError::Decode`, `RemoteError::Ended`); a reply whose `Serialize` panics
//!   fails the ask at once, and the panic goes on to the answering process.
//! - **Supervision across nodes**: [`Node::link`] (OTP semantics), [`Node::monitor_from`] (a
//!   process's monitor of a process on another node: its `Down` arrives in the watcher's
//!   mailbox, naming the node) and [`Node::remote_child`] (a child restarted on a live node when
//!   its node dies).

mod config;
mod inbound;
mod links;
mod membership;
mod names;
mod node;
mod node_pid;
mod outbound;
mod process_monitor;
mod registry;
mod remote;
mod remote_child;
mod reply;
mod runtime;
mod scratch;
pub mod shared_bytes;
mod spawn;
mod stats;
mod wire;

/// The NATS client this crate uses, for [`Cluster::connect_options`].
pub use async_nats as nats;
pub use config::{
    Cluster, DEFAULT_DOWN_AFTER, DEFAULT_HEARTBEAT, DEFAULT_JOIN_TIMEOUT, DEFAULT_MAX_FRAME,
    DEFAULT_REQUEST_TIMEOUT,
};
pub use node_pid::{NodePid, ParseNodePidError};
pub use remote::{RemoteAddr, RemoteDown, RemoteError, RemoteMonitor, RemoteSendError};
pub use remote_child::RemoteChild;
pub use spawn::RemoteHandle;
pub use stats::NodeStats;

use crate::loom::lock;
use crate::process::Pid;
use crate::scheduler::SchedulerHandle;
use node::{NodeShared, PeerId, Pending};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The nodes started in this OS process, for [`Node::for_scheduler`] (weak: they leave when
/// their handles go).
type Started = Vec<(std::sync::Weak<NodeShared>, std::sync::Weak<Life>)>;
static STARTED: Mutex<Started> = Mutex::new(Vec::new());

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
    /// The [`Cluster`] configuration is invalid.
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
    /// Another live node holds this node's name (its heartbeat goes on). A node restarted
    /// under its old name first waits for the dead one's entry to expire (three heartbeats
    /// after its last; the start waits up to five): this is the answer once that wait is over.
    #[error("the node name `{0}` is taken by a live node")]
    NameTaken(String),
}

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
    /// On the node of this name.
    Node(String),
    /// On the node with the least load (live processes and runnable queue, from the
    /// heartbeats, plus the processes this node placed on each since: a burst spreads),
    /// this one included; a tie goes to this node.
    LeastLoaded,
    /// On the least loaded of the live nodes named (this one may be among them), loads
    /// counted as for `LeastLoaded`: what this node placed since the last heartbeats counts.
    AnyOf(Vec<String>),
}

/// A node as the membership shows it ([`Node::nodes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeInfo {
    /// Its name.
    pub name: String,
    /// Its incarnation.
    pub incarnation: u64,
    /// Live processes at its last heartbeat.
    pub live: u64,
    /// Processes ready to run at its last heartbeat.
    pub runnable: u64,
}

/// A scheduler joined to a cluster. Cheap to clone; the node leaves the cluster when the last
/// clone is dropped (its peers then declare it down after `down_after`) or at once with
/// [`leave`](Self::leave).
///
/// # Examples
///
/// See [the module](self).
#[derive(Clone)]
pub struct Node {
    shared: Arc<NodeShared>,
    life: Arc<Life>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("name", &self.shared.me.name)
            .field("incarnation", &self.shared.me.incarnation)
            .finish_non_exhaustive()
    }
}

/// The node's tasks, stopped when the last handle goes.
struct Life {
    shared: Arc<NodeShared>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    store: async_nats::jetstream::kv::Store,
}

impl Life {
    fn stop(&self, why: &str) {
        if self
            .shared
            .stopped
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
        self.shared.all_down(why);
        let pending: Vec<Pending> = lock(&self.shared.pending)
            .drain()
            .map(|(_, (_, p))| p)
            .collect();
        drop(pending); // their waiters see the channel closed: `NoConnection`
        for (_, monitor) in lock(&self.shared.served).drain() {
            monitor.abort();
        }
    }
}

impl Drop for Life {
    fn drop(&mut self) {
        self.stop("this node stopped");
    }
}

impl Node {
    /// Joins the cluster: connects, subscribes to this node's subjects, claims its name (waiting
    /// up to the bucket's max age for a previous life's entry to expire), and starts the
    /// heartbeat and the membership watch. The node's tasks run in the tokio runtime this is
    /// awaited in; awaited outside any (`Scheduler::block_on`, another executor), in the
    /// scheduler's own (the one its processes use: its handler runtime, or the small one it
    /// builds for itself).
    ///
    /// A server that does not answer is given async-nats's connection timeout (5 s by default;
    /// `ConnectOptions::connection_timeout` through [`Cluster::connect_options`]).
    ///
    /// # Errors
    ///
    /// [`ClusterError`]: an invalid configuration, no connection, the name taken by a live node.
    ///
    /// # Examples
    ///
    /// See [the module](self). Outside tokio:
    ///
    /// ```no_run
    /// use procsched::cluster::{Cluster, Node};
    /// use procsched::Scheduler;
    ///
    /// let sched = Scheduler::builder().build()?;
    /// let node = sched.block_on(Node::start(sched.handle(), Cluster::nats("nats://127.0.0.1:4222")))?;
    /// # Ok::<(), procsched::BoxError>(())
    /// ```
    pub async fn start(sched: &SchedulerHandle, cluster: Cluster) -> Result<Node, ClusterError> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Node::start_here(sched, cluster).await;
        }
        let Some(runtime) = sched.tokio_runtime() else {
            return Err(ClusterError::Config(
                "no tokio runtime to run the node in, and the scheduler could not build one"
                    .to_owned(),
            ));
        };
        let sched = sched.clone();
        runtime
            .spawn(async move { Node::start_here(&sched, cluster).await })
            .await
            .map_err(|error| ClusterError::Config(format!("the node's start failed: {error}")))?
    }

    /// [`start`](Self::start), inside the tokio runtime the node will run in.
    async fn start_here(sched: &SchedulerHandle, cluster: Cluster) -> Result<Node, ClusterError> {
        cluster.validate().map_err(ClusterError::Config)?;
        let name: Arc<str> = cluster.name.as_str().into();
        let incarnation = fresh_incarnation();
        let stats = Arc::new(stats::Stats::default());
        let events = stats.clone();
        let options = cluster
            .options
            .unwrap_or_default()
            .name(format!("procsched-{name}"))
            .event_callback(move |event| {
                let stats = events.clone();
                async move {
                    match event {
                        async_nats::Event::SlowConsumer(sid) => {
                            stats.slow_consumer();
                            tracing::warn!(sid, "NATS slow consumer: a frame was dropped");
                        }
                        async_nats::Event::Disconnected => tracing::warn!("NATS disconnected"),
                        async_nats::Event::Connected => tracing::info!("NATS connected"),
                        other => tracing::debug!(event = %other, "NATS event"),
                    }
                }
            });
        let client = options
            .connect(cluster.servers.clone())
            .await
            .map_err(|error| ClusterError::Connect(error.to_string()))?;
        // One subscription for both subjects (`data`, `ctl`): NATS delivers a peer's publishes
        // in the order it made them, and one subscription keeps that order across the two
        // (`outbound.rs` says why it matters).
        let subscriber = client
            .subscribe(format!("{}.node.{name}.*", cluster.prefix))
            .await
            .map_err(|error| ClusterError::Subscribe(error.to_string()))?;
        let shared = Arc::new(NodeShared {
            me: PeerId {
                name: name.clone(),
                incarnation,
            },
            sched: sched.clone(),
            runtime: tokio::runtime::Handle::current(),
            client: client.clone(),
            registry: cluster.registry,
            prefix: cluster.prefix,
            heartbeat: cluster.heartbeat,
            down_after: cluster.down_after,
            request_timeout: cluster.request_timeout,
            max_frame: cluster.max_frame,
            replicas: cluster.replicas,
            peers: RwLock::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            served: Mutex::new(HashMap::new()),
            links: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            stats,
            stopped: AtomicBool::new(false),
            last_load: Mutex::new(node::Load::default()),
            takes: Mutex::new(HashMap::new()),
        });
        *lock(&shared.last_load) = shared.load();
        let membership = membership::join(
            &client,
            &cluster.bucket,
            &name,
            cluster.heartbeat,
            cluster.replicas,
            shared.load(),
            cluster.join_timeout,
        )
        .await
        .map_err(|error| match error {
            membership::JoinError::Taken => ClusterError::NameTaken(name.to_string()),
            membership::JoinError::Failed(why) => ClusterError::Membership(why),
        })?;
        let runtime = &shared.runtime;
        let mut tasks = vec![runtime
            .spawn(inbound::run(shared.clone(), subscriber))
            .abort_handle()];
        let store = membership.store.clone();
        tasks.push(
            runtime
                .spawn(membership::heartbeat(
                    shared.clone(),
                    store.clone(),
                    membership.revision,
                ))
                .abort_handle(),
        );
        tasks.push(
            runtime
                .spawn(membership::watch(shared.clone(), store.clone()))
                .abort_handle(),
        );
        tracing::info!(node = %name, incarnation, "node started");
        let life = Arc::new(Life {
            shared: shared.clone(),
            tasks: Mutex::new(tasks),
            store,
        });
        let mut started = lock(&STARTED);
        started.retain(|(shared, life)| shared.strong_count() > 0 && life.strong_count() > 0);
        started.push((Arc::downgrade(&shared), Arc::downgrade(&life)));
        Ok(Node { shared, life })
    }

    /// The node that scheduler `sched` is joined as, if any: how a process body (spawned by
    /// another node, say) reaches its node without capturing it — a body registered with
    /// [`Cluster::spawnable`] cannot capture the node that is built from it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use procsched::cluster::{Node, NodePid};
    /// use procsched::prelude::*;
    ///
    /// async fn forwarder(cx: ProcessCx<u64>, to: NodePid) -> Result<(), BoxError> {
    ///     let node = Node::for_scheduler(&cx.scheduler()).ok_or("not a node")?;
    ///     let n = cx.recv().await?;
    ///     node.addr::<u64>(to).send(n + 1)?;
    ///     Ok(())
    /// }
    /// ```
    pub fn for_scheduler(sched: &SchedulerHandle) -> Option<Node> {
        lock(&STARTED).iter().rev().find_map(|(shared, life)| {
            let (shared, life) = (shared.upgrade()?, life.upgrade()?);
            if !shared.sched.same_scheduler(sched)
                || shared.stopped.load(std::sync::atomic::Ordering::Acquire)
            {
                return None;
            }
            Some(Node { shared, life })
        })
    }

    /// This node's name.
    ///
    /// # Examples
    ///
    /// See [the module](self).
    pub fn name(&self) -> &str {
        &self.shared.me.name
    }

    /// This node's incarnation: drawn at random when it started.
    ///
    /// # Examples
    ///
    /// See [the module](self).
    pub fn incarnation(&self) -> u64 {
        self.shared.me.incarnation
    }

    /// The cluster-wide PID of local process `pid`.
    ///
    /// # Examples
    ///
    /// See [the module](self).
    pub fn pid(&self, pid: Pid) -> NodePid {
        self.shared.node_pid(pid)
    }

    /// The typed address of process `pid`, on this node or another.
    ///
    /// # Examples
    ///
    /// See [the module](self).
    pub fn addr<M: Serialize + Send + 'static>(&self, pid: NodePid) -> RemoteAddr<M> {
        RemoteAddr::new(self.shared.clone(), pid)
    }

    /// Monitors process `pid`, on this node or another: exactly one [`RemoteDown`] when it
    /// ends, `NoProc` at once if it is already gone (or from a previous life of its node),
    /// `NoConnection` if its node is or becomes unreachable.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use procsched::cluster::{Node, NodePid};
    /// use procsched::supervision::ExitReason;
    ///
    /// # async fn demo(node: Node, pid: NodePid) {
    /// let down = node.monitor(pid).await;
    /// match down.reason {
    ///     ExitReason::Normal => {}
    ///     // Its node died (SIGKILL, a partition) or left: the process may be gone with it.
    ///     ExitReason::NoConnection => eprintln!("lost {}'s node", down.pid),
    ///     // Already gone when the monitor was set, or a PID from the node's previous life.
    ///     ExitReason::NoProc => {}
    ///     other => eprintln!("{} ended: {other}", down.pid),
    /// }
    /// # }
    /// ```
    pub fn monitor(&self, pid: NodePid) -> RemoteMonitor {
        RemoteMonitor::new(&self.shared, pid)
    }

    /// Process `watcher` (of this node) monitors process `target`, on this node or another, as
    /// [`ProcessCx::monitor`](crate::ProcessCx::monitor) does locally (OTP's
    /// `monitor(process, Pid)`): exactly one [`Down`](crate::supervision::Down) arrives in
    /// `watcher`'s mailbox — `cx.recv_down()`, `cx.recv_any()`, or `Event::Down` in a state
    /// machine — when `target` ends; `NoProc` if it is already gone (or from a previous life of
    /// its node), `NoConnection` if its node is or becomes unreachable. The `Down` of a process
    /// on another node names that node in its `node` field
    /// ([`NodePid::of_down`] rebuilds the PID), and comes after every message `target` sent
    /// this node before it ended. [`ProcessCx::demonitor`](crate::ProcessCx::demonitor) with
    /// the returned reference ends it.
    ///
    /// # Errors
    ///
    /// [`RemoteError::NotFound`] if `watcher` is not a live process of this node.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use procsched::prelude::*;
    /// # async fn demo(node: procsched::cluster::Node, remote: procsched::cluster::NodePid, cx: ProcessCx) -> Result<(), BoxError> {
    /// let monitor = node.monitor_from(cx.pid(), &remote)?;
    /// let down = cx.recv_down().await?;        // when `remote` ends, or its node dies
    /// assert_eq!(down.monitor, monitor);
    /// let pid = procsched::cluster::NodePid::of_down(&down);
    /// println!("{pid:?} ended: {}", down.reason);
    /// # Ok(()) }
    /// ```
    pub fn monitor_from(
        &self,
        watcher: Pid,
        target: &NodePid,
    ) -> Result<crate::supervision::MonitorRef, RemoteError> {
        process_monitor::monitor_from(&self.shared, watcher, target)
    }

    /// Links local process `local` and process `remote`, on this node or another, with OTP's
    /// semantics: when either ends with any reason but `Normal`, the other ends with the same
    /// reason unless it traps exits (then it receives an [`Exit`](crate::supervision::Exit)
    /// whose `node` names the other node). If `remote`'s node dies, `local` gets `NoConnection`;
    /// if `remote` is already gone, `NoProc`.
    ///
    /// # Errors
    ///
    /// [`RemoteError::NotFound`] if `local` is not a live process of this node.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use procsched::prelude::*;
    /// # use procsched::cluster::{Node, NodePid};
    /// # async fn demo(node: Node, remote: NodePid, cx: ProcessCx) -> Result<(), BoxError> {
    /// cx.trap_exit(true);
    /// node.link(cx.pid(), &remote)?;
    /// let exit = cx.recv_exit().await?;      // when `remote` ends, or its node dies
    /// if let Some(remote) = NodePid::of_exit(&exit) {
    ///     println!("{remote} ended: {}", exit.reason);  // its node, incarnation and PID
    /// }
    /// # Ok(()) }
    /// ```
    pub fn link(&self, local: Pid, remote: &NodePid) -> Result<(), RemoteError> {
        links::link(&self.shared, local, remote)
    }

    /// Removes the link between `local` and `remote`, both directions; no exit signal of that
    /// link is delivered afterwards.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(node: procsched::cluster::Node, local: procsched::Pid, remote: procsched::cluster::NodePid) {
    /// node.unlink(local, &remote);
    /// # }
    /// ```
    pub fn unlink(&self, local: Pid, remote: &NodePid) {
        links::unlink(&self.shared, local, remote);
    }

    /// Asks process `pid`, on this node or another, to finish: it receives a cancellation and
    /// ends `Shutdown` if it honours it (as [`SchedulerHandle::cancel`]). Fire-and-forget
    /// across nodes.
    ///
    /// # Errors
    ///
    /// `NotFound` / `NoProc` / `NoConnection` when known here.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn demo(node: procsched::cluster::Node, pid: procsched::cluster::NodePid) {
    /// let _ = node.stop(&pid);
    /// # }
    /// ```
    pub fn stop(&self, pid: &NodePid) -> Result<(), RemoteError> {
        links::stop(&self.shared, pid, false)
    }

    /// Terminates process `pid`, on this node or another (as
    /// [`SchedulerHandle::terminate`]): it ends `Killed`.
    ///
    /// # Errors
    ///
    /// As [`stop`](Self::stop).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn demo(node: procsched::cluster::Node, pid: procsched::cluster::NodePid) {
    /// let _ = node.kill(&pid);
    /// # }
    /// ```
    pub fn kill(&self, pid: &NodePid) -> Result<(), RemoteError> {
        links::stop(&self.shared, pid, true)
    }

    /// The other live nodes, as their last heartbeats describe them. A node this one has only
    /// received frames from, whose heartbeat it has not read yet, is not listed (nor chosen by
    /// a placement): any client of the server can put a name on a frame.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn demo(node: procsched::cluster::Node) {
    /// for peer in node.nodes() {
    ///     let (name, live, runnable) = (&peer.name, peer.live, peer.runnable);
    ///     eprintln!("{name}: {live} live processes, {runnable} ready to run");
    /// }
    /// # }
    /// ```
    pub fn nodes(&self) -> Vec<NodeInfo> {
        let mut nodes: Vec<NodeInfo> = self
            .shared
            .peers
            .read()
            .expect("peers lock")
            .values()
            .filter(|peer| peer.member)
            .map(|peer| NodeInfo {
                name: peer.id.name.to_string(),
                incarnation: peer.id.incarnation,
                live: peer.load.live,
                runnable: peer.load.runnable,
            })
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        nodes
    }

    /// Waits until this node sees at least `count` other live nodes (as [`nodes`](Self::nodes)
    /// lists them), or `timeout` passes; `true` if it does.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(node: procsched::cluster::Node) {
    /// if node.wait_for_nodes(2, std::time::Duration::from_secs(5)).await {
    ///     assert!(node.nodes().len() >= 2);
    /// }
    /// # }
    /// ```
    pub async fn wait_for_nodes(&self, count: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        runtime::in_runtime(&self.shared.runtime, async {
            loop {
                let members = {
                    let peers = self.shared.peers.read().expect("peers lock");
                    peers.values().filter(|peer| peer.member).count()
                };
                if members >= count {
                    return true;
                }
                if Instant::now() >= deadline {
                    return false;
                }
                tokio::time::sleep(self.shared.heartbeat / 4).await;
            }
        })
        .await
    }

    /// The node's counters.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn demo(node: procsched::cluster::Node) {
    /// let stats = node.stats();
    /// assert_eq!(stats.rejected_frames, 0, "nobody sent us garbage");
    /// # }
    /// ```
    pub fn stats(&self) -> NodeStats {
        let mut stats = self.shared.stats.snapshot();
        stats.monitors_served = lock(&self.shared.served).len() as u64;
        stats
    }

    /// Leaves the cluster now: deletes this node's membership entry (the others declare it down
    /// at once), stops its tasks and fails what it waits for with `NoConnection`. Its
    /// scheduler and processes keep running.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(node: procsched::cluster::Node) {
    /// node.leave().await;
    /// # }
    /// ```
    pub async fn leave(self) {
        runtime::in_runtime(&self.shared.runtime, async {
            let _ = self.life.store.delete(&*self.shared.me.name).await;
            let _ = self.shared.client.flush().await;
        })
        .await;
        self.life.stop("this node left");
    }
}

/// A random, non-zero incarnation: the standard library's per-process random hash keys, mixed
/// with the clock.
fn fresh_incarnation() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or_default(),
    );
    hasher.write_u32(std::process::id());
    hasher.finish().max(1)
}

#[cfg(test)]
mod tests {
    /// The code of the first block opening with `open` in `text`, `prefix` stripped from
    /// each line.
    fn block<'a>(text: &'a str, open: &str, prefix: &str) -> Vec<&'a str> {
        let lines: Vec<&str> = text.lines().collect();
        let start = lines
            .iter()
            .position(|line| line.strip_prefix(prefix).unwrap_or(line).trim_end() == open)
            .unwrap_or_else(|| panic!("no block opens with {open:?}"));
        lines[start + 1..]
            .iter()
            .map(|line| {
                line.strip_prefix(prefix)
                    .unwrap_or(line.trim_start_matches(prefix.trim_end()))
            })
            .take_while(|line| *line != "```")
            .collect()
    }

    /// The README is compiled by rustdoc without the `cluster` feature, so its cluster example
    /// cannot be a doctest there; this module's example is, with the feature. They must be the
    /// same code, so that the README's compiles too.
    #[test]
    fn the_readme_cluster_example_is_this_modules_compiled_example() {
        let readme = block(include_str!("../../README.md"), "```rust,ignore", "");
        let module = block(include_str!("mod.rs"), "```no_run", "//! ");
        assert!(
            readme.len() > 20,
            "the README's cluster example: {readme:#?}"
        );
        assert_eq!(
            readme, module,
            "README.md's cluster example and src/cluster/mod.rs's differ"
        );
    }
}
