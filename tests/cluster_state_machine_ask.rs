//! A state machine's ask through a `RemoteAddr` (`RemoteAddr::ask_command`,
//! `src/cluster/remote_ask_command.rs`): yielded like a command, answered as the yield's
//! completion with its tag — another node's answer, a dropped port (`NoReply`), the yield's
//! timeout or the node's request timeout (`TimedOut`), a finished process (`NotFound`), a node
//! declared down mid-ask (`NoConnection`) — and, for a process of the asker's own node, the
//! local command's. Each yield completes exactly once: every asker (`support/step_asker.rs`)
//! ends only after a message it sends itself once its completions are in, so a second
//! completion of any tag, queued before that message, would be in its output.
#![cfg(feature = "cluster")]

mod cluster_support;
#[allow(dead_code)]
#[path = "support/step_asker.rs"]
mod step_asker;

use cluster_support::{start_nodes, steady_cluster, stop_nodes, NatsServer};
use procsched::cluster::{Cluster, Node, NodePid, Placement, RemoteAddr, RemoteError};
use procsched::error::CommandError;
use procsched::prelude::*;
use procsched::state_machine::Tag;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use step_asker::{Asks, StepAsker};

const GUARD: Duration = Duration::from_secs(30);

/// Answers `Double`, drops `Drop`'s port, keeps `Keep`'s (`Kept` counts them) until
/// `AnswerKept`, ends at `Stop`.
#[derive(Serialize, Deserialize)]
enum Server {
    Double(u64, Reply<u64>),
    Drop(Reply<u64>),
    Keep(Reply<u64>),
    Kept(Reply<usize>),
    /// Answers every kept port with 0 (those whose asker is gone are refused).
    AnswerKept(Reply<usize>),
    Stop,
}

async fn server(cx: ProcessCx<Server>, (): ()) -> Result<(), BoxError> {
    let mut kept = Vec::new();
    loop {
        match cx.recv().await? {
            Server::Double(n, reply) => {
                let _ = reply.send(n * 2);
            }
            Server::Drop(reply) => drop(reply),
            Server::Keep(reply) => kept.push(reply),
            Server::Kept(count) => {
                let _ = count.send(kept.len());
            }
            Server::AnswerKept(done) => {
                let answered = kept.len();
                for port in kept.drain(..) {
                    let _ = port.send(0);
                }
                let _ = done.send(answered);
            }
            Server::Stop => return Ok(()),
        }
    }
}

fn cluster(url: &str, name: &str, request_timeout: Duration) -> Cluster {
    steady_cluster(url, name, GUARD)
        .request_timeout(request_timeout)
        .message::<Server>("server")
        .spawnable("server", server)
}

/// Nodes `a` and `b` (a's requests time out after `a_timeout`), and a server on `on`.
async fn nodes_and_server(
    server: &NatsServer,
    a_timeout: Duration,
    on: &str,
) -> (Vec<(Scheduler, Node)>, RemoteAddr<Server>) {
    let url = server.url();
    let nodes = start_nodes(
        &["a", "b"],
        |name| cluster(&url, name, if name == "a" { a_timeout } else { GUARD }),
        GUARD,
    )
    .await;
    let a = &nodes[0].1;
    let pid = a
        .spawn_on(Placement::Node(on.into()), "server", ())
        .await
        .unwrap();
    let addr = a.addr::<Server>(pid);
    (nodes, addr)
}

/// How one ask's yield completed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Completion {
    Answer(u64),
    NoReply,
    TimedOut,
    NotFound,
    NoConnection,
    AskedItself,
    Other(String),
}

fn completion(result: Result<Payload, CommandError>) -> Completion {
    match result {
        Ok(payload) => Completion::Answer(payload.take::<u64>().expect("a u64 answer")),
        Err(CommandError::NoReply) => Completion::NoReply,
        Err(CommandError::TimedOut) => Completion::TimedOut,
        Err(CommandError::Failed(error)) => match error.downcast_ref::<RemoteError>() {
            Some(RemoteError::NotFound) => Completion::NotFound,
            Some(RemoteError::NoConnection) => Completion::NoConnection,
            Some(RemoteError::AskedItself) => Completion::AskedItself,
            _ => Completion::Other(error.to_string()),
        },
        Err(other) => Completion::Other(other.to_string()),
    }
}

/// Spawns a [`StepAsker`] on `node`'s scheduler of the asks `asks` makes, given the asker's
/// own PID on its node.
fn spawn_asker(
    node: &Node,
    sched: &Scheduler,
    expected: usize,
    asks: impl FnOnce(NodePid) -> Asks + Send + 'static,
) -> ProcessHandle<Vec<(Tag, Completion)>> {
    let node = node.clone();
    let make = move |me| asks(node.pid(me));
    let asker = StepAsker::new(sched.handle(), expected, completion, Box::new(make));
    sched.spawn(asker, "run", Payload::empty()).unwrap()
}

/// Runs a [`StepAsker`] to its end and returns what it saw, sorted by tag.
async fn asked(
    node: &Node,
    sched: &Scheduler,
    expected: usize,
    asks: impl FnOnce(NodePid) -> Asks + Send + 'static,
) -> Vec<(Tag, Completion)> {
    let handle = spawn_asker(node, sched, expected, asks);
    finished(handle).await
}

async fn finished(handle: ProcessHandle<Vec<(Tag, Completion)>>) -> Vec<(Tag, Completion)> {
    let mut seen = tokio::time::timeout(GUARD, handle)
        .await
        .expect("hang guard: the asker ends")
        .expect("the asker ends well");
    seen.sort_by_key(|(tag, _)| *tag);
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_nodes_answers_come_back_as_completions_with_their_tags() {
    let nats = NatsServer::start();
    let (nodes, server) = nodes_and_server(&nats, GUARD, "b").await;
    let (sched, a) = (&nodes[0].0, &nodes[0].1);
    const ASKS: u64 = 500;
    let seen = asked(a, sched, ASKS as usize, move |_| {
        (1..=ASKS)
            .map(|n| (n, server.ask_command(move |r| Server::Double(n, r)), None))
            .collect()
    })
    .await;
    let expected: Vec<_> = (1..=ASKS).map(|n| (n, Completion::Answer(2 * n))).collect();
    assert_eq!(
        seen, expected,
        "each ask completed once, with its own answer"
    );
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_port_a_deadline_and_a_finished_process_complete_typed() {
    let nats = NatsServer::start();
    let (nodes, server) = nodes_and_server(&nats, GUARD, "b").await;
    let (sched, a) = (&nodes[0].0, &nodes[0].1);
    let ended = a
        .spawn_on(Placement::Node("b".into()), "server", ())
        .await
        .unwrap();
    let ended = a.addr::<Server>(ended);
    // Acked: it reached the process; asked after its end is known, below.
    ended.send_acked(Server::Stop).await.unwrap();
    let gone = a.monitor(ended.pid().clone());
    tokio::time::timeout(GUARD, gone)
        .await
        .expect("hang guard: the server ends");

    let seen = asked(a, sched, 4, move |_| {
        vec![
            (1, server.ask_command(Server::Drop), None),
            (
                2,
                server.ask_command(Server::Keep),
                Some(Duration::from_millis(50)),
            ),
            (3, ended.ask_command(|r| Server::Double(1, r)), None),
            (
                4,
                server.ask_command(|r| Server::Double(21, r)),
                Some(GUARD),
            ),
        ]
    })
    .await;
    assert_eq!(
        seen,
        vec![
            (1, Completion::NoReply),
            (2, Completion::TimedOut),
            (3, Completion::NotFound),
            (4, Completion::Answer(42)),
        ]
    );
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_deadline_the_nodes_request_timeout_ends_the_wait() {
    let nats = NatsServer::start();
    let (nodes, server) = nodes_and_server(&nats, Duration::from_millis(200), "b").await;
    let (sched, a) = (&nodes[0].0, &nodes[0].1);
    // On the asker's own node too, as `RemoteAddr::ask` is bounded there.
    let here = a
        .spawn_on(Placement::Node("a".into()), "server", ())
        .await
        .unwrap();
    let here = a.addr::<Server>(here);
    let seen = asked(a, sched, 2, move |_| {
        vec![
            (7, server.ask_command(Server::Keep), None),
            (8, here.ask_command(Server::Keep), None),
        ]
    })
    .await;
    assert_eq!(
        seen,
        vec![(7, Completion::TimedOut), (8, Completion::TimedOut)]
    );
    stop_nodes(nodes, GUARD).await;
}

/// Panics whose message says a tokio `oneshot` was polled after it completed, counted by a
/// hook that passes every panic on to the one it replaced.
static POLLED_AFTER_COMPLETE: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

fn count_polls_after_complete() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.to_string().contains("called after complete") {
                POLLED_AFTER_COMPLETE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asker_ended_mid_ask_leaves_its_answers_to_no_one() {
    count_polls_after_complete();
    let nats = NatsServer::start();
    let (nodes, server) = nodes_and_server(&nats, GUARD, "b").await;
    let (sched, a) = (&nodes[0].0, &nodes[0].1);
    for round in 0..20 {
        let kept = server.clone();
        let handle = spawn_asker(a, sched, 2, move |_| {
            vec![
                (1, kept.ask_command(Server::Keep), None),
                (2, kept.ask_command(Server::Keep), Some(GUARD)),
            ]
        });
        let deadline = tokio::time::Instant::now() + GUARD;
        while server.ask(Server::Kept).await.unwrap() < 2 {
            assert!(tokio::time::Instant::now() < deadline, "hang guard");
            tokio::task::yield_now().await;
        }
        sched.terminate(handle.pid()).unwrap();
        let ended = tokio::time::timeout(GUARD, handle)
            .await
            .expect("hang guard");
        assert!(ended.unwrap_err().is_terminated(), "round {round}");
        // The late answers reach no one (and wake no task that reads a closed channel).
        assert_eq!(server.ask(Server::AnswerKept).await.unwrap(), 2);
    }
    // The node still answers a state machine's ask.
    let seen = asked(a, sched, 1, move |_| {
        vec![(9, server.ask_command(|r| Server::Double(4, r)), None)]
    })
    .await;
    assert_eq!(seen, vec![(9, Completion::Answer(8))]);
    stop_nodes(nodes, GUARD).await;
    assert_eq!(
        POLLED_AFTER_COMPLETE.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_declared_down_fails_the_asks_in_flight_to_it() {
    let nats = NatsServer::start();
    let (nodes, server) = nodes_and_server(&nats, GUARD, "b").await;
    let (sched, a) = (&nodes[0].0, &nodes[0].1);
    let kept = server.clone();
    let handle = spawn_asker(a, sched, 3, move |_| {
        (1..=3)
            .map(|tag| (tag, kept.ask_command(Server::Keep), None))
            .collect()
    });
    // The three asks reached the server (messages from one node to another keep their order:
    // an ask answered after them was read after them).
    let deadline = tokio::time::Instant::now() + GUARD;
    while server.ask(Server::Kept).await.unwrap() < 3 {
        assert!(tokio::time::Instant::now() < deadline, "hang guard");
        tokio::task::yield_now().await;
    }
    assert!(a.disconnect("b"), "b was a peer");
    assert_eq!(
        finished(handle).await,
        (1..=3)
            .map(|tag| (tag, Completion::NoConnection))
            .collect::<Vec<_>>()
    );
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_askers_own_node_it_is_the_local_command() {
    let nats = NatsServer::start();
    let (nodes, server) = nodes_and_server(&nats, GUARD, "a").await;
    let (sched, a) = (&nodes[0].0, &nodes[0].1);
    let node = a.clone();
    let seen = asked(a, sched, 3, move |me| {
        vec![
            (1, server.ask_command(|r| Server::Double(5, r)), None),
            (2, server.ask_command(Server::Drop), Some(GUARD)),
            (3, node.addr::<Server>(me).ask_command(Server::Drop), None),
        ]
    })
    .await;
    assert_eq!(
        seen,
        vec![
            (1, Completion::Answer(10)),
            (2, Completion::NoReply),
            (3, Completion::AskedItself),
        ]
    );
    stop_nodes(nodes, GUARD).await;
}
