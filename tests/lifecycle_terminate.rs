//! Public-API tests of `terminate`: a process ready, running, blocked (its handler task
//! aborted) or idle; unknown and finished PIDs; and terminates racing sends and completions.
//!
//! Every test asserts outcomes (counts, results, errors). Deadlines appear only as hang guards.

mod support;

use procsched::{
    error::{CommandError, SendErrorKind},
    metrics::ProcessState,
    state_machine::Event,
    Message, Payload, Pid, Scheduler,
};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use support::churn::{assert_send_outcome, churn_handlers, Quick, Work};
use support::*;

/// Records every step, parks `Idle`; finishes on the first message with its payload. Counts steps.
fn idle_counting(steps: &support::Counter, closes: &support::Counter) -> FnProcess {
    let steps = steps.clone();
    let mut echo = echo_step();
    FnProcess::new(closes, move |events, out| {
        steps.fetch_add(1, SeqCst);
        echo(events, out)
    })
}

#[test]
fn terminate_a_ready_process_before_its_first_step() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let closes = support::counter();
    let (gate, blocker) = block_the_worker(&sched, &support::counter());
    let steps = support::counter();
    let target = sched
        .spawn(idle_counting(&steps, &closes), "run", Payload::empty())
        .unwrap();
    let pid = target.pid();
    assert_eq!(sched.state(pid), Some(ProcessState::Ready));
    sched.terminate(pid).unwrap();
    gate.release.send(()).unwrap();
    join(blocker).unwrap();
    let err = join(target).unwrap_err();
    assert!(err.is_terminated(), "{err:?}");
    assert_eq!(err.pid(), pid);
    assert_eq!(count(&steps), 0, "never stepped");
    assert_eq!(count(&closes), 1);
    assert_eq!(
        refusal(sched.terminate(pid)),
        Err((SendErrorKind::NotFound, pid))
    );
    assert_eq!(sched.state(pid), None);
}

#[test]
fn terminate_a_running_process_takes_effect_after_its_step() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    for _ in 0..scaled(50) {
        let closes = support::counter();
        let steps = support::counter();
        let (gate, inside) = step_gate();
        let counted = steps.clone();
        let target = sched
            .spawn(
                FnProcess::new(&closes, move |_, out| {
                    counted.fetch_add(1, SeqCst);
                    inside.wait();
                    // Asks to run again at once: the terminate must still win.
                    out.continue_();
                    Ok(())
                }),
                "run",
                Payload::empty(),
            )
            .unwrap();
        let pid = target.pid();
        recv(&gate.entered);
        assert_eq!(sched.state(pid), Some(ProcessState::Running));
        sched.terminate(pid).unwrap();
        assert_eq!(count(&closes), 0, "the running step finishes first");
        gate.release.send(()).unwrap();
        let err = join(target).unwrap_err();
        assert!(err.is_terminated(), "{err:?}");
        assert_eq!(count(&steps), 1, "no step after the terminate");
        assert_eq!(count(&closes), 1);
    }
}

/// Async command whose handler never completes; the future holds `guard` and signals `started`.
struct Forever {
    started: mpsc::Sender<()>,
    guard: DropCounter,
    dropped: mpsc::Sender<()>,
}
procsched::command!(Forever => Payload);

/// Signals on a channel when dropped.
struct SignalOnDrop(mpsc::Sender<()>);

impl Drop for SignalOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

#[test]
fn terminate_a_blocked_process_aborts_its_handler_task() {
    let sched = Scheduler::builder()
        .workers(2)
        .async_handler(|f: Forever| async move {
            let _guard = (f.guard, SignalOnDrop(f.dropped));
            f.started.send(()).unwrap();
            std::future::pending::<Result<Payload, CommandError>>().await
        })
        .build()
        .unwrap();
    for _ in 0..scaled(20) {
        let closes = support::counter();
        let guard_drops = support::counter();
        let (started_tx, started_rx) = mpsc::channel();
        let (dropped_tx, dropped_rx) = mpsc::channel();
        let mut command = Some(Forever {
            started: started_tx,
            guard: DropCounter(guard_drops.clone()),
            dropped: dropped_tx,
        });
        let target = sched
            .spawn(
                FnProcess::new(&closes, move |events, out| {
                    if let Some(command) = command.take() {
                        out.yield_command(1, command);
                        out.wait();
                        return Ok(());
                    }
                    Err(format!("stepped again with {events:?}").into())
                }),
                "run",
                Payload::empty(),
            )
            .unwrap();
        let pid = target.pid();
        recv(&started_rx);
        wait_for_state(sched.handle(), pid, ProcessState::Blocked);
        sched.terminate(pid).unwrap();
        let err = join(target).unwrap_err();
        assert!(err.is_terminated(), "{err:?}");
        assert_eq!(count(&closes), 1);
        recv(&dropped_rx);
        assert_eq!(
            count(&guard_drops),
            1,
            "the handler future was dropped once"
        );
        assert_eq!(
            refusal(sched.terminate(pid)),
            Err((SendErrorKind::NotFound, pid))
        );
    }
}

#[test]
fn terminate_an_idle_process_and_unknown_or_finished_pids() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let closes = support::counter();
    let steps = support::counter();
    let target = sched
        .spawn(idle_counting(&steps, &closes), "run", Payload::empty())
        .unwrap();
    let pid = target.pid();
    wait_for_state(sched.handle(), pid, ProcessState::Idle);
    sched.terminate(pid).unwrap();
    let err = join(target).unwrap_err();
    assert!(err.is_terminated(), "{err:?}");
    assert_eq!(count(&steps), 1);
    assert_eq!(count(&closes), 1);
    assert_eq!(
        refusal(sched.terminate(pid)),
        Err((SendErrorKind::NotFound, pid))
    );
    assert_eq!(
        refusal(sched.send(pid, Message::new("late", Payload::empty()))),
        Err((SendErrorKind::NotFound, pid))
    );

    // A process that finished normally.
    let done = sched
        .spawn(idle_counting(&steps, &closes), "run", Payload::empty())
        .unwrap();
    let done_pid = done.pid();
    sched
        .send(done_pid, Message::new("go", Payload::new(3u8)))
        .unwrap();
    assert_eq!(join(done).unwrap().downcast::<u8>().unwrap(), 3);
    assert_eq!(
        refusal(sched.terminate(done_pid)),
        Err((SendErrorKind::NotFound, done_pid))
    );

    let never = Pid::from_raw(u64::MAX).unwrap();
    assert_eq!(
        refusal(sched.terminate(never)),
        Err((SendErrorKind::NotFound, never))
    );
    assert_eq!(count(&closes), 2);
    assert_eq!(sched.live_processes(), 0);
}

/// On every message: yields one `Work` and one `Quick`; never finishes on its own. Tolerates
/// every event.
fn churner(closes: &support::Counter) -> FnProcess {
    let mut tag = 0;
    FnProcess::new(closes, move |events, out| {
        for event in events.drain() {
            if let Event::Message(_) = event {
                tag += 2;
                out.yield_command(tag, Work(tag));
                out.yield_command(tag + 1, Quick(tag + 1));
            }
        }
        out.idle();
        Ok(())
    })
}

#[test]
fn terminate_races_sends_and_completions() {
    let tracker = Tracker::new();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut builder = Scheduler::builder();
    builder.workers(2).tokio_handle(runtime.handle().clone());
    churn_handlers(&mut builder, &tracker);
    let sched = builder.build().unwrap();
    let n = scaled(10_000);
    let closes: Vec<support::Counter> = (0..n).map(|_| support::counter()).collect();
    let outcomes = Arc::new(Mutex::new([0usize; 3]));

    let (to_sender, for_sender) = mpsc::channel::<Pid>();
    let (to_terminator, for_terminator) = mpsc::channel::<Pid>();
    let sender = {
        let handle = sched.handle().clone();
        let tracker = tracker.clone();
        let outcomes = outcomes.clone();
        thread::spawn(move || {
            for pid in for_sender {
                for i in 0..5 {
                    let result =
                        handle.send(pid, Message::new("m", Payload::new(tracker.track(i))));
                    let slot = match &result {
                        Ok(()) => 0,
                        Err(e) if e.is_closed() => 1,
                        _ => 2,
                    };
                    outcomes.lock().unwrap()[slot] += 1;
                    assert_send_outcome(result, pid);
                }
            }
        })
    };
    let terminator = {
        let handle = sched.handle().clone();
        thread::spawn(move || {
            for pid in for_terminator {
                // The process never finishes on its own, so it is always there to terminate.
                handle.terminate(pid).expect("a live process");
            }
        })
    };
    let handles: Vec<_> = closes
        .iter()
        .map(|closes| {
            let handle = sched
                .spawn(churner(closes), "run", Payload::empty())
                .unwrap();
            to_sender.send(handle.pid()).unwrap();
            to_terminator.send(handle.pid()).unwrap();
            handle
        })
        .collect();
    drop((to_sender, to_terminator));
    for result in join_all(handles) {
        let err = result.unwrap_err();
        assert!(err.is_terminated(), "{err:?}");
    }
    sender.join().unwrap();
    terminator.join().unwrap();
    assert!(
        closes.iter().all(|c| count(c) == 1),
        "close exactly once per process"
    );
    assert_eq!(outcomes.lock().unwrap().iter().sum::<usize>(), 5 * n);
    assert_eq!(sched.live_processes(), 0);
    assert_eq!(sched.handle().registered_processes(), 0);
    drop(sched);
    drop(runtime);
    tracker.wait_all_dropped("every message and reply payload dropped exactly once");
}
