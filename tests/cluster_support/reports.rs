//! Two nodes, `a` and `b`, on one server, with workers that send numbered reports: what the
//! tests of ordering and monitoring across nodes (`cluster_signals.rs`, `cluster_monitors.rs`)
//! drive. A worker spawned on `b` waits for one [`Work`] and, told to `Finish`, sends
//! [`REPORTS`] numbered [`Collect::Report`]s to a process on `a`, then ends.

use super::{start_nodes, NatsServer};
use procsched::cluster::{Cluster, Node, NodePid, Placement};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The hang guard of every wait in these tests.
pub(crate) const GUARD: Duration = Duration::from_secs(60);
/// Reports a worker sends before it ends.
pub(crate) const REPORTS: u64 = 20;

/// What a worker (or a reporter) on node b is told.
#[derive(Serialize, Deserialize)]
pub(crate) enum Work {
    /// End normally.
    Stop,
    /// Send `REPORTS` numbered reports to `to`, then end: failing if `fail`, else normally.
    Finish { to: NodePid, fail: bool },
    /// Send report `n` to `to`, then answer `n` (a reporter; a worker takes only the above).
    ReportThenReply {
        to: NodePid,
        n: u64,
        reply: Reply<u64>,
    },
}

/// What a process on node a receives.
#[derive(Serialize, Deserialize)]
pub(crate) enum Collect {
    Report(u64),
    /// How many reports arrived, and whether each came in order (0, 1, … per worker).
    Count(Reply<(u64, bool)>),
}

/// The node of the scheduler `cx` runs on, taken only when a report is to be sent: a waiting
/// worker holding its node would keep it alive when a test drops it.
fn node_of(cx: &ProcessCx<Work>) -> Result<Node, BoxError> {
    Ok(Node::for_scheduler(&cx.scheduler()).ok_or("not a node")?)
}

async fn worker(cx: ProcessCx<Work>, (): ()) -> Result<(), BoxError> {
    match cx.recv().await? {
        Work::Stop | Work::ReportThenReply { .. } => Ok(()),
        Work::Finish { to, fail } => {
            let addr = node_of(&cx)?.addr::<Collect>(to);
            for n in 0..REPORTS {
                addr.send(Collect::Report(n)).map_err(|e| e.to_string())?;
            }
            if fail {
                Err("failed on purpose".into())
            } else {
                Ok(())
            }
        }
    }
}

/// Answers `ReportThenReply` until told anything else.
async fn reporter(cx: ProcessCx<Work>, (): ()) -> Result<(), BoxError> {
    loop {
        match cx.recv().await? {
            Work::ReportThenReply { to, n, reply } => {
                node_of(&cx)?
                    .addr::<Collect>(to)
                    .send(Collect::Report(n))
                    .map_err(|e| e.to_string())?;
                let _ = reply.send(n);
            }
            _ => return Ok(()),
        }
    }
}

/// Node `name`'s configuration: these messages and spawnables, heartbeats every 200 ms, a peer
/// declared down after `down_after` of silence.
fn cluster(url: &str, name: &str, down_after: Duration) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(200))
        .down_after(down_after)
        .request_timeout(GUARD)
        .message::<Work>("work")
        .message::<Collect>("collect")
        .spawnable("worker", worker)
        .spawnable("reporter", reporter)
}

/// Nodes a and b on `server`, returned once they see each other.
pub(crate) async fn two_nodes(server: &NatsServer, down_after: Duration) -> Vec<(Scheduler, Node)> {
    start_nodes(
        &["a", "b"],
        |name| cluster(&server.url(), name, down_after),
        GUARD,
    )
    .await
}

/// Every node leaves and its scheduler shuts down.
pub(crate) async fn stop(nodes: Vec<(Scheduler, Node)>) {
    for (sched, node) in nodes {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}

/// `future`, or a failed test after [`GUARD`].
pub(crate) async fn guarded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, future)
        .await
        .unwrap_or_else(|_| panic!("hang guard: {what}"))
}

/// A worker on node b, spawned from `a`.
pub(crate) async fn spawn_worker(a: &Node) -> NodePid {
    guarded(
        "spawn",
        a.spawn_on(Placement::Node("b".into()), "worker", ()),
    )
    .await
    .expect("a worker on b")
}

/// A reporter on node b, spawned from `a`.
pub(crate) async fn spawn_reporter(a: &Node) -> NodePid {
    guarded(
        "spawn",
        a.spawn_on(Placement::Node("b".into()), "reporter", ()),
    )
    .await
    .expect("a reporter on b")
}
