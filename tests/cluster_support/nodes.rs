//! Nodes for a test: one scheduler (one worker) and one node per name, on the given cluster
//! configuration, returned once every node sees all the others; and the processes tests run
//! across them (a supervisor of remote children, a linked local process).

use procsched::cluster::{Cluster, Node, NodePid, Placement, RemoteChild};
use procsched::prelude::*;
use procsched::supervision::{Exit, Incoming, Signal, Supervisor, SupervisorRef};
use std::time::Duration;

/// A node `name` on the server at `url` that is declared down only when it leaves (heartbeats
/// every 200 ms, `down_after` longer than any test) and whose requests wait up to `guard`: the
/// base of the tests that are not about a node's death.
pub(crate) fn steady_cluster(url: &str, name: &str, guard: Duration) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(200))
        .down_after(Duration::from_secs(60))
        .request_timeout(guard)
}

/// Starts a node named after each of `names` with `cluster(name)`; panics (failing the test)
/// if one does not start or the nodes do not see each other within `guard` (a hang guard).
pub(crate) async fn start_nodes(
    names: &[&str],
    cluster: impl Fn(&str) -> Cluster,
    guard: Duration,
) -> Vec<(Scheduler, Node)> {
    let mut nodes = Vec::new();
    for &name in names {
        let sched = Scheduler::builder().workers(1).build().expect("scheduler");
        let node = Node::start(sched.handle(), cluster(name))
            .await
            .unwrap_or_else(|e| panic!("node {name} did not start: {e}"));
        nodes.push((sched, node));
    }
    for (_, node) in &nodes {
        assert!(
            node.wait_for_nodes(names.len() - 1, guard).await,
            "hang guard: node {} never saw the others",
            node.name()
        );
    }
    nodes
}

/// Stops what [`start_nodes`] started: each node leaves its cluster (its peers see it go at
/// once), then its scheduler shuts down within `guard`.
pub(crate) async fn stop_nodes(nodes: Vec<(Scheduler, Node)>, guard: Duration) {
    for (sched, node) in nodes {
        node.leave().await;
        sched.shutdown_async(guard).await;
    }
}

/// Starts, on `node`'s scheduler, a one-for-one supervisor of `count` children, each the body
/// registered as `body` on the nodes `placement` picks, spawned with its index (`0..count`) as
/// its argument: restarted where `placement` says when it ends, its node's death included.
pub(crate) async fn supervise_remote(
    node: &Node,
    placement: Placement,
    body: &str,
    count: u64,
) -> (SupervisorRef, Vec<RemoteChild>) {
    let mut supervisor = Supervisor::one_for_one().max_restarts(100, Duration::from_secs(60));
    let mut children = Vec::new();
    for n in 0..count {
        let (spec, child) = node
            .remote_child(&format!("worker-{n}"), placement.clone(), body, n)
            .expect("the index encodes");
        supervisor = supervisor.child(spec);
        children.push(child);
    }
    let supervisor = supervisor
        .start(&node.scheduler())
        .await
        .expect("the supervisor starts");
    (supervisor, children)
}

/// Starts, on `node`'s scheduler, a one-for-one supervisor (at most `max_restarts` in a minute)
/// of one child, the body registered as `"cart"` pinned to node `on` and spawned with 7; returns
/// it with the child's first instance, once it runs (within `guard`, a hang guard).
pub(crate) async fn supervise_pinned(
    node: &Node,
    on: &str,
    max_restarts: u32,
    guard: Duration,
) -> (SupervisorRef, RemoteChild, NodePid) {
    let (spec, child) = node
        .remote_child("pinned", Placement::Node(on.into()), "cart", 7u64)
        .expect("the argument encodes");
    let supervisor = Supervisor::one_for_one()
        .max_restarts(max_restarts, Duration::from_secs(60))
        .child(spec)
        .start(&node.scheduler())
        .await
        .expect("the supervisor starts");
    let first = tokio::time::timeout(guard, child.running())
        .await
        .expect("hang guard: the child never ran");
    assert_eq!(first.node(), on);
    (supervisor, child, first)
}

/// Waits until `child` runs as a PID `until` accepts, and returns it; panics (failing the test)
/// if it does not within `guard` (a hang guard).
pub(crate) async fn wait_child(
    child: &RemoteChild,
    until: impl Fn(&NodePid) -> bool,
    guard: Duration,
) -> NodePid {
    let deadline = tokio::time::Instant::now() + guard;
    loop {
        match child.pid() {
            Some(pid) if until(&pid) => return pid,
            _ => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "hang guard: the child never ran as asked ({:?})",
                    child.pid()
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// A local process on `sched` linked through `node` to `remote`, trapping exits if `trap`: it
/// returns the exit signal it traps (`Some`) or `None` for a message, and, not trapping, ends
/// with the exit's reason. Returns once the link is made (its request is queued before
/// anything the caller sends next), within `guard`.
pub(crate) async fn linked(
    sched: &Scheduler,
    node: &Node,
    remote: NodePid,
    trap: bool,
    guard: Duration,
) -> ProcessHandle<Option<Exit>, ()> {
    let node = node.clone();
    let (linked_tx, linked) = tokio::sync::oneshot::channel();
    let handle = sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.trap_exit(trap);
            node.link(cx.pid(), &remote)?;
            let _ = linked_tx.send(());
            match cx.recv_any().await? {
                Incoming::Signal(Signal::Exit(exit)) => Ok::<_, BoxError>(Some(exit)),
                Incoming::Message(()) => Ok(None),
                _ => Err("an unexpected signal".into()),
            }
        })
        .expect("the linked process spawns");
    tokio::time::timeout(guard, linked)
        .await
        .expect("hang guard: the link")
        .expect("the linked process made its link");
    handle
}

/// `node.spawn_on(Placement::Node(peer), name, args)`, asked again while it times out (until
/// `guard`): across the servers of a NATS cluster a new node's subscription may trail its
/// membership entry, and a request sent in between is lost (`Node::wait_for_nodes`).
pub(crate) async fn spawn_on_settled<A: serde::Serialize>(
    node: &Node,
    peer: &str,
    name: &str,
    args: A,
    guard: Duration,
) -> NodePid {
    let deadline = tokio::time::Instant::now() + guard;
    loop {
        match node
            .spawn_on(Placement::Node(peer.into()), name, &args)
            .await
        {
            Ok(pid) => return pid,
            Err(procsched::cluster::RemoteError::TimedOut(_)) => assert!(
                tokio::time::Instant::now() < deadline,
                "hang guard: {peer} never answered a spawn"
            ),
            Err(other) => panic!("{peer} lives: {other}"),
        }
    }
}
