//! Bad input to a node, sent with a raw NATS client: garbage, an oversized frame, a frame of
//! another version, a message of an unregistered type, a spawn of an unregistered name, and
//! frames claiming an identity that is not the sender's. Each is rejected and counted, nothing
//! panics, and the node goes on serving. And user code a node runs on its own tasks — a
//! registered type's `Deserialize` or `Serialize` — that panics: the one item fails typed, at
//! once, and the node goes on serving. A message, an answer, a spawn's argument or a joined
//! output too big for a frame fails typed at once, and a message exactly at the limit is
//! delivered. A node that falls behind its subscription: the frames NATS drops are counted as
//! slow-consumer events, and the node reads on once it catches up. A message of a registered
//! type the receiving process did not declare is refused typed, and the process never sees it.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::forge::{frame, Item};
use cluster_support::{start_nodes, stop_nodes, wait_until, NatsServer};
use procsched::cluster::{nats, Cluster, Node, Placement, RemoteError, RemoteHandle};
use procsched::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

#[derive(Serialize, Deserialize)]
enum Echo {
    Ask(Reply<u64>),
}

async fn echo(cx: ProcessCx<Echo>, n: u64) -> Result<(), BoxError> {
    loop {
        let Echo::Ask(reply) = cx.recv().await?;
        let _ = reply.send(n);
    }
}

/// A number whose `Deserialize` panics on 13 and whose `Serialize` panics on 7.
#[derive(Debug)]
struct Touchy(u64);

impl Serialize for Touchy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        assert!(self.0 != 7, "Touchy does not encode 7");
        serializer.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for Touchy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let n = u64::deserialize(deserializer)?;
        assert!(n != 13, "Touchy does not decode 13");
        Ok(Touchy(n))
    }
}

/// Whether a `Gated` is being decoded, and whether decoding may finish.
static GATE_ENTERED: AtomicBool = AtomicBool::new(false);
static GATE: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

/// A message whose `Deserialize` holds the decoding thread — the receiving node's inbound
/// task — until the test opens the gate: a node that stops reading its subscription.
#[derive(Debug)]
struct Gated;

impl Serialize for Gated {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_unit()
    }
}

impl<'de> Deserialize<'de> for Gated {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <()>::deserialize(deserializer)?;
        GATE_ENTERED.store(true, Ordering::SeqCst);
        let (open, opened) = &GATE;
        let guard = open.lock().unwrap();
        let (_guard, timeout) = opened
            .wait_timeout_while(guard, GUARD, |open| !*open)
            .unwrap();
        assert!(!timeout.timed_out(), "hang guard: the gate never opened");
        Ok(Gated)
    }
}

async fn sink(cx: ProcessCx<Gated>, (): ()) -> Result<(), BoxError> {
    loop {
        cx.recv().await?;
    }
}

#[derive(Serialize, Deserialize)]
enum Picky {
    Take(Touchy),
    Give(u64, Reply<Touchy>),
    Taken(Reply<u64>),
    /// Adds its length.
    Blob(Vec<u8>),
    /// Answers that many bytes.
    Big(usize, Reply<Vec<u8>>),
}

async fn picky(cx: ProcessCx<Picky>, (): ()) -> Result<(), BoxError> {
    let mut taken = 0;
    loop {
        match cx.recv().await? {
            Picky::Take(touchy) => taken += touchy.0,
            Picky::Give(n, reply) => {
                let _ = reply.send(Touchy(n));
            }
            Picky::Taken(reply) => {
                let _ = reply.send(taken);
            }
            Picky::Blob(bytes) => taken += bytes.len() as u64,
            Picky::Big(len, reply) => {
                let _ = reply.send(vec![1; len]);
            }
        }
    }
}

async fn returns(_cx: ProcessCx<()>, n: u64) -> Result<Touchy, BoxError> {
    Ok(Touchy(n))
}

/// Returns `len` bytes; its argument can be made as big as wanted.
async fn sized(_cx: ProcessCx<()>, (len, _padding): (usize, Vec<u8>)) -> Result<Vec<u8>, BoxError> {
    Ok(vec![1; len])
}

fn cluster(url: &str, name: &str) -> Cluster {
    Cluster::nats(url)
        .name(name)
        .heartbeat(Duration::from_millis(200))
        // No test here is about a node's death: a loaded machine must not fake one.
        .down_after(Duration::from_secs(10))
        .max_frame(64 << 10)
        .message::<Echo>("echo")
        .spawnable("echo", echo)
        .message::<Picky>("picky")
        .spawnable("picky", picky)
        .spawnable("returns", returns)
        .spawnable("sized", sized)
        .message::<Gated>("gated")
        .spawnable("sink", sink)
}

/// Awaits `handle` (within the hang guard): it ended with a reason that says `why`.
async fn assert_ended<T: std::fmt::Debug + serde::de::DeserializeOwned>(
    handle: RemoteHandle<T>,
    why: &str,
) {
    let ended = tokio::time::timeout(GUARD, handle)
        .await
        .expect("hang guard");
    assert!(
        matches!(&ended, Err(RemoteError::Ended(reason)) if reason.to_string().contains(why)),
        "{ended:?}"
    );
}

/// Nodes `a` and `b`, seeing each other.
async fn a_and_b(server: &NatsServer) -> Vec<(Scheduler, Node)> {
    start_nodes(&["a", "b"], |name| cluster(&server.url(), name), GUARD).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_are_rejected_counted_and_the_node_goes_on() {
    let server = NatsServer::start();
    let nodes = a_and_b(&server).await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    let target = b.spawn_on(Placement::Local, "echo", 5u64).await.unwrap();
    let to = target.local().as_u64();

    let raw = nats::connect(server.url()).await.unwrap();
    let data = "procsched.node.b.data".to_owned();
    let control = "procsched.node.b.ctl".to_owned();
    let bad_frames: Vec<Vec<u8>> = vec![
        vec![0xde, 0xad, 0xbe, 0xef],               // garbage
        vec![],                                     // empty
        vec![7, 1, 0x90],                           // another version
        [vec![1, 1], vec![0u8; 70 << 10]].concat(), // over b's 64 KiB limit
        vec![1, 1, 0xc1],                           // header fine, body malformed
        frame(
            "b",
            b.incarnation(),
            b.incarnation(),
            Item::Spawn {
                id: 1,
                name: "echo".into(),
                args: vec![0x05],
            },
        ), // b's own name
        frame(
            "a",
            a.incarnation() ^ 1,
            b.incarnation(),
            Item::Spawn {
                id: 2,
                name: "echo".into(),
                args: vec![0x05],
            },
        ), // a, another life
        frame(
            "not a name!",
            1,
            b.incarnation(),
            Item::Spawn {
                id: 3,
                name: "echo".into(),
                args: vec![0x05],
            },
        ),
    ];
    let rejected_frames = bad_frames.len() as u64;
    // Received bytes count rejected frames too (`NodeStats::bytes_in`).
    let mut bad_bytes: u64 = bad_frames.iter().map(|bytes| bytes.len() as u64).sum();
    for bytes in bad_frames {
        raw.publish(data.clone(), bytes.into()).await.unwrap();
    }
    let bad_items = vec![
        (
            data.clone(),
            frame(
                "a",
                a.incarnation(),
                b.incarnation(),
                Item::Message {
                    to,
                    ty: "nobody-registers-this".into(),
                    body: vec![0xc0],
                    ack: None,
                },
            ),
        ),
        (
            data.clone(),
            frame(
                "a",
                a.incarnation(),
                b.incarnation(),
                Item::Message {
                    to,
                    ty: "echo".into(),
                    body: vec![0xc1, 0xc1],
                    ack: None,
                },
            ),
        ),
        (
            control.clone(),
            frame(
                "a",
                a.incarnation(),
                b.incarnation(),
                Item::Spawn {
                    id: 4,
                    name: "rm -rf".into(),
                    args: vec![0xc0],
                },
            ),
        ),
    ];
    let rejected_items = bad_items.len() as u64;
    bad_bytes += bad_items
        .iter()
        .map(|(_, bytes)| bytes.len() as u64)
        .sum::<u64>();
    for (subject, bytes) in bad_items {
        raw.publish(subject, bytes.into()).await.unwrap();
    }
    raw.flush().await.unwrap();

    let stats = || b.stats();
    wait_until("b has seen every bad frame and item", GUARD, || {
        let stats = stats();
        stats.rejected_frames >= rejected_frames && stats.rejected_items >= rejected_items
    });
    let stats = b.stats();
    assert_eq!(
        (stats.rejected_frames, stats.rejected_items),
        (rejected_frames, rejected_items),
        "{stats:?}"
    );
    assert!(
        stats.bytes_in >= bad_bytes,
        "{stats:?}: {bad_bytes} bytes sent"
    );
    assert_eq!(nodes[1].0.live_processes(), 1, "no spawn got through");

    // Still serving, locally and across nodes.
    let addr = a.addr::<Echo>(target.clone());
    assert_eq!(addr.ask(Echo::Ask).await.unwrap(), 5);
    let spawned = a
        .spawn_on(Placement::Node("b".into()), "echo", 6u64)
        .await
        .unwrap();
    assert_eq!(a.addr::<Echo>(spawned).ask(Echo::Ask).await.unwrap(), 6);

    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_deserialize_or_serialize_fails_its_item_and_the_node_goes_on() {
    let server = NatsServer::start();
    let nodes = a_and_b(&server).await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    let on_b = Placement::Node("b".into());
    let target = a.spawn_on(on_b.clone(), "picky", ()).await.unwrap();
    let addr = a.addr::<Picky>(target);

    // b's inbound task decodes the message: its `Deserialize` panics there. The acked send
    // hears it; the messages around it, from the same node, are delivered.
    addr.send(Picky::Take(Touchy(1))).unwrap();
    let refused = addr.send_acked(Picky::Take(Touchy(13))).await;
    assert!(
        matches!(&refused, Err(RemoteError::Decode(why)) if why.contains("panicked")),
        "{refused:?}"
    );
    addr.send_acked(Picky::Take(Touchy(2))).await.unwrap();
    assert_eq!(addr.ask(Picky::Taken).await.unwrap(), 3);
    assert!(b.stats().rejected_items >= 1);

    // The output of a joined remote spawn is encoded on b's task: a panicking `Serialize` ends
    // the handle typed.
    let handle = a
        .spawn_on_with_handle::<u64, _>(on_b.clone(), "returns", 7u64)
        .await
        .unwrap();
    assert_ended(handle, "panicked").await;
    let handle = a
        .spawn_on_with_handle::<u64, _>(on_b.clone(), "returns", 8u64)
        .await
        .unwrap();
    assert_eq!(handle.await.unwrap(), 8);

    // A reply whose `Serialize` panics in the answering process: the asker hears it at once
    // (well before its own timeout), and the panic ends that process as a panic would.
    let asked = tokio::time::timeout(
        GUARD,
        addr.ask_within(Duration::from_secs(3600), |reply| Picky::Give(7, reply)),
    )
    .await
    .expect("the asker heard nothing before the hang guard");
    assert!(
        matches!(&asked, Err(RemoteError::Decode(why)) if why.contains("panicked")),
        "{asked:?}"
    );

    // b still serves.
    let again = a.spawn_on(on_b, "picky", ()).await.unwrap();
    let again = a.addr::<Picky>(again);
    assert_eq!(again.ask(|reply| Picky::Give(5, reply)).await.unwrap().0, 5);

    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_over_the_frame_limit_fails_typed_at_once_and_what_is_at_it_is_delivered() {
    let server = NatsServer::start();
    let nodes = a_and_b(&server).await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    let target = a
        .spawn_on(Placement::Node("b".into()), "picky", ())
        .await
        .unwrap();
    let addr = a.addr::<Picky>(target);

    // Both nodes' frames are at most 64 KiB: a 70 KiB message comes back, typed, with itself.
    let refused = addr.send(Picky::Blob(vec![1; 70 << 10])).unwrap_err();
    let RemoteError::TooLarge { size, limit } = *refused.error() else {
        panic!("{:?}", refused.error());
    };
    assert!(size > limit && limit < 64 << 10, "{size} {limit}");
    assert!(matches!(refused.into_message(), Some(Picky::Blob(bytes)) if bytes.len() == 70 << 10));

    // A message that encodes to exactly the limit fits its frame on both sides: it arrives.
    let overhead = rmp_serde::to_vec_named(&Picky::Blob(vec![1; 1000]))
        .unwrap()
        .len()
        - 1000;
    let largest = limit - overhead;
    // (`send`: an acked send's envelope carries its ack id, so its limit is a little lower.)
    addr.send(Picky::Blob(vec![1; largest])).unwrap();
    assert_eq!(addr.ask(Picky::Taken).await.unwrap(), largest as u64);
    let one_more = addr.send(Picky::Blob(vec![1; largest + 1])).unwrap_err();
    assert!(matches!(one_more.error(), RemoteError::TooLarge { .. }));
    assert_eq!(b.stats().rejected_frames, 0);

    // An answer over the limit: the asker hears `TooLarge` at once (well before its timeout),
    // and the answering process goes on.
    let asked = tokio::time::timeout(
        GUARD,
        addr.ask_within(Duration::from_secs(3600), |reply| {
            Picky::Big(70 << 10, reply)
        }),
    )
    .await
    .expect("the asker heard nothing before the hang guard");
    assert!(
        matches!(asked, Err(RemoteError::TooLarge { size, limit }) if size > limit),
        "{asked:?}"
    );
    let small = addr.ask(|reply| Picky::Big(10, reply)).await.unwrap();
    assert_eq!(small, vec![1; 10]);

    // A remote spawn whose argument is over the limit fails at once; a joined output over it
    // ends its handle typed (it would have waited for the node's death).
    let on_b = Placement::Node("b".into());
    let too_big = a.spawn_on(on_b.clone(), "sized", (1usize, vec![1u8; 70 << 10]));
    assert!(matches!(too_big.await, Err(RemoteError::TooLarge { .. })));
    let handle = a
        .spawn_on_with_handle::<Vec<u8>, _>(
            on_b.clone(),
            "sized",
            (70usize << 10, Vec::<u8>::new()),
        )
        .await
        .unwrap();
    assert_ended(handle, "frame limit").await;
    let handle = a
        .spawn_on_with_handle::<Vec<u8>, _>(on_b, "sized", (10usize, Vec::<u8>::new()))
        .await
        .unwrap();
    assert_eq!(handle.await.unwrap(), vec![1; 10]);
    assert_eq!(a.stats().rejected_frames, 0);

    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_dropped_while_a_node_falls_behind_are_counted_and_it_reads_on() {
    let server = NatsServer::start();
    // b's client holds at most 4 frames its node has not read yet.
    let url = server.url();
    let nodes = start_nodes(
        &["a", "b"],
        // Slow heartbeats: the membership watch, b's other subscription, stays far from its own
        // 4 (its drops would count as slow-consumer events too).
        |name| {
            let slow = cluster(&url, name)
                .heartbeat(Duration::from_secs(1))
                .down_after(Duration::from_secs(10));
            match name {
                "b" => slow.connect_options(nats::ConnectOptions::new().subscription_capacity(4)),
                _ => slow,
            }
        },
        GUARD,
    )
    .await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    let on_b = Placement::Node("b".into());
    let sink = a.spawn_on(on_b.clone(), "sink", ()).await.unwrap();
    let echo = a.spawn_on(on_b, "echo", 9u64).await.unwrap();

    // b's inbound task stops in the `Gated` it decodes; 64 more frames arrive meanwhile. (The
    // raw client connects first: a tokio worker held by a blocking `Deserialize` can hold up
    // a connection being made on the same runtime.)
    let raw = nats::connect(server.url()).await.unwrap();
    a.addr::<Gated>(sink).send(Gated).unwrap();
    wait_until("b decodes the gated message", GUARD, || {
        GATE_ENTERED.load(Ordering::SeqCst)
    });
    for _ in 0..64 {
        let garbage = vec![0xde, 0xad];
        raw.publish("procsched.node.b.data".to_owned(), garbage.into())
            .await
            .unwrap();
    }
    raw.flush().await.unwrap();
    wait_until("b's client reports a slow consumer", GUARD, || {
        b.stats().slow_consumers > 0
    });

    // Once b reads again, what its client kept is read (the garbage rejected, counted): every
    // garbage frame is accounted for, read or dropped (a slow-consumer event each), none both.
    let (open, opened) = &GATE;
    *open.lock().unwrap() = true;
    opened.notify_all();
    let accounted =
        |stats: &procsched::cluster::NodeStats| stats.rejected_frames + stats.slow_consumers;
    wait_until("every garbage frame is read or dropped", GUARD, || {
        accounted(&b.stats()) >= 64
    });
    let stats = b.stats();
    assert_eq!(accounted(&stats), 64, "{stats:?}");
    assert!(
        stats.slow_consumers > 0 && stats.rejected_frames > 0,
        "{stats:?}"
    );
    // And b serves as before, once the two nodes took each other back: the drops declared
    // every peer of b down (a dropped frame may have been a signal: `dropped_frames.rs`).
    let addr = a.addr::<Echo>(echo);
    let deadline = std::time::Instant::now() + GUARD;
    loop {
        match tokio::time::timeout(GUARD, addr.ask(Echo::Ask)).await {
            Ok(Ok(answer)) => {
                assert_eq!(answer, 9);
                break;
            }
            Ok(Err(procsched::cluster::RemoteError::NoConnection))
                if std::time::Instant::now() < deadline =>
            {
                tokio::task::yield_now().await
            }
            other => panic!("b serves again, not {other:?}"),
        }
    }

    stop_nodes(nodes, GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_type_the_process_does_not_take_is_refused_and_the_process_lives() {
    let server = NatsServer::start();
    let nodes = a_and_b(&server).await;
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    // `echo` takes `Echo`; `Picky` is registered on both nodes, so the wrong type encodes,
    // travels and names a type b knows: only the process's declared type tells them apart.
    let remote = a
        .spawn_on(Placement::Node("b".into()), "echo", 4u64)
        .await
        .unwrap();
    let local = a.spawn_on(Placement::Local, "echo", 5u64).await.unwrap();
    for pid in [remote, local] {
        let wrong = a.addr::<Picky>(pid.clone());
        let refused = wrong.send_acked(Picky::Blob(vec![1])).await;
        // Refused over there, the type is named with the name it travelled under.
        let sent_as = if pid.node() == "b" {
            "Picky (sent as \"picky\")"
        } else {
            "Picky"
        };
        assert!(
            matches!(&refused, Err(RemoteError::WrongType { takes, sent })
                if takes.ends_with("Echo") && sent.ends_with(sent_as)),
            "{pid}: {refused:?}"
        );
        let asked = wrong.ask(Picky::Taken).await;
        assert!(
            matches!(asked, Err(RemoteError::WrongType { .. })),
            "{pid}: {asked:?}"
        );
        // Fire-and-forget: not delivered either (counted on the receiving node if remote).
        match wrong.send(Picky::Blob(vec![2])) {
            Ok(()) => assert_eq!(pid.node(), "b", "only a remote send is refused over there"),
            Err(error) => assert!(matches!(error.error(), RemoteError::WrongType { .. })),
        }
        // The process never saw them: it answers as before.
        let answer = a.addr::<Echo>(pid.clone()).ask(Echo::Ask).await.unwrap();
        assert_eq!(answer, if pid.node() == "b" { 4 } else { 5 }, "{pid}");
    }
    // The acked send, the ask and the plain send to b's process, each rejected and counted.
    wait_until("b counted the three", GUARD, || {
        b.stats().rejected_items >= 3
    });
    stop_nodes(nodes, GUARD).await;
}
