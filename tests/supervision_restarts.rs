//! Restarts at their edges: a name still held by the instance a crash is ending, a child that
//! ends before its name is registered, and failed restarts retried behind a waiting request
//! under a `mailbox_capacity` — one fault costs one restart, every start that returned a PID started, and a
//! supervisor answers requests between its attempts (OTP's `try_again_restart`).

mod supervision_common;
mod support;

use procsched::error::SpawnError;
use procsched::prelude::*;
use procsched::supervision::{ChildSpec, Restart, Supervisor, SupervisorRef};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use supervision_common::*;

#[test]
fn killing_a_sub_supervisor_with_a_named_child_costs_its_parent_one_restart() {
    // The restarted sub-supervisor's child registers the name its predecessor, killed through
    // its link, may still hold: the start waits for it instead of failing (which would be
    // retried at once, each retry spending the parent's intensity, default 3 in 5 s).
    let sched = scheduler(2);
    let named = ChildSpec::new("x", |start| start.spawn_fn(puppet)).register_as("x");
    let sub = Supervisor::one_for_one().child(named).into_child("sub");
    // Room for the test's 20 kills, and for no more than one restart per kill.
    let root = Supervisor::one_for_one().max_restarts(20, Duration::from_secs(3600));
    let root = run(root.child(sub).start(sched.handle())).unwrap();
    for round in 1..=20u64 {
        let sub = run(root.which_children()).unwrap()[0].pid.unwrap();
        let old = sched.handle().whereis("x").unwrap();
        let sub_down = sched.monitor(sub);
        sched.terminate(sub).unwrap();
        run(sub_down);
        // The root has restarted the sub-supervisor (which started its child before it
        // could answer): its answer names the new one.
        let restarted = || {
            run(root.which_children()).unwrap()[0]
                .pid
                .filter(|&p| p != sub)
        };
        let mut new_sub = None;
        support::wait_until("the restarted sub-supervisor", || {
            new_sub = restarted();
            new_sub.is_some()
        });
        let new_sub = new_sub.unwrap();
        let grandchild = run(SupervisorRef::from_pid(sched.handle(), new_sub).which_children());
        let new = grandchild.unwrap()[0].pid.expect("started");
        assert_ne!(new, old);
        assert_eq!(sched.handle().whereis("x"), Some(new), "round {round}");
        assert_eq!(run(root.restarts()).unwrap(), round, "one restart per kill");
    }
    assert!(sched.state(root.pid()).is_some(), "the root lives");
    sched.shutdown(GUARD);
}

#[test]
fn a_named_child_that_ends_before_its_name_is_registered_has_started() {
    let sched = scheduler(2);
    let quick = ChildSpec::new("quick", |start| {
        let pid = start.spawn_fn(|_: ProcessCx<()>| async { Ok::<_, BoxError>(()) })?;
        // Returns once its instance has ended (a blocking factory makes the race certain).
        let down = futures::executor::block_on(start.scheduler().monitor(pid));
        assert!(down.reason.is_normal());
        Ok(pid)
    })
    .restart(Restart::Temporary)
    .register_as("quick");
    let supervisor = Supervisor::one_for_one().spawn(sched.handle()).unwrap();
    let started = run(supervisor.start_child(quick));
    assert!(started.is_ok(), "{started:?}");
    assert_eq!(sched.handle().whereis("quick"), None);
    // The temporary child's end is handled as any child's: forgotten. Its exit signal may
    // reach the supervisor after this request (monitors are signalled before links, and two
    // senders' messages have no order, as in OTP), so the test waits for it.
    support::wait_until("the temporary child forgotten", || {
        run(supervisor.which_children()).unwrap().is_empty()
    });
    sched.shutdown(GUARD);
}

#[test]
fn failed_restarts_behind_a_waiting_request_are_retried_between_requests() {
    // Capacity 1, and a request waiting while a restart fails: the retry is queued behind it
    // (a supervisor's mailbox is not bounded by the capacity), so the supervisor answers the
    // request between its attempts, never retrying in place — which answered nothing and, at
    // a high intensity, overflowed the worker's stack.
    let sched = Scheduler::builder()
        .workers(2)
        .mailbox_capacity(1)
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let (entered_tx, entered) = mpsc::channel();
    let (open, gate) = mpsc::channel::<()>();
    let (entered_tx, gate) = (Mutex::new(entered_tx), Mutex::new(gate));
    let counted = calls.clone();
    let failing = ChildSpec::new("w", move |start| {
        match counted.fetch_add(1, SeqCst) {
            0 => return start.spawn_fn(puppet),
            // The first restart waits until a request fills the mailbox.
            1 => {
                entered_tx.lock().unwrap().send(()).unwrap();
                gate.lock().unwrap().recv().unwrap();
            }
            _ => {}
        }
        Err(SpawnError::ShuttingDown)
    });
    const INTENSITY: u32 = 20_000;
    let supervisor = run(Supervisor::one_for_one()
        .max_restarts(INTENSITY, Duration::from_secs(3600))
        .child(failing)
        .start(sched.handle()))
    .unwrap();
    let child = run(supervisor.which_children()).unwrap()[0].pid.unwrap();
    let down = sched.monitor(supervisor.pid());
    sched.handle().addr(child).send(Cmd::Fail("crash")).unwrap();
    entered.recv_timeout(GUARD).unwrap();
    let asked = {
        let supervisor = supervisor.clone();
        std::thread::spawn(move || run(supervisor.restarts()))
    };
    while sched
        .process_info(supervisor.pid())
        .map_or(0, |info| info.mailbox_depth)
        < 1
    {
        std::thread::yield_now(); // until the request waits in the mailbox (hang: the guard)
    }
    open.send(()).unwrap();
    assert!(asked.join().unwrap().is_ok(), "the request was answered");
    assert!(
        run(down).reason.is_shutdown(),
        "it gave up at its intensity"
    );
    assert_eq!(
        calls.load(SeqCst),
        INTENSITY + 1,
        "the first start and every restart"
    );
    sched.shutdown(GUARD);
}
