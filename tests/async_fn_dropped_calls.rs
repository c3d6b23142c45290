//! A body's call dropped before it completes — the losing branch of a `select!`, a timeout —
//! aborts its async handler's task, as a dropped `Run` aborts its task: the handler's future is
//! dropped while the process lives on, and the forgotten call's completion reaches no future.
//! (The task ran on until the process ended: a long-lived process that raced calls against
//! other work piled up handler tasks, and its steps slowed with their number.)

use futures::future::{self, Either};
use procsched::prelude::*;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const GUARD: Duration = Duration::from_secs(20);

/// A handler that never completes; its future holds a [`Guard`].
struct Hang;
procsched::command!(Hang => u64);

struct Double(u64);
procsched::command!(Double => u64);

/// Blocks its thread until the test opens the gate.
struct Gated;
procsched::command!(Gated => Counted);

/// Tells the test when it is dropped.
struct Guard(Sender<()>);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

/// A blocking handler's reply that tells the test when it is dropped.
struct Counted(#[allow(dead_code)] Guard);

/// A scheduler whose `Hang` handler tells `started` when it runs and `dropped` when its future
/// is dropped, and whose `Gated` handler tells `started`, waits for `gate`, then replies with
/// a `Counted` that tells `replies_dropped`.
struct Setup {
    sched: Scheduler,
    started: Receiver<()>,
    dropped: Receiver<()>,
    gate: Sender<()>,
    replies_dropped: Receiver<()>,
}

fn setup() -> Setup {
    let (started_tx, started) = mpsc::channel();
    let (dropped_tx, dropped) = mpsc::channel();
    let (gate, gate_rx) = mpsc::channel::<()>();
    let (replies_tx, replies_dropped) = mpsc::channel();
    let gated_started = Mutex::new(started_tx.clone());
    let (started_tx, dropped_tx) = (Mutex::new(started_tx), Mutex::new(dropped_tx));
    let gate_rx = Mutex::new(gate_rx);
    let replies_tx = Mutex::new(replies_tx);
    let sched = Scheduler::builder()
        .workers(2)
        .inline_handler(|Double(n): Double| Ok::<_, BoxError>(n * 2))
        .async_handler(move |Hang| {
            let guard = Guard(dropped_tx.lock().unwrap().clone());
            let _ = started_tx.lock().unwrap().send(());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok::<u64, BoxError>(0)
            }
        })
        .blocking_handler(move |Gated| {
            let _ = gated_started.lock().unwrap().send(());
            gate_rx
                .lock()
                .unwrap()
                .recv_timeout(GUARD)
                .map_err(|_| "hang guard: the gate never opened")?;
            Ok::<_, BoxError>(Counted(Guard(replies_tx.lock().unwrap().clone())))
        })
        .build()
        .unwrap();
    Setup {
        sched,
        started,
        dropped,
        gate,
        replies_dropped,
    }
}

/// Polls `call` once (which dispatches it), lets the body yield, and drops the call unfinished.
async fn race_and_drop<F: std::future::Future + Unpin>(cx: &ProcessCx<u64>, call: F) {
    let yielded = std::pin::pin!(cx.yield_now());
    match future::select(call, yielded).await {
        Either::Left(_) => panic!("the call completed"),
        Either::Right(_) => {}
    }
}

/// Waits (hang-guarded) until `pid` has no async or blocking yield outstanding.
fn wait_no_outstanding(sched: &Scheduler, pid: procsched::Pid) {
    let deadline = Instant::now() + GUARD;
    while sched
        .handle()
        .process_info(pid)
        .expect("live")
        .outstanding_yields
        != 0
    {
        assert!(Instant::now() < deadline, "hang guard: yields outstanding");
        std::thread::yield_now();
    }
}

fn join<T: Send + 'static, M>(sched: &Scheduler, handle: ProcessHandle<T, M>) -> T {
    sched
        .block_on(async { tokio::time::timeout(GUARD, handle).await })
        .expect("hang guard: the body never finished")
        .unwrap()
}

#[test]
fn a_dropped_call_aborts_its_async_handler_while_the_process_lives() {
    let setup = setup();
    let sched = &setup.sched;
    let body = sched
        .spawn_fn(|cx: ProcessCx<u64>| async move {
            race_and_drop(&cx, cx.call(Hang)).await;
            race_and_drop(&cx, cx.call_within(Hang, Duration::from_secs(3600))).await;
            // Alive, waiting for mail: the test sees both handlers' futures dropped meanwhile.
            let n = cx.recv().await?;
            // A later call gets its own reply: the forgotten calls' completions reach no one.
            Ok::<_, BoxError>(cx.call(Double(n)).await?)
        })
        .unwrap();
    for _ in 0..2 {
        setup.started.recv_timeout(GUARD).expect("the handler ran");
        setup
            .dropped
            .recv_timeout(GUARD)
            .expect("the dropped call's handler future was dropped while its process lived");
    }
    assert!(sched.state(body.pid()).is_some(), "the process is alive");
    wait_no_outstanding(sched, body.pid());
    body.addr().send(21).unwrap();
    assert_eq!(join(sched, body), 42);
    sched.shutdown(GUARD);
}

#[test]
fn calls_dropped_round_after_round_leave_no_handler_behind() {
    let setup = setup();
    let sched = &setup.sched;
    const ROUNDS: usize = 500;
    let body = sched
        .spawn_fn(|cx: ProcessCx<u64>| async move {
            for _ in 0..ROUNDS {
                race_and_drop(&cx, cx.call(Hang)).await;
            }
            let n = cx.recv().await?;
            Ok::<_, BoxError>(cx.call(Double(n)).await?)
        })
        .unwrap();
    for round in 0..ROUNDS {
        setup
            .dropped
            .recv_timeout(GUARD)
            .unwrap_or_else(|_| panic!("round {round}: the handler future outlived its call"));
    }
    wait_no_outstanding(sched, body.pid());
    body.addr().send(1).unwrap();
    assert_eq!(join(sched, body), 2);
    assert_eq!(setup.started.try_iter().count(), ROUNDS);
    sched.shutdown(GUARD);
}

#[test]
fn a_dropped_calls_blocking_handler_runs_to_its_end_and_its_reply_is_dropped() {
    let setup = setup();
    let sched = &setup.sched;
    let (call_dropped, call_dropped_rx) = mpsc::channel::<()>();
    let body = sched
        .spawn_fn(move |cx: ProcessCx<u64>| async move {
            let mut call = cx.call(Gated);
            let yielded = std::pin::pin!(cx.yield_now());
            if let Either::Left(_) = future::select(&mut call, yielded).await {
                panic!("the call completed");
            }
            // Dropped once its handler runs on its thread (the test says so with a message).
            cx.recv().await?;
            drop(call);
            call_dropped.send(()).unwrap();
            let n = cx.recv().await?;
            Ok::<_, BoxError>(cx.call(Double(n)).await?)
        })
        .unwrap();
    setup.started.recv_timeout(GUARD).expect("the handler ran");
    body.addr().send(0).unwrap();
    call_dropped_rx
        .recv_timeout(GUARD)
        .expect("the call was dropped");
    // Not abortable: it runs to its end, and its reply is dropped on arrival.
    setup.gate.send(()).unwrap();
    setup
        .replies_dropped
        .recv_timeout(GUARD)
        .expect("the forgotten call's reply was dropped");
    wait_no_outstanding(sched, body.pid());
    body.addr().send(4).unwrap();
    assert_eq!(join(sched, body), 8);
    sched.shutdown(GUARD);
}
