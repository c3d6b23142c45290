//! A scheduler shutdown leaves a supervisor's children to their supervisor, which stops them
//! in reverse start order. A child that outlives its supervisor (it traps exits) or unlinked
//! itself is nobody's child any more: the shutdown cancels it like any other process. And a
//! supervisor asked to finish while a child supervisor starts stops that child before it ends
//! (OTP: the start is synchronous, the stop follows it).

mod supervision_common;

use procsched::prelude::*;
use procsched::supervision::{ChildSpec, Supervisor, SupervisorRef};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use supervision_common::*;

/// Waits for one message, and reports `"cancelled"` on `heard` if a cancel ends that wait.
async fn wait_reporting_cancel(
    cx: &ProcessCx<()>,
    heard: &mpsc::Sender<&'static str>,
) -> Result<(), BoxError> {
    match cx.recv().await {
        Ok(()) => Ok(()),
        Err(cancelled) => {
            heard.send("cancelled").unwrap();
            Err(cancelled.into())
        }
    }
}

/// The shutdown cancels the orphan (which reports it on `heard`) and counts it graceful.
fn shutdown_cancels_the_orphan(sched: &Scheduler, heard: &mpsc::Receiver<&'static str>) {
    let report = sched.shutdown(GUARD);
    assert_eq!(heard.try_recv(), Ok("cancelled"));
    assert_eq!((report.graceful, report.forced), (1, 0), "{report:?}");
}

#[test]
fn a_child_that_outlived_its_supervisor_is_cancelled_by_the_shutdown() {
    let sched = scheduler(2);
    let (heard_tx, heard) = mpsc::channel();
    let spec = ChildSpec::new("trapper", move |start| {
        let heard = heard_tx.clone();
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.trap_exit(true);
            heard.send("trapping").unwrap();
            let exit = cx.recv_exit().await?; // its supervisor's end, as a message (OTP)
            assert!(exit.reason.is_killed(), "{exit:?}");
            heard.send("orphaned").unwrap();
            wait_reporting_cancel(&cx, &heard).await
        })
    });
    let supervisor = run(Supervisor::one_for_one().child(spec).start(sched.handle())).unwrap();
    assert_eq!(heard.recv_timeout(GUARD), Ok("trapping"));
    sched.terminate(supervisor.pid()).unwrap();
    assert_eq!(heard.recv_timeout(GUARD), Ok("orphaned"));
    shutdown_cancels_the_orphan(&sched, &heard);
}

#[test]
fn a_child_that_unlinked_from_its_supervisor_is_cancelled_by_the_shutdown() {
    let sched = scheduler(2);
    let (heard_tx, heard) = mpsc::channel();
    let spec = ChildSpec::new("loner", move |start| {
        let (heard, supervisor) = (heard_tx.clone(), start.supervisor());
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.unlink(supervisor);
            heard.send("unlinked").unwrap();
            wait_reporting_cancel(&cx, &heard).await
        })
    });
    let supervisor = run(Supervisor::one_for_one().child(spec).start(sched.handle())).unwrap();
    assert_eq!(heard.recv_timeout(GUARD), Ok("unlinked"));
    let down = sched.monitor(supervisor.pid());
    sched.terminate(supervisor.pid()).unwrap();
    run(down);
    shutdown_cancels_the_orphan(&sched, &heard);
}

#[test]
fn a_supervisor_asked_to_finish_while_a_child_supervisor_starts_stops_it_before_it_ends() {
    let sched = scheduler(3);
    // The pool's worker: its second start (the restarted pool's) waits on a gate.
    let (entered_tx, entered) = mpsc::channel();
    let (open, gate) = mpsc::channel::<()>();
    let (entered_tx, gate) = (Mutex::new(entered_tx), Arc::new(Mutex::new(gate)));
    let starts = Arc::new(Mutex::new(0));
    let worker = ChildSpec::new("worker", move |start| {
        let second = {
            let mut starts = starts.lock().unwrap();
            *starts += 1;
            *starts == 2
        };
        if second {
            entered_tx.lock().unwrap().send(()).unwrap();
            gate.lock().unwrap().recv().unwrap();
        }
        start.spawn_fn(puppet)
    });
    let pool = Supervisor::one_for_one().child(worker).into_child("pool");
    let root = run(Supervisor::one_for_one().child(pool).start(sched.handle())).unwrap();
    let first_pool = run(root.which_children()).unwrap()[0].pid.unwrap();
    let first_worker = run(SupervisorRef::from_pid(sched.handle(), first_pool).which_children());
    let first_worker_down = sched.monitor(first_worker.unwrap()[0].pid.unwrap());
    let root_down = sched.monitor(root.pid());
    sched.terminate(first_pool).unwrap();
    // The first pool's worker ends through its link, on its own time: before the check below.
    run(first_worker_down);
    // The root restarts the pool, which is inside its worker's start: ask the root to finish.
    entered.recv_timeout(GUARD).unwrap();
    sched.handle().cancel(root.pid()).unwrap();
    open.send(()).unwrap();
    assert!(run(root_down).reason.is_shutdown());
    // The root ended last: the pool it restarted, and its worker, had ended before it.
    assert_eq!(sched.live_processes(), 0);
    sched.shutdown(Duration::ZERO);
}
