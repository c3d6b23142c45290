//! `Duration::MAX` is how a caller says "no limit" (tokio's `timeout` takes it): every API that
//! takes a timeout waits as if unbounded, never panics on the deadline's overflow.

mod support;

use procsched::prelude::*;
use std::time::Duration;
use support::*;

/// A process answering one ask with 1.
fn answerer(sched: &Scheduler) -> ProcessHandle<(), Reply<u8>> {
    sched
        .spawn_fn(|cx: ProcessCx<Reply<u8>>| async move {
            let _ = cx.recv().await?.send(1);
            Ok::<_, BoxError>(())
        })
        .unwrap()
}

#[test]
fn an_ask_within_duration_max_waits_for_its_answer() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    // From outside any process, and from a body (where the ask is a yield).
    let answers = answerer(&sched);
    let asked = sched.block_on(answers.addr().ask_within(Duration::MAX, |reply| reply));
    assert_eq!(asked.unwrap(), 1);
    let answers = answerer(&sched);
    let addr = answers.addr();
    let asker = sched
        .spawn_fn(move |_: ProcessCx| async move {
            Ok::<_, BoxError>(addr.ask_within(Duration::MAX, |reply| reply).await?)
        })
        .unwrap();
    assert_eq!(sched.block_on(asker).unwrap(), 1);
    sched.shutdown(HANG_GUARD);
}

#[test]
fn shutdown_with_duration_max_returns_once_every_process_finished() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let idle = sched
        .spawn_fn(|cx: ProcessCx<u8>| async move { Ok::<_, BoxError>(cx.recv().await?) })
        .unwrap();
    let report = sched.shutdown(Duration::MAX);
    assert_eq!(report.graceful, 1, "{report:?}");
    assert!(sched.block_on(idle).unwrap_err().is_cancelled());
    assert!(sched.wait_for_abandoned(Duration::MAX));
}

#[test]
fn shutdown_async_with_duration_max_returns_once_every_process_finished() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let report = futures::executor::block_on(sched.shutdown_async(Duration::MAX));
    assert_eq!(report.total(), 0, "{report:?}");
}

#[test]
fn a_scheduler_with_an_unbounded_drop_timeout_drops() {
    let sched = Scheduler::builder()
        .workers(1)
        .drop_timeout(Duration::MAX)
        .build()
        .unwrap();
    let idle = sched
        .spawn_fn(|cx: ProcessCx<u8>| async move { Ok::<_, BoxError>(cx.recv().await?) })
        .unwrap();
    drop(sched);
    assert!(futures::executor::block_on(idle)
        .unwrap_err()
        .is_cancelled());
}
