//! `Addr::send_wait`: a send that waits for room in a bounded mailbox instead of handing the
//! message back `MailboxFull` — from tokio tasks, plain threads' executors and process bodies,
//! to an `async fn` body (whose inbox counts against the capacity) and to a state machine.
//! Every message arrives exactly once, in each sender's order; a send waiting when its process
//! ends fails typed, never hangs.

mod support;

use procsched::error::SendErrorKind;
use procsched::prelude::*;
use procsched::state_machine::{Event, Events, Process, StepOutput};
use support::{join_typed, HANG_GUARD};

const SENDERS: u64 = 4;
const EACH: u64 = 5_000;

/// A body that receives `SENDERS * EACH` `(sender, n)` pairs and checks each sender's order.
fn counting_sink(sched: &Scheduler) -> ProcessHandle<u64, (u64, u64)> {
    sched
        .spawn_fn(|cx: ProcessCx<(u64, u64)>| async move {
            let mut next = vec![0; SENDERS as usize];
            for _ in 0..SENDERS * EACH {
                let (sender, n) = cx.recv().await?;
                assert_eq!(n, next[sender as usize], "sender {sender}'s order");
                next[sender as usize] += 1;
            }
            Ok::<_, BoxError>(next.iter().sum())
        })
        .unwrap()
}

#[test]
fn senders_from_tokio_wait_for_room_and_every_message_arrives_once_in_order() {
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(4)
        .build()
        .unwrap();
    let sink = counting_sink(&sched);
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
                    for n in 0..EACH {
                        addr.send_wait((sender, n)).await.expect("never refused");
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
    assert_eq!(join_typed(sink).unwrap(), SENDERS * EACH);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn senders_in_process_bodies_and_on_plain_threads_wait_for_room() {
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(1)
        .build()
        .unwrap();
    let sink = counting_sink(&sched);
    let mut bodies = Vec::new();
    let mut threads = Vec::new();
    for sender in 0..SENDERS {
        let addr = sink.addr();
        if sender % 2 == 0 {
            bodies.push(
                sched
                    .spawn_fn(move |_: ProcessCx<()>| async move {
                        for n in 0..EACH {
                            addr.send_wait((sender, n)).await?;
                        }
                        Ok::<_, BoxError>(())
                    })
                    .unwrap(),
            );
        } else {
            // Another executor, no tokio.
            threads.push(std::thread::spawn(move || {
                futures::executor::block_on(async {
                    for n in 0..EACH {
                        addr.send_wait((sender, n)).await.expect("never refused");
                    }
                })
            }));
        }
    }
    for body in bodies {
        join_typed(body).unwrap();
    }
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(join_typed(sink).unwrap(), SENDERS * EACH);
    sched.shutdown(HANG_GUARD);
}

/// A state machine that takes one message per step and ends after `left` of them.
struct Taker {
    left: u64,
}

impl Process for Taker {
    type Output = u64;

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        while let Some(event) = events.pop() {
            if let Event::Message(_) = event {
                self.left -= 1;
            }
        }
        if self.left == 0 {
            out.done(0);
        } else {
            out.idle();
        }
        Ok(())
    }
}

#[test]
fn a_state_machine_that_drains_its_mailbox_wakes_the_waiting_senders() {
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(2)
        .build()
        .unwrap();
    let taker = sched
        .spawn(Taker { left: 10_000 }, "run", Payload::empty())
        .unwrap();
    let addr = sched.addr::<u64>(taker.pid());
    sched
        .block_on(async {
            for n in 0..10_000 {
                addr.send_wait(n).await?;
            }
            Ok::<_, BoxError>(())
        })
        .unwrap();
    join_typed(taker).unwrap();
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_send_waiting_when_its_process_ends_fails_typed_with_the_message_back() {
    let sched = Scheduler::builder()
        .workers(1)
        .mailbox_capacity(1)
        .build()
        .unwrap();
    // Receives nothing: one message fills its mailbox.
    let holder = sched
        .spawn_fn(|cx: ProcessCx<u64>| async move {
            let Err(cancelled) = cx.cancelled().await;
            Err::<(), BoxError>(cancelled.into())
        })
        .unwrap();
    let addr = holder.addr();
    addr.send(1).unwrap();
    assert_eq!(addr.send(2).unwrap_err().kind(), SendErrorKind::MailboxFull);
    futures::executor::block_on(async {
        let mut waiting = std::pin::pin!(addr.send_wait(2));
        assert!(
            futures::poll!(&mut waiting).is_pending(),
            "the mailbox is full"
        );
        sched.terminate(holder.pid()).unwrap();
        let refused = waiting.await.unwrap_err();
        assert!(
            matches!(
                refused.kind(),
                SendErrorKind::NotFound | SendErrorKind::Closed
            ),
            "{refused}"
        );
        assert_eq!(refused.into_message(), Some(2), "handed back");
    });
    assert!(sched.block_on(holder).unwrap_err().is_terminated());
    sched.shutdown(HANG_GUARD);
}

#[test]
fn a_dropped_waiting_send_sent_nothing_and_a_task_waits_with_one_waker() {
    let sched = Scheduler::builder()
        .workers(1)
        .mailbox_capacity(1)
        .build()
        .unwrap();
    let (go_tx, go) = tokio::sync::oneshot::channel::<()>();
    let sink = sched
        .spawn_fn(move |cx: ProcessCx<u64>| async move {
            let _ = go.await;
            let mut got = Vec::new();
            while got.len() < 2 {
                got.push(cx.recv().await?);
            }
            Ok::<_, BoxError>(got)
        })
        .unwrap();
    let addr = sink.addr();
    addr.send(1).unwrap();
    futures::executor::block_on(async {
        // Given up on a thousand times while the mailbox is full: nothing is sent.
        for n in 100..1_100 {
            let mut waiting = std::pin::pin!(addr.send_wait(n));
            assert!(futures::poll!(&mut waiting).is_pending());
        }
        let mut last = std::pin::pin!(addr.send_wait(2));
        assert!(futures::poll!(&mut last).is_pending());
        go_tx.send(()).unwrap();
        last.await.unwrap();
    });
    assert_eq!(join_typed(sink).unwrap(), [1, 2]);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn under_capacity_zero_a_waiting_send_is_mailbox_full_at_once() {
    // No room will ever be made: waiting for it would be waiting for the process's end.
    let sched = Scheduler::builder()
        .workers(1)
        .mailbox_capacity(0)
        .build()
        .unwrap();
    let process = sched
        .spawn_fn(|cx: ProcessCx<u64>| async move {
            let _ = cx.cancelled().await;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let refused = sched.block_on(async {
        tokio::time::timeout(HANG_GUARD, process.addr().send_wait(7))
            .await
            .expect("hang guard: send_wait waited for room that never comes")
    });
    let error = refused.unwrap_err();
    assert!(error.is_mailbox_full(), "{error:?}");
    assert_eq!(error.into_message(), Some(7), "the message comes back");
    sched.shutdown(HANG_GUARD);
}
