//! How a body's `Err` is read: a cancellation it propagates with `?` ends it cancelled (the
//! receiving futures' reports, and during a shutdown a child's handle that reports its own
//! cancellation); anything else ends it failed — whatever the error's `source` chain looks like.

mod support;

use procsched::prelude::*;
use std::time::Duration;
use support::*;

/// A parent that spawns a child waiting for one message, says so on `started`, and returns
/// the child's output with `?`.
fn parent_of_a_waiting_child(
    sched: &Scheduler,
    started: std::sync::mpsc::Sender<Pid>,
) -> ProcessHandle<u8, ()> {
    sched
        .spawn_fn(move |cx: ProcessCx<()>| async move {
            let child = cx
                .spawn_fn(|cx: ProcessCx<u8>| async move { Ok::<_, BoxError>(cx.recv().await?) })?;
            started.send(child.pid()).unwrap();
            Ok::<_, BoxError>(child.await?)
        })
        .unwrap()
}

#[test]
fn a_childs_cancellation_propagated_during_a_shutdown_ends_the_parent_cancelled() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (started, child) = std::sync::mpsc::channel();
    let parent = parent_of_a_waiting_child(&sched, started);
    let down = sched.monitor(parent.pid());
    child.recv_timeout(HANG_GUARD).unwrap();
    let report = sched.shutdown(HANG_GUARD);
    assert_eq!(report.graceful, 2, "{report:?}");
    assert!(sched.block_on(parent).unwrap_err().is_cancelled());
    assert!(sched.block_on(down).reason.is_shutdown());
    let metrics = sched.metrics();
    assert_eq!(metrics.finished.cancelled, 2);
    assert_eq!((metrics.exits.shutdown, metrics.exits.failed), (2, 0));
}

#[test]
fn a_childs_cancellation_propagated_outside_a_shutdown_ends_the_parent_failed() {
    // Only the child was asked to finish: the parent's `?` is the parent's own failure.
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (started, child) = std::sync::mpsc::channel();
    let parent = parent_of_a_waiting_child(&sched, started);
    let child = child.recv_timeout(HANG_GUARD).unwrap();
    sched.handle().cancel(child).unwrap();
    let error = sched.block_on(parent).unwrap_err();
    assert!(error.is_failed(), "{error:?}");
    sched.shutdown(HANG_GUARD);
}

#[test]
fn an_error_whose_source_chain_is_a_cycle_ends_the_process_failed() {
    /// Its own source: a walk of the chain never ends on its own.
    #[derive(Debug)]
    struct Cycle;
    impl std::fmt::Display for Cycle {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a cyclic error")
        }
    }
    impl std::error::Error for Cycle {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(self)
        }
    }
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let cyclic = sched
        .spawn_fn(|_: ProcessCx| async { Err::<(), _>(Cycle) })
        .unwrap();
    let ended = sched.block_on(async { tokio::time::timeout(HANG_GUARD, cyclic).await });
    let error = ended.expect("hang guard: the process ends").unwrap_err();
    assert!(error.is_failed(), "{error:?}");
    // The worker is free: another process runs.
    let next = sched
        .spawn_fn(|_: ProcessCx| async { Ok::<_, BoxError>(7) })
        .unwrap();
    assert_eq!(sched.block_on(next).unwrap(), 7);
    sched.shutdown(Duration::ZERO);
}

/// A cancel goes ahead of the messages queued before it, which stay readable after it (drained
/// with `now_or_never` until `None`), and a body not started yet runs all the same: its first
/// receive reports the cancel.
#[test]
fn a_cancel_goes_ahead_of_queued_messages_which_stay_readable() {
    use futures::FutureExt;
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let parent = sched
        .spawn_fn(|cx: ProcessCx<()>| async move {
            // The one worker runs this body: the child is spawned, sent to and cancelled
            // before its first poll.
            let child = cx.spawn_fn(|cx: ProcessCx<u32>| async move {
                let first = cx.recv().await;
                let mut drained = Vec::new();
                while let Some(Ok(n)) = cx.recv().now_or_never() {
                    drained.push(n);
                }
                Ok::<_, BoxError>((matches!(first, Err(RecvError::Cancelled(_))), drained))
            })?;
            child.addr().send(1)?;
            child.addr().send(2)?;
            cx.scheduler().cancel(child.pid())?;
            Ok::<_, BoxError>(child.await?)
        })
        .unwrap();
    let (cancelled_first, drained) = sched.block_on(parent).unwrap();
    assert!(cancelled_first, "the first receive reports the cancel");
    assert_eq!(drained, [1, 2], "then the queued messages, in order");
    sched.shutdown(HANG_GUARD);
}

/// The same drain after a cancel heard through `cx.cancelled()` rather than a receive: the
/// messages queued while the body waited for something else (not receiving) are readable at
/// once.
#[test]
fn messages_queued_while_a_body_awaits_cancelled_stay_readable_after_it() {
    use futures::FutureExt;
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (waiting, waits) = std::sync::mpsc::channel();
    let body = sched
        .spawn_fn(move |cx: ProcessCx<u32>| async move {
            waiting.send(()).unwrap();
            let reason = cx.cancelled().await.unwrap_err();
            let mut drained = Vec::new();
            while let Some(Ok(n)) = cx.recv().now_or_never() {
                drained.push(n);
            }
            Ok::<_, BoxError>((reason, drained))
        })
        .unwrap();
    waits.recv_timeout(HANG_GUARD).unwrap();
    for n in 0..5 {
        body.addr().send(n).unwrap();
    }
    sched.handle().cancel(body.pid()).unwrap();
    let (reason, drained) = sched.block_on(body).unwrap();
    assert!(matches!(
        reason,
        RecvError::Cancelled(procsched::error::CancelReason::Stop)
    ));
    assert_eq!(drained, [0, 1, 2, 3, 4], "the queued messages, in order");
    sched.shutdown(HANG_GUARD);
}
