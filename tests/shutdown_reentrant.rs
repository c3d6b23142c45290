//! A shutdown called from user code the forced stop runs — a drop guard in a forced process's
//! body that shuts the application down with it — returns at once on the thread doing the
//! forcing (a closer thread of the forced stop), with the report so far, instead of waiting for
//! the stop it is part of.

mod support;

use procsched::metrics::ShutdownReport;
use procsched::{BoxError, ProcessCx, Scheduler};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc};
use std::time::Duration;
use support::*;

/// How the shutdowns are called: blocking, or awaited (driven by `futures::executor`).
#[derive(Clone, Copy)]
enum Call {
    Blocking,
    Awaited,
}

fn shut_down(sched: &Scheduler, call: Call, timeout: Duration) -> ShutdownReport {
    match call {
        Call::Blocking => sched.shutdown(timeout),
        Call::Awaited => futures::executor::block_on(sched.shutdown_async(timeout)),
    }
}

/// Shuts the scheduler down when dropped, and hands the report over.
struct ShutdownOnDrop {
    sched: Arc<Scheduler>,
    call: Call,
    report: mpsc::Sender<(ShutdownReport, std::thread::ThreadId)>,
}

impl Drop for ShutdownOnDrop {
    fn drop(&mut self) {
        let report = shut_down(&self.sched, self.call, Duration::from_millis(100));
        let _ = self.report.send((report, std::thread::current().id()));
    }
}

/// A process that ignores its `Cancel` and holds a [`ShutdownOnDrop`] (calling `nested`) is
/// forced by an `outer` shutdown on another thread: that shutdown returns, and so does the
/// nested one, which ran on a closer thread of the forced stop.
fn nested_shutdown_returns(outer: Call, nested: Call) {
    let sched = Arc::new(Scheduler::builder().workers(1).build().unwrap());
    let (nested_tx, nested_rx) = mpsc::channel();
    let started = counter();
    let guard = ShutdownOnDrop {
        sched: sched.clone(),
        call: nested,
        report: nested_tx,
    };
    let body_started = started.clone();
    let handle = sched
        .spawn_fn(move |_cx: ProcessCx| async move {
            let _guard = guard;
            body_started.fetch_add(1, SeqCst);
            // Ignores its Cancel: stopped by force, its guard dropped by the forced stop.
            std::future::pending::<()>().await;
            Ok::<(), BoxError>(())
        })
        .unwrap();
    wait_until("the body started", || count(&started) == 1);

    // The outer shutdown runs on a thread of its own, so that a hang fails the test.
    let (outer_tx, outer_rx) = mpsc::channel();
    let outer_sched = sched.clone();
    std::thread::spawn(move || {
        let report = shut_down(&outer_sched, outer, Duration::from_millis(20));
        let _ = outer_tx.send((report, std::thread::current().id()));
    });
    let (outer, outer_thread) = outer_rx
        .recv_timeout(HANG_GUARD)
        .expect("the outer shutdown returned (a nested shutdown deadlocked it)");
    let (nested, nested_thread) = nested_rx.recv_timeout(HANG_GUARD).unwrap();

    assert_ne!(
        nested_thread, outer_thread,
        "the guard ran on a closer thread of the forced stop, not on the shutdown's"
    );
    // The nested call's report is the one so far: its own process was not closed yet.
    assert!(!nested.is_complete(), "{nested:?}");
    assert_eq!(nested.graceful, 0, "{nested:?}");
    // The first call's report is the final one, and stays the one later callers get.
    assert_eq!(
        outer.graceful + outer.forced + outer.abandoned,
        1,
        "{outer:?}"
    );
    assert_eq!(shut_down(&sched, Call::Blocking, Duration::ZERO), outer);
    assert_eq!(shut_down(&sched, Call::Awaited, Duration::ZERO), outer);
    assert!(join_typed(handle).unwrap_err().is_cancelled());
}

#[test]
fn a_blocking_shutdown_from_a_forced_process_cleanup_returns_the_report_so_far() {
    nested_shutdown_returns(Call::Blocking, Call::Blocking);
}

#[test]
fn a_shutdown_from_a_process_cleanup_forced_by_an_awaited_shutdown_returns_the_report_so_far() {
    nested_shutdown_returns(Call::Awaited, Call::Blocking);
}

#[test]
fn an_awaited_shutdown_from_a_forced_process_cleanup_returns_the_report_so_far() {
    nested_shutdown_returns(Call::Blocking, Call::Awaited);
}

/// A shutdown on another thread while the first one forces waits for the first one's report.
#[test]
fn a_shutdown_from_another_thread_while_the_first_forces_gets_the_first_report() {
    let sched = Arc::new(Scheduler::builder().workers(1).build().unwrap());
    let started = counter();
    let (in_cleanup_tx, in_cleanup_rx) = mpsc::channel::<()>();
    let (go_on_tx, go_on_rx) = mpsc::channel::<()>();
    /// Tells the test it is being dropped, then waits for its word.
    struct Cleanup(mpsc::Sender<()>, mpsc::Receiver<()>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = self.0.send(());
            let _ = self.1.recv_timeout(HANG_GUARD);
        }
    }
    let cleanup = Cleanup(in_cleanup_tx, go_on_rx);
    let body_started = started.clone();
    let _handle = sched
        .spawn_fn(move |_cx: ProcessCx| async move {
            let _cleanup = cleanup;
            body_started.fetch_add(1, SeqCst);
            std::future::pending::<()>().await;
            Ok::<(), BoxError>(())
        })
        .unwrap();
    wait_until("the body started", || count(&started) == 1);
    let first = {
        let sched = sched.clone();
        std::thread::spawn(move || sched.shutdown(Duration::from_millis(20)))
    };
    in_cleanup_rx.recv_timeout(HANG_GUARD).unwrap();
    // The first shutdown is inside the forced process's cleanup now.
    let second = {
        let sched = sched.clone();
        std::thread::spawn(move || sched.shutdown(Duration::ZERO))
    };
    go_on_tx.send(()).unwrap();
    let first = first.join().unwrap();
    assert_eq!(second.join().unwrap(), first);
    assert_eq!(first.forced + first.abandoned, 1, "{first:?}");
}
