//! Public-API tests of where async handlers run: a handler whose future completes at once is
//! polled on the worker that dispatched it and completes within the same poll of the process
//! (no tokio task, no cross-thread wake); one that is pending moves to the handler runtime.

mod support;

use procsched::prelude::*;
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
fn a_handler_ready_at_once_completes_on_the_worker_and_a_pending_one_on_tokio() {
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
    assert_eq!(later, "handler-runtime");
    // Nothing is left on the runtime: the ready handler never became a task there.
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
