//! `process_info` shows what an `async fn` body holds unread: the messages a step moved out of
//! its mailbox into its inbox (`unread_messages`), and the exit signals and `Down`s kept in its
//! signal queue until received (`unread_signals`). Both were invisible: `mailbox_depth` counts
//! only what waits in the mailbox, so a body that traps exits but only calls `recv` kept every
//! signal while every figure said 0.

use procsched::prelude::*;
use std::time::{Duration, Instant};

const GUARD: Duration = Duration::from_secs(20);
const MESSAGES: usize = 5;
const EXITS: usize = 3;
const DOWNS: usize = 4;

/// Waits (hang-guarded) until `pid`'s `process_info` satisfies `done`.
fn wait_info(
    sched: &Scheduler,
    pid: procsched::Pid,
    what: &str,
    done: impl Fn(&procsched::metrics::ProcessInfo) -> bool,
) {
    let deadline = Instant::now() + GUARD;
    loop {
        let info = sched.handle().process_info(pid).expect("live");
        if done(&info) {
            return;
        }
        assert!(Instant::now() < deadline, "hang guard: {what}: {info:?}");
        std::thread::yield_now();
    }
}

fn held(info: &procsched::metrics::ProcessInfo) -> (usize, usize) {
    (info.unread_messages, info.unread_signals)
}

fn held_counts_are_shown(capacity: Option<usize>) {
    let mut builder = Scheduler::builder();
    builder.workers(2);
    if let Some(capacity) = capacity {
        builder.mailbox_capacity(capacity);
    }
    let sched = builder.build().unwrap();
    let (open, gate) = tokio::sync::oneshot::channel::<()>();
    let body = sched
        .spawn_fn(move |cx: ProcessCx<u64>| async move {
            cx.trap_exit(true);
            for _ in 0..EXITS {
                cx.spawn_link(|_: ProcessCx<()>| async { Err::<(), BoxError>("boom".into()) })?;
            }
            for _ in 0..DOWNS {
                let child = cx.spawn_fn(|_: ProcessCx<()>| async { Ok::<(), BoxError>(()) })?;
                cx.monitor(child.pid());
            }
            // Busy with something else (a future outside procsched): messages and signals
            // arrive, each step files them, nothing receives them.
            gate.await?;
            let mut sum = 0;
            for _ in 0..MESSAGES {
                sum += cx.recv().await?;
            }
            for _ in 0..EXITS + DOWNS {
                cx.recv_signal().await?;
            }
            // Everything received: the last message is what ends the body.
            sum += cx.recv().await?;
            Ok::<_, BoxError>(sum)
        })
        .unwrap();
    let pid = body.pid();
    for n in 1..=MESSAGES as u64 {
        body.addr().send(n).unwrap();
    }
    wait_info(&sched, pid, "held", |info| {
        held(info) == (MESSAGES, EXITS + DOWNS)
    });
    let info = sched.handle().process_info(pid).unwrap();
    assert_eq!(
        info.mailbox_depth, 0,
        "all taken from the mailbox: {info:?}"
    );
    open.send(()).unwrap();
    wait_info(&sched, pid, "received", |info| {
        held(info) == (0, 0) && info.state == ProcessState::Idle
    });
    body.addr().send(100).unwrap();
    let sum = sched
        .block_on(async { tokio::time::timeout(GUARD, body).await })
        .expect("hang guard: the body never finished")
        .unwrap();
    assert_eq!(sum, 115);
    sched.shutdown(GUARD);
}

#[test]
fn process_info_shows_the_messages_and_signals_a_body_holds_unread() {
    held_counts_are_shown(None);
}

#[test]
fn a_bounded_mailbox_shows_them_too() {
    held_counts_are_shown(Some(64));
}
