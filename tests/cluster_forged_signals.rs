//! Signals forged by a client that is no node (any client with publish rights on a node's
//! subjects): what they may do is documented (README, "Across machines"), and none of it may
//! pile up. A monitor id sent again replaces its monitor, as a link made twice is one link.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::forge::{frame_of, Item};
use cluster_support::{start_nodes, steady_cluster, stop_nodes, wait_until, NatsServer};
use futures::StreamExt;
use procsched::cluster::{nats, Cluster, Placement};
use procsched::prelude::*;
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

async fn idle(cx: ProcessCx<()>, _: u64) -> Result<(), BoxError> {
    cx.recv().await?;
    Ok(())
}

fn cluster(url: &str, name: &str) -> Cluster {
    steady_cluster(url, name, GUARD).spawnable("idle", idle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_id_sent_again_replaces_its_monitor() {
    // A hostile review sent 200 000 `Monitor { id: 7 }` items for one live process: each
    // started a task and a monitor kept until the process ended (+200 000 tasks, +120 MB),
    // which no count showed and which the forger's node-down did not abort.
    let server = NatsServer::start();
    let nodes = start_nodes(&["b"], |name| cluster(&server.url(), name), GUARD).await;
    let b = &nodes[0].1;
    let target = b.spawn_on(Placement::Local, "idle", 0u64).await.unwrap();
    let runtime = tokio::runtime::Handle::current();
    let tasks_before = runtime.metrics().num_alive_tasks();

    const REPEATS: usize = 2_000;
    let mut items: Vec<Item> = (0..REPEATS)
        .map(|_| Item::Monitor {
            id: 7,
            target: target.local().as_u64(),
        })
        .collect();
    // Answered once b has handled every item before it: the barrier.
    items.push(Item::Whereis {
        id: 8,
        name: "nobody".into(),
    });
    let raw = nats::connect(server.url()).await.unwrap();
    let mut ghost = raw.subscribe("procsched.node.ghost.>").await.unwrap();
    raw.flush().await.unwrap();
    raw.publish(
        "procsched.node.b.ctl".to_owned(),
        frame_of("ghost", 1, b.incarnation(), items).into(),
    )
    .await
    .unwrap();
    raw.flush().await.unwrap();
    tokio::time::timeout(GUARD, ghost.next())
        .await
        .expect("hang guard: b answers the ghost's lookup")
        .expect("the subscription lives");
    assert_eq!(b.stats().monitors_served, 1, "one monitor for id 7");
    // Aborted tasks leave at their next poll: wait for the count to settle, then compare.
    // Other tasks come and go (heartbeats, the forger's lane), far fewer than the repeats.
    wait_until("the replaced monitors' tasks are gone", GUARD, || {
        runtime.metrics().num_alive_tasks() < tasks_before + REPEATS / 10
    });
    stop_nodes(nodes, GUARD).await;
}
