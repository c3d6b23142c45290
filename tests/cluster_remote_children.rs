//! Supervised children on other nodes (`Node::remote_child`), against a real `nats-server`:
//! a restart that finds no live node waits for one — so a child pinned to a node comes back
//! on it once the node is restarted under its name — and a restart never runs beside the
//! instance it replaces, even after a `BrutalKill`, whose kill crosses the nodes after the
//! proxy has ended. Messages to the proxy (by PID, or by the name `register_as` gives it) are
//! dropped, not taken as a request to stop the child.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::cart::{cart, cart_cluster, Cart};
use cluster_support::{guarded, supervise_pinned, wait_child, wait_until, NatsServer};
use procsched::cluster::{Node, Placement};
use procsched::prelude::*;
use procsched::supervision::{ChildShutdown, ChildSpec, Supervisor};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_child_comes_back_on_its_node_restarted_under_its_name() {
    // The child's node dies; its restart finds no live `b`, and waits for one (up to the
    // request timeout, 30 s here) instead of failing at once and spending the supervisor's
    // intensity: `b` started again under its name takes the child back.
    let server = NatsServer::start();
    let start = |name: &'static str| {
        let url = server.url();
        async move {
            let sched = Scheduler::builder().workers(1).build().unwrap();
            let cluster = cart_cluster(&url, name, Duration::from_millis(1000), GUARD);
            let node = Node::start(sched.handle(), cluster).await.unwrap();
            (sched, node)
        }
    };
    let (a_sched, a) = start("a").await;
    let (b_sched, b) = start("b").await;
    assert!(a.wait_for_nodes(1, GUARD).await);
    let (supervisor, child, first) = supervise_pinned(&a, "b", 1, GUARD).await;

    drop(b); // b dies without leaving: a declares it down after `down_after`
    b_sched.shutdown_async(GUARD).await;
    guarded(GUARD, "the proxy hears its child's node is down", async {
        while child.pid().is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    // No live `b` now: the restart waits for one.
    let (b_sched, b) = start("b").await; // claims the name once the old entry expires
    let again = wait_child(&child, |pid| *pid != first, GUARD).await;
    assert_eq!(again.node(), "b", "back on its node");
    assert_eq!(a.addr::<Cart>(again).ask(Cart::Total).await.unwrap(), 7);
    assert_eq!(
        supervisor.restarts().await.unwrap(),
        1,
        "one restart: it waited"
    );
    assert!(
        a_sched.state(supervisor.pid()).is_some(),
        "the supervisor lives on"
    );

    for (sched, node) in [(a_sched, a), (b_sched, b)] {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}

/// Instances of [`counted`] alive in this test process, and whether two ever were at once.
static ALIVE: AtomicUsize = AtomicUsize::new(0);
static OVERLAPPED: AtomicBool = AtomicBool::new(false);

/// Counted in [`ALIVE`] from its first poll until its future is dropped (a kill drops it
/// before the process's end is signalled).
async fn counted(cx: ProcessCx<Cart>, start: u64) -> Result<(), BoxError> {
    struct Alive;
    impl Drop for Alive {
        fn drop(&mut self) {
            ALIVE.fetch_sub(1, SeqCst);
        }
    }
    if ALIVE.fetch_add(1, SeqCst) != 0 {
        OVERLAPPED.store(true, SeqCst);
    }
    let _alive = Alive;
    cart(cx, start).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brutally_killed_remote_child_is_replaced_only_after_its_end() {
    // `BrutalKill` terminates the proxy at once; its link takes the child down across the
    // nodes afterwards. OTP's `brutal_kill` waits for the killed child's `'DOWN'` before the
    // restart: the next proxy waits for the old instance's end before it places a new one.
    let server = NatsServer::start();
    let a_sched = Scheduler::builder().workers(2).build().unwrap();
    let a = Node::start(
        a_sched.handle(),
        cart_cluster(&server.url(), "a", Duration::from_millis(1000), GUARD),
    )
    .await
    .unwrap();
    let b_sched = Scheduler::builder().workers(2).build().unwrap();
    let b = Node::start(
        b_sched.handle(),
        cart_cluster(&server.url(), "b", Duration::from_millis(1000), GUARD)
            .spawnable("counted", counted),
    )
    .await
    .unwrap();
    assert!(a.wait_for_nodes(1, GUARD).await);
    let (remote, child) = a
        .remote_child("remote", Placement::Node("b".into()), "counted", 1u64)
        .unwrap();
    // A local child whose failure makes the one-for-all strategy kill and restart the remote
    // one.
    let trigger = ChildSpec::new("trigger", |start| {
        start.spawn_fn(|cx: ProcessCx<()>| async move {
            cx.recv().await?;
            Err::<(), BoxError>("told to fail".into())
        })
    });
    const ROUNDS: u64 = 10;
    let supervisor = Supervisor::one_for_all()
        .max_restarts(ROUNDS as u32, Duration::from_secs(60))
        .child(trigger)
        .child(remote.shutdown(ChildShutdown::BrutalKill))
        .start(&a.scheduler())
        .await
        .expect("the supervisor starts");
    let mut instance = guarded(GUARD, "the remote child runs", child.running()).await;
    for round in 1..=ROUNDS {
        let children = supervisor.which_children().await.unwrap();
        let trigger = children[0].pid.expect("the trigger runs");
        a_sched.handle().addr::<()>(trigger).send(()).unwrap();
        let previous = instance.clone();
        instance = wait_child(&child, |pid| *pid != previous, GUARD).await;
        assert_eq!(supervisor.restarts().await.unwrap(), round);
    }
    assert!(
        !OVERLAPPED.load(SeqCst),
        "a new instance started while the killed one was alive"
    );

    for (sched, node) in [(a_sched, a), (b_sched, b)] {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_to_a_named_remote_childs_proxy_do_not_stop_the_child() {
    // `register_as` on a remote child's spec names its local proxy. A black-box review sent
    // four messages to that name: each one stopped the real child, and the fourth ended the
    // supervisor (its intensity spent). They are dropped now.
    let server = NatsServer::start();
    let mut nodes = Vec::new();
    for name in ["a", "b"] {
        let sched = Scheduler::builder().workers(1).build().unwrap();
        let cluster = cart_cluster(&server.url(), name, Duration::from_millis(1000), GUARD);
        let node = Node::start(sched.handle(), cluster).await.unwrap();
        nodes.push((sched, node));
    }
    let (a_sched, a) = &nodes[0];
    assert!(a.wait_for_nodes(1, GUARD).await);
    let (spec, child) = a
        .remote_child("svc", Placement::Node("b".into()), "cart", 7u64)
        .unwrap();
    let supervisor = Supervisor::one_for_one()
        .max_restarts(3, Duration::from_secs(60))
        .child(spec.register_as("svc"))
        .start(&a.scheduler())
        .await
        .expect("the supervisor starts");
    let first = guarded(GUARD, "the remote child runs", child.running()).await;
    let handle = a_sched.handle();
    let proxy = handle.whereis("svc").expect("the name holds the proxy");
    let steps = handle.process_info(proxy).unwrap().steps;

    for _ in 0..4 {
        handle.named::<()>("svc").unwrap().send(()).unwrap();
    }
    // Of another type, untyped, by PID.
    handle
        .send(proxy, Message::new("odd", Payload::new(5u32)))
        .unwrap();
    wait_until("the proxy has read what was sent to it", GUARD, || {
        let info = handle.process_info(proxy).expect("the proxy lives on");
        info.steps > steps
            && info.mailbox_depth == 0
            && info.unread_messages == 0
            && info.state == ProcessState::Idle
    });
    assert_eq!(
        a.addr::<Cart>(first.clone())
            .ask(Cart::Total)
            .await
            .unwrap(),
        7
    );
    assert_eq!(supervisor.restarts().await.unwrap(), 0, "no restart");
    assert_eq!(child.pid(), Some(first), "the same instance");
    assert_eq!(handle.whereis("svc"), Some(proxy), "the same proxy");

    for (sched, node) in nodes {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}
