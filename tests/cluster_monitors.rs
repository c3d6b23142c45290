//! A process that monitors a process on another node (`Node::monitor_from`) reads its `Down`
//! in its own mailbox, as it would a local one's: after the messages the target sent it before
//! ending, with the target's node named, `NoProc` for a target already gone (or from a previous
//! life of its node; `NoConnection` from a newer life not read yet), `NoConnection` when the
//! target's node dies; `demonitor` ends it, on both
//! nodes.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::reports::{
    guarded, spawn_worker, stop, two_nodes, Collect, Work, GUARD, REPORTS,
};
use cluster_support::NatsServer;
use procsched::cluster::{Node, NodePid, RemoteError};
use procsched::prelude::*;
use procsched::supervision::{Down, Incoming, MonitorRef, Signal};
use std::time::Duration;

const ROUNDS: u64 = 50;
/// A dropped node is declared down after this much silence.
const DOWN_AFTER: Duration = Duration::from_secs(1);

/// Polls `condition` until it holds; a hang guard, not a timing assertion.
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    guarded(what, async {
        while !condition() {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

/// A process on `sched` that monitors `target` through `node`, reports its monitor, and returns
/// the first `Down` in its mailbox.
fn spawn_watcher(
    sched: &Scheduler,
    node: &Node,
    target: NodePid,
) -> (
    ProcessHandle<Down>,
    tokio::sync::oneshot::Receiver<MonitorRef>,
) {
    let node = node.clone();
    let (monitored, monitor) = tokio::sync::oneshot::channel();
    let watcher = sched
        .spawn_fn(move |cx: ProcessCx| async move {
            let monitor = node.monitor_from(cx.pid(), &target)?;
            let _ = monitored.send(monitor);
            Ok::<_, BoxError>(cx.recv_down().await?)
        })
        .expect("watcher");
    (watcher, monitor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_reads_a_remote_process_s_down_in_its_mailbox_after_its_last_messages() {
    let server = NatsServer::start();
    let nodes = two_nodes(&server, DOWN_AFTER).await;
    let (sched_a, a) = (&nodes[0].0, &nodes[0].1);
    for round in 0..ROUNDS {
        let pid = spawn_worker(a).await;
        let (node, target) = (a.clone(), pid.clone());
        let (monitored, monitor) = tokio::sync::oneshot::channel();
        // Reads, in arrival order, the worker's reports up to its `Down`.
        let watcher = sched_a
            .spawn_fn(move |cx: ProcessCx<Collect>| async move {
                let monitor = node.monitor_from(cx.pid(), &target)?;
                let _ = monitored.send(monitor);
                let mut next = 0;
                loop {
                    match cx.recv_any().await? {
                        Incoming::Message(Collect::Report(n)) if n == next => next += 1,
                        Incoming::Signal(Signal::Down(down)) => {
                            return Ok::<_, BoxError>((next, down));
                        }
                        _ => return Err("a report out of order, or an unexpected item".into()),
                    }
                }
            })
            .expect("watcher");
        let monitor = guarded("the monitor", monitor).await.expect("monitored");
        let fail = round % 2 == 1;
        // The monitor went out before this message: the worker is watched when it reads it.
        let to = a.pid(watcher.pid());
        a.addr::<Work>(pid.clone())
            .send(Work::Finish { to, fail })
            .expect("sent");
        let (reports, down) = guarded("the watcher", watcher)
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(reports, REPORTS, "round {round}: every report before Down");
        assert_eq!(down.monitor, monitor, "round {round}");
        assert_eq!(
            down.reason.is_failed(),
            fail,
            "round {round}: {:?}",
            down.reason
        );
        assert!(fail || down.reason.is_normal(), "round {round}");
        assert_eq!(NodePid::of_down(&down), Some(pid), "round {round}");
    }
    stop(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_target_is_no_proc_a_local_one_is_watched_here_and_a_dead_watcher_is_not_found() {
    let server = NatsServer::start();
    let nodes = two_nodes(&server, DOWN_AFTER).await;
    let (sched_a, a) = (&nodes[0].0, &nodes[0].1);

    // Already gone.
    let pid = spawn_worker(a).await;
    let ended = a.monitor(pid.clone());
    a.addr::<Work>(pid.clone()).send(Work::Stop).expect("sent");
    assert!(guarded("Down", ended).await.reason.is_normal());
    let (watcher, _) = spawn_watcher(sched_a, a, pid.clone());
    let down = guarded("the watcher", watcher).await.expect("a Down");
    assert!(down.reason.is_no_proc(), "{:?}", down.reason);
    assert_eq!(NodePid::of_down(&down), Some(pid.clone()));
    assert_eq!(
        a.pid_of_down(&down),
        pid,
        "a remote Down names the other node's PID"
    );

    // From a previous life of its node (incarnations order by their node's start: the low
    // 20 bits are random, the rest milliseconds)...
    let b_incarnation = nodes[1].1.incarnation();
    let previous_life = NodePid::new("b", b_incarnation - (1 << 20), pid.local());
    let (watcher, _) = spawn_watcher(sched_a, a, previous_life);
    let down = guarded("the watcher", watcher).await.expect("a Down");
    assert!(down.reason.is_no_proc(), "{:?}", down.reason);
    // ... and from a newer one that `a` has not read yet: not reachable, not gone.
    let next_life = NodePid::new("b", b_incarnation + (1 << 20), pid.local());
    let (watcher, _) = spawn_watcher(sched_a, a, next_life);
    let down = guarded("the watcher", watcher).await.expect("a Down");
    assert!(down.reason.is_no_connection(), "{:?}", down.reason);

    // A process of this node: a local monitor, no node in its `Down`.
    let local = sched_a
        .spawn_fn(|cx: ProcessCx<u8>| async move { Ok::<_, BoxError>(cx.recv().await?) })
        .expect("local");
    let (watcher, monitor) = spawn_watcher(sched_a, a, a.pid(local.pid()));
    let monitor = guarded("the monitor", monitor).await.expect("monitored");
    local.addr().send(1).expect("sent");
    let down = guarded("the watcher", watcher).await.expect("a Down");
    assert_eq!(down.monitor, monitor);
    assert!(down.reason.is_normal(), "{:?}", down.reason);
    assert!(down.node.is_none() && NodePid::of_down(&down).is_none());
    assert_eq!(
        a.pid_of_down(&down),
        a.pid(local.pid()),
        "a local Down names this node's PID"
    );

    // The watcher must be a live process of this node.
    let gone = sched_a
        .spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(()) })
        .expect("spawn");
    let gone_pid = gone.pid();
    guarded("the process", gone).await.expect("ended");
    let target = spawn_worker(a).await;
    assert!(matches!(
        a.monitor_from(gone_pid, &target),
        Err(RemoteError::NotFound)
    ));
    a.addr::<Work>(target).send(Work::Stop).expect("sent");
    stop(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_gets_no_connection_when_the_target_s_node_dies_and_demonitor_ends_a_monitor() {
    let server = NatsServer::start();
    let mut nodes = two_nodes(&server, DOWN_AFTER).await;
    let (b_sched, b) = nodes.pop().expect("b");
    let (sched_a, a) = (&nodes[0].0, &nodes[0].1);
    let pid = spawn_worker(a).await;

    // Demonitored: `demonitor` reports the monitor active once, then gone, and node b, which
    // served it, forgets it.
    let (node, target) = (a.clone(), pid.clone());
    let (answer, answered) = tokio::sync::oneshot::channel();
    let demonitored = sched_a
        .spawn_fn(move |cx: ProcessCx<u8>| async move {
            let monitor = node.monitor_from(cx.pid(), &target)?;
            cx.recv().await?;
            let _ = answer.send((cx.demonitor(monitor), cx.demonitor(monitor)));
            // Lives on: its end would make b forget the monitor anyway.
            cx.recv().await?;
            Ok::<_, BoxError>(())
        })
        .expect("watcher");
    wait_until("b serves the monitor", || b.stats().monitors_served == 1).await;
    demonitored.addr().send(0).expect("go");
    assert_eq!(
        guarded("demonitor", answered).await.expect("ran"),
        (true, false)
    );
    wait_until("b forgets the monitor", || b.stats().monitors_served == 0).await;
    demonitored.addr().send(1).expect("end");
    guarded("the watcher", demonitored).await.expect("ended");

    let (watcher, monitor) = spawn_watcher(sched_a, a, pid.clone());
    let monitor = guarded("the monitor", monitor).await.expect("monitored");
    // B dies without a word: A declares it down on its own, and the watcher hears of it.
    drop(b);
    let down = guarded("Down(NoConnection)", watcher)
        .await
        .expect("a Down");
    assert_eq!(down.monitor, monitor);
    assert!(down.reason.is_no_connection(), "{:?}", down.reason);
    assert_eq!(NodePid::of_down(&down), Some(pid));
    b_sched.shutdown_async(GUARD).await;
    stop(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_made_from_a_thread_outside_any_runtime_reports_as_any_other() {
    let server = NatsServer::start();
    let nodes = two_nodes(&server, DOWN_AFTER).await;
    let (sched_a, a) = (&nodes[0].0, &nodes[0].1);
    let target = spawn_worker(a).await;
    // Waits for a go, then for its `Down`.
    let watcher = sched_a
        .spawn_fn(|cx: ProcessCx<u8>| async move {
            cx.recv().await?;
            Ok::<_, BoxError>(cx.recv_down().await?)
        })
        .expect("watcher");
    let (node, remote, watcher_pid) = (a.clone(), target.clone(), watcher.pid());
    // A plain thread: no tokio context of its own; the node runs the monitor's task in its
    // own runtime.
    let monitor = std::thread::spawn(move || node.monitor_from(watcher_pid, &remote))
        .join()
        .expect("no panic")
        .expect("monitored");
    a.addr::<Work>(target.clone())
        .send(Work::Stop)
        .expect("sent");
    watcher.addr().send(0).expect("go");
    let down = guarded("the watcher", watcher).await.expect("a Down");
    assert_eq!(down.monitor, monitor);
    assert!(down.reason.is_normal(), "{:?}", down.reason);
    assert_eq!(NodePid::of_down(&down), Some(target));
    stop(nodes).await;
}
