//! A value nested deeper than a node's `max_nesting` — a message of a recursive type, sent by a
//! peer or forged by a raw client, an ask's answer — is refused as undecodable before serde
//! reads it: typed for the sender, counted on the receiver, and the node goes on. (serde
//! decodes by recursion: thousands of levels overflowed the inbound task's stack, which aborts
//! the whole program.)
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::forge::{frame, Item};
use cluster_support::{start_nodes, stop_nodes, wait_until, NatsServer};
use procsched::cluster::{nats, Cluster, Node, Placement, RemoteError};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);
/// The nodes' `max_nesting`.
const LIMIT: usize = 64;

#[derive(Serialize, Deserialize, Debug, PartialEq)]
enum Tree {
    Leaf,
    Node(Box<Tree>),
}

impl Tree {
    fn nested(depth: usize) -> Tree {
        (0..depth).fold(Tree::Leaf, |tree, _| Tree::Node(Box::new(tree)))
    }

    fn depth(&self) -> usize {
        let (mut depth, mut at) = (0, self);
        while let Tree::Node(inner) = at {
            (depth, at) = (depth + 1, inner);
        }
        depth
    }
}

/// The garden's messages.
#[derive(Serialize, Deserialize)]
enum TreesWire {
    Plant(Tree),
    Grow(usize, Reply<Tree>),
    Depths(Reply<Vec<usize>>),
}

async fn garden(cx: ProcessCx<TreesWire>, (): ()) -> Result<(), BoxError> {
    let mut depths = Vec::new();
    loop {
        match cx.recv().await? {
            TreesWire::Plant(tree) => depths.push(tree.depth()),
            TreesWire::Grow(depth, reply) => {
                let _ = reply.send(Tree::nested(depth));
            }
            TreesWire::Depths(reply) => {
                let _ = reply.send(depths.clone());
            }
        }
    }
}

fn cluster(url: &str, name: &str) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(200))
        .down_after(Duration::from_secs(10))
        .max_nesting(LIMIT)
        .message::<TreesWire>("trees")
        .spawnable("garden", garden)
}

/// `Tree::Node` nested `depth` times, as `TreesWire::Plant`, encoded by hand as rmp-serde
/// encodes it (a one-entry map per level): no recursion on this side, at any depth.
fn planted(depth: usize) -> Vec<u8> {
    let mut bytes = vec![0x81, 0xa5];
    bytes.extend_from_slice(b"Plant");
    for _ in 0..depth {
        bytes.extend_from_slice(&[0x81, 0xa4, b'N', b'o', b'd', b'e']);
    }
    bytes.extend_from_slice(&[0xa4, b'L', b'e', b'a', b'f']);
    bytes
}

async fn a_and_b(server: &NatsServer) -> Vec<(Scheduler, Node)> {
    start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_nested_past_the_limit_is_refused_typed_and_counted_and_the_node_goes_on() {
    let server = NatsServer::start();
    let nodes = a_and_b(&server).await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    let garden = a
        .spawn_on(Placement::Node("b".into()), "garden", ())
        .await
        .unwrap();
    let addr = a.addr::<TreesWire>(garden.clone());
    // Within the limit (the variant's map and the tree's): delivered.
    addr.send_acked(TreesWire::Plant(Tree::nested(LIMIT - 2)))
        .await
        .unwrap();
    // Past it: refused as undecodable, typed, at the sender.
    let refused = addr.send_acked(TreesWire::Plant(Tree::nested(LIMIT))).await;
    assert!(
        matches!(&refused, Err(RemoteError::Decode(why)) if why.contains("nests deeper")),
        "{refused:?}"
    );
    // Far past any stack, forged by a raw client as a peer's frame: rejected, counted.
    let raw = nats::connect(server.url()).await.unwrap();
    let forged = frame(
        "a",
        a.incarnation(),
        b.incarnation(),
        Item::Message {
            to: garden.local().as_u64(),
            ty: "trees".into(),
            body: planted(100_000),
            ack: None,
        },
    );
    raw.publish("procsched.node.b.data".to_owned(), forged.into())
        .await
        .unwrap();
    raw.flush().await.unwrap();
    wait_until("b counted both refusals", GUARD, || {
        b.stats().rejected_items >= 2
    });
    // An answer past the limit fails the ask typed, and the asking node counts it; one within
    // it arrives.
    let rejected_by_a = a.stats().rejected_items;
    let deep_answer = addr.ask(|reply| TreesWire::Grow(LIMIT + 10, reply)).await;
    assert!(
        matches!(&deep_answer, Err(RemoteError::Decode(why)) if why.contains("nests deeper")),
        "{deep_answer:?}"
    );
    assert_eq!(
        a.stats().rejected_items,
        rejected_by_a + 1,
        "counted where it failed"
    );
    let answer = addr.ask(|reply| TreesWire::Grow(3, reply)).await.unwrap();
    assert_eq!(answer, Tree::nested(3));
    // The process saw only the tree within the limit, and the node serves on.
    let depths = addr.ask(TreesWire::Depths).await.unwrap();
    assert_eq!(depths, [LIMIT - 2]);
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_of_zero_is_refused_at_start_before_any_connection() {
    // Zero would refuse every struct and enum sent: a mistake, named at start. No server is
    // needed: the settings are checked before the node connects.
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let started = Node::start(
        sched.handle(),
        Cluster::nats("nats://127.0.0.1:1")
            .name("zero")
            .max_nesting(0),
    )
    .await;
    match started {
        Err(procsched::cluster::ClusterError::Config(why)) => {
            assert!(why.contains("max_nesting"), "{why}")
        }
        other => panic!(
            "refused, not {:?}",
            other.map(|node| node.name().to_owned())
        ),
    }
    sched.shutdown_async(GUARD).await;
}
