//! Tens of thousands of calls and asks in flight at once in a body, held by a combinator that
//! gives each future a waker of its own (`FuturesUnordered`): each completes exactly once,
//! with its own answer; dropping the lot abandons every ask still unanswered, and a cancel
//! ends each ask in flight once. (The adapter's bookkeeping scanned every call in flight for
//! every completion: 20 000 asks took seconds, 40 000 half a minute, against milliseconds from
//! tokio code.)

use futures::stream::{FuturesUnordered, StreamExt};
use procsched::error::CommandError;
use procsched::prelude::*;
use std::time::Duration;

/// A hang guard only: a body that loses a completion never finishes.
const GUARD: Duration = Duration::from_secs(60);

const IN_FLIGHT: u64 = 20_000;

struct Double(u64);
procsched::command!(Double => u64);

struct Inc(u64);
procsched::command!(Inc => u64);

/// Awaits `handle` with a hang guard.
fn join<T: Send + 'static, M>(sched: &Scheduler, handle: ProcessHandle<T, M>) -> T {
    sched
        .block_on(async { tokio::time::timeout(GUARD, handle).await })
        .expect("hang guard: the body never finished")
        .unwrap()
}

/// A process answering each `(n, reply)` with `n + 1`.
fn echo(sched: &Scheduler) -> Addr<(u64, Reply<u64>)> {
    sched
        .spawn_fn(|cx: ProcessCx<(u64, Reply<u64>)>| async move {
            loop {
                let (n, reply) = cx.recv().await?;
                let _ = reply.send(n + 1);
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap()
        .addr()
}

/// `answers`, sorted, are `first..first + IN_FLIGHT`: each exactly once.
fn assert_each_once(mut answers: Vec<u64>, first: u64) {
    assert_eq!(answers.len() as u64, IN_FLIGHT);
    answers.sort_unstable();
    assert!(
        answers.iter().copied().eq(first..first + IN_FLIGHT),
        "an answer is missing, repeated or wrong"
    );
}

#[test]
fn twenty_thousand_asks_in_futures_unordered_each_complete_once_with_their_answer() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let workers: Vec<_> = (0..4).map(|_| echo(&sched)).collect();
    let body = sched
        .spawn_fn(move |_: ProcessCx<()>| async move {
            let asks: FuturesUnordered<_> = (0..IN_FLIGHT)
                .map(|n| workers[n as usize % 4].ask(move |reply| (n, reply)))
                .collect();
            let answers: Vec<Result<u64, AskError>> = asks.collect().await;
            answers
                .into_iter()
                .collect::<Result<Vec<u64>, _>>()
                .map_err(BoxError::from)
        })
        .unwrap();
    assert_each_once(join(&sched, body), 1);
    sched.shutdown(GUARD);
}

#[test]
fn twenty_thousand_calls_in_futures_unordered_each_complete_once_with_their_reply() {
    let sched = Scheduler::builder()
        .workers(2)
        .inline_handler(|Double(n): Double| Ok::<_, BoxError>(n * 2))
        .async_handler(|Inc(n): Inc| async move {
            tokio::task::yield_now().await;
            Ok::<_, BoxError>(n + 1)
        })
        .build()
        .unwrap();
    let body = sched
        .spawn_fn(|cx: ProcessCx<()>| async move {
            // Completions arrive one at a time (inline) and in batches (async).
            let calls: FuturesUnordered<_> = (0..IN_FLIGHT)
                .map(|n| {
                    let cx = cx.clone();
                    async move {
                        if n % 2 == 0 {
                            cx.call(Double(n / 2)).await
                        } else {
                            cx.call(Inc(n)).await.map(|m| m - 1)
                        }
                    }
                })
                .collect();
            let replies: Vec<Result<u64, CommandError>> = calls.collect().await;
            replies
                .into_iter()
                .collect::<Result<Vec<u64>, _>>()
                .map_err(BoxError::from)
        })
        .unwrap();
    assert_each_once(join(&sched, body), 0);
    sched.shutdown(GUARD);
}

/// What a holder is asked: to keep a port unanswered, or to answer every kept one.
enum Holder {
    Hold(Reply<u64>),
    /// Answer every kept port; reply `(ports kept, answers handed back)`.
    AnswerAll(Reply<(usize, usize)>),
}

#[test]
fn dropping_thousands_of_asks_in_flight_abandons_every_one() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let holder = sched
        .spawn_fn(|cx: ProcessCx<Holder>| async move {
            let mut kept = Vec::new();
            loop {
                match cx.recv().await? {
                    Holder::Hold(reply) => kept.push(reply),
                    Holder::AnswerAll(report) => {
                        let held = kept.len();
                        let refused = kept
                            .drain(..)
                            .map(|r| r.send(7))
                            .filter(Result::is_err)
                            .count();
                        let _ = report.send((held, refused));
                    }
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap()
        .addr();
    let body = sched
        .spawn_fn(move |_: ProcessCx<()>| async move {
            let mut asks: FuturesUnordered<_> =
                (0..IN_FLIGHT).map(|_| holder.ask(Holder::Hold)).collect();
            // One poll sends every ask; none is answered.
            assert!(futures::poll!(asks.next()).is_pending());
            drop(asks);
            // Behind the holds in the holder's mailbox: answered once it kept them all.
            Ok::<_, BoxError>(holder.ask(Holder::AnswerAll).await?)
        })
        .unwrap();
    let (held, refused) = join(&sched, body);
    assert_eq!(held as u64, IN_FLIGHT, "every ask was sent");
    assert_eq!(
        refused, held,
        "every answer was handed back: its asker gave up"
    );
    sched.shutdown(GUARD);
}

#[test]
fn dropping_thousands_of_asks_whose_answers_wait_in_the_mailbox_hands_none_back() {
    // Answered while the body was busy (its step blocked until the last answer was sent), the
    // answers wait in its mailbox when it drops the asks: delivered while it waited, so none is
    // handed back, and the body carries on (its next ask answered).
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (answered_tx, answered) = std::sync::mpsc::channel::<u64>();
    let refused = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = std::sync::Arc::clone(&refused);
    let answerer = sched
        .spawn_fn(move |cx: ProcessCx<(u64, Reply<u64>)>| async move {
            let mut count = 0;
            loop {
                let (n, reply) = cx.recv().await?;
                if reply.send(n + 1).is_err() {
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                count += 1;
                if count == IN_FLIGHT {
                    let _ = answered_tx.send(count);
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap()
        .addr();
    let body = sched
        .spawn_fn(move |_: ProcessCx<()>| async move {
            let mut asks: FuturesUnordered<_> = (0..IN_FLIGHT)
                .map(|n| answerer.ask(move |r| (n, r)))
                .collect();
            assert!(futures::poll!(asks.next()).is_pending());
            // Blocks this step until every answer is sent: they queue in this mailbox.
            answered
                .recv_timeout(GUARD)
                .expect("hang guard: the answers");
            drop(asks);
            Ok::<_, BoxError>(answerer.ask(|r| (41, r)).await?)
        })
        .unwrap();
    assert_eq!(join(&sched, body), 42, "the body asks on");
    assert_eq!(
        refused.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "an answer queued before its ask was dropped was delivered, not handed back"
    );
    sched.shutdown(GUARD);
}

#[test]
fn a_cancel_ends_thousands_of_asks_in_flight_each_once() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (held_tx, held) = std::sync::mpsc::channel();
    let holder = sched
        .spawn_fn(move |cx: ProcessCx<Holder>| async move {
            let mut kept = Vec::new();
            loop {
                if let Holder::Hold(reply) = cx.recv().await? {
                    kept.push(reply);
                    let _ = held_tx.send(());
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap()
        .addr();
    let body = sched
        .spawn_fn(move |_: ProcessCx<()>| async move {
            let asks: FuturesUnordered<_> =
                (0..IN_FLIGHT).map(|_| holder.ask(Holder::Hold)).collect();
            let ends: Vec<Result<u64, AskError>> = asks.collect().await;
            let cancelled = ends
                .iter()
                .filter(|end| matches!(end, Err(AskError::Cancelled(_))))
                .count();
            Ok::<_, BoxError>((ends.len(), cancelled))
        })
        .unwrap();
    for _ in 0..IN_FLIGHT {
        held.recv_timeout(GUARD)
            .expect("hang guard: an ask never reached the holder");
    }
    sched.handle().cancel(body.pid()).unwrap();
    let (ended, cancelled) = join(&sched, body);
    assert_eq!(ended as u64, IN_FLIGHT, "each ask ended once");
    assert_eq!(cancelled, ended, "each by the cancel");
    sched.shutdown(GUARD);
}
