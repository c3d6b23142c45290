//! Registered names across nodes: a node finds the process another node registered under a
//! name (`Node::whereis`, `Node::named`) and reaches it with the typed API; a lookup answers
//! for its moment (the name follows its next holder, the old PID is gone); a name nobody holds
//! is `None`, a node that is not in the cluster `NoNode`.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::{start_nodes, steady_cluster, stop_nodes, wait_until, NatsServer};
use procsched::cluster::{Cluster, RemoteError};
use procsched::prelude::*;
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

#[derive(Debug, serde::Serialize, serde::Deserialize)]
enum Stock {
    Reserve(u64),
    Count(Reply<u64>),
    Stop,
}

fn cluster(url: &str, name: &str) -> Cluster {
    steady_cluster(url, name, GUARD).message::<Stock>("stock")
}

/// Registers itself as `name` and keeps a stock of `start`, until told to stop.
async fn inventory(cx: ProcessCx<Stock>, name: &'static str, start: u64) -> Result<u64, BoxError> {
    cx.register(name)?;
    let mut left = start;
    loop {
        match cx.recv().await? {
            Stock::Reserve(n) => left -= n,
            Stock::Count(reply) => {
                let _ = reply.send(left);
            }
            Stock::Stop => return Ok(left),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_registered_on_another_node_is_found_and_reached_by_it() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let ((sched_a, a), (sched_b, b)) = (&nodes[0], &nodes[1]);
    let remote = sched_b
        .spawn_fn(|cx| inventory(cx, "inventory", 10))
        .unwrap();
    let local = sched_a.spawn_fn(|cx| inventory(cx, "ledger", 0)).unwrap();
    wait_until("both names registered", GUARD, || {
        sched_b.handle().whereis("inventory").is_some()
            && sched_a.handle().whereis("ledger").is_some()
    });

    let found = a
        .whereis("b", "inventory")
        .await
        .unwrap()
        .expect("b has it");
    assert_eq!(
        found,
        b.pid(remote.pid()),
        "b's process, at b's incarnation"
    );
    let stock = a
        .named::<Stock>("b", "inventory")
        .await
        .unwrap()
        .expect("b has it");
    stock.send(Stock::Reserve(3)).unwrap();
    assert_eq!(
        stock.ask(Stock::Count).await.unwrap(),
        7,
        "sent and asked by name"
    );

    // Names are per node: b has no `ledger`, a has no `inventory`; a finds its own.
    assert_eq!(a.whereis("b", "ledger").await.unwrap(), None);
    assert_eq!(b.whereis("a", "inventory").await.unwrap(), None);
    assert_eq!(
        a.whereis("a", "ledger").await.unwrap(),
        Some(a.pid(local.pid()))
    );
    assert_eq!(
        b.whereis("a", "ledger").await.unwrap(),
        Some(a.pid(local.pid()))
    );
    match a.whereis("nowhere", "inventory").await {
        Err(RemoteError::NoNode(why)) => assert!(why.contains("nowhere"), "{why}"),
        other => panic!("a node that is not in the cluster: {other:?}"),
    }

    stock.send(Stock::Stop).unwrap();
    assert_eq!(remote.await.unwrap(), 7);
    a.addr::<Stock>(a.pid(local.pid()))
        .send(Stock::Stop)
        .unwrap();
    assert_eq!(local.await.unwrap(), 0);
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_answers_for_its_moment_and_the_name_follows_its_next_holder() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let ((_, a), (sched_b, _)) = (&nodes[0], &nodes[1]);
    let first = sched_b.spawn_fn(|cx| inventory(cx, "svc", 1)).unwrap();
    wait_until("svc registered", GUARD, || {
        sched_b.handle().whereis("svc").is_some()
    });
    let old = a
        .whereis("b", "svc")
        .await
        .unwrap()
        .expect("the first holder");

    a.addr::<Stock>(old.clone()).send(Stock::Stop).unwrap();
    assert_eq!(first.await.unwrap(), 1);
    // A name is released when its holder ends, before its handle resolves.
    assert_eq!(
        a.whereis("b", "svc").await.unwrap(),
        None,
        "nobody holds it now"
    );

    let second = sched_b.spawn_fn(|cx| inventory(cx, "svc", 2)).unwrap();
    wait_until("svc registered again", GUARD, || {
        sched_b.handle().whereis("svc").is_some()
    });
    let new = a
        .whereis("b", "svc")
        .await
        .unwrap()
        .expect("the next holder");
    assert_ne!(new, old, "PIDs are never reused");
    assert!(
        a.addr::<Stock>(old)
            .send_acked(Stock::Reserve(1))
            .await
            .unwrap_err()
            .is_not_found(),
        "the old PID reaches nobody"
    );
    let svc = a.addr::<Stock>(new);
    assert_eq!(svc.ask(Stock::Count).await.unwrap(), 2);
    svc.send(Stock::Stop).unwrap();
    assert_eq!(second.await.unwrap(), 2);
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_left_is_no_longer_asked() {
    let server = NatsServer::start();
    let mut nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let (sched_b, b) = nodes.pop().unwrap();
    let held = sched_b.spawn_fn(|cx| inventory(cx, "svc", 5)).unwrap();
    wait_until("svc registered", GUARD, || {
        sched_b.handle().whereis("svc").is_some()
    });
    let (_, a) = &nodes[0];
    assert!(a.whereis("b", "svc").await.unwrap().is_some());

    let b_clone = b.clone();
    b.leave().await;
    wait_until("a sees b gone", GUARD, || {
        a.nodes().iter().all(|n| n.name != "b")
    });
    assert!(
        matches!(a.whereis("b", "svc").await, Err(RemoteError::NoNode(_))),
        "b left the cluster"
    );
    // A clone of the node that left knows no other node; its own processes run on, and it
    // still answers for them (`tests/cluster_leave.rs`).
    assert!(
        matches!(
            b_clone.whereis("a", "svc").await,
            Err(RemoteError::NoConnection)
        ),
        "a lookup on a from a node that left"
    );
    assert_eq!(
        b_clone
            .whereis("b", "svc")
            .await
            .unwrap()
            .map(|pid| pid.local()),
        Some(held.pid())
    );
    // b's own processes live on without the cluster.
    assert_eq!(sched_b.handle().whereis("svc"), Some(held.pid()));
    sched_b.shutdown_async(GUARD).await;
    stop_nodes(nodes, GUARD).await;
}
