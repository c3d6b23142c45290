//! Backpressure on the way to another node: a lane that holds `Cluster::max_backlog` bytes the
//! network has not taken refuses a fire-and-forget `send` (the message handed back, counted),
//! while `send_wait` waits for room, and acked sends and asks are never refused for it.
//!
//! The first tests run on a current-thread runtime: the lane's writer and async-nats's
//! connection run on the test's own thread, so nothing leaves while the test sends in a plain
//! loop, and the lane fills deterministically.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::{guarded, start_nodes, stop_nodes, NatsServer};
use procsched::cluster::{
    Cluster, ClusterError, Node, NodePid, Placement, RemoteError, RemoteSendError,
};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::pin::pin;
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);
/// The nodes' frame and backlog limit.
const LIMIT: usize = 64 << 10;

#[derive(Serialize, Deserialize)]
enum Tally {
    Add(u64),
    Sum(Reply<u64>),
}

/// Sums what it is sent; answers `Sum` with the total so far.
async fn tally(cx: ProcessCx<Tally>, (): ()) -> Result<(), BoxError> {
    let mut sum = 0;
    loop {
        match cx.recv().await? {
            Tally::Add(n) => sum += n,
            Tally::Sum(reply) => {
                let _ = reply.send(sum);
            }
        }
    }
}

fn cluster(url: &str, name: &str) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(200))
        .down_after(Duration::from_secs(60))
        .request_timeout(GUARD)
        .max_frame(LIMIT)
        .max_backlog(LIMIT)
        .message::<Tally>("tally")
        .spawnable("tally", tally)
}

async fn tally_on_b(a: &Node) -> NodePid {
    guarded(
        GUARD,
        "spawn",
        a.spawn_on(Placement::Node("b".into()), "tally", ()),
    )
    .await
    .expect("a tally on b")
}

/// Sends `Add(1)` from this thread without yielding until the lane refuses one: how many it
/// took, and the refusal.
fn fill(a: &Node, pid: &NodePid) -> (u64, RemoteSendError<Tally>) {
    let addr = a.addr::<Tally>(pid.clone());
    for taken in 0..1_000_000 {
        if let Err(refused) = addr.send(Tally::Add(1)) {
            return (taken, refused);
        }
    }
    panic!("a million sends and the lane never refused one");
}

#[tokio::test(flavor = "current_thread")]
async fn a_send_to_a_full_lane_is_refused_and_send_wait_waits_for_room() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let a = &nodes[0].1;
    let pid = tally_on_b(a).await;
    let addr = a.addr::<Tally>(pid.clone());

    let (taken, refused) = fill(a, &pid);
    assert!(taken > 0, "an empty lane takes a message");
    let error = refused.error();
    assert!(error.is_backlogged(), "refused with {error}");
    assert!(
        matches!(error, RemoteError::Backlogged { limit } if *limit == LIMIT),
        "{error}"
    );
    assert!(
        matches!(refused.into_message(), Some(Tally::Add(1))),
        "the refused message comes back"
    );
    let stats = a.stats();
    assert_eq!(stats.backlogged, 1, "the refusal is counted");
    assert!(
        stats.backlog_bytes >= LIMIT as u64,
        "a refusing lane holds its limit: {} bytes",
        stats.backlog_bytes
    );

    // The lane is as full as it was (nothing has run since): `send_wait` waits, an acked send
    // is taken (it waits for its answer, not for room).
    let mut waiting = pin!(addr.send_wait(Tally::Add(1)));
    assert!(
        futures::poll!(waiting.as_mut()).is_pending(),
        "send_wait waits while the lane is full"
    );
    let acked = addr.send_acked(Tally::Add(1));
    let (waited, acked) = guarded(GUARD, "send_wait and send_acked", async {
        futures::join!(waiting, acked)
    })
    .await;
    assert!(waited.is_ok(), "sent once there was room");
    acked.expect("an acked send is not refused for the backlog");

    // Everything taken arrived: the sends before the refusal, the waited one, the acked one.
    let sum = guarded(GUARD, "ask", addr.ask(Tally::Sum))
        .await
        .expect("the tally answers");
    assert_eq!(sum, taken + 2);
    assert_eq!(a.stats().backlog_bytes, 0, "the lane drained");
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_sender_waiting_for_room_hears_no_connection_when_the_node_is_declared_down() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let a = &nodes[0].1;
    let pid = tally_on_b(a).await;
    let addr = a.addr::<Tally>(pid.clone());

    let (_, refused) = fill(a, &pid);
    assert!(
        refused.error().is_backlogged(),
        "refused with {}",
        refused.error()
    );
    let mut waiting = pin!(addr.send_wait(Tally::Add(7)));
    assert!(futures::poll!(waiting.as_mut()).is_pending());

    assert!(a.disconnect("b"), "b was a peer");
    let refused = guarded(GUARD, "send_wait after the disconnect", waiting)
        .await
        .expect_err("the node is down");
    assert!(
        refused.error().is_no_connection(),
        "refused with {}",
        refused.error()
    );
    assert!(matches!(refused.into_message(), Some(Tally::Add(7))));
    stop_nodes(nodes, GUARD).await;
}

/// A sender far faster than the network, on a runtime where the lane's writer runs beside it:
/// with `send_wait`, every message arrives exactly once and none is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_sent_with_send_wait_arrives_whole() {
    const SENDS: u64 = 20_000;
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let a = &nodes[0].1;
    let pid = tally_on_b(a).await;
    let addr = a.addr::<Tally>(pid);

    guarded(GUARD, "the flood", async {
        for n in 0..SENDS {
            if let Err(refused) = addr.send_wait(Tally::Add(n)).await {
                panic!("send_wait refused message {n}: {}", refused.error());
            }
        }
    })
    .await;
    let sum = guarded(GUARD, "ask", addr.ask(Tally::Sum))
        .await
        .expect("the tally answers");
    assert_eq!(sum, SENDS * (SENDS - 1) / 2, "every message once");
    assert_eq!(a.stats().backlogged, 0);
    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_backlog_under_the_frame_limit_is_refused_at_start() {
    let sched = Scheduler::builder().workers(1).build().expect("scheduler");
    let cluster = cluster("nats://127.0.0.1:1", "c").max_backlog(LIMIT - 1);
    match Node::start(sched.handle(), cluster).await {
        Err(ClusterError::Config(why)) => assert!(why.contains("max_backlog"), "{why}"),
        Err(other) => panic!("refused with {other}"),
        Ok(_) => panic!("started with a backlog limit under its frame limit"),
    }
}

/// A `send_wait` through a `RemoteAddr` to a full bounded mailbox of this node waits as
/// `Addr::send_wait` does, and ends the same way when the sending body is cancelled:
/// `Cancelled` (a cancellation, so `?` ends the body cancelled), the message handed back —
/// never `MailboxFull`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_send_wait_ended_by_the_senders_cancel_is_cancelled_not_mailbox_full() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a"], |name| cluster(&server.url(), name), GUARD).await;
    let (sched, a) = (&nodes[0].0, &nodes[0].1);
    let sink = sched
        .spawn_fn_with(
            SpawnOptions::new().mailbox_capacity(1),
            |cx: ProcessCx<Tally>| async move {
                let _ = cx.cancelled().await;
                Ok::<_, BoxError>(())
            },
        )
        .unwrap();
    let to = a.addr::<Tally>(a.pid(sink.pid()));
    to.send(Tally::Add(1)).expect("room for one");
    let (told, heard) = tokio::sync::oneshot::channel();
    let sender = sched
        .spawn_fn(move |_: ProcessCx<()>| async move {
            let refused = to.send_wait(Tally::Add(2)).await.err();
            let seen = refused.map(|refused| {
                (
                    refused.error().to_string(),
                    matches!(refused.error(), RemoteError::Cancelled(_)),
                    matches!(refused.into_message(), Some(Tally::Add(2))),
                )
            });
            let _ = told.send(seen);
            Ok::<_, BoxError>(())
        })
        .unwrap();
    guarded(GUARD, "the sender waits for room", async {
        while sched.state(sender.pid()) != Some(procsched::metrics::ProcessState::Blocked) {
            tokio::task::yield_now().await;
        }
    })
    .await;
    sched.cancel(sender.pid()).unwrap();
    let seen = guarded(GUARD, "the sender's report", heard).await.unwrap();
    let (error, cancelled, handed_back) = seen.expect("the wait ended in an error");
    assert!(cancelled, "ended {error}");
    assert!(handed_back, "the message comes back");
    stop_nodes(nodes, GUARD).await;
}

/// A body waiting for room on a full lane to another node hears its process's cancel, as a
/// local `send_wait` does: `Cancelled`, the message handed back, nothing sent. The test's
/// thread blocks (a current-thread runtime: the node's writer does not run meanwhile), so the
/// lane stays full for as long as the test needs.
#[tokio::test(flavor = "current_thread")]
async fn a_body_waiting_for_room_on_a_full_lane_hears_its_cancel() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let (sched, a) = (&nodes[0].0, &nodes[0].1);
    let pid = tally_on_b(a).await;
    let (taken, _refused) = fill(a, &pid);
    let addr = a.addr::<Tally>(pid.clone());
    let (told, heard) = std::sync::mpsc::channel();
    let sender = sched
        .spawn_fn(move |_: ProcessCx<()>| async move {
            let refused = addr.send_wait(Tally::Add(1)).await.err();
            let _ = told.send(refused.map(|refused| {
                (
                    matches!(refused.error(), RemoteError::Cancelled(_)),
                    matches!(refused.into_message(), Some(Tally::Add(1))),
                )
            }));
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let deadline = std::time::Instant::now() + GUARD;
    while sched.state(sender.pid()) != Some(procsched::metrics::ProcessState::Blocked) {
        assert!(
            std::time::Instant::now() < deadline,
            "hang guard: the sender never waited"
        );
        std::thread::yield_now();
    }
    sched.cancel(sender.pid()).unwrap();
    let heard = heard
        .recv_timeout(GUARD)
        .expect("hang guard: the sender's report");
    assert_eq!(heard, Some((true, true)), "Cancelled, the message back");
    // Nothing of the cancelled send arrived: the tally holds the sends taken before.
    let sum = guarded(GUARD, "ask", a.addr::<Tally>(pid).ask(Tally::Sum))
        .await
        .expect("the tally answers");
    assert_eq!(sum, taken);
    stop_nodes(nodes, GUARD).await;
}
