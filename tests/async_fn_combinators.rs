//! A body's procsched futures inside combinators that give each future a waker of its own —
//! `FuturesUnordered`, `buffer_unordered`, `join_all` past 30 futures — which poll again only
//! the futures whose waker was woken. Calls, asks, receives, signals, `cancelled` and
//! `yield_now` each complete there as they do under `join!` (they waited for ever: a
//! completion re-polled the body, and the combinator skipped the future).

use futures::stream::{self, FuturesUnordered, StreamExt};
use procsched::prelude::*;
use std::time::Duration;

const GUARD: Duration = Duration::from_secs(30);

struct Double(u64);
procsched::command!(Double => u64);

struct Never;
procsched::command!(Never => u64);

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .inline_handler(|Double(n): Double| Ok::<_, BoxError>(n * 2))
        .async_handler(|Never| async {
            std::future::pending::<()>().await;
            Ok::<u64, BoxError>(0)
        })
        .build()
        .unwrap()
}

/// Waits (hang-guarded) until `pid` is parked waiting for mail: `Idle`.
fn wait_parked(sched: &Scheduler, pid: procsched::Pid) {
    let deadline = std::time::Instant::now() + GUARD;
    while sched.state(pid) != Some(ProcessState::Idle) {
        assert!(
            std::time::Instant::now() < deadline,
            "hang guard: {pid} never parked"
        );
        std::thread::yield_now();
    }
}

/// Awaits `handle` with a hang guard.
fn join<T: Send + 'static, M>(sched: &Scheduler, handle: ProcessHandle<T, M>) -> T {
    sched
        .block_on(async { tokio::time::timeout(GUARD, handle).await })
        .expect("hang guard: the body never finished")
        .unwrap()
}

#[test]
fn calls_complete_in_futures_unordered_and_buffer_unordered() {
    let sched = scheduler();
    let body = sched
        .spawn_fn(|cx: ProcessCx<()>| async move {
            let unordered: FuturesUnordered<_> = (0..100).map(|n| cx.call(Double(n))).collect();
            let mut sum: u64 = unordered
                .map(Result::unwrap)
                .collect::<Vec<_>>()
                .await
                .iter()
                .sum();
            sum += stream::iter(0..100)
                .map(|n| cx.call(Double(n)))
                .buffer_unordered(8)
                .map(Result::unwrap)
                .collect::<Vec<_>>()
                .await
                .iter()
                .sum::<u64>();
            // `join_all` past 30 futures polls through `FuturesOrdered`.
            let joined = futures::future::join_all((0..40).map(|n| cx.call(Double(n)))).await;
            sum += joined.into_iter().map(Result::unwrap).sum::<u64>();
            Ok::<_, BoxError>(sum)
        })
        .unwrap();
    assert_eq!(join(&sched, body), 2 * (2 * 4950 + 780));
    sched.shutdown(GUARD);
}

#[test]
fn timed_out_calls_complete_in_futures_unordered() {
    let sched = scheduler();
    let body = sched
        .spawn_fn(|cx: ProcessCx<()>| async move {
            let calls: FuturesUnordered<_> = (0..50)
                .map(|_| cx.call_within(Never, Duration::from_millis(1)))
                .collect();
            let results: Vec<_> = calls.collect().await;
            Ok::<_, BoxError>(results.iter().filter(|r| r.is_err()).count())
        })
        .unwrap();
    assert_eq!(join(&sched, body), 50);
    sched.shutdown(GUARD);
}

#[test]
fn asks_complete_in_futures_unordered() {
    let sched = scheduler();
    let answerer = sched
        .spawn_fn(|cx: ProcessCx<(u64, Reply<u64>)>| async move {
            loop {
                let (n, reply) = cx.recv().await?;
                let _ = reply.send(n + 1);
            }
            #[allow(unreachable_code)]
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let to = answerer.addr();
    let body = sched
        .spawn_fn(move |_: ProcessCx<()>| async move {
            let asks: FuturesUnordered<_> = (0..64).map(|n| to.ask(move |r| (n, r))).collect();
            let answers: Vec<u64> = asks.map(Result::unwrap).collect().await;
            Ok::<_, BoxError>(answers.iter().sum::<u64>())
        })
        .unwrap();
    assert_eq!(join(&sched, body), (1..=64).sum::<u64>());
    sched.shutdown(GUARD);
}

#[test]
fn receives_signals_and_yields_complete_in_futures_unordered() {
    let sched = scheduler();
    let body = sched
        .spawn_fn(|cx: ProcessCx<u64>| async move {
            // A receive alone in its set: woken by the message that arrives later.
            let mut set = FuturesUnordered::new();
            set.push(cx.recv());
            let first = set.next().await.unwrap()?;
            // A monitor's `Down`, a yield and a receive in one set.
            let child = cx.spawn_fn(|_: ProcessCx<()>| async { Ok::<_, BoxError>(()) })?;
            cx.monitor(child.pid());
            let mut set: FuturesUnordered<
                std::pin::Pin<Box<dyn std::future::Future<Output = u64> + Send + '_>>,
            > = FuturesUnordered::new();
            set.push(Box::pin(async {
                cx.recv_down().await.map(|_| 10).unwrap_or(0)
            }));
            set.push(Box::pin(async {
                cx.yield_now().await;
                100
            }));
            set.push(Box::pin(async { cx.recv().await.unwrap_or(0) }));
            let mut sum = first;
            while let Some(n) = set.next().await {
                sum += n;
            }
            Ok::<_, BoxError>(sum)
        })
        .unwrap();
    let addr = body.addr();
    addr.send(1).unwrap();
    addr.send(1000).unwrap();
    assert_eq!(join(&sched, body), 1111);
    sched.shutdown(GUARD);
}

#[test]
fn cancelled_completes_in_futures_unordered() {
    let sched = scheduler();
    let (started_tx, started) = std::sync::mpsc::channel();
    let body = sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            let mut set = FuturesUnordered::new();
            set.push(cx.cancelled());
            started_tx.send(()).unwrap();
            match set.next().await {
                Some(Err(why)) if why.is_cancelled() => Ok::<_, BoxError>("cancelled"),
                other => Err(format!("{other:?}").into()),
            }
        })
        .unwrap();
    started.recv_timeout(GUARD).unwrap();
    let pid = body.pid();
    // It waits for mail (the cancel): `Idle`, as a receive awaited directly would be.
    wait_parked(&sched, pid);
    sched.handle().cancel(pid).unwrap();
    assert_eq!(join(&sched, body), "cancelled");
    sched.shutdown(GUARD);
}

#[test]
fn a_receive_in_a_combinator_made_per_turn_gets_the_message_that_finally_comes() {
    // A new `FuturesUnordered` per turn, dropped when the other branch is ready first: the
    // adapter keeps each receive's waker until mail arrives (flushing a long list, whose
    // receives may be gone: `state.rs`), and the message that finally comes is received.
    let sched = scheduler();
    let (turns_tx, turns) = std::sync::mpsc::channel::<u32>();
    let body = sched
        .spawn_fn(move |cx: ProcessCx<u64>| async move {
            for turn in 0u32.. {
                let mut set = FuturesUnordered::new();
                set.push(cx.recv());
                tokio::select! {
                    received = set.next() => return Ok::<_, BoxError>((turn, received.unwrap()?)),
                    () = tokio::task::yield_now() => {}
                }
                let _ = turns_tx.send(turn);
            }
            unreachable!()
        })
        .unwrap();
    // Many turns without mail, then the message.
    for _ in 0..1_000 {
        turns.recv_timeout(GUARD).expect("hang guard: a turn");
    }
    body.addr().send(7).unwrap();
    let (_, received) = join(&sched, body);
    assert_eq!(received, 7);
    sched.shutdown(GUARD);
}

#[test]
fn many_receives_waiting_in_one_combinator_let_the_body_park() {
    // 100 live receives with wakers of their own: more than the adapter keeps before it wakes
    // them unasked, and they register again — the body must still park (`Idle`) between
    // messages rather than be woken step after step.
    let sched = scheduler();
    let body = sched
        .spawn_fn(|cx: ProcessCx<u64>| async move {
            let receives: FuturesUnordered<_> = (0..100).map(|_| cx.recv()).collect();
            let received: Vec<u64> = receives.map(Result::unwrap).collect().await;
            Ok::<_, BoxError>(received.iter().sum::<u64>())
        })
        .unwrap();
    let pid = body.pid();
    let addr = body.addr();
    for n in 1..=100u64 {
        wait_parked(&sched, pid);
        addr.send(n).unwrap();
    }
    assert_eq!(join(&sched, body), 5050);
    sched.shutdown(GUARD);
}

#[test]
fn a_receive_waiting_beside_mail_it_does_not_take_lets_the_body_park() {
    // A `recv_down` in a set, and a message it does not take: the body must park, not be
    // woken step after step for mail that is not its receive's (it spun at 100 % CPU).
    let sched = scheduler();
    let child = sched
        .spawn_fn(|cx: ProcessCx<()>| async move { Ok::<_, BoxError>(cx.recv().await?) })
        .unwrap();
    let child_pid = child.pid();
    let body = sched
        .spawn_fn(move |cx: ProcessCx<u64>| async move {
            cx.monitor(child_pid);
            let mut set = FuturesUnordered::new();
            set.push(cx.recv_down());
            let down = set.next().await.unwrap()?;
            // The message still waits for a receive.
            Ok::<_, BoxError>((down.pid, cx.recv().await?))
        })
        .unwrap();
    let pid = body.pid();
    body.addr().send(7).unwrap();
    wait_parked(&sched, pid);
    child.addr().send(()).unwrap();
    assert_eq!(join(&sched, body), (child_pid, 7));
    sched.shutdown(GUARD);
}
