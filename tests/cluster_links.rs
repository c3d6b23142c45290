//! Links across nodes and supervised children on other nodes, against a real `nats-server`:
//! exit signals with OTP's semantics (trapped as `Exit` naming the other node, or ending the
//! process with the same reason), `NoProc` for a dead target, `NoConnection` when a node dies,
//! `unlink` silencing the link, and a supervisor whose child's node dies restarting the child
//! on a live node.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::cart::{cart_cluster, Cart};
use cluster_support::{
    guarded, linked, supervise_pinned, supervise_remote, wait_child, NatsServer,
};
use procsched::cluster::{Cluster, Node, NodePid, Placement};
use procsched::prelude::*;
use procsched::supervision::{Incoming, Signal};
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

fn cluster(url: &str, name: &str) -> Cluster {
    cart_cluster(url, name, Duration::from_millis(1000), GUARD)
}

async fn start_node(url: &str, name: &str) -> (Scheduler, Node) {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let node = Node::start(sched.handle(), cluster(url, name))
        .await
        .unwrap();
    (sched, node)
}

/// A local process that traps exits and links to `remote` ([`linked`]).
async fn trapping_linker(
    sched: &Scheduler,
    node: &Node,
    remote: NodePid,
) -> ProcessHandle<Option<procsched::supervision::Exit>, ()> {
    linked(sched, node, remote, true, GUARD).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_signals_cross_nodes_with_otp_semantics() {
    let server = NatsServer::start();
    let (a_sched, a) = start_node(&server.url(), "a").await;
    let (b_sched, b) = start_node(&server.url(), "b").await;
    assert!(a.wait_for_nodes(1, GUARD).await && b.wait_for_nodes(1, GUARD).await);
    let spawn_on_b = || a.spawn_on(Placement::Node("b".into()), "cart", 1u64);

    // Trapped: an Exit naming the other node's process, with its reason.
    let target = spawn_on_b().await.unwrap();
    let linker = trapping_linker(&a_sched, &a, target.clone()).await;
    // The link stands once b knows of it: b's monitor of the target answers after the link.
    let watching = a.monitor(target.clone());
    a.addr::<Cart>(target.clone())
        .ask(Cart::Total)
        .await
        .unwrap();
    a.kill(&target).unwrap();
    let exit = guarded(GUARD, "the trapped exit", linker)
        .await
        .unwrap()
        .expect("an exit");
    assert!(exit.reason.is_killed(), "{:?}", exit.reason);
    assert_eq!(NodePid::of_exit(&exit), Some(target.clone()));
    assert_eq!(
        a.pid_of_exit(&exit),
        target,
        "a remote Exit names the other node's PID"
    );
    guarded(GUARD, "down", watching).await;

    // Not trapping: the linked process ends with the same reason.
    let target = spawn_on_b().await.unwrap();
    let (to_link, linked) = (target.clone(), a.clone());
    let (linked_tx, victim_linked) = tokio::sync::oneshot::channel();
    let victim = a_sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            linked.link(cx.pid(), &to_link)?;
            let _ = linked_tx.send(());
            cx.recv().await?;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    guarded(GUARD, "the victim's link", victim_linked)
        .await
        .unwrap();
    a.addr::<Cart>(target.clone())
        .ask(Cart::Total)
        .await
        .unwrap();
    a.kill(&target).unwrap();
    let error = guarded(GUARD, "the victim's end", victim)
        .await
        .unwrap_err();
    assert!(error.exit_reason().is_killed(), "{error}");

    // A dead target: NoProc at once.
    let target = spawn_on_b().await.unwrap();
    let down = a.monitor(target.clone());
    a.kill(&target).unwrap();
    guarded(GUARD, "the target's end", down).await;
    let linker = trapping_linker(&a_sched, &a, target).await;
    let exit = guarded(GUARD, "NoProc", linker).await.unwrap();
    assert!(exit.expect("an exit").reason.is_no_proc());

    // Unlinked: no signal for that link, ever.
    let target = spawn_on_b().await.unwrap();
    let (to_link, linked) = (target.clone(), a.clone());
    let (unlinked_tx, unlinked_rx) = tokio::sync::oneshot::channel();
    let quiet = a_sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.trap_exit(true);
            linked.link(cx.pid(), &to_link)?;
            linked.unlink(cx.pid(), &to_link);
            let _ = unlinked_tx.send(());
            match cx.recv_any().await? {
                Incoming::Message(()) => Ok::<_, BoxError>(true),
                _ => Ok(false),
            }
        })
        .unwrap();
    unlinked_rx.await.unwrap();
    let down = a.monitor(target.clone());
    a.kill(&target).unwrap();
    guarded(GUARD, "the target's end", down).await; // any LinkExit would have come before this Down
    quiet.addr().send(()).unwrap();
    assert!(
        guarded(GUARD, "quiet", quiet).await.unwrap(),
        "an exit signal came through an unlinked link"
    );

    // The node dies: NoConnection.
    let target = spawn_on_b().await.unwrap();
    let linker = trapping_linker(&a_sched, &a, target.clone()).await;
    a.addr::<Cart>(target.clone())
        .ask(Cart::Total)
        .await
        .unwrap();
    drop(b);
    let exit = guarded(GUARD, "NoConnection", linker)
        .await
        .unwrap()
        .expect("an exit");
    assert!(exit.reason.is_no_connection(), "{:?}", exit.reason);

    a.leave().await;
    a_sched.shutdown_async(GUARD).await;
    b_sched.shutdown_async(GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervised_child_whose_node_dies_is_restarted_on_a_live_node() {
    let server = NatsServer::start();
    let (a_sched, a) = start_node(&server.url(), "a").await;
    let mut others = vec![
        Some(start_node(&server.url(), "b").await),
        Some(start_node(&server.url(), "c").await),
    ];
    assert!(a.wait_for_nodes(2, GUARD).await);
    let placement = Placement::AnyOf(vec!["b".into(), "c".into()]);
    let (supervisor, children) = supervise_remote(&a, placement, "cart", 3).await;
    let mut first = Vec::new();
    for (n, child) in children.iter().enumerate() {
        let pid = tokio::time::timeout(GUARD, child.running())
            .await
            .expect("hang guard: the child never ran");
        assert_eq!(child.pid().as_ref(), Some(&pid));
        assert!(pid.node() == "b" || pid.node() == "c", "{pid}");
        assert_eq!(
            a.addr::<Cart>(pid.clone()).ask(Cart::Total).await.unwrap(),
            n as u64
        );
        first.push(pid);
    }

    // Worker 0's node dies: every worker that ran there comes back on the other node.
    let dead = first[0].node().to_owned();
    let (dead_sched, dead_node) = others[if dead == "b" { 0 } else { 1 }].take().unwrap();
    drop(dead_node);
    for (n, child) in children.iter().enumerate() {
        if first[n].node() != dead {
            continue;
        }
        let again = wait_child(child, |pid| *pid != first[n], GUARD).await;
        assert_ne!(again.node(), dead, "placed on a live node");
        assert_eq!(
            a.addr::<Cart>(again).ask(Cart::Total).await.unwrap(),
            n as u64
        );
    }
    assert!(supervisor.restarts().await.unwrap() >= 1);

    let report = a_sched.shutdown_async(GUARD).await;
    assert_eq!(report.forced + report.abandoned, 0, "{report:?}");
    a.leave().await;
    dead_sched.shutdown_async(GUARD).await;
    for (sched, node) in others.into_iter().flatten() {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisor_whose_pinned_child_cannot_come_back_gives_up_with_shutdown() {
    // OTP: a child that cannot be restarted spends its supervisor's intensity, and the
    // supervisor ends `Shutdown`, which whoever watches it sees. A child pinned to a node
    // cannot come back while that node is down: each restart waits for the node up to the
    // request timeout (short here), then fails `NoNode`.
    let server = NatsServer::start();
    let a_sched = Scheduler::builder().workers(1).build().unwrap();
    let a_cluster = cart_cluster(
        &server.url(),
        "a",
        Duration::from_millis(1000),
        Duration::from_millis(300),
    );
    let a = Node::start(a_sched.handle(), a_cluster).await.unwrap();
    let (b_sched, b) = start_node(&server.url(), "b").await;
    assert!(a.wait_for_nodes(1, GUARD).await);
    let (supervisor, _child, _first) = supervise_pinned(&a, "b", 3, GUARD).await;
    let watched = a_sched.monitor(supervisor.pid());

    drop(b); // b dies without leaving: its peers declare it down after `down_after`
    let down = guarded(GUARD, "the supervisor gives up", watched).await;
    assert!(down.reason.is_shutdown(), "{:?}", down.reason);

    let report = a_sched.shutdown_async(GUARD).await;
    assert_eq!(report.forced + report.abandoned, 0, "{report:?}");
    a.leave().await;
    b_sched.shutdown_async(GUARD).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_made_from_a_thread_outside_any_runtime_signals_as_any_other() {
    let server = NatsServer::start();
    let (a_sched, a) = start_node(&server.url(), "a").await;
    let (b_sched, b) = start_node(&server.url(), "b").await;
    assert!(a.wait_for_nodes(1, GUARD).await && b.wait_for_nodes(1, GUARD).await);
    let target = a
        .spawn_on(Placement::Node("b".into()), "cart", 1u64)
        .await
        .unwrap();
    // Traps exits (and says so: a link made before would kill it), then returns the first
    // signal.
    let (trapping_tx, trapping) = std::sync::mpsc::channel();
    let linker = a_sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.trap_exit(true);
            trapping_tx.send(()).unwrap();
            match cx.recv_signal().await? {
                Signal::Exit(exit) => Ok::<_, BoxError>(exit),
                _ => Err("an unexpected signal".into()),
            }
        })
        .unwrap();
    trapping.recv_timeout(GUARD).unwrap();
    let (node, remote, local) = (a.clone(), target.clone(), linker.pid());
    // A plain thread: no tokio context of its own; the node runs the link end's task in its
    // own runtime.
    std::thread::spawn(move || node.link(local, &remote))
        .join()
        .expect("no panic")
        .expect("linked");
    a.kill(&target).unwrap();
    let exit = guarded(GUARD, "the exit signal", linker).await.unwrap();
    assert_eq!(NodePid::of_exit(&exit), Some(target));
    assert!(exit.reason.is_killed(), "{:?}", exit.reason);
    for (sched, node) in [(a_sched, a), (b_sched, b)] {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_supervisor_takes_its_remote_children_with_it() {
    // OTP: a supervisor is linked to its children; killed, it takes them with it. A remote
    // child's proxy is linked to the child: the kill crosses the nodes.
    let server = NatsServer::start();
    let (a_sched, a) = start_node(&server.url(), "a").await;
    let (b_sched, b) = start_node(&server.url(), "b").await;
    assert!(a.wait_for_nodes(1, GUARD).await && b.wait_for_nodes(1, GUARD).await);
    let (supervisor, children) = supervise_remote(&a, Placement::Node("b".into()), "cart", 2).await;
    let mut ended = Vec::new();
    for child in &children {
        let pid = wait_child(child, |_| true, GUARD).await;
        assert_eq!(pid.node(), "b");
        ended.push(b_sched.monitor(pid.local()));
    }
    a_sched.terminate(supervisor.pid()).unwrap();
    for down in ended {
        let down = guarded(GUARD, "a child ends with its supervisor", down).await;
        assert!(down.reason.is_killed(), "{:?}", down.reason);
    }
    for child in &children {
        guarded(GUARD, "the proxy is gone", async {
            while child.pid().is_some() {
                tokio::task::yield_now().await;
            }
        })
        .await;
    }
    for (sched, node) in [(a_sched, a), (b_sched, b)] {
        node.leave().await;
        sched.shutdown_async(GUARD).await;
    }
}
