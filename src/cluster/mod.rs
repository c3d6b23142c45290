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
//! - **Delivery**: at most once for [`RemoteAddr::send`], which never waits (a sender faster
//!   than the link queues frames in memory: the lane to that node, then async-nats's client
//!   buffer; past [`Cluster::max_backlog`] a send is refused, [`RemoteError::Backlogged`] with
//!   its message; [`RemoteAddr::send_wait`] waits for room instead, and `send_acked` and asks
//!   are never refused for it); [`RemoteAddr::send_acked`] reports
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
//!   `NodeStats::unreached`) unless this node added it less than a heartbeat ago: its monitors get `Down(NoConnection)`, its links fire
//!   `NoConnection`, pending asks, acked sends and spawns fail with `NoConnection`. A node that
//!   loses its NATS connection keeps running its processes and reconnects (async-nats retries
//!   forever by default); one that finds its name claimed by another node meanwhile has lost
//!   it ([`Node::is_evicted`]): every peer is down to it, its remote operations fail
//!   `NoConnection`. A node whose NATS client drops frames because it read them too slowly
//!   (a slow consumer: `ConnectOptions::subscription_capacity`; `NodeStats::slow_consumers`)
//!   declares every peer down the same way: a dropped frame may have held a `Down` or an exit
//!   signal, which would otherwise be waited for forever; the peers take each other back as
//!   fresh sessions with their next frames.
//! - **Names** ([`Node::whereis`], [`Node::named`]): a process registered on its own node is
//!   looked up from any node by the node's name and its own, as OTP's `{Name, Node}`; there is
//!   no cluster-wide registry. A name is visible once registered: a body's own
//!   `cx.register` runs when it first runs, after `spawn_fn` returned, so a name others must
//!   find at once is registered by the spawner (`SchedulerHandle::register(name, pid)`).
//! - **Spawn refusals** are the local ones: [`RemoteError::Spawn`] carries the far node's
//!   [`SpawnError`](crate::error::SpawnError) (`Limit`, `ShuttingDown`, `Init` — an unregistered
//!   name is `UnknownMethod`, an argument the body cannot decode `Failed`). A remote spawn's
//!   mailbox bound is the one its body was registered with on the node that runs it
//!   ([`Cluster::spawnable_with`], [`Cluster::spawnable_process_with`]), else that node's
//!   scheduler's: the host decides what its processes may hold, not the request.
//! - **Security**: [`Cluster::connect_options`] passes `async-nats`'s credentials, tokens, NKeys
//!   and TLS (client certificates included) through; NATS accounts and permissions are what
//!   keep a client that is no node from forging frames (publish rights on `<prefix>.node.>`)
//!   and from writing the membership bucket (`$KV.<bucket>.>` and the JetStream API): nodes
//!   trust both, as OTP's nodes trust whoever holds the cookie (the README's "Bad input"
//!   says what a client with those rights can do).
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
mod decoding;
mod departed;
mod dropped_frames;
mod error;
mod eviction;
mod inbound;
mod links;
mod membership;
mod names;
mod nesting;
mod node;
mod node_pid;
mod outbound;
mod peers;
mod process_monitor;
mod registry;
mod remote;
mod remote_ask_command;
mod remote_child;
mod remote_monitor;
mod reply;
mod runtime;
mod scratch;
mod severance;
pub mod shared_bytes;
mod spawn;
mod start;
mod stats;
mod unreached;
mod warn_budget;
mod wire;

/// The NATS client this crate uses, for [`Cluster::connect_options`].
pub use async_nats as nats;
pub use config::{
    Cluster, DEFAULT_DOWN_AFTER, DEFAULT_HEARTBEAT, DEFAULT_JOIN_TIMEOUT, DEFAULT_MAX_BACKLOG,
    DEFAULT_MAX_FRAME, DEFAULT_MAX_NESTING, DEFAULT_REQUEST_TIMEOUT,
};
pub use error::{ClusterError, RemoteError, RemoteSendError};
pub use node_pid::{NodePid, ParseNodePidError};
pub use remote::RemoteAddr;
pub use remote_child::RemoteChild;
pub use remote_monitor::{RemoteDown, RemoteMonitor};
pub use spawn::{Placement, RemoteHandle};
pub use stats::NodeStats;

use crate::loom::lock;
use crate::process::Pid;
use node::NodeShared;
use serde::Serialize;
use start::Life;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A node as the membership shows it ([`Node::nodes`]).
///
/// # Examples
///
/// ```no_run
/// # async fn demo(node: procsched::cluster::Node) {
/// for peer in node.nodes() {
///     println!("{} ({:016x}): {} live, {} runnable", peer.name, peer.incarnation, peer.live, peer.runnable);
/// }
/// # }
/// ```
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
    /// Its scheduler was shutting down at its last heartbeat: it spawns nothing more, and
    /// placement (`LeastLoaded`, `AnyOf`) passes it over; its processes still take messages
    /// until they end.
    pub shutting_down: bool,
}

/// A scheduler joined to a cluster. Cheap to clone; the node leaves the cluster when the last
/// clone is dropped (its peers then declare it down after `down_after`) or at once with
/// [`leave`](Self::leave).
///
/// # Examples
///
/// ```no_run
/// use procsched::cluster::{Cluster, Node};
/// use procsched::prelude::*;
///
/// # async fn demo() -> Result<(), BoxError> {
/// let sched = Scheduler::builder().build()?;
/// let node = Node::start(sched.handle(), Cluster::nats("nats://127.0.0.1:4222").name("orders-1")).await?;
/// let also = node.clone();                 // the same node: it stays joined while a clone lives
/// assert_eq!(also.name(), "orders-1");
/// node.leave().await;                      // peers see it down at once, not after `down_after`
/// # Ok(())
/// # }
/// ```
///
/// [The module](self) shows a node serving messages, asks and spawns.
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

impl Node {
    /// This node's name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(node: procsched::cluster::Node) {
    /// tracing::info!(node = node.name(), "joined");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.shared.me.name
    }

    /// This node's incarnation: its start time in milliseconds and 20 random bits, drawn when
    /// it started (`NodePid`'s "Layout and limits").
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(node: procsched::cluster::Node) -> Result<(), procsched::BoxError> {
    /// // Every PID of this node's processes carries it: a PID from a previous life is `NoProc`.
    /// let idle = node.scheduler().spawn_fn(|cx: procsched::ProcessCx<()>| async move { cx.cancelled().await })?;
    /// let pid = node.pid(idle.pid());
    /// assert_eq!(pid.incarnation(), node.incarnation());
    /// # Ok(())
    /// # }
    /// ```
    pub fn incarnation(&self) -> u64 {
        self.shared.me.incarnation
    }

    /// The cluster-wide PID of local process `pid`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use procsched::prelude::*;
    ///
    /// # async fn demo(node: procsched::cluster::Node) -> Result<(), BoxError> {
    /// let echo = node.scheduler().spawn_fn(|cx: ProcessCx<String>| async move {
    ///     while let Ok(line) = cx.recv().await { tracing::info!(%line); }
    ///     Ok::<_, BoxError>(())
    /// })?;
    /// // A PID other nodes can use, e.g. sent to them inside a message or logged.
    /// let pid = node.pid(echo.pid());
    /// assert_eq!(pid.node(), node.name());
    /// println!("{pid}");                  // orders-1@<incarnation>/<slot>.<generation>
    /// # Ok(())
    /// # }
    /// ```
    pub fn pid(&self, pid: Pid) -> NodePid {
        self.shared.node_pid(pid)
    }

    /// The typed address of process `pid`, on this node or another.
    ///
    /// `M` is not checked by the compiler (a [`NodePid`] carries no type): the process's node
    /// checks it against the type its body declared and refuses another
    /// ([`RemoteError::WrongType`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use procsched::cluster::{Node, NodePid};
    /// use procsched::prelude::*;
    ///
    /// # async fn demo(node: Node, pid: NodePid) -> Result<(), BoxError> {
    /// let greeter = node.addr::<String>(pid);   // `String` registered on both nodes
    /// greeter.send("hello".to_string())?;       // at most once
    /// greeter.send_acked("again".to_string()).await?;   // the far node says it was delivered
    /// # Ok(())
    /// # }
    /// ```
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
    /// if `remote` is already gone, `NoProc`. A node that is no member (never joined, or left)
    /// is not an error here: the link is made, and `local` gets `NoConnection` — as
    /// it would from a member that died a moment later.
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
    /// ends `Shutdown` if it honours it (as [`SchedulerHandle::cancel`](crate::SchedulerHandle::cancel)). Fire-and-forget
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
    /// [`SchedulerHandle::terminate`](crate::SchedulerHandle::terminate)): it ends `Killed`.
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
                shutting_down: peer.load.shutting_down,
            })
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        nodes
    }

    /// Waits until this node sees at least `count` other live nodes (as [`nodes`](Self::nodes)
    /// lists them), or `timeout` passes; `true` if it does.
    ///
    /// A node is seen once its membership entry is read. With one NATS server its subscription
    /// is in place by then; across the servers of a NATS cluster it reaches this node's server
    /// on its own path and may trail the entry by a moment, and a frame sent to the new node in
    /// that moment is lost as NATS loses it (a `send`; a `send_acked`, `ask` or `spawn_on` fails
    /// [`RemoteError::TimedOut`] and may be retried). It is not taken for the node's death.
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
        let deadline = crate::deadline::after(timeout);
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

    /// Declares node `name` down here, as if it had died (OTP's `erlang:disconnect_node`):
    /// every link between this node's processes and its processes fires `NoConnection`, every
    /// monitor of its processes resolves `Down(NoConnection)`, asks, acked sends, spawns and
    /// remote handles waiting on it fail `NoConnection`, and the monitors it held here are
    /// dropped. `true` if it was live here; `false` for an unknown node or this one.
    ///
    /// The other node hears of it — in the next frame this node sends it, or in this node's
    /// next heartbeat — and does the same for this node, so both sides agree that the session
    /// is over (a supervised child on the other node then stops with its link to its
    /// supervisor, instead of running beside the replacement its supervisor starts). What it
    /// sent before hearing is dropped ([`NodeStats::stale_frames`]). The nodes then reconnect
    /// by themselves, as OTP's do on their next contact: the other node is a peer again once
    /// its next heartbeat is read, and new links, monitors and asks work as before.
    ///
    /// A node declares a peer down this way on its own evidence too — no heartbeat for
    /// `down_after`, or a frame that met no responder — and the same holds then: a node that
    /// was only cut off (its server restarted, say) hears that it was declared down.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn demo(node: procsched::cluster::Node) {
    /// if node.disconnect("orders-2") {
    ///     // Links to its processes have fired; monitors of them have resolved.
    /// }
    /// # }
    /// ```
    pub fn disconnect(&self, name: &str) -> bool {
        self.shared.sever_as(
            name,
            None,
            "disconnected here (`Node::disconnect`)",
            peers::Count::Always,
        )
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
        stats.backlog_bytes = self.shared.backlog() as u64;
        stats.waits = lock(&self.shared.pending).len() as u64;
        stats
    }
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
