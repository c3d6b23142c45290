//! Public-API tests of faults at the edges: a builder used twice or after an error, and
//! destructors of user values that panic on paths that refuse them (unknown PIDs, refused
//! spawns, failed `init`). A panic in user code must never unwind into the caller.

mod support;

use procsched::{
    error::{BuildError, InitError, SpawnError},
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
    BoxError, Message, Payload, Pid, Scheduler,
};
use std::sync::atomic::Ordering::SeqCst;
use support::*;

struct Double(u64);
procsched::command!(Double => Payload);

/// Yields one `Double(21)`, finishes with its result.
fn doubler() -> FnProcess {
    FnProcess::new(&support::counter(), |events, out| {
        match events.pop() {
            None => {
                out.yield_command(1, Double(21));
                out.wait();
            }
            Some(Event::YieldComplete { result, .. }) => out.done(result?),
            Some(other) => return Err(format!("unexpected {other:?}").into()),
        }
        Ok(())
    })
}

fn answer(sched: &Scheduler) -> u64 {
    let handle = sched.spawn(doubler(), "run", Payload::empty()).unwrap();
    join(handle).unwrap().downcast::<u64>().unwrap()
}

#[test]
fn a_builder_builds_again_with_the_same_handlers() {
    let mut builder = Scheduler::builder();
    builder.workers(1).inline_handler(|Double(n): Double| {
        Ok::<_, procsched::error::CommandError>(Payload::new(n * 2))
    });
    let first = builder.build().unwrap();
    let second = builder.build().unwrap();
    assert_eq!(answer(&first), 42);
    assert_eq!(
        answer(&second),
        42,
        "the second scheduler has the handler too"
    );
}

#[test]
fn a_duplicate_handler_fails_every_build_and_leaves_the_builder_whole() {
    let mut builder = Scheduler::builder();
    builder
        .workers(1)
        .inline_handler(|Double(n): Double| {
            Ok::<_, procsched::error::CommandError>(Payload::new(n * 2))
        })
        .inline_handler(|Double(n): Double| {
            Ok::<_, procsched::error::CommandError>(Payload::new(n * 3))
        });
    for _ in 0..2 {
        let err = builder.build().unwrap_err();
        assert!(
            matches!(err, BuildError::DuplicateHandler(name) if name.contains("Double")),
            "{err}"
        );
    }
}

/// Panics when dropped (after counting the drop).
struct Grenade(Counter);

impl Drop for Grenade {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("{EXPECTED_PANIC}: destructor");
    }
}

#[test]
fn a_message_to_a_never_created_slot_is_handed_back_without_unwinding() {
    quiet_panics();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let drops = support::counter();
    // Slot 1 000 000 was never created: the table has no cell to deliver to.
    let nowhere = Pid::from_raw(1 << 26 | 1_000_000).unwrap();
    let message = Message::new("boom", Payload::new(Grenade(drops.clone())));
    let err = sched.send(nowhere, message).unwrap_err();
    assert!(err.is_not_found() && err.pid() == nowhere, "{err}");
    assert_eq!(count(&drops), 0, "not dropped inside send: handed back");
    let message = err.into_message().expect("handed back");
    // Dropping it is the caller's business (and panics here, as the caller's own code).
    assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(message))).is_err());
    assert_eq!(count(&drops), 1);
}

/// A process whose destructor panics; `init` fails when `fail` is set.
struct Volatile {
    fail: bool,
    _grenade: Grenade,
}

impl Process for Volatile {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        if self.fail {
            Err(InitError::failed("refused"))
        } else {
            Ok(())
        }
    }
    fn step(&mut self, _: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        out.idle();
        Ok(())
    }
}

#[test]
fn a_spawn_refused_by_the_limit_drops_its_process_and_input_without_unwinding() {
    quiet_panics();
    let sched = Scheduler::builder()
        .workers(1)
        .max_processes(0)
        .build()
        .unwrap();
    let drops = support::counter();
    let process = Volatile {
        fail: false,
        _grenade: Grenade(drops.clone()),
    };
    let input = Payload::new(Grenade(drops.clone()));
    let err = sched.spawn(process, "run", input).unwrap_err();
    assert!(matches!(err, SpawnError::Limit(0)), "{err}");
    assert_eq!(count(&drops), 2, "process and input dropped once each");
    assert_eq!(sched.live_processes(), 0);
}

#[test]
fn a_failed_init_whose_process_destructor_panics_returns_the_init_error() {
    quiet_panics();
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let drops = support::counter();
    let process = Volatile {
        fail: true,
        _grenade: Grenade(drops.clone()),
    };
    let err = sched.spawn(process, "run", Payload::empty()).unwrap_err();
    assert!(matches!(err, SpawnError::Init(_)), "{err}");
    assert_eq!(count(&drops), 1);
    assert_eq!(sched.live_processes(), 0);
    assert_eq!(sched.handle().registered_processes(), 0);
    // The scheduler is healthy: a process spawns, is terminated, and its handle resolves.
    let process = Volatile {
        fail: false,
        _grenade: Grenade(drops.clone()),
    };
    let handle = sched.spawn(process, "run", Payload::empty()).unwrap();
    sched.terminate(handle.pid()).unwrap();
    // Its destructor panics when the finished process is dropped: contained and counted, and
    // the outcome is still what happened to it.
    let err = join(handle).unwrap_err();
    assert!(err.is_terminated(), "{err:?}");
    assert_eq!(count(&drops), 2);
    assert_eq!(
        sched.metrics().destructor_panics,
        2,
        "the failed spawn's, then this one's"
    );
}
