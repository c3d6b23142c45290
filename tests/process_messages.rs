//! Public-API tests of messages and observable state: a message wakes an idle or blocked
//! process and is never lost, sends to gone PIDs are refused, a flooded mailbox is delivered in
//! bounded batches in order, a spinning process does not starve others, and `state` reports what
//! a process is doing.
//!
//! Every test asserts outcomes (counts, results, errors). Deadlines appear only as hang guards.

mod support;

use procsched::{
    error::{CommandError, InitError, SendErrorKind},
    metrics::ProcessState,
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Message, Payload, Pid, Scheduler,
};
use std::sync::mpsc;
use std::thread;
use support::inc_counter::{counter_sched, run_counters};
use support::*;

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

#[test]
fn a_message_wakes_an_idle_process_never_lost_in_the_race_with_its_first_step() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let closes = support::counter();
    let n = scaled(10_000);
    // Two sender threads send to each process as soon as it is spawned, racing its first step
    // (queued, running, or already idle).
    let mut senders = Vec::new();
    let mut sender_threads = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = mpsc::channel::<Pid>();
        let handle = sched.handle().clone();
        senders.push(tx);
        sender_threads.push(thread::spawn(move || {
            for pid in rx {
                handle
                    .send(pid, Message::new("wake", Payload::new(pid.as_u64())))
                    .expect("the process waits for this message");
            }
        }));
    }
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let handle = sched
                .spawn(
                    FnProcess::new(&closes, echo_step()),
                    "run",
                    Payload::empty(),
                )
                .unwrap();
            senders[i % 2].send(handle.pid()).unwrap();
            handle
        })
        .collect();
    drop(senders);
    let pids: Vec<Pid> = handles.iter().map(|h| h.pid()).collect();
    for (result, pid) in join_all(handles).into_iter().zip(pids) {
        assert_eq!(result.unwrap().downcast::<u64>().unwrap(), pid.as_u64());
    }
    for thread in sender_threads {
        thread.join().unwrap();
    }
    assert_eq!(count(&closes), n);
    assert_eq!(sched.live_processes(), 0);
}

#[test]
fn send_to_a_finished_or_never_issued_pid_is_not_found() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let closes = support::counter();
    let handle = sched
        .spawn(
            FnProcess::new(&closes, echo_step()),
            "run",
            Payload::empty(),
        )
        .unwrap();
    let pid = handle.pid();
    sched
        .send(pid, Message::new("t", Payload::new(5u8)))
        .unwrap();
    assert_eq!(join(handle).unwrap().downcast::<u8>().unwrap(), 5);
    assert_eq!(
        refusal(sched.send(pid, Message::new("late", Payload::empty()))),
        Err((SendErrorKind::NotFound, pid))
    );
    assert_eq!(sched.state(pid), None);
    let never = Pid::from_raw(u64::MAX).unwrap();
    assert_eq!(
        refusal(sched.send(never, Message::new("t", Payload::empty()))),
        Err((SendErrorKind::NotFound, never))
    );
    assert_eq!(sched.state(never), None);
    assert_eq!(count(&closes), 1);
}

#[test]
fn a_process_that_always_continues_does_not_starve_others_on_one_worker() {
    let sched = counter_sched(1);
    let closes = support::counter();
    let (started_tx, started_rx) = mpsc::channel();
    let mut spins = 0u64;
    let spinner = sched
        .spawn(
            FnProcess::new(&closes, move |events, out| {
                spins += 1;
                if spins == 1 {
                    started_tx.send(()).unwrap();
                }
                if events.drain().any(|e| matches!(e, Event::Message(_))) {
                    out.done(Payload::new(spins));
                } else {
                    out.continue_();
                }
                Ok(())
            }),
            "run",
            Payload::empty(),
        )
        .unwrap();
    recv(&started_rx);
    // The one worker is busy with the spinner; others still complete, from outside and from
    // inside the worker (a process that spawns more).
    run_counters(sched.handle(), scaled(100), 20);
    let idle_closes = support::counter();
    let idlers: Vec<_> = (0..scaled(50))
        .map(|_| {
            sched
                .spawn(
                    FnProcess::new(&idle_closes, echo_step()),
                    "run",
                    Payload::empty(),
                )
                .unwrap()
        })
        .collect();
    for idler in &idlers {
        sched
            .send(idler.pid(), Message::new("go", Payload::new(1u32)))
            .unwrap();
    }
    for result in join_all(idlers) {
        assert_eq!(result.unwrap().downcast::<u32>().unwrap(), 1);
    }
    assert!(!spinner.is_finished(), "the spinner is still spinning");
    sched
        .send(spinner.pid(), Message::new("stop", Payload::empty()))
        .unwrap();
    let spins = join(spinner).unwrap().downcast::<u64>().unwrap();
    assert!(spins > 1);
    assert_eq!(count(&closes), 1);
}

/// Finishes after `expected` messages; records how many events each step saw and the message
/// ids in arrival order.
struct Flooded {
    expected: usize,
    batches: Vec<usize>,
    ids: Vec<u32>,
}

impl Process for Flooded {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        self.batches.push(events.len());
        for event in events.drain() {
            match event {
                Event::Message(m) => self
                    .ids
                    .push(m.payload.downcast::<u32>().map_err(|_| "id")?),
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        if self.ids.len() == self.expected {
            let batches = std::mem::take(&mut self.batches);
            out.done(Payload::new((batches, std::mem::take(&mut self.ids))));
        } else {
            out.idle();
        }
        Ok(())
    }
}

const FLOOD: usize = 1_000;

/// Spawns `flooded` while the only worker is blocked, sends it [`FLOOD`] messages, releases the
/// worker, and checks that they arrive in steps of at most 8 (`max_batch`), each once, in order.
/// `flooded` finishes with `(batch sizes, message ids)`.
fn check_flood(flooded: impl Process<Output = Payload>) {
    let sched = Scheduler::builder()
        .workers(1)
        .max_batch(8)
        .build()
        .unwrap();
    let closes = support::counter();
    // Occupy the only worker so the flooded process cannot take its first step yet.
    let (gate, blocker) = block_the_worker(&sched, &closes);
    let flooded = sched.spawn(flooded, "run", Payload::empty()).unwrap();
    assert_eq!(sched.state(flooded.pid()), Some(ProcessState::Ready));
    for id in 0..FLOOD as u32 {
        sched
            .send(flooded.pid(), Message::new("flood", Payload::new(id)))
            .unwrap();
    }
    gate.release.send(()).unwrap();
    join(blocker).unwrap();
    let (batches, ids) = join(flooded)
        .unwrap()
        .downcast::<(Vec<usize>, Vec<u32>)>()
        .unwrap();
    assert!(batches.len() >= FLOOD / 8, "{} steps", batches.len());
    assert!(batches.iter().all(|&b| b <= 8), "{batches:?}");
    assert_eq!(
        ids,
        (0..FLOOD as u32).collect::<Vec<_>>(),
        "each once, in order"
    );
}

/// An idle process with a backlog past one batch keeps stepping (nothing else would wake it).
#[test]
fn a_flooded_mailbox_is_delivered_in_bounded_batches_in_order() {
    check_flood(Flooded {
        expected: FLOOD,
        batches: Vec::new(),
        ids: Vec::new(),
    });
}

/// The same contract with a process that keeps itself runnable (`Continue`).
#[test]
fn a_flooded_mailbox_is_delivered_in_bounded_batches_to_a_continuing_process() {
    let closes = support::counter();
    let mut batches = Vec::new();
    let mut ids = Vec::new();
    check_flood(FnProcess::new(&closes, move |events, out| {
        batches.push(events.len());
        for event in events.drain() {
            match event {
                Event::Message(m) => ids.push(m.payload.downcast::<u32>().unwrap()),
                other => return Err(format!("unexpected {other:?}").into()),
            }
        }
        if ids.len() == FLOOD {
            out.done(Payload::new((batches.clone(), ids.clone())));
        }
        Ok(())
    }));
}

// ---------------------------------------------------------------------------------------------
// Observable state
// ---------------------------------------------------------------------------------------------

/// Async command that never completes.
struct Never;
procsched::command!(Never => Payload);

#[test]
fn state_observes_idle_blocked_and_none_after_completion() {
    let sched = Scheduler::builder()
        .workers(2)
        .async_handler(|_: Never| std::future::pending::<Result<Payload, CommandError>>())
        .build()
        .unwrap();
    let closes = support::counter();

    let idle = sched
        .spawn(
            FnProcess::new(&closes, echo_step()),
            "run",
            Payload::empty(),
        )
        .unwrap();
    let idle_pid = idle.pid();
    wait_for_state(sched.handle(), idle_pid, ProcessState::Idle);
    sched
        .send(idle_pid, Message::new("go", Payload::new(1u8)))
        .unwrap();
    assert_eq!(join(idle).unwrap().downcast::<u8>().unwrap(), 1);
    assert_eq!(sched.state(idle_pid), None);

    let mut yielded = false;
    let blocked = sched
        .spawn(
            FnProcess::new(&closes, move |events, out| {
                if !yielded {
                    yielded = true;
                    out.yield_command(1, Never);
                    out.wait();
                    return Ok(());
                }
                match events.pop() {
                    // A message wakes a blocked process too.
                    Some(Event::Message(m)) => out.done(m.payload),
                    other => return Err(format!("unexpected {other:?}").into()),
                }
                Ok(())
            }),
            "run",
            Payload::empty(),
        )
        .unwrap();
    let blocked_pid = blocked.pid();
    wait_for_state(sched.handle(), blocked_pid, ProcessState::Blocked);
    sched
        .send(blocked_pid, Message::new("go", Payload::new(2u8)))
        .unwrap();
    assert_eq!(join(blocked).unwrap().downcast::<u8>().unwrap(), 2);
    assert_eq!(sched.state(blocked_pid), None);
    assert_eq!(count(&closes), 2);
}
