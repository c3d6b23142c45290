//! `Addr::send_wait`'s line (`process/mailbox/room.rs`): senders waiting for room in a bounded
//! mailbox are served first come, first served, one waiter per message of room, as tokio's
//! bounded channel hands out its permits — not all woken for any room. A waiter woken for room
//! that gives up passes it on; one whose room went to another sender keeps the front of the
//! line.
//!
//! Each test drives the waiting sends by hand (polled with counting wakers) against a body
//! that takes one message per token it is given, and reports it: every step is observed, none
//! is timed.

mod support;

use procsched::prelude::*;
use std::sync::mpsc;
use std::task::Poll;
use support::polled::Waiting;
use support::HANG_GUARD;

/// A process with a one-message mailbox that takes a message each time it is given a token,
/// and reports it.
struct Taker {
    sched: Scheduler,
    handle: ProcessHandle<(), u64>,
    tokens: tokio::sync::mpsc::UnboundedSender<()>,
    taken: mpsc::Receiver<u64>,
}

impl Taker {
    fn start() -> Taker {
        let sched = Scheduler::builder()
            .workers(1)
            .mailbox_capacity(1)
            .build()
            .unwrap();
        let (tokens, mut token) = tokio::sync::mpsc::unbounded_channel::<()>();
        let (report, taken) = mpsc::channel();
        let handle = sched
            .spawn_fn(move |cx: ProcessCx<u64>| async move {
                while token.recv().await.is_some() {
                    report.send(cx.recv().await?)?;
                }
                Ok::<(), BoxError>(())
            })
            .unwrap();
        Taker {
            sched,
            handle,
            tokens,
            taken,
        }
    }

    fn addr(&self) -> Addr<u64> {
        self.handle.addr()
    }

    /// Lets the body take one message; returns it once taken (the room it made is given out
    /// by then: the receive gives it before it returns).
    fn take_one(&self) -> u64 {
        self.tokens.send(()).unwrap();
        self.taken.recv_timeout(HANG_GUARD).expect("hang guard")
    }

    fn finish(self) {
        drop(self.tokens);
        self.sched.block_on(self.handle).unwrap();
        self.sched.shutdown(HANG_GUARD);
    }
}

#[test]
fn room_for_one_message_wakes_the_first_sender_in_line_only() {
    let taker = Taker::start();
    let addr = taker.addr();
    addr.send(0).unwrap();
    let mut line: Vec<_> = (1..=3).map(|n| Waiting::new(addr.send_wait(n))).collect();
    for waiting in &mut line {
        assert!(waiting.poll().is_pending(), "the mailbox is full");
    }
    for (served, n) in (1..=3).enumerate() {
        assert_eq!(taker.take_one(), n - 1);
        let wakes: Vec<_> = line.iter().map(Waiting::wakes).collect();
        let mut expected = vec![0; 3];
        for woken in expected.iter_mut().take(served + 1) {
            *woken = 1;
        }
        assert_eq!(
            wakes, expected,
            "room for one wakes the first in line, no other"
        );
        // The ones behind, polled again meanwhile, keep their places.
        for waiting in line.iter_mut().skip(served + 1) {
            assert!(waiting.poll().is_pending());
        }
        assert!(line[served].poll().is_ready(), "the woken sender gets in");
    }
    assert_eq!(taker.take_one(), 3);
    taker.finish();
}

#[test]
fn a_woken_sender_that_gives_up_passes_its_room_to_the_next_in_line() {
    let taker = Taker::start();
    let addr = taker.addr();
    addr.send(0).unwrap();
    let mut first = Waiting::new(addr.send_wait(1));
    let mut second = Waiting::new(addr.send_wait(2));
    assert!(first.poll().is_pending());
    assert!(second.poll().is_pending());
    assert_eq!(taker.take_one(), 0);
    assert_eq!((first.wakes(), second.wakes()), (1, 0));
    drop(first);
    assert_eq!(second.wakes(), 1, "the room went on to the next in line");
    assert!(second.poll().is_ready());
    assert_eq!(taker.take_one(), 2, "the sender that gave up sent nothing");
    taker.finish();
}

#[test]
fn a_sender_whose_room_was_taken_by_another_keeps_the_front_of_the_line() {
    let taker = Taker::start();
    let addr = taker.addr();
    addr.send(0).unwrap();
    let mut first = Waiting::new(addr.send_wait(1));
    let mut second = Waiting::new(addr.send_wait(2));
    assert!(first.poll().is_pending());
    assert!(second.poll().is_pending());
    assert_eq!(taker.take_one(), 0);
    assert_eq!(first.wakes(), 1);
    // A plain send takes the room before the woken sender tries again.
    addr.send(9).unwrap();
    assert!(first.poll().is_pending(), "full again");
    assert_eq!(taker.take_one(), 9);
    assert_eq!(
        (first.wakes(), second.wakes()),
        (2, 0),
        "the next room is the first sender's again"
    );
    assert!(first.poll().is_ready());
    assert_eq!(taker.take_one(), 1);
    assert_eq!(second.wakes(), 1);
    assert!(second.poll().is_ready());
    assert_eq!(taker.take_one(), 2);
    taker.finish();
}

#[test]
fn many_senders_from_tokio_behind_a_small_mailbox_each_deliver_everything_once() {
    // The line under load: 64 tokio tasks behind a 4-message mailbox, some giving up halfway
    // through a wait (a `select!` against their own deadline in the real world; here every
    // tenth wait is dropped after one poll). Nothing sent twice, nothing lost, no one stuck.
    const SENDERS: u64 = 64;
    const EACH: u64 = 200;
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(4)
        .build()
        .unwrap();
    let sink = sched
        .spawn_fn(|cx: ProcessCx<(u64, u64)>| async move {
            let mut next = vec![0u64; SENDERS as usize];
            let mut total = 0;
            while total < SENDERS * EACH {
                let (sender, n) = cx.recv().await?;
                assert_eq!(n, next[sender as usize], "sender {sender}'s order");
                next[sender as usize] += 1;
                total += 1;
            }
            Ok::<_, BoxError>(total)
        })
        .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let senders: Vec<_> = (0..SENDERS)
            .map(|sender| {
                let addr = sink.addr();
                tokio::spawn(async move {
                    let mut n = 0;
                    let mut attempt = 0u64;
                    while n < EACH {
                        attempt += 1;
                        let mut waiting = std::pin::pin!(addr.send_wait((sender, n)));
                        if attempt.is_multiple_of(10) {
                            // Gives up after one poll if it had to wait; sent if it did not.
                            if let Poll::Ready(sent) = futures::poll!(&mut waiting) {
                                sent.expect("never refused");
                                n += 1;
                            }
                            continue;
                        }
                        waiting.await.expect("never refused");
                        n += 1;
                    }
                })
            })
            .collect();
        for sender in senders {
            tokio::time::timeout(HANG_GUARD, sender)
                .await
                .expect("hang guard")
                .unwrap();
        }
    });
    assert_eq!(sched.block_on(sink).unwrap(), SENDERS * EACH);
    sched.shutdown(HANG_GUARD);
}
