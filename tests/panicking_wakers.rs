//! A waker procsched does not own — a sender's task waiting for room, an asker's — may panic
//! when procsched wakes it. The panic is contained where the wake happens: the process whose
//! `close` or drain woke the senders finishes as it would have (its handle, its monitors, its
//! name, the metrics all say so), the other waiters are still woken, and a body whose answer
//! woke a broken asker goes on.

mod support;

use procsched::prelude::*;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use support::HANG_GUARD;

/// A waker that counts its wakes, and panics on each if `broken`.
struct Counting {
    wakes: AtomicUsize,
    broken: bool,
}

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Relaxed);
        assert!(!self.broken, "a broken waker");
    }
}

fn waker(broken: bool) -> (Arc<Counting>, Waker) {
    let counting = Arc::new(Counting {
        wakes: AtomicUsize::new(0),
        broken,
    });
    (counting.clone(), Waker::from(counting))
}

/// Waits until `counting` was woken (a hang guard names `what` if it never is).
fn wait_for_wake(counting: &Counting, what: &str) {
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while counting.wakes.load(Relaxed) == 0 {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::yield_now();
    }
}

/// Polls `future` once with `waker`.
fn poll_once<F: Future>(future: std::pin::Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(waker))
}

/// Two senders wait for room in a full mailbox, the first with a waker that panics; the
/// process then ends (`end`: 0 returns, 1 is terminated). Whatever ended it, it ends whole.
fn senders_waiting_as_their_process_ends(end: u8) {
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(1)
        .build()
        .unwrap();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let receiver = sched
        .spawn_fn(move |_cx: ProcessCx<u32>| async move {
            // Never reads its mailbox: it stays full.
            let _ = released.await;
            Ok::<_, BoxError>(7u32)
        })
        .unwrap();
    let pid = receiver.pid();
    let addr = receiver.addr();
    sched.register("receiver", pid).unwrap();
    let down = sched.monitor(pid);
    addr.send(0).unwrap();
    let (broken, broken_waker) = waker(true);
    let (sound, sound_waker) = waker(false);
    let mut first = pin!(addr.send_wait(1));
    let mut second = pin!(addr.send_wait(2));
    assert!(poll_once(first.as_mut(), &broken_waker).is_pending());
    assert!(poll_once(second.as_mut(), &sound_waker).is_pending());

    match end {
        0 => release.send(()).unwrap(),
        _ => sched.terminate(pid).unwrap(),
    }
    let outcome = sched.block_on(async {
        tokio::time::timeout(HANG_GUARD, receiver)
            .await
            .expect("hang guard: the handle")
    });
    match end {
        0 => assert_eq!(outcome.unwrap(), 7),
        _ => assert!(outcome.unwrap_err().is_terminated()),
    }
    let down = sched.block_on(async {
        tokio::time::timeout(HANG_GUARD, down)
            .await
            .expect("hang guard: the monitor's Down")
    });
    assert!(!down.reason.is_panicked(), "{:?}", down.reason);
    assert_eq!(sched.whereis("receiver"), None, "its name went with it");
    assert_eq!(broken.wakes.load(Relaxed), 1, "the broken waker was woken");
    assert_eq!(
        sound.wakes.load(Relaxed),
        1,
        "the sender after it was woken too"
    );
    let refused = poll_once(second.as_mut(), &sound_waker);
    assert!(
        matches!(&refused, Poll::Ready(Err(error)) if error.is_not_found()),
        "{refused:?}"
    );
    let finished = sched.metrics().finished;
    assert_eq!(finished.panicked + finished.forced, 0, "{finished:?}");
    let report = sched.shutdown(HANG_GUARD);
    assert!(report.is_complete(), "{report:?}");
}

#[test]
fn a_panicking_sender_waker_woken_by_a_returning_process_leaves_it_finished_whole() {
    senders_waiting_as_their_process_ends(0);
}

#[test]
fn a_panicking_sender_waker_woken_by_a_terminated_process_leaves_it_finished_whole() {
    senders_waiting_as_their_process_ends(1);
}

#[test]
fn a_drain_that_wakes_a_panicking_sender_waker_does_not_fail_the_draining_body() {
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(1)
        .build()
        .unwrap();
    let (go, gone) = tokio::sync::oneshot::channel::<()>();
    let receiver = sched
        .spawn_fn(move |cx: ProcessCx<u32>| async move {
            let _ = gone.await;
            let mut sum = 0;
            for _ in 0..3 {
                sum += cx.recv().await?;
            }
            Ok::<_, BoxError>(sum)
        })
        .unwrap();
    let addr = receiver.addr();
    addr.send(1).unwrap();
    let (broken, broken_waker) = waker(true);
    let (sound, sound_waker) = waker(false);
    let mut first = pin!(addr.send_wait(2));
    let mut second = pin!(addr.send_wait(4));
    assert!(poll_once(first.as_mut(), &broken_waker).is_pending());
    assert!(poll_once(second.as_mut(), &sound_waker).is_pending());
    go.send(()).unwrap();
    // The body drains 1 (room: the first waiter, whose waker panics, is woken). It is not
    // polled again by its broken waker, so the test polls it, as a working executor would.
    wait_for_wake(&broken, "hang guard: no room");
    assert!(matches!(
        poll_once(first.as_mut(), &broken_waker),
        Poll::Ready(Ok(()))
    ));
    wait_for_wake(&sound, "hang guard: no room");
    assert!(matches!(
        poll_once(second.as_mut(), &sound_waker),
        Poll::Ready(Ok(()))
    ));
    let sum = sched.block_on(async {
        tokio::time::timeout(HANG_GUARD, receiver)
            .await
            .expect("hang guard")
    });
    assert_eq!(sum.unwrap(), 7, "the body drained all three");
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_body_whose_answer_wakes_a_panicking_asker_waker_goes_on() {
    enum Request {
        Get(Reply<u32>),
    }
    // No spin: the first poll must register the waker for the answer to wake.
    let sched = Scheduler::builder()
        .workers(2)
        .spin_waits(false)
        .build()
        .unwrap();
    let server = sched
        .spawn_fn(|cx: ProcessCx<Request>| async move {
            let mut answered = 0;
            for n in 0..2 {
                let Request::Get(reply) = cx.recv().await?;
                if reply.send(n).is_ok() {
                    answered += 1;
                }
            }
            Ok::<_, BoxError>(answered)
        })
        .unwrap();
    let addr = server.addr();
    let (broken, broken_waker) = waker(true);
    let mut broken_ask = pin!(addr.ask(Request::Get));
    assert!(poll_once(broken_ask.as_mut(), &broken_waker).is_pending());
    wait_for_wake(&broken, "hang guard: no answer");
    assert!(matches!(
        poll_once(broken_ask.as_mut(), &broken_waker),
        Poll::Ready(Ok(0))
    ));
    let second = sched.block_on(async {
        tokio::time::timeout(HANG_GUARD, addr.ask(Request::Get))
            .await
            .expect("hang guard: the second ask")
    });
    assert_eq!(second.unwrap(), 1, "the server lived on");
    let answered = sched.block_on(async {
        tokio::time::timeout(HANG_GUARD, server)
            .await
            .expect("hang guard")
    });
    assert_eq!(answered.unwrap(), 2);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn room_made_for_a_sender_whose_waker_panicked_goes_to_the_next_in_line() {
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(1)
        .build()
        .unwrap();
    let (go, gone) = tokio::sync::oneshot::channel::<()>();
    let receiver = sched
        .spawn_fn(move |cx: ProcessCx<u32>| async move {
            let _ = gone.await;
            let first = cx.recv().await?;
            // Holds on: the one message it took made the room, which is all there is.
            let _ = cx.cancelled().await;
            Ok::<_, BoxError>(first)
        })
        .unwrap();
    let addr = receiver.addr();
    addr.send(1).unwrap();
    let (broken, broken_waker) = waker(true);
    let (sound, sound_waker) = waker(false);
    let mut first = pin!(addr.send_wait(2));
    let mut second = pin!(addr.send_wait(3));
    assert!(poll_once(first.as_mut(), &broken_waker).is_pending());
    assert!(poll_once(second.as_mut(), &sound_waker).is_pending());
    go.send(()).unwrap();
    // The first sender's task will never run (its waker broke): its room goes on.
    wait_for_wake(
        &sound,
        "hang guard: room made, the sender behind the broken one never woken",
    );
    assert_eq!(broken.wakes.load(Relaxed), 1);
    assert!(matches!(
        poll_once(second.as_mut(), &sound_waker),
        Poll::Ready(Ok(()))
    ));
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_panicking_waker_leaves_the_deadline_timer_running() {
    enum Request {
        Hold(Reply<u32>),
    }
    // No spin on the ask's first poll: a spin that lost its core under load for longer than
    // the timeout saw the deadline pass and returned `TimedOut` from that poll, before the
    // broken waker was ever registered.
    let sched = Scheduler::builder()
        .workers(1)
        .spin_waits(false)
        .build()
        .unwrap();
    let server = sched
        .spawn_fn(|cx: ProcessCx<Request>| async move {
            let mut held = Vec::new();
            loop {
                let Request::Hold(reply) = cx.recv().await?;
                held.push(reply);
            }
            #[allow(unreachable_code)]
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let addr = server.addr();
    // An ask whose timer fires into a broken waker (the process-wide deadline thread wakes it).
    let (broken, broken_waker) = waker(true);
    let mut broken_ask = pin!(addr.ask_within(std::time::Duration::from_millis(20), Request::Hold));
    assert!(poll_once(broken_ask.as_mut(), &broken_waker).is_pending());
    wait_for_wake(&broken, "hang guard: no timeout");
    // A later ask's deadline still fires: driven by an executor with no timer of its own, so
    // only the deadline thread can end it.
    let (done, finished) = std::sync::mpsc::channel();
    let later = addr.clone();
    std::thread::spawn(move || {
        let outcome = futures::executor::block_on(
            later.ask_within(std::time::Duration::from_millis(10), Request::Hold),
        );
        let _ = done.send(outcome.map_err(|error| error.is_timed_out()));
    });
    let outcome = finished
        .recv_timeout(HANG_GUARD)
        .expect("hang guard: the deadline thread died with the broken waker");
    assert_eq!(outcome, Err(true), "the later ask timed out");
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_shutdown_waiter_whose_waker_panics_does_not_break_the_last_finish() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    // Hears its cancel, then finishes once released: the last process, whose finish wakes the
    // shutdown's waiters.
    let last = sched
        .spawn_fn(move |cx: ProcessCx<u32>| async move {
            let _ = cx.cancelled().await;
            let _ = released.await;
            Ok::<_, BoxError>(7u32)
        })
        .unwrap();
    let pid = last.pid();
    sched.register("last", pid).unwrap();
    let down = sched.monitor(pid);
    let (broken, broken_waker) = waker(true);
    let mut broken_shutdown = Box::pin(sched.shutdown_async(HANG_GUARD));
    assert!(poll_once(broken_shutdown.as_mut(), &broken_waker).is_pending());
    release.send(()).unwrap();
    let outcome = sched.block_on(async {
        tokio::time::timeout(HANG_GUARD, last)
            .await
            .expect("hang guard: the handle")
    });
    assert_eq!(outcome.unwrap(), 7, "it finished whole, not panicked");
    let down = sched.block_on(async {
        tokio::time::timeout(HANG_GUARD, down)
            .await
            .expect("hang guard: the Down")
    });
    // Asked to finish by the shutdown, it did.
    assert!(down.reason.is_shutdown(), "{:?}", down.reason);
    assert_eq!(sched.whereis("last"), None, "its name went with it");
    assert_eq!(broken.wakes.load(Relaxed), 1);
    // The broken waiter's task will not poll its shutdown again: dropped, another caller's
    // shutdown completes.
    drop(broken_shutdown);
    let report = sched.shutdown(HANG_GUARD);
    assert_eq!(report.abandoned, 0, "{report:?}");
}
