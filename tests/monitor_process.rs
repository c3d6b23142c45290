//! The monitor under the process scheduler: a process step that blocks its worker (a std channel
//! receive) does not stall the other processes; the long step is reported once, through
//! `tracing`, with its PID; the worker count settles back; `procsched::executor::block_in_place` in a step
//! hands off at once; the step budget keeps a busy or flooded process from starving the others.
//!
//! No timing assertions: deadlines are hang guards only.

mod support;

use procsched::{state_machine::Event, Message, Payload, Pid, Scheduler};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;
use support::*;

/// A `tracing` subscriber for this test binary: records every event that has a `pid` field as
/// `(thread name, message, pid)`. Global, because the monitor reports from its own thread (named
/// after the scheduler's workers: PIDs repeat across the schedulers of parallel tests).
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<(String, String, String, String)>>,
}

struct Fields {
    message: String,
    pid: Option<String>,
    kind: String,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "pid" => self.pid = Some(format!("{value:?}")),
            "kind" => self.kind = format!("{value:?}"),
            _ => {}
        }
    }
}

impl tracing::Subscriber for &'static Recorder {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields {
            message: String::new(),
            pid: None,
            kind: String::new(),
        };
        event.record(&mut fields);
        if let Some(pid) = fields.pid {
            let thread = thread::current().name().unwrap_or("").to_owned();
            self.events
                .lock()
                .unwrap()
                .push((thread, fields.message, pid, fields.kind));
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn recorder() -> &'static Recorder {
    static RECORDER: OnceLock<&'static Recorder> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder: &'static Recorder = Box::leak(Box::default());
        tracing::subscriber::set_global_default(recorder).expect("the only global subscriber");
        recorder
    })
}

/// Long-poll reports recorded for `pid` by the monitor thread `thread`.
fn long_poll_reports(thread: &str, pid: Pid) -> usize {
    let pid = pid.to_string();
    recorder()
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, message, p, _)| t == thread && message.starts_with("long poll") && *p == pid)
        .count()
}

/// The process type named by the long-poll reports for `pid` by the monitor thread `thread`.
fn long_poll_kinds(thread: &str, pid: Pid) -> Vec<String> {
    let pid = pid.to_string();
    recorder()
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, message, p, _)| t == thread && message.starts_with("long poll") && *p == pid)
        .map(|(_, _, _, kind)| kind.clone())
        .collect()
}

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .build()
        .expect("scheduler starts")
}

/// A process whose first step blocks its worker thread until the test releases it.
fn spawn_blocker(sched: &Scheduler) -> (procsched::ProcessHandle, StepGate) {
    let (gate, inside) = step_gate();
    let process = FnProcess::new(&counter(), move |_, out| {
        inside.wait();
        out.done(Payload::empty());
        Ok(())
    });
    let handle = sched.spawn(process, "run", Payload::empty()).unwrap();
    recv(&gate.entered);
    (handle, gate)
}

/// Processes that finish in their first step.
fn spawn_ordinary(sched: &Scheduler, n: usize) -> Vec<procsched::ProcessHandle> {
    (0..n)
        .map(|i| {
            let process = FnProcess::new(&counter(), move |_, out| {
                out.done(Payload::new(i));
                Ok(())
            });
            sched.spawn(process, "run", Payload::empty()).unwrap()
        })
        .collect()
}

fn assert_all_done(results: Vec<Result<Payload, procsched::error::ProcessError>>) {
    for (i, result) in results.into_iter().enumerate() {
        let payload = result.expect("an ordinary process completes");
        assert_eq!(payload.downcast::<usize>().unwrap(), i);
    }
}

fn settle(sched: &Scheduler, workers: usize) {
    wait_until(
        "the active worker count back at the configured number",
        || {
            let monitor = sched.metrics().executor.monitor();
            monitor.active_workers == workers && monitor.stuck_workers == 0
        },
    );
}

#[test]
fn ten_thousand_processes_complete_while_one_blocks_its_worker() {
    recorder();
    let sched = scheduler(2);
    let (blocker, gate) = spawn_blocker(&sched);
    assert_all_done(join_all(spawn_ordinary(&sched, scaled(10_000))));
    // Still blocked: only now released.
    gate.release.send(()).unwrap();
    join(blocker).unwrap();
}

#[test]
fn processes_complete_while_two_block_both_workers_then_the_count_settles() {
    recorder();
    let sched = scheduler(2);
    let (first, first_gate) = spawn_blocker(&sched);
    // The first blocks one worker: the other runs the second.
    let (second, second_gate) = spawn_blocker(&sched);
    assert_all_done(join_all(spawn_ordinary(&sched, scaled(10_000))));
    let during = sched.metrics().executor.monitor();
    assert!(during.spares_started >= 1, "{during:?}");
    first_gate.release.send(()).unwrap();
    second_gate.release.send(()).unwrap();
    join(first).unwrap();
    join(second).unwrap();
    settle(&sched, 2);
    let after = sched.metrics().executor.monitor();
    assert_eq!(after.spares_started, after.spares_retired, "{after:?}");
    assert_eq!(after.active_workers, 2);
}

/// After a burst of blocking steps the spare workers' threads end once their keep-alive has
/// passed unused: the thread count goes back to the configured workers (and the next burst
/// starts spares again).
#[test]
fn spare_threads_end_after_their_keep_alive_and_start_again_when_needed() {
    let sched = Scheduler::builder()
        .workers(2)
        .spare_keep_alive(Duration::from_millis(20))
        .build()
        .unwrap();
    let mut started_before = 0;
    for round in 0..2 {
        let blockers: Vec<_> = (0..2).map(|_| spawn_blocker(&sched)).collect();
        assert_all_done(join_all(spawn_ordinary(&sched, scaled(2_000))));
        // Spares ran that work (both workers are stuck). Their threads may already have ended
        // (the keep-alive is short, and a loaded machine may take longer to get here): count
        // the starts, not the threads.
        let during = sched.metrics().executor.monitor();
        assert!(
            during.spares_started > started_before,
            "round {round}: {during:?}"
        );
        started_before = during.spares_started;
        for (blocker, gate) in blockers {
            gate.release.send(()).unwrap();
            join(blocker).unwrap();
        }
        settle(&sched, 2);
        wait_until("every spare thread ended", || {
            sched.metrics().executor.monitor().spare_threads == 0
        });
    }
}

#[test]
fn a_long_step_is_reported_once_with_its_pid() {
    recorder();
    let sched = Scheduler::builder()
        .workers(2)
        .thread_name("long-step")
        .long_poll_threshold(Duration::from_millis(2))
        .build()
        .unwrap();
    let monitor_thread = "long-step-monitor";
    let (blocker, gate) = spawn_blocker(&sched);
    let pid = blocker.pid();
    wait_until("the long step reported", || {
        long_poll_reports(monitor_thread, pid) > 0
    });
    // Sampled many more times while still stuck: still one report.
    wait_until("the monitor observing the step for 10 thresholds", || {
        sched.metrics().executor.monitor().longest_poll_ns >= 20_000_000
    });
    gate.release.send(()).unwrap();
    join(blocker).unwrap();
    settle(&sched, 2);
    assert_eq!(long_poll_reports(monitor_thread, pid), 1);
    let kinds = long_poll_kinds(monitor_thread, pid);
    assert!(
        !kinds.is_empty() && kinds.iter().all(|kind| kind.contains("FnProcess")),
        "the report names the process type: {kinds:?}"
    );
    let monitor = sched.metrics().executor.monitor();
    assert_eq!(monitor.long_polls, 1);
    assert_eq!(
        monitor.longest_poll_label.and_then(Pid::from_raw),
        Some(pid)
    );
}

#[test]
fn block_in_place_in_a_step_hands_off_without_waiting_for_the_threshold() {
    // One worker, and a threshold no step reaches: only the declared blocking (`block_in_place`:
    // stuck at once) lets the sender run while the step blocks.
    let sched = Scheduler::builder()
        .workers(1)
        .long_poll_threshold(HANG_GUARD * 2)
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    let rx = Mutex::new(rx);
    let blocked = FnProcess::new(&counter(), move |_, out| {
        procsched::executor::block_in_place(|| {
            rx.lock().unwrap().recv_timeout(HANG_GUARD).unwrap()
        });
        out.done(Payload::empty());
        Ok(())
    });
    let blocked = sched.spawn(blocked, "run", Payload::empty()).unwrap();
    wait_until("the blocked step running", || {
        sched.metrics().executor.monitor().stuck_workers == 1
    });
    let sender = FnProcess::new(&counter(), move |_, out| {
        tx.send(()).unwrap();
        out.done(Payload::empty());
        Ok(())
    });
    let sender = sched.spawn(sender, "run", Payload::empty()).unwrap();
    join(sender).unwrap();
    join(blocked).unwrap();
    assert_eq!(sched.metrics().executor.monitor().long_polls, 0);
}

#[test]
fn a_continue_forever_process_does_not_starve_others_on_one_worker() {
    let sched = scheduler(1);
    let busy = FnProcess::new(&counter(), |events, out| {
        match events.pop() {
            Some(Event::Cancel { .. }) => out.done(Payload::empty()),
            _ => out.continue_(),
        }
        Ok(())
    });
    let busy = sched.spawn(busy, "run", Payload::empty()).unwrap();
    assert_all_done(join_all(spawn_ordinary(&sched, 1_000)));
    sched.terminate(busy.pid()).unwrap();
    let _ = join(busy);
}

#[test]
fn a_flooded_process_does_not_starve_others_on_one_worker() {
    let sched = Arc::new(scheduler(1));
    let flooded = FnProcess::new(&counter(), |events, out| {
        while let Some(event) = events.pop() {
            if let Event::Cancel { .. } = event {
                out.done(Payload::empty());
                return Ok(());
            }
        }
        out.idle();
        Ok(())
    });
    let flooded = sched.spawn(flooded, "run", Payload::empty()).unwrap();
    let pid = flooded.pid();
    let stop = Arc::new(AtomicBool::new(false));
    let (flooding_tx, flooding) = mpsc::channel();
    let flooder = {
        let (sched, stop) = (sched.clone(), stop.clone());
        thread::spawn(move || {
            let mut sent = 0u64;
            while !stop.load(SeqCst) {
                sched
                    .send(pid, Message::new("flood", Payload::new(sent)))
                    .unwrap();
                sent += 1;
                if sent == 1_000 {
                    flooding_tx.send(()).unwrap();
                }
            }
            sent
        })
    };
    // The flood is under way before the others are spawned (not left to thread scheduling).
    flooding
        .recv_timeout(HANG_GUARD)
        .expect("hang guard: the flood started");
    assert_all_done(join_all(spawn_ordinary(&sched, 1_000)));
    stop.store(true, SeqCst);
    assert!(flooder.join().unwrap() >= 1_000);
    sched.terminate(pid).unwrap();
    let _ = join(flooded);
}

/// A process woken by a step that then blocks its worker is queued alone on that worker — in its
/// next slot, which no thief takes — and not announced (the worker would run it next); the
/// monitor's nudge (or, at the threshold, its hand-off) moves it to the global injector and so to
/// the other worker while the step still blocks.
#[test]
fn a_process_woken_by_a_step_that_then_blocks_runs_on_the_other_worker() {
    recorder();
    let sched = scheduler(2);
    let (handled_tx, handled_rx) = mpsc::channel();
    let receiver = FnProcess::new(&counter(), move |events, out| {
        if events.drain().any(|e| matches!(e, Event::Message(_))) {
            handled_tx.send(()).unwrap();
            out.done(Payload::empty());
        } else {
            out.idle();
        }
        Ok(())
    });
    let receiver = sched.spawn(receiver, "run", Payload::empty()).unwrap();
    wait_until("the receiver idles", || {
        sched.state(receiver.pid()) == Some(procsched::metrics::ProcessState::Idle)
    });
    let (to, handle) = (receiver.pid(), sched.handle().clone());
    let sender = FnProcess::new(&counter(), move |_, out| {
        handle.send(to, Message::new("ping", Payload::empty()))?;
        // Blocks this worker until the receiver has run elsewhere (a hang guard, not a wait
        // that ends the test's work).
        handled_rx.recv_timeout(HANG_GUARD)?;
        out.done(Payload::empty());
        Ok(())
    });
    let sender = sched.spawn(sender, "run", Payload::empty()).unwrap();
    join(sender).expect("the receiver ran while the sender's step blocked");
    join(receiver).unwrap();
}
