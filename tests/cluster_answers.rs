//! An answer — an ask's reply, an acked send's ack, a spawn's result, a `Down` — is taken only
//! from the node its request went to: a client that is no member (or another node) answering
//! a pending request's id is rejected and counted, and the request waits on for its real answer.
//! A spawn's answer that comes after its `spawn_on` gave up (timed out, or dropped) names a
//! process nobody holds: it is terminated, not left running beside a retry's. An ask whose
//! future is dropped forgets its wait at once, and its answer, when it comes, is counted late.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::forge::{frame_of, Body, Item};
use cluster_support::{start_nodes, stop_nodes, wait_until, NatsServer};
use procsched::cluster::{nats, Cluster, Node, Placement};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

/// Set once the holder keeps a port.
static HELD: AtomicBool = AtomicBool::new(false);

#[derive(Serialize, Deserialize)]
enum Held {
    /// Keep the port, unanswered.
    Hold(Reply<u64>),
    /// Keep the port, unanswered, without telling (`HELD` is another test's).
    Keep(Reply<u64>),
    /// Answer the kept port with this.
    Release(u64),
}

async fn holder(cx: ProcessCx<Held>, (): ()) -> Result<(), BoxError> {
    let mut kept = None;
    loop {
        match cx.recv().await? {
            Held::Hold(port) => {
                kept = Some(port);
                HELD.store(true, Ordering::SeqCst);
            }
            Held::Keep(port) => kept = Some(port),
            Held::Release(n) => {
                let _ = kept.take().expect("a kept port").send(n);
            }
        }
    }
}

/// `orphan` processes made (their argument decoded on the far node), and ended (that argument
/// dropped with the body, run or not: a stop may come before the first poll).
static ORPHANS_STARTED: AtomicUsize = AtomicUsize::new(0);
static ORPHANS_ENDED: AtomicUsize = AtomicUsize::new(0);

/// Open: `Gated` arguments decode.
static GATE: AtomicBool = AtomicBool::new(true);

/// A spawn argument whose decoding — on the far node, in its frame loop, before it spawns and
/// answers — waits until the test opens [`GATE`]: the far node answers only then.
struct Gated {
    /// Decoded on the far node (not the sender's value).
    far: bool,
}

impl Serialize for Gated {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Gated {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Gated, D::Error> {
        <()>::deserialize(deserializer)?;
        let deadline = std::time::Instant::now() + GUARD;
        while !GATE.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        ORPHANS_STARTED.fetch_add(1, Ordering::SeqCst);
        Ok(Gated { far: true })
    }
}

impl Drop for Gated {
    fn drop(&mut self) {
        if self.far {
            ORPHANS_ENDED.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn orphan(_cx: ProcessCx<Held>, gated: Gated) -> Result<(), BoxError> {
    let _gated = gated;
    std::future::pending::<()>().await;
    Ok(())
}

fn cluster(url: &str, name: &str) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(200))
        // No test here is about a node's death: a loaded machine must not fake one.
        .down_after(Duration::from_secs(10))
        .request_timeout(GUARD)
        .message::<Held>("held")
        .spawnable("holder", holder)
        .spawnable("orphan", orphan)
}

/// Nodes `a` and `b` on `server`, and `a`'s address of a `holder` spawned on `b`.
async fn holder_on_b(
    server: &NatsServer,
) -> (
    Vec<(Scheduler, Node)>,
    Node,
    procsched::cluster::RemoteAddr<Held>,
) {
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let a = nodes[0].1.clone();
    let pid = a
        .spawn_on(Placement::Node("b".into()), "holder", ())
        .await
        .unwrap();
    let held = a.addr::<Held>(pid);
    (nodes, a, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_answer_to_a_pending_ask_is_rejected_and_the_real_one_arrives() {
    let server = NatsServer::start();
    let (nodes, a, held) = holder_on_b(&server).await;
    let asking = {
        let held = held.clone();
        tokio::spawn(async move { held.ask(Held::Hold).await })
    };
    wait_until("b holds the port", GUARD, || HELD.load(Ordering::SeqCst));

    // Ask ids are a counter: a forger answers every small one, claiming to be a client that
    // is no member (the answer must come from `b`).
    let forged = rmp_serde::to_vec_named(&777u64).unwrap();
    let items = (0..1_000)
        .map(|ask| Item::Reply {
            ask,
            result: Ok(Body(forged.clone())),
        })
        .collect();
    let raw = nats::connect(server.url()).await.unwrap();
    let frame = frame_of("mallory", 1, a.incarnation(), items);
    raw.publish("procsched.node.a.ctl", frame.into())
        .await
        .unwrap();
    raw.flush().await.unwrap();
    wait_until("the forged answer is rejected", GUARD, || {
        a.stats().rejected_items >= 1
    });
    assert!(!asking.is_finished(), "the ask still waits for b");

    held.send(Held::Release(5)).unwrap();
    let answered = tokio::time::timeout(GUARD, asking)
        .await
        .expect("hang guard")
        .unwrap();
    assert_eq!(answered.unwrap(), 5, "b's answer, not the forger's");
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_given_up_on_does_not_leave_its_process_running() {
    let server = NatsServer::start();
    // `t` gives up on a request after 200 ms; `b` answers its gated spawns only once the test
    // opens the gate, after `t` gave up. `b` runs on a runtime of its own, whose one thread its
    // gated decoding holds: the other nodes' tasks and timers run on.
    let nodes = start_nodes(
        &["a", "t"],
        |name| match name {
            "t" => cluster(&server.url(), name).request_timeout(Duration::from_millis(200)),
            _ => cluster(&server.url(), name),
        },
        GUARD,
    )
    .await;
    let b_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let b_sched = Scheduler::builder().workers(1).build().unwrap();
    let b = {
        let (handle, cluster) = (b_sched.handle().clone(), cluster(&server.url(), "b"));
        b_runtime
            .spawn(async move { Node::start(&handle, cluster).await })
            .await
            .unwrap()
            .unwrap()
    };
    let (a, t) = (nodes[0].1.clone(), nodes[1].1.clone());
    assert!(a.wait_for_nodes(2, GUARD).await && t.wait_for_nodes(2, GUARD).await);
    let ended = |n| move || ORPHANS_ENDED.load(Ordering::SeqCst) == n;

    // Dropped after its request left (its first poll sends it).
    GATE.store(true, Ordering::SeqCst);
    let mut dropped =
        Box::pin(a.spawn_on(Placement::Node("b".into()), "orphan", Gated { far: false }));
    assert!(futures::poll!(dropped.as_mut()).is_pending());
    drop(dropped);
    wait_until("the dropped spawn's process is ended", GUARD, ended(1));
    assert_eq!(ORPHANS_STARTED.load(Ordering::SeqCst), 1);
    wait_until("a counts it", GUARD, || a.stats().orphans_stopped == 1);

    // Timed out, three times: each retry leaves no first instance behind.
    for n in 1..=3 {
        GATE.store(false, Ordering::SeqCst);
        let timed_out = t
            .spawn_on(Placement::Node("b".into()), "orphan", Gated { far: false })
            .await;
        assert!(
            matches!(timed_out, Err(procsched::cluster::RemoteError::TimedOut(_))),
            "{timed_out:?}"
        );
        GATE.store(true, Ordering::SeqCst);
        wait_until(
            "the timed-out spawn's process is ended",
            GUARD,
            ended(1 + n),
        );
    }
    assert_eq!(ORPHANS_STARTED.load(Ordering::SeqCst), 4);
    assert_eq!(t.stats().orphans_stopped, 3);
    b.leave().await;
    b_sched.shutdown_async(GUARD).await;
    b_runtime.shutdown_background();
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_ask_forgets_its_wait_and_its_late_answer_is_counted() {
    let server = NatsServer::start();
    let (nodes, a, held) = holder_on_b(&server).await;
    let before = a.stats();
    // Dropped mid-wait, as a `select!` that took another branch drops it.
    let asking = {
        let held = held.clone();
        tokio::spawn(async move { held.ask_within(Duration::from_secs(3600), Held::Keep).await })
    };
    wait_until("the ask waits", GUARD, || {
        a.stats().waits == before.waits + 1
    });
    asking.abort();
    assert!(asking.await.unwrap_err().is_cancelled());
    assert_eq!(
        a.stats().waits,
        before.waits,
        "the dropped ask's wait is forgotten"
    );
    // The answer comes after all: dropped, and counted.
    held.send(Held::Release(5)).unwrap();
    wait_until("the late answer is counted", GUARD, || {
        a.stats().late_answers > before.late_answers
    });
    assert_eq!(a.stats().waits, before.waits);
    stop_nodes(nodes, GUARD).await;
}
