//! Messages and signals reach an async body's `recv_any` in the order they arrived, as OTP's
//! mailbox delivers a trapped `EXIT` or a `DOWN` behind the messages sent before it: a child
//! that sends its results and then ends is read results first, exit signal (or `Down`) last;
//! a signal that arrived before messages is read before them. Deadlines are hang guards only.

mod supervision_common;

use procsched::prelude::*;
use procsched::supervision::{Incoming, Signal};
use supervision_common::*;

/// Messages a child sends before it ends.
const RESULTS: u32 = 200;
/// Rounds of each race (2 workers: the child and its watcher run side by side).
const ROUNDS: u32 = 50;

/// What a watcher reads, in order.
#[derive(Debug, PartialEq)]
enum Read {
    Result(u32),
    Exit(bool),
    Down(bool),
}

/// A child that waits for its go, sends `RESULTS` numbered results to `to`, then ends: failing
/// if `fail`, else normally.
fn spawn_child(cx: &ProcessCx<u32>, fail: bool) -> ProcessHandle<(), ()> {
    let to = cx.addr();
    cx.scheduler()
        .spawn_fn(move |child: ProcessCx<()>| async move {
            child.recv().await?;
            for n in 0..RESULTS {
                to.send(n)?;
            }
            if fail {
                Err::<(), BoxError>("failed on purpose".into())
            } else {
                Ok(())
            }
        })
        .unwrap()
}

/// Reads with `recv_any` until the first signal, returning everything read.
async fn read_until_signal(cx: &ProcessCx<u32>) -> Result<Vec<Read>, BoxError> {
    let mut read = Vec::new();
    loop {
        match cx.recv_any().await? {
            Incoming::Message(n) => read.push(Read::Result(n)),
            Incoming::Signal(Signal::Exit(exit)) => {
                read.push(Read::Exit(exit.reason.is_failed()));
                return Ok(read);
            }
            Incoming::Signal(Signal::Down(down)) => {
                read.push(Read::Down(down.reason.is_normal()));
                return Ok(read);
            }
            other => return Err(format!("unexpected {other:?}").into()),
        }
    }
}

fn results_then(last: Read) -> Vec<Read> {
    (0..RESULTS).map(Read::Result).chain([last]).collect()
}

#[test]
fn a_linked_child_s_last_messages_come_before_its_exit_signal() {
    let sched = scheduler(2);
    for round in 0..ROUNDS {
        let watcher = sched
            .spawn_fn(|cx: ProcessCx<u32>| async move {
                cx.trap_exit(true);
                let child = spawn_child(&cx, true);
                cx.link(child.pid());
                child.addr().send(())?;
                read_until_signal(&cx).await
            })
            .unwrap();
        let read = run(watcher).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(read, results_then(Read::Exit(true)), "round {round}");
    }
}

#[test]
fn a_monitored_child_s_last_messages_come_before_its_down() {
    let sched = scheduler(2);
    for round in 0..ROUNDS {
        let watcher = sched
            .spawn_fn(|cx: ProcessCx<u32>| async move {
                let child = spawn_child(&cx, false);
                cx.monitor(child.pid());
                child.addr().send(())?;
                read_until_signal(&cx).await
            })
            .unwrap();
        let read = run(watcher).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(read, results_then(Read::Down(true)), "round {round}");
    }
}

#[test]
fn a_signal_that_arrived_before_messages_is_read_before_them() {
    let sched = scheduler(2);
    let (ready_tx, ready) = std::sync::mpsc::channel::<()>();
    let (go_tx, go) = tokio::sync::oneshot::channel::<()>();
    let target = spawn_puppet(sched.handle());
    let target_pid = target.pid();
    let watcher = sched
        .spawn_fn(move |cx: ProcessCx<u32>| async move {
            cx.monitor(target_pid);
            ready_tx.send(())?;
            // Not receiving until told: the Down and then two messages queue meanwhile.
            go.await?;
            let mut read = Vec::new();
            for _ in 0..3 {
                read.push(match cx.recv_any().await? {
                    Incoming::Message(n) => Read::Result(n),
                    Incoming::Signal(Signal::Down(down)) => Read::Down(down.reason.is_normal()),
                    other => return Err(format!("unexpected {other:?}").into()),
                });
            }
            Ok::<_, BoxError>(read)
        })
        .unwrap();
    ready
        .recv_timeout(GUARD)
        .expect("hang guard: the watcher's monitor");
    // A monitor registered after the watcher's fires after the watcher's Down was delivered
    // (a target signals its watches in registration order).
    let after = sched.monitor(target_pid);
    target.addr().send(Cmd::Finish).unwrap();
    assert!(run(after).reason.is_normal());
    watcher.addr().send(1).unwrap();
    watcher.addr().send(2).unwrap();
    go_tx.send(()).unwrap();
    let read = run(watcher).unwrap();
    assert_eq!(
        read,
        vec![Read::Down(true), Read::Result(1), Read::Result(2)]
    );
}
