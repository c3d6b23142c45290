//! A node declared down by one side only — by `Node::disconnect`, or on its own evidence while
//! the other lives (a frame that met no responder while the other reconnected) — is declared
//! down on both sides, as OTP's `nodedown` is seen at both ends of a connection: links fire
//! `NoConnection` and monitors resolve `Down(NoConnection)` on both nodes, and the nodes then
//! reconnect by themselves. And a "no responders" answer that NATS did not send (any client can
//! write the status header) declares nothing down.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::cart::{cart_cluster, Cart};
use cluster_support::forge::{counted_frame, frame, Item};
use cluster_support::{guarded, linked, start_nodes, stop_nodes, NatsServer};
use procsched::cluster::{nats, Cluster, Node, NodePid, Placement, RemoteError};
use procsched::prelude::*;
use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

/// A silent node is declared down only after a minute, longer than any test: only what a test
/// does declares a node down.
fn cluster(url: &str, name: &str) -> Cluster {
    cart_cluster(url, name, Duration::from_secs(60), GUARD)
}

/// A cart on node `on`, spawned from `from`, answering once (so that whatever `from` sent it
/// before — a link, a monitor — is in place on `on`: one node's items to another keep their
/// order).
async fn settled_cart(from: &Node, on: &str, start: u64) -> NodePid {
    let pid = guarded(
        GUARD,
        "spawn",
        from.spawn_on(Placement::Node(on.into()), "cart", start),
    )
    .await
    .expect("a cart");
    answered(from, &pid, start).await;
    pid
}

async fn answered(from: &Node, pid: &NodePid, expected: u64) {
    let total = guarded(
        GUARD,
        "ask",
        from.addr::<Cart>(pid.clone()).ask(Cart::Total),
    )
    .await;
    assert_eq!(total.expect("the cart answers"), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_is_seen_on_both_sides_and_the_nodes_reconnect() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let (a, (b_sched, b)) = (&nodes[0].1, (&nodes[1].0, &nodes[1].1));

    // On b: one process linked to a process on a that traps exits, one that does not; a monitor
    // of that process. On a: a monitor of a process on b.
    let on_a = settled_cart(b, "a", 1).await;
    let trapping = linked(b_sched, b, on_a.clone(), true, GUARD).await;
    let plain = linked(b_sched, b, on_a.clone(), false, GUARD).await;
    let b_watches = b.monitor(on_a.clone());
    answered(b, &on_a, 1).await;
    let on_b = settled_cart(a, "b", 2).await;
    let a_watches = a.monitor(on_b.clone());
    answered(a, &on_b, 2).await;

    assert!(a.disconnect("b"), "b was live");
    assert!(!a.disconnect("b"), "and is no longer");
    assert!(!a.disconnect("nobody"));

    // a's side, at once.
    let down = guarded(GUARD, "a's monitor of b's cart", a_watches).await;
    assert!(down.reason.is_no_connection(), "{:?}", down.reason);
    // b's side, once it hears of it.
    let down = guarded(GUARD, "b's monitor of a's cart", b_watches).await;
    assert!(down.reason.is_no_connection(), "{:?}", down.reason);
    let exit = guarded(GUARD, "the trapping process's link", trapping)
        .await
        .expect("it returns the exit it trapped")
        .expect("an exit, not a message");
    assert!(exit.reason.is_no_connection(), "{:?}", exit.reason);
    let ended = guarded(GUARD, "the plain process's link", plain)
        .await
        .expect_err("it ends with its link");
    assert!(
        ended.exit_reason().is_no_connection(),
        "{:?}",
        ended.exit_reason()
    );
    assert!(b.stats().peers_down >= 1, "{:?}", b.stats());

    // They reconnect by themselves: processes on both sides lived through it, and new asks,
    // spawns and monitors work both ways.
    assert!(a.wait_for_nodes(1, GUARD).await && b.wait_for_nodes(1, GUARD).await);
    answered(a, &on_b, 2).await;
    let again = settled_cart(b, "a", 3).await;
    let watching = b.monitor(again.clone());
    answered(b, &again, 3).await;
    a.kill(&again).expect("a kills its own process");
    let down = guarded(GUARD, "b's new monitor", watching).await;
    assert!(down.reason.is_killed(), "{:?}", down.reason);

    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervised_child_on_a_disconnected_node_stops_instead_of_running_beside_its_replacement()
{
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let ((a_sched, a), (b_sched, b)) = ((&nodes[0].0, &nodes[0].1), (&nodes[1].0, &nodes[1].1));
    // a is busier than b (as its heartbeat tells b, and so itself: placement reads the same
    // figures), so `AnyOf` both nodes places the child on b.
    let idle: Vec<_> = (0..10)
        .map(|_| {
            a_sched
                .spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })
                .unwrap()
        })
        .collect();
    guarded(GUARD, "a's heartbeat counts them", async {
        while !b
            .nodes()
            .iter()
            .any(|node| node.name == "a" && node.live >= 10)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let (spec, child) = a
        .remote_child(
            "worker",
            Placement::AnyOf(vec!["b".into(), "a".into()]),
            "cart",
            5u64,
        )
        .unwrap();
    let supervisor = procsched::supervision::Supervisor::one_for_one()
        .max_restarts(100, Duration::from_secs(60))
        .child(spec)
        .start(&a.scheduler())
        .await
        .expect("the supervisor starts");
    let first = guarded(GUARD, "the child runs", child.running()).await;
    assert_eq!(first.node(), "b", "the less loaded node");
    answered(a, &first, 5).await;
    let first_ended = b_sched.monitor(first.local());

    assert!(a.disconnect("b"));
    // Its supervisor restarts it; the first instance stops with its supervisor's link
    // instead of running beside it.
    let down = guarded(GUARD, "the first instance ends", first_ended).await;
    assert!(down.reason.is_no_connection(), "{:?}", down.reason);
    let second = guarded(GUARD, "the restart", async {
        loop {
            match child.pid() {
                Some(pid) if pid != first => return pid,
                _ => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    })
    .await;
    // On a, or on b if b was a peer again by then (it comes back at its next heartbeat): a
    // new instance either way, beside no other.
    answered(a, &second, 5).await;
    assert!(
        guarded(GUARD, "restarts", supervisor.restarts())
            .await
            .unwrap()
            >= 1
    );
    drop(idle);
    stop_nodes(nodes, GUARD).await;
}

/// Publishes, as a raw NATS client on `port`, a message with the status header "503" ("no
/// responders") on `subject`: what NATS itself sends when a request meets no subscriber.
fn forge_no_responders(port: u16, subject: &str) {
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(GUARD)).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).expect("INFO");
    let header = "NATS/1.0 503\r\n\r\n";
    let mut out = stream;
    write!(
        out,
        "CONNECT {{\"verbose\":false,\"headers\":true}}\r\nHPUB {subject} {len} {len}\r\n{header}\r\nPING\r\n",
        len = header.len()
    )
    .unwrap();
    loop {
        line.clear();
        reader.read_line(&mut line).expect("PONG");
        assert!(!line.starts_with("-ERR"), "{line}");
        if line.starts_with("PONG") {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_responders_answer_nats_did_not_send_declares_nothing_down() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    let on_b = settled_cart(a, "b", 7).await;
    // The subject a forger can write from what the membership bucket shows (the nodes' names
    // and b's incarnation), in the form frames had before it carried a secret, and one with a
    // secret guessed.
    let forged = [
        format!("procsched.node.a.nr-{:016x}-b", b.incarnation()),
        format!(
            "procsched.node.a.nr-{:016x}{:016x}-b",
            1u64,
            b.incarnation()
        ),
    ];
    for subject in &forged {
        forge_no_responders(server.port(), subject);
    }
    let rejected = a.stats().rejected_frames;
    guarded(GUARD, "a reads the forgeries", async {
        while a.stats().rejected_frames < 2 && a.stats().unreached == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let stats = a.stats();
    assert_eq!(
        (stats.unreached, stats.peers_down),
        (0, 0),
        "{stats:?} ({rejected})"
    );
    assert_eq!(a.nodes().len(), 1, "b is still a peer");
    answered(a, &on_b, 7).await;
    stop_nodes(nodes, GUARD).await;
}

/// A frame from `name`, a node that never was (no membership entry), to node `to`: one message
/// to no process.
fn ghost_frame(name: &str, to: &Node) -> Vec<u8> {
    let nobody = Item::Message {
        to: u64::MAX,
        ty: "cart".into(),
        body: vec![0xc0],
        ack: None,
    };
    frame(name, 1, to.incarnation(), nobody)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_known_only_from_frames_is_no_placement_target() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let a = &nodes[0].1;
    // Any client can send a frame in any name: "ghost" has no membership entry.
    let raw = nats::connect(server.url()).await.unwrap();
    raw.publish("procsched.node.a.data", ghost_frame("ghost", a).into())
        .await
        .unwrap();
    raw.flush().await.unwrap();
    guarded(GUARD, "a reads the frame", async {
        while a.stats().frames_in == 0 || a.stats().undelivered + a.stats().rejected_items == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    for placement in [
        Placement::Node("ghost".into()),
        Placement::AnyOf(vec!["ghost".into()]),
    ] {
        let placed = guarded(GUARD, "placement", a.spawn_on(placement, "cart", 0u64)).await;
        assert!(matches!(placed, Err(RemoteError::NoNode(_))), "{placed:?}");
    }
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_declaration_in_a_frame_cuts_the_nodes_off_for_no_longer_than_two_heartbeats() {
    // Any client can write a frame in a live node's name (its incarnation is in the bucket)
    // whose head says it declared the receiver down: the receiver believes it once (as it
    // would believe a forged `Down`), but b's own heartbeats, which never say so, win: b's
    // frames are not dropped as from an ended session for ever.
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    let on_b = settled_cart(a, "b", 9).await;
    let raw = nats::connect(server.url()).await.unwrap();
    let forged = counted_frame("b", b.incarnation(), a.incarnation(), 1, Vec::new());
    raw.publish("procsched.node.a.ctl", forged.into())
        .await
        .unwrap();
    raw.flush().await.unwrap();
    guarded(GUARD, "a believes it once", async {
        while a.stats().peers_down == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    // Asks from a to b work again (b's answers are a's again) once b's heartbeats are read.
    let addr = a.addr::<Cart>(on_b);
    let answered = guarded(GUARD, "asks work again", async {
        loop {
            match addr.ask_within(Duration::from_secs(1), Cart::Total).await {
                Ok(total) => return total,
                Err(RemoteError::TimedOut(_) | RemoteError::NoConnection) => {}
                Err(other) => panic!("{other}"),
            }
        }
    })
    .await;
    assert_eq!(answered, 9);
    assert_eq!(a.stats().peers_down, 1, "believed once");
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_known_only_from_frames_and_swept_leave_nothing_in_the_heartbeat() {
    // A frame from an unknown name admits it until it is swept for silence; it is not a
    // member, so its sweep is not counted for it to hear of: a flood of names does not grow
    // the node's heartbeat (it grew 91 bytes per name, past NATS's payload limit at 12 000).
    let server = NatsServer::start();
    let quick = |name: &str| cart_cluster(&server.url(), name, Duration::from_millis(600), GUARD);
    let nodes = start_nodes(&["a", "b"], quick, GUARD).await;
    let a = &nodes[0].1;
    let raw = nats::connect(server.url()).await.unwrap();
    const NAMES: u64 = 50;
    for n in 0..NAMES {
        let forged = ghost_frame(&format!("ghost-{n}"), a);
        raw.publish("procsched.node.a.data", forged.into())
            .await
            .unwrap();
    }
    raw.flush().await.unwrap();
    guarded(GUARD, "every ghost is swept", async {
        while a.stats().peers_down < NAMES {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // a's membership entry, as its next heartbeats write it.
    let bucket = nats::jetstream::new(raw.clone())
        .get_key_value("procsched_nodes")
        .await
        .unwrap();
    let before = bucket.entry("a").await.unwrap().unwrap().revision;
    let entry = guarded(GUARD, "a heartbeat after the sweeps", async {
        loop {
            let entry = bucket.entry("a").await.unwrap().unwrap();
            if entry.revision > before + 1 {
                return entry;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        entry.value.len() < 200,
        "{} bytes in a's heartbeat",
        entry.value.len()
    );
    stop_nodes(nodes, GUARD).await;
}
