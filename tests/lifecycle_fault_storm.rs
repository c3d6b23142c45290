//! Public-API tests of a fault storm: thousands of processes with one random fault each (init,
//! step or close errors and panics, handler panics and errors), every fault reported where it
//! belongs, then a normal workload on the same scheduler.
//!
//! Every test asserts outcomes (counts, results, errors). Deadlines appear only as hang guards.

mod support;

use procsched::{
    error::{CommandError, InitError, SpawnError},
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Payload, Scheduler,
};
use std::sync::atomic::Ordering::SeqCst;
use support::*;

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
            Ok::<_, procsched::error::CommandError>(Payload::empty())
        })
        .async_handler(|AsyncJob(bad)| async move {
            tokio::task::yield_now().await;
            assert!(!bad, "{EXPECTED_PANIC}: async handler");
            Ok::<_, procsched::error::CommandError>(Payload::empty())
        })
        .blocking_handler(|BlockingJob(bad)| {
            assert!(!bad, "{EXPECTED_PANIC}: blocking handler");
            Ok::<_, procsched::error::CommandError>(Payload::empty())
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
