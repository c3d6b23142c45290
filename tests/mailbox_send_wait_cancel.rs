//! `Addr::send_wait` awaited in a process's body hears that process's cancel, as a receive or
//! an ask does: the waiting send gives its place in the mailbox's line up and fails
//! `SendErrorKind::Cancelled` with the message handed back, and a body that propagates it with
//! `?` ends cancelled (graceful in a shutdown's report). The line goes on serving the senders
//! behind it. A send started after the body was told of its cancel is cleanup, and waits.
//!
//! Every step is observed (states, channels, counting wakers), none is timed; deadlines are
//! hang guards.

mod support;

use futures::stream::{FuturesUnordered, StreamExt};
use procsched::error::{CancelReason, SendErrorKind};
use procsched::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use support::polled::Waiting;
use support::HANG_GUARD;

/// A process with a one-message mailbox that reads nothing until given a token, then takes
/// one message per token and reports it; its output is how many it took, once cancelled.
struct Gated {
    handle: ProcessHandle<usize, u64>,
    tokens: tokio::sync::mpsc::UnboundedSender<()>,
    taken: mpsc::Receiver<u64>,
}

impl Gated {
    fn start(sched: &Scheduler) -> Gated {
        let (tokens, mut token) = tokio::sync::mpsc::unbounded_channel::<()>();
        let (report, taken) = mpsc::channel();
        let handle = sched
            .spawn_fn(move |cx: ProcessCx<u64>| async move {
                let mut took = 0;
                loop {
                    tokio::select! {
                        biased;
                        _ = cx.cancelled() => return Ok::<_, BoxError>(took),
                        Some(()) = token.recv() => {}
                    }
                    match cx.recv().await {
                        Ok(n) => {
                            took += 1;
                            report.send(n)?;
                        }
                        Err(_cancelled) => return Ok(took),
                    }
                }
            })
            .unwrap();
        // The one message of room, taken.
        handle.addr().send(0).unwrap();
        Gated {
            handle,
            tokens,
            taken,
        }
    }

    /// Lets it take one message; returns it.
    fn take_one(&self) -> u64 {
        self.tokens.send(()).unwrap();
        self.taken.recv_timeout(HANG_GUARD).expect("hang guard")
    }

    /// Cancels it; returns its output, how many messages it took.
    fn stop(self, sched: &Scheduler) -> usize {
        sched.cancel(self.handle.pid()).unwrap();
        await_guarded(self.handle).unwrap()
    }
}

fn bounded(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .mailbox_capacity(1)
        .build()
        .unwrap()
}

/// Waits until process `pid` is in `state` (a hang guard bounds the wait).
fn wait_until(sched: &Scheduler, pid: Pid, state: ProcessState) {
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while sched.state(pid) != Some(state) {
        assert!(
            std::time::Instant::now() < deadline,
            "hang guard: never {state:?}"
        );
        std::thread::yield_now();
    }
}

/// Awaits `handle` with a hang guard, from a runtime of the test's own (usable while the
/// scheduler shuts down on another thread).
fn await_guarded<T: Send + 'static, M>(
    handle: ProcessHandle<T, M>,
) -> Result<T, procsched::error::ProcessError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(HANG_GUARD, handle)
                .await
                .expect("hang guard: the cancel was not heard while waiting for room")
        })
}

/// A body that awaits `to.send_wait(1)` and propagates its error with `?`; returned once the
/// body is `Blocked` in that send (`to`'s mailbox is full).
fn sender_blocked_on(sched: &Scheduler, to: Addr<u64>) -> ProcessHandle<(), Message> {
    let sender = sched
        .spawn_fn(move |_: ProcessCx| async move {
            to.send_wait(1).await?;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    wait_until(sched, sender.pid(), ProcessState::Blocked);
    sender
}

#[test]
fn cancel_by_pid_ends_a_body_waiting_in_send_wait_cancelled() {
    let sched = bounded(2);
    let gated = Gated::start(&sched);
    let sender = sender_blocked_on(&sched, gated.handle.addr());
    sched.cancel(sender.pid()).unwrap();
    let ended = await_guarded(sender).unwrap_err();
    assert!(
        ended.is_cancelled(),
        "`?` on send_wait's Cancelled: {ended}"
    );
    assert!(ended.exit_reason().is_shutdown());
    assert_eq!(sched.metrics().finished.cancelled, 1);
    // Nothing it waited to send arrived: the gated process takes the filler only.
    assert_eq!(gated.take_one(), 0);
    assert_eq!(gated.stop(&sched), 1);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn the_cancelled_send_hands_its_message_back_with_the_reason() {
    let sched = bounded(2);
    let gated = Gated::start(&sched);
    let to = gated.handle.addr();
    let sender = sched
        .spawn_fn(move |_: ProcessCx| async move {
            let Err(refused) = to.send_wait(7).await else {
                return Err("sent to a full mailbox that takes nothing".into());
            };
            Ok::<_, BoxError>((refused.kind(), refused.pid(), refused.into_message()))
        })
        .unwrap();
    wait_until(&sched, sender.pid(), ProcessState::Blocked);
    sched.cancel(sender.pid()).unwrap();
    let (kind, pid, message) = await_guarded(sender).unwrap();
    assert_eq!(kind, SendErrorKind::Cancelled(CancelReason::Stop));
    assert_eq!(pid, gated.handle.pid());
    assert_eq!(message, Some(7), "handed back, not lost");
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_shutdown_counts_a_body_waiting_in_send_wait_graceful() {
    let sched = bounded(2);
    // Holds its one message of room full and ignores its cancel until released: the sender
    // must end on its own cancel, not on the refusal of a process that ended first.
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let full = sched
        .spawn_fn(move |_: ProcessCx<u64>| async move {
            let _ = released.await;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    full.addr().send(0).unwrap();
    let sender = sender_blocked_on(&sched, full.addr());
    let report = std::thread::scope(|scope| {
        let shutdown = scope.spawn(|| sched.shutdown(HANG_GUARD));
        let ended = await_guarded(sender).unwrap_err();
        assert!(
            ended.is_cancelled(),
            "ended on its shutdown cancel: {ended}"
        );
        release.send(()).unwrap();
        shutdown.join().unwrap()
    });
    assert_eq!((report.graceful, report.forced), (2, 0), "{report:?}");
    assert!(report.is_complete());
}

#[test]
fn a_shutdown_that_ends_the_receiver_first_still_ends_the_waiting_sender_cancelled() {
    // The receiver ends on its cancel: whether its end refuses the waiting send before the
    // sender hears its own cancel is a race, whose outcome the sender's must not depend on.
    for _ in 0..20 {
        let sched = bounded(2);
        let full = sched
            .spawn_fn(|cx: ProcessCx<u64>| async move {
                let Err(why) = cx.cancelled().await;
                Err::<(), _>(why)
            })
            .unwrap();
        full.addr().send(0).unwrap();
        let sender = sender_blocked_on(&sched, full.addr());
        let report = sched.shutdown(HANG_GUARD);
        assert_eq!((report.graceful, report.forced), (2, 0), "{report:?}");
        let ended = await_guarded(sender).unwrap_err();
        assert!(ended.is_cancelled(), "{ended}");
        assert!(await_guarded(full).unwrap_err().is_cancelled());
    }
}

#[test]
fn a_sender_that_left_the_line_on_its_cancel_leaves_the_next_room_to_the_one_behind() {
    let sched = bounded(2);
    let gated = Gated::start(&sched);
    let first = sender_blocked_on(&sched, gated.handle.addr());
    // Second in line: a send from outside, polled by hand.
    let addr = gated.handle.addr();
    let mut second = Waiting::new(addr.send_wait(2));
    assert!(second.poll().is_pending(), "behind the body in line");
    sched.cancel(first.pid()).unwrap();
    assert!(await_guarded(first).unwrap_err().is_cancelled());
    assert_eq!(second.wakes(), 0, "no room yet");
    // Room for one: the first in line is now the second sender.
    assert_eq!(gated.take_one(), 0);
    assert_eq!(second.wakes(), 1, "the room went to the one behind");
    assert!(matches!(second.poll(), Poll::Ready(Ok(()))));
    assert_eq!(gated.take_one(), 2);
    assert_eq!(gated.stop(&sched), 2);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn send_waits_polled_by_a_combinator_hear_their_process_cancel() {
    let sched = bounded(2);
    let gated = Gated::start(&sched);
    let to = gated.handle.addr();
    let (waiting, waits) = mpsc::channel();
    let sender = sched
        .spawn_fn(move |_: ProcessCx| async move {
            // Each send polled with the combinator's waker rather than the body's.
            let mut sends: FuturesUnordered<_> = (1..=40).map(|n| to.send_wait(n)).collect();
            assert!(futures::poll!(sends.next()).is_pending());
            waiting.send(())?;
            while let Some(sent) = sends.next().await {
                sent?;
            }
            Ok::<_, BoxError>(())
        })
        .unwrap();
    waits.recv_timeout(HANG_GUARD).expect("hang guard");
    sched.cancel(sender.pid()).unwrap();
    let ended = await_guarded(sender).unwrap_err();
    assert!(ended.is_cancelled(), "{ended}");
    assert_eq!(gated.take_one(), 0);
    assert_eq!(gated.stop(&sched), 1, "none of the 40 arrived");
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_send_wait_started_after_an_untold_cancel_tells_it_and_sends_nothing() {
    // Room in the mailbox: the send would not wait, and still does not send.
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (report, taken) = mpsc::channel::<u64>();
    let sink = sched
        .spawn_fn(move |cx: ProcessCx<u64>| async move {
            while let Ok(n) = cx.recv().await {
                report.send(n)?;
            }
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let to = sink.addr();
    let (go, gone) = tokio::sync::oneshot::channel::<()>();
    let sender = sched
        .spawn_fn(move |_: ProcessCx| async move {
            // Awaits a future outside procsched: the cancel re-polls the body, tells it nothing.
            let _ = gone.await;
            let Err(refused) = to.send_wait(3).await else {
                return Err("sent after its cancel".into());
            };
            let kind = refused.kind();
            assert_eq!(refused.into_message(), Some(3), "handed back");
            // Told: a send now is cleanup, and goes through.
            to.send_wait(4).await?;
            Ok::<_, BoxError>(kind)
        })
        .unwrap();
    wait_until(&sched, sender.pid(), ProcessState::Blocked);
    // The cancel is in the sender's mailbox before the wake `go` makes: one step sees both.
    sched.cancel(sender.pid()).unwrap();
    go.send(()).unwrap();
    assert_eq!(
        await_guarded(sender).unwrap(),
        SendErrorKind::Cancelled(CancelReason::Stop)
    );
    assert_eq!(taken.recv_timeout(HANG_GUARD).expect("hang guard"), 4);
    sched.cancel(sink.pid()).unwrap();
    await_guarded(sink).unwrap();
    assert!(taken.try_recv().is_err(), "3 was never sent");
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_send_wait_after_the_body_was_told_is_cleanup_and_waits_for_room() {
    let sched = bounded(2);
    let gated = Gated::start(&sched);
    let to = gated.handle.addr();
    let sender = sched
        .spawn_fn(move |cx: ProcessCx| async move {
            let Err(reason) = cx.cancelled().await;
            // Told: a last word, sent once there is room.
            to.send_wait(9).await?;
            Ok::<_, BoxError>(reason)
        })
        .unwrap();
    wait_until(&sched, sender.pid(), ProcessState::Idle);
    sched.cancel(sender.pid()).unwrap();
    wait_until(&sched, sender.pid(), ProcessState::Blocked);
    assert_eq!(gated.take_one(), 0);
    assert_eq!(gated.take_one(), 9, "delivered once room was made");
    assert_eq!(
        await_guarded(sender).unwrap(),
        RecvError::Cancelled(CancelReason::Stop)
    );
    sched.shutdown(HANG_GUARD);
}

#[test]
fn senders_cancelled_while_others_wait_lose_and_duplicate_nothing() {
    const SENDERS: u64 = 6;
    const FROM_TOKIO: u64 = 200;
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(2)
        .build()
        .unwrap();
    // Takes everything, recording who sent what (the sender in the high bits).
    let (report, taken) = mpsc::channel::<u64>();
    let sink = sched
        .spawn_fn(move |cx: ProcessCx<u64>| async move {
            loop {
                match cx.recv().await {
                    Ok(n) => report.send(n)?,
                    Err(_cancelled) => return Ok::<_, BoxError>(()),
                }
            }
        })
        .unwrap();
    // How many senders have sent 20 messages: they are all in the game when cancelled.
    let warmed_up = Arc::new(AtomicUsize::new(0));
    let bodies: Vec<_> = (1..=SENDERS)
        .map(|id| {
            let (to, warmed_up) = (sink.addr(), warmed_up.clone());
            sched
                .spawn_fn(move |cx: ProcessCx| async move {
                    let mut sent = 0u64;
                    loop {
                        match to.send_wait(id << 32 | sent).await {
                            Ok(()) => sent += 1,
                            Err(refused) if refused.is_cancelled() => {
                                let back = refused.into_message().expect("handed back");
                                return Ok::<_, BoxError>((sent, back));
                            }
                            Err(other) => return Err(other.into()),
                        }
                        if sent == 20 {
                            warmed_up.fetch_add(1, SeqCst);
                        }
                        // A send that finds room does not return to the step: yielding lets a
                        // cancel in, which the next send hears if it has not waited for it.
                        cx.yield_now().await;
                    }
                })
                .unwrap()
        })
        .collect();
    let to = sink.addr();
    let tokio_sender = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async {
                for n in 0..FROM_TOKIO {
                    to.send_wait(n).await.unwrap();
                }
            })
    });
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while warmed_up.load(SeqCst) < SENDERS as usize {
        assert!(std::time::Instant::now() < deadline, "hang guard");
        std::thread::yield_now();
    }
    for body in &bodies {
        sched.cancel(body.pid()).unwrap();
    }
    let mut sent_by = vec![0u64; SENDERS as usize + 1];
    for (id, body) in (1..=SENDERS).zip(bodies) {
        let (sent, back) = await_guarded(body).unwrap();
        assert_eq!(back, id << 32 | sent, "the one not sent came back");
        sent_by[id as usize] = sent;
    }
    tokio_sender
        .join()
        .expect("every tokio send delivered: the line moved on");
    let expected = FROM_TOKIO + sent_by.iter().sum::<u64>();
    let mut next = vec![0u64; SENDERS as usize + 1];
    for _ in 0..expected {
        let n = taken.recv_timeout(HANG_GUARD).expect("hang guard");
        let (id, seq) = ((n >> 32) as usize, n & 0xffff_ffff);
        assert_eq!(seq, next[id], "each sender's messages once, in order");
        next[id] += 1;
    }
    assert_eq!(next[0], FROM_TOKIO);
    assert_eq!(&next[1..], &sent_by[1..]);
    sched.cancel(sink.pid()).unwrap();
    await_guarded(sink).unwrap();
    assert!(taken.try_recv().is_err(), "nothing more than was sent");
    sched.shutdown(HANG_GUARD);
}
