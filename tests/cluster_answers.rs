//! An answer — an ask's reply, an acked send's ack, a spawn's result, a `Down` — is taken only
//! from the node its request went to: a client that is no member (or another node) answering
//! a pending request's id is rejected and counted, and the request waits on for its real answer.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::forge::{frame_of, Body, Item};
use cluster_support::{start_nodes, stop_nodes, wait_until, NatsServer};
use procsched::cluster::{nats, Cluster, Placement};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

/// Set once the holder keeps a port.
static HELD: AtomicBool = AtomicBool::new(false);

#[derive(Serialize, Deserialize)]
enum Held {
    /// Keep the port, unanswered.
    Hold(Reply<u64>),
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
            Held::Release(n) => {
                let _ = kept.take().expect("a kept port").send(n);
            }
        }
    }
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_answer_to_a_pending_ask_is_rejected_and_the_real_one_arrives() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let a = nodes[0].1.clone();
    let pid = a
        .spawn_on(Placement::Node("b".into()), "holder", ())
        .await
        .unwrap();
    let held = a.addr::<Held>(pid);
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
