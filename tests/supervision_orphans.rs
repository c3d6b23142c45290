//! A supervisor's end stops its children even when they trap exits (OTP's behaviours end on
//! their parent's `EXIT`): the child is asked to finish, its cleanup runs, and it ends with its
//! supervisor's reason — so a killed sub-supervisor's restart finds its child's name free once
//! that cleanup is over. A scheduler shutdown leaves a supervisor's children to their
//! supervisor, which stops them in reverse start order; a child that unlinked itself is nobody's
//! child any more: the shutdown cancels it like any other process. And a supervisor asked to
//! finish while a child supervisor starts stops that child before it ends (OTP: the start is
//! synchronous, the stop follows it). A child the factory spawned otherwise (a nested supervisor
//! started on its own) and linked to the supervisor is adopted: supervised the same way.

mod supervision_common;

use procsched::prelude::*;
use procsched::supervision::{ChildSpec, Incoming, Signal, Supervisor, SupervisorRef};
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
fn a_child_that_traps_exits_is_stopped_by_its_supervisor_s_end_and_ends_with_its_reason() {
    let sched = scheduler(2);
    let (heard_tx, heard) = mpsc::channel();
    let other = spawn_puppet(sched.handle());
    let other_pid = other.pid();
    let spec = ChildSpec::new("trapper", move |start| {
        let heard = heard_tx.clone();
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.trap_exit(true);
            cx.link(other_pid);
            heard.send("trapping".to_owned()).unwrap();
            loop {
                match cx.recv_any().await {
                    Ok(Incoming::Signal(Signal::Exit(exit))) => {
                        heard.send(format!("trapped {}", exit.reason)).unwrap();
                    }
                    Ok(_) => {}
                    // Its cleanup (OTP's `terminate/2`) runs.
                    Err(cancelled) => {
                        heard.send("cancelled".to_owned()).unwrap();
                        return Err::<(), BoxError>(cancelled.into());
                    }
                }
            }
        })
    });
    let supervisor = run(Supervisor::one_for_one().child(spec).start(sched.handle())).unwrap();
    assert_eq!(heard.recv_timeout(GUARD).unwrap(), "trapping");
    let child = run(supervisor.which_children()).unwrap()[0].pid.unwrap();
    // Another linked process's exit stays a trappable signal.
    other.addr().send(Cmd::Fail("other fails")).unwrap();
    assert!(heard.recv_timeout(GUARD).unwrap().starts_with("trapped"));
    // Its supervisor's does not: the child is asked to finish, and ends with that reason.
    let child_down = sched.monitor(child);
    sched.terminate(supervisor.pid()).unwrap();
    assert_eq!(heard.recv_timeout(GUARD).unwrap(), "cancelled");
    assert!(run(child_down).reason.is_killed());
    assert_eq!(sched.live_processes(), 0);
    sched.shutdown(GUARD);
}

#[test]
fn a_trapping_child_whose_cleanup_returns_ok_still_ends_with_its_supervisor_s_reason() {
    // OTP's behaviour exits with its parent's `Reason` after `terminate/2`, whatever that
    // returns: a body that handles the cancel and returns `Ok` is no exception.
    let sched = scheduler(2);
    let (heard_tx, heard) = mpsc::channel();
    let spec = ChildSpec::new("tidy", move |start| {
        let heard = heard_tx.clone();
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.trap_exit(true);
            heard.send("trapping").unwrap();
            while cx.recv_any().await.is_ok() {}
            heard.send("cleaned up").unwrap();
            Ok::<(), BoxError>(())
        })
    });
    let supervisor = run(Supervisor::one_for_one().child(spec).start(sched.handle())).unwrap();
    assert_eq!(heard.recv_timeout(GUARD).unwrap(), "trapping");
    let child = run(supervisor.which_children()).unwrap()[0].pid.unwrap();
    let child_down = sched.monitor(child);
    sched.terminate(supervisor.pid()).unwrap();
    assert_eq!(heard.recv_timeout(GUARD).unwrap(), "cleaned up");
    let down = run(child_down);
    assert!(down.reason.is_killed(), "{:?}", down.reason);
    sched.shutdown(GUARD);
}

#[test]
fn a_killed_sub_supervisor_s_restart_finds_its_trapping_child_s_name_free() {
    let sched = scheduler(2);
    let (heard_tx, heard) = mpsc::channel();
    // The first instance's cleanup waits for the test's go (an await, as a flush would).
    let (go_tx, go) = tokio::sync::oneshot::channel::<()>();
    let go = Arc::new(Mutex::new(Some(go)));
    let starts = Arc::new(Mutex::new(0));
    let worker = ChildSpec::new("w", move |start| {
        let (heard, go) = (heard_tx.clone(), Arc::clone(&go));
        let instance = {
            let mut starts = starts.lock().unwrap();
            *starts += 1;
            *starts
        };
        // Its name is free whenever an instance is made: the previous one has ended.
        let named = start.scheduler().whereis("w");
        heard
            .send(format!("start {instance}, named {named:?}"))
            .unwrap();
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.trap_exit(true);
            loop {
                if let Err(cancelled) = cx.recv_any().await {
                    let go = go.lock().unwrap().take();
                    if let Some(go) = go {
                        heard.send(format!("cleaning {instance}")).unwrap();
                        let _ = go.await;
                    }
                    return Err::<(), BoxError>(cancelled.into());
                }
            }
        })
    })
    .register_as("w");
    let sub = Supervisor::one_for_one().child(worker).into_child("sub");
    let root = run(Supervisor::one_for_one().child(sub).start(sched.handle())).unwrap();
    assert_eq!(heard.recv_timeout(GUARD).unwrap(), "start 1, named None");
    let first = sched.handle().whereis("w").unwrap();
    let first_down = sched.monitor(first);
    let first_sub = run(root.which_children()).unwrap()[0].pid.unwrap();
    sched.terminate(first_sub).unwrap();
    // The first instance cleans up while the root restarts the sub-supervisor, whose worker's
    // start finds the name still held: it waits for it before making the second instance.
    assert_eq!(heard.recv_timeout(GUARD).unwrap(), "cleaning 1");
    go_tx.send(()).unwrap();
    assert_eq!(heard.recv_timeout(GUARD).unwrap(), "start 2, named None");
    assert!(run(first_down).reason.is_killed());
    let children = run(root.which_children()).unwrap();
    assert!(children[0].pid.is_some_and(|pid| pid != first_sub));
    assert_eq!(run(root.restarts()).unwrap(), 1);
    let second = sched.handle().whereis("w").unwrap();
    assert_ne!(second, first);
    let second_sub = SupervisorRef::from_pid(sched.handle(), children[0].pid.unwrap());
    assert_eq!(
        run(second_sub.which_children()).unwrap()[0].pid,
        Some(second)
    );
    sched.shutdown(GUARD);
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

/// A child that traps exits, says `"trapping"` on `heard` once it does, and `"cancelled"` when
/// a cancel ends its wait.
fn trapping_child(id: &'static str, heard: mpsc::Sender<&'static str>) -> ChildSpec {
    ChildSpec::new(id, move |start| {
        let heard = heard.clone();
        start.spawn_fn(move |cx: ProcessCx<()>| async move {
            cx.trap_exit(true);
            heard.send("trapping").unwrap();
            loop {
                if let Err(cancelled) = cx.recv_any().await {
                    heard.send("cancelled").unwrap();
                    return Err::<(), BoxError>(cancelled.into());
                }
            }
        })
    })
}

/// A factory that spawns its child otherwise than through `Start` — a nested supervisor
/// started with `Supervisor::spawn` — and links it to the supervisor: the child is adopted,
/// supervised as a `Start` spawn would be.
fn adopted_sub_supervisor(heard: mpsc::Sender<&'static str>) -> ChildSpec {
    ChildSpec::new("adopted", move |start| {
        let heard = heard.clone();
        let trapper = trapping_child("trapper", heard.clone());
        let inner = Supervisor::one_for_one()
            .child(trapper)
            .spawn(start.scheduler())?;
        start
            .scheduler()
            .link(inner.pid(), start.supervisor())
            .map_err(|gone| {
                SpawnError::Init(procsched::error::InitError::failed(gone.to_string()))
            })?;
        Ok(inner.pid())
    })
}

#[test]
fn a_nested_supervisor_the_factory_linked_itself_ends_with_its_killed_parent() {
    let sched = scheduler(2);
    let (heard_tx, heard) = mpsc::channel();
    let root = Supervisor::one_for_one().child(adopted_sub_supervisor(heard_tx));
    let root = run(root.start(sched.handle())).unwrap();
    assert_eq!(heard.recv_timeout(GUARD), Ok("trapping"));
    let inner = run(root.which_children()).unwrap()[0].pid.unwrap();
    let inner_down = sched.monitor(inner);
    sched.terminate(root.pid()).unwrap();
    // The adopted supervisor traps exits, yet its parent's end stops it, and it its child.
    assert_eq!(heard.recv_timeout(GUARD), Ok("cancelled"));
    assert!(run(inner_down).reason.is_killed());
    assert_eq!(sched.live_processes(), 0);
    sched.shutdown(GUARD);
}

#[test]
fn a_scheduler_shutdown_leaves_an_adopted_child_to_its_supervisor_s_stop_order() {
    let sched = scheduler(2);
    let (heard_tx, heard) = mpsc::channel();
    let (order_tx, order) = mpsc::channel();
    let reporting = |id: &'static str| {
        let order = order_tx.clone();
        ChildSpec::new(id, move |start| {
            let order = order.clone();
            start.spawn_fn(move |cx: ProcessCx<()>| async move {
                let end = cx.recv().await;
                order.send(id).unwrap();
                end.map_err(BoxError::from)
            })
        })
    };
    let root = Supervisor::one_for_one()
        .child(reporting("first"))
        .child(adopted_sub_supervisor(heard_tx))
        .child(reporting("last"));
    let root = run(root.start(sched.handle())).unwrap();
    assert_eq!(heard.recv_timeout(GUARD), Ok("trapping"));
    let report = sched.shutdown(GUARD);
    assert_eq!(report.forced, 0, "{report:?}");
    // Reverse start order: the adopted subtree is stopped between its siblings, by the root.
    assert_eq!(order.recv_timeout(GUARD), Ok("last"));
    assert_eq!(heard.recv_timeout(GUARD), Ok("cancelled"));
    assert_eq!(order.recv_timeout(GUARD), Ok("first"));
    drop(root);
}

#[test]
fn a_factory_that_links_another_supervisor_s_child_does_not_take_it_from_that_supervisor() {
    let sched = scheduler(2);
    let (heard_tx, heard) = mpsc::channel();
    let trapper = trapping_child("p", heard_tx).register_as("p");
    let first = run(Supervisor::one_for_one()
        .child(trapper)
        .start(sched.handle()))
    .unwrap();
    assert_eq!(heard.recv_timeout(GUARD), Ok("trapping"));
    // A second supervisor whose factory returns `first`'s child, linked to itself.
    let borrowing = ChildSpec::new("borrowed", |start| {
        let p = start.scheduler().whereis("p").expect("p runs");
        start
            .scheduler()
            .link(p, start.supervisor())
            .map_err(|gone| {
                SpawnError::Init(procsched::error::InitError::failed(gone.to_string()))
            })?;
        Ok(p)
    });
    let _second = run(Supervisor::one_for_one()
        .child(borrowing)
        .start(sched.handle()))
    .unwrap();
    // `first` still owns it: its end stops the child, trapping as it is.
    let p = sched.handle().whereis("p").unwrap();
    let p_down = sched.monitor(p);
    sched.terminate(first.pid()).unwrap();
    assert_eq!(heard.recv_timeout(GUARD), Ok("cancelled"));
    assert!(run(p_down).reason.is_killed());
    sched.shutdown(GUARD);
}
