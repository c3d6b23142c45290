//! A node's scheduler shutting down while its bodies wait on asks through the cluster API: an
//! ask in flight to a process on another node, and to a process of this node through a
//! `RemoteAddr`, ends the body as *cancelled* (`?` on `RemoteError::Cancelled`), counted
//! graceful — as a local ask in flight does.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::{start_nodes, steady_cluster, stop_nodes, NatsServer};
use procsched::cluster::{Cluster, Node, NodePid, Placement};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

const GUARD: Duration = Duration::from_secs(30);

#[derive(Serialize, Deserialize)]
enum Keep {
    /// Kept, never answered.
    Hold(Reply<u64>),
    /// Answers how many it holds.
    Count(Reply<u64>),
}

/// Keeps every `Hold` port it is sent, until it is asked to finish.
async fn keeper(cx: ProcessCx<Keep>, (): ()) -> Result<(), BoxError> {
    let mut kept = Vec::new();
    loop {
        match cx.recv().await? {
            Keep::Hold(reply) => kept.push(reply),
            Keep::Count(reply) => {
                let _ = reply.send(kept.len() as u64);
            }
        }
    }
}

fn cluster(url: &str, name: &str) -> Cluster {
    steady_cluster(url, name, GUARD)
        .message::<Keep>("keep")
        .spawnable("keeper", keeper)
}

/// Waits until the keeper `pid` holds one port (the asker's request arrived).
async fn holds_one(node: &Node, pid: &NodePid) {
    let deadline = Instant::now() + GUARD;
    let keeper = node.addr::<Keep>(pid.clone());
    while keeper.ask(Keep::Count).await.unwrap() != 1 {
        assert!(
            Instant::now() < deadline,
            "hang guard: {pid} never got the ask"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_in_flight_through_the_cluster_api_ends_the_body_as_cancelled() {
    let server = NatsServer::start();
    let mut nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let (a_sched, a) = nodes.remove(0);
    let remote = a
        .spawn_on(Placement::Node("b".into()), "keeper", ())
        .await
        .unwrap();
    let local = a.spawn_on(Placement::Local, "keeper", ()).await.unwrap();
    let mut askers = Vec::new();
    for pid in [remote.clone(), local.clone()] {
        let node = a.clone();
        let asker = a_sched
            .spawn_fn(move |_: ProcessCx| async move {
                node.addr::<Keep>(pid).ask(Keep::Hold).await?;
                Ok::<_, BoxError>(())
            })
            .unwrap();
        askers.push(asker);
    }
    holds_one(&a, &remote).await;
    holds_one(&a, &local).await;

    // Both askers and the local keeper are cancelled; each ends graceful.
    let report = a_sched.shutdown_async(GUARD).await;
    assert_eq!((report.graceful, report.forced), (3, 0), "{report:?}");
    for asker in askers {
        let error = asker.await.unwrap_err();
        assert!(error.is_cancelled() && !error.is_failed(), "{error:?}");
    }
    let finished = a_sched.metrics().finished;
    assert_eq!((finished.cancelled, finished.failed), (3, 0));
    a.leave().await;
    stop_nodes(nodes, GUARD).await;
}
