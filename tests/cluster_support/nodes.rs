//! Nodes for a test: one scheduler (one worker) and one node per name, on the given cluster
//! configuration, returned once every node sees all the others.

use procsched::cluster::{Cluster, Node, Placement, RemoteChild};
use procsched::prelude::*;
use procsched::supervision::{Supervisor, SupervisorRef};
use std::time::Duration;

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
