//! Where a remote spawn goes and what it is refused: `LeastLoaded` and `AnyOf` pick by the
//! loads the heartbeats carry, plus what this node placed since (a burst spreads); a frame from a name no node has claimed does not make a
//! placement target; a node name is claimed once; and a spawn across nodes is refused with the
//! same `SpawnError` a local spawn gives (an argument the body cannot take, the process limit,
//! a scheduler shutting down), as a send to a full mailbox is `MailboxFull` — at the bound of
//! the receiving process's own (`SpawnOptions`, or the options its body was registered with:
//! `Cluster::spawnable_with`) as at its scheduler's.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::forge::{frame, Item};
use cluster_support::{start_nodes, steady_cluster, stop_nodes, wait_until, NatsServer};
use procsched::cluster::{nats, Cluster, ClusterError, Node, Placement, RemoteError};
use procsched::error::{InitError, SpawnError};
use procsched::prelude::*;
use procsched::supervision::ChildOptions;
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

/// Parks until its scheduler cancels it, reading nothing: what is sent to it stays unread.
async fn idle(cx: ProcessCx<u64>, (): ()) -> Result<(), BoxError> {
    cx.cancelled().await?;
    Ok(())
}

/// Takes a number; answers nothing.
async fn numbered(cx: ProcessCx<u64>, _n: u64) -> Result<(), BoxError> {
    cx.cancelled().await?;
    Ok(())
}

fn cluster(url: &str, name: &str) -> Cluster {
    steady_cluster(url, name, GUARD)
        .message::<u64>("n")
        .spawnable("idle", idle)
        .spawnable("numbered", numbered)
        .spawnable_with("idle_1", ChildOptions::new().mailbox_capacity(1), idle)
        .spawnable_with(
            "idle_unbounded",
            ChildOptions::new().unbounded_mailbox(),
            idle,
        )
}

/// Spawns `count` idle processes on `node`'s own scheduler.
async fn load(node: &Node, count: usize) {
    for _ in 0..count {
        node.spawn_on(Placement::Local, "idle", ()).await.unwrap();
    }
}

/// Waits until `watcher`'s view of node `name` carries at least `live` live processes (its
/// heartbeat after they were spawned was read).
fn wait_for_load(watcher: &Node, name: &str, live: u64) {
    wait_until(&format!("{name}'s heartbeat shows {live}"), GUARD, || {
        watcher
            .nodes()
            .iter()
            .any(|peer| peer.name == name && peer.live >= live)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_loaded_picks_the_node_with_the_fewest_processes() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b", "c"], |name| cluster(&server.url(), name), GUARD).await;
    let (a, b, c) = (&nodes[0].1, &nodes[1].1, &nodes[2].1);
    load(a, 6).await;
    load(b, 12).await;
    load(c, 3).await;
    // a compares its own load at its last heartbeat: b has read one that carries all six.
    wait_for_load(b, "a", 6);
    wait_for_load(a, "b", 12);
    wait_for_load(a, "c", 3);

    let placed = a
        .spawn_on(Placement::LeastLoaded, "idle", ())
        .await
        .unwrap();
    assert_eq!(placed.node(), "c", "c runs 3, a 6, b 12");
    // Among the names given only: a (6) is less loaded than b (12).
    let among = Placement::AnyOf(vec!["a".into(), "b".into()]);
    let placed = a.spawn_on(among, "idle", ()).await.unwrap();
    assert_eq!(placed.node(), "a");
    let placed = c
        .spawn_on(Placement::AnyOf(vec!["b".into()]), "idle", ())
        .await
        .unwrap();
    assert_eq!(placed.node(), "b", "the only one named");
    // This node, when it is the least loaded (c sees a at 6, b at 12, itself at 3 or 4).
    let placed = c
        .spawn_on(Placement::LeastLoaded, "idle", ())
        .await
        .unwrap();
    assert_eq!(placed.node(), "c");
    let nowhere = a.spawn_on(Placement::AnyOf(vec!["z".into()]), "idle", ());
    assert!(matches!(nowhere.await, Err(RemoteError::NoNode(_))));

    stop_nodes(nodes, GUARD).await;
}

/// A node whose scheduler shut down (its `Node` still held, still heartbeating with no
/// processes) would be the least loaded, and refuse every spawn: placement passes it over, as
/// soon as its heartbeat says so — and a node placing from a scheduler shutting down places
/// elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_scheduler_shuts_down_is_no_placement_target() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b", "c"], |name| cluster(&server.url(), name), GUARD).await;
    let (a, b, c) = (&nodes[0].1, &nodes[1].1, &nodes[2].1);
    load(a, 3).await;
    load(b, 3).await;
    wait_for_load(a, "b", 3);
    nodes[2].0.shutdown_async(GUARD).await;
    wait_until("a reads c's heartbeat: shutting down", GUARD, || {
        a.nodes()
            .iter()
            .any(|peer| peer.name == "c" && peer.shutting_down)
    });
    for _ in 0..6 {
        let placed = a
            .spawn_on(Placement::LeastLoaded, "idle", ())
            .await
            .unwrap();
        assert_ne!(placed.node(), "c");
        let among = Placement::AnyOf(vec!["b".into(), "c".into()]);
        let placed = a.spawn_on(among, "idle", ()).await.unwrap();
        assert_eq!(placed.node(), "b", "c is named, but shutting down");
    }
    // From the node shutting down: another one, though it runs fewer processes itself.
    let placed = c
        .spawn_on(Placement::LeastLoaded, "idle", ())
        .await
        .unwrap();
    assert_ne!(placed.node(), "c");
    // Named alone, it is tried, and refuses as a local spawn would.
    let only_c = c
        .spawn_on(Placement::AnyOf(vec!["c".into()]), "idle", ())
        .await;
    assert!(
        matches!(only_c, Err(RemoteError::Spawn(SpawnError::ShuttingDown))),
        "{only_c:?}"
    );
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_least_loaded_spawns_spreads_over_the_nodes() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b", "c"], |name| cluster(&server.url(), name), GUARD).await;
    let a = &nodes[0].1;
    // Far quicker than a heartbeat: the loads the heartbeats carry do not move meanwhile, so
    // only what `a` counts as it places keeps the burst from landing on one node.
    let mut placed = std::collections::HashMap::<String, usize>::new();
    for _ in 0..12 {
        let pid = a
            .spawn_on(Placement::LeastLoaded, "idle", ())
            .await
            .unwrap();
        *placed.entry(pid.node().to_owned()).or_default() += 1;
    }
    for name in ["a", "b", "c"] {
        let on = placed.get(name).copied().unwrap_or(0);
        assert!(
            on >= 2,
            "12 spawns from idle nodes, {on} on {name}: {placed:?}"
        );
    }
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_from_a_name_no_node_claimed_does_not_make_a_placement_target() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    load(a, 2).await;
    load(b, 2).await;
    wait_for_load(b, "a", 2);
    wait_for_load(a, "b", 2);

    // "ghost" is a well-formed name with no membership entry: its frame is read (the message
    // it carries is undelivered: no such process), but a sender that never heartbeats has no
    // load to compare. Admitted as a placement target, its empty load would win every spawn.
    let raw = nats::connect(server.url()).await.unwrap();
    let undelivered = a.stats().undelivered;
    raw.publish(
        "procsched.node.a.data".to_owned(),
        frame(
            "ghost",
            77,
            a.incarnation(),
            Item::Message {
                to: u64::MAX, // no such process
                ty: "n".into(),
                body: rmp_serde::to_vec_named(&1u64).unwrap(),
                ack: None,
            },
        )
        .into(),
    )
    .await
    .unwrap();
    raw.flush().await.unwrap();
    wait_until("a has read the forged frame", GUARD, || {
        a.stats().undelivered > undelivered
    });

    let names: Vec<String> = a.nodes().into_iter().map(|peer| peer.name).collect();
    assert_eq!(names, ["b"], "the ghost is not listed");
    assert!(!a.wait_for_nodes(2, Duration::ZERO).await);
    for _ in 0..4 {
        let placed = a
            .spawn_on(Placement::LeastLoaded, "idle", ())
            .await
            .unwrap();
        assert!(placed.node() == "a" || placed.node() == "b", "{placed}");
    }
    let among = Placement::AnyOf(vec!["ghost".into(), "b".into()]);
    assert_eq!(a.spawn_on(among, "idle", ()).await.unwrap().node(), "b");

    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_is_claimed_by_one_live_node() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);

    let sched = Scheduler::builder().workers(1).build().unwrap();
    let second = Node::start(sched.handle(), cluster(&server.url(), "a")).await;
    match second {
        Err(ClusterError::NameTaken(name)) => assert_eq!(name, "a"),
        other => panic!(
            "a second `a` started: {:?}",
            other.map(|node| node.name().to_owned())
        ),
    }
    // The first `a` is untouched: b still knows it at its incarnation and reaches it.
    let known = b.nodes();
    assert!(
        known
            .iter()
            .any(|peer| peer.name == "a" && peer.incarnation == a.incarnation()),
        "{known:?}"
    );
    let placed = b
        .spawn_on(Placement::Node("a".into()), "idle", ())
        .await
        .unwrap();
    assert_eq!(placed.node(), "a");
    sched.shutdown_async(GUARD).await;

    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_heartbeat_the_bucket_was_not_made_for_is_refused() {
    // The bucket's entries live three heartbeats of the node that created it: a node with
    // another heartbeat would hold its name too briefly (a second live node under it) or too
    // long (its own restart refused). It is refused at its start, saying why.
    let server = NatsServer::start();
    let nodes = start_nodes(&["a"], |name| cluster(&server.url(), name), GUARD).await;
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let slower = cluster(&server.url(), "b").heartbeat(Duration::from_secs(5));
    match Node::start(sched.handle(), slower).await {
        Err(ClusterError::Config(why)) => assert!(why.contains("same heartbeat"), "{why}"),
        other => panic!(
            "a node with another heartbeat started: {:?}",
            other.map(|node| node.name().to_owned())
        ),
    }
    sched.shutdown_async(GUARD).await;
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_spawns_and_acked_sends_are_refused_as_local_ones_are() {
    let server = NatsServer::start();
    // b admits 2 processes with mailboxes of 2 messages.
    let mut nodes = Vec::new();
    for (name, limits) in [("a", None), ("b", Some((2, 2)))] {
        let mut builder = Scheduler::builder();
        builder.workers(1);
        if let Some((processes, mailbox)) = limits {
            builder.max_processes(processes).mailbox_capacity(mailbox);
        }
        let sched = builder.build().unwrap();
        let node = Node::start(sched.handle(), cluster(&server.url(), name))
            .await
            .unwrap();
        nodes.push((sched, node));
    }
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    assert!(a.wait_for_nodes(1, GUARD).await && b.wait_for_nodes(1, GUARD).await);
    let on_b = Placement::Node("b".into());

    // An argument the registered body cannot take: its input rejected, as `init` rejects one
    // (and counted as a rejected item on b). The same on this node.
    let refused = a.spawn_on(on_b.clone(), "numbered", "seven").await;
    let Err(RemoteError::Spawn(SpawnError::Init(InitError::Failed(why)))) = refused else {
        panic!("{refused:?}");
    };
    assert!(why.to_string().contains("u64"), "{why}");
    assert_eq!(b.stats().rejected_items, 1);
    let here = a.spawn_on(Placement::Local, "numbered", "seven").await;
    assert!(
        matches!(&here, Err(RemoteError::Spawn(error)) if error.is_init()),
        "{here:?}"
    );

    // A body that reads nothing: its mailbox holds 2, the third acked send is refused.
    let idle = a.spawn_on(on_b.clone(), "idle", ()).await.unwrap();
    let addr = a.addr::<u64>(idle);
    addr.send_acked(1).await.unwrap();
    addr.send_acked(2).await.unwrap();
    let full = addr.send_acked(3).await;
    assert!(matches!(full, Err(RemoteError::MailboxFull)), "{full:?}");

    // The process limit: b runs 2 at most.
    a.spawn_on(on_b.clone(), "numbered", 1u64).await.unwrap();
    let refused = a.spawn_on(on_b.clone(), "numbered", 2u64).await;
    assert!(
        matches!(refused, Err(RemoteError::Spawn(SpawnError::Limit(2)))),
        "{refused:?}"
    );

    // b's scheduler shuts down (its processes end when cancelled); its node still answers.
    nodes[1].0.shutdown_async(GUARD).await;
    let refused = a.spawn_on(on_b, "numbered", 3u64).await;
    assert!(
        matches!(refused, Err(RemoteError::Spawn(SpawnError::ShuttingDown))),
        "{refused:?}"
    );

    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_send_meets_the_receivers_own_mailbox_bound() {
    let server = NatsServer::start();
    // b's scheduler bounds mailboxes at 2; two of its processes have bounds of their own.
    let mut nodes = Vec::new();
    for (name, mailbox) in [("a", usize::MAX), ("b", 2)] {
        let sched = Scheduler::builder()
            .workers(1)
            .mailbox_capacity(mailbox)
            .build()
            .unwrap();
        let node = Node::start(sched.handle(), cluster(&server.url(), name))
            .await
            .unwrap();
        nodes.push((sched, node));
    }
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    assert!(a.wait_for_nodes(1, GUARD).await && b.wait_for_nodes(1, GUARD).await);
    let spawn_on_b = |opts: SpawnOptions| {
        let pid = nodes[1]
            .0
            .spawn_fn_with(opts, |cx: ProcessCx<u64>| idle(cx, ()))
            .unwrap()
            .pid();
        a.addr::<u64>(b.pid(pid))
    };

    // A body that reads nothing: its own bound of 1 holds 1, the second acked send is refused.
    let one = spawn_on_b(SpawnOptions::new().mailbox_capacity(1));
    one.send_acked(1).await.unwrap();
    let full = one.send_acked(2).await;
    assert!(matches!(full, Err(RemoteError::MailboxFull)), "{full:?}");
    // Unbounded on b's bounded scheduler: ten times b's bound, every one delivered.
    let unbounded = spawn_on_b(SpawnOptions::new().unbounded_mailbox());
    for n in 0..20 {
        unbounded.send_acked(n).await.unwrap();
    }

    // The same bounds registered with the body (`spawnable_with`): b's registration decides
    // them, spawned from a as from b itself.
    let on_b = Placement::Node("b".into());
    let one = a.addr::<u64>(a.spawn_on(on_b.clone(), "idle_1", ()).await.unwrap());
    one.send_acked(1).await.unwrap();
    let full = one.send_acked(2).await;
    assert!(matches!(full, Err(RemoteError::MailboxFull)), "{full:?}");
    let unbounded = a.addr::<u64>(a.spawn_on(on_b, "idle_unbounded", ()).await.unwrap());
    for n in 0..20 {
        unbounded.send_acked(n).await.unwrap();
    }
    let local = b.spawn_on(Placement::Local, "idle_1", ()).await.unwrap();
    let local = nodes[1].0.addr::<u64>(local.local());
    local.send(1).unwrap();
    assert!(local.send(2).unwrap_err().is_mailbox_full());

    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_limit_over_the_servers_payload_limit_is_refused_at_start() {
    // nats-server's default max_payload is 1 MiB: a 4 MiB frame could never be published.
    let server = NatsServer::start();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let started = Node::start(
        sched.handle(),
        cluster(&server.url(), "big").max_frame(4 << 20),
    )
    .await;
    match started {
        Err(ClusterError::Config(why)) => assert!(why.contains("max_payload"), "{why}"),
        other => panic!(
            "refused, not {:?}",
            other.map(|node| node.name().to_owned())
        ),
    }
    // At the limit, it starts.
    let node = Node::start(
        sched.handle(),
        cluster(&server.url(), "big").max_frame(1 << 20),
    )
    .await
    .unwrap();
    node.leave().await;
    sched.shutdown_async(GUARD).await;
}
