//! Joining the cluster ([`Node::start`]), the node's life — its tasks, stopped when the last
//! handle goes or at [`Node::leave`] — and finding the node a scheduler runs as
//! ([`Node::for_scheduler`]).

use super::node::{self, NodeShared, PeerId, Pending};
use super::severance::Severances;
use super::unreached::Secret;
use super::{dropped_frames, inbound, membership, runtime, stats};
use super::{Cluster, ClusterError, Node};
use crate::loom::lock;
use crate::scheduler::SchedulerHandle;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};

/// The nodes started in this OS process, for [`Node::for_scheduler`] (weak: they leave when
/// their handles go).
type Started = Vec<(std::sync::Weak<NodeShared>, std::sync::Weak<Life>)>;
static STARTED: Mutex<Started> = Mutex::new(Vec::new());

/// The node's tasks, stopped when the last handle goes.
pub(super) struct Life {
    shared: Arc<NodeShared>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Also in `tasks`: stopped first by [`Node::leave`].
    heartbeat: tokio::task::AbortHandle,
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
    /// See [the module](super). Outside tokio:
    ///
    /// ```no_run
    /// use procsched::cluster::{Cluster, Node};
    /// use procsched::Scheduler;
    ///
    /// let sched = Scheduler::builder().build()?;
    /// let cluster = Cluster::nats("nats://127.0.0.1:4222").name("orders-1");
    /// let node = sched.block_on(Node::start(sched.handle(), cluster))?;
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
        // Dropped frames end the sessions with every peer (`dropped_frames.rs`).
        let dropped = Arc::new(tokio::sync::Notify::new());
        let drops = dropped.clone();
        let options = cluster
            .options
            .unwrap_or_default()
            .name(format!("procsched-{name}"))
            .event_callback(move |event| {
                let (stats, drops) = (events.clone(), drops.clone());
                async move {
                    match event {
                        async_nats::Event::SlowConsumer(sid) => {
                            stats.slow_consumer();
                            drops.notify_one();
                            tracing::debug!(sid, "NATS slow consumer: a frame was dropped");
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
        // A frame over the server's payload limit is never published: refuse the configuration
        // now rather than fail every such send later with a timeout.
        let max_payload = client.server_info().max_payload;
        if max_payload != 0 && cluster.max_frame > max_payload {
            return Err(ClusterError::Config(format!(
                "max_frame ({} bytes) is over the server's max_payload ({max_payload} bytes)",
                cluster.max_frame
            )));
        }
        // One subscription for both subjects (`data`, `ctl`): NATS delivers a peer's publishes
        // in the order it made them, and one subscription keeps that order across the two
        // (`outbound.rs` says why it matters).
        let subscriber = client
            .subscribe(format!("{}.node.{name}.*", cluster.prefix))
            .await
            .map_err(|error| ClusterError::Subscribe(error.to_string()))?;
        let (departures, departures_in) = tokio::sync::mpsc::unbounded_channel();
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
            max_backlog: cluster.max_backlog,
            max_nesting: cluster.max_nesting,
            replicas: cluster.replicas,
            unreached: Secret::fresh(),
            peers: RwLock::new(HashMap::new()),
            severances: Severances::default(),
            departed: Default::default(),
            pending: Mutex::new(HashMap::new()),
            served: Mutex::new(HashMap::new()),
            links: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            stats,
            warn_budget: Default::default(),
            down_budget: Default::default(),
            stopped: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            on_evicted: tokio::sync::Notify::new(),
            departures,
            departing: Mutex::new(std::collections::HashSet::new()),
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
            membership::JoinError::Config(why) => ClusterError::Config(why),
        })?;
        let runtime = &shared.runtime;
        let mut tasks = vec![runtime
            .spawn(inbound::run(shared.clone(), subscriber, departures_in))
            .abort_handle()];
        let store = membership.store.clone();
        let heartbeat = runtime.spawn(membership::heartbeat(
            shared.clone(),
            store.clone(),
            membership.revision,
        ));
        tasks.push(heartbeat.abort_handle());
        let heartbeat = heartbeat.abort_handle();
        tasks.push(
            runtime
                .spawn(membership::watch(shared.clone(), store.clone()))
                .abort_handle(),
        );
        tasks.push(
            runtime
                .spawn(dropped_frames::sever_peers(shared.clone(), dropped))
                .abort_handle(),
        );
        tracing::info!(node = %name, incarnation, "node started");
        let life = Arc::new(Life {
            shared: shared.clone(),
            tasks: Mutex::new(tasks),
            heartbeat,
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

    /// Leaves the cluster now: publishes what it has queued for other nodes (answers it gave,
    /// messages its processes sent before), then deletes this node's membership entry (the
    /// others declare it down once they have read its frames published before; a node that
    /// lost its name, [`Node::is_evicted`], or whose entry another incarnation holds, leaves
    /// the entry to its holder; what the others read from it after that delivers its messages
    /// but does not bring it back), stops its tasks and fails what it waits for with
    /// `NoConnection`. Each of the two steps takes at most `down_after` (so `leave` returns
    /// within twice that when NATS is out of reach). Once the first has begun, a send to
    /// another node fails `NoConnection`; after `leave`, so does everything a clone of this
    /// `Node` still in use asks of another node (a spawn placed by load or on another node, a
    /// `whereis` there). Its scheduler and processes keep running. Started again on the same
    /// scheduler, the node has a new incarnation: the cluster-wide PIDs of the processes still
    /// running from its previous life named that life, and are `NoProc` to others now (a
    /// node's death ends its processes' reachability, as a restarted node's would); hand out
    /// [`Node::pid`]s afresh.
    ///
    /// A node that leaves while its NATS server is out of reach releases everything but its
    /// connection: async-nats (0.51) keeps retrying in its connection task, holding the old
    /// socket, and reads that the client is gone only once it reconnects — one task and one
    /// file descriptor until the server is back.
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
            let me = &self.shared.me;
            // The heartbeat first: a beat after the delete would find the entry gone and claim
            // the name again, and the node would seem alive until the sweep.
            self.life.heartbeat.abort();
            // Then its last frames (answers given, messages sent before `leave`), published and
            // flushed to the server before the delete: the others read them before they read
            // the departure (`inbound.rs`, "Departures"). Bounded, as every step here: a node
            // cut off from NATS leaves all the same (async-nats holds a flush until it is back).
            let bound = self.shared.down_after;
            let drained = async {
                self.shared.close_lanes().await;
                let _ = self.shared.client.flush().await;
            };
            let _ = tokio::time::timeout(bound, drained).await;
            // Only this node's own entry, at the revision read: not that of a node that took
            // the name after this one lost it (`eviction.rs`), or while the drain took longer
            // than the entry lives — that node's peers would declare it down.
            let delete = async {
                if self.shared.is_evicted() {
                    return;
                }
                if let Some((incarnation, revision)) =
                    membership::holder(&self.life.store, &me.name).await
                {
                    if incarnation == me.incarnation {
                        let _ = self
                            .life
                            .store
                            .delete_expect_revision(&*me.name, Some(revision))
                            .await;
                    }
                }
                let _ = self.shared.client.flush().await;
            };
            let _ = tokio::time::timeout(bound, delete).await;
        })
        .await;
        self.life.stop("this node left");
    }
}

/// A new incarnation: the node's start time in milliseconds since the Unix epoch (the high
/// 44 bits: until the year 2527), then 20 random bits. So the lives of one name order by their
/// start — a PID of a newer life than the one a node knows is not taken for an older one's
/// (`NodeShared::other_life`) — and two nodes started in the same millisecond still differ.
fn fresh_incarnation() -> u64 {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64);
    (((millis & ((1 << 44) - 1)) << 20) | (random_u64() & ((1 << 20) - 1))).max(1)
}

/// Whether `incarnation` could be a node's start drawn by [`fresh_incarnation`]: its time
/// part is not more than a day ahead of this machine's clock. An earlier release drew
/// incarnations at random; most of those read centuries ahead, and a PID carrying one must not
/// pass for a newer life's.
pub(crate) fn could_have_started(incarnation: u64) -> bool {
    const DAY_MS: u64 = 24 * 60 * 60 * 1000;
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64);
    incarnation >> 20 <= millis.saturating_add(DAY_MS)
}

/// A random, non-zero number: the standard library's per-process random hash keys (drawn from
/// the operating system's generator), mixed with the clock and the process id.
pub(crate) fn random_u64() -> u64 {
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
    use super::fresh_incarnation;

    #[test]
    fn an_incarnation_is_its_start_in_milliseconds_then_random_bits() {
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64
        };
        let before = now();
        let drawn: Vec<u64> = (0..64).map(|_| fresh_incarnation()).collect();
        let after = now();
        for incarnation in &drawn {
            assert!(
                (before..=after).contains(&(incarnation >> 20)),
                "{incarnation:x}"
            );
        }
        // The random bits tell apart lives started in one millisecond.
        let distinct: std::collections::HashSet<_> = drawn.iter().collect();
        assert!(distinct.len() > 60, "{} distinct of 64", distinct.len());
    }
}
