//! A scheduler that outlives the tokio runtime it adopted (`src/scheduler/outlived.rs`): built
//! inside one runtime — as a `static` scheduler first used in one `#[tokio::test]` is — and
//! used after that runtime shut down, from the next test's runtime or from a plain thread. Its
//! bodies' tokio timers, I/O and tasks work (in the scheduler's own runtime), and `block_on` of
//! a tokio timeout does not panic. (Not under loom, whose tokio has no I/O.)
#![cfg(not(loom))]

mod support;

use procsched::prelude::*;
use std::time::Duration;
use support::HANG_GUARD;

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A body that sleeps on tokio's timer, spawns a tokio task and binds a socket, then ends with
/// `n`.
fn tokio_body(sched: &Scheduler, n: u32) -> ProcessHandle<u32> {
    sched
        .spawn_fn(move |_: ProcessCx| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let doubled = tokio::spawn(async move { n * 2 }).await?;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            drop(listener);
            Ok::<_, BoxError>(doubled / 2)
        })
        .unwrap()
}

/// A scheduler built inside a runtime that is then dropped, after one body ran there.
fn outlived_scheduler(build: impl FnOnce(&tokio::runtime::Runtime) -> Scheduler) -> Scheduler {
    let first = multi_thread();
    let sched = build(&first);
    let ran = first.block_on(async {
        tokio::time::timeout(HANG_GUARD, tokio_body(&sched, 1))
            .await
            .expect("hang guard")
    });
    assert_eq!(ran.unwrap(), 1, "the adopted runtime serves the body");
    drop(first);
    sched
}

fn ambient(runtime: &tokio::runtime::Runtime) -> Scheduler {
    runtime.block_on(async { Scheduler::builder().workers(2).build().unwrap() })
}

#[test]
fn bodies_spawned_from_the_next_runtime_use_tokio() {
    let sched = outlived_scheduler(ambient);
    let next = multi_thread();
    for n in 2..5 {
        let ran = next.block_on(async {
            tokio::time::timeout(HANG_GUARD, tokio_body(&sched, n))
                .await
                .expect("hang guard")
        });
        assert_eq!(ran.unwrap(), n);
    }
}

#[test]
fn bodies_spawned_and_awaited_from_a_plain_thread_use_tokio() {
    let sched = outlived_scheduler(ambient);
    let handle = tokio_body(&sched, 7);
    // `block_on` of a tokio timeout enters a live runtime (it had panicked on the dead one's).
    let ran = sched.block_on(async { tokio::time::timeout(HANG_GUARD, handle).await });
    assert_eq!(ran.expect("hang guard").unwrap(), 7);
}

#[test]
fn a_given_runtime_that_shut_down_is_left_too() {
    let sched = outlived_scheduler(|runtime| {
        Scheduler::builder()
            .workers(2)
            .tokio_handle(runtime.handle().clone())
            .build()
            .unwrap()
    });
    let handle = tokio_body(&sched, 9);
    let ran = sched.block_on(async { tokio::time::timeout(HANG_GUARD, handle).await });
    assert_eq!(ran.expect("hang guard").unwrap(), 9);
}

#[test]
fn a_scheduler_inside_its_live_runtime_keeps_it() {
    let runtime = multi_thread();
    let sched = ambient(&runtime);
    let (ours, theirs) = runtime.block_on(async {
        let ours = tokio::runtime::Handle::current().id();
        let theirs = sched
            .spawn_fn(|_: ProcessCx| async move {
                Ok::<_, BoxError>(tokio::runtime::Handle::current().id())
            })
            .unwrap();
        let theirs = tokio::time::timeout(HANG_GUARD, theirs)
            .await
            .expect("hang guard");
        (ours, theirs.unwrap())
    });
    assert_eq!(ours, theirs, "the body runs in the adopted runtime");
    // From a plain thread too: the runtime is alive.
    let theirs = sched
        .block_on(
            sched
                .spawn_fn(|_: ProcessCx| async move {
                    Ok::<_, BoxError>(tokio::runtime::Handle::current().id())
                })
                .unwrap(),
        )
        .unwrap();
    assert_eq!(ours, theirs);
}
