//! Public-API tests of processes written as `async fn`s (`spawn_fn`): every binding semantic of
//! the adapter — calls as yields (several in one step), receive and Idle, cancellation observed
//! or ignored, foreign futures, typed errors, contained panics, exactly-once cleanup, terminate.
//!
//! Deadlines appear only as hang guards.

mod support;

use procsched::error::{CancelReason, TypeMismatch};
use procsched::prelude::*;
use procsched::{error::CommandError, metrics::ProcessState};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc};
use std::time::Duration;
use support::*;

struct Double(u64);
struct Meet(Arc<tokio::sync::Barrier>);
struct Hold(Arc<tokio::sync::Notify>);
procsched::command!(Double => u64, Meet => &'static str, Hold => ());

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .inline_handler(|Double(n): Double| Ok::<_, BoxError>(n * 2))
        .async_handler(|Meet(barrier): Meet| async move {
            barrier.wait().await;
            Ok::<_, BoxError>("met")
        })
        .async_handler(|Hold(release): Hold| async move {
            release.notified().await;
            Ok::<_, BoxError>(())
        })
        .build()
        .unwrap()
}

#[test]
fn an_inline_call_completes_and_the_handle_is_typed() {
    let sched = scheduler(1);
    let handle: ProcessHandle<u64> = sched
        .spawn_fn(|cx: ProcessCx| async move {
            let a = cx.call(Double(1)).await?;
            let b = cx.call(Double(a)).await?;
            Ok::<_, BoxError>(b)
        })
        .unwrap();
    assert_eq!(join_typed(handle).unwrap(), 4);
}

#[test]
fn calls_awaited_together_are_dispatched_in_one_step() {
    // Each handler waits at a barrier for the other: both complete only if both were dispatched
    // before either finished.
    let sched = scheduler(2);
    let handle = sched
        .spawn_fn(|cx: ProcessCx| async move {
            let barrier = Arc::new(tokio::sync::Barrier::new(2));
            let (a, b) = futures::join!(
                cx.call(Meet(barrier.clone())),
                cx.call(Meet(barrier.clone()))
            );
            Ok::<_, BoxError>((a?, b?))
        })
        .unwrap();
    assert_eq!(join_typed(handle).unwrap(), ("met", "met"));
}

#[test]
fn a_process_is_blocked_while_a_call_is_outstanding_and_idle_while_it_receives() {
    let sched = scheduler(2);
    let release = Arc::new(tokio::sync::Notify::new());
    let hold = release.clone();
    let handle = sched
        .spawn_fn(|cx: ProcessCx<u64>| async move {
            cx.call(Hold(hold)).await?;
            let n = cx.recv().await?;
            Ok::<_, BoxError>(n)
        })
        .unwrap();
    let pid = handle.pid();
    wait_for_state(sched.handle(), pid, ProcessState::Blocked);
    release.notify_one();
    wait_for_state(sched.handle(), pid, ProcessState::Idle);
    sched
        .send(pid, Message::new("n", Payload::new(9u64)))
        .unwrap();
    assert_eq!(join_typed(handle).unwrap(), 9);
}

#[test]
fn a_message_of_the_wrong_type_is_a_typed_error_naming_both_types() {
    let sched = scheduler(1);
    let handle = sched
        .spawn_fn(|cx: ProcessCx<u64>| async move {
            // An untyped sender can still send anything: the receive says what it got.
            let wrong = cx.recv().await;
            Ok::<_, BoxError>(wrong)
        })
        .unwrap();
    sched
        .send(handle.pid(), Message::new("n", Payload::new("nine")))
        .unwrap();
    match join_typed(handle).unwrap() {
        Err(RecvError::TypeMismatch(mismatch)) => {
            assert_eq!((mismatch.expected(), mismatch.actual()), ("u64", "&str"));
        }
        other => panic!("unexpected {other:?}"),
    }
    let err: TypeMismatch = Payload::new(1i32).take::<u64>().unwrap_err();
    let boxed: BoxError = err.into(); // `?` works into BoxError
    assert!(boxed.to_string().contains("`u64`"));
}

#[test]
fn cancel_is_observed_by_recv_and_the_process_finishes_gracefully() {
    let sched = scheduler(2);
    let handle = sched
        .spawn_fn(|cx: ProcessCx<u32>| async move {
            let mut received = 0u32;
            loop {
                match cx.recv().await {
                    Ok(_) => received += 1,
                    Err(RecvError::Cancelled(CancelReason::Shutdown)) => return Ok(received),
                    Err(other) => return Err(BoxError::from(other)),
                }
            }
        })
        .unwrap();
    for i in 0..3u32 {
        sched
            .send(handle.pid(), Message::new("n", Payload::new(i)))
            .unwrap();
    }
    wait_until("all three received", || {
        sched.state(handle.pid()) == Some(ProcessState::Idle)
    });
    let report = sched.shutdown(HANG_GUARD);
    assert_eq!(
        (report.graceful, report.forced, report.abandoned),
        (1, 0, 0)
    );
    assert_eq!(join_typed(handle).unwrap(), 3);
}

#[test]
fn a_process_that_ignores_cancel_is_forced_and_its_state_dropped_once() {
    let sched = scheduler(1);
    let drops = support::counter();
    let guard = DropCounter(drops.clone());
    let handle = sched
        .spawn_fn(move |cx: ProcessCx<u8>| async move {
            let _guard = guard;
            loop {
                // Ignores everything, Cancel included.
                let _ = cx.recv().await;
            }
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        })
        .unwrap();
    wait_for_state(sched.handle(), handle.pid(), ProcessState::Idle);
    let report = sched.shutdown(Duration::from_millis(50));
    // Forced — or abandoned, if a loaded machine held a worker inside its Cancel step.
    assert_eq!((report.graceful, report.forced + report.abandoned), (0, 1));
    assert!(sched.wait_for_abandoned(HANG_GUARD));
    assert_eq!(count(&drops), 1, "the body's state is dropped exactly once");
    assert!(join_typed(handle).unwrap_err().is_cancelled());
}

#[test]
fn cancelled_resolves_when_the_process_is_asked_to_finish() {
    let sched = scheduler(1);
    let handle = sched
        .spawn_fn(|cx: ProcessCx| async move {
            let Err(why) = cx.cancelled().await;
            Ok::<_, BoxError>(why)
        })
        .unwrap();
    wait_for_state(sched.handle(), handle.pid(), ProcessState::Idle);
    assert_eq!(sched.shutdown(HANG_GUARD).graceful, 1);
    assert_eq!(
        join_typed(handle).unwrap(),
        RecvError::Cancelled(CancelReason::Shutdown)
    );
}

#[test]
fn foreign_futures_wake_the_process_a_channel_and_a_tokio_timer() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let sched = Scheduler::builder()
        .workers(2)
        .tokio_handle(runtime.handle().clone())
        .build()
        .unwrap();
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let handle = sched
        .spawn_fn(|_: ProcessCx| async move {
            // A tokio timer, awaited directly in the body: the worker is inside the runtime.
            tokio::time::sleep(Duration::from_millis(1)).await;
            let value = rx.await?;
            Ok::<_, BoxError>(value)
        })
        .unwrap();
    wait_until("the body waits on the channel", || {
        sched.state(handle.pid()) == Some(ProcessState::Blocked)
    });
    tx.send(5).unwrap();
    assert_eq!(join_typed(handle).unwrap(), 5);
}

#[test]
fn a_child_process_is_awaited_from_the_body() {
    let sched = scheduler(2);
    let handle = sched
        .spawn_fn(|cx: ProcessCx| async move {
            let child = cx.spawn_fn(|cx: ProcessCx| async move {
                Ok::<_, BoxError>(cx.call(Double(10)).await?)
            })?;
            Ok::<_, BoxError>(child.await? + 1)
        })
        .unwrap();
    assert_eq!(join_typed(handle).unwrap(), 21);
}

#[test]
fn a_panic_in_the_body_is_contained_and_reported() {
    quiet_panics();
    let sched = scheduler(1);
    let drops = support::counter();
    let guard = DropCounter(drops.clone());
    let handle = sched
        .spawn_fn(move |cx: ProcessCx| async move {
            let _guard = guard;
            cx.call(Double(1)).await?;
            if true {
                panic!("{EXPECTED_PANIC}: in the body");
            }
            Ok::<(), BoxError>(())
        })
        .unwrap();
    let err = join_typed(handle).unwrap_err();
    assert!(err.is_panicked(), "{err:?}");
    assert!(err.panic_message().unwrap().contains("in the body"));
    assert_eq!(count(&drops), 1);
    // The worker survived.
    let next = sched
        .spawn_fn(|cx: ProcessCx| async move { Ok::<_, BoxError>(cx.call(Double(2)).await?) })
        .unwrap();
    assert_eq!(join_typed(next).unwrap(), 4);
}

#[test]
fn an_error_from_the_body_fails_the_process_with_it_as_source() {
    let sched = scheduler(1);
    let handle = sched
        .spawn_fn(|_: ProcessCx| async move { Err::<(), _>(std::io::Error::other("disk on fire")) })
        .unwrap();
    let err = join_typed(handle).unwrap_err();
    assert!(err.is_failed(), "{err:?}");
    assert!(err
        .into_failure()
        .unwrap()
        .to_string()
        .contains("disk on fire"));
}

#[test]
fn terminate_stops_a_body_blocked_on_a_call_and_drops_its_state_once() {
    let sched = scheduler(2);
    let drops = support::counter();
    let guard = DropCounter(drops.clone());
    let never = Arc::new(tokio::sync::Notify::new());
    let handle = sched
        .spawn_fn(move |cx: ProcessCx| async move {
            let _guard = guard;
            cx.call(Hold(never)).await?;
            Ok::<_, BoxError>(())
        })
        .unwrap();
    wait_for_state(sched.handle(), handle.pid(), ProcessState::Blocked);
    sched.terminate(handle.pid()).unwrap();
    assert!(join_typed(handle).unwrap_err().is_terminated());
    assert_eq!(count(&drops), 1);
}

#[test]
fn a_deadline_on_a_call_times_out() {
    let sched = scheduler(1);
    let never = Arc::new(tokio::sync::Notify::new());
    let handle = sched
        .spawn_fn(move |cx: ProcessCx| async move {
            let late = cx.call_within(Hold(never), Duration::from_millis(5)).await;
            Ok::<_, BoxError>(matches!(late, Err(CommandError::TimedOut)))
        })
        .unwrap();
    assert!(join_typed(handle).unwrap());
}

#[test]
fn a_body_that_keeps_yielding_does_not_starve_others_on_one_worker() {
    let sched = scheduler(1);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinning = {
        let stop = stop.clone();
        sched
            .spawn_fn(move |cx: ProcessCx| async move {
                let mut rounds = 0u64;
                while !stop.load(SeqCst) {
                    rounds += 1;
                    cx.yield_now().await;
                }
                Ok::<_, BoxError>(rounds)
            })
            .unwrap()
    };
    let (tx, rx) = mpsc::channel();
    for i in 0..100u64 {
        let tx = tx.clone();
        let _detached = sched
            .spawn_fn(move |cx: ProcessCx| async move {
                let doubled = cx.call(Double(i)).await?;
                tx.send(doubled).unwrap();
                Ok::<_, BoxError>(())
            })
            .unwrap();
    }
    let sum: u64 = (0..100).map(|_| recv(&rx)).sum();
    assert_eq!(sum, (0..100u64).map(|i| i * 2).sum::<u64>());
    stop.store(true, SeqCst);
    assert!(join_typed(spinning).unwrap() > 0);
}

#[tokio::test]
async fn a_tokio_app_awaits_typed_handles_in_a_join_set() {
    let sched = Arc::new(scheduler(2));
    let mut set = tokio::task::JoinSet::new();
    for i in 0..50u64 {
        let handle = sched
            .spawn_fn(
                move |cx: ProcessCx| async move { Ok::<_, BoxError>(cx.call(Double(i)).await?) },
            )
            .unwrap();
        set.spawn(handle);
    }
    let mut total = 0;
    while let Some(joined) = set.join_next().await {
        total += joined.unwrap().unwrap();
    }
    assert_eq!(total, (0..50u64).map(|i| i * 2).sum::<u64>());
    assert_eq!(sched.shutdown_async(HANG_GUARD).await.total(), 0);
}

/// A scheduler built outside any tokio runtime, with no handler needing one: a body awaits a
/// tokio timer, tokio I/O and `tokio::spawn` all the same (the scheduler builds a small runtime
/// on the first `spawn_fn`, and its workers enter it) — on a spare worker too.
#[test]
// tokio compiles its I/O out under `--cfg loom`.
#[cfg(not(loom))]
fn tokio_timers_io_and_spawn_work_in_a_body_on_a_scheduler_built_outside_tokio() {
    assert!(tokio::runtime::Handle::try_current().is_err());
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let handle = sched
        .spawn_fn(|_: ProcessCx| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let port = listener.local_addr()?.port();
            let spawned = tokio::spawn(async { 20 }).await?;
            // Blocking off the worker: the rest of the body may run on a spare.
            procsched::executor::block_in_place(|| std::thread::sleep(Duration::from_millis(1)));
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok::<_, BoxError>((port > 0, spawned + 1))
        })
        .unwrap();
    assert_eq!(sched.block_on(handle).unwrap(), (true, 21));
}

/// `Scheduler::block_on` from plain synchronous code runs its future inside the scheduler's
/// tokio runtime: a tokio timer there (the natural hang guard around a handle) works whether
/// or not a body built that runtime first.
#[test]
#[cfg(not(loom))]
fn block_on_outside_tokio_can_await_tokio_timers() {
    assert!(tokio::runtime::Handle::try_current().is_err());
    // No process yet: nothing has built the scheduler's runtime before `block_on` needs it.
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let limit = Duration::from_secs(30);
    let timed = sched.block_on(async { tokio::time::timeout(limit, async { 6 * 7 }).await });
    assert_eq!(timed.unwrap(), 42);
    let handle = sched
        .spawn_fn(|_: ProcessCx| async move { Ok::<_, BoxError>(7) })
        .unwrap();
    let joined = sched.block_on(async { tokio::time::timeout(limit, handle).await });
    assert_eq!(joined.expect("hang guard").unwrap(), 7);
}

/// A receive polled and then dropped in the same step (a `select!`'s losing branch) does not
/// leave the body `Idle`: waiting only on a foreign future, it is `Blocked`, whichever receive
/// it was.
#[test]
fn a_receive_that_lost_a_select_does_not_leave_the_body_idle() {
    use futures::FutureExt;
    for receive in ["recv", "recv_message", "cancelled", "recv_any", "recv_down"] {
        let sched = scheduler(2);
        let (waiting, body_waits) = mpsc::channel();
        let (release, released) = futures::channel::oneshot::channel::<()>();
        let handle = sched
            .spawn_fn(move |cx: ProcessCx<u32>| async move {
                let lost = std::future::ready(());
                match receive {
                    "recv" => futures::select_biased! { _ = cx.recv().fuse() => {}, _ = lost.fuse() => {} },
                    "recv_message" => futures::select_biased! { _ = cx.recv_message().fuse() => {}, _ = lost.fuse() => {} },
                    "cancelled" => futures::select_biased! { _ = cx.cancelled().fuse() => {}, _ = lost.fuse() => {} },
                    "recv_any" => futures::select_biased! { _ = cx.recv_any().fuse() => {}, _ = lost.fuse() => {} },
                    _ => futures::select_biased! { _ = cx.recv_down().fuse() => {}, _ = lost.fuse() => {} },
                }
                waiting.send(()).unwrap();
                released.await?;
                Ok::<_, BoxError>(())
            })
            .unwrap();
        recv(&body_waits);
        wait_until("the body parks", || {
            matches!(
                sched.state(handle.pid()),
                Some(ProcessState::Idle | ProcessState::Blocked)
            )
        });
        assert_eq!(
            sched.state(handle.pid()),
            Some(ProcessState::Blocked),
            "{receive}: waits only on a channel"
        );
        release.send(()).unwrap();
        join_typed(handle).unwrap();
    }
}
