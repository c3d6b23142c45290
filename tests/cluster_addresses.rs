//! A `RemoteAddr` travels: inside a message, an ask's answer, a spawn's argument and a
//! process's output it crosses as its `NodePid`, and the node that receives it decodes an
//! address that sends through that node — also to a third node's process. Decoded where no
//! node decodes, it fails with a serde error instead of an address that cannot send.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::{start_nodes, steady_cluster, stop_nodes, NatsServer};
use procsched::cluster::{Cluster, Node, Placement, RemoteAddr};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

/// A process that says which node it runs on.
#[derive(Serialize, Deserialize)]
enum Echo {
    WhereAreYou(Reply<String>),
}

/// A directory of echo addresses, kept as the addresses its messages brought.
#[derive(Serialize, Deserialize)]
enum Directory {
    /// Keep `addr`, and answer with what it says when asked from here.
    Register(RemoteAddr<Echo>, Reply<String>),
    /// The address kept last.
    Lookup(Reply<Option<RemoteAddr<Echo>>>),
}

fn node_of(cx: &ProcessCx<impl Send + 'static>) -> Result<Node, BoxError> {
    Ok(Node::for_scheduler(&cx.scheduler()).ok_or("not a node")?)
}

async fn echo(cx: ProcessCx<Echo>, (): ()) -> Result<(), BoxError> {
    let node = node_of(&cx)?;
    loop {
        match cx.recv().await? {
            Echo::WhereAreYou(reply) => {
                let _ = reply.send(node.name().to_owned());
            }
        }
    }
}

async fn directory(cx: ProcessCx<Directory>, (): ()) -> Result<(), BoxError> {
    let mut kept = None;
    loop {
        match cx.recv().await? {
            Directory::Register(addr, reply) => {
                // The address decoded here sends through this node, to wherever it names.
                let answer = addr.ask(Echo::WhereAreYou).await?;
                kept = Some(addr);
                let _ = reply.send(answer);
            }
            Directory::Lookup(reply) => {
                let _ = reply.send(kept.clone());
            }
        }
    }
}

/// Asks the echo its argument names, from the node it was spawned on, and ends with that
/// address and the answer: the address goes back inside the output.
async fn relay(
    _cx: ProcessCx<()>,
    echo: RemoteAddr<Echo>,
) -> Result<(RemoteAddr<Echo>, String), BoxError> {
    let answer = echo.ask(Echo::WhereAreYou).await?;
    Ok((echo, answer))
}

fn cluster(url: &str, name: &str) -> Cluster {
    steady_cluster(url, name, GUARD)
        .message::<Echo>("echo")
        .message::<Directory>("directory")
        .spawnable("echo", echo)
        .spawnable("directory", directory)
        .spawnable("relay", relay)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_inside_a_message_and_an_answer_reaches_a_third_nodes_process() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b", "c"], |name| cluster(&server.url(), name), GUARD).await;
    let a = nodes[0].1.clone();
    let on = |name: &str| Placement::Node(name.into());
    let echo_pid = a.spawn_on(on("c"), "echo", ()).await.unwrap();
    let directory_pid = a.spawn_on(on("b"), "directory", ()).await.unwrap();
    let echo = a.addr::<Echo>(echo_pid.clone());
    let directory = a.addr::<Directory>(directory_pid);

    // a → b: the message carries c's echo; b asks it through its own node.
    let seen_from_b = tokio::time::timeout(
        GUARD,
        directory.ask(|reply| Directory::Register(echo.clone(), reply)),
    )
    .await
    .expect("hang guard")
    .unwrap();
    assert_eq!(seen_from_b, "c");

    // b → a: the answer carries the address back, and it sends from here.
    let found = tokio::time::timeout(GUARD, directory.ask(Directory::Lookup))
        .await
        .expect("hang guard")
        .unwrap()
        .expect("the directory kept an address");
    assert_eq!(found, echo, "the same process, whichever node decoded it");
    assert_eq!(found.pid(), &echo_pid);
    let answer = tokio::time::timeout(GUARD, found.ask(Echo::WhereAreYou))
        .await
        .expect("hang guard")
        .unwrap();
    assert_eq!(answer, "c");
    stop_nodes(nodes, GUARD).await;
}

/// Spawns `relay` on node `on` from `from`, given `echo`, and awaits its output.
async fn relay_on(from: &Node, on: &str, echo: &RemoteAddr<Echo>) -> (RemoteAddr<Echo>, String) {
    let handle = from
        .spawn_on_with_handle::<(RemoteAddr<Echo>, String), _>(
            Placement::Node(on.into()),
            "relay",
            echo.clone(),
        )
        .await
        .unwrap();
    tokio::time::timeout(GUARD, handle)
        .await
        .expect("hang guard")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_as_a_spawns_argument_and_in_its_output_decodes_where_it_arrives() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b", "c"], |name| cluster(&server.url(), name), GUARD).await;
    let a = nodes[0].1.clone();
    let echo_pid = a
        .spawn_on(Placement::Node("c".into()), "echo", ())
        .await
        .unwrap();
    let echo = a.addr::<Echo>(echo_pid);

    // Remote: the argument decodes on b, the output on a.
    let (back, answer) = relay_on(&a, "b", &echo).await;
    assert_eq!(answer, "c");
    assert_eq!(back, echo);
    let again = tokio::time::timeout(GUARD, back.ask(Echo::WhereAreYou))
        .await
        .expect("hang guard")
        .unwrap();
    assert_eq!(again, "c", "the returned address sends from a");

    // Local: a spawn on a itself takes the same encoded path.
    let (back, answer) = relay_on(&a, "a", &echo).await;
    assert_eq!((back, answer.as_str()), (echo, "c"));
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_decoded_where_no_node_decodes_is_a_serde_error() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a"], |name| cluster(&server.url(), name), GUARD).await;
    let a = nodes[0].1.clone();
    let echo_pid = a
        .spawn_on(Placement::Node("a".into()), "echo", ())
        .await
        .unwrap();
    let echo = a.addr::<Echo>(echo_pid.clone());

    let bytes = rmp_serde::to_vec_named(&echo).unwrap();
    // The same bytes as the PID's: an address adds nothing on the wire.
    assert_eq!(bytes, rmp_serde::to_vec_named(&echo_pid).unwrap());
    let Err(error) = rmp_serde::from_slice::<RemoteAddr<Echo>>(&bytes) else {
        panic!("an address decoded where no node decodes");
    };
    assert!(
        error.to_string().contains("decoded only by a node"),
        "{error}"
    );
    // What it says to do instead works.
    let pid = rmp_serde::from_slice(&bytes).unwrap();
    let answer = tokio::time::timeout(GUARD, a.addr::<Echo>(pid).ask(Echo::WhereAreYou))
        .await
        .expect("hang guard")
        .unwrap();
    assert_eq!(answer, "a");
    stop_nodes(nodes, GUARD).await;
}
