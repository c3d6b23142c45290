//! Order and batching across nodes: several senders on one node (plain threads, tokio tasks, a
//! process) send numbered messages of mixed sizes to one process on another node. Every
//! message arrives exactly once and each sender's in the order it was sent, whether it was
//! published from the sender's thread (a quiet lane), batched by the lane's writer, or sealed
//! into a new frame because the open one was full (by size or by item count).
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::{start_nodes, NatsServer};
use procsched::cluster::{Cluster, Node, Placement, RemoteAddr};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(60);
/// Senders of each kind.
const THREADS: u64 = 2;
const TASKS: u64 = 2;
/// Messages per sender.
const EACH: u64 = 3_000;

#[derive(Serialize, Deserialize)]
enum Seq {
    /// Message `n` of `sender`, with `pad` bytes of padding (frames of mixed sizes).
    Item {
        sender: u64,
        n: u64,
        #[serde(with = "serde_bytes")]
        pad: Vec<u8>,
    },
    /// Send `EACH` items as sender `sender` to the process at the address, from this process.
    SendAs {
        sender: u64,
        to: procsched::cluster::NodePid,
        done: Reply<()>,
    },
    /// Per sender: how many arrived, and whether each came in order.
    Report(Reply<Vec<(u64, bool)>>),
}

/// The padding of message `n`: mostly small, every 97th 20 KiB (a frame fills by size), so
/// that frames seal both by size and by count.
fn pad(n: u64) -> Vec<u8> {
    if n.is_multiple_of(97) {
        vec![n as u8; 20 << 10]
    } else {
        vec![n as u8; (n % 64) as usize]
    }
}

async fn checker(cx: ProcessCx<Seq>, (): ()) -> Result<(), BoxError> {
    let node = Node::for_scheduler(&cx.scheduler()).ok_or("not a node")?;
    let senders = (THREADS + TASKS + 1) as usize;
    let mut next = vec![0u64; senders];
    let mut ordered = vec![true; senders];
    loop {
        match cx.recv().await? {
            Seq::Item {
                sender,
                n,
                pad: got,
            } => {
                let s = sender as usize;
                ordered[s] &= n == next[s] && got == pad(n);
                next[s] = n + 1;
            }
            Seq::SendAs { sender, to, done } => {
                let addr = node.addr::<Seq>(to);
                for n in 0..EACH {
                    let pad = pad(n);
                    addr.send(Seq::Item { sender, n, pad })
                        .map_err(|e| e.to_string())?;
                }
                let _ = done.send(());
            }
            Seq::Report(reply) => {
                let _ = reply.send(next.iter().copied().zip(ordered.iter().copied()).collect());
            }
        }
    }
}

fn cluster(url: &str, name: &str) -> Cluster {
    // The sending node's command queue to its NATS connection holds two publishes, so a
    // sender publishing from its own thread often finds it full and hands its frames back to
    // the lane's writer: that path keeps the order too.
    let capacity = if name == "a" { 2 } else { 2048 };
    Cluster::nats(url)
        .connect_options(procsched::cluster::nats::ConnectOptions::new().client_capacity(capacity))
        .name(name)
        .heartbeat(Duration::from_millis(200))
        .down_after(Duration::from_secs(5))
        .request_timeout(GUARD)
        .message::<Seq>("seq")
        .spawnable("checker", checker)
}

fn send_all(addr: &RemoteAddr<Seq>, sender: u64) {
    for n in 0..EACH {
        addr.send(Seq::Item {
            sender,
            n,
            pad: pad(n),
        })
        .unwrap_or_else(|e| panic!("sender {sender}, message {n}: {}", e.error()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_senders_keep_their_order_across_batches_and_frames() {
    let server = NatsServer::start();
    let nodes = start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    let target = a
        .spawn_on(Placement::Node("b".into()), "checker", ())
        .await
        .expect("checker on b");
    let relay = a
        .spawn_on(Placement::Local, "checker", ())
        .await
        .expect("a relay on a");
    let addr = a.addr::<Seq>(target.clone());

    // A lone message first (a quiet lane: published from this thread), answered in order.
    let report = addr.ask(Seq::Report).await.expect("report");
    assert!(report.iter().all(|&(n, ok)| n == 0 && ok));

    let mut threads = Vec::new();
    for sender in 0..THREADS {
        let addr = addr.clone();
        threads.push(std::thread::spawn(move || send_all(&addr, sender)));
    }
    let mut tasks = Vec::new();
    for sender in THREADS..THREADS + TASKS {
        let addr = addr.clone();
        tasks.push(tokio::spawn(async move {
            for chunk in 0..EACH / 100 {
                for n in chunk * 100..(chunk + 1) * 100 {
                    addr.send(Seq::Item {
                        sender,
                        n,
                        pad: pad(n),
                    })
                    .unwrap_or_else(|e| panic!("task sender {sender}: {}", e.error()));
                }
                tokio::task::yield_now().await;
            }
        }));
    }
    let relay = a.addr::<Seq>(relay);
    let from_process = relay.ask(|done| Seq::SendAs {
        sender: THREADS + TASKS,
        to: target.clone(),
        done,
    });
    tokio::time::timeout(GUARD, from_process)
        .await
        .expect("hang guard: the process sender")
        .expect("the process sent");
    for thread in threads {
        thread.join().expect("sender thread");
    }
    for task in tasks {
        task.await.expect("sender task");
    }
    // Messages from one node to another keep their order, so this ask answers after all.
    let report = tokio::time::timeout(GUARD, addr.ask(Seq::Report))
        .await
        .expect("hang guard: report")
        .expect("report");
    for (sender, (count, ordered)) in report.iter().enumerate() {
        assert_eq!(*count, EACH, "sender {sender}: every message once");
        assert!(ordered, "sender {sender}: in the order sent");
    }
    let stats = a.stats();
    assert!(
        stats.frames_out < stats.items_out,
        "some frames carried several items: {stats:?}"
    );
    let b_stats = b.stats();
    assert_eq!(
        b_stats.rejected_frames + b_stats.rejected_items + b_stats.undelivered,
        0,
        "{b_stats:?}"
    );
    for (sched, node) in nodes {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}
