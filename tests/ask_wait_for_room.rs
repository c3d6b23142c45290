//! `Ask::wait_for_room`: an ask to a full bounded mailbox that waits in the mailbox's line of
//! waiting senders (as `Addr::send_wait` does) instead of failing `Undelivered(MailboxFull)` —
//! from tokio code and from process bodies. Every request is answered exactly once; an ask
//! that times out or is dropped while it waits sends nothing and passes its turn on; one
//! whose process ends fails typed; capacity 0 fails at once.

mod support;

use procsched::error::SendErrorKind;
use procsched::prelude::*;
use std::time::Duration;
use support::HANG_GUARD;

type Request = (u64, Reply<u64>);

/// A doubler that reads nothing until `go` fires, then answers every request with `2 * n`
/// and counts them; the count is its output once cancelled (`SchedulerHandle::cancel`).
fn gated_doubler(
    sched: &Scheduler,
) -> (
    ProcessHandle<u64, Request>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (go_tx, go) = tokio::sync::oneshot::channel::<()>();
    let handle = sched
        .spawn_fn(move |cx: ProcessCx<Request>| async move {
            let _ = go.await;
            let mut answered = 0;
            loop {
                let (n, reply) = match cx.recv().await {
                    Ok(request) => request,
                    Err(_cancelled) => return Ok::<_, BoxError>(answered),
                };
                answered += 1;
                let _ = reply.send(2 * n);
            }
        })
        .unwrap();
    (handle, go_tx)
}

/// Takes the one message of room in `addr`'s mailbox with an ask whose answer nobody awaits.
fn fill(
    addr: &Addr<Request>,
) -> std::pin::Pin<Box<impl std::future::Future<Output = Result<u64, AskError>> + '_>> {
    let mut filler = Box::pin(addr.ask(|reply| (1, reply)));
    futures::executor::block_on(async {
        assert!(futures::poll!(&mut filler).is_pending(), "sent, unanswered");
    });
    filler
}

fn bounded(workers: usize, capacity: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .mailbox_capacity(capacity)
        .build()
        .unwrap()
}

/// Waits until process `pid` is `Blocked` (a hang guard bounds the wait).
fn wait_until_blocked(sched: &Scheduler, pid: Pid) {
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while sched.state(pid) != Some(ProcessState::Blocked) {
        assert!(std::time::Instant::now() < deadline, "hang guard");
        std::thread::yield_now();
    }
}

/// Runs `asker` (given the doubler's address) as a body while the doubler's one message of
/// room is taken; once it is `Blocked` on its held asks, cancels it: it must end cancelled
/// (`?` on the ask's `Cancelled`), and nothing it held may reach the doubler.
fn cancelled_while_held<Fut>(asker: impl FnOnce(Addr<Request>) -> Fut + Send + 'static)
where
    Fut: std::future::Future<Output = Result<(), BoxError>> + Send + 'static,
{
    let sched = bounded(2, 1);
    let (doubler, go) = gated_doubler(&sched);
    let filled = doubler.addr();
    let filler = fill(&filled);
    let addr = doubler.addr();
    let asker = sched.spawn_fn(move |_: ProcessCx| asker(addr)).unwrap();
    wait_until_blocked(&sched, asker.pid());
    sched.cancel(asker.pid()).unwrap();
    let ended = sched.block_on(async {
        tokio::time::timeout(HANG_GUARD, asker)
            .await
            .expect("hang guard: the cancel was not heard while waiting for room")
    });
    assert!(
        ended.unwrap_err().is_cancelled(),
        "`?` on the ask's Cancelled"
    );
    go.send(()).unwrap();
    let filled_answer = sched.block_on(async {
        tokio::time::timeout(HANG_GUARD, filler)
            .await
            .expect("hang guard")
    });
    assert_eq!(filled_answer.unwrap(), 2);
    sched.cancel(doubler.pid()).unwrap();
    assert_eq!(
        sched.block_on(doubler).unwrap(),
        1,
        "only the filler was delivered"
    );
    sched.shutdown(HANG_GUARD);
}

#[test]
fn an_ask_from_tokio_waits_for_room_where_a_plain_ask_is_refused() {
    let sched = bounded(1, 1);
    let (doubler, go) = gated_doubler(&sched);
    let addr = doubler.addr();
    sched.block_on(async {
        // The one message of room, taken.
        let mut first = std::pin::pin!(addr.ask(|reply| (1, reply)));
        assert!(futures::poll!(&mut first).is_pending());
        let refused = addr.ask(|reply: Reply<u64>| (2, reply)).await.unwrap_err();
        assert!(refused.is_mailbox_full(), "{refused:?}");
        let mut waiting = std::pin::pin!(addr.ask(|reply| (3, reply)).wait_for_room());
        assert!(
            futures::poll!(&mut waiting).is_pending(),
            "the mailbox is full"
        );
        assert!(
            format!("{waiting:?}").contains("waiting for room"),
            "{waiting:?}"
        );
        go.send(()).unwrap();
        let answers = tokio::time::timeout(HANG_GUARD, async {
            (first.await.unwrap(), waiting.await.unwrap())
        })
        .await
        .expect("hang guard");
        assert_eq!(answers, (2, 6));
    });
    sched.cancel(doubler.pid()).unwrap();
    assert_eq!(
        sched.block_on(doubler).unwrap(),
        2,
        "the refused ask sent nothing"
    );
    sched.shutdown(HANG_GUARD);
}

#[test]
fn many_askers_behind_a_one_message_mailbox_are_each_answered_once() {
    const ASKERS: u64 = 4;
    const EACH: u64 = 2_000;
    let sched = bounded(2, 1);
    let (doubler, go) = gated_doubler(&sched);
    go.send(()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let askers: Vec<_> = (0..ASKERS)
            .map(|asker| {
                let addr = doubler.addr();
                tokio::spawn(async move {
                    for i in 0..EACH {
                        let n = asker * EACH + i;
                        let answer = addr.ask(|reply| (n, reply)).wait_for_room().await;
                        assert_eq!(answer.expect("never refused"), 2 * n);
                    }
                })
            })
            .collect();
        for asker in askers {
            tokio::time::timeout(HANG_GUARD, asker)
                .await
                .expect("hang guard")
                .unwrap();
        }
    });
    sched.cancel(doubler.pid()).unwrap();
    assert_eq!(sched.block_on(doubler).unwrap(), ASKERS * EACH);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn an_ask_from_a_body_waits_for_room_blocked_and_is_answered() {
    let sched = bounded(2, 1);
    let (doubler, go) = gated_doubler(&sched);
    let filled = doubler.addr();
    let _filler = fill(&filled);
    let addr = doubler.addr();
    let (sent_tx, sent) = std::sync::mpsc::channel::<()>();
    let asker = sched
        .spawn_fn(move |_: ProcessCx| async move {
            sent_tx.send(()).unwrap();
            Ok::<_, BoxError>(addr.ask(|reply| (21, reply)).wait_for_room().await?)
        })
        .unwrap();
    sent.recv_timeout(HANG_GUARD).expect("the asker ran");
    // Waits for room as for any answer: its worker is free.
    wait_until_blocked(&sched, asker.pid());
    go.send(()).unwrap();
    assert_eq!(sched.block_on(asker).unwrap(), 42);
    sched.cancel(doubler.pid()).unwrap();
    assert_eq!(sched.block_on(doubler).unwrap(), 2);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn an_ask_timed_out_or_dropped_while_waiting_sends_nothing_and_passes_its_turn_on() {
    let sched = bounded(1, 1);
    let (doubler, go) = gated_doubler(&sched);
    let addr = doubler.addr();
    let _filler = fill(&addr);
    sched.block_on(async {
        let timed_out = addr
            .ask_within(Duration::from_millis(10), |reply: Reply<u64>| (100, reply))
            .wait_for_room()
            .await
            .unwrap_err();
        assert!(timed_out.is_timed_out(), "{timed_out:?}");
        for n in 200..1_200 {
            let mut dropped = std::pin::pin!(addr
                .ask(move |reply: Reply<u64>| (n, reply))
                .wait_for_room());
            assert!(futures::poll!(&mut dropped).is_pending());
        }
        let mut last = std::pin::pin!(addr.ask(|reply| (3, reply)).wait_for_room());
        assert!(futures::poll!(&mut last).is_pending());
        go.send(()).unwrap();
        let answer = tokio::time::timeout(HANG_GUARD, last)
            .await
            .expect("hang guard: the turns given up were not passed on");
        assert_eq!(answer.unwrap(), 6);
    });
    sched.cancel(doubler.pid()).unwrap();
    assert_eq!(
        sched.block_on(doubler).unwrap(),
        2,
        "only the filler and the last request were delivered"
    );
    sched.shutdown(HANG_GUARD);
}

#[test]
fn an_ask_waiting_when_its_process_ends_fails_typed() {
    let sched = bounded(1, 1);
    let (doubler, _go) = gated_doubler(&sched);
    let addr = doubler.addr();
    let _filler = fill(&addr);
    sched.block_on(async {
        let mut waiting = std::pin::pin!(addr.ask(|reply: Reply<u64>| (2, reply)).wait_for_room());
        assert!(futures::poll!(&mut waiting).is_pending());
        sched.terminate(doubler.pid()).unwrap();
        let refused = tokio::time::timeout(HANG_GUARD, waiting)
            .await
            .expect("hang guard")
            .unwrap_err();
        assert!(
            matches!(
                refused,
                AskError::Undelivered(SendErrorKind::NotFound | SendErrorKind::Closed)
            ),
            "{refused:?}"
        );
    });
    sched.shutdown(HANG_GUARD);
}

#[test]
fn under_capacity_zero_an_ask_that_waits_for_room_is_mailbox_full_at_once() {
    let sched = bounded(1, 0);
    let (doubler, go) = gated_doubler(&sched);
    let refused = sched.block_on(async {
        tokio::time::timeout(
            HANG_GUARD,
            doubler
                .addr()
                .ask(|reply: Reply<u64>| (1, reply))
                .wait_for_room(),
        )
        .await
        .expect("hang guard: waited for room that never comes")
    });
    assert!(refused.unwrap_err().is_mailbox_full());
    drop(go);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_body_waiting_for_room_hears_its_cancel_and_sends_nothing() {
    cancelled_while_held(|addr| async move {
        addr.ask(|reply| (21, reply)).wait_for_room().await?;
        Ok(())
    });
}

#[test]
fn held_asks_polled_by_a_combinator_hear_their_process_cancel() {
    use futures::stream::{FuturesUnordered, StreamExt};
    cancelled_while_held(|addr| async move {
        // Every ask is held (the mailbox is full), each polled with the combinator's waker
        // rather than the body's.
        let mut asks: FuturesUnordered<_> = (0..40)
            .map(|n| addr.ask(move |reply| (n, reply)).wait_for_room())
            .collect();
        while let Some(answer) = asks.next().await {
            answer?;
        }
        Ok(())
    });
}

#[test]
fn a_held_ask_past_its_deadline_is_timed_out_before_room_made_meanwhile_delivers_it() {
    let sched = bounded(1, 1);
    let (doubler, go) = gated_doubler(&sched);
    let filled = doubler.addr();
    let filler = fill(&filled);
    let addr = doubler.addr();
    let timeout = Duration::from_millis(20);
    futures::executor::block_on(async {
        let mut held = std::pin::pin!(addr
            .ask_within(timeout, |reply: Reply<u64>| (100, reply))
            .wait_for_room());
        assert!(futures::poll!(&mut held).is_pending(), "held for room");
        // The deadline was set in that poll: it has passed once this has.
        let started = std::time::Instant::now();
        // Room is made (the filler is taken and answered) while nobody polls the held ask,
        // and its deadline passes before it is polled again.
        go.send(()).unwrap();
        assert_eq!(filler.await.unwrap(), 2);
        while started.elapsed() <= timeout {
            std::thread::yield_now();
        }
        let late = held.await.unwrap_err();
        assert!(late.is_timed_out(), "{late:?}");
        // A marker behind it shows what the process received. (It waits for room too: the
        // filler's answer can come before the body's step that took it ends, and the step's
        // end is where its room is counted.)
        assert_eq!(
            addr.ask(|reply| (7, reply)).wait_for_room().await.unwrap(),
            14
        );
    });
    sched.cancel(doubler.pid()).unwrap();
    assert_eq!(
        sched.block_on(doubler).unwrap(),
        2,
        "the filler and the marker only: the timed-out request never reached the process"
    );
    sched.shutdown(HANG_GUARD);
}
