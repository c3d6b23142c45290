//! Work queued by a task (or process step) that then blocks its worker thread is picked up by an
//! idle worker: a push to a worker's own deque wakes a parked worker when no one is searching.
//!
//! The tests make sure the other worker is asleep when the push happens (its `parks` counter is
//! ahead of its `unparks`), then keep the pushing worker blocked until the queued work has run.
//! Deadlines are hang guards only.

mod support;

use procsched::executor::{Executor, ExecutorMetrics};
use procsched::{metrics::ProcessState, state_machine::Event, Message, Payload, Scheduler};
use std::sync::mpsc;
use std::time::Duration;
use support::{counter, join, recv, wait_for_state, wait_until, FnProcess, HANG_GUARD};

/// How long the queued work may take to run while its worker is blocked: a hang guard. Without
/// the wake it would wait for the blocker, which the test releases only after this.
const PICKED_UP_GUARD: Duration = Duration::from_secs(30);

/// `true` if some worker is asleep: it counted a park it has not woken from. The worker running
/// the blocking task is awake, so with two workers this is the other one.
fn some_worker_parked(metrics: &ExecutorMetrics) -> bool {
    metrics.workers().iter().any(|w| w.parks > w.unparks)
}

#[test]
fn a_task_spawned_by_a_task_that_then_blocks_runs_on_an_idle_worker() {
    let executor = Executor::builder().workers(2).build().unwrap();
    let handle = executor.handle().clone();
    let (entered_tx, entered) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let (spawned_ran_tx, spawned_ran) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let blocker = executor.spawn(async move {
        entered_tx.send(()).unwrap();
        go_rx.recv_timeout(HANG_GUARD).expect("hang guard: no go");
        // Lands in this worker's deque, the only task there.
        drop(handle.spawn(async move { spawned_ran_tx.send(()).unwrap() }));
        // Blocks this worker thread (as a long computation or a blocking call would).
        let _ = release_rx.recv_timeout(HANG_GUARD);
    });
    recv(&entered);
    wait_until("the other worker parks", || {
        some_worker_parked(&executor.metrics())
    });
    go.send(()).unwrap();
    if spawned_ran.recv_timeout(PICKED_UP_GUARD).is_err() {
        panic!("the spawned task did not run while its spawner blocked, though a worker was idle");
    }
    release.send(()).unwrap();
    executor.block_on(blocker).unwrap();
    let report = executor.shutdown(HANG_GUARD);
    assert_eq!(report.cancelled, 0);
}

#[test]
fn a_process_messaged_by_a_step_that_then_blocks_steps_on_an_idle_worker() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let closes = counter();

    // Idle until its message arrives; then reports and finishes.
    let (stepped_tx, stepped) = mpsc::channel();
    let receiver = sched
        .spawn(
            FnProcess::new(&closes, move |events, out| {
                match events.pop() {
                    Some(Event::Message(_)) => {
                        stepped_tx.send(()).unwrap();
                        out.done(Payload::empty());
                    }
                    Some(other) => return Err(format!("unexpected {other:?}").into()),
                    None => out.idle(),
                }
                Ok(())
            }),
            "run",
            Payload::empty(),
        )
        .unwrap();
    let receiver_pid = receiver.pid();
    wait_for_state(sched.handle(), receiver_pid, ProcessState::Idle);

    // Sends to the receiver from inside its step (a wake on this worker: its deque), then blocks.
    let (entered_tx, entered) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let (release, release_rx) = mpsc::channel::<()>();
    let scheduler = sched.handle().clone();
    let blocker = sched
        .spawn(
            FnProcess::new(&closes, move |_, out| {
                entered_tx.send(()).unwrap();
                go_rx.recv_timeout(HANG_GUARD).expect("hang guard: no go");
                scheduler.send(receiver_pid, Message::new("wake", Payload::empty()))?;
                let _ = release_rx.recv_timeout(HANG_GUARD);
                out.done(Payload::empty());
                Ok(())
            }),
            "run",
            Payload::empty(),
        )
        .unwrap();
    recv(&entered);
    wait_until("the other worker parks", || {
        some_worker_parked(&sched.metrics().executor)
    });
    go.send(()).unwrap();
    if stepped.recv_timeout(PICKED_UP_GUARD).is_err() {
        panic!(
            "the messaged process did not step while the sender blocked, though a worker was idle"
        );
    }
    release.send(()).unwrap();
    join(blocker).unwrap();
    join(receiver).unwrap();
    sched.shutdown(HANG_GUARD);
}
