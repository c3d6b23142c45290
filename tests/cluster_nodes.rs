//! Nodes joined through a real `nats-server`: three nodes (each its own scheduler, in this test
//! process) pass a token around a ring spread over all of them, spawn and ask across nodes, and
//! report refusals typed.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::{guarded, NatsServer};
use procsched::cluster::{Cluster, Node, NodePid, Placement, RemoteError};
use procsched::error::SpawnError;
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Hang guard for anything a test awaits.
const GUARD: Duration = Duration::from_secs(30);

/// A ring member's messages. `Next` carries a PID to a member on another node (PIDs inside
/// messages reach a third node and are used there).
#[derive(Serialize, Deserialize)]
enum Ring {
    Next(NodePid),
    Start { hops: u64, done: Reply<u64> },
    Token { left: u64, origin: NodePid },
    Finished { hops: u64 },
    Count(Reply<u64>),
}

/// A cart: the remote spawn / ask / refusal target.
#[derive(Serialize, Deserialize)]
enum Cart {
    Add(u64),
    Total(Reply<u64>),
    Drop(Reply<u64>),
    /// Keeps the port, never answering: the ask waits for its timeout, or its node's death.
    Hold(Reply<u64>),
    /// Answers its bytes back (big ones travel as frames of their own).
    Echo(Vec<u8>, Reply<Vec<u8>>),
    /// Adds 1 if the bytes are `pattern(len)`.
    Blob(Vec<u8>),
    Stop,
}

/// Payloads held as `Bytes`: `shared_bytes` fields, decoded on the receiving node as slices of
/// their frame.
#[derive(Serialize, Deserialize)]
enum Payloads {
    /// Answers whether both arrived intact, and how far apart they lie in memory (past the
    /// first one's end).
    Pair(
        #[serde(with = "procsched::cluster::shared_bytes")] bytes::Bytes,
        #[serde(with = "procsched::cluster::shared_bytes")] bytes::Bytes,
        Reply<(bool, isize)>,
    ),
    /// Answers the bytes back, followed by `b"end"`.
    Echo(
        #[serde(with = "procsched::cluster::shared_bytes")] bytes::Bytes,
        Reply<SharedPair>,
    ),
}

#[derive(Serialize, Deserialize)]
struct SharedPair(
    #[serde(with = "procsched::cluster::shared_bytes")] bytes::Bytes,
    #[serde(with = "procsched::cluster::shared_bytes")] bytes::Bytes,
);

async fn payloads(cx: ProcessCx<Payloads>, (): ()) -> Result<(), BoxError> {
    loop {
        match cx.recv().await? {
            Payloads::Pair(first, second, reply) => {
                let intact = first == pattern(first.len()) && second == pattern(second.len());
                let gap =
                    second.as_ptr() as isize - (first.as_ptr() as isize + first.len() as isize);
                let _ = reply.send((intact, gap));
            }
            Payloads::Echo(bytes, reply) => {
                let _ = reply.send(SharedPair(bytes, bytes::Bytes::from_static(b"end")));
            }
        }
    }
}

/// A type no node registers.
#[derive(Serialize, Deserialize)]
struct Stranger(u8);

async fn ring_member(cx: ProcessCx<Ring>, (): ()) -> Result<(), BoxError> {
    let node = Node::for_scheduler(&cx.scheduler()).ok_or("not a node")?;
    let me = node.pid(cx.pid());
    let mut next = None;
    let mut seen = 0u64;
    let mut waiting: Option<Reply<u64>> = None;
    loop {
        match cx.recv().await? {
            Ring::Next(pid) => next = Some(node.addr::<Ring>(pid)),
            Ring::Start { hops, done } => {
                waiting = Some(done);
                let next = next.as_ref().ok_or("no next member")?;
                next.send(Ring::Token {
                    left: hops - 1,
                    origin: me.clone(),
                })
                .map_err(|error| error.to_string())?;
            }
            Ring::Token { left, origin } => {
                seen += 1;
                if left == 0 {
                    node.addr::<Ring>(origin)
                        .send(Ring::Finished { hops: seen })
                        .map_err(|error| error.to_string())?;
                } else {
                    let next = next.as_ref().ok_or("no next member")?;
                    next.send(Ring::Token {
                        left: left - 1,
                        origin,
                    })
                    .map_err(|error| error.to_string())?;
                }
            }
            Ring::Finished { .. } => {
                if let Some(done) = waiting.take() {
                    let _ = done.send(seen);
                }
            }
            Ring::Count(reply) => {
                let _ = reply.send(seen);
            }
        }
    }
}

/// `len` bytes that tell a reordered or truncated copy from the original.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

async fn cart(cx: ProcessCx<Cart>, start: u64) -> Result<u64, BoxError> {
    let mut total = start;
    let mut held = Vec::new();
    loop {
        match cx.recv().await? {
            Cart::Add(n) => total += n,
            Cart::Total(reply) => {
                let _ = reply.send(total);
            }
            Cart::Drop(reply) => drop(reply),
            Cart::Hold(reply) => held.push(reply),
            Cart::Echo(bytes, reply) => {
                let _ = reply.send(bytes);
            }
            Cart::Blob(bytes) => total += u64::from(bytes == pattern(bytes.len())),
            Cart::Stop => return Ok(total),
        }
    }
}

fn cluster(url: &str, name: &str) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(200))
        .down_after(Duration::from_millis(1000))
        .request_timeout(GUARD)
        .message::<Ring>("ring")
        .message::<Cart>("cart")
        .message::<Payloads>("payloads")
        .spawnable("ring-member", ring_member)
        .spawnable("cart", cart)
        .spawnable("payloads", payloads)
}

/// Starts node `name` on its own one-worker scheduler.
async fn start_node(url: &str, name: &str) -> (Scheduler, Node) {
    let sched = Scheduler::builder().workers(1).build().expect("scheduler");
    let node = Node::start(sched.handle(), cluster(url, name))
        .await
        .expect("node started");
    (sched, node)
}

async fn three_nodes(server: &NatsServer) -> Vec<(Scheduler, Node)> {
    let mut nodes = Vec::new();
    for name in ["a", "b", "c"] {
        nodes.push(start_node(&server.url(), name).await);
    }
    for (_, node) in &nodes {
        assert!(
            node.wait_for_nodes(2, GUARD).await,
            "{} sees the others",
            node.name()
        );
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_passes_10_000_times_around_a_ring_over_three_nodes_counted_exactly() {
    let server = NatsServer::start();
    let nodes = three_nodes(&server).await;
    let a = &nodes[0].1;
    // Six members, two per node, in the order a b c a b c: every hop crosses nodes.
    let mut members = Vec::new();
    for n in 0..6 {
        let on = nodes[n % 3].1.name().to_owned();
        members.push(
            guarded(
                GUARD,
                "spawn",
                a.spawn_on(Placement::Node(on), "ring-member", ()),
            )
            .await
            .unwrap(),
        );
    }
    for (n, member) in members.iter().enumerate() {
        let next = members[(n + 1) % members.len()].clone();
        a.addr::<Ring>(member.clone())
            .send_acked(Ring::Next(next))
            .await
            .unwrap();
    }
    const HOPS: u64 = 10_000;
    let first = a.addr::<Ring>(members[0].clone());
    // 10 000 hops over NATS take 1–2 s; a loaded 2-core machine (the suite looped beside two
    // busy loops and a build) took past 30 s: the ring's own limit is a hang guard only.
    const RING_GUARD: Duration = Duration::from_secs(300);
    let last_hop_seen_by_first = first
        .ask_within(RING_GUARD, |done| Ring::Start { hops: HOPS, done })
        .await
        .unwrap();
    let mut total = 0;
    for member in &members {
        total += a
            .addr::<Ring>(member.clone())
            .ask(Ring::Count)
            .await
            .unwrap();
    }
    assert_eq!(total, HOPS, "every hop counted once, none lost");
    assert!(last_hop_seen_by_first <= HOPS);
    let stats = a.stats();
    assert_eq!(
        stats.rejected_frames + stats.rejected_items + stats.undelivered,
        0,
        "{stats:?}"
    );
    for (sched, node) in nodes {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_spawn_ask_and_acked_send_fail_typed() {
    let server = NatsServer::start();
    let nodes = three_nodes(&server).await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);

    // Remote spawn, remote ask, remote send.
    let pid = a
        .spawn_on(Placement::Node("b".into()), "cart", 10u64)
        .await
        .unwrap();
    assert_eq!(pid.node(), "b");
    assert_eq!(pid.incarnation(), b.incarnation());
    let cart_addr = a.addr::<Cart>(pid.clone());
    // Addresses compare by the process they name, whichever node made them.
    let subscribers: std::collections::HashSet<_> =
        [cart_addr.clone(), a.addr(pid.clone()), b.addr(pid.clone())].into();
    assert_eq!(subscribers.len(), 1);
    assert_ne!(
        cart_addr,
        a.addr::<Cart>(a.pid(pid.local())),
        "same local PID, another node"
    );
    cart_addr.send(Cart::Add(5)).unwrap();
    assert_eq!(
        cart_addr.ask(Cart::Total).await.unwrap(),
        15,
        "order kept: the add came first"
    );
    cart_addr.send_acked(Cart::Add(1)).await.unwrap();
    assert_eq!(cart_addr.ask(Cart::Total).await.unwrap(), 16);
    // Requests and replies of every size, small ones batched into shared frames and big ones
    // in frames of their own, keep their order with the sends around them.
    for size in [0, 100, 16 << 10, 40 << 10, 100 << 10] {
        let bytes = pattern(size);
        cart_addr.send(Cart::Blob(bytes.clone())).unwrap();
        cart_addr.send(Cart::Add(1)).unwrap();
        let echoed = cart_addr.ask(|reply| Cart::Echo(bytes.clone(), reply));
        assert!(echoed.await.unwrap() == bytes, "{size} bytes echoed");
        cart_addr.send_acked(Cart::Blob(bytes)).await.unwrap();
    }
    assert_eq!(cart_addr.ask(Cart::Total).await.unwrap(), 16 + 5 * 3);
    // A port dropped unanswered on the far side fails the ask at once.
    assert!(matches!(
        cart_addr.ask(Cart::Drop).await,
        Err(RemoteError::NoReply)
    ));
    // An ask the far process holds unanswered times out, typed.
    let timeout = Duration::from_millis(200);
    assert!(matches!(
        cart_addr.ask_within(timeout, Cart::Hold).await,
        Err(RemoteError::TimedOut(t)) if t == timeout
    ));

    // Least-loaded placement lands somewhere live; the same API works for a local PID.
    let anywhere = a
        .spawn_on(Placement::LeastLoaded, "cart", 1u64)
        .await
        .unwrap();
    assert_eq!(
        a.addr::<Cart>(anywhere.clone())
            .ask(Cart::Total)
            .await
            .unwrap(),
        1
    );
    let local = a.spawn_on(Placement::Local, "cart", 2u64).await.unwrap();
    assert_eq!(local.node(), "a");
    assert_eq!(a.addr::<Cart>(local).ask(Cart::Total).await.unwrap(), 2);

    // A finished process: its monitor says Normal, then sends and asks are NotFound.
    // The monitor is a signal and Stop a message, on two subjects: they arrive in order.
    let down = a.monitor(pid.clone());
    cart_addr.send(Cart::Stop).unwrap();
    let down = guarded(GUARD, "the cart's Down", down).await;
    assert!(down.reason.is_normal(), "{:?}", down.reason);
    assert!(cart_addr
        .send_acked(Cart::Add(1))
        .await
        .unwrap_err()
        .is_not_found());
    assert!(cart_addr.ask(Cart::Total).await.unwrap_err().is_not_found());
    let late = guarded(GUARD, "a monitor of a dead process", a.monitor(pid.clone())).await;
    assert!(late.reason.is_no_proc(), "{:?}", late.reason);

    // A remote handle: the process's output, or why it ended without one.
    let handle = a
        .spawn_on_with_handle::<u64, _>(Placement::Node("c".into()), "cart", 3u64)
        .await
        .unwrap();
    let remote_cart = a.addr::<Cart>(handle.pid().clone());
    remote_cart.send(Cart::Add(4)).unwrap();
    remote_cart.send(Cart::Stop).unwrap();
    assert_eq!(
        guarded(GUARD, "the remote handle", handle).await.unwrap(),
        7
    );
    let killed = a
        .spawn_on_with_handle::<u64, _>(Placement::Node("c".into()), "cart", 0u64)
        .await
        .unwrap();
    a.kill(killed.pid()).unwrap();
    match guarded(GUARD, "the killed handle", killed).await {
        Err(RemoteError::Ended(reason)) => assert!(reason.is_killed(), "{reason:?}"),
        other => panic!("{other:?}"),
    }
    let local = a
        .spawn_on_with_handle::<u64, _>(Placement::Local, "cart", 9u64)
        .await
        .unwrap();
    a.addr::<Cart>(local.pid().clone())
        .send(Cart::Stop)
        .unwrap();
    assert_eq!(guarded(GUARD, "the local handle", local).await.unwrap(), 9);

    // Refusals, typed.
    match a
        .spawn_on(Placement::Node("c".into()), "no-such-body", ())
        .await
    {
        Err(RemoteError::Spawn(error @ SpawnError::Init(_))) => assert!(error.is_unknown_method()),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        a.spawn_on(Placement::Node("nobody".into()), "cart", 0u64)
            .await,
        Err(RemoteError::NoNode(_))
    ));
    let stranger = a
        .addr::<Stranger>(pid.clone())
        .send(Stranger(1))
        .unwrap_err();
    assert!(matches!(stranger.error(), RemoteError::Unregistered(_)));
    assert!(stranger.into_message().is_some(), "the message comes back");
    let previous_life = NodePid::new("b", b.incarnation() - (1 << 20), pid.local());
    assert!(matches!(
        a.addr::<Cart>(previous_life).send_acked(Cart::Stop).await,
        Err(RemoteError::NoProc)
    ));
    // A newer life than the one `a` knows (its restart not read yet) is not a dead one's.
    let next_life = NodePid::new("b", b.incarnation() + (1 << 20), pid.local());
    assert!(matches!(
        a.addr::<Cart>(next_life).send_acked(Cart::Stop).await,
        Err(RemoteError::NoConnection)
    ));
    // An incarnation no start could have drawn yet (an earlier release drew them at random)
    // orders nothing: an old life's.
    let random_life = NodePid::new("b", u64::MAX - 7, pid.local());
    assert!(matches!(
        a.addr::<Cart>(random_life).send_acked(Cart::Stop).await,
        Err(RemoteError::NoProc)
    ));
    // The same rule for `a`'s own name: an earlier life of it is gone, a later one is a node
    // that took the name, which `a` cannot reach.
    let own = |incarnation| NodePid::new("a", incarnation, pid.local());
    let own_earlier = a.addr::<Cart>(own(a.incarnation() - (1 << 20)));
    assert!(matches!(
        own_earlier.send(Cart::Stop).unwrap_err().error(),
        RemoteError::NoProc
    ));
    let own_later = a.addr::<Cart>(own(a.incarnation() + (1 << 20)));
    assert!(own_later
        .send(Cart::Stop)
        .unwrap_err()
        .error()
        .is_no_connection());
    let unknown_node = NodePid::new("zz", 1, pid.local());
    assert!(a
        .addr::<Cart>(unknown_node)
        .send(Cart::Stop)
        .unwrap_err()
        .error()
        .is_no_connection());

    for (sched, node) in nodes {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_fails_monitors_and_asks_with_no_connection_and_its_old_pids_with_no_proc() {
    let server = NatsServer::start();
    let mut nodes = three_nodes(&server).await;
    let (c_sched, c) = nodes.pop().unwrap();
    let a = nodes[0].1.clone();
    let pid = a
        .spawn_on(Placement::Node("c".into()), "cart", 0u64)
        .await
        .unwrap();
    let local = a.spawn_on(Placement::Local, "cart", 7u64).await.unwrap();
    let monitor = a.monitor(pid.clone());
    let handle = a
        .spawn_on_with_handle::<u64, _>(Placement::Node("c".into()), "cart", 0u64)
        .await
        .unwrap();
    let old_incarnation = c.incarnation();
    // An ask C holds unanswered when it dies: it fails with its node, not at its timeout.
    let held = a.addr::<Cart>(pid.clone());
    let in_flight = tokio::spawn(async move { held.ask(Cart::Hold).await });

    // C dies without a word: its tasks stop, its heartbeat stops, its entry stays until it
    // expires. A must declare it down on its own.
    drop(c);
    let down = guarded(GUARD, "Down(NoConnection)", monitor).await;
    assert!(down.reason.is_no_connection(), "{:?}", down.reason);
    assert!(matches!(
        guarded(GUARD, "the handle", handle).await,
        Err(RemoteError::NoConnection)
    ));
    let in_flight = guarded(GUARD, "the ask in flight", in_flight)
        .await
        .unwrap();
    assert!(
        matches!(in_flight, Err(RemoteError::NoConnection)),
        "{in_flight:?}"
    );
    assert!(a
        .addr::<Cart>(pid.clone())
        .ask(Cart::Total)
        .await
        .unwrap_err()
        .is_no_connection());
    assert_eq!(
        a.addr::<Cart>(local).ask(Cart::Total).await.unwrap(),
        7,
        "local processes run on"
    );

    // C comes back: a new incarnation; a PID from its previous life is NoProc.
    let (c2_sched, c2) = start_node(&server.url(), "c").await;
    assert_ne!(c2.incarnation(), old_incarnation);
    guarded(GUARD, "A sees C again", async {
        while !a
            .nodes()
            .iter()
            .any(|n| n.name == "c" && n.incarnation == c2.incarnation())
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(matches!(
        a.addr::<Cart>(pid).send_acked(Cart::Stop).await,
        Err(RemoteError::NoProc)
    ));
    c2.leave().await;
    c2_sched.shutdown_async(GUARD).await;
    c_sched.shutdown_async(GUARD).await;
    for (sched, node) in nodes {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_bytes_fields_arrive_intact_as_slices_of_their_frame() {
    let server = NatsServer::start();
    let nodes = three_nodes(&server).await;
    let a = &nodes[0].1;
    let pid = a
        .spawn_on(Placement::Node("b".into()), "payloads", ())
        .await
        .unwrap();
    let addr = a.addr::<Payloads>(pid);
    for (first, second) in [(300, 100), (20_000, 10), (100_000, 200)] {
        let (one, two) = (pattern(first).into(), pattern(second).into());
        let (intact, gap) = guarded(
            GUARD,
            "pair",
            addr.ask(|reply| Payloads::Pair(one, two, reply)),
        )
        .await
        .unwrap();
        assert!(intact, "{first} + {second} bytes");
        // In one frame, the second payload starts right after the first one and its own
        // MessagePack `bin` header (two bytes for a length under 256): a slice of the frame,
        // not a copy of its own.
        assert_eq!(gap, 2, "{first} + {second} bytes: a slice of the frame");
    }
    // The answer is decoded on the asker's side within the frame it came in: slices of it too.
    let big = bytes::Bytes::from(pattern(70_000));
    let SharedPair(back, end) = guarded(
        GUARD,
        "echo",
        addr.ask(|reply| Payloads::Echo(big.clone(), reply)),
    )
    .await
    .unwrap();
    assert_eq!((&back, &end[..]), (&big, &b"end"[..]));
    let gap = end.as_ptr() as isize - (back.as_ptr() as isize + back.len() as isize);
    assert_eq!(gap, 2, "the answer: a slice of its frame");
    for (sched, node) in nodes {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}

#[test]
fn nodes_start_and_serve_outside_any_tokio_runtime() {
    // No tokio anywhere: each scheduler runs its node in the runtime it builds for its
    // processes, and `Scheduler::block_on` drives the node's futures.
    let server = NatsServer::start();
    let start = |name: &str| {
        let sched = Scheduler::builder().workers(1).build().expect("scheduler");
        let node = sched
            .block_on(Node::start(sched.handle(), cluster(&server.url(), name)))
            .unwrap_or_else(|e| panic!("node {name} did not start outside tokio: {e}"));
        (sched, node)
    };
    let (a_sched, a) = start("a");
    let (b_sched, b) = start("b");
    assert!(a_sched.block_on(a.wait_for_nodes(1, GUARD)), "hang guard");
    let pid = a_sched
        .block_on(a.spawn_on(Placement::Node("b".into()), "cart", 40u64))
        .unwrap();
    let cart = a.addr::<Cart>(pid);
    cart.send(Cart::Add(2)).unwrap();
    assert_eq!(a_sched.block_on(cart.ask(Cart::Total)).unwrap(), 42);
    a_sched.block_on(a.leave());
    b_sched.block_on(b.leave());
    a_sched.shutdown(GUARD);
    b_sched.shutdown(GUARD);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_asking_itself_through_its_node_pid_is_refused_at_once() {
    // A body that reaches itself through a `RemoteAddr` of its own cluster-wide PID (a PID
    // it learned from a directory, say) takes the local route: refused there as a local
    // self-ask is, typed, instead of waiting for an answer only it could give.
    let server = NatsServer::start();
    let (sched, node) = start_node(&server.url(), "a").await;
    let asker = node.clone();
    let handle = sched
        .spawn_fn(move |cx: ProcessCx<Cart>| async move {
            let me = asker.addr::<Cart>(asker.pid(cx.pid()));
            let refused = me.ask(Cart::Total).await;
            Ok::<_, BoxError>(refused.map_err(|e| e.to_string()))
        })
        .unwrap();
    let refused = guarded(GUARD, "the self-ask", handle).await.unwrap();
    assert_eq!(
        refused,
        Err(RemoteError::AskedItself.to_string()),
        "refused as a self-ask"
    );
    node.leave().await;
    sched.shutdown_async(GUARD).await;
}
