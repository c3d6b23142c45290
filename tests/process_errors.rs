//! Public-API tests of the process contract's failures: `init` errors and panics returned by
//! `spawn`, command errors and handler panics delivered to the yielding process, and step and
//! close errors and panics reported on the handle, with the workers surviving every one.
//!
//! Every test asserts outcomes (counts, results, errors). Deadlines appear only as hang guards.

mod support;

use procsched::{
    error::{CommandError, InitError, SpawnError},
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Payload, Scheduler,
};
use std::sync::atomic::Ordering::SeqCst;
use support::inc_counter::{counter_sched, run_counters, with_inc, Counter};
use support::*;

// ---------------------------------------------------------------------------------------------
// Init errors
// ---------------------------------------------------------------------------------------------

enum InitMode {
    UnknownMethod,
    Fail,
    Panic,
}

struct BadInit {
    mode: InitMode,
    closes: support::Counter,
}

impl Process for BadInit {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, method: &str, _: Payload) -> Result<(), InitError> {
        match self.mode {
            InitMode::UnknownMethod => Err(InitError::unknown_method(method)),
            InitMode::Fail => Err(InitError::failed("bad input")),
            InitMode::Panic => panic!("{EXPECTED_PANIC}: in init"),
        }
    }

    fn step(&mut self, _: &mut Events, _: &mut StepOutput) -> Result<(), BoxError> {
        panic!("a process whose init failed was stepped");
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, SeqCst);
    }
}

#[test]
fn init_errors_are_returned_by_spawn_and_close_still_runs() {
    quiet_panics();
    let sched = counter_sched(1);
    let closes = support::counter();
    let spawn = |mode| {
        let process = BadInit {
            mode,
            closes: closes.clone(),
        };
        sched.spawn(process, "walk", Payload::empty()).unwrap_err()
    };

    let err = spawn(InitMode::UnknownMethod);
    assert!(err.is_unknown_method(), "{err:?}");
    assert_eq!(
        err.to_string(),
        "process init failed: unknown entry method `walk`"
    );
    assert_eq!(count(&closes), 1);

    let err = spawn(InitMode::Fail);
    assert!(!err.is_unknown_method());
    match &err {
        SpawnError::Init(InitError::Failed(source)) => assert_eq!(source.to_string(), "bad input"),
        other => panic!("{other:?}"),
    }
    assert_eq!(count(&closes), 2);

    match spawn(InitMode::Panic) {
        SpawnError::InitPanicked(message) => {
            assert_eq!(message, format!("{EXPECTED_PANIC}: in init"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(count(&closes), 3);

    // Also through the real entry-point check of a well-behaved process.
    let err = sched
        .spawn(Counter::new(&closes), "walk", Payload::new(1u64))
        .unwrap_err();
    assert!(err.is_unknown_method());
    assert_eq!(count(&closes), 4);

    assert_eq!(sched.live_processes(), 0, "failed spawns hold no slot");
    assert_eq!(sched.handle().registered_processes(), 0);
    run_counters(sched.handle(), 10, 10);
}

// ---------------------------------------------------------------------------------------------
// Command errors
// ---------------------------------------------------------------------------------------------

/// Yields one command (tag 7) and finishes with the `Result` its completion carried.
struct YieldOne<C: Send + 'static> {
    command: Option<C>,
}

impl<C: Send + 'static> YieldOne<C> {
    fn new(command: C) -> YieldOne<C> {
        YieldOne {
            command: Some(command),
        }
    }
}

impl<C: Send + 'static> Process for YieldOne<C> {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        if let Some(command) = self.command.take() {
            assert!(events.is_empty());
            out.yield_command(7, command);
            out.wait();
            return Ok(());
        }
        match events.pop() {
            Some(Event::YieldComplete { tag: 7, result }) => {
                assert!(
                    events.is_empty(),
                    "exactly one completion: {result:?} then {events:?}"
                );
                out.done(Payload::new(result));
            }
            other => return Err(format!("unexpected {other:?}").into()),
        }
        Ok(())
    }
}

/// Runs a `YieldOne(command)` and returns the completion's result.
fn yield_one<C: Send + 'static>(sched: &Scheduler, command: C) -> Result<Payload, CommandError> {
    let handle = sched
        .spawn(YieldOne::new(command), "run", Payload::empty())
        .unwrap();
    join(handle)
        .expect("the process finishes")
        .downcast::<Result<Payload, CommandError>>()
        .expect("a command result")
}

struct Unhandled;
struct Refused;
procsched::command!(Refused => Payload);
struct InlinePanics;
procsched::command!(InlinePanics => Payload);
struct AsyncPanics;
procsched::command!(AsyncPanics => Payload);
struct AsyncPanicsOnCreate;
procsched::command!(AsyncPanicsOnCreate => Payload);
struct BlockingPanics;
procsched::command!(BlockingPanics => Payload);

#[test]
fn command_errors_and_handler_panics_reach_the_process() {
    quiet_panics();
    let sched = with_inc(Scheduler::builder().workers(1))
        .inline_handler(|_: Refused| Err(CommandError::failed("nope")))
        .inline_handler(|_: InlinePanics| -> Result<Payload, CommandError> {
            panic!("{EXPECTED_PANIC}: inline")
        })
        .async_handler(|_: AsyncPanics| async {
            tokio::task::yield_now().await;
            if true {
                panic!("{EXPECTED_PANIC}: async");
            }
            Ok::<Payload, CommandError>(Payload::empty())
        })
        .blocking_handler(|_: BlockingPanics| -> Result<Payload, CommandError> {
            panic!("{EXPECTED_PANIC}: blocking")
        })
        .build()
        .unwrap();

    for _ in 0..scaled(20) {
        match yield_one(&sched, Unhandled).unwrap_err() {
            CommandError::NoHandler(name) => assert!(name.ends_with("Unhandled"), "{name}"),
            other => panic!("{other:?}"),
        }
        match yield_one(&sched, Refused).unwrap_err() {
            e @ CommandError::Failed(_) => assert_eq!(e.to_string(), "command failed: nope"),
            other => panic!("{other:?}"),
        }
        let panics = [
            (yield_one(&sched, InlinePanics), "inline"),
            (yield_one(&sched, AsyncPanics), "async"),
            (yield_one(&sched, BlockingPanics), "blocking"),
        ];
        for (result, which) in panics {
            match result.unwrap_err() {
                CommandError::Panicked(message) => {
                    assert_eq!(message, format!("{EXPECTED_PANIC}: {which}"));
                }
                other => panic!("{which}: {other:?}"),
            }
        }
        // The one worker, the tokio runtime and the blocking pool all keep working.
        run_counters(sched.handle(), 5, 20);
    }
    assert_eq!(sched.live_processes(), 0);
}

#[test]

fn an_async_handler_panicking_before_returning_its_future_completes_the_yield_once() {
    quiet_panics();
    let sched = Scheduler::builder()
        .workers(1)
        .async_handler(
            |_: AsyncPanicsOnCreate| -> std::future::Ready<Result<Payload, CommandError>> {
                panic!("{EXPECTED_PANIC}: async handler creation")
            },
        )
        .build()
        .unwrap();
    match yield_one(&sched, AsyncPanicsOnCreate).unwrap_err() {
        CommandError::Panicked(message) => {
            assert_eq!(message, format!("{EXPECTED_PANIC}: async handler creation"));
        }
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Step errors and panics
// ---------------------------------------------------------------------------------------------

#[test]
fn step_errors_step_panics_and_close_panics_are_reported_and_the_worker_survives() {
    quiet_panics();
    let sched = counter_sched(1);
    let closes = support::counter();
    for _ in 0..scaled(20) {
        let failing = sched
            .spawn(
                FnProcess::new(&closes, |_, _| Err("out of cheese".into())),
                "run",
                Payload::empty(),
            )
            .unwrap();
        let pid = failing.pid();
        let err = join(failing).unwrap_err();
        assert!(err.is_failed(), "{err:?}");
        assert!(!err.is_panicked() && !err.is_terminated() && !err.is_cancelled());
        assert_eq!(err.pid(), pid);
        assert_eq!(
            std::error::Error::source(&err).map(|s| s.to_string()),
            Some("out of cheese".to_owned())
        );
        assert_eq!(err.into_failure().unwrap().to_string(), "out of cheese");

        let mut steps = 0;
        let panicking = sched
            .spawn(
                FnProcess::new(&closes, move |_, out| {
                    steps += 1;
                    if steps == 3 {
                        panic!("{EXPECTED_PANIC}: in step");
                    }
                    out.continue_();
                    Ok(())
                }),
                "run",
                Payload::empty(),
            )
            .unwrap();
        let err = join(panicking).unwrap_err();
        assert!(err.is_panicked(), "{err:?}");
        assert_eq!(
            err.panic_message(),
            Some(&*format!("{EXPECTED_PANIC}: in step"))
        );

        let close_panics = FnProcess::new(&closes, |_, out| {
            out.done(Payload::new(1u8));
            Ok(())
        })
        .on_close(|| panic!("{EXPECTED_PANIC}: in close"));
        let err = join(sched.spawn(close_panics, "run", Payload::empty()).unwrap()).unwrap_err();
        assert!(err.is_panicked(), "{err:?}");
        assert!(
            err.panic_message()
                .unwrap()
                .contains(&format!("{EXPECTED_PANIC}: in close")),
            "{err:?}"
        );

        // The single worker keeps running.
        run_counters(sched.handle(), 3, 10);
    }
    assert_eq!(count(&closes), 3 * scaled(20), "close ran once per process");
    assert_eq!(sched.live_processes(), 0);
    assert_eq!(sched.handle().registered_processes(), 0);
}

#[test]
fn a_close_that_panics_after_a_failed_step_reports_both() {
    // The panic is the outcome (as a crashing OTP `terminate/2` replaces the reason), but the
    // step's error — often what `close` tripped over — is still in the report.
    quiet_panics();
    let sched = counter_sched(1);
    let closes = support::counter();
    let failing = FnProcess::new(&closes, |_, _| Err("out of cheese".into()))
        .on_close(|| panic!("{EXPECTED_PANIC}: in close"));
    let err = join(sched.spawn(failing, "run", Payload::empty()).unwrap()).unwrap_err();
    assert!(err.is_panicked(), "{err:?}");
    let message = err.panic_message().unwrap();
    assert!(
        message.contains(&format!("{EXPECTED_PANIC}: in close"))
            && message.contains("failed: out of cheese"),
        "{message}"
    );
    assert_eq!(count(&closes), 1, "close ran once");
}
