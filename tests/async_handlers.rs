//! Public-API tests of where async handlers run: a handler whose future completes at once is
//! polled on the worker that dispatched it and completes within the same poll of the process
//! (no task, no cross-thread wake); one that is pending goes on as a task of the scheduler's
//! own executor, inside the handler runtime's context, so its tokio code (timers, `spawn`) works
//! as on a tokio worker — and it is cancelled when that runtime shuts down.

mod support;

use procsched::prelude::*;
use procsched::{
    error::{CommandError, InitError},
    metrics::ProcessState,
    state_machine::{Event, Events, Process, ProcessContext, StepOutput},
};
use std::time::Duration;
use support::*;

/// Replies with the name of the thread its future completed on.
struct WhereNow;
/// The same, after yielding to tokio once (so its first poll is pending).
struct WhereLater;
procsched::command!(WhereNow => String, WhereLater => String);

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("").to_owned()
}

#[test]
fn a_handler_ready_at_once_completes_on_the_worker_and_a_pending_one_stays_on_the_workers() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("handler-runtime")
        .enable_all()
        .build()
        .unwrap();
    let sched = Scheduler::builder()
        .workers(1)
        .thread_name("sched")
        .tokio_handle(runtime.handle().clone())
        .async_handler(|WhereNow: WhereNow| async { Ok::<_, BoxError>(thread_name()) })
        .async_handler(|WhereLater: WhereLater| async {
            tokio::task::yield_now().await;
            Ok::<_, BoxError>(thread_name())
        })
        .build()
        .unwrap();
    let handle = sched
        .spawn_fn(|cx: ProcessCx| async move {
            let now = cx.call(WhereNow).await?;
            let later = cx.call(WhereLater).await?;
            Ok::<_, BoxError>((now, later))
        })
        .unwrap();
    let (now, later) = join_typed(handle).unwrap();
    assert!(now.starts_with("sched"), "ran on {now}");
    assert!(later.starts_with("sched"), "ran on {later}");
    // Nothing is left on the runtime: neither handler became a task there (the bridge's
    // sentinel, there while the pending one waited, ends with it).
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while runtime.metrics().num_alive_tasks() > 0 {
        assert!(std::time::Instant::now() < deadline, "hang guard");
        std::thread::yield_now();
    }
    assert_eq!(sched.metrics().yields.asynchronous, 2);
    sched.shutdown(Duration::from_secs(5));
}

#[test]
fn a_handler_ready_at_once_may_still_use_the_runtime() {
    // The first poll runs inside the handler runtime's context: spawning from it works.
    struct SpawnThere;
    procsched::command!(SpawnThere => u32);
    let sched = Scheduler::builder()
        .workers(1)
        .async_handler(|SpawnThere: SpawnThere| async {
            let task = tokio::spawn(async { 41u32 });
            Ok::<_, BoxError>(task.await? + 1)
        })
        .build()
        .unwrap();
    let handle = sched
        .spawn_fn(|cx: ProcessCx| async move { Ok::<_, BoxError>(cx.call(SpawnThere).await?) })
        .unwrap();
    assert_eq!(join_typed(handle).unwrap(), 42);
}

/// Sleeps on a tokio timer, spawns a tokio task, then replies with the task's output.
struct TimerThenSpawn;
procsched::command!(TimerThenSpawn => u32);

#[test]
fn a_pending_handler_uses_tokio_timers_and_spawn_from_the_workers() {
    let runtime = handler_runtime();
    let sched = Scheduler::builder()
        .workers(2)
        .tokio_handle(runtime.handle().clone())
        .async_handler(|TimerThenSpawn: TimerThenSpawn| async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let task = tokio::spawn(async { 20u32 });
            tokio::task::yield_now().await;
            Ok::<_, BoxError>(task.await? + 1)
        })
        .build()
        .unwrap();
    let handles: Vec<_> = (0..64)
        .map(|_| {
            sched
                .spawn_fn(|cx: ProcessCx| async move {
                    let first = cx.call(TimerThenSpawn).await?;
                    let second = cx.call(TimerThenSpawn).await?;
                    Ok::<_, BoxError>(first + second)
                })
                .unwrap()
        })
        .collect();
    for handle in handles {
        assert_eq!(join_typed(handle).unwrap(), 42);
    }
    assert_eq!(sched.metrics().yields.asynchronous, 128);
    sched.shutdown(Duration::from_secs(5));
}

/// Never completes; counts its future's drops.
struct Forever(support::DropCounter);
procsched::command!(Forever => ());

#[test]
fn a_pending_handler_is_dropped_when_its_process_is_terminated() {
    let drops = support::counter();
    let sched = Scheduler::builder()
        .workers(2)
        .async_handler(|Forever(guard): Forever| async move {
            let _guard = guard;
            std::future::pending::<Result<(), BoxError>>().await
        })
        .build()
        .unwrap();
    let guard = support::DropCounter(drops.clone());
    let handle = sched
        .spawn_fn(move |cx: ProcessCx| async move {
            cx.call(Forever(guard)).await?;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    wait_for_state(sched.handle(), handle.pid(), ProcessState::Blocked);
    assert_eq!(support::count(&drops), 0, "the handler still waits");
    sched.handle().terminate(handle.pid()).unwrap();
    assert!(join_typed(handle).is_err(), "terminated");
    support::wait_until("the handler's future dropped", || {
        support::count(&drops) == 1
    });
    sched.shutdown(Duration::from_secs(5));
}

/// Panics after its first await.
struct LatePanic;
procsched::command!(LatePanic => ());

#[test]
fn a_pending_handler_that_panics_later_completes_its_yield_with_panicked() {
    quiet_panics();
    let sched = Scheduler::builder()
        .workers(1)
        .async_handler(|LatePanic: LatePanic| async {
            tokio::task::yield_now().await;
            panic!("{EXPECTED_PANIC}: after the first await");
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .build()
        .unwrap();
    let handle = sched
        .spawn_fn(|cx: ProcessCx| async move {
            Ok::<_, BoxError>(match cx.call(LatePanic).await {
                Err(CommandError::Panicked(message)) => message,
                other => format!("unexpected {other:?}"),
            })
        })
        .unwrap();
    let message = join_typed(handle).unwrap();
    assert!(message.contains("after the first await"), "{message}");
    // The worker survived: another process still runs.
    let after = sched
        .spawn_fn(|_cx: ProcessCx| async { Ok::<_, BoxError>(7u8) })
        .unwrap();
    assert_eq!(join_typed(after).unwrap(), 7);
    sched.shutdown(Duration::from_secs(5));
}

/// Never completes (async).
struct Never;
procsched::command!(Never => Payload);

/// Waits for one async command, then finishes with how its yield completed.
struct AwaitOne;

impl Process for AwaitOne {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        match events.pop() {
            None => {
                out.yield_command(1, Never);
                out.wait();
            }
            Some(Event::YieldComplete { result, .. }) => {
                out.done(Payload::new(result.map(|_| ()).map_err(|e| e.to_string())))
            }
            Some(other) => return Err(format!("unexpected {other:?}").into()),
        }
        Ok(())
    }
}

/// How an [`AwaitOne`]'s yield completed.
fn outcome(sched: &Scheduler, handle: ProcessHandle) -> Result<(), String> {
    sched
        .block_on(handle)
        .expect("process completes")
        .downcast::<Result<(), String>>()
        .expect("result type")
}

#[test]
fn the_handler_runtime_shutting_down_cancels_yields_instead_of_hanging() {
    let runtime = handler_runtime();
    let sched = Scheduler::builder()
        .workers(2)
        .tokio_handle(runtime.handle().clone())
        .async_handler(|Never: Never| std::future::pending::<Result<Payload, CommandError>>())
        .build()
        .unwrap();
    // One process waits on a handler task when the runtime goes away...
    let waiting = sched.spawn(AwaitOne, "run", Payload::empty()).unwrap();
    wait_for_state(sched.handle(), waiting.pid(), ProcessState::Blocked);
    runtime.shutdown_background();
    assert_eq!(
        outcome(&sched, waiting),
        Err(CommandError::Cancelled.to_string())
    );
    // ... and one yields after it is gone.
    let late = sched.spawn(AwaitOne, "run", Payload::empty()).unwrap();
    assert_eq!(
        outcome(&sched, late),
        Err(CommandError::Cancelled.to_string())
    );
    let report = sched.shutdown(HANG_GUARD);
    assert_eq!(report.forced, 0);
}

/// Awaits a tokio timer at its first poll (async).
struct Nap;
procsched::command!(Nap => Payload);

/// Waits for one `Nap`, then finishes with how its yield completed.
struct AwaitNap;

impl Process for AwaitNap {
    type Output = Payload;
    fn init(&mut self, _: &ProcessContext<'_>, _: &str, _: Payload) -> Result<(), InitError> {
        Ok(())
    }
    fn step(&mut self, events: &mut Events, out: &mut StepOutput) -> Result<(), BoxError> {
        match events.pop() {
            None => {
                out.yield_command(1, Nap);
                out.wait();
            }
            Some(Event::YieldComplete { result, .. }) => {
                out.done(Payload::new(result.map(|_| ()).map_err(|e| e.to_string())))
            }
            Some(other) => return Err(format!("unexpected {other:?}").into()),
        }
        Ok(())
    }
}

/// A handler started after its runtime is gone is not run (its first poll would meet tokio's
/// dead timer and panic): its yield completes `Cancelled`, as a blocking handler's does.
#[test]
fn an_async_handler_started_after_its_runtime_is_gone_completes_cancelled_not_panicked() {
    let runtime = handler_runtime();
    let naps = counter();
    let started = naps.clone();
    let sched = Scheduler::builder()
        .workers(2)
        .tokio_handle(runtime.handle().clone())
        .async_handler(|Never: Never| std::future::pending::<Result<Payload, CommandError>>())
        .async_handler(move |Nap: Nap| {
            started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                Ok::<_, CommandError>(Payload::empty())
            }
        })
        .build()
        .unwrap();
    // A handler waiting when the runtime goes away is what marks it gone.
    let waiting = sched.spawn(AwaitOne, "run", Payload::empty()).unwrap();
    wait_for_state(sched.handle(), waiting.pid(), ProcessState::Blocked);
    runtime.shutdown_background();
    assert_eq!(
        outcome(&sched, waiting),
        Err(CommandError::Cancelled.to_string())
    );
    quiet_panics();
    let late = sched.spawn(AwaitNap, "run", Payload::empty()).unwrap();
    assert_eq!(
        outcome(&sched, late),
        Err(CommandError::Cancelled.to_string())
    );
    assert_eq!(count(&naps), 0, "the handler was not run");
    let report = sched.shutdown(HANG_GUARD);
    assert_eq!(report.forced, 0);
}
