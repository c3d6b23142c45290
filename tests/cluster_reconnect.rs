//! The NATS server restarts under the nodes' feet: they reconnect and go on, and every acked
//! message is accounted for — delivered, or reported failed to its sender.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::NatsServer;
use procsched::cluster::{Cluster, Node, Placement};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(60);

#[derive(Serialize, Deserialize)]
enum Counter {
    Add,
    Count(Reply<u64>),
}

async fn counter(cx: ProcessCx<Counter>, (): ()) -> Result<(), BoxError> {
    let mut count = 0;
    loop {
        match cx.recv().await? {
            Counter::Add => count += 1,
            Counter::Count(reply) => {
                let _ = reply.send(count);
            }
        }
    }
}

async fn node(url: &str, name: &str) -> (Scheduler, Node) {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let cluster = Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(250))
        // Long enough to ride out the restart: this test is about reconnecting, not about
        // declaring nodes down.
        .down_after(Duration::from_secs(10))
        .request_timeout(Duration::from_secs(3))
        .message::<Counter>("counter")
        .spawnable("counter", counter);
    let node = Node::start(sched.handle(), cluster).await.unwrap();
    (sched, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_server_restart_nodes_reconnect_and_every_acked_message_is_accounted_for() {
    let mut server = NatsServer::start();
    let (a_sched, a) = node(&server.url(), "a").await;
    let (b_sched, b) = node(&server.url(), "b").await;
    assert!(a.wait_for_nodes(1, GUARD).await && b.wait_for_nodes(1, GUARD).await);
    let pid = a
        .spawn_on(Placement::Node("b".into()), "counter", ())
        .await
        .unwrap();
    let addr = a.addr::<Counter>(pid);

    const SENDS: u64 = 300;
    let (mut acked, mut failed) = (0u64, 0u64);
    for n in 0..SENDS {
        if n == SENDS / 3 {
            server.restart();
        }
        match addr.send_acked(Counter::Add).await {
            Ok(()) => acked += 1,
            Err(_) => failed += 1,
        }
    }
    // Reconnected: asks go through again (retried while the client reconnects).
    let deadline = tokio::time::Instant::now() + GUARD;
    let delivered = loop {
        match addr.ask(Counter::Count).await {
            Ok(count) => break count,
            Err(error) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no reconnection: {error}"
                );
            }
        }
    };
    assert!(acked > 0, "sends went through after the restart");
    assert!(
        acked <= delivered && delivered <= acked + failed,
        "acked {acked}, failed {failed}, delivered {delivered}: an acked message was lost, or one counted twice"
    );
    // Membership lives on: a fresh node joins through the restarted server.
    let (c_sched, c) = node(&server.url(), "c").await;
    assert!(c.wait_for_nodes(2, GUARD).await, "c sees a and b");
    for (sched, node) in [(a_sched, a), (b_sched, b), (c_sched, c)] {
        node.leave().await;
        sched.shutdown_async(Duration::from_secs(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_three_server_nats_cluster_a_node_whose_server_dies_reconnects_to_another() {
    use cluster_support::NatsCluster;
    let mut servers = NatsCluster::start(3);
    let urls = servers.urls();
    // a prefers server 0, b server 1; each may fail over to any of the three.
    let rotate = |first: usize| {
        (0..urls.len())
            .map(|i| urls[(first + i) % urls.len()].clone())
            .collect::<Vec<_>>()
            .join(",")
    };
    let start = |name: &'static str, servers: String| async move {
        let sched = Scheduler::builder().workers(1).build().unwrap();
        let cluster = Cluster::nats(servers)
            .name(name)
            .replicas(3)
            .heartbeat(Duration::from_millis(250))
            .down_after(Duration::from_secs(15))
            .request_timeout(Duration::from_secs(3))
            .message::<Counter>("counter")
            .spawnable("counter", counter);
        let node = Node::start(sched.handle(), cluster).await.unwrap();
        (sched, node)
    };
    let (a_sched, a) = start("a", rotate(0)).await;
    let (b_sched, b) = start("b", rotate(1)).await;
    assert!(a.wait_for_nodes(1, GUARD).await && b.wait_for_nodes(1, GUARD).await);
    // b's subscription may reach a's server after its membership entry reached a.
    let pid = cluster_support::spawn_on_settled(&a, "b", "counter", (), GUARD).await;
    let addr = a.addr::<Counter>(pid);
    addr.send_acked(Counter::Add).await.unwrap();

    // a's server dies for good: a reconnects elsewhere and its messages flow again.
    servers.server_mut(0).stop();
    let deadline = tokio::time::Instant::now() + GUARD;
    let (mut acked, mut failed) = (1u64, 0u64);
    loop {
        match addr.send_acked(Counter::Add).await {
            Ok(()) => {
                acked += 1;
                break;
            }
            Err(error) => {
                failed += 1;
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no failover: {error}"
                );
            }
        }
    }
    for _ in 0..50 {
        match addr.send_acked(Counter::Add).await {
            Ok(()) => acked += 1,
            Err(_) => failed += 1,
        }
    }
    let delivered = addr.ask(Counter::Count).await.unwrap();
    assert!(
        acked <= delivered && delivered <= acked + failed,
        "acked {acked}, failed {failed}, delivered {delivered}"
    );
    // Membership (replicated on the survivors) still admits a node.
    let (c_sched, c) = start("c", rotate(2)).await;
    assert!(c.wait_for_nodes(2, GUARD).await, "c sees a and b");
    for (sched, node) in [(a_sched, a), (b_sched, b), (c_sched, c)] {
        node.leave().await;
        sched.shutdown_async(Duration::from_secs(5)).await;
    }
}
