//! A poll that runs on (a process that always has another event and a budget that never runs
//! out) yields its worker once the executor's monitor has seen it run for a tick: the processes
//! queued behind it run, with no spare thread to run them (Go's sysmon preemption request,
//! `executor/monitor.rs`). So does one step of an `async fn` body that receives a long batch
//! of messages, between two of its receives.

use procsched::prelude::*;
use procsched::{
    error::CommandError,
    state_machine::{Event, Events, Process, StepOutput},
};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The hang guard: without preemption the spinner's one poll would last until this passes.
const GUARD: Duration = Duration::from_secs(30);

struct Again;
procsched::command!(Again => ());

/// Completes an inline `Again` every step, so each step is followed by another in the same poll,
/// until `other_ran`; says when it first ran.
struct Spinner {
    other_ran: Arc<AtomicBool>,
    started: Option<mpsc::Sender<()>>,
    steps: u64,
    give_up: Instant,
}

impl Process for Spinner {
    type Output = u64;

    fn step(&mut self, events: &mut Events, out: &mut StepOutput<u64>) -> Result<(), BoxError> {
        for event in events.drain() {
            if let Event::YieldComplete { result, .. } = event {
                result?;
            }
        }
        if let Some(started) = self.started.take() {
            let _ = started.send(());
        }
        self.steps += 1;
        if self.other_ran.load(SeqCst) {
            out.done(self.steps);
            return Ok(());
        }
        if self.steps.is_multiple_of(1024) && Instant::now() > self.give_up {
            return Err("hang guard: the poll was never asked to yield".into());
        }
        out.yield_command(self.steps, Again);
        out.wait();
        Ok(())
    }
}

/// Spawns a process that sets `ran`, and waits for its end: it runs only once the worker is
/// given up.
fn run_behind(sched: &Scheduler, ran: &Arc<AtomicBool>) {
    let ran = ran.clone();
    let other = sched
        .spawn_fn(move |_cx: ProcessCx| async move {
            ran.store(true, SeqCst);
            Ok::<_, BoxError>(())
        })
        .unwrap();
    sched
        .block_on(other)
        .expect("the process behind the busy one ran");
}

#[test]
fn a_poll_that_never_ends_yields_its_worker_to_the_processes_behind_it() {
    let sched = Scheduler::builder()
        .workers(1)
        .max_spare_workers(0)
        .step_budget(usize::MAX)
        .long_poll_threshold(Duration::from_millis(4))
        .inline_handler(|Again: Again| Ok::<_, CommandError>(()))
        .build()
        .unwrap();
    let other_ran = Arc::new(AtomicBool::new(false));
    let (started, spinning) = mpsc::channel();
    let spinner = sched
        .spawn(
            Spinner {
                other_ran: other_ran.clone(),
                started: Some(started),
                steps: 0,
                give_up: Instant::now() + GUARD,
            },
            "run",
            Payload::empty(),
        )
        .unwrap();
    spinning
        .recv_timeout(GUARD)
        .expect("hang guard: the spinner never ran");

    // The one worker is inside the spinner's poll, and no spare may start: only the spinner
    // giving the worker up lets this run.
    run_behind(&sched, &other_ran);
    let steps = sched
        .block_on(spinner)
        .expect("the spinner saw the other run");
    assert!(steps > 1, "one poll stepped on before it yielded");
}

/// Messages in the body's one batch; each costs it [`WORK`] of CPU.
const BATCH: u64 = 100_000;
const WORK: Duration = Duration::from_micros(20);

#[test]
fn a_body_receiving_a_long_batch_in_one_step_yields_its_worker_between_two_receives() {
    let sched = Scheduler::builder()
        .workers(1)
        .max_spare_workers(0)
        .max_batch(usize::MAX)
        .long_poll_threshold(Duration::from_millis(4))
        .build()
        .unwrap();
    let other_ran = Arc::new(AtomicBool::new(false));
    let (started, receiving) = mpsc::channel();
    let (go, gate) = tokio::sync::oneshot::channel::<()>();
    let body = {
        let other_ran = other_ran.clone();
        sched
            .spawn_fn(move |cx: ProcessCx<u64>| async move {
                // Held here until every message is queued: the first receive's step gets them
                // all in one batch (`max_batch` is unbounded).
                gate.await?;
                let mut received = 0;
                while received < BATCH {
                    cx.recv().await?;
                    if received == 0 {
                        let _ = started.send(());
                    }
                    received += 1;
                    if other_ran.load(SeqCst) {
                        return Ok::<_, BoxError>(received);
                    }
                    let until = Instant::now() + WORK;
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }
                Err("the whole batch was received in one step: it never yielded".into())
            })
            .unwrap()
    };
    let addr = body.addr();
    for n in 0..BATCH {
        addr.send(n).unwrap();
    }
    go.send(()).unwrap();
    receiving
        .recv_timeout(GUARD)
        .expect("hang guard: the body never received");

    // The one worker is inside the body's step, and no spare may start: only the body giving
    // the worker up between two receives lets this run before the batch is through.
    run_behind(&sched, &other_ran);
    let received = sched
        .block_on(body)
        .expect("the body saw the other run before its batch was through");
    assert!(received > 1, "the step received on before it yielded");
}
