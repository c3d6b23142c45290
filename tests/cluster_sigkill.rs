//! A node that is a separate OS process dies by SIGKILL mid-run: the other node sees
//! `Down(NoConnection)` for its processes, fires its links to them (`NoConnection`: trapped as
//! an exit naming the process, or ending the linked process), fails asks to it typed, keeps
//! running its own and loses nothing local; a supervisor restarts the killed node's children
//! on another node; the killed node, started again, is a new incarnation and a PID from its
//! previous life fails `NoProc`.
//!
//! The node process is this very test binary, re-executed to run only `node_process` with
//! `PROCSCHED_TEST_NODE` set: a real process the test can SIGKILL, without a second binary.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::{linked, start_nodes, stop_nodes, supervise_remote, wait_child, NatsServer};
use procsched::cluster::{Cluster, Node, NodePid, Placement, RemoteError};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

#[derive(Serialize, Deserialize)]
enum Cart {
    Add(u64),
    Total(Reply<u64>),
}

async fn cart(cx: ProcessCx<Cart>, start: u64) -> Result<(), BoxError> {
    let mut total = start;
    loop {
        match cx.recv().await? {
            Cart::Add(n) => total += n,
            Cart::Total(reply) => {
                let _ = reply.send(total);
            }
        }
    }
}

fn cluster(url: &str, name: &str) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(250))
        .down_after(Duration::from_secs(1))
        .request_timeout(GUARD)
        .message::<Cart>("cart")
        .spawnable("cart", cart)
}

/// The node process: joins, says `ready <incarnation>` on stdout, and serves until killed.
#[test]
fn node_process() {
    let (Ok(name), Ok(url)) = (
        std::env::var("PROCSCHED_TEST_NODE"),
        std::env::var("PROCSCHED_TEST_NATS"),
    ) else {
        return; // an ordinary test run: nothing to do
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let sched = Scheduler::builder().workers(1).build().unwrap();
        let node = Node::start(sched.handle(), cluster(&url, &name))
            .await
            .unwrap();
        println!("ready {}", node.incarnation());
        std::future::pending::<()>().await;
    });
}

/// A node running as a child process: SIGKILLed by [`kill`](Self::kill), or on drop (a test
/// that failed first must not leave it running).
struct NodeProcess(Child);

impl NodeProcess {
    /// SIGKILL, and reap it.
    fn kill(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts node `name` as a child process and waits until it says it is ready.
fn spawn_node(url: &str, name: &str) -> (NodeProcess, u64) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "node_process", "--nocapture", "--test-threads=1"])
        .env("PROCSCHED_TEST_NODE", name)
        .env("PROCSCHED_TEST_NATS", url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let incarnation = loop {
        let line = lines
            .next()
            .expect("the node process said nothing")
            .unwrap();
        // libtest may print `test node_process ... ` on the same line first.
        if let Some((_, incarnation)) = line.split_once("ready ") {
            break incarnation.trim().parse().unwrap();
        }
    };
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (NodeProcess(child), incarnation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_node_is_seen_down_its_processes_fail_typed_and_its_next_life_is_new() {
    let server = NatsServer::start();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let a = Node::start(sched.handle(), cluster(&server.url(), "a"))
        .await
        .unwrap();
    let (mut child, incarnation) = spawn_node(&server.url(), "b");
    assert!(a.wait_for_nodes(1, GUARD).await, "a sees b");

    let remote: Vec<NodePid> = {
        let mut pids = Vec::new();
        for n in 0..10 {
            pids.push(
                a.spawn_on(Placement::Node("b".into()), "cart", n)
                    .await
                    .unwrap(),
            );
        }
        pids
    };
    let local = a.spawn_on(Placement::Local, "cart", 100u64).await.unwrap();
    let monitors: Vec<_> = remote.iter().map(|pid| a.monitor(pid.clone())).collect();
    for pid in &remote {
        assert_eq!(pid.incarnation(), incarnation);
        a.addr::<Cart>(pid.clone())
            .send_acked(Cart::Add(1))
            .await
            .unwrap();
    }

    // Links to b's processes: one local process traps exits, one does not.
    let trapper = linked(&sched, &a, remote[0].clone(), true, GUARD).await;
    let victim = linked(&sched, &a, remote[1].clone(), false, GUARD).await;

    child.kill(); // SIGKILL
    let started = std::time::Instant::now();
    for monitor in monitors {
        let down = tokio::time::timeout(GUARD, monitor)
            .await
            .expect("hang guard: Down");
        assert!(down.reason.is_no_connection(), "{:?}", down.reason);
    }
    // The trapping process gets the exit signal, naming b's process; the other dies of it.
    let exit = tokio::time::timeout(GUARD, trapper)
        .await
        .expect("hang guard: the trapped exit")
        .unwrap()
        .expect("an exit signal");
    assert!(exit.reason.is_no_connection(), "{:?}", exit.reason);
    assert_eq!(NodePid::of_exit(&exit), Some(remote[0].clone()));
    let error = tokio::time::timeout(GUARD, victim)
        .await
        .expect("hang guard: the linked process's end")
        .unwrap_err();
    assert!(error.exit_reason().is_no_connection(), "{error}");
    eprintln!(
        "SIGKILL → every Down(NoConnection): {:?}",
        started.elapsed()
    );
    for pid in &remote {
        let error = a
            .addr::<Cart>(pid.clone())
            .ask(Cart::Total)
            .await
            .unwrap_err();
        assert!(error.is_no_connection(), "{error}");
    }
    // Nothing local lost.
    let local_addr = a.addr::<Cart>(local);
    local_addr.send(Cart::Add(1)).unwrap();
    assert_eq!(local_addr.ask(Cart::Total).await.unwrap(), 101);

    // b's next life.
    let (mut child, next) = spawn_node(&server.url(), "b");
    assert_ne!(next, incarnation);
    let deadline = tokio::time::Instant::now() + GUARD;
    while !a
        .nodes()
        .iter()
        .any(|node| node.name == "b" && node.incarnation == next)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "hang guard: a sees b again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stale = a
        .addr::<Cart>(remote[0].clone())
        .send_acked(Cart::Add(1))
        .await;
    assert!(matches!(stale, Err(RemoteError::NoProc)), "{stale:?}");
    let fresh = a
        .spawn_on(Placement::Node("b".into()), "cart", 5u64)
        .await
        .unwrap();
    assert_eq!(a.addr::<Cart>(fresh).ask(Cart::Total).await.unwrap(), 5);

    child.kill();
    a.leave().await;
    sched.shutdown_async(Duration::from_secs(5)).await;
}

/// A supervisor on node a whose children run on node b, a separate OS process: b is SIGKILLed
/// and every child comes back on c, the other node its placement names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisor_restarts_the_children_of_a_sigkilled_node_on_another() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "c"], |name| cluster(&server.url(), name), GUARD).await;
    let (a_sched, a, c) = (&nodes[0].0, &nodes[0].1, &nodes[1].1);
    let (mut child, _) = spawn_node(&server.url(), "b");
    assert!(a.wait_for_nodes(2, GUARD).await, "a sees b and c");
    // c runs 5 processes and b none, so the least loaded of the two is b, until it dies.
    for n in 0..5u64 {
        c.spawn_on(Placement::Local, "cart", n).await.unwrap();
    }
    let deadline = tokio::time::Instant::now() + GUARD;
    while !a
        .nodes()
        .iter()
        .any(|peer| peer.name == "c" && peer.live >= 5)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "hang guard: c's load"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let placement = Placement::AnyOf(vec!["b".into(), "c".into()]);
    let (supervisor, children) = supervise_remote(a, placement, "cart", 3).await;
    for (n, worker) in children.iter().enumerate() {
        let pid = wait_child(worker, |pid| pid.node() == "b", GUARD).await;
        let total = a.addr::<Cart>(pid).ask(Cart::Total).await.unwrap();
        assert_eq!(total, n as u64);
    }

    child.kill(); // SIGKILL
    for (n, worker) in children.iter().enumerate() {
        let pid = wait_child(worker, |pid| pid.node() == "c", GUARD).await;
        let total = a.addr::<Cart>(pid).ask(Cart::Total).await.unwrap();
        assert_eq!(total, n as u64, "restarted with its arguments");
    }
    assert!(supervisor.restarts().await.unwrap() >= 3);

    let report = a_sched.shutdown_async(GUARD).await;
    assert_eq!(report.forced + report.abandoned, 0, "{report:?}");
    stop_nodes(nodes, GUARD).await;
}

/// A frame to a node whose subscription is gone meets no responder, and that is a death
/// signal at once: here the survivor's `down_after` (60 s) is far beyond the hang guard, so
/// only the "no responders" answer can declare the SIGKILLed node down in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_that_meets_no_responder_declares_its_node_down_at_once() {
    let server = NatsServer::start();
    no_responder_is_a_death(&server.url(), &server.url()).await;
}

/// The same across the servers of a NATS cluster, the two nodes on different servers: the
/// killed node's server drops its interest and tells its routes, so the survivor's server
/// answers "no responders" too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_a_nats_cluster_a_frame_that_meets_no_responder_declares_its_node_down() {
    let servers = cluster_support::NatsCluster::start(3);
    let urls = servers.urls();
    no_responder_is_a_death(&urls[0], &urls[1]).await;
}

/// Node `a` (here, on `a_url`) and node `b` (a child process, on `b_url`); `b` is SIGKILLed,
/// and `a`'s acked sends to it go on until one fails `NoConnection`.
async fn no_responder_is_a_death(a_url: &str, b_url: &str) {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let patient = cluster(a_url, "a")
        .down_after(Duration::from_secs(60))
        .request_timeout(Duration::from_secs(2));
    let a = Node::start(sched.handle(), patient).await.unwrap();
    let (mut child, _) = spawn_node(b_url, "b");
    assert!(a.wait_for_nodes(1, GUARD).await, "a sees b");
    // Across servers, b's subscription may trail its membership entry: a spawn request sent
    // in between is lost (seen on a loaded machine).
    let pid = cluster_support::spawn_on_settled(&a, "b", "cart", 0u64, GUARD).await;
    let monitor = a.monitor(pid.clone());
    let addr = a.addr::<Cart>(pid);
    // b answers while it lives. Across servers, a frame sent while b's interest has not yet
    // reached a's server meets no responder and is lost (not a death so soon after b joined):
    // send again until one is acked.
    let guard = tokio::time::Instant::now() + GUARD;
    while let Err(error) = addr.send_acked(Cart::Add(1)).await {
        assert!(matches!(error, RemoteError::TimedOut(_)), "{error}");
        assert!(tokio::time::Instant::now() < guard, "hang guard: b acks");
    }
    assert_eq!(a.stats().peers_down, 0, "b is alive");

    child.kill(); // SIGKILL: its connection drops, and the server forgets its interest
                  // An acked send made before the servers noticed is lost with b (`TimedOut`); the first
                  // one after meets no responder, which declares b down and fails it (and what else waited
                  // on b) with `NoConnection`.
    let guard = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match addr.send_acked(Cart::Add(1)).await {
            Err(error) if error.is_no_connection() => break,
            Err(RemoteError::TimedOut(_)) => {}
            other => panic!("b is dead: {other:?}"),
        }
        assert!(
            tokio::time::Instant::now() < guard,
            "hang guard: b never met as gone"
        );
    }
    let down = tokio::time::timeout(GUARD, monitor)
        .await
        .expect("hang guard: Down");
    assert!(down.reason.is_no_connection(), "{:?}", down.reason);
    let stats = a.stats();
    assert!(stats.unreached >= 1 && stats.peers_down == 1, "{stats:?}");
    assert!(a.nodes().is_empty(), "b is gone from a's view");

    a.leave().await;
    sched.shutdown_async(Duration::from_secs(5)).await;
}
