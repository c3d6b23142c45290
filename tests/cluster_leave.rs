//! A node that leaves is gone for the others at once, for good: its frames read after its
//! departure — sent before it left, read after the membership watch saw it go — deliver their
//! messages but do not bring it back as a peer, so that asks and sends to it fail
//! `NoConnection` at once (not after `down_after`) and `Node::nodes` never lists it again; the
//! same name started again (a new incarnation) joins as any node does.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::cart::{cart_cluster, Cart};
use cluster_support::{guarded, wait_until, NatsServer};
use procsched::cluster::{Node, Placement, RemoteAddr, RemoteError};
use procsched::prelude::*;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::{mpsc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc as tokio_mpsc, oneshot};

/// Hang guard, and every request's timeout: well under `DOWN_AFTER`, so that an ask that
/// finishes failed `NoConnection` within it was failed on the departure, not by the sweep.
const GUARD: Duration = Duration::from_secs(10);
/// No node is declared down for silence within a test.
const DOWN_AFTER: Duration = Duration::from_secs(30);
/// Messages sent after the gate: they reach the receiving node after the departure.
const BURST: u64 = 100;
/// Frames (one `Bulk` message each) ahead of the answer in `an_answer_given_just_before_...`.
const BULK_FRAMES: u64 = 300;

/// What the receiving process takes: a gate, then numbered messages.
#[derive(Serialize, Deserialize)]
enum Burst {
    Gate(Gate),
    Item(u64),
    /// Big enough to be a frame of its own.
    Bulk(Vec<u8>),
}

/// Decoding a `Gate` (on the receiving node's inbound task) holds that task until the test
/// opens the gate: every frame behind the gate's is read after that.
struct Gate;

/// The gate's ends: told when the decoding holds, and waited on until the test opens it.
struct GateEnds {
    held: oneshot::Sender<()>,
    open: mpsc::Receiver<()>,
}

static GATE: Mutex<Option<GateEnds>> = Mutex::new(None);

/// Held through each test that uses the gate: there is one gate per test binary.
static GATE_USER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Serialize for Gate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_unit()
    }
}

impl<'de> Deserialize<'de> for Gate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Gate, D::Error> {
        <()>::deserialize(deserializer)?;
        let ends = GATE.lock().unwrap().take();
        if let Some(GateEnds { held, open }) = ends {
            let _ = held.send(());
            // The inbound task's worker is handed over while it waits: the node's other tasks
            // (its membership watch) run on.
            tokio::task::block_in_place(|| open.recv_timeout(GUARD))
                .expect("hang guard: the gate was never opened");
        }
        Ok(Gate)
    }
}

/// A process whose argument's decoding holds on the gate.
async fn gated(cx: ProcessCx<Burst>, _gate: Gate) -> Result<(), BoxError> {
    loop {
        cx.recv().await?;
    }
}

async fn start_node(url: &str, name: &str) -> (Scheduler, Node) {
    let sched = Scheduler::builder().workers(1).build().expect("scheduler");
    let cluster = cart_cluster(url, name, DOWN_AFTER, GUARD)
        .message::<Burst>("burst")
        .spawnable("gated", gated);
    let node = Node::start(sched.handle(), cluster)
        .await
        .unwrap_or_else(|e| panic!("node {name} did not start: {e}"));
    (sched, node)
}

/// Nodes "a" and "b" on `server`, started one after the other, each seeing the other.
async fn start_a_and_b(server: &NatsServer) -> ((Scheduler, Node), (Scheduler, Node)) {
    let (a_sched, a) = start_node(&server.url(), "a").await;
    let (b_sched, b) = start_node(&server.url(), "b").await;
    assert!(a.wait_for_nodes(1, GUARD).await, "hang guard: a sees b");
    assert!(b.wait_for_nodes(1, GUARD).await, "hang guard: b sees a");
    ((a_sched, a), (b_sched, b))
}

/// Arms the gate and sends it with `to` (from b to a's receiver); returns once a's inbound task
/// holds on it, with the sender that opens it.
async fn hold_a_on_the_gate(to: &RemoteAddr<Burst>) -> mpsc::Sender<()> {
    let (held, gate_held) = oneshot::channel();
    let (open_gate, open) = mpsc::channel();
    *GATE.lock().unwrap() = Some(GateEnds { held, open });
    to.send(Burst::Gate(Gate)).unwrap();
    guarded(GUARD, "a's inbound task holds on the gate", gate_held)
        .await
        .unwrap();
    open_gate
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_left_is_not_brought_back_by_its_late_frames() {
    let _gate = GATE_USER.lock().await;
    let server = NatsServer::start();
    let ((a_sched, a), (b_sched, b)) = start_a_and_b(&server).await;

    // On a: a process that reports each numbered message it gets.
    let (numbers, mut received) = tokio_mpsc::unbounded_channel();
    let receiver = a_sched
        .spawn_fn(move |cx: ProcessCx<Burst>| async move {
            loop {
                if let Burst::Item(n) = cx.recv().await? {
                    let _ = numbers.send(n);
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap();
    // On b: a cart, asked from a.
    let on_b = a
        .spawn_on(Placement::Node("b".into()), "cart", 7u64)
        .await
        .unwrap();
    assert_eq!(
        a.addr::<Cart>(on_b.clone()).ask(Cart::Total).await.unwrap(),
        7
    );

    // b sends the gate; once a's inbound task holds on it, b sends a burst (in frames behind
    // the gate's), sees it published, and leaves.
    let to_receiver = b.addr::<Burst>(a.pid(receiver.pid()));
    let published = b.stats().items_out;
    let open_gate = hold_a_on_the_gate(&to_receiver).await;
    for n in 0..BURST {
        to_receiver.send(Burst::Item(n)).unwrap();
    }
    wait_until("b published the burst", GUARD, || {
        b.stats().items_out > published + BURST
    });
    let left_incarnation = b.incarnation();
    let departures = a.stats().departures;
    b.leave().await;
    // a declares b down only once its inbound task has read the frames received before the
    // departure (`inbound.rs`, "Departures").
    wait_until("a's membership watch reads b's departure", GUARD, || {
        a.stats().departures > departures
    });
    assert!(
        a.nodes().iter().any(|n| n.name == "b"),
        "b is not down on a before a has read b's last frames"
    );

    // a reads the burst now, from a node that left: the messages are delivered.
    open_gate.send(()).unwrap();
    for n in 0..BURST {
        let got = guarded(GUARD, "the burst's messages", received.recv()).await;
        assert_eq!(got, Some(n), "every message of the burst, in order");
    }

    // ...and b stays gone: an ask and a send to it fail at once (the guard is under
    // `down_after`: a peer taken back would only be swept after it).
    let ask = guarded(
        GUARD,
        "an ask to a node that left",
        a.addr::<Cart>(on_b.clone()).ask(Cart::Total),
    )
    .await;
    assert!(ask.as_ref().is_err_and(|e| e.is_no_connection()), "{ask:?}");
    let send = a.addr::<Burst>(on_b.clone()).send(Burst::Item(0));
    assert!(
        send.as_ref().is_err_and(|e| e.error().is_no_connection()),
        "a send to a node that left"
    );
    assert!(
        a.nodes().iter().all(|n| n.name != "b"),
        "never listed again"
    );

    // b started again: a new incarnation, a peer as any node is.
    let (b2_sched, b2) = start_node(&server.url(), "b").await;
    assert_ne!(b2.incarnation(), left_incarnation);
    assert!(
        a.wait_for_nodes(1, GUARD).await,
        "hang guard: a sees b again"
    );
    assert!(a
        .nodes()
        .iter()
        .any(|n| n.name == "b" && n.incarnation == b2.incarnation()));
    let on_b2 = a
        .spawn_on(Placement::Node("b".into()), "cart", 9u64)
        .await
        .unwrap();
    assert_eq!(a.addr::<Cart>(on_b2).ask(Cart::Total).await.unwrap(), 9);

    for (sched, node) in [(b2_sched, b2), (a_sched, a)] {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
    b_sched.shutdown_async(GUARD).await;
}

/// An ask answered just before its node leaves gets the answer, not `NoConnection`: the leaving
/// node publishes its last frames before it deletes its membership entry, and the asking node
/// reads the frames it has received before it declares the node down — here with its inbound
/// task held (the gate) until its membership watch has read the departure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_given_just_before_leaving_reaches_the_asker() {
    let _gate = GATE_USER.lock().await;
    let server = NatsServer::start();
    let ((a_sched, a), (b_sched, b)) = start_a_and_b(&server).await;
    let receiver = a_sched
        .spawn_fn(move |cx: ProcessCx<Burst>| async move {
            loop {
                cx.recv().await?;
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap();
    let on_b = a
        .spawn_on(Placement::Node("b".into()), "cart", 7u64)
        .await
        .unwrap();

    // a's inbound task holds on the gate; a asks b's cart; b answers (published: counted out)
    // and leaves.
    let open_gate = hold_a_on_the_gate(&b.addr::<Burst>(a.pid(receiver.pid()))).await;
    // Many frames before the answer: more than a tokio task's budget of receives in one poll.
    let bulk = b.stats().items_out;
    for _ in 0..BULK_FRAMES {
        b.addr::<Burst>(a.pid(receiver.pid()))
            .send(Burst::Bulk(vec![7; 20_000]))
            .unwrap();
    }
    wait_until("b published the bulk", GUARD, || {
        b.stats().items_out >= bulk + BULK_FRAMES
    });
    let answered = b.stats().items_out;
    let ask = tokio::spawn({
        let addr = a.addr::<Cart>(on_b.clone());
        async move { addr.ask(Cart::Total).await }
    });
    wait_until("b answered", GUARD, || b.stats().items_out > answered);
    let departures = a.stats().departures;
    b.leave().await;
    wait_until("a's membership watch reads b's departure", GUARD, || {
        a.stats().departures > departures
    });

    open_gate.send(()).unwrap();
    let answer = guarded(GUARD, "the ask", ask).await.unwrap();
    assert_eq!(answer.ok(), Some(7), "the answer b gave before it left");
    wait_until("a declares b down", GUARD, || {
        a.nodes().iter().all(|n| n.name != "b")
    });

    a.leave().await;
    a_sched.shutdown_async(GUARD).await;
    b_sched.shutdown_async(GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_node_whose_entry_is_deleted_from_outside_is_taken_back_when_it_claims_it_again() {
    let server = NatsServer::start();
    let ((_a_sched, a), (_b_sched, b)) = start_a_and_b(&server).await;
    let on_b = a
        .spawn_on(Placement::Node("b".into()), "cart", 7u64)
        .await
        .unwrap();
    // A client other than b (an operator, a script) deletes b's entry while b lives: a
    // declares b down on reading the delete, as for a leave.
    let down_before = a.stats().peers_down;
    let raw = procsched::cluster::nats::connect(server.url())
        .await
        .unwrap();
    let bucket = procsched::cluster::nats::jetstream::new(raw)
        .get_key_value("procsched_nodes")
        .await
        .unwrap();
    bucket.delete("b").await.unwrap();
    wait_until("a reads the delete", GUARD, || {
        a.stats().peers_down > down_before
    });
    // b's next heartbeat finds its entry gone and claims its name again, at the same
    // incarnation: a takes it back (its entry, written by b itself, is not a late frame).
    wait_until("a takes b back", GUARD, || {
        a.nodes().iter().any(|n| n.name == "b")
    });
    assert_eq!(a.addr::<Cart>(on_b).ask(Cart::Total).await.unwrap(), 7);
    drop(b);
}

/// A clone of a node that left is out of the cluster: whatever needs another node fails
/// `NoConnection` at once (not `NoNode`, as for a name never seen), a spawn by load too (it
/// would hand out a PID of the life its peers declared down); what is this node's own works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_of_a_node_that_left_knows_no_node() {
    let server = NatsServer::start();
    let ((a_sched, a), (b_sched, b)) = start_a_and_b(&server).await;
    let on_b = a
        .spawn_on(Placement::Node("b".into()), "cart", 7u64)
        .await
        .unwrap();
    let clone = a.clone();
    a.leave().await;

    let no_connection = |what: &str, result: Result<(), RemoteError>| {
        assert!(
            matches!(result, Err(RemoteError::NoConnection)),
            "{what}: {result:?}"
        );
    };
    for placement in [
        Placement::LeastLoaded,
        Placement::Node("b".into()),
        Placement::AnyOf(vec!["b".into()]),
    ] {
        let spawned = clone.spawn_on(placement.clone(), "cart", 1u64).await;
        no_connection(&format!("spawn {placement:?}"), spawned.map(drop));
    }
    no_connection(
        "whereis on b",
        clone.whereis("b", "inventory").await.map(drop),
    );
    no_connection(
        "ask b's cart",
        clone.addr::<Cart>(on_b).ask(Cart::Total).await.map(drop),
    );
    // Its own processes: placed here by name, found here.
    let here = guarded(
        GUARD,
        "a local spawn",
        clone.spawn_on(Placement::Local, "cart", 3u64),
    )
    .await
    .unwrap();
    assert_eq!(here.node(), "a");
    assert_eq!(clone.addr::<Cart>(here).ask(Cart::Total).await.unwrap(), 3);
    assert_eq!(clone.whereis("a", "nobody").await.unwrap(), None);

    drop(clone);
    b.leave().await;
    a_sched.shutdown_async(GUARD).await;
    b_sched.shutdown_async(GUARD).await;
}

/// A node cut off from NATS still leaves: each step of `leave` (publishing its last frames,
/// deleting its entry) is bounded by `down_after`, though async-nats holds a flush until the
/// server is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_nats_still_leaves() {
    let mut server = NatsServer::start();
    let sched = Scheduler::builder().workers(1).build().expect("scheduler");
    let down_after = Duration::from_secs(1);
    let node = Node::start(
        sched.handle(),
        cart_cluster(&server.url(), "a", down_after, GUARD),
    )
    .await
    .expect("node a");
    server.stop();
    // Hang guard only: `leave` takes at most 2 × `down_after` here.
    guarded(GUARD, "leave with the server gone", node.leave()).await;
    sched.shutdown_async(GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_read_while_the_node_leaves_leaves_no_process_nobody_can_address() {
    let _gate = GATE_USER.lock().await;
    let server = NatsServer::start();
    let ((a_sched, a), (b_sched, b)) = start_a_and_b(&server).await;
    // b's inbound task holds on the spawn's argument, and b leaves meanwhile: the spawn is
    // made once its lanes are closed, so its answer cannot go.
    let live = b_sched.live_processes();
    let (held, gate_held) = oneshot::channel();
    let (open_gate, open) = mpsc::channel();
    *GATE.lock().unwrap() = Some(GateEnds { held, open });
    let spawn = tokio::spawn({
        let a = a.clone();
        async move { a.spawn_on(Placement::Node("b".into()), "gated", Gate).await }
    });
    guarded(GUARD, "b's inbound task holds on the argument", gate_held)
        .await
        .unwrap();
    let departures = a.stats().departures;
    let left = b.clone();
    let leaving = tokio::spawn(b.leave());
    wait_until("a reads b's departure", GUARD, || {
        a.stats().departures > departures
    });
    guarded(GUARD, "b leaves", leaving).await.unwrap();
    open_gate.send(()).unwrap();
    let spawned = guarded(GUARD, "the spawn", spawn).await.unwrap();
    assert!(
        matches!(spawned, Err(RemoteError::NoConnection)),
        "{spawned:?}"
    );
    // Nobody could ever address the process: it does not run on.
    wait_until("the orphan is stopped", GUARD, || {
        left.stats().orphans_stopped == 1
    });
    wait_until("no process of the spawn runs on b", GUARD, || {
        b_sched.live_processes() == live
    });
    a.leave().await;
    a_sched.shutdown_async(GUARD).await;
    b_sched.shutdown_async(GUARD).await;
}
