//! Public-API tests of the traps a tokio user can walk into: blocking calls on a thread that
//! drives async work panic with a message naming the async alternative (instead of hanging),
//! a scheduler built inside a current-thread runtime does not depend on that runtime being
//! driven, one given such a runtime explicitly runs its handlers there while it is driven, and
//! `shutdown_async` completes gracefully on such a runtime.
//!
//! Every potential hang runs on a helper thread behind a hang guard.

mod support;

use procsched::{
    error::CommandError,
    state_machine::{Event, Events, StepOutput},
    Payload, Scheduler,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;
use support::*;

/// Runs `f` on a fresh thread and returns the panic message it ended with, if any; a hang trips
/// the guard instead of hanging the test.
fn panic_of(f: impl FnOnce() + Send + 'static) -> Option<String> {
    quiet_panics();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let outcome = catch_unwind(AssertUnwindSafe(f)).err().map(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        });
        let _ = tx.send(outcome);
    });
    rx.recv_timeout(HANG_GUARD)
        .expect("hang guard: the call hung instead of panicking")
}

struct Nap;
procsched::command!(Nap => Payload);

/// Yields one `Nap` (an async handler), then finishes with its result.
fn napper() -> FnProcess {
    FnProcess::new(&support::counter(), |events, out| {
        match events.pop() {
            None => {
                out.yield_command(1, Nap);
                out.wait();
            }
            Some(Event::YieldComplete { result, .. }) => out.done(result?),
            Some(Event::Cancel { .. }) => out.wait(),
            Some(other) => return Err(format!("unexpected {other:?}").into()),
        }
        Ok(())
    })
}

fn nap_handler(
    builder: &mut procsched::config::SchedulerBuilder,
) -> &mut procsched::config::SchedulerBuilder {
    builder.async_handler(|Nap: Nap| async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        Ok::<_, CommandError>(Payload::new(5u8))
    })
}

#[test]
fn block_on_inside_a_current_thread_runtime_panics_instead_of_hanging() {
    let message = panic_of(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let sched = nap_handler(&mut Scheduler::builder())
                .tokio_handle(tokio::runtime::Handle::current())
                .build()
                .unwrap();
            let handle = sched.spawn(napper(), "run", Payload::empty()).unwrap();
            // Its handlers would never run while this thread blocks.
            let _ = sched.block_on(handle);
        });
    })
    .expect("block_on inside a runtime must panic");
    assert!(message.contains("Scheduler::block_on"), "{message}");
    assert!(
        message.contains(".await"),
        "names the alternative: {message}"
    );
}

#[test]
fn nested_block_on_from_sync_code_names_the_nesting_not_a_tokio_runtime() {
    // The outer call enters the processes' runtime for its future; the message must not blame
    // a tokio runtime the caller never started.
    let message = panic_of(|| {
        let sched = Scheduler::builder().workers(1).build().unwrap();
        sched.block_on(async { sched.block_on(async {}) });
    })
    .expect("a nested block_on must panic");
    assert!(message.contains("nested"), "{message}");
    assert!(!message.contains("tokio runtime"), "{message}");
    assert!(
        message.contains(".await"),
        "names the alternative: {message}"
    );
}

#[test]
fn sync_shutdown_inside_a_runtime_panics_and_names_shutdown_async() {
    let message = panic_of(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let sched = Scheduler::builder().workers(1).build().unwrap();
            sched.shutdown(Duration::from_secs(2));
        });
    })
    .expect("shutdown inside a runtime must panic");
    assert!(message.contains("shutdown_async"), "{message}");
}

#[test]
fn block_on_from_a_step_fails_the_process_instead_of_deadlocking_its_worker() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    // A process cannot reach the owning `Scheduler` by default; share it.
    let sched = std::sync::Arc::new(sched);
    let shared = sched.clone();
    let waits_on_itself = FnProcess::new(&support::counter(), move |_, _| {
        shared.block_on(async {});
        Ok(())
    });
    quiet_panics();
    let handle = sched
        .spawn(waits_on_itself, "run", Payload::empty())
        .unwrap();
    let err = join(handle).unwrap_err();
    assert!(err.is_panicked(), "{err:?}");
    let message = err.panic_message().unwrap_or_default().to_owned();
    assert!(message.contains("procsched worker"), "{message}");
    // The worker survived: other processes still run.
    let quick = FnProcess::new(&support::counter(), |_, out| {
        out.done(Payload::empty());
        Ok(())
    });
    assert!(join(sched.spawn(quick, "run", Payload::empty()).unwrap()).is_ok());
}

#[tokio::test]
async fn awaiting_a_handle_on_a_current_thread_runtime_given_explicitly_runs_its_handlers_there() {
    let (ran_on_tx, ran_on_rx) = mpsc::channel();
    let sched = Scheduler::builder()
        .tokio_handle(tokio::runtime::Handle::current())
        .async_handler(move |Nap: Nap| {
            let ran_on = ran_on_tx.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _ = ran_on.send(tokio::runtime::Handle::current().runtime_flavor());
                Ok::<_, CommandError>(Payload::new(5u8))
            }
        })
        .workers(1)
        .build()
        .unwrap();
    let handle = sched.spawn(napper(), "run", Payload::empty()).unwrap();
    let result = tokio::time::timeout(HANG_GUARD, handle)
        .await
        .expect("hang guard");
    assert_eq!(result.unwrap().downcast::<u8>().unwrap(), 5);
    // Inside this runtime's context (the scheduler's own runtime is a multi-thread one).
    assert_eq!(
        ran_on_rx.try_recv().unwrap(),
        tokio::runtime::RuntimeFlavor::CurrentThread
    );
    let report = sched.shutdown_async(Duration::from_secs(1)).await;
    assert_eq!(report.total(), 0);
}

/// Idle until `Cancel`; then one more `Nap` (which needs the runtime), then done.
fn naps_on_cancel() -> FnProcess {
    FnProcess::new(
        &support::counter(),
        |events: &mut Events, out: &mut StepOutput| {
            match events.pop() {
                Some(Event::Cancel { .. }) => {
                    out.yield_command(1, Nap);
                    out.wait();
                }
                Some(Event::YieldComplete { result, .. }) => out.done(result?),
                Some(other) => return Err(format!("unexpected {other:?}").into()),
                None => out.idle(),
            }
            Ok(())
        },
    )
}

#[tokio::test]
async fn shutdown_async_on_a_current_thread_runtime_is_graceful_with_its_handlers_there() {
    let sched = nap_handler(&mut Scheduler::builder())
        .tokio_handle(tokio::runtime::Handle::current())
        .workers(2)
        .build()
        .unwrap();
    let handles: Vec<_> = (0..20)
        .map(|_| {
            sched
                .spawn(naps_on_cancel(), "run", Payload::empty())
                .unwrap()
        })
        .collect();
    for handle in &handles {
        wait_for_state(
            sched.handle(),
            handle.pid(),
            procsched::metrics::ProcessState::Idle,
        );
    }
    // Graceful only if the handlers run on this very thread while shutdown_async awaits.
    let report = tokio::time::timeout(HANG_GUARD, sched.shutdown_async(HANG_GUARD))
        .await
        .expect("hang guard");
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (20, 0, 0)
    );
    for handle in handles {
        assert_eq!(handle.await.unwrap().downcast::<u8>().unwrap(), 5);
    }
}

/// How a scheduler is built inside a current-thread runtime that is then left undriven.
#[derive(Clone, Copy, Debug)]
enum BuiltInside {
    /// With the runtime entered (`Runtime::enter`).
    Entered,
    /// Inside the runtime's `block_on`.
    BlockOn,
}

/// `Scheduler::block_on`, from sync code, of a body that awaits a tokio timer (guarded by a
/// tokio timeout inside `block_on`, as its docs suggest), and of an async handler's result.
fn block_on_after_building_inside_an_undriven_current_thread_runtime(built: BuiltInside) {
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let build = || nap_handler(&mut Scheduler::builder()).workers(1).build();
        let sched = match built {
            BuiltInside::Entered => {
                let _inside = runtime.enter();
                build().unwrap()
            }
            BuiltInside::BlockOn => runtime.block_on(async { build() }).unwrap(),
        };
        let sleeper = sched
            .spawn_fn(|_cx: procsched::ProcessCx| async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                Ok::<_, procsched::BoxError>(7u8)
            })
            .unwrap();
        let slept = sched.block_on(async { tokio::time::timeout(HANG_GUARD, sleeper).await });
        let napped = sched.block_on(sched.spawn(napper(), "run", Payload::empty()).unwrap());
        let _ = done_tx.send((
            slept.map(|result| result.unwrap()).ok(),
            napped.unwrap().downcast::<u8>().unwrap(),
        ));
        drop(runtime);
    });
    let (slept, napped) = done_rx
        .recv_timeout(HANG_GUARD)
        .unwrap_or_else(|_| panic!("hang guard: block_on hung ({built:?})"));
    assert_eq!(slept, Some(7), "the body's timer fired ({built:?})");
    assert_eq!(napped, 5, "the async handler ran ({built:?})");
}

#[test]
fn block_on_serves_a_scheduler_built_with_an_undriven_current_thread_runtime_entered() {
    block_on_after_building_inside_an_undriven_current_thread_runtime(BuiltInside::Entered);
}

#[test]
fn block_on_serves_a_scheduler_built_inside_an_undriven_current_thread_runtimes_block_on() {
    block_on_after_building_inside_an_undriven_current_thread_runtime(BuiltInside::BlockOn);
}
