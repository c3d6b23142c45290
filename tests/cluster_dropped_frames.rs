//! Frames the NATS client drops (a slow consumer) end the node's sessions with its peers:
//! every peer is declared down, so a signal lost with them — a `Down`, an exit — is not waited
//! for forever, and the two nodes take each other back as fresh peers.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::{start_nodes, stop_nodes, wait_until, NatsServer};
use procsched::cluster::{nats, Cluster, Placement, RemoteError};
use procsched::prelude::*;
use procsched::supervision::ExitReason;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const GUARD: Duration = Duration::from_secs(30);

/// Open: `Gated` messages decode.
static GATE: AtomicBool = AtomicBool::new(true);
/// Set when a `Gated` decode waits at the closed gate: the node's inbound task is stuck there.
static WAITING: AtomicBool = AtomicBool::new(false);

/// A message whose decoding — on the receiving node's inbound task — waits while [`GATE`] is
/// closed: what a slow `Deserialize` or a starved runtime does to a node's reading. Each is
/// 20 KB, a frame of its own (a sender batches small messages into few frames, which a loaded
/// machine did: then nothing overflowed).
struct Gated;

impl Serialize for Gated {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&[0; 20_000])
    }
}

/// Opens the gate when dropped: a test that fails with it closed must not leave the inbound
/// task waiting at it for every message queued.
struct OpenOnDrop;

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        GATE.store(true, Ordering::SeqCst);
    }
}

impl<'de> Deserialize<'de> for Gated {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Gated, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer)?;
        let deadline = Instant::now() + GUARD;
        while !GATE.load(Ordering::SeqCst) && Instant::now() < deadline {
            WAITING.store(true, Ordering::SeqCst);
            std::thread::yield_now();
        }
        Ok(Gated)
    }
}

#[derive(Serialize, Deserialize)]
struct Ping(Reply<u64>);

async fn sink(cx: ProcessCx<Gated>, (): ()) -> Result<(), BoxError> {
    loop {
        cx.recv().await?;
    }
}

async fn echo(cx: ProcessCx<Ping>, (): ()) -> Result<(), BoxError> {
    loop {
        let Ping(reply) = cx.recv().await?;
        let _ = reply.send(7);
    }
}

fn cluster(url: &str, name: &str) -> Cluster {
    let cluster = Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(200))
        // Only the drop may end the session: a loaded machine must not fake a death.
        .down_after(Duration::from_secs(10))
        .request_timeout(GUARD)
        .message::<Gated>("gated")
        .message::<Ping>("ping")
        .spawnable("sink", sink)
        .spawnable("echo", echo);
    if name == "b" {
        // A small subscription queue, so that a stuck inbound task overflows it at once.
        cluster.connect_options(nats::ConnectOptions::new().subscription_capacity(8))
    } else {
        cluster
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_dropped_by_a_slow_consumer_resolves_no_connection_and_the_nodes_take_each_other_back(
) {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let (a_sched, a) = (&nodes[0].0, nodes[0].1.clone());
    let b = nodes[1].1.clone();
    let sink = a
        .spawn_on(Placement::Node("b".into()), "sink", ())
        .await
        .unwrap();
    let echo = a
        .spawn_on(Placement::Node("b".into()), "echo", ())
        .await
        .unwrap();
    assert_eq!(a.addr::<Ping>(echo.clone()).ask(Ping).await.unwrap(), 7);

    // b watches a process of a.
    let target = a_sched
        .spawn_fn(|cx: ProcessCx<()>| async move {
            let _ = cx.cancelled().await;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let watched = b.monitor(a.pid(target.pid()));

    // b's inbound task gets stuck decoding; a floods it past its queue, then ends the target:
    // the `Down` b owes its monitor is behind the flood, and dropped with it.
    GATE.store(false, Ordering::SeqCst);
    let _open_on_drop = OpenOnDrop;
    let to_sink = a.addr::<Gated>(sink);
    to_sink.send(Gated).unwrap();
    wait_until("b's inbound task is stuck", GUARD, || {
        WAITING.load(Ordering::SeqCst)
    });
    for _ in 0..200 {
        to_sink.send(Gated).unwrap();
    }
    a_sched.handle().terminate(target.pid()).unwrap();
    wait_until("b's client dropped frames", GUARD, || {
        b.stats().slow_consumers > 0
    });
    GATE.store(true, Ordering::SeqCst);

    // The monitor resolves (it waited forever before), as for a peer's death.
    let down = tokio::time::timeout(GUARD, watched)
        .await
        .expect("the monitor resolves");
    assert_eq!(down.reason, ExitReason::NoConnection, "{down:?}");
    assert!(b.stats().peers_down >= 1);

    // Both sides take each other back: a new ask goes through.
    let deadline = Instant::now() + GUARD;
    loop {
        match a.addr::<Ping>(echo.clone()).ask(Ping).await {
            Ok(answer) => {
                assert_eq!(answer, 7);
                break;
            }
            Err(RemoteError::NoConnection) if Instant::now() < deadline => {
                tokio::task::yield_now().await
            }
            Err(error) => panic!("the nodes took each other back, not {error:?}"),
        }
    }
    stop_nodes(nodes, GUARD).await;
}
