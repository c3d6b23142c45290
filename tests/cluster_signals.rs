//! Signals and messages between two nodes arrive in the order they were sent, as OTP orders
//! every signal between two processes: a monitor (or link) set just before the message that
//! ends its target sees the target's real exit, never `NoProc`; a process's last messages
//! arrive before its `Down` and before the exit signal of its link, and before the answer to an
//! ask it replies to after sending them. Monitors, links and replies travel
//! on a node's control subject and messages on its data subject, so each round is a race the
//! node must order; many rounds give it many chances to go wrong.
#![cfg(feature = "cluster")]

mod cluster_support;

use cluster_support::reports::{
    guarded, spawn_reporter, spawn_worker, stop, two_nodes, Collect, Work, REPORTS,
};
use cluster_support::NatsServer;
use procsched::prelude::*;
use procsched::supervision::{Incoming, Signal};
use std::time::Duration;

const ROUNDS: u64 = 100;
/// Long enough that no node is declared down while the rounds run.
const DOWN_AFTER: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_set_before_the_message_that_stops_its_target_sees_its_real_exit() {
    let server = NatsServer::start();
    let nodes = two_nodes(&server, DOWN_AFTER).await;
    let a = &nodes[0].1;
    for round in 0..ROUNDS {
        let pid = spawn_worker(a).await;
        let down = a.monitor(pid.clone());
        a.addr::<Work>(pid).send(Work::Stop).expect("sent");
        let down = guarded("Down", down).await;
        assert!(down.reason.is_normal(), "round {round}: {:?}", down.reason);
    }
    stop(nodes).await;
}

/// A process on node a counting the reports it receives: `Count` answers how many, and whether
/// each was the one expected (0, 1, … `cycle - 1`, then 0 again).
fn spawn_collector(sched: &Scheduler, cycle: u64) -> ProcessHandle<(), Collect> {
    sched
        .spawn_fn(move |cx: ProcessCx<Collect>| async move {
            let (mut count, mut ordered) = (0u64, true);
            loop {
                match cx.recv().await? {
                    Collect::Report(n) => {
                        ordered &= n == count % cycle;
                        count += 1;
                    }
                    Collect::Count(reply) => {
                        let _ = reply.send((count, ordered));
                    }
                }
            }
            #[allow(unreachable_code)]
            Ok::<_, BoxError>(())
        })
        .expect("collector")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_s_last_messages_arrive_before_its_down() {
    let server = NatsServer::start();
    let nodes = two_nodes(&server, DOWN_AFTER).await;
    let (sched_a, a) = (&nodes[0].0, &nodes[0].1);
    let collector = spawn_collector(sched_a, REPORTS);
    let to = a.pid(collector.pid());
    let collector = collector.addr();
    for round in 0..ROUNDS {
        let pid = spawn_worker(a).await;
        let down = a.monitor(pid.clone());
        let fail = round % 2 == 1;
        a.addr::<Work>(pid)
            .send(Work::Finish {
                to: to.clone(),
                fail,
            })
            .expect("sent");
        let down = guarded("Down", down).await;
        assert_eq!(
            down.reason.is_failed(),
            fail,
            "round {round}: {:?}",
            down.reason
        );
        // The reports were delivered to the collector's mailbox before the Down came in, so
        // this local ask, queued behind them, counts them all.
        let (count, ordered) = guarded("count", collector.ask(Collect::Count))
            .await
            .expect("counted");
        assert_eq!(
            count,
            (round + 1) * REPORTS,
            "round {round}: every report before Down"
        );
        assert!(ordered, "round {round}: in the order sent");
    }
    stop(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_set_before_the_message_that_ends_its_target_sees_its_real_exit_after_its_last_messages(
) {
    let server = NatsServer::start();
    let nodes = two_nodes(&server, DOWN_AFTER).await;
    let (sched_a, a) = (&nodes[0].0, &nodes[0].1);
    for round in 0..ROUNDS {
        let pid = spawn_worker(a).await;
        let (node, remote) = (a.clone(), pid.clone());
        let (linked_tx, linked) = tokio::sync::oneshot::channel();
        // Traps exits, links to the worker, then reads (in arrival order) the reports up to
        // the exit signal.
        let linker = sched_a
            .spawn_fn(move |cx: ProcessCx<Collect>| async move {
                cx.trap_exit(true);
                node.link(cx.pid(), &remote)?;
                let _ = linked_tx.send(());
                let mut next = 0;
                loop {
                    match cx.recv_any().await? {
                        Incoming::Message(Collect::Report(n)) if n == next => next += 1,
                        Incoming::Signal(Signal::Exit(exit)) => {
                            return Ok::<_, BoxError>((next, exit.reason));
                        }
                        _ => return Err("a report out of order, or an unexpected item".into()),
                    }
                }
            })
            .expect("linker");
        guarded("the link", linked).await.expect("linked");
        let to = a.pid(linker.pid());
        // The link went out before this message: the worker is linked when it reads it.
        a.addr::<Work>(pid)
            .send(Work::Finish { to, fail: true })
            .expect("sent");
        let (reports, reason) = guarded("the linker", linker)
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(reason.is_failed(), "round {round}: {reason:?}");
        assert_eq!(
            reports, REPORTS,
            "round {round}: every report before the exit signal"
        );
    }
    stop(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_arrives_after_the_messages_its_process_sent_before_replying() {
    let server = NatsServer::start();
    let nodes = two_nodes(&server, DOWN_AFTER).await;
    let (sched_a, a) = (&nodes[0].0, &nodes[0].1);
    let collector = spawn_collector(sched_a, u64::MAX);
    let to = a.pid(collector.pid());
    let collector = collector.addr();
    let reporter = a.addr::<Work>(spawn_reporter(a).await);
    for n in 0..ROUNDS * REPORTS {
        let to = to.clone();
        let answer = guarded(
            "the reply",
            reporter.ask(|reply| Work::ReportThenReply { to, n, reply }),
        )
        .await
        .expect("answered");
        assert_eq!(answer, n);
        // Report n reached the collector's mailbox before the reply came in; this local ask
        // queues behind it.
        let (count, ordered) = guarded("count", collector.ask(Collect::Count))
            .await
            .expect("counted");
        assert_eq!(count, n + 1, "report {n} before its reply");
        assert!(ordered, "report {n}: in the order sent");
    }
    stop(nodes).await;
}
