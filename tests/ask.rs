//! Ask/reply (`src/scheduler/ask.rs`): from tokio code and from inside a process (where the
//! asker is `Blocked` and its worker free), with a timeout, with a reply port dropped
//! unanswered, to a finished process; and shutdown's cancellation propagated with `?` from
//! every receiving future — `recv`, `recv_message`, `cancelled`, an ask in flight — ending the
//! body as *cancelled*.

mod support;

use procsched::error::CancelReason;
use procsched::metrics::ProcessState;
use procsched::prelude::*;
use std::time::Duration;
use support::*;

/// A process that answers `Double` asks, drops `Drop` ports unanswered, keeps `Keep` ports
/// (never answering) and stops on `Stop`.
enum Server {
    Double(u64, Reply<u64>),
    Drop(Reply<u64>),
    Keep(Reply<u64>),
    Stop,
}

fn server(sched: &Scheduler) -> ProcessHandle<usize, Server> {
    sched
        .spawn_fn(|cx: ProcessCx<Server>| async move {
            let mut kept = Vec::new();
            loop {
                match cx.recv().await? {
                    Server::Double(n, reply) => {
                        let _ = reply.send(n * 2);
                    }
                    Server::Drop(reply) => drop(reply),
                    Server::Keep(reply) => kept.push(reply),
                    Server::Stop => return Ok::<_, BoxError>(kept.len()),
                }
            }
        })
        .unwrap()
}

/// Keeps every `Keep` port it is sent, never answering, and ends on its cancel (`?`),
/// dropping them: its askers then hear `NoReply`, unless their own cancel comes first.
fn keeper_ending_on_cancel(sched: &Scheduler) -> ProcessHandle<(), Server> {
    sched
        .spawn_fn(|cx: ProcessCx<Server>| async move {
            let mut kept = Vec::new();
            loop {
                if let Server::Keep(reply) = cx.recv().await? {
                    kept.push(reply);
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_from_tokio_code_gets_its_typed_answer() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let server = server(&sched);
    let addr = server.addr();
    for n in 0..100 {
        assert_eq!(
            addr.ask(|reply| Server::Double(n, reply)).await.unwrap(),
            n * 2
        );
    }
    addr.send(Server::Stop).unwrap();
    assert_eq!(server.await.unwrap(), 0);
    sched.shutdown_async(HANG_GUARD).await;
}

#[test]
fn an_ask_from_a_process_is_a_yield_the_asker_is_blocked_and_its_worker_free() {
    // One worker: the answering process can only run if the asker gave its worker back.
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let server = server(&sched);
    let addr = server.addr();
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    let gate_rx = std::sync::Mutex::new(gate_rx);
    let gatekeeper = sched
        .spawn_fn(move |cx: ProcessCx<Reply<()>>| async move {
            // Holds the answer to the asker's second ask until the test has seen it Blocked.
            let reply = cx.recv().await?;
            let _ = gate_rx.lock().unwrap().recv();
            let _ = reply.send(());
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let gate = gatekeeper.addr();
    let asker = sched
        .spawn_fn(move |_: ProcessCx| async move {
            let doubled = addr.ask(|reply| Server::Double(21, reply)).await?;
            gate.ask(|reply| reply).await?;
            addr.send(Server::Stop)?;
            Ok::<_, BoxError>(doubled)
        })
        .unwrap();
    wait_for_state(sched.handle(), asker.pid(), ProcessState::Blocked);
    gate_tx.send(()).unwrap();
    assert_eq!(join_typed(asker).unwrap(), 42);
    join_typed(gatekeeper).unwrap();
    assert_eq!(join_typed(server).unwrap(), 0);
}

#[test]
fn a_dropped_reply_port_fails_the_ask_at_once_from_tokio_and_from_a_process() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let server = server(&sched);
    let addr = server.addr();
    let outside = sched.block_on(addr.ask(Server::Drop));
    assert_eq!(outside.unwrap_err(), AskError::NoReply);
    let inside = {
        let addr = addr.clone();
        sched
            .spawn_fn(
                move |_: ProcessCx| async move { Ok::<_, BoxError>(addr.ask(Server::Drop).await) },
            )
            .unwrap()
    };
    assert_eq!(join_typed(inside).unwrap().unwrap_err(), AskError::NoReply);
    addr.send(Server::Stop).unwrap();
    join_typed(server).unwrap();
}

#[test]
fn an_ask_within_a_timeout_fails_typed_and_a_late_answer_is_handed_back() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let server = server(&sched);
    let addr = server.addr();
    let late = sched.block_on(addr.ask_within(Duration::from_millis(5), Server::Keep));
    assert!(late.unwrap_err().is_timed_out());
    let inside = {
        let addr = addr.clone();
        sched
            .spawn_fn(move |_: ProcessCx| async move {
                Ok::<_, BoxError>(
                    addr.ask_within(Duration::from_millis(5), Server::Keep)
                        .await,
                )
            })
            .unwrap()
    };
    assert!(join_typed(inside).unwrap().unwrap_err().is_timed_out());
    addr.send(Server::Stop).unwrap();
    assert_eq!(
        join_typed(server).unwrap(),
        2,
        "both ports kept, unanswered"
    );
}

#[test]
fn an_ask_to_a_finished_process_fails_with_not_found_from_tokio_and_from_a_process() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let server = server(&sched);
    let addr = server.addr();
    addr.send(Server::Stop).unwrap();
    join_typed(server).unwrap();
    let outside = sched.block_on(addr.ask(|reply| Server::Double(1, reply)));
    assert!(outside.unwrap_err().is_not_found());
    let inside = sched
        .spawn_fn(move |_: ProcessCx| async move {
            Ok::<_, BoxError>(addr.ask(|reply| Server::Double(1, reply)).await)
        })
        .unwrap();
    assert!(join_typed(inside).unwrap().unwrap_err().is_not_found());
}

/// How a body waits when shutdown's cancel arrives.
#[derive(Debug, Clone, Copy)]
enum Waiting {
    Recv,
    RecvMessage,
    Cancelled,
    Ask,
}

#[test]
fn a_cancellation_propagated_with_question_mark_ends_the_body_as_cancelled() {
    for waiting in [
        Waiting::Recv,
        Waiting::RecvMessage,
        Waiting::Cancelled,
        Waiting::Ask,
    ] {
        let sched = Scheduler::builder().workers(2).build().unwrap();
        // Keeps every port it is sent and ignores its own cancel (forced at the deadline), so
        // the ask in flight can only end by the asker's cancel.
        let keeper = sched
            .spawn_fn(|cx: ProcessCx<Server>| async move {
                let mut kept = Vec::new();
                loop {
                    if let Ok(Server::Keep(reply)) = cx.recv().await {
                        kept.push(reply);
                    }
                }
                #[allow(unreachable_code)]
                Ok::<(), BoxError>(())
            })
            .unwrap();
        let addr = keeper.addr();
        let body = sched
            .spawn_fn(move |cx: ProcessCx<u8>| async move {
                match waiting {
                    Waiting::Recv => {
                        cx.recv().await?;
                    }
                    Waiting::RecvMessage => {
                        cx.recv_message().await?;
                    }
                    Waiting::Cancelled => {
                        cx.cancelled().await?;
                    }
                    Waiting::Ask => {
                        addr.ask(Server::Keep).await?;
                    }
                }
                Ok::<_, BoxError>(())
            })
            .unwrap();
        let expected = match waiting {
            Waiting::Ask => ProcessState::Blocked,
            _ => ProcessState::Idle,
        };
        wait_for_state(sched.handle(), body.pid(), expected);
        let report = sched.shutdown(Duration::from_millis(100));
        assert_eq!(
            (report.graceful, report.forced + report.abandoned),
            (1, 1),
            "{waiting:?}: the body graceful, the keeper forced"
        );
        let error = join_typed(body).unwrap_err();
        assert!(
            error.is_cancelled() && !error.is_failed(),
            "{waiting:?}: {error:?}"
        );
        assert!(join_typed(keeper).unwrap_err().is_cancelled());
        assert!(sched.wait_for_abandoned(HANG_GUARD));
        let finished = sched.metrics().finished;
        assert_eq!(
            (finished.cancelled, finished.forced, finished.failed),
            (1, 1, 0),
            "{waiting:?}"
        );
    }
}

#[test]
fn an_ask_sent_after_the_cancel_still_gets_its_answer() {
    // Cleanup may ask: once the body has been told of the cancel (here by `cancelled()`), its
    // asks proceed.
    let sched = Scheduler::builder().workers(2).build().unwrap();
    // Answers through shutdown (ignores its own cancel; forced at the deadline).
    let server = sched
        .spawn_fn(|cx: ProcessCx<Server>| async move {
            loop {
                if let Ok(Server::Double(n, reply)) = cx.recv().await {
                    let _ = reply.send(n * 2);
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap();
    let addr = server.addr();
    let body = sched
        .spawn_fn(move |cx: ProcessCx| async move {
            let Err(why) = cx.cancelled().await;
            assert_eq!(why, RecvError::Cancelled(CancelReason::Shutdown));
            Ok::<_, BoxError>(addr.ask(|reply| Server::Double(21, reply)).await?)
        })
        .unwrap();
    wait_for_state(sched.handle(), body.pid(), ProcessState::Idle);
    let report = sched.shutdown(Duration::from_millis(100));
    assert_eq!(join_typed(body).unwrap(), 42);
    assert_eq!((report.graceful, report.forced + report.abandoned), (1, 1));
    assert!(sched.wait_for_abandoned(HANG_GUARD));
}

#[test]
fn a_cancel_that_arrives_with_an_answer_is_reported_by_the_next_ask_which_sends_nothing() {
    // One worker: the answerer's step cancels the asker, then answers it, and the asker's next
    // step takes both. The ask answered resolves with its answer; nothing has told the body
    // of the cancel, so its next ask does — before sending its request: a body that only asks
    // must hear it, and a request sent would be handled for an asker that gives up on it.
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let highest = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = highest.clone();
    let answerer = sched
        .spawn_fn(move |cx: ProcessCx<(Pid, u64, Reply<u64>)>| async move {
            let sched = cx.scheduler();
            loop {
                let (asker, n, reply) = cx.recv().await?;
                seen.fetch_max(n, std::sync::atomic::Ordering::SeqCst);
                if n == 3 {
                    sched.cancel(asker)?;
                }
                let _ = reply.send(n);
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap();
    let addr = answerer.addr();
    let asker = sched
        .spawn_fn(move |cx: ProcessCx| async move {
            let me = cx.pid();
            let mut asked = 0;
            while asked < 1_000 {
                asked = addr.ask(|reply| (me, asked + 1, reply)).await?;
            }
            Err::<(), BoxError>("asked 1 000 times, never told of the cancel".into())
        })
        .unwrap();
    let ended = join_typed(asker).unwrap_err();
    assert!(ended.is_cancelled(), "{ended}");
    assert_eq!(
        highest.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "the ask that told of the cancel sent nothing"
    );
    drop(answerer);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_body_that_catches_an_asks_cancellation_still_hears_it_at_its_next_receive() {
    // An ask cut short by the cancel tells the body; its receives report the cancellation
    // still (each receive once), so a body that goes on to `recv()?` ends cancelled.
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let keeper = keeper_ending_on_cancel(&sched);
    let addr = keeper.addr();
    let body = sched
        .spawn_fn(move |cx: ProcessCx<u8>| async move {
            match addr.ask(Server::Keep).await {
                Err(error) if error.is_cancelled() => {}
                other => return Err(format!("not cut short: {other:?}").into()),
            }
            cx.recv().await?;
            Err::<(), BoxError>("received a message".into())
        })
        .unwrap();
    wait_for_state(sched.handle(), body.pid(), ProcessState::Blocked);
    sched.cancel(body.pid()).unwrap();
    let ended = join_typed(body).unwrap_err();
    assert!(ended.is_cancelled(), "{ended}");
    drop(keeper);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn an_ask_in_flight_ends_cancelled_whichever_process_hears_the_shutdown_first() {
    // The process asked ends on its own cancel, dropping the port it kept: its `NoReply` and
    // the asker's cancel race (either may reach the asker first). The asker is cancelled
    // either way, and its handle, the report and the metrics agree.
    for round in 0..40 {
        let sched = Scheduler::builder().workers(2).build().unwrap();
        let keeper = keeper_ending_on_cancel(&sched);
        let addr = keeper.addr();
        let asker = sched
            .spawn_fn(move |_: ProcessCx| async move {
                addr.ask(Server::Keep).await?;
                Ok::<_, BoxError>(())
            })
            .unwrap();
        wait_for_state(sched.handle(), asker.pid(), ProcessState::Blocked);
        let report = sched.shutdown(HANG_GUARD);
        assert_eq!((report.graceful, report.forced), (2, 0), "round {round}");
        let error = join_typed(asker).unwrap_err();
        assert!(
            error.is_cancelled() && !error.is_failed(),
            "round {round}: {error:?}"
        );
        assert!(join_typed(keeper).unwrap_err().is_cancelled());
        let finished = sched.metrics().finished;
        assert_eq!(
            (finished.cancelled, finished.failed),
            (2, 0),
            "round {round}"
        );
    }
}

#[test]
fn a_process_that_asks_itself_is_refused_at_once() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let body = sched
        .spawn_fn(|cx: ProcessCx<Server>| async move {
            let me = cx.addr();
            let refused = me.ask(|reply| Server::Double(1, reply)).await;
            // Nothing was sent: the mailbox holds only what others send.
            me.send(Server::Stop)?;
            let next = cx.recv().await?;
            Ok::<_, BoxError>((refused, matches!(next, Server::Stop)))
        })
        .unwrap();
    let (refused, stop_was_next) = join_typed(body).unwrap();
    assert_eq!(refused, Err(AskError::AskedItself));
    assert!(stop_was_next, "the refused request was never queued");
}

#[test]
fn another_schedulers_shutdown_is_not_the_askers() {
    // A body on `a` asks a process on `b`, which `b`'s shutdown ends (its port dropped): the
    // asker is not shutting down, so it hears `NoReply`, not a cancellation of its own.
    let a = Scheduler::builder().workers(1).build().unwrap();
    let b = Scheduler::builder().workers(1).build().unwrap();
    let keeper = keeper_ending_on_cancel(&b);
    let addr = keeper.addr();
    let asker = a
        .spawn_fn(
            move |_: ProcessCx| async move { Ok::<_, BoxError>(addr.ask(Server::Keep).await) },
        )
        .unwrap();
    wait_for_state(a.handle(), asker.pid(), ProcessState::Blocked);
    b.shutdown(HANG_GUARD);
    assert_eq!(join_typed(asker).unwrap(), Err(AskError::NoReply));
    assert_eq!(a.metrics().finished.cancelled, 0);
    a.shutdown(HANG_GUARD);
}
