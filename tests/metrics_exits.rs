//! `SchedulerMetrics::exits` counts each finished process under the exit reason its handle,
//! its links and its monitors carry (one `ExitReason` shared by all four), while `finished`
//! classes the same ends by how the scheduler ended them.

mod support;

use procsched::metrics::{ExitCounts, FinishCounts};
use procsched::prelude::*;
use procsched::supervision::ExitReason;
use support::{quiet_panics, EXPECTED_PANIC};

/// What a puppet does with its one message.
enum Cmd {
    Finish,
    Fail,
    Panic,
}

async fn puppet(cx: ProcessCx<Cmd>) -> Result<(), BoxError> {
    match cx.recv().await? {
        Cmd::Finish => Ok(()),
        Cmd::Fail => Err("bad input".into()),
        Cmd::Panic => panic!("{EXPECTED_PANIC}: told to"),
    }
}

/// Spawns a puppet, lets `end` end it, and returns the reason its monitor heard.
fn ended(sched: &Scheduler, end: impl FnOnce(&Scheduler, Pid)) -> ExitReason {
    let puppet = sched.spawn_fn(puppet).unwrap();
    let down = sched.monitor(puppet.pid());
    end(sched, puppet.pid());
    let reason = sched.block_on(down).reason;
    let _ = sched.block_on(puppet);
    reason
}

#[test]
fn every_end_is_counted_under_the_reason_its_monitor_hears() {
    quiet_panics();
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let tell = |cmd| move |sched: &Scheduler, pid| sched.handle().addr(pid).send(cmd).unwrap();
    let reasons = [
        ended(&sched, tell(Cmd::Finish)),
        ended(&sched, tell(Cmd::Fail)),
        ended(&sched, tell(Cmd::Panic)),
        ended(&sched, |sched, pid| sched.terminate(pid).unwrap()),
        ended(&sched, |sched, pid| sched.handle().cancel(pid).unwrap()),
        // Killed through a link by a process that failed: the link's reason.
        ended(&sched, |sched, pid| {
            let failing = sched.spawn_fn(puppet).unwrap();
            sched.handle().link(pid, failing.pid()).unwrap();
            failing.addr().send(Cmd::Fail).unwrap();
        }),
    ];
    assert!(reasons[0].is_normal() && reasons[1].is_failed() && reasons[2].is_panicked());
    assert!(reasons[3].is_killed() && reasons[4].is_shutdown() && reasons[5].is_failed());
    let metrics = sched.metrics();
    assert_eq!(
        (
            metrics.exits.normal,
            metrics.exits.failed,
            metrics.exits.panicked
        ),
        (1, 3, 1),
        "the linked puppet's own failure and the one it killed: {:?}",
        metrics.exits
    );
    assert_eq!((metrics.exits.killed, metrics.exits.shutdown), (1, 1));
    assert_eq!((metrics.exits.no_proc, metrics.exits.no_connection), (0, 0));
    // The same seven ends, classed by how the scheduler ended them.
    let FinishCounts {
        done,
        failed,
        panicked,
        terminated,
        cancelled,
        ..
    } = metrics.finished;
    assert_eq!(
        (done, failed, panicked, terminated, cancelled),
        (1, 2, 1, 2, 1)
    );
    assert_eq!(metrics.exits.total(), metrics.finished.total());
    let _: ExitCounts = metrics.exits;
}

#[test]
fn a_link_to_a_process_already_gone_kills_with_no_proc() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let gone = sched.spawn_fn(puppet).unwrap();
    let gone_pid = gone.pid();
    gone.addr().send(Cmd::Finish).unwrap();
    sched.block_on(gone).unwrap();
    let reason = ended(&sched, |sched, pid| {
        let _ = sched.handle().link(pid, gone_pid);
    });
    assert!(reason.is_no_proc(), "{reason:?}");
    assert_eq!(sched.metrics().exits.no_proc, 1);
}

#[test]
fn a_process_that_outlives_the_shutdown_deadline_ends_shutdown_everywhere() {
    // Its step is still running when the deadline passes (abandoned), then returns `Ok`: its
    // handle reads cancelled, so its monitor and the metrics hear `Shutdown`, not `Normal`.
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let stuck = sched
        .spawn_fn(move |_: ProcessCx| async move {
            entered_tx.send(()).unwrap();
            released.recv().unwrap(); // blocks its step past the deadline
            Ok::<_, BoxError>(())
        })
        .unwrap();
    let down = sched.monitor(stuck.pid());
    entered.recv_timeout(support::HANG_GUARD).unwrap();
    let report = sched.shutdown(std::time::Duration::ZERO);
    assert_eq!(report.abandoned, 1, "{report:?}");
    release.send(()).unwrap();
    assert!(sched.wait_for_abandoned(support::HANG_GUARD));
    assert!(sched.block_on(stuck).unwrap_err().is_cancelled());
    assert!(sched.block_on(down).reason.is_shutdown());
    let exits = sched.metrics().exits;
    assert_eq!((exits.shutdown, exits.normal), (1, 0), "{exits:?}");
}

#[test]
fn a_process_asked_to_finish_by_cancel_is_counted_cancelled_however_it_ends() {
    // `FinishCounts::cancelled`: after a `cancel`, however the process ends on its own;
    // `exits` counts the reason its links hear: `Shutdown` for the one that ended well
    // (asked to finish, it did), its own error for the other.
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let ending = |fails: bool| {
        sched
            .spawn_fn(move |cx: ProcessCx<()>| async move {
                let _ = cx.cancelled().await; // asked to finish: it ends as it likes
                if fails {
                    return Err::<(), BoxError>("cleanup failed".into());
                }
                Ok(())
            })
            .unwrap()
    };
    let (finishes, fails) = (ending(false), ending(true));
    sched.cancel(finishes.pid()).unwrap();
    sched.cancel(fails.pid()).unwrap();
    sched.block_on(finishes).unwrap();
    assert!(sched.block_on(fails).unwrap_err().is_failed());
    let metrics = sched.metrics();
    let finished = metrics.finished;
    assert_eq!(
        (finished.cancelled, finished.done, finished.failed),
        (2, 0, 0),
        "{finished:?}"
    );
    assert_eq!(
        (
            metrics.exits.normal,
            metrics.exits.shutdown,
            metrics.exits.failed
        ),
        (0, 1, 1)
    );
}

#[test]
fn a_cancelled_process_then_terminated_is_counted_terminated() {
    // `FinishCounts::terminated`: outside a shutdown, a stop ends it whatever came before.
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let stubborn = sched
        .spawn_fn(|cx: ProcessCx<()>| async move {
            let _ = cx.cancelled().await;
            std::future::pending::<()>().await; // ignores the cancel
            Ok::<_, BoxError>(())
        })
        .unwrap();
    sched.cancel(stubborn.pid()).unwrap();
    sched.terminate(stubborn.pid()).unwrap();
    assert!(sched.block_on(stubborn).unwrap_err().is_terminated());
    let finished = sched.metrics().finished;
    assert_eq!(
        (finished.terminated, finished.cancelled),
        (1, 0),
        "{finished:?}"
    );
}
