//! A node cut off from NATS for longer than its membership entry lives, whose name another node
//! claims meanwhile (its twin), finds out when it comes back: it has lost its name. It declares
//! every peer down — what it held on them resolves `NoConnection` — and its remote operations
//! fail `NoConnection` at once from then on, while its local processes run on and the twin
//! serves under the name as any node does.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::cart::{cart, Cart};
use cluster_support::proxy::Proxy;
use cluster_support::{guarded, linked, NatsServer};
use procsched::cluster::{nats, Cluster, ClusterError, Node, Placement, RemoteError};
use procsched::prelude::*;
use procsched::supervision::ExitReason;
use std::time::Duration;

/// Hang guard; also every request's timeout, so that a request failing before it is a
/// failure the node knew of, not a timeout.
const GUARD: Duration = Duration::from_secs(30);

/// Node `name` on the server at `url`: its entry lives three heartbeats (750 ms), and a silent
/// peer is declared down only after the test: the cut node does not give up its peers on its
/// own, so what it holds on them still waits when it comes back.
fn cluster(url: &str, name: &str) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(250))
        .down_after(Duration::from_secs(120))
        .request_timeout(GUARD)
        .message::<Cart>("cart")
        .spawnable("cart", cart)
}

/// Waits (checking every few milliseconds) until `done`, or fails the test after [`GUARD`].
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    guarded(GUARD, what, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// A process that takes asks and never answers them (it keeps their replies): an ask of it
/// waits until its node is declared down.
async fn silent(cx: ProcessCx<Cart>) -> Result<(), BoxError> {
    let mut held = Vec::new();
    loop {
        let Cart::Total(reply) = cx.recv().await?;
        held.push(reply);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_name_was_claimed_while_it_was_cut_off_declares_its_peers_down() {
    let server = NatsServer::start();
    let proxy = Proxy::start(server.port());
    let sched = || Scheduler::builder().workers(1).build().expect("scheduler");
    let (a_sched, x1_sched, x2_sched) = (sched(), sched(), sched());
    let a = Node::start(a_sched.handle(), cluster(&server.url(), "a"))
        .await
        .expect("a starts");
    let x1 = Node::start(x1_sched.handle(), cluster(&proxy.url(), "x"))
        .await
        .expect("x starts (through the proxy)");
    assert!(a.wait_for_nodes(1, GUARD).await && x1.wait_for_nodes(1, GUARD).await);

    // What x1 holds on `a` before it is cut off: a monitor, a link, an ask waiting.
    let silent_pid = a.pid(a_sched.spawn_fn(silent).expect("spawn").pid());
    let monitor = x1.monitor(silent_pid.clone());
    let link = linked(&x1_sched, &x1, silent_pid.clone(), true, GUARD).await;
    let asked = x1.addr::<Cart>(silent_pid.clone());
    let waiting_ask = tokio::spawn(async move { asked.ask(Cart::Total).await });
    let local = x1.pid(x1_sched.spawn_fn(|cx| cart(cx, 7)).expect("spawn").pid());

    proxy.cut();
    // x1's entry expires within three heartbeats of its last; until then the name is taken.
    let x2 = guarded(GUARD, "the twin claims the name", async {
        loop {
            match Node::start(x2_sched.handle(), cluster(&server.url(), "x")).await {
                Ok(x2) => return x2,
                Err(ClusterError::NameTaken(_)) => continue,
                Err(other) => panic!("the twin did not start: {other}"),
            }
        }
    })
    .await;
    eventually("a sees the twin", || {
        a.nodes()
            .iter()
            .any(|node| node.name == "x" && node.incarnation == x2.incarnation())
    })
    .await;
    proxy.restore();

    // Back, x1 learns its name is the twin's: what it held on `a` ends `NoConnection`.
    let down = guarded(GUARD, "x1's monitor of a process on a", monitor).await;
    assert_eq!(down.reason, ExitReason::NoConnection);
    let exit = guarded(GUARD, "x1's link to a process on a", link)
        .await
        .expect("the linked process ends")
        .expect("it trapped an exit signal");
    assert_eq!(exit.reason, ExitReason::NoConnection);
    let answer = guarded(GUARD, "x1's ask waiting on a", waiting_ask)
        .await
        .expect("the asking task");
    assert!(
        matches!(answer, Err(RemoteError::NoConnection)),
        "{answer:?}"
    );
    assert!(x1.is_evicted());
    assert!(x1.nodes().is_empty());

    // From now on its remote operations fail `NoConnection` (not a timeout: it knows).
    let ask = guarded(
        GUARD,
        "an ask from x1",
        x1.addr::<Cart>(silent_pid.clone()).ask(Cart::Total),
    )
    .await;
    assert!(matches!(ask, Err(RemoteError::NoConnection)), "{ask:?}");
    let spawned = guarded(
        GUARD,
        "a spawn from x1",
        x1.spawn_on(Placement::Node("a".into()), "cart", 1u64),
    )
    .await;
    assert!(
        matches!(spawned, Err(RemoteError::NoConnection)),
        "{spawned:?}"
    );
    let down = guarded(
        GUARD,
        "a new monitor from x1",
        x1.monitor(silent_pid.clone()),
    )
    .await;
    assert_eq!(down.reason, ExitReason::NoConnection);
    // Its name is the twin's now: a lookup on it is no lookup of its own processes.
    let found = guarded(GUARD, "a lookup on x from x1", x1.whereis("x", "anything")).await;
    assert!(matches!(found, Err(RemoteError::NoConnection)), "{found:?}");
    // Its own processes run on.
    let total = guarded(
        GUARD,
        "a local ask on x1",
        x1.addr::<Cart>(local).ask(Cart::Total),
    )
    .await;
    assert_eq!(total.expect("x1's own cart answers"), 7);

    // The twin serves under the name.
    assert!(!x2.is_evicted());
    let on_twin = guarded(
        GUARD,
        "a spawn on the twin",
        a.spawn_on(Placement::Node("x".into()), "cart", 2u64),
    )
    .await
    .expect("a spawns on x");
    assert_eq!(on_twin.incarnation(), x2.incarnation());
    // To x1 the twin's PIDs name a node it cannot reach, not a previous life of its own.
    let ask = guarded(
        GUARD,
        "an ask of the twin from x1",
        x1.addr::<Cart>(on_twin.clone()).ask(Cart::Total),
    )
    .await;
    assert!(matches!(ask, Err(RemoteError::NoConnection)), "{ask:?}");
    let down = guarded(
        GUARD,
        "a monitor of the twin from x1",
        x1.monitor(on_twin.clone()),
    )
    .await;
    assert_eq!(down.reason, ExitReason::NoConnection);
    let total = guarded(
        GUARD,
        "an ask of the twin's cart",
        a.addr::<Cart>(on_twin).ask(Cart::Total),
    )
    .await;
    assert_eq!(total.expect("the twin's cart answers"), 2);
    let on_a = guarded(
        GUARD,
        "a spawn from the twin",
        x2.spawn_on(Placement::Node("a".into()), "cart", 3u64),
    )
    .await
    .expect("x spawns on a");
    let total = guarded(
        GUARD,
        "an ask from the twin",
        x2.addr::<Cart>(on_a).ask(Cart::Total),
    )
    .await;
    assert_eq!(total.expect("a's cart answers the twin"), 3);

    x1.leave().await;
    x2.leave().await;
    a.leave().await;
    for sched in [a_sched, x1_sched, x2_sched] {
        sched.shutdown_async(GUARD).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_whose_name_nobody_claimed_claims_it_again_and_goes_on() {
    let server = NatsServer::start();
    let proxy = Proxy::start(server.port());
    let sched = || Scheduler::builder().workers(1).build().expect("scheduler");
    let (a_sched, x_sched) = (sched(), sched());
    let a = Node::start(a_sched.handle(), cluster(&server.url(), "a"))
        .await
        .expect("a starts");
    let x = Node::start(x_sched.handle(), cluster(&proxy.url(), "x"))
        .await
        .expect("x starts (through the proxy)");
    assert!(a.wait_for_nodes(1, GUARD).await && x.wait_for_nodes(1, GUARD).await);
    let on_a = a.pid(a_sched.spawn_fn(|cx| cart(cx, 5)).expect("spawn").pid());
    let raw = nats::connect(server.url()).await.expect("a plain client");
    let bucket = nats::jetstream::new(raw)
        .get_key_value("procsched_nodes")
        .await
        .expect("the membership bucket");
    let holder = || async {
        let entry = bucket.entry("x").await.ok().flatten()?;
        Some(entry.value)
    };

    proxy.cut();
    guarded(GUARD, "x's entry expires", async {
        while holder().await.is_some() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    proxy.restore();
    guarded(GUARD, "x claims its name again", async {
        while holder().await.is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;

    // Its own entry back in the bucket is no other node's claim.
    assert!(!x.is_evicted());
    let total = guarded(
        GUARD,
        "an ask from x",
        x.addr::<Cart>(on_a).ask(Cart::Total),
    )
    .await;
    assert_eq!(total.expect("a's cart answers x"), 5);
    assert!(!x.is_evicted());
    x.leave().await;
    a.leave().await;
    for sched in [a_sched, x_sched] {
        sched.shutdown_async(GUARD).await;
    }
}

/// A node that died without leaving (dropped: its heartbeat stops, its entry stays until it
/// expires) is started again under its name, at the shortest heartbeat allowed: the restart
/// waits for the dead entry — which NATS may expire a few heartbeats late — and claims the name,
/// round after round, never `NameTaken`; while a second node under a live node's name is
/// `NameTaken`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_under_its_name_at_a_short_heartbeat_waits_for_its_dead_entry() {
    let server = NatsServer::start();
    let short = |name: &str| {
        Cluster::nats(server.url())
            .name(name)
            .bucket("procsched-short-heartbeat")
            .heartbeat(Duration::from_millis(34))
            .down_after(Duration::from_millis(200))
    };
    let sched = Scheduler::builder().workers(1).build().expect("scheduler");
    let mut node = Node::start(sched.handle(), short("r"))
        .await
        .expect("r starts");
    for round in 0..4 {
        let old = node.incarnation();
        drop(node); // dies without a word
        node = guarded(
            GUARD,
            "the restart",
            Node::start(sched.handle(), short("r")),
        )
        .await
        .unwrap_or_else(|error| panic!("round {round}: the restart failed: {error}"));
        assert_ne!(node.incarnation(), old, "a new incarnation");
    }
    let other = Scheduler::builder().workers(1).build().expect("scheduler");
    match guarded(GUARD, "a second r", Node::start(other.handle(), short("r"))).await {
        Err(ClusterError::NameTaken(name)) => assert_eq!(name, "r"),
        Ok(_) => panic!("a second live `r` started"),
        Err(other) => panic!("refused otherwise: {other}"),
    }
    node.leave().await;
    sched.shutdown_async(GUARD).await;
}
