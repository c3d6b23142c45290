//! A link that goes silent — its connections stay open and nothing passes, as through a router
//! that stopped forwarding — for longer than it takes each side to declare the other down,
//! then flows again. What the cut-off node sent before it learned waited in the stalled
//! connection's buffers all along: when it arrives, its session has ended on the receiving
//! node (whose monitors of the sender's processes already said `Down(NoConnection)`), and it is
//! dropped and counted — never delivered after that `Down` — for as long as a node remembers
//! declaring another down (ten minutes at least).
//! The two nodes then take each other back, and new messages flow.
//!
//! The stall lasts longer than ten `down_after`s, the time after which a node used to forget
//! that it had declared the other down, and with it which frames to drop (a black-box review:
//! 303 messages delivered 23 s after their sender's `Down`, after a 25 s stall).
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::proxy::Proxy;
use cluster_support::{guarded, NatsServer};
use procsched::cluster::{Cluster, Node, RemoteError};
use procsched::prelude::*;
use procsched::supervision::ExitReason;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);
const DOWN_AFTER: Duration = Duration::from_millis(500);

/// What the collector on node `a` takes.
#[derive(Serialize, Deserialize)]
enum Collected {
    /// A message from node `b`: `epoch` 0 until `b`'s first refused send (it declared `a`
    /// down), 1 after.
    Seq { epoch: u32, n: u64 },
    /// `a` has given `b`'s processes their `Down`: an epoch-0 message from now on is one of
    /// the ended session, delivered late.
    Mark,
    /// (epoch-0 messages after the mark, epoch-1 messages).
    Report(Reply<(u64, u64)>),
}

async fn collector(cx: ProcessCx<Collected>) -> Result<(), BoxError> {
    let (mut marked, mut late, mut fresh) = (false, 0, 0);
    loop {
        match cx.recv().await? {
            Collected::Seq { epoch: 0, .. } if marked => late += 1,
            Collected::Seq { epoch: 0, .. } => {}
            Collected::Seq { .. } => fresh += 1,
            Collected::Mark => marked = true,
            Collected::Report(reply) => {
                let _ = reply.send((late, fresh));
            }
        }
    }
}

fn cluster(url: &str, name: &str) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(100))
        .down_after(DOWN_AFTER)
        .request_timeout(GUARD)
        .message::<Collected>("collected")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_held_by_a_stalled_link_are_dropped_after_ten_down_afters_too() {
    let server = NatsServer::start();
    let proxy = Proxy::start(server.port());
    let sched = || Scheduler::builder().workers(1).build().expect("scheduler");
    let (a_sched, b_sched) = (sched(), sched());
    let a = Node::start(a_sched.handle(), cluster(&server.url(), "a"))
        .await
        .expect("a starts");
    let b = Node::start(b_sched.handle(), cluster(&proxy.url(), "b"))
        .await
        .expect("b starts (through the proxy)");
    assert!(a.wait_for_nodes(1, GUARD).await && b.wait_for_nodes(1, GUARD).await);

    let collector_pid = a.pid(a_sched.spawn_fn(collector).expect("spawn").pid());
    let on_a = a.addr::<Collected>(collector_pid.clone());
    // A process on b that a watches: its `Down` says when a has ended b's session.
    let idle = b_sched
        .spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })
        .expect("spawn");
    let down = a.monitor(b.pid(idle.pid()));

    // b sends to the collector every few milliseconds, in epoch 0 until a send is refused.
    let stop = Arc::new(AtomicBool::new(false));
    let sending = {
        let (to_collector, stop) = (b.addr::<Collected>(collector_pid), stop.clone());
        tokio::spawn(async move {
            let (mut epoch, mut n) = (0, 0);
            while !stop.load(SeqCst) {
                match to_collector.send(Collected::Seq { epoch, n }) {
                    Ok(()) => n += 1,
                    Err(refused) => {
                        assert!(
                            matches!(refused.error(), RemoteError::NoConnection),
                            "{:?}",
                            refused.error()
                        );
                        epoch = 1;
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    proxy.pause();
    let down = guarded(GUARD, "a declares b down", down).await;
    assert_eq!(down.reason, ExitReason::NoConnection);
    on_a.send(Collected::Mark).expect("a local send");
    // The stall outlasts ten `down_after`s (the partition's length, not a synchronisation).
    tokio::time::sleep(DOWN_AFTER * 12).await;
    proxy.resume();

    // b's new session delivers again; what its old one sent came first on the connection.
    let (late, fresh) = guarded(GUARD, "b's new messages reach a", async {
        loop {
            let counts = on_a.ask(Collected::Report).await.expect("the collector");
            if counts.1 > 0 {
                return counts;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(
        late, 0,
        "messages of b's ended session delivered after its Down"
    );
    assert!(fresh > 0);
    assert!(
        a.stats().stale_frames > 0,
        "the held frames were dropped and counted: {:?}",
        a.stats()
    );

    stop.store(true, SeqCst);
    sending.await.expect("the sending task");
    for (sched, node) in [(a_sched, a), (b_sched, b)] {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}
