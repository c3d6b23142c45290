//! Public-API tests of process lifecycles: terminate, shutdown, the process limit, and faults.
//!
//! Every test asserts outcomes (counts, results, errors). Deadlines appear only as hang guards,
//! and as the shutdown timeouts under test (which bound a wait, never an assertion).

mod support;

use procsched::SendErrorKind;
use procsched::{
    BoxError, CommandError, Event, Events, InitError, Message, Payload, Pid, Process,
    ProcessContext, ProcessState, Scheduler, SchedulerHandle, SendError, SpawnError, StepOutput,
};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;
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

/// Occupies the only worker of a one-worker scheduler until `release` is sent.
fn block_the_worker(
    sched: &Scheduler,
    closes: &support::Counter,
) -> (StepGate, procsched::ProcessHandle) {
    let (gate, inside) = step_gate();
    let blocker = sched
        .spawn(
            FnProcess::new(closes, move |_, out| {
                inside.wait();
                out.done(Payload::empty());
                Ok(())
            }),
            "run",
            Payload::empty(),
        )
        .unwrap();
    recv(&gate.entered);
    (gate, blocker)
}

// ---------------------------------------------------------------------------------------------
// terminate
// ---------------------------------------------------------------------------------------------

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

/// Async command: replies with a tracked value after a tokio yield.
struct Work(u64);
procsched::command!(Work => Payload);
/// Inline command: replies with a tracked value.
struct Quick(u64);
procsched::command!(Quick => Payload);

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

fn churn_handlers(builder: &mut procsched::SchedulerBuilder, tracker: &Tracker) {
    let t = tracker.clone();
    builder.async_handler(move |Work(n): Work| {
        let tracked = t.track(n);
        async move {
            tokio::task::yield_now().await;
            Ok::<_, procsched::CommandError>(Payload::new(tracked))
        }
    });
    let t = tracker.clone();
    builder.inline_handler(move |Quick(n): Quick| {
        Ok::<_, procsched::CommandError>(Payload::new(t.track(n)))
    });
}

fn assert_send_outcome(result: Result<(), SendError>, pid: Pid) {
    match result {
        Ok(()) => {}
        Err(e) if e.is_closed() || e.is_not_found() => assert_eq!(e.pid(), pid),
        Err(other) => panic!("unexpected {other:?}"),
    }
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

// ---------------------------------------------------------------------------------------------
// Rapid build / spawn / send / shutdown cycles
// ---------------------------------------------------------------------------------------------

/// A process that counts its own drop, and finishes on `Cancel` only if `graceful`. Holds the
/// tracked input; every message yields one async `Work` and one inline `Quick`.
struct Cycler {
    _input: Option<Tracked>,
    _dropped: DropCounter,
    graceful: bool,
    tag: u64,
    closes: support::Counter,
}

impl Process for Cycler {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, input: Payload) -> Result<(), InitError> {
        self._input = Some(
            input
                .downcast()
                .map_err(|_| InitError::failed("want Tracked"))?,
        );
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        for event in events.drain() {
            match event {
                Event::Cancel { .. } if self.graceful => {
                    out.done(Payload::empty());
                    return Ok(());
                }
                Event::Message(_) => {
                    self.tag += 2;
                    out.yield_command(self.tag, Work(self.tag));
                    out.yield_command(self.tag + 1, Quick(self.tag + 1));
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
    }
}

#[test]
fn rapid_build_spawn_send_shutdown_cycles_leak_nothing() {
    let tracker = Tracker::new();
    let created = support::counter();
    let dropped = support::counter();
    let closes = support::counter();
    let spawned = support::counter();
    for cycle in 0..scaled(20) {
        let mut builder = Scheduler::builder();
        builder.workers(2).drop_timeout(Duration::from_millis(20));
        churn_handlers(&mut builder, &tracker);
        let sched = builder.build().unwrap();
        let make = |graceful: bool| {
            created.fetch_add(1, SeqCst);
            Cycler {
                _input: None,
                _dropped: DropCounter(dropped.clone()),
                graceful,
                tag: 0,
                closes: closes.clone(),
            }
        };
        let in_flight = support::counter();
        let (to_sender, for_sender) = mpsc::channel::<Pid>();
        let handles = thread::scope(|scope| {
            let sender = {
                let handle = sched.handle().clone();
                let tracker = &tracker;
                scope.spawn(move || {
                    for pid in for_sender {
                        for i in 0..3 {
                            let body = Payload::new(tracker.track(i));
                            assert_send_outcome(handle.send(pid, Message::new("m", body)), pid);
                        }
                    }
                })
            };
            let spawners: Vec<_> = (0..2)
                .map(|t| {
                    let handle: SchedulerHandle = sched.handle().clone();
                    let to_sender = to_sender.clone();
                    let (tracker, in_flight, spawned, make) =
                        (&tracker, &in_flight, &spawned, &make);
                    scope.spawn(move || {
                        let mut handles = Vec::new();
                        for i in 0.. {
                            let input = Payload::new(tracker.track(i));
                            match handle.spawn(make((i + t) % 2 == 0), "run", input) {
                                Ok(h) => {
                                    spawned.fetch_add(1, SeqCst);
                                    in_flight.fetch_add(1, SeqCst);
                                    let _ = to_sender.send(h.pid());
                                    handles.push(h);
                                }
                                Err(SpawnError::ShuttingDown) => break,
                                Err(other) => panic!("unexpected {other:?}"),
                            }
                        }
                        handles
                    })
                })
                .collect();
            drop(to_sender);
            // Shut down while both spawners and the sender are busy.
            wait_until("spawns in flight", || count(&in_flight) >= 40 + cycle);
            let report = sched.shutdown(Duration::from_millis(20 + cycle as u64));
            let handles: Vec<_> = spawners
                .into_iter()
                .flat_map(|s| s.join().unwrap())
                .collect();
            assert!(
                report.graceful + report.forced <= count(&in_flight),
                "{report:?}"
            );
            sender.join().unwrap();
            handles
        });
        for result in join_all(handles) {
            if let Err(err) = result {
                assert!(err.is_cancelled(), "{err:?}");
            }
        }
        assert_eq!(sched.live_processes(), 0);
        assert_eq!(sched.handle().registered_processes(), 0);
        drop(sched);
    }
    assert_eq!(
        count(&closes),
        count(&spawned),
        "close once per admitted process"
    );
    wait_until("every process dropped", || {
        count(&created) == count(&dropped)
    });
    tracker.wait_all_dropped("every input, message and reply dropped exactly once");
}

// ---------------------------------------------------------------------------------------------
// max_processes
// ---------------------------------------------------------------------------------------------

#[test]
fn max_processes_is_never_exceeded_under_concurrent_spawns() {
    const LIMIT: usize = 16;
    let sched = Scheduler::builder()
        .workers(2)
        .max_processes(LIMIT)
        .build()
        .unwrap();
    let closes = support::counter();
    for round in 0..scaled(20) {
        let barrier = Barrier::new(8);
        let (admitted, refused): (Vec<_>, Vec<_>) = thread::scope(|scope| {
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let (sched, barrier, closes) = (&sched, &barrier, &closes);
                    scope.spawn(move || {
                        barrier.wait();
                        (0..10)
                            .map(|_| {
                                let process = FnProcess::new(closes, echo_step());
                                sched.spawn(process, "run", Payload::empty())
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .partition(Result::is_ok)
        });
        assert_eq!(admitted.len(), LIMIT, "round {round}");
        for err in refused {
            assert!(matches!(err.unwrap_err(), SpawnError::Limit(LIMIT)));
        }
        assert_eq!(sched.live_processes(), LIMIT);
        let handles: Vec<_> = admitted.into_iter().map(Result::unwrap).collect();
        for handle in &handles {
            sched
                .send(handle.pid(), Message::new("go", Payload::new(1u8)))
                .unwrap();
        }
        for result in join_all(handles) {
            assert_eq!(result.unwrap().downcast::<u8>().unwrap(), 1);
        }
        assert_eq!(
            sched.live_processes(),
            0,
            "slots released after the processes finished"
        );
    }
    assert_eq!(count(&closes), LIMIT * scaled(20));
}

// ---------------------------------------------------------------------------------------------
// Fault storm
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    None,
    InitError,
    InitPanic,
    StepError,
    StepPanic,
    ClosePanic,
    InlinePanic,
    AsyncPanic,
    BlockingPanic,
    HandlerError,
}

const FAULTS: [Fault; 10] = [
    Fault::None,
    Fault::InitError,
    Fault::InitPanic,
    Fault::StepError,
    Fault::StepPanic,
    Fault::ClosePanic,
    Fault::InlinePanic,
    Fault::AsyncPanic,
    Fault::BlockingPanic,
    Fault::HandlerError,
];

/// Commands; `true` makes the handler misbehave.
struct InlineJob(bool);
procsched::command!(InlineJob => Payload);
struct AsyncJob(bool);
procsched::command!(AsyncJob => Payload);
struct BlockingJob(bool);
procsched::command!(BlockingJob => Payload);
struct FailingJob;
procsched::command!(FailingJob => Payload);

/// Runs `rounds` rounds of one yield each (kind by round), with its fault injected at
/// `fault_round`; finishes with the number of handler errors it saw.
struct Faulty {
    fault: Fault,
    rounds: u32,
    fault_round: u32,
    round: u32,
    errors: u32,
    closes: support::Counter,
}

impl Process for Faulty {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        match self.fault {
            Fault::InitError => Err(InitError::failed("injected")),
            Fault::InitPanic => panic!("{EXPECTED_PANIC}: init"),
            _ => Ok(()),
        }
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        for event in events.drain() {
            match event {
                Event::YieldComplete { result: Ok(_), .. } => {}
                Event::YieldComplete { result: Err(_), .. } => self.errors += 1,
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        if self.round == self.fault_round {
            match self.fault {
                Fault::StepError => return Err("injected".into()),
                Fault::StepPanic => panic!("{EXPECTED_PANIC}: step"),
                _ => {}
            }
        }
        if self.round == self.rounds {
            out.done(Payload::new(self.errors));
            return Ok(());
        }
        let bad = self.round == self.fault_round;
        let tag = u64::from(self.round);
        match (self.fault, self.round % 3) {
            (Fault::InlinePanic, _) => out.yield_command(tag, InlineJob(bad)),
            (Fault::AsyncPanic, _) => out.yield_command(tag, AsyncJob(bad)),
            (Fault::BlockingPanic, _) => out.yield_command(tag, BlockingJob(bad)),
            (Fault::HandlerError, _) if bad => out.yield_command(tag, FailingJob),
            (_, 0) => out.yield_command(tag, InlineJob(false)),
            (_, 1) => out.yield_command(tag, AsyncJob(false)),
            _ => out.yield_command(tag, BlockingJob(false)),
        }
        self.round += 1;
        out.wait();
        Ok(())
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
        if self.fault == Fault::ClosePanic {
            panic!("{EXPECTED_PANIC}: close");
        }
    }
}

#[test]
fn fault_storm_then_a_normal_workload_completes() {
    quiet_panics();
    let sched = Scheduler::builder()
        .workers(2)
        .inline_handler(|InlineJob(bad)| {
            assert!(!bad, "{EXPECTED_PANIC}: inline handler");
            Ok::<_, procsched::CommandError>(Payload::empty())
        })
        .async_handler(|AsyncJob(bad)| async move {
            tokio::task::yield_now().await;
            assert!(!bad, "{EXPECTED_PANIC}: async handler");
            Ok::<_, procsched::CommandError>(Payload::empty())
        })
        .blocking_handler(|BlockingJob(bad)| {
            assert!(!bad, "{EXPECTED_PANIC}: blocking handler");
            Ok::<_, procsched::CommandError>(Payload::empty())
        })
        .inline_handler(|_: FailingJob| Err(CommandError::failed("injected")))
        .build()
        .unwrap();
    let closes = support::counter();
    let mut rng = Rng::new(0xFA17);
    let n = scaled(10_000);
    let mut spawned = Vec::new();
    for _ in 0..n {
        let fault = FAULTS[rng.below(FAULTS.len() as u64) as usize];
        let rounds = 1 + rng.below(4) as u32;
        let process = Faulty {
            fault,
            rounds,
            fault_round: rng.below(u64::from(rounds)) as u32,
            round: 0,
            errors: 0,
            closes: closes.clone(),
        };
        match (fault, sched.spawn(process, "run", Payload::empty())) {
            (Fault::InitError, Err(SpawnError::Init(InitError::Failed(e)))) => {
                assert_eq!(e.to_string(), "injected");
            }
            (Fault::InitPanic, Err(SpawnError::InitPanicked(m))) => {
                assert_eq!(m, format!("{EXPECTED_PANIC}: init"));
            }
            (_, Ok(handle)) => spawned.push((fault, handle)),
            (fault, other) => panic!("{fault:?}: {other:?}"),
        }
    }
    let (faults, handles): (Vec<_>, Vec<_>) = spawned.into_iter().unzip();
    for (fault, result) in faults.into_iter().zip(join_all(handles)) {
        match (fault, result) {
            (Fault::StepError, Err(e)) if e.is_failed() => {
                assert_eq!(e.into_failure().unwrap().to_string(), "injected");
            }
            (Fault::StepPanic, Err(e)) if e.is_panicked() => {
                assert_eq!(e.panic_message(), Some(&*format!("{EXPECTED_PANIC}: step")));
            }
            (Fault::ClosePanic, Err(e)) if e.is_panicked() => {
                assert!(e.panic_message().unwrap().contains(EXPECTED_PANIC), "{e:?}");
            }
            (Fault::None, Ok(errors)) => assert_eq!(errors.downcast::<u32>().unwrap(), 0),
            (
                Fault::InlinePanic | Fault::AsyncPanic | Fault::BlockingPanic | Fault::HandlerError,
                Ok(errors),
            ) => assert_eq!(errors.downcast::<u32>().unwrap(), 1, "{fault:?}"),
            (fault, other) => panic!("{fault:?}: {other:?}"),
        }
    }
    assert_eq!(
        count(&closes),
        n,
        "close once per process, init failures included"
    );
    assert_eq!(sched.live_processes(), 0);
    assert_eq!(sched.handle().registered_processes(), 0);

    // A normal workload on the same scheduler.
    let closes = support::counter();
    let handles = (0..scaled(500))
        .map(|_| {
            let process = Faulty {
                fault: Fault::None,
                rounds: 6,
                fault_round: u32::MAX,
                round: 0,
                errors: 0,
                closes: closes.clone(),
            };
            sched.spawn(process, "run", Payload::empty()).unwrap()
        })
        .collect();
    for result in join_all(handles) {
        assert_eq!(result.unwrap().downcast::<u32>().unwrap(), 0);
    }
    assert_eq!(count(&closes), scaled(500));
}
